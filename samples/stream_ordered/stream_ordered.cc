// stream_ordered: the stream-ordered allocator (what PyTorch's `backend:cudaMallocAsync` uses).
//
// Allocations and frees are enqueued on a stream, from the device's default pool and from a pool
// the program creates. One cudaMallocAsync is never freed (the planted leak): the pool keeps it
// for the whole run. Known answer: expected.txt next to this.
#include <cuda_runtime_api.h>

#include <cstdio>

#include "common/check.h"

using samples::kMiB;

constexpr int kSteps = 8;

__attribute__((noinline)) void run_on_stream(cudaStream_t stream) {
  // Default pool: one short-lived buffer per step.
  for (int step = 0; step < kSteps; ++step) {
    void* scratch = nullptr;
    CHECK(cudaMallocAsync(&scratch, 4 * kMiB, stream));
    CHECK(cudaFreeAsync(scratch, stream));
  }
  void* forgotten = nullptr;  // the leak: never cudaFreeAsync'd
  CHECK(cudaMallocAsync(&forgotten, 6 * kMiB, stream));

  // A pool of our own, as libraries that want their own release threshold create.
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  CHECK(cudaMemPoolCreate(&pool, &props));
  void* buffers[3] = {};
  for (void*& buffer : buffers) CHECK(cudaMallocFromPoolAsync(&buffer, 8 * kMiB, pool, stream));
  for (void* buffer : buffers) CHECK(cudaFreeAsync(buffer, stream));

  CHECK(cudaStreamSynchronize(stream));  // the frees above complete here
  CHECK(cudaMemPoolDestroy(pool));
}

int main() {
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreate(&stream));
  run_on_stream(stream);
  CHECK(cudaStreamDestroy(stream));
  std::printf("stream_ordered: done, one 6 MiB cudaMallocAsync left unfreed\n");
  return 0;
}
