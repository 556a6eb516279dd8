// libfake_autograd_engine.so: the native side of PyTorch that test scripts need (the fake torch,
// fake_torch/torch/autograd.py; framework_oom.py). PyTorch allocates a backward pass's gradients
// on its autograd device threads (named pt_autograd_<device>), which run no Python: here a native
// thread of that name makes the cudaMalloc calls, so that their stacks carry no Python frames
// either. And PyTorch's start-up probe for fabric handles under expandable segments, which the
// driver refuses with error 800.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <sys/prctl.h>

#include <cstddef>
#include <thread>

// Allocates sizes[0..count) into pointers[0..count) on a new thread named pt_autograd_0; returns
// 0, or the first CUDA error.
extern "C" __attribute__((visibility("default"))) int fake_engine_allocate(const size_t* sizes,
                                                                           void** pointers,
                                                                           int count) {
  int result = 0;
  std::thread worker([&] {
    prctl(PR_SET_NAME, "pt_autograd_0");
    for (int i = 0; i < count && result == 0; ++i) result = cudaMalloc(&pointers[i], sizes[i]);
  });
  worker.join();
  return result;
}

// cuMemCreate of `size` bytes with a fabric handle, reached as PyTorch reaches the driver (through
// the runtime's entry points): what it returned.
extern "C" __attribute__((visibility("default"))) int fake_engine_probe_fabric(size_t size) {
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
