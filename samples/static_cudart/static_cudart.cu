// static_cudart: a CUDA program built the way nvcc builds by default, with the runtime linked in
// statically (GPU only: the fake CUDA cannot stand in for a runtime that is part of the program).
//
// There is no libcudart.so to interpose on: every cudaMalloc, cudaFree, cudaMallocAsync,
// cudaFreeAsync and kernel launch reaches the driver through the cuGetProcAddress chain and is
// recorded as the driver call (cuMemAlloc, cuMemFree, cuMemAllocAsync, cuMemFreeAsync,
// cuLaunchKernel). Counts are exact: 12 + 6 + 200 + 200 + 1000 launches.
// Known answer: expected.txt next to this.
#include <cuda_runtime.h>

#include <cstdio>

#include "common/check.h"

using samples::kKiB;
using samples::kMiB;

constexpr int kBlocks = 4;
constexpr int kThreadsPerBlock = 128;
constexpr int kElements = kBlocks * kThreadsPerBlock;
constexpr int kLaunches = 1000;
constexpr int kAsyncPairs = 200;

__global__ void increment(int* counters) { counters[blockIdx.x * blockDim.x + threadIdx.x] += 1; }

__attribute__((noinline)) void run_workload() {
  // 12 buffers of 1..12 MiB; the first 6 are freed, the last 6 are leaked.
  void* buffers[12] = {};
  for (int i = 0; i < 12; ++i) CHECK(cudaMalloc(&buffers[i], (i + 1) * kMiB));
  for (int i = 0; i < 6; ++i) CHECK(cudaFree(buffers[i]));

  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreate(&stream));
  for (int i = 0; i < kAsyncPairs; ++i) {
    void* scratch = nullptr;
    CHECK(cudaMallocAsync(&scratch, 64 * kKiB, stream));
    CHECK(cudaFreeAsync(scratch, stream));
  }

  // The kernels count into the leaked 7 MiB buffer (buffers[6]).
  int* counters = static_cast<int*>(buffers[6]);
  CHECK(cudaMemsetAsync(counters, 0, kElements * sizeof(int), stream));
  for (int i = 0; i < kLaunches; ++i) {
    increment<<<kBlocks, kThreadsPerBlock, 0, stream>>>(counters);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(stream));

  int host[kElements] = {};
  CHECK(cudaMemcpy(host, counters, sizeof(host), cudaMemcpyDeviceToHost));
  for (int value : host) {
    if (value != kLaunches) {
      std::fprintf(stderr, "static_cudart: counter %d, expected %d\n", value, kLaunches);
      std::exit(1);
    }
  }
  CHECK(cudaStreamDestroy(stream));
}

int main() {
  run_workload();
  std::printf(
      "static_cudart: 12 cudaMalloc, 6 cudaFree, %d async pairs, %d launches <<<%d, %d>>>\n",
      kAsyncPairs, kLaunches, kBlocks, kThreadsPerBlock);
  return 0;
}
