#include "core/self_timing.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>

namespace gpumem::self_timing {
namespace {

struct Total {
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> ns{0};
};
Total g_totals[kPhaseCount];

constexpr const char* kNames[kPhaseCount] = {
    "native stack",    "Python frames", "stack lookup", "memory event", "launch event",
    "kernel lookup",   "pointer scan",  "pool query",   "device query", "sink write",
    "allocation hook", "free hook",     "launch hook"};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kPhaseCount);

std::atomic<uint64_t> g_counts[kCounterCount];
constexpr const char* kCounterNames[kCounterCount] = {
    "stacks left to libunwind",
    "stacks replayed from an earlier unwind",
    "stacks unwound, none kept from this stack pointer",
    "stacks unwound, the kept one's stack words changed",
    "stacks too deep to keep for a replay",
    "native frames captured",
    "kernel parameter bytes scanned"};

}  // namespace

void Add(Phase phase, uint64_t ns, bool count) {
  if (count) g_totals[phase].count.fetch_add(1, std::memory_order_relaxed);
  g_totals[phase].ns.fetch_add(ns, std::memory_order_relaxed);
}

void AddCount(Counter counter, uint64_t amount) {
  g_counts[counter].fetch_add(amount, std::memory_order_relaxed);
}

void Print() {
  if (!g_enabled) return;
  uint64_t all_ns = 0;
  for (int phase = 0; phase < kPhaseCount; ++phase) {
    if (!IsOuterPhase(phase)) all_ns += g_totals[phase].ns.load(std::memory_order_relaxed);
  }
  // snprintf + write: no stdio buffer, which may be gone at exit.
  char line[160];
  int n =
      snprintf(line, sizeof(line), "gpumem: self timing (pid %d): %.3f ms in the inner phases\n",
               static_cast<int>(getpid()), static_cast<double>(all_ns) / 1e6);
  if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  for (int phase = 0; phase < kPhaseCount; ++phase) {
    const uint64_t count = g_totals[phase].count.load(std::memory_order_relaxed);
    if (count == 0) continue;
    const uint64_t ns = g_totals[phase].ns.load(std::memory_order_relaxed);
    n = snprintf(line, sizeof(line), "gpumem:   %-14s %10llu x %8.0f ns = %9.3f ms\n",
                 kNames[phase], static_cast<unsigned long long>(count),
                 static_cast<double>(ns) / static_cast<double>(count),
                 static_cast<double>(ns) / 1e6);
    if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  }
  for (int counter = 0; counter < kCounterCount; ++counter) {
    n = snprintf(
        line, sizeof(line), "gpumem:   %s: %llu\n", kCounterNames[counter],
        static_cast<unsigned long long>(g_counts[counter].load(std::memory_order_relaxed)));
    if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  }
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) {
    n = snprintf(line, sizeof(line), "gpumem:   process: %ld minor page faults, %ld major\n",
                 usage.ru_minflt, usage.ru_majflt);
    if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  }
}

}  // namespace gpumem::self_timing
