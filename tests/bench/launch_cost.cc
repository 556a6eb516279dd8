// The program the launch-cost benchmark times: kernel launches of an empty kernel (driver API,
// PTX), made from 30 frames deep as a framework's launches are, each call timed on its own.
// LAUNCH_COST_KERNEL=wide launches one that takes its arguments as PyTorch's elementwise kernels
// do: one 512-byte struct holding three device pointers among sizes and strides.
// Prints the median nanoseconds per cuLaunchKernel; run_launch_cost.sh compares runs with and
// without gpumem. The stream is synchronized every 256 launches so that a full launch queue never
// makes the driver wait for the GPU inside the timed call.
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tests/bench/cpu_counters.h"

namespace {

constexpr char kNoop[] = R"ptx(
.version 8.0
.target sm_80
.address_size 64
.visible .entry noop(
    .param .u64 noop_data,
    .param .u32 noop_n
)
{
    ret;
}
)ptx";

constexpr char kWide[] = R"ptx(
.version 8.0
.target sm_80
.address_size 64
.visible .entry wide(
    .param .align 8 .b8 wide_iter[512]
)
{
    ret;
}
)ptx";

// What the wide kernel gets: three buffers' addresses, then what an iterator's shape looks like.
struct WideArguments {
  uint64_t words[64];
};

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

CUfunction g_kernel = nullptr;
CUstream g_stream = nullptr;
CUdeviceptr g_data = 0;
bool g_wide = false;
CUdeviceptr g_wide_buffers[3] = {};

__attribute__((noinline)) int MeasureAtDepth(int depth, long launches) {
  if (depth > 1) {
    int result = MeasureAtDepth(depth - 1, launches);
    asm volatile("" ::: "memory");  // keep the recursion a real call chain
    return result;
  }
  std::vector<uint32_t> launch_ns(static_cast<size_t>(launches));
  // LAUNCH_COST_EVICT_KB: between launches (untimed) write that much memory, as a framework's
  // own work between launches does, so gpumem's tables and the trace's lines are cold as in a
  // real program rather than all in L1.
  const char* evict_kb = getenv("LAUNCH_COST_EVICT_KB");
  std::vector<uint64_t> evict(evict_kb != nullptr ? static_cast<size_t>(atol(evict_kb)) * 128 : 0);
  // LAUNCH_COST_COUNTERS=1: the CPU's counters summed over the launches (cpu_counters.h), printed
  // per launch on a line of their own: what a cold launch's time goes to.
  CpuCounters counters;
  const char* counters_wanted = getenv("LAUNCH_COST_COUNTERS");
  const bool counting = counters_wanted != nullptr && counters_wanted[0] == '1' && counters.Open();
  unsigned n = 1024;
  void* args[] = {&g_data, &n};
  WideArguments wide{};
  for (size_t i = 0; i < 3; ++i) wide.words[i] = g_wide_buffers[i];
  for (size_t i = 3; i < 64; ++i) wide.words[i] = i % 4 == 0 ? 1024 : i;  // sizes, strides
  void* wide_args[] = {&wide};
  for (long i = 0; i < launches; ++i) {
    if (counting) counters.Start();
    const uint64_t start = NowNs();
    if (cuLaunchKernel(g_kernel, 1, 1, 1, 32, 1, 1, 0, g_stream, g_wide ? wide_args : args,
                       nullptr) != CUDA_SUCCESS) {
      return 1;
    }
    launch_ns[static_cast<size_t>(i)] = static_cast<uint32_t>(NowNs() - start);
    if (counting) counters.Stop();
    for (size_t word = 0; word < evict.size(); word += 8) evict[word] += static_cast<uint64_t>(i);
    if (i % 256 == 255 && cuStreamSynchronize(g_stream) != CUDA_SUCCESS) return 1;
  }
  std::nth_element(launch_ns.begin(), launch_ns.begin() + launches / 2, launch_ns.end());
  if (counting) counters.Print("counters per launch:", static_cast<uint64_t>(launches));
  printf("launch_ns=%u\n", launch_ns[static_cast<size_t>(launches / 2)]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const long launches = argc > 1 ? atol(argv[1]) : 1000000;
  if (launches < 1 || launches > 100000000) {
    fprintf(stderr, "usage: launch_cost [LAUNCHES]  (1..100000000, default 1000000)\n");
    return 2;
  }
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  const char* kernel = getenv("LAUNCH_COST_KERNEL");
  g_wide = kernel != nullptr && std::string_view(kernel) == "wide";
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS ||
      cuModuleLoadData(&module, g_wide ? kWide : kNoop) != CUDA_SUCCESS ||
      cuModuleGetFunction(&g_kernel, module, g_wide ? "wide" : "noop") != CUDA_SUCCESS ||
      cuStreamCreate(&g_stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
      cuMemAlloc(&g_data, 4096) != CUDA_SUCCESS) {
    fprintf(stderr, "launch_cost: CUDA set-up failed\n");
    return 1;
  }
  for (CUdeviceptr& buffer : g_wide_buffers) {
    if (g_wide && cuMemAlloc(&buffer, 1 << 20) != CUDA_SUCCESS) {
      fprintf(stderr, "launch_cost: CUDA set-up failed\n");
      return 1;
    }
  }
  const int result = MeasureAtDepth(30, launches);
  if (result != 0) fprintf(stderr, "launch_cost: a launch failed\n");
  cuMemFree(g_data);
  for (CUdeviceptr buffer : g_wide_buffers) {
    if (buffer != 0) cuMemFree(buffer);
  }
  return result;
}
