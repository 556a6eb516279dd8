// The sizes advise_program allocates, shared with advise_test, which computes what `gpumem advise`
// must say from them. Every size is exactly constant + per_sample x batch, so an extrapolation
// from two batch sizes is exact.
#pragma once

#include <cstdint>

namespace advise_program {

inline constexpr uint64_t kKiB = uint64_t{1} << 10;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;

inline constexpr uint64_t kWeightsBytes = 8 * kMiB;  // allocated once, used every step
inline constexpr uint64_t kIdleBytes = 32 * kMiB;    // used once before the loop, freed at exit
inline constexpr uint64_t kGrowingBytes = 4 * kMiB;  // one per step, kept until exit
inline constexpr int kDefaultSteps = 6;
inline constexpr int64_t kDefaultBatch = 4;

// The two activations of each step, freed at its end.
constexpr uint64_t FirstActivationBytes(int64_t batch) {
  return 1 * kMiB + 256 * kKiB * static_cast<uint64_t>(batch);
}
constexpr uint64_t SecondActivationBytes(int64_t batch) {
  return 2 * kMiB + 768 * kKiB * static_cast<uint64_t>(batch);
}

// Allocations of a run: weights, idle, and per step two activations and a growing buffer.
constexpr uint64_t Allocations(int steps) { return 2 + 3 * static_cast<uint64_t>(steps); }

// The most bytes live at once: in the last step, once its growing buffer is allocated.
constexpr uint64_t PeakLiveBytes(int64_t batch, int steps) {
  return kWeightsBytes + kIdleBytes + FirstActivationBytes(batch) + SecondActivationBytes(batch) +
         kGrowingBytes * static_cast<uint64_t>(steps);
}

}  // namespace advise_program
