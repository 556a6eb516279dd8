// What gpumem adds to one allocation (30 frames deep, with its stack) and to one free, measured
// against stub_cudart (calls that do nothing). Prints ns per call; run_hook_cost.sh compares runs
// with and without gpumem. Unlike alloc_cost, no driver time or noise is in the numbers.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cstddef>
#include <cstdint>

extern "C" {
int cudaMallocAsync(void** pointer, size_t size, void* stream);
int cudaFreeAsync(void* pointer, void* stream);
}

namespace {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

__attribute__((noinline)) void MeasureAtDepth(int depth, int calls) {
  if (depth > 1) {
    MeasureAtDepth(depth - 1, calls);
    asm volatile("" ::: "memory");  // keep the recursion a real call chain
    return;
  }
  void* pointer = nullptr;
  uint64_t start = NowNs();
  for (int i = 0; i < calls; ++i) cudaMallocAsync(&pointer, 4096, nullptr);
  uint64_t middle = NowNs();
  // Distinct addresses, as real frees have.
  for (int i = 0; i < calls; ++i) cudaFreeAsync(reinterpret_cast<void*>(0x10000 + i * 64ull), nullptr);
  uint64_t end = NowNs();
  printf("alloc_ns=%.1f free_ns=%.1f\n", static_cast<double>(middle - start) / calls,
         static_cast<double>(end - middle) / calls);
}

}  // namespace

int main(int argc, char** argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 200000;
  MeasureAtDepth(28, calls);  // + main and libc's start: 30 frames
  return 0;
}
