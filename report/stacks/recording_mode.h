// The recording mode of a trace, decided from the allocations' stacks
// (report/stacks/memory_holders.h): which of a process's allocations are PyTorch's tensors, its
// segments, or plain allocations. The summary table, the fragmentation report and the allocator
// models' replay all count by it.
#ifndef GPUMEM_REPORT_STACKS_RECORDING_MODE_H_
#define GPUMEM_REPORT_STACKS_RECORDING_MODE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "core/trace.pb.h"
#include "report/stacks/memory_holders.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

enum class SummaryMode { kTensors, kSegments, kPlain };
// "tensors", "segments", "plain": the mode in JSON.
const char* SummaryModeName(SummaryMode mode);

// Who made the allocation with this stack (report/stacks/memory_holders.h with stream_ordered =
// false): nullptr for no known allocator or library.
using HolderOfStack = std::function<const MemoryHolder*(uint64_t stack_id)>;

// Holders from the modules of `trace`'s stacks (no symbols needed). The trace may still be
// streaming: a stack is written before its first use, its modules before it.
HolderOfStack HoldersOfTrace(const TraceFile& trace);

// A HolderOfStack asked once per stack id (an empty one: no holder for any stack).
class CachedHolderOf {
 public:
  explicit CachedHolderOf(HolderOfStack holder_of) : holder_of_(std::move(holder_of)) {}
  // One event's stack is asked for by each of its users in turn (the mode detector, each mode's
  // table, the model): the last answer is kept apart from the map, which is probed once.
  const MemoryHolder* operator()(uint64_t stack_id) {
    if (stack_id == last_stack_id_ && last_known_) return last_holder_;
    last_holder_ = Find(stack_id);
    last_stack_id_ = stack_id;
    last_known_ = true;
    return last_holder_;
  }

 private:
  const MemoryHolder* Find(uint64_t stack_id);

  HolderOfStack holder_of_;
  absl::flat_hash_map<uint64_t, const MemoryHolder*> cache_;
  uint64_t last_stack_id_ = 0;
  const MemoryHolder* last_holder_ = nullptr;
  bool last_known_ = false;
};

// Device memory as the table counts it: plain allocations other than pinned host memory, and VMM
// physical memory. Reservations and mappings are not memory.
bool IsDeviceMemory(const MemoryEvent& event);

// Whether a device-memory allocation made by `holder` is one the rows of `mode` count: PyTorch's
// stream-ordered allocations (kTensors), PyTorch's other allocations (kSegments), any (kPlain).
bool CountedInMode(SummaryMode mode, const MemoryEvent& event, const MemoryHolder* holder);

// The recording mode of one process, from its device allocations so far: kTensors once PyTorch
// made a stream-ordered allocation, else kSegments once it made any other, else kPlain. The mode
// is known only at the end of the trace, so a streamed analysis runs one candidate per mode that
// is still possible (ModeCandidates) and keeps the one mode() names at the end.
class SummaryModeDetector {
 public:
  void Add(const MemoryEvent& event, CachedHolderOf& holders);
  SummaryMode mode() const;
  // kSegments made of cuMemCreate physical memory (PyTorch's expandable segments).
  bool expandable_segments() const { return mode() == SummaryMode::kSegments && expandable_; }
  // Whether `mode` can still be mode() at the end: kTensors always, kSegments until PyTorch made a
  // stream-ordered allocation, kPlain until it made any.
  bool StillPossible(SummaryMode candidate) const;

 private:
  bool tensors_ = false;
  bool segments_ = false;
  bool expandable_ = false;
};

// One `Candidate` per recording mode, fed in one pass; a candidate is dropped as soon as the
// detector rules its mode out, so at most the three run at once and usually fewer.
template <typename Candidate>
class ModeCandidates {
 public:
  // `make(SummaryMode)` returns the candidate for that mode.
  template <typename Make>
  explicit ModeCandidates(Make&& make) {
    for (const SummaryMode mode : kModes) candidates_[Index(mode)].emplace(make(mode));
  }
  // Notes `event`'s allocation, if any, for the mode, then calls `feed(Candidate&)` for each
  // candidate still possible.
  template <typename Feed>
  void Add(const MemoryEvent& event, CachedHolderOf& holders, Feed&& feed) {
    detector_.Add(event, holders);
    for (const SummaryMode mode : kModes) {
      std::optional<Candidate>& candidate = candidates_[Index(mode)];
      if (!candidate) continue;
      if (!detector_.StillPossible(mode)) {
        candidate.reset();
        continue;
      }
      feed(*candidate);
    }
  }
  const SummaryModeDetector& detector() const { return detector_; }
  // Calls `visit(Candidate&)` for each candidate still possible.
  template <typename Visit>
  void ForEach(Visit&& visit) {
    for (std::optional<Candidate>& candidate : candidates_) {
      if (candidate) visit(*candidate);
    }
  }
  // The candidate of the mode the detector decided on.
  Candidate& Chosen() { return *candidates_[Index(detector_.mode())]; }

 private:
  static constexpr SummaryMode kModes[] = {SummaryMode::kTensors, SummaryMode::kSegments,
                                           SummaryMode::kPlain};
  static size_t Index(SummaryMode mode) { return static_cast<size_t>(mode); }
  SummaryModeDetector detector_;
  std::optional<Candidate> candidates_[3];
};

// Whether `holder` is PyTorch's CUDA caching allocator (any of its backends).
bool IsPyTorchAllocator(const MemoryHolder* holder);
inline constexpr char kPyTorchAllocatorId[] = "pytorch_caching_allocator";

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_STACKS_RECORDING_MODE_H_
