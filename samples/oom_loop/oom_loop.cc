// oom_loop: a program that allocates until the device is full.
//
// Chunks of total/8 (total from cudaMemGetInfo) are allocated until cudaMalloc fails. Since the
// context and driver always hold some memory, free < total, so exactly 7 chunks fit and the 8th
// fails with cudaErrorMemoryAllocation, on any otherwise idle GPU and on the fake. An OOM
// post-mortem should name the failed request and the 7 live chunks. The program then cleans up
// and exits 0. Known answer: expected.txt next to this.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

#include "common/check.h"

constexpr int kMaxChunks = 16;  // a bound in case the device reports nonsense

__attribute__((noinline)) std::vector<void*> allocate_until_oom(size_t chunk) {
  std::vector<void*> chunks;
  for (int i = 0; i < kMaxChunks; ++i) {
    void* p = nullptr;
    cudaError_t result = cudaMalloc(&p, chunk);
    if (result == cudaErrorMemoryAllocation) return chunks;
    CHECK(result);  // any other failure is unexpected
    chunks.push_back(p);
  }
  std::fprintf(stderr, "oom_loop: %d chunks of %zu bytes and still no OOM\n", kMaxChunks, chunk);
  std::exit(1);
}

int main() {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t chunk = total_bytes / 8;

  std::vector<void*> chunks = allocate_until_oom(chunk);
  std::printf("oom_loop: total %zu, free %zu; %zu chunks of %zu bytes fit, chunk %zu failed\n",
              total_bytes, free_bytes, chunks.size(), chunk, chunks.size() + 1);
  for (void* p : chunks) CHECK(cudaFree(p));

  // A failed cudaMalloc leaves its error as the "last error"; read it so it cannot be mistaken for
  // a later failure. The second read must be clean.
  cudaError_t last = cudaGetLastError();
  if (last != cudaErrorMemoryAllocation && last != cudaSuccess) CHECK(last);
  CHECK(cudaGetLastError());
  if (chunks.size() != 7) {
    std::fprintf(stderr,
                 "oom_loop: expected 7 chunks to fit (is another process using the GPU?)\n");
    return 1;
  }
  return 0;
}
