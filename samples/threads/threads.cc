// threads: allocations from 8 threads at once.
//
// A recorder with per-thread buffers must keep every event, attribute it to the right thread and
// order events across threads. A barrier releases all threads together so their calls overlap.
// Thread i allocates and frees (i + 1) MiB, kPairs times. Known answer: expected.txt next to this.
#include <cuda_runtime_api.h>

#include <barrier>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "common/check.h"

constexpr int kThreads = 8;
constexpr int kPairs = 25;

__attribute__((noinline)) void thread_worker(int index, std::barrier<>& start) {
  const size_t bytes = static_cast<size_t>(index + 1) * samples::kMiB;
  start.arrive_and_wait();
  for (int i = 0; i < kPairs; ++i) {
    void* buffer = nullptr;
    CHECK(cudaMalloc(&buffer, bytes));
    CHECK(cudaFree(buffer));
  }
}

int main() {
  // Create the context before the threads race to do it. Freeing nullptr is a no-op and is not
  // recorded as a free.
  CHECK(cudaFree(nullptr));

  std::barrier<> start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(thread_worker, i, std::ref(start));
  for (std::thread& thread : threads) thread.join();
  std::printf("threads: %d threads x %d allocate/free pairs\n", kThreads, kPairs);
  return 0;
}
