// peak_temporary: a short-lived temporary that sets the peak.
//
// Steady state is under 100 MiB, but for a moment make_temporary() holds 512 MiB on top of it: the
// peak (592 MiB) is set by a buffer that is gone by the end, which is what a peak report must show
// (an end-of-run snapshot or a leak check never sees it). Known answer: expected.txt next to this.
#include <cuda_runtime_api.h>

#include <cstdio>

#include "common/check.h"

using samples::kMiB;

// The culprit: e.g. a concatenation or an unfused attention matrix built and dropped at once.
__attribute__((noinline)) void make_temporary() {
  void* temporary = nullptr;
  CHECK(cudaMalloc(&temporary, 512 * kMiB));
  CHECK(cudaFree(temporary));
}

__attribute__((noinline)) void run_step() {
  void* weights = nullptr;
  void* activation1 = nullptr;
  void* activation2 = nullptr;
  CHECK(cudaMalloc(&weights, 64 * kMiB));
  CHECK(cudaMalloc(&activation1, 16 * kMiB));
  make_temporary();  // peak here: 64 + 16 + 512 = 592 MiB
  CHECK(cudaMalloc(&activation2, 16 * kMiB));
  CHECK(cudaFree(activation1));
  CHECK(cudaFree(activation2));
  CHECK(cudaFree(weights));
}

int main() {
  run_step();
  std::printf("peak_temporary: peak 592 MiB, set by a 512 MiB temporary in make_temporary\n");
  return 0;
}
