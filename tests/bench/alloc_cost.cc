// The program the allocation-cost benchmark times: allocation/free pairs made from 30 frames deep
// (a typical PyTorch allocation stack), each call timed on its own. Prints the median nanoseconds
// per allocation and per free; run_alloc_cost.sh compares runs with and without gpumem.
// Mode `sync` uses cudaMalloc/cudaFree; `async` uses cudaMallocAsync/cudaFreeAsync, which a real
// driver serves from its pool in well under a microsecond, so recording cost is not lost in the
// tens of microseconds a real cudaMalloc takes.
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t Median(std::vector<uint64_t>& values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

bool g_async = false;
cudaStream_t g_stream = nullptr;

cudaError_t Allocate(void** buffer, size_t size) {
  return g_async ? cudaMallocAsync(buffer, size, g_stream) : cudaMalloc(buffer, size);
}
cudaError_t Free(void* buffer) {
  return g_async ? cudaFreeAsync(buffer, g_stream) : cudaFree(buffer);
}

__attribute__((noinline)) int MeasureAtDepth(int depth, int pairs, size_t size) {
  if (depth > 1) {
    int result = MeasureAtDepth(depth - 1, pairs, size);
    asm volatile("" ::: "memory");  // keep the recursion a real call chain
    return result;
  }
  std::vector<uint64_t> alloc_ns(pairs), free_ns(pairs);
  std::vector<void*> buffers(64);
  for (int i = 0; i < pairs; ++i) {
    void*& buffer = buffers[i % buffers.size()];
    uint64_t start = NowNs();
    if (Allocate(&buffer, size) != cudaSuccess) return 1;
    uint64_t middle = NowNs();
    if (Free(buffer) != cudaSuccess) return 1;
    uint64_t end = NowNs();
    alloc_ns[i] = middle - start;
    free_ns[i] = end - middle;
  }
  printf("alloc_ns=%llu free_ns=%llu\n", static_cast<unsigned long long>(Median(alloc_ns)),
         static_cast<unsigned long long>(Median(free_ns)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int pairs = argc > 1 ? atoi(argv[1]) : 20000;
  g_async = argc > 2 && strcmp(argv[2], "async") == 0;
  size_t size = argc > 3 ? strtoull(argv[3], nullptr, 10) : 1 << 20;
  // Context and stream are created outside the timing.
  if (cudaFree(nullptr) != cudaSuccess || cudaStreamCreate(&g_stream) != cudaSuccess) return 1;
  // 30 frames between main and the CUDA call: 28 of MeasureAtDepth, main, and libc's start.
  return MeasureAtDepth(28, pairs, size);
}
