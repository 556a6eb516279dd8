// unused_buffer: a large buffer allocated "for later" that no kernel ever receives.
//
// Common in training code: a workspace or a second copy of the weights kept "just in case", which
// sets the peak and never does any work. Memory reports alone show it as one more allocation; what
// names it is that no kernel launch was ever given a pointer into it. Kernels come from PTX text
// through the driver API, so the same program runs on a GPU (the driver compiles the PTX) and on
// the fake CUDA of the tests (which reads the kernels' names and parameters from it).
// Known answer: expected.txt next to this.
#include <cuda.h>

#include <cstdio>

#include "common/check.h"

using samples::kMiB;

namespace {

// y = a * x + y, and x *= factor: float arrays of n elements, one thread per element.
constexpr char kKernels[] = R"ptx(
.version 8.0
.target sm_80
.address_size 64

.visible .entry scale(
    .param .u64 scale_data,
    .param .u32 scale_n,
    .param .f32 scale_factor
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [scale_data];
    ld.param.u32 %r1, [scale_n];
    ld.param.f32 %f1, [scale_factor];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra SCALE_DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    mul.f32 %f3, %f2, %f1;
    st.global.f32 [%rd4], %f3;
SCALE_DONE:
    ret;
}

.visible .entry axpy(
    .param .u64 axpy_y,
    .param .u64 axpy_x,
    .param .u32 axpy_n,
    .param .f32 axpy_a
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [axpy_y];
    ld.param.u64 %rd2, [axpy_x];
    ld.param.u32 %r1, [axpy_n];
    ld.param.f32 %f1, [axpy_a];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra AXPY_DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd7];
    ld.global.f32 %f3, [%rd6];
    fma.rn.f32 %f4, %f2, %f1, %f3;
    st.global.f32 [%rd6], %f4;
AXPY_DONE:
    ret;
}
)ptx";

constexpr unsigned kElements = 2 * 1024 * 1024;  // 8 MiB of floats
constexpr unsigned kThreads = 256;
constexpr unsigned kBlocks = kElements / kThreads;

__attribute__((noinline)) CUdeviceptr allocate_input(size_t bytes) {
  CUdeviceptr buffer = 0;
  CHECK(cuMemAlloc(&buffer, bytes));
  CHECK(cuMemsetD8(buffer, 0, bytes));
  return buffer;
}

// The problem: 64 MiB kept for a later that never comes.
__attribute__((noinline)) CUdeviceptr reserve_spare_buffer() {
  CUdeviceptr spare = 0;
  CHECK(cuMemAlloc(&spare, 64 * kMiB));
  return spare;
}

__attribute__((noinline)) void train(CUfunction scale, CUfunction axpy, CUdeviceptr x,
                                     CUdeviceptr y) {
  unsigned n = kElements;
  float factor = 0.5f;
  float a = 2.0f;
  void* scale_args[] = {&x, &n, &factor};
  for (int i = 0; i < 10; ++i) {
    CHECK(cuLaunchKernel(scale, kBlocks, 1, 1, kThreads, 1, 1, 0, nullptr, scale_args, nullptr));
  }
  void* axpy_args[] = {&y, &x, &n, &a};
  CUlaunchConfig config{};
  config.gridDimX = kBlocks / 2;  // the same threads in blocks twice as large
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = kThreads * 2;
  config.blockDimY = config.blockDimZ = 1;
  for (int i = 0; i < 20; ++i) CHECK(cuLaunchKernelEx(&config, axpy, axpy_args, nullptr));
  CHECK(cuCtxSynchronize());
}

}  // namespace

int main() {
  CHECK(cuInit(0));
  CUdevice device = 0;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));
  CUmodule module = nullptr;
  CHECK(cuModuleLoadData(&module, kKernels));
  CUfunction scale = nullptr;
  CUfunction axpy = nullptr;
  CHECK(cuModuleGetFunction(&scale, module, "scale"));
  CHECK(cuModuleGetFunction(&axpy, module, "axpy"));

  CUdeviceptr x = allocate_input(kElements * sizeof(float));
  CUdeviceptr y = allocate_input(kElements * sizeof(float));
  CUdeviceptr spare = reserve_spare_buffer();
  train(scale, axpy, x, y);

  float first = 0;
  CHECK(cuMemcpyDtoH(&first, y, sizeof(first)));
  CHECK(cuMemFree(spare));
  CHECK(cuMemFree(y));
  CHECK(cuMemFree(x));
  CHECK(cuModuleUnload(module));
  CHECK(cuDevicePrimaryCtxRelease(device));
  std::printf("unused_buffer: 30 launches, y[0] = %g, the 64 MiB spare buffer never used\n", first);
  return 0;
}
