// The kernels of fill_add_ptx.h, loaded and launched one way for every test program whose launches
// must carry pointer arguments. Each function returns the driver's result, for the caller's check.
#pragma once

#include <cuda.h>

#include "tests/integration/programs/fill_add_ptx.h"

struct FillAddKernels {
  CUmodule module = nullptr;
  CUfunction fill = nullptr;
  CUfunction add = nullptr;
};

// Elements each kernel touches: few, so that the kernels are cheap on a GPU too.
inline constexpr unsigned kFillAddElements = 1024;

inline CUresult LoadFillAdd(FillAddKernels* kernels) {
  CUresult result = cuModuleLoadData(&kernels->module, kFillAddPtx);
  if (result == CUDA_SUCCESS) result = cuModuleGetFunction(&kernels->fill, kernels->module, "fill");
  if (result == CUDA_SUCCESS) result = cuModuleGetFunction(&kernels->add, kernels->module, "add");
  return result;
}

// buffer[0..kFillAddElements) = 1.
inline CUresult LaunchFill(const FillAddKernels& kernels, void* buffer) {
  unsigned n = kFillAddElements;
  float value = 1.0f;
  void* args[] = {&buffer, &n, &value};
  return cuLaunchKernel(kernels.fill, 4, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
}

// out = a + b.
inline CUresult LaunchAdd(const FillAddKernels& kernels, void* a, void* b, void* out) {
  unsigned n = kFillAddElements;
  void* args[] = {&a, &b, &out, &n};
  return cuLaunchKernel(kernels.add, kFillAddElements / 256, 1, 1, 256, 1, 1, 0, nullptr, args,
                        nullptr);
}
