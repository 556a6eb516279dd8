#include "report/stacks/recording_mode.h"

#include "absl/strings/string_view.h"
#include "report/replay/memory_space.h"

namespace gpumem::report {

bool IsPyTorchAllocator(const MemoryHolder* holder) {
  return holder != nullptr && absl::string_view(holder->id) == kPyTorchAllocatorId;
}

bool IsDeviceMemory(const MemoryEvent& event) {
  switch (SpaceOf(event)) {
    case MemorySpace::kPlain:
      return !IsPinnedHost(event);
    case MemorySpace::kPhysical:
      return !IsImported(event);  // another process's memory
    default:
      return false;
  }
}

bool CountedInMode(SummaryMode mode, const MemoryEvent& event, const MemoryHolder* holder) {
  switch (mode) {
    case SummaryMode::kTensors:
      return IsPyTorchAllocator(holder) && IsStreamOrdered(event);
    case SummaryMode::kSegments:
      return IsPyTorchAllocator(holder) && !IsStreamOrdered(event);
    case SummaryMode::kPlain:
      break;
  }
  return true;
}

const char* SummaryModeName(SummaryMode mode) {
  switch (mode) {
    case SummaryMode::kTensors:
      return "tensors";
    case SummaryMode::kSegments:
      return "segments";
    case SummaryMode::kPlain:
      return "plain";
  }
  return "plain";
}

HolderOfStack HoldersOfTrace(const TraceFile& trace) {
  return [&trace](uint64_t stack_id) { return FindMemoryHolderOfStack(trace, stack_id, false); };
}

const MemoryHolder* CachedHolderOf::Find(uint64_t stack_id) {
  auto it = cache_.find(stack_id);
  if (it == cache_.end()) {
    it = cache_.emplace(stack_id, holder_of_ ? holder_of_(stack_id) : nullptr).first;
  }
  return it->second;
}

void SummaryModeDetector::Add(const MemoryEvent& event, CachedHolderOf& holders) {
  if (event.action() != ALLOC || !IsDeviceMemory(event)) return;
  if (tensors_ || !IsPyTorchAllocator(holders(event.stack_id()))) return;  // nothing left to learn
  if (IsStreamOrdered(event)) {
    tensors_ = true;
  } else {
    segments_ = true;
    expandable_ = expandable_ || SpaceOf(event) == MemorySpace::kPhysical;
  }
}

SummaryMode SummaryModeDetector::mode() const {
  return tensors_    ? SummaryMode::kTensors
         : segments_ ? SummaryMode::kSegments
                     : SummaryMode::kPlain;
}

bool SummaryModeDetector::StillPossible(SummaryMode candidate) const {
  switch (candidate) {
    case SummaryMode::kTensors:
      return true;
    case SummaryMode::kSegments:
      return !tensors_;
    case SummaryMode::kPlain:
      break;
  }
  return !tensors_ && !segments_;
}

}  // namespace gpumem::report
