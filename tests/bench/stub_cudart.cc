// A libcudart.so.13 whose allocation calls do nothing: under it, hook_cost measures what gpumem
// itself adds to a call, free of any driver's cost and noise.
#include <cstddef>

extern "C" {
typedef int cudaError_t;
typedef void* cudaStream_t;

__attribute__((visibility("default"))) cudaError_t cudaMallocAsync(void** pointer, size_t,
                                                                   cudaStream_t) {
  static char arena[64];
  *pointer = arena;
  return 0;
}
__attribute__((visibility("default"))) cudaError_t cudaFreeAsync(void*, cudaStream_t) { return 0; }
}
