#include "report/allocator/allocator_replay.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "report/format/sizes.h"
#include "report/replay/memory_space.h"
#include "report/replay/replay.h"
#include "report/trace/event_stream.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// The replay for one recording mode: one model per device, the allocations it counts by address.
class AllocatorReplay::Candidate {
 public:
  Candidate(SummaryMode mode, AllocatorKind kind, const AllocatorReplayConfig* config,
            CachedHolderOf* holders)
      : mode_(mode), kind_(kind), config_(config), holders_(holders) {}

  SummaryMode mode() const { return mode_; }

  void Add(const MemoryEvent& event) {
    if (SpaceOf(event) != MemorySpace::kPlain) return AddVmm(event);
    if (IsPinnedHost(event)) return;
    if (event.action() == ALLOC) {
      Allocate(event);
    } else if (event.action() == FREE && event.address() != 0) {
      Free(event);
    }
  }

  // The kept tensors a launch received (any pointer parameter inside one) were used at its seq.
  void AddLaunch(const LaunchEvent& launch) {
    for (const uint64_t pointer : launch.pointer_args()) {
      auto after = kept_live_.upper_bound(pointer);
      if (after == kept_live_.begin()) continue;
      ReplayedTensor& tensor = tensors_[std::prev(after)->second];
      if (pointer - std::prev(after)->first < std::max<uint64_t>(tensor.size, 1)) {
        tensor.last_use_at = JustAfter(launch.seq());
      }
    }
  }

  std::vector<ReplayedTensor> TakeTensors() { return std::move(tensors_); }

  std::vector<ModelledDevice> Finish(uint64_t first_timestamp_ns, uint64_t last_timestamp_ns) {
    std::vector<ModelledDevice> out;
    for (auto& [device, state] : devices_) {
      ModelledDevice& result = state.result;
      result.device = device;
      result.stats = state.model->stats();
      result.pool_stats = state.model->pool_stats();
      result.knows_blocks = state.model->KnowsBlocks();
      result.timeline = SampleTimeline(state.timeline.Points(), first_timestamp_ns,
                                       last_timestamp_ns, kFragmentationSamples);
      out.push_back(std::move(result));
    }
    std::stable_partition(out.begin(), out.end(),
                          [](const ModelledDevice& device) { return device.device >= 0; });
    return out;
  }

 private:
  struct Live {
    uint64_t size = 0;
    uint64_t stack_id = 0;
    int32_t device = 0;
    bool replayed = false;  // served by the model, else outside it
  };
  struct DeviceState {
    std::unique_ptr<AllocatorModel> model;
    ModelledDevice result;
    BucketedTimeline timeline;
    uint64_t outside = 0;     // live bytes not replayed (plain; VMM: vmm_outside_)
    uint64_t peak_noted = 0;  // the highest reserved so far
  };

  DeviceState& StateOf(int32_t device) {
    DeviceState& state = devices_[device];
    if (!state.model) {
      NativeAllocatorConfig model = config_->model;
      if (config_->device_memory_of) model.device_memory = config_->device_memory_of(device);
      state.model = MakeAllocatorModel(kind_, model);
      state.result.device_memory = model.device_memory;
    }
    return state;
  }

  void Allocate(const MemoryEvent& event) {
    DeviceState& state = StateOf(event.device());
    const bool replayed = CountedInMode(mode_, event, (*holders_)(event.stack_id()));
    if (!replayed) {
      state.outside = SaturatingAdd(state.outside, event.size());
      NoteOutside(state, event.device());
      live_[event.address()] = Live{event.size(), event.stack_id(), event.device(), false};
      return;
    }
    if (state.result.oom) return;  // the program died there
    AllocatorModel& model = *state.model;
    if (!model.Allocate(event.address(), event.size(), event.stream())) {
      state.result.oom = OomOf(event);
      return;
    }
    ++state.result.allocations;
    live_[event.address()] = Live{event.size(), event.stack_id(), event.device(), true};
    if (config_->keep_tensors) Keep(event);
    const AllocatorModelStats& stats = model.stats();
    if (stats.reserved > state.peak_noted) NotePeak(state, event);
    state.timeline.Add({event.timestamp_ns(), stats.reserved, stats.allocated});
  }

  void Free(const MemoryEvent& event) {
    auto it = live_.find(event.address());
    if (it == live_.end()) return;
    const Live live = it->second;
    live_.erase(it);
    DeviceState& state = StateOf(live.device);
    if (!live.replayed) {
      state.outside -= std::min(state.outside, live.size);
      return;
    }
    if (state.result.oom) return;
    state.model->Free(event.address());
    if (config_->keep_tensors) KeptFree(event);
    const AllocatorModelStats& stats = state.model->stats();
    state.timeline.Add({event.timestamp_ns(), stats.reserved, stats.allocated});
  }

  // VMM physical memory the model does not serve (NCCL's buffers, cuMemCreate by any library) is
  // outside it too, for as long as the driver keeps it: replay.h's rules (references, mappings;
  // other processes' imported memory on no device), in a replay of its own.
  void AddVmm(const MemoryEvent& event) {
    const MemorySpace space = SpaceOf(event);
    if (space != MemorySpace::kPhysical && space != MemorySpace::kMapping) return;
    const bool created = event.action() == ALLOC && space == MemorySpace::kPhysical;
    if (created && !IsImported(event) &&
        CountedInMode(mode_, event, (*holders_)(event.stack_id()))) {
      return;  // PyTorch's own segments (expandable): never the model's tensors
    }
    vmm_outside_.Add(event);
    if (created && event.device() >= 0) NoteOutside(StateOf(event.device()), event.device());
  }

  void NoteOutside(DeviceState& state, int32_t device) {
    const uint64_t outside = SaturatingAdd(state.outside, vmm_outside_.LiveBytes(device));
    state.result.outside_peak = std::max(state.result.outside_peak, outside);
  }

  void NotePeak(DeviceState& state, const MemoryEvent& event) {
    const AllocatorModel& model = *state.model;
    ModelledDevice& result = state.result;
    result.peak_seq = event.seq();
    result.peak_timestamp_ns = event.timestamp_ns();
    state.peak_noted = model.stats().reserved;
    result.allocated_at_peak = model.stats().allocated;
    result.non_releasable_at_peak = model.NonReleasable();
    result.largest_free_at_peak = model.LargestFreeBlock();
    result.free_in_segments_at_peak = model.FreeInSegments();
  }

  void Keep(const MemoryEvent& event) {
    ReplayedTensor tensor;
    tensor.size = event.size();
    tensor.stream = event.stream();
    tensor.stack_id = event.stack_id();
    tensor.device = event.device();
    tensor.allocated_at = PositionOf(event.seq());
    kept_live_[event.address()] = tensors_.size();
    tensors_.push_back(tensor);
  }

  void KeptFree(const MemoryEvent& event) {
    const auto it = kept_live_.find(event.address());
    if (it == kept_live_.end()) return;
    tensors_[it->second].freed_at = PositionOf(event.seq());
    kept_live_.erase(it);
  }

  ModelledOom OomOf(const MemoryEvent& event) const {
    ModelledOom oom;
    oom.seq = event.seq();
    oom.timestamp_ns = event.timestamp_ns();
    oom.size = event.size();
    oom.stream = event.stream();
    oom.stack_id = event.stack_id();
    absl::flat_hash_map<uint64_t, Tally> by_stack;
    for (const auto& [address, live] : live_) {
      if (!live.replayed || live.device != event.device()) continue;
      oom.live.Add(live.size);
      by_stack[live.stack_id].Add(live.size);
    }
    for (const auto& [stack_id, tally] : by_stack) oom.live_sites.push_back({stack_id, tally});
    std::sort(oom.live_sites.begin(), oom.live_sites.end(),
              [](const SiteTally& a, const SiteTally& b) {
                return a.tally.bytes != b.tally.bytes ? a.tally.bytes > b.tally.bytes
                                                      : a.stack_id < b.stack_id;
              });
    return oom;
  }

  SummaryMode mode_;
  AllocatorKind kind_;
  const AllocatorReplayConfig* config_;  // the replay's
  CachedHolderOf* holders_;
  std::map<int32_t, DeviceState> devices_;
  absl::flat_hash_map<uint64_t, Live> live_;  // by address
  Replay vmm_outside_;                        // VMM memory not the model's (AddVmm)
  // With keep_tensors: the allocations replayed, and the live ones by address (ordered, so a
  // launch's interior pointers find theirs).
  std::vector<ReplayedTensor> tensors_;
  std::map<uint64_t, size_t> kept_live_;
};

AllocatorReplay::AllocatorReplay(AllocatorKind kind, AllocatorReplayConfig config,
                                 HolderOfStack holder_of)
    : holders_(std::make_unique<CachedHolderOf>(std::move(holder_of))),
      candidates_([this, kind](SummaryMode mode) {
        return std::make_unique<Candidate>(mode, kind, &config_, holders_.get());
      }),
      kind_(kind),
      config_(std::move(config)) {}

AllocatorReplay::AllocatorReplay(AllocatorKind kind, uint64_t device_memory,
                                 HolderOfStack holder_of)
    : AllocatorReplay(kind, AllocatorReplayConfig{NativeAllocatorConfig{device_memory}, {}},
                      std::move(holder_of)) {}

AllocatorReplay::~AllocatorReplay() = default;

void AllocatorReplay::Add(const MemoryEvent& event) {
  if (!any_event_) first_timestamp_ns_ = event.timestamp_ns();
  any_event_ = true;
  last_timestamp_ns_ = std::max(last_timestamp_ns_, event.timestamp_ns());
  candidates_.Add(event, *holders_,
                  [&event](std::unique_ptr<Candidate>& candidate) { candidate->Add(event); });
}

void AllocatorReplay::AddLaunch(const LaunchEvent& launch) {
  if (!config_.keep_tensors) return;
  candidates_.ForEach(
      [&launch](std::unique_ptr<Candidate>& candidate) { candidate->AddLaunch(launch); });
}

AllocatorReplayResult AllocatorReplay::Finish() {
  AllocatorReplayResult result;
  result.kind = kind_;
  result.device_memory = config_.model.device_memory;
  result.mode = candidates_.detector().mode();
  result.devices = candidates_.Chosen()->Finish(first_timestamp_ns_, last_timestamp_ns_);
  result.tensors = candidates_.Chosen()->TakeTensors();
  return result;
}

std::vector<AllocatorReplayResult> ReplayThroughAllocators(TraceFile& file,
                                                           const std::vector<AllocatorKind>& kinds,
                                                           const AllocatorReplayConfig& config) {
  std::vector<std::unique_ptr<AllocatorReplay>> replays;
  for (const AllocatorKind kind : kinds) {
    replays.push_back(std::make_unique<AllocatorReplay>(kind, config, HoldersOfTrace(file)));
  }
  LaunchVisitor launches;
  if (config.keep_tensors) {
    launches = [&replays](const LaunchEvent& launch) {
      for (const std::unique_ptr<AllocatorReplay>& replay : replays) replay->AddLaunch(launch);
    };
  }
  StreamMemoryEventsBySeq(
      file,
      [&replays](const MemoryEvent& event) {
        for (const std::unique_ptr<AllocatorReplay>& replay : replays) replay->Add(event);
      },
      kReorderWindow, nullptr, launches);
  std::vector<AllocatorReplayResult> results;
  for (const std::unique_ptr<AllocatorReplay>& replay : replays)
    results.push_back(replay->Finish());
  return results;
}

std::vector<AllocatorReplayResult> ReplayThroughAllocators(TraceFile& file,
                                                           const std::vector<AllocatorKind>& kinds,
                                                           uint64_t device_memory) {
  return ReplayThroughAllocators(file, kinds,
                                 AllocatorReplayConfig{NativeAllocatorConfig{device_memory}, {}});
}

namespace {

absl::StatusOr<AllocatorReplayResult> ReplayThroughAllocator(const std::string& path,
                                                             AllocatorKind kind,
                                                             const AllocatorReplayConfig& config) {
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  if (!file.ok()) return file.status();
  return std::move(ReplayThroughAllocators(**file, {kind}, config).front());
}

}  // namespace

absl::StatusOr<AllocatorReplayResult> ReplayThroughAllocator(const std::string& path,
                                                             AllocatorKind kind,
                                                             uint64_t device_memory) {
  return ReplayThroughAllocator(path, kind,
                                AllocatorReplayConfig{NativeAllocatorConfig{device_memory}, {}});
}

absl::StatusOr<std::vector<uint64_t>> SmallestFit(const std::string& path, AllocatorKind kind,
                                                  const AllocatorReplayResult& unlimited) {
  // Per device, in steps: `high` fits (the unlimited replay never asked for more), `low` does not.
  // Devices are replayed apart, so one replay probes every device at its own middle: the search
  // costs as many replays as the widest device's, however many devices the trace has.
  struct Search {
    uint64_t low = 0;
    uint64_t high = 0;
    uint64_t middle = 0;
  };
  std::map<int32_t, Search> searches;
  for (const ModelledDevice& device : unlimited.devices) {
    const uint64_t peak = device.stats.reserved_peak;
    searches[device.device].high = peak / kFitSearchStep + (peak % kFitSearchStep != 0 ? 1 : 0);
  }
  auto searching = [](const Search& search) { return search.high - search.low > 1; };
  AllocatorReplayConfig probe_config;
  probe_config.device_memory_of = [&searches](int32_t device) {
    const auto it = searches.find(device);
    return it == searches.end() ? kUnlimitedDeviceMemory
                                : SaturatingMultiply(it->second.middle, kFitSearchStep);
  };
  while (std::any_of(searches.begin(), searches.end(),
                     [&](const auto& entry) { return searching(entry.second); })) {
    for (auto& [device, search] : searches) {
      // A device found already is probed at its answer, which fits.
      search.middle = searching(search) ? search.low + (search.high - search.low) / 2 : search.high;
    }
    absl::StatusOr<AllocatorReplayResult> probe = ReplayThroughAllocator(path, kind, probe_config);
    if (!probe.ok()) return probe.status();
    for (auto& [device, search] : searches) {
      if (!searching(search)) continue;
      const auto same = std::find_if(
          probe->devices.begin(), probe->devices.end(),
          [device = device](const ModelledDevice& other) { return other.device == device; });
      const bool fit = same == probe->devices.end() || !same->oom.has_value();
      (fit ? search.high : search.low) = search.middle;
    }
  }
  std::vector<uint64_t> fits;
  for (const ModelledDevice& device : unlimited.devices) {
    fits.push_back(SaturatingMultiply(searches[device.device].high, kFitSearchStep));
  }
  return fits;
}

}  // namespace gpumem::report
