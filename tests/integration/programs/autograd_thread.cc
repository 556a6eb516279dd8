// A shared library a test script loads through ctypes
// (tests/integration/programs/framework_oom.py): the CUDA work of PyTorch's autograd engine, on a
// native thread named as PyTorch names its device threads, whose stacks have no Python frames; and
// PyTorch's start-up probe for fabric handles under expandable segments, which the driver refuses
// with error 800.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

#include <cstddef>
#include <thread>

extern "C" {

// Allocates `count` buffers of `size` bytes (kept: never freed) on a thread named pt_autograd_0;
// returns the number that succeeded.
__attribute__((visibility("default"))) int gpumem_test_autograd_thread(size_t size, int count) {
  int allocated = 0;
  std::thread engine([&] {
    pthread_setname_np(pthread_self(), "pt_autograd_0");
    for (int i = 0; i < count; ++i) {
      void* pointer = nullptr;
      if (cudaMalloc(&pointer, size) == cudaSuccess) ++allocated;
    }
  });
  engine.join();
  return allocated;
}

// cuMemCreate of `size` bytes with a fabric handle, reached as PyTorch reaches the driver (through
// the runtime's entry points): what it returned.
__attribute__((visibility("default"))) int gpumem_test_probe_fabric(size_t size) {
  if (cudaFree(nullptr) != cudaSuccess) return -1;  // the runtime's context, as PyTorch's lazy init
  PFN_cuMemCreate_v10020 create = nullptr;
  cudaDriverEntryPointQueryResult status;
  if (cudaGetDriverEntryPointByVersion("cuMemCreate", reinterpret_cast<void**>(&create), 12000,
                                       cudaEnableDefault, &status) != cudaSuccess ||
      create == nullptr) {
    return -1;
  }
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
  CUmemGenericAllocationHandle handle = 0;
  return static_cast<int>(create(&handle, size, &prop, 0));
}

}  // extern "C"
