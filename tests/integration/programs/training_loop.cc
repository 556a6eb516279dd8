// A training loop as the GPU sees one: `training_loop [STEPS]` (default 1000) repeats the same
// allocations, launches and frees every step, from the same call sites, with the same sizes (and,
// freed in reverse, mostly at the same addresses). Weights allocated once, read by every step,
// freed at the end; one buffer per 100 steps kept until exit (leaked on purpose at the end: the
// report's leaks). Kernels from a PTX module (fill_add_ptx.h), so launches carry pointers. Any
// failing CUDA call ends the program with a message and exit status 1.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tests/integration/programs/fill_add_ptx.h"

namespace {

void Check(int code, const char* call, int line) {
  if (code != 0) {
    fprintf(stderr, "training_loop.cc:%d: %s failed with error %d\n", line, call, code);
    exit(1);
  }
}
#define CHECK(call) Check(static_cast<int>(call), #call, __LINE__)

constexpr unsigned kElements = 1024;
constexpr size_t kMiB = size_t{1} << 20;

struct Kernels {
  CUfunction fill = nullptr;
  CUfunction add = nullptr;
};

void Fill(const Kernels& kernels, void* buffer) {
  unsigned n = kElements;
  float value = 1.0f;
  void* args[] = {&buffer, &n, &value};
  CHECK(cuLaunchKernel(kernels.fill, 4, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
}

void Add(const Kernels& kernels, void* a, void* b, void* out) {
  unsigned n = kElements;
  void* args[] = {&a, &b, &out, &n};
  CHECK(cuLaunchKernel(kernels.add, kElements / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
}

void Step(const Kernels& kernels, void* weights) {
  void* input = nullptr;
  void* hidden = nullptr;
  void* output = nullptr;
  CHECK(cudaMalloc(&input, 1 * kMiB));
  CHECK(cudaMalloc(&hidden, 2 * kMiB));
  CHECK(cudaMalloc(&output, kMiB / 2));
  Fill(kernels, input);
  Add(kernels, weights, input, hidden);
  Add(kernels, hidden, input, output);
  CHECK(cudaFree(output));
  CHECK(cudaFree(hidden));
  CHECK(cudaFree(input));
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 1000;
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));  // creates the primary context and makes it current for the driver
  CUmodule module = nullptr;
  Kernels kernels;
  CHECK(cuModuleLoadData(&module, kFillAddPtx));
  CHECK(cuModuleGetFunction(&kernels.fill, module, "fill"));
  CHECK(cuModuleGetFunction(&kernels.add, module, "add"));
  void* weights = nullptr;
  CHECK(cudaMalloc(&weights, 8 * kMiB));
  Fill(kernels, weights);
  std::vector<void*> kept;
  for (int step = 0; step < steps; ++step) {
    Step(kernels, weights);
    if (step % 100 == 99) {
      void* checkpoint = nullptr;
      CHECK(cudaMalloc(&checkpoint, kMiB));  // line: kept
      kept.push_back(checkpoint);
    }
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(weights));
  printf("training_loop: %d steps, %zu buffers kept\n", steps, kept.size());
  return 0;  // `kept` is never freed: the report's leaks
}
