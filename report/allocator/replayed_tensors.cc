#include "report/allocator/replayed_tensors.h"

#include <algorithm>
#include <memory>

namespace gpumem::report {
namespace {

struct TensorEvent {
  uint64_t at = 0;
  uint32_t tensor = 0;
  bool allocate = false;
};

// Every allocation and free of `tensors` in position order (ties in index order, as the trace
// numbered them).
std::vector<TensorEvent> EventsInOrder(const std::vector<ReplayedTensor>& tensors) {
  std::vector<TensorEvent> events;
  events.reserve(2 * tensors.size());
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    const ReplayedTensor& tensor = tensors[i];
    if (tensor.size == 0) continue;
    events.push_back({tensor.allocated_at, i, true});
    if (tensor.freed_at != kNeverFreed) events.push_back({tensor.freed_at, i, false});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const TensorEvent& a, const TensorEvent& b) { return a.at < b.at; });
  return events;
}

}  // namespace

uint64_t TensorReplayOutcome::ReservedPeak() const {
  uint64_t peak = 0;
  for (const TensorReplayDevice& device : devices) peak = std::max(peak, device.reserved_peak);
  return peak;
}

const TensorReplayDevice* TensorReplayOutcome::Device(int32_t device) const {
  for (const TensorReplayDevice& each : devices) {
    if (each.device == device) return &each;
  }
  return nullptr;
}

TensorReplayOutcome ReplayTensors(const std::vector<ReplayedTensor>& tensors, AllocatorKind kind,
                                  const NativeAllocatorConfig& config) {
  struct State {
    std::unique_ptr<AllocatorModel> model;
    TensorReplayDevice outcome;
  };
  std::map<int32_t, State> devices;
  for (const TensorEvent& event : EventsInOrder(tensors)) {
    const ReplayedTensor& tensor = tensors[event.tensor];
    State& state = devices[tensor.device];
    if (!state.model) {
      state.model = MakeAllocatorModel(kind, config);
      state.outcome.device = tensor.device;
    }
    if (state.outcome.oom) continue;  // the program died there
    if (!event.allocate) {
      state.model->Free(event.tensor);
      continue;
    }
    if (!state.model->Allocate(event.tensor, tensor.size, tensor.stream)) {
      state.outcome.oom = event.tensor;
      continue;
    }
    const AllocatorModelStats& stats = state.model->stats();
    if (stats.reserved > state.outcome.reserved_peak) {
      state.outcome.reserved_peak = stats.reserved;  // the running peak; the model's at the end
      state.outcome.peak_at = event.at;
    }
  }
  TensorReplayOutcome outcome;
  for (auto& [device, state] : devices) {
    state.outcome.reserved_peak = state.model->stats().reserved_peak;
    state.outcome.allocated_peak = state.model->stats().allocated_peak;
    outcome.devices.push_back(state.outcome);
  }
  return outcome;
}

}  // namespace gpumem::report
