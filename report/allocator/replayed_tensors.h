// The allocations a replay served (report/allocator/allocator_replay.h, keep_tensors), kept as a
// list that can be changed and replayed again: what `gpumem advise` edits (a free moved earlier, a
// size scaled to another batch) to model a change the user could make, then replays through each
// allocator model.
//
// Times are positions in the trace's seq order: an event of seq s is at 2s, so a free moved to
// "just after" an event of seq s (a launch, another allocation) sits at 2s + 1, between it and the
// next event, and no two replays order the same events differently.
#ifndef GPUMEM_REPORT_ALLOCATOR_REPLAYED_TENSORS_H_
#define GPUMEM_REPORT_ALLOCATOR_REPLAYED_TENSORS_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "report/allocator/allocator_model.h"

namespace gpumem::report {

inline constexpr uint64_t kNeverFreed = std::numeric_limits<uint64_t>::max();

// The position of the event of seq `seq`, and the one just after it.
inline constexpr uint64_t PositionOf(uint64_t seq) { return 2 * seq; }
inline constexpr uint64_t JustAfter(uint64_t seq) { return 2 * seq + 1; }

struct ReplayedTensor {
  uint64_t size = 0;
  uint64_t stream = 0;
  uint64_t stack_id = 0;
  int32_t device = 0;
  uint64_t allocated_at = 0;        // PositionOf(its allocation's seq)
  uint64_t freed_at = kNeverFreed;  // PositionOf(its free's seq)
  // JustAfter(the seq of the last kernel launch that received it); 0: no launch received it.
  uint64_t last_use_at = 0;
};

// One device's outcome of ReplayTensors.
struct TensorReplayDevice {
  int32_t device = 0;
  uint64_t reserved_peak = 0;
  uint64_t allocated_peak = 0;
  uint64_t peak_at = 0;  // the position at which reserved first reached its peak
  // The tensor (index) whose allocation ran out of memory; the device's replay stopped there.
  std::optional<size_t> oom;
};

struct TensorReplayOutcome {
  std::vector<TensorReplayDevice> devices;  // ascending
  bool Fits() const {
    for (const TensorReplayDevice& device : devices) {
      if (device.oom) return false;
    }
    return true;
  }
  // The highest reserved peak of any device.
  uint64_t ReservedPeak() const;
  const TensorReplayDevice* Device(int32_t device) const;
};

// Replays `tensors` in position order (frees before allocations at equal positions cannot happen:
// allocations sit at even positions, moved frees at odd ones) through a model of `kind` per
// device, each given `config`. A tensor of size 0 is left out, as PyTorch never asks for one.
TensorReplayOutcome ReplayTensors(const std::vector<ReplayedTensor>& tensors, AllocatorKind kind,
                                  const NativeAllocatorConfig& config);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ALLOCATOR_REPLAYED_TENSORS_H_
