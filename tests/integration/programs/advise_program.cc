// A training loop in plain CUDA for `gpumem advise` (advise_test): `advise_program [--batch N]
// [--steps S]`. Sizes in advise_program.h.
//   - weights, allocated once and read by a kernel every step;
//   - an idle buffer, filled by a kernel once before the loop and never used again, but freed only
//     at exit (its line marked idle);
//   - per step: two activations sized constant + per_sample x N, each received by a kernel and
//     freed at the step's end, and a growing buffer, filled once and kept in a list until exit
//     (its line marked growing).
// Kernels come from a PTX module (fill_add_ptx.h), so that the recorder reads which buffers each
// launch received. Any failing CUDA call ends the program with a message and exit status 1.
#include "tests/integration/programs/advise_program.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tests/integration/programs/fill_add_kernels.h"

namespace {

using advise_program::FirstActivationBytes;
using advise_program::SecondActivationBytes;

void Check(int code, const char* call, int line) {
  if (code != 0) {
    fprintf(stderr, "advise_program.cc:%d: %s failed with error %d\n", line, call, code);
    exit(1);
  }
}
#define CHECK(call) Check(static_cast<int>(call), #call, __LINE__)

struct Options {
  int64_t batch = advise_program::kDefaultBatch;
  int steps = advise_program::kDefaultSteps;
};

Options ParseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const long long value = strtoll(argv[i + 1], nullptr, 10);
    if (strcmp(argv[i], "--batch") == 0 && value > 0) {
      options.batch = value;
    } else if (strcmp(argv[i], "--steps") == 0 && value > 0) {
      options.steps = static_cast<int>(value);
    } else {
      fprintf(stderr, "usage: advise_program [--batch N] [--steps S]\n");
      exit(2);
    }
  }
  return options;
}

// One step: the activations and the growing buffer allocated, then the kernels that use them (so
// that the step's peak, at the growing buffer's allocation, comes before its launches).
void Step(const FillAddKernels& kernels, int64_t batch, void* weights,
          std::vector<void*>* history) {
  void* first = nullptr;
  void* second = nullptr;
  void* growing = nullptr;
  CHECK(cudaMalloc(&first, FirstActivationBytes(batch)));
  CHECK(cudaMalloc(&second, SecondActivationBytes(batch)));
  CHECK(cudaMalloc(&growing, advise_program::kGrowingBytes));  // line: growing
  CHECK(LaunchAdd(kernels, weights, first, second));
  CHECK(LaunchFill(kernels, growing));
  history->push_back(growing);
  CHECK(cudaFree(second));
  CHECK(cudaFree(first));
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));  // creates the primary context and makes it current for the driver
  FillAddKernels kernels;
  CHECK(LoadFillAdd(&kernels));

  void* weights = nullptr;
  void* idle = nullptr;
  CHECK(cudaMalloc(&weights, advise_program::kWeightsBytes));
  CHECK(LaunchFill(kernels, weights));
  CHECK(cudaMalloc(&idle, advise_program::kIdleBytes));  // line: idle
  CHECK(LaunchFill(kernels, idle));

  std::vector<void*> history;
  for (int step = 0; step < options.steps; ++step) Step(kernels, options.batch, weights, &history);
  CHECK(cudaDeviceSynchronize());

  for (void* growing : history) CHECK(cudaFree(growing));
  CHECK(cudaFree(idle));
  CHECK(cudaFree(weights));
  CHECK(cuModuleUnload(kernels.module));
  printf("advise_program: batch %lld, %d steps\n", static_cast<long long>(options.batch),
         options.steps);
  return 0;
}
