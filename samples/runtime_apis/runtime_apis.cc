// runtime_apis: one of each remaining CUDA runtime allocation call, each freed.
//
// Managed, pitched, 3D and pinned host memory all come from different entry points; a profiler
// that knows only cudaMalloc misses them. Widths are multiples of 512 bytes so the pitch equals the
// width on every GPU (and on the fake), which keeps the byte counts exact.
// Known answer: expected.txt next to this.
#include <cuda_runtime_api.h>

#include <cstdio>

#include "common/check.h"

using samples::kMiB;

static void expect_pitch(const char* what, size_t pitch, size_t width) {
  if (pitch != width) {
    std::fprintf(stderr, "runtime_apis: %s pitch %zu, expected %zu\n", what, pitch, width);
    std::exit(1);
  }
}

__attribute__((noinline)) void allocate_each_kind() {
  void* managed = nullptr;
  CHECK(cudaMallocManaged(&managed, 4 * kMiB, cudaMemAttachGlobal));

  void* image = nullptr;  // 100 rows of 2048 bytes
  size_t pitch = 0;
  CHECK(cudaMallocPitch(&image, &pitch, 2048, 100));
  expect_pitch("cudaMallocPitch", pitch, 2048);

  cudaPitchedPtr volume = {};
  const cudaExtent extent = {.width = 1024, .height = 64, .depth = 8};  // width in bytes
  CHECK(cudaMalloc3D(&volume, extent));
  expect_pitch("cudaMalloc3D", volume.pitch, 1024);

  void* pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, 1 * kMiB));
  void* host = nullptr;
  CHECK(cudaHostAlloc(&host, 2 * kMiB, cudaHostAllocDefault));

  CHECK(cudaFree(managed));
  CHECK(cudaFree(image));
  CHECK(cudaFree(volume.ptr));
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFreeHost(host));
}

int main() {
  allocate_each_kind();
  std::printf("runtime_apis: done\n");
  return 0;
}
