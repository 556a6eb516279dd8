// Event timestamps on CLOCK_MONOTONIC's timeline, read from the CPU's time-stamp counter.
// clock_gettime costs 20 ns on a quiet machine and 40–60 ns on the shared GPU machines measured;
// one is taken per CUDA call, so the TSC (read in a few ns) is converted instead, against a
// clock_gettime baseline re-taken at most once a second. Where the TSC is not invariant (CPUID),
// clock_gettime is used as is. Timestamps may be off by microseconds, and a re-calibration may
// step back by as much; replay order comes from sequence numbers, never from time.
#pragma once

#include <cstdint>

namespace gpumem {

void InitClock();
uint64_t MonotonicNs();

}  // namespace gpumem
