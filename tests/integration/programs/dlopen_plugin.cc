// Loaded and unloaded at run time by dlopen_main: its allocation's stack points into a module
// that is gone by the end of the run.
#include <cuda_runtime_api.h>

extern "C" __attribute__((noinline)) void* plugin_allocate(size_t size) {
  void* buffer = nullptr;
  return cudaMalloc(&buffer, size) == cudaSuccess ? buffer : nullptr;
}
