// CUDA calls where the caller has little stack to spare, run under the preload library:
//   first-on-small-stack [deep]  the process's first CUDA calls on a thread with a 16 KiB stack
//                                (guard page below), then a second such thread's first calls;
//   later-on-small-stack [deep]  the same after the main thread made the first calls;
//   measure                      how many bytes of its stack each call overwrote below the call
//                                point ("stack NAME BYTES"), on a stack pre-filled with a pattern:
//                                the process's first call, then warm calls;
//   signals                      cudaMalloc/cudaFree from a SIGUSR1 handler on an 8 KiB
//                                sigaltstack (guard page below): while the thread is idle, then
//                                while it is inside cudaMalloc (the fake driver raises the signal
//                                from cuMemAlloc when GPUMEM_FAKE_SIGNAL_IN_MEM_ALLOC names it;
//                                the real one does not, so there only the first).
// The stacks are 16 KiB and 8 KiB unless SMALL_STACKS_KIB (threads) or SMALL_STACKS_ALT_KIB (the
// sigaltstack) name another size in KiB: NVIDIA's own libcudart needs more than the fake CUDA, and
// the GPU script looks for the least it runs on (tests/gpu/run.sh small_stacks).
// `deep`: 200 frames of recursion before each group of calls. Every call's result and the memory's
// contents are checked; any failure ends the program with a message and exit status 1. `signals`
// prints "made A allocations, F frees" (the handler's and the program's).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace {

void Fail(const char* what, int line) {
  fprintf(stderr, "small_stacks.cc:%d: %s\n", line, what);
  exit(1);
}
#define CHECK(condition) ((condition) ? void() : Fail(#condition, __LINE__))

constexpr size_t kPage = 4096;

// `variable`'s size in KiB as bytes (a whole number of pages), else `default_kib`.
size_t StackBytes(const char* variable, size_t default_kib) {
  const char* value = getenv(variable);
  if (value == nullptr || value[0] == '\0') return default_kib * 1024;
  char* end = nullptr;
  errno = 0;
  const unsigned long kib = strtoul(value, &end, 10);
  if (errno != 0 || *end != '\0' || kib < 4 || kib > 1024 * 1024 || kib % 4 != 0) {
    fprintf(stderr, "small_stacks: %s=%s is not a size in KiB (a multiple of 4)\n", variable,
            value);
    exit(2);
  }
  return kib * 1024;
}

size_t g_small_stack = 0;  // a thread's stack (SMALL_STACKS_KIB, default 16 KiB)
size_t g_alt_stack = 0;    // the signal handler's (SMALL_STACKS_ALT_KIB, default 8 KiB)

// The PTX of one kernel, fill(.u64 ptr, .u32 n).
constexpr char kPtx[] = R"(.version 8.0
.target sm_80
.address_size 64

.visible .entry fill(
	.param .u64 fill_param_0,
	.param .u32 fill_param_1
)
{
	ret;
}
)";

// Allocates, checks the memory holds what was copied in, launches a kernel on it, frees it, and
// checks that an impossible allocation fails: through the runtime and through the driver.
void CudaWork() {
  void* buffer = nullptr;
  CHECK(cudaMalloc(&buffer, 1 << 20) == cudaSuccess);
  char in[64];
  char out[64] = {};
  memset(in, 0x5a, sizeof(in));
  CHECK(cudaMemcpy(buffer, in, sizeof(in), cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(out, buffer, sizeof(out), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(memcmp(in, out, sizeof(in)) == 0);
  CUmodule module = nullptr;
  CUfunction fill = nullptr;
  CHECK(cuModuleLoadData(&module, kPtx) == CUDA_SUCCESS);
  CHECK(cuModuleGetFunction(&fill, module, "fill") == CUDA_SUCCESS);
  unsigned n = 16;
  void* args[] = {&buffer, &n};
  CHECK(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
  CHECK(cudaFree(buffer) == cudaSuccess);
  void* huge = nullptr;
  CHECK(cudaMalloc(&huge, size_t{1} << 50) != cudaSuccess);
  CUdeviceptr driver_buffer = 0;
  CHECK(cuMemAlloc(&driver_buffer, 4096) == CUDA_SUCCESS);
  CHECK(cuMemFree(driver_buffer) == CUDA_SUCCESS);
}

// Recurses `depth` frames (each with a frame of its own), then calls `work`.
__attribute__((noinline)) int Recurse(int depth, void (*work)()) {
  if (depth == 0) {
    work();
    return 0;
  }
  volatile int keep = depth;
  int below = Recurse(depth - 1, work);
  return below + keep;
}

bool g_deep = false;

void* SmallStackThread(void*) {
  CHECK(cudaSetDevice(0) == cudaSuccess);
  Recurse(g_deep ? 200 : 0, &CudaWork);
  return nullptr;
}

void RunOnSmallStack() {
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  CHECK(pthread_attr_setstacksize(&attributes, g_small_stack) == 0);
  CHECK(pthread_attr_setguardsize(&attributes, kPage) == 0);
  pthread_t thread;
  CHECK(pthread_create(&thread, &attributes, &SmallStackThread, nullptr) == 0);
  CHECK(pthread_join(thread, nullptr) == 0);
  pthread_attr_destroy(&attributes);
}

// ---- measure ----

constexpr uint8_t kPattern = 0xa7;
constexpr size_t kMeasuredStack = 256 * 1024;
uint8_t* g_stack_low = nullptr;  // the lowest byte of the measured thread's stack

__attribute__((always_inline)) inline uintptr_t StackPointer() {
  uintptr_t sp;
  asm volatile("mov %%rsp, %0" : "=r"(sp));
  return sp;
}

// Fills the stack below this frame with the pattern (leaving the red zone), runs `call`, and
// prints how far below the call point it wrote.
template <typename Call>
__attribute__((noinline)) void Measure(const char* name, Call call) {
  const uintptr_t point = StackPointer();
  for (volatile uint8_t* at = g_stack_low; at < reinterpret_cast<uint8_t*>(point - 128); ++at) {
    *at = kPattern;
  }
  call();
  const uint8_t* lowest = g_stack_low;
  while (lowest < reinterpret_cast<uint8_t*>(point) && *lowest == kPattern) ++lowest;
  printf("stack %s %zu\n", name, static_cast<size_t>(point - reinterpret_cast<uintptr_t>(lowest)));
}

CUfunction g_fill = nullptr;
void* g_kept = nullptr;

void MeasureWarm() {
  void* buffer = nullptr;
  Measure("warm-malloc", [&] { CHECK(cudaMalloc(&buffer, 4096) == cudaSuccess); });
  Measure("warm-free", [&] { CHECK(cudaFree(buffer) == cudaSuccess); });
  unsigned n = 16;
  void* args[] = {&g_kept, &n};
  Measure("launch", [&] {
    CHECK(cuLaunchKernel(g_fill, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
  });
  void* huge = nullptr;
  Measure("failed-malloc", [&] { CHECK(cudaMalloc(&huge, size_t{1} << 50) != cudaSuccess); });
  CUdeviceptr driver_buffer = 0;
  Measure("driver-malloc", [&] { CHECK(cuMemAlloc(&driver_buffer, 4096) == CUDA_SUCCESS); });
  CHECK(cuMemFree(driver_buffer) == CUDA_SUCCESS);
}

void* MeasureThread(void*) {
  CHECK(cudaSetDevice(0) == cudaSuccess);
  CUmodule module = nullptr;
  CHECK(cuModuleLoadData(&module, kPtx) == CUDA_SUCCESS);
  CHECK(cuModuleGetFunction(&g_fill, module, "fill") == CUDA_SUCCESS);
  Measure("first-call", [] { CHECK(cudaMalloc(&g_kept, 4096) == cudaSuccess); });
  MeasureWarm();
  Recurse(200, &MeasureWarm);  // new stacks, deep ones
  Recurse(200, &MeasureWarm);  // the same stacks again
  return nullptr;
}

void RunMeasured() {
  const size_t mapped = kMeasuredStack + kPage;
  void* memory = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(memory != MAP_FAILED);
  CHECK(mprotect(memory, kPage, PROT_NONE) == 0);
  g_stack_low = static_cast<uint8_t*>(memory) + kPage;
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  CHECK(pthread_attr_setstack(&attributes, g_stack_low, kMeasuredStack) == 0);
  pthread_t thread;
  CHECK(pthread_create(&thread, &attributes, &MeasureThread, nullptr) == 0);
  CHECK(pthread_join(thread, nullptr) == 0);
}

// ---- signals ----

std::atomic<int> g_allocations{0};
std::atomic<int> g_frees{0};
std::atomic<int> g_handler_failures{0};
std::atomic<int> g_handler_runs{0};

void Handler(int) {
  const int saved_errno = errno;
  void* buffer = nullptr;
  if (cudaMalloc(&buffer, 8192) != cudaSuccess || buffer == nullptr) {
    g_handler_failures.fetch_add(1);
  } else {
    g_allocations.fetch_add(1);
    char in[32];
    char out[32] = {};
    memset(in, g_handler_runs.load() & 0xff, sizeof(in));
    if (cudaMemcpy(buffer, in, sizeof(in), cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(out, buffer, sizeof(out), cudaMemcpyDeviceToHost) != cudaSuccess ||
        memcmp(in, out, sizeof(in)) != 0) {
      g_handler_failures.fetch_add(1);
    }
    if (cudaFree(buffer) == cudaSuccess) {
      g_frees.fetch_add(1);
    } else {
      g_handler_failures.fetch_add(1);
    }
  }
  g_handler_runs.fetch_add(1);
  errno = saved_errno;
}

void InstallHandlerOnAltStack() {
  void* memory = mmap(nullptr, g_alt_stack + kPage, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(memory != MAP_FAILED);
  CHECK(mprotect(memory, kPage, PROT_NONE) == 0);  // an overflow faults instead of corrupting
  stack_t alt{};
  alt.ss_sp = static_cast<char*>(memory) + kPage;
  alt.ss_size = g_alt_stack;
  CHECK(sigaltstack(&alt, nullptr) == 0);
  struct sigaction action {};
  action.sa_handler = &Handler;
  action.sa_flags = SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  CHECK(sigaction(SIGUSR1, &action, nullptr) == 0);
}

void ProgramAllocation() {
  void* buffer = nullptr;
  CHECK(cudaMalloc(&buffer, 4096) == cudaSuccess);
  g_allocations.fetch_add(1);
  CHECK(cudaFree(buffer) == cudaSuccess);
  g_frees.fetch_add(1);
}

int Signals() {
  InstallHandlerOnAltStack();
  CHECK(cudaSetDevice(0) == cudaSuccess);
  ProgramAllocation();
  constexpr int kRounds = 5;
  for (int i = 0; i < kRounds; ++i) {  // the thread is idle: not inside any CUDA call
    CHECK((i % 2 == 0 ? raise(SIGUSR1) : pthread_kill(pthread_self(), SIGUSR1)) == 0);
  }
  char signal_number[8];
  snprintf(signal_number, sizeof(signal_number), "%d", SIGUSR1);
  CHECK(g_handler_runs.load() == kRounds);
  setenv("GPUMEM_FAKE_SIGNAL_IN_MEM_ALLOC", signal_number, 1);
  for (int i = 0; i < kRounds; ++i) ProgramAllocation();  // the handler runs inside cudaMalloc
  unsetenv("GPUMEM_FAKE_SIGNAL_IN_MEM_ALLOC");
  CHECK(g_handler_failures.load() == 0);
  // Only the fake CUDA raises the signal inside cuMemAlloc; NVIDIA's driver does not (its calls
  // are not safe to interrupt with CUDA calls anyway), so there the handler ran in no call.
  const int in_calls = g_handler_runs.load() - kRounds;
  CHECK(in_calls == kRounds || in_calls == 0);
  printf("made %d allocations, %d frees\n", g_allocations.load(), g_frees.load());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  g_deep = argc > 2 && strcmp(argv[2], "deep") == 0;
  g_small_stack = StackBytes("SMALL_STACKS_KIB", 16);
  g_alt_stack = StackBytes("SMALL_STACKS_ALT_KIB", 8);
  if (strcmp(mode, "first-on-small-stack") == 0) {
    RunOnSmallStack();
    RunOnSmallStack();
  } else if (strcmp(mode, "later-on-small-stack") == 0) {
    CHECK(cudaSetDevice(0) == cudaSuccess);
    CudaWork();
    RunOnSmallStack();
  } else if (strcmp(mode, "measure") == 0) {
    RunMeasured();
  } else if (strcmp(mode, "signals") == 0) {
    return Signals();
  } else {
    fprintf(stderr,
            "usage: small_stacks first-on-small-stack|later-on-small-stack [deep] | "
            "measure | signals\n");
    return 2;
  }
  return 0;
}
