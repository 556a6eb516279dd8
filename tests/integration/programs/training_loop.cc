// A training loop as the GPU sees one: `training_loop [STEPS]` (default 1000) repeats the same
// allocations, launches and frees every step, from the same call sites, with the same sizes (and,
// freed in reverse, mostly at the same addresses). Weights allocated once, read by every step,
// freed at the end; one buffer per 100 steps kept until exit (leaked on purpose at the end: the
// report's leaks). Kernels from a PTX module (fill_add_ptx.h), so launches carry pointers. With
// `--shifting` (second argument) it behaves like a pooling allocator (cudaMallocAsync) instead: a
// buffer of a size that changes each step, kept for two steps, shifts every other buffer's
// address from step to step, so allocations and launches differ only in their addresses. Any
// failing CUDA call ends the program with a message and exit status 1.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

#include "tests/integration/programs/fill_add_kernels.h"

namespace {

void Check(int code, const char* call, int line) {
  if (code != 0) {
    fprintf(stderr, "training_loop.cc:%d: %s failed with error %d\n", line, call, code);
    exit(1);
  }
}
#define CHECK(call) Check(static_cast<int>(call), #call, __LINE__)

constexpr size_t kMiB = size_t{1} << 20;

void Step(const FillAddKernels& kernels, void* weights) {
  void* input = nullptr;
  void* hidden = nullptr;
  void* output = nullptr;
  CHECK(cudaMalloc(&input, 1 * kMiB));
  CHECK(cudaMalloc(&hidden, 2 * kMiB));
  CHECK(cudaMalloc(&output, kMiB / 2));
  CHECK(LaunchFill(kernels, input));
  CHECK(LaunchAdd(kernels, weights, input, hidden));
  CHECK(LaunchAdd(kernels, hidden, input, output));
  CHECK(cudaFree(output));
  CHECK(cudaFree(hidden));
  CHECK(cudaFree(input));
}

}  // namespace

// --shifting: a buffer of a pseudo-random 1-64 x 64 KiB per step, freed two steps later, so the
// step's other buffers land elsewhere each time (an allocation's address rarely repeats).
void Shift(uint32_t* random, std::deque<void*>* held) {
  *random = *random * 1664525u + 1013904223u;
  void* shift = nullptr;
  CHECK(cudaMalloc(&shift, static_cast<size_t>(*random >> 26 & 63) * 64 * 1024 + 64 * 1024));
  held->push_back(shift);
  if (held->size() > 2) {
    CHECK(cudaFree(held->front()));
    held->pop_front();
  }
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 1000;
  const bool shifting = argc > 2 && strcmp(argv[2], "--shifting") == 0;
  std::deque<void*> shifts;
  uint32_t random = 1;
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));  // creates the primary context and makes it current for the driver
  FillAddKernels kernels;
  CHECK(LoadFillAdd(&kernels));
  void* weights = nullptr;
  CHECK(cudaMalloc(&weights, 8 * kMiB));
  CHECK(LaunchFill(kernels, weights));
  std::vector<void*> kept;
  for (int step = 0; step < steps; ++step) {
    if (shifting) Shift(&random, &shifts);
    Step(kernels, weights);
    if (step % 100 == 99) {
      void* checkpoint = nullptr;
      CHECK(cudaMalloc(&checkpoint, kMiB));  // line: kept
      kept.push_back(checkpoint);
    }
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(weights));
  for (void* shift : shifts) CHECK(cudaFree(shift));
  printf("training_loop: %d steps, %zu buffers kept\n", steps, kept.size());
  return 0;  // `kept` is never freed: the report's leaks
}
