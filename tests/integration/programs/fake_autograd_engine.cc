// libfake_autograd_engine.so: the "engine" of the fake torch (fake_torch/torch/autograd.py).
// PyTorch allocates a backward pass's gradients on its autograd device threads (named
// pt_autograd_<device>), which run no Python: here a native thread of that name makes the
// cudaMalloc calls, so that their stacks carry no Python frames either.
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
