// driver_api: a program that talks to the CUDA driver directly (no runtime library at all).
//
// Such programs (and libraries such as cuBLAS' workspace code, Triton, JAX's XLA) call libcuda's
// exported symbols, so a profiler that hooks only cudaMalloc sees nothing. Every kind of driver
// allocation appears once; one cuMemAlloc is never freed (the planted leak).
// Known answer: expected.txt next to this.
#include <cuda.h>

#include <cstdio>

#include "common/check.h"

using samples::kMiB;

__attribute__((noinline)) void driver_allocations() {
  CUdeviceptr weights = 0;
  CUdeviceptr forgotten = 0;
  CHECK(cuMemAlloc(&weights, 32 * kMiB));
  CHECK(cuMemAlloc(&forgotten, 3 * kMiB));  // the leak: never cuMemFree'd

  // 256 rows of 4096 bytes: a width that is a multiple of 512 gives pitch == width on every GPU.
  CUdeviceptr image = 0;
  size_t pitch = 0;
  CHECK(cuMemAllocPitch(&image, &pitch, 4096, 256, 4));
  if (pitch != 4096) {
    std::fprintf(stderr, "driver_api: unexpected pitch %zu (want 4096)\n", pitch);
    std::exit(1);
  }

  CUdeviceptr managed = 0;
  CHECK(cuMemAllocManaged(&managed, 8 * kMiB, CU_MEM_ATTACH_GLOBAL));

  void* pinned = nullptr;  // pinned host memory, e.g. a staging buffer for copies
  CHECK(cuMemHostAlloc(&pinned, 2 * kMiB, 0));
  CHECK(cuMemFreeHost(pinned));

  CHECK(cuMemFree(weights));
  CHECK(cuMemFree(image));
  CHECK(cuMemFree(managed));
}

int main() {
  CHECK(cuInit(0));
  CUdevice device = 0;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));

  driver_allocations();

  CHECK(cuDevicePrimaryCtxRelease(device));
  std::printf("driver_api: done, one 3 MiB cuMemAlloc left unfreed\n");
  return 0;
}
