// graph_capture: a step captured into a CUDA graph and replayed, once in each capture mode.
//
// Each capture holds two stream-ordered allocations: a scratch buffer freed inside the graph, and
// an output the graph keeps, freed after the last replay (as PyTorch frees a captured tensor). The
// relaxed capture also allocates a segment with cudaMalloc, which only that mode allows (PyTorch's
// private graph pools do the same). Everything is freed. Known answer: expected.txt next to this.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <initializer_list>

#include "common/check.h"

using samples::kMiB;

constexpr int kReplays = 10;

__attribute__((noinline)) void capture_step(cudaStream_t stream, cudaStreamCaptureMode mode,
                                            cudaGraph_t* graph, void** output, void** segment) {
  CHECK(cudaStreamBeginCapture(stream, mode));
  void* scratch = nullptr;
  CHECK(cudaMallocAsync(&scratch, 4 * kMiB, stream));
  CHECK(cudaMemsetAsync(scratch, 1, 4 * kMiB, stream));
  CHECK(cudaMallocAsync(output, 2 * kMiB, stream));
  CHECK(cudaMemsetAsync(*output, 2, 2 * kMiB, stream));
  CHECK(cudaFreeAsync(scratch, stream));
  if (mode == cudaStreamCaptureModeRelaxed) CHECK(cudaMalloc(segment, 1 * kMiB));
  CHECK(cudaStreamEndCapture(stream, graph));
}

int main() {
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (cudaStreamCaptureMode mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                     cudaStreamCaptureModeRelaxed}) {
    cudaGraph_t graph = nullptr;
    void* output = nullptr;
    void* segment = nullptr;
    capture_step(stream, mode, &graph, &output, &segment);
    cudaGraphExec_t exec = nullptr;
    // Each replay frees the output of the one before (the graph's allocation is still live).
    CHECK(cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    for (int replay = 0; replay < kReplays; ++replay) CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaFreeAsync(output, stream));
    CHECK(cudaStreamSynchronize(stream));
    if (segment != nullptr) CHECK(cudaFree(segment));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
  }
  CHECK(cudaStreamDestroy(stream));
  std::printf("graph_capture: 3 graphs captured and replayed %d times each\n", kReplays);
  return 0;
}
