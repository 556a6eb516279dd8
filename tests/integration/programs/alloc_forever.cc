// Allocates and frees forever, printing how many pairs completed, so a test can kill -9 it at a
// random point and check that every pair it reported is in the trace.
#include <cuda_runtime_api.h>
#include <stdio.h>

int main() {
  for (long pair = 1;; ++pair) {
    void* buffer = nullptr;
    if (cudaMalloc(&buffer, 4096) != cudaSuccess || cudaFree(buffer) != cudaSuccess) return 1;
    printf("%ld\n", pair);
    fflush(stdout);
  }
}
