// A sampling profiler for machines without perf (the GPU machines have none): preloaded next to
// libgpumem.so, it takes each thread's interrupted program counter every PC_SAMPLER_US
// microseconds (default 100) and, at exit, writes to PC_SAMPLER_OUTPUT.PID one line per program
// counter: count, library, offset in the library, symbol. Offsets are resolved to source lines
// afterwards where the library's debug info is (tests/bench/pc_profile.py).
//
// Each thread has its own wall-clock timer (CPU-time timers only tick at the kernel's HZ: 250
// samples a second here), and a sample counts only when the thread ran for most of the interval,
// so threads that wait (a blocked autograd worker, a CUDA driver thread) add nothing. With
// PC_SAMPLER_GATED=1 samples count only between pc_sampler_enable(1) and pc_sampler_enable(0),
// which a program calls around the part it wants profiled (step_time_timed.py around its steps).
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr size_t kMaxSamples = size_t{1} << 22;
uintptr_t* g_samples = nullptr;
std::atomic<size_t> g_count{0};
std::atomic<bool> g_enabled{false};
long g_period_ns = 100000;

uint64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

thread_local uint64_t t_cpu_at_last_signal = 0;

void OnProfilingSignal(int, siginfo_t*, void* context) {
  const uint64_t cpu = ThreadCpuNs();
  const uint64_t ran = cpu - t_cpu_at_last_signal;
  t_cpu_at_last_signal = cpu;
  if (!g_enabled.load(std::memory_order_relaxed) || ran * 2 < static_cast<uint64_t>(g_period_ns)) {
    return;  // waiting, not working
  }
  const size_t slot = g_count.fetch_add(1, std::memory_order_relaxed);
  if (slot >= kMaxSamples) return;
  const auto* uc = static_cast<const ucontext_t*>(context);
  g_samples[slot] = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
}

// A timer that interrupts the calling thread every period.
timer_t StartThreadTimer() {
  if (g_samples == nullptr) return nullptr;
  sigevent event{};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = SIGPROF;
  event._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  timer_t timer;
  if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) return nullptr;
  t_cpu_at_last_signal = ThreadCpuNs();
  itimerspec spec{};
  spec.it_interval.tv_nsec = g_period_ns;
  spec.it_value.tv_nsec = g_period_ns;
  timer_settime(timer, 0, &spec, nullptr);
  return timer;
}

struct Start {
  void* (*routine)(void*);
  void* arg;
};

void* StartWithTimer(void* start) {
  const Start s = *static_cast<Start*>(start);
  delete static_cast<Start*>(start);
  timer_t timer = StartThreadTimer();
  void* result = s.routine(s.arg);
  if (timer != nullptr) timer_delete(timer);  // (a thread that calls pthread_exit keeps it)
  return result;
}

__attribute__((constructor)) void StartSampling() {
  const char* output = getenv("PC_SAMPLER_OUTPUT");
  if (output == nullptr || output[0] == '\0') return;
  g_samples = static_cast<uintptr_t*>(calloc(kMaxSamples, sizeof(uintptr_t)));
  if (g_samples == nullptr) return;
  struct sigaction action {};
  action.sa_sigaction = OnProfilingSignal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGPROF, &action, nullptr);
  const char* period = getenv("PC_SAMPLER_US");
  g_period_ns = (period != nullptr ? std::clamp(atol(period), 10L, 999999L) : 100L) * 1000;
  const char* gated = getenv("PC_SAMPLER_GATED");
  g_enabled.store(gated == nullptr || strcmp(gated, "1") != 0);
  StartThreadTimer();
}

__attribute__((destructor)) void WriteSamples() {
  const char* output = getenv("PC_SAMPLER_OUTPUT");
  if (g_samples == nullptr || output == nullptr) return;
  g_enabled.store(false);
  const size_t count = std::min(g_count.load(), kMaxSamples);
  std::map<uintptr_t, size_t> per_pc;
  for (size_t i = 0; i < count; ++i) ++per_pc[g_samples[i]];
  std::vector<std::pair<size_t, uintptr_t>> sorted;
  for (const auto& [pc, n] : per_pc) sorted.emplace_back(n, pc);
  std::sort(sorted.rbegin(), sorted.rend());
  std::string path = std::string(output) + "." + std::to_string(getpid());
  FILE* file = fopen(path.c_str(), "w");
  if (file == nullptr) return;
  fprintf(file, "# samples %zu\n", count);
  for (const auto& [n, pc] : sorted) {
    Dl_info info{};
    const bool known = dladdr(reinterpret_cast<void*>(pc), &info) != 0 && info.dli_fname;
    const uintptr_t base = known ? reinterpret_cast<uintptr_t>(info.dli_fbase) : 0;
    fprintf(file, "%zu %s 0x%lx %s\n", n, known ? info.dli_fname : "?",
            static_cast<unsigned long>(pc - base),
            known && info.dli_sname != nullptr ? info.dli_sname : "?");
  }
  fclose(file);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void pc_sampler_enable(int on) { g_enabled.store(on != 0); }

// Every thread gets its timer as it starts.
__attribute__((visibility("default"))) int pthread_create(pthread_t* thread,
                                                          const pthread_attr_t* attr,
                                                          void* (*routine)(void*), void* arg) {
  using Real = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pthread_create"));
  if (g_samples == nullptr) return real(thread, attr, routine, arg);
  return real(thread, attr, StartWithTimer, new Start{routine, arg});
}

}  // extern "C"
