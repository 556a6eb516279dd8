// leak_loop: memory that grows every iteration because results are kept "for later".
//
// The C++ twin of PyTorch's `losses.append(loss)` / `tensor_list.append(t)` mistake: each
// iteration allocates a working buffer (freed) and an activation that is pushed into a vector that
// lives for the whole run. Device memory grows by kActivationBytes per iteration and is never
// released. Known answer: samples/leak_loop/expected.txt.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

#include "common/check.h"

constexpr int kIterations = 10;
constexpr size_t kWorkBytes = 16 * samples::kMiB;
constexpr size_t kActivationBytes = 4 * samples::kMiB;

// Kept forever: the leak.
std::vector<void*> g_history;

// One training-like iteration. noinline + extern linkage so the profiler's stack names it.
__attribute__((noinline)) void leak_iteration() {
  void* work = nullptr;
  CHECK(cudaMalloc(&work, kWorkBytes));
  void* activation = nullptr;
  CHECK(cudaMalloc(&activation, kActivationBytes));
  g_history.push_back(activation);  // the bug: nothing ever frees what the history holds
  CHECK(cudaFree(work));
}

int main() {
  for (int i = 0; i < kIterations; ++i) leak_iteration();
  std::printf("leak_loop: %d iterations, %zu activations of %zu bytes still held\n", kIterations,
              g_history.size(), kActivationBytes);
  return 0;
}
