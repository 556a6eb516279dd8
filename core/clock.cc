#include "core/clock.h"

#include <cpuid.h>
#include <time.h>
#include <x86intrin.h>

#include <atomic>

#include "core/hot_path.h"

namespace gpumem {
namespace {

GPUMEM_HOT_DATA bool g_use_tsc = false;
GPUMEM_HOT_DATA uint64_t g_base_tsc = 0;
GPUMEM_HOT_DATA uint64_t g_base_ns = 0;
GPUMEM_HOT_DATA std::atomic<uint64_t> g_ns_per_tick{0};  // 32.32 fixed point; 0 until calibrated
// TSC value at which to re-take the baseline.
GPUMEM_HOT_DATA std::atomic<uint64_t> g_calibrate_at{0};

constexpr uint64_t kMinBaselineNs = 1000000;     // 1 ms before the TSC is trusted at all
constexpr uint64_t kMaxIntervalNs = 1000000000;  // re-take at least once a second (NTP slew)
constexpr uint64_t kMaxReadWindowTicks = 20000;  // ~5 µs: a clock_gettime that was not preempted

uint64_t ClockNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool TscIsInvariant() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx)) return false;
  return (edx >> 8) & 1;
}

// clock_gettime with the TSC read on both sides of it; false if the two reads are far apart (the
// thread was preempted in between), which would skew a calibration.
bool ReadBoth(uint64_t* tsc, uint64_t* ns, uint64_t max_window_ticks) {
  uint64_t before = __rdtsc();
  *ns = ClockNs();
  uint64_t after = __rdtsc();
  *tsc = before + (after - before) / 2;
  return after - before <= max_window_ticks;
}

// Slow path: clock_gettime, and a better ns-per-tick from the whole interval since start.
uint64_t Calibrate() {
  uint64_t tsc = 0;
  uint64_t ns = 0;
  bool steady = ReadBoth(&tsc, &ns, kMaxReadWindowTicks);
  uint64_t ticks = tsc - g_base_tsc;
  uint64_t elapsed = ns - g_base_ns;
  if (!steady || elapsed < kMinBaselineNs || ticks == 0) {
    g_calibrate_at.store(tsc + 100000, std::memory_order_relaxed);
    return ns;
  }
  uint64_t ns_per_tick =
      static_cast<uint64_t>((static_cast<unsigned __int128>(elapsed) << 32) / ticks);
  // Next baseline when the interval has doubled, but at least once a second.
  uint64_t ticks_per_second =
      static_cast<uint64_t>((static_cast<unsigned __int128>(kMaxIntervalNs) << 32) / ns_per_tick);
  g_ns_per_tick.store(ns_per_tick, std::memory_order_relaxed);
  g_calibrate_at.store(tsc + (ticks < ticks_per_second ? ticks : ticks_per_second),
                       std::memory_order_relaxed);
  return ns;
}

}  // namespace

void InitClock() {
  g_use_tsc = TscIsInvariant();
  for (int attempt = 0; attempt < 10 && !ReadBoth(&g_base_tsc, &g_base_ns, kMaxReadWindowTicks);
       ++attempt) {
  }
  g_calibrate_at.store(g_base_tsc, std::memory_order_relaxed);
}

GPUMEM_HOT uint64_t MonotonicNs() {
  if (!g_use_tsc) return ClockNs();
  uint64_t tsc = __rdtsc();
  uint64_t ns_per_tick = g_ns_per_tick.load(std::memory_order_relaxed);
  if (tsc >= g_calibrate_at.load(std::memory_order_relaxed) || ns_per_tick == 0) return Calibrate();
  return g_base_ns + static_cast<uint64_t>(
                         (static_cast<unsigned __int128>(tsc - g_base_tsc) * ns_per_tick) >> 32);
}

}  // namespace gpumem
