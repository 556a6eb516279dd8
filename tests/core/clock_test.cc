// Event timestamps come from the TSC converted to CLOCK_MONOTONIC: they must agree with it.
#include "core/clock.h"

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace gpumem {
namespace {

int64_t ClockNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

TEST(Clock, AgreesWithClockMonotonicOverTime) {
  InitClock();
  const int64_t start = ClockNs();
  int64_t worst = 0;
  uint64_t previous = 0;
  int64_t largest_step_back = 0;  // a re-calibration may step back by a little
  // 50 ms: through the first calibration (1 ms) and several re-calibrations after it.
  while (ClockNs() - start < 50000000) {
    int64_t before = ClockNs();
    uint64_t ours = MonotonicNs();
    int64_t after = ClockNs();
    int64_t off = 0;
    if (static_cast<int64_t>(ours) < before) off = before - static_cast<int64_t>(ours);
    if (static_cast<int64_t>(ours) > after) off = static_cast<int64_t>(ours) - after;
    worst = std::max(worst, off);
    if (ours < previous)
      largest_step_back = std::max(largest_step_back, static_cast<int64_t>(previous - ours));
    previous = ours;
  }
  EXPECT_LT(worst, 20000) << "ns away from CLOCK_MONOTONIC";
  EXPECT_LT(largest_step_back, 5000) << "ns";
}

}  // namespace
}  // namespace gpumem
