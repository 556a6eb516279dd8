#include "report/analysis/summary_table.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/allocator/allocator_replay.h"
#include "report/allocator/tensor_mode.h"
#include "report/format/json.h"
#include "report/format/names.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/replay/live_ranges.h"
#include "report/replay/memory_space.h"
#include "report/replay/replay.h"
#include "report/stacks/memory_holders.h"
#include "report/stacks/symbolizer.h"

namespace gpumem::report {

// ---- formatting, as PyTorch's memory_summary() ----

std::string FormatSummarySize(uint64_t bytes, uint64_t reference) {
  static constexpr const char* kUnits[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double scale = static_cast<double>(reference);
  size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && scale >= 768.0 * 1024) {
    ++unit;
    bytes /= 1024;
    scale /= 1024;
  }
  return absl::StrFormat("%6d %s", bytes, kUnits[unit]);
}

std::string FormatSummaryCount(uint64_t count, uint64_t reference) {
  static constexpr const char* kUnits[] = {" ", "K", "M"};
  double scale = static_cast<double>(reference);
  size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && scale >= 750.0 * 1000) {
    ++unit;
    count /= 1000;
    scale /= 1000;
  }
  return absl::StrFormat("%7d %s ", count, kUnits[unit]);
}

namespace {

constexpr int32_t kOutOfMemory = 2;  // cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY
constexpr char kOtherId[] = "other";
constexpr char kOtherName[] = "outside PyTorch's allocator";

// What one allocation is in the table.
enum class Role { kTensor, kSegment, kPlain, kHeld };

}  // namespace

// Counts one trace's allocations per device for one recording mode. Which allocation a free ends is
// the analysis's to find (SummaryAnalysis::Tables), once for every mode.
class SummaryAnalysis::Builder {
 public:
  Builder(SummaryMode mode, CachedHolderOf* holders) : holders_(holders) { summary_.mode = mode; }

  SummaryMode mode() const { return summary_.mode; }

  Summary Finish() {
    for (auto& [device, state] : devices_) {
      if (state.pending) ++state.summary.ooms;
      for (Holding& holding : state.holdings) {
        holding.NameApis();
        std::sort(holding.value.apis.begin(), holding.value.apis.end());
        holding.value.apis.erase(std::unique(holding.value.apis.begin(), holding.value.apis.end()),
                                 holding.value.apis.end());
        state.summary.holdings.push_back(std::move(holding.value));
      }
      state.summary.device = device;
      summary_.devices.push_back(std::move(state.summary));
    }
    // -1 (device not known) last.
    std::stable_partition(summary_.devices.begin(), summary_.devices.end(),
                          [](const DeviceSummary& device) { return device.device >= 0; });
    return std::move(summary_);
  }

  // A private class of SummaryAnalysis: its parts are the analysis's to use.
  struct Holding {
    SummaryHolding value;
    // The APIs seen, as bits (the Api enum is small) until Finish() names them: naming each
    // allocation's API as it comes costs a string.
    uint64_t api_bits = 0;
    std::vector<Api> other_apis;  // any beyond the bits (a newer schema)

    void NoteApi(Api api) {
      const auto bit = static_cast<uint32_t>(api);
      if (bit < 64) {
        api_bits |= uint64_t{1} << bit;
      } else if (std::find(other_apis.begin(), other_apis.end(), api) == other_apis.end()) {
        other_apis.push_back(api);
      }
    }
    void NameApis() {
      for (uint32_t bit = 0; bit < 64; ++bit) {
        if ((api_bits >> bit & 1) != 0) value.apis.push_back(ApiName(static_cast<Api>(bit)));
      }
      for (Api api : other_apis) value.apis.push_back(ApiName(api));
    }
  };
  struct Pending {
    uint64_t size = 0;
    Api api = API_UNKNOWN;
  };
  struct DeviceState {
    DeviceSummary summary;
    std::vector<Holding> holdings;
    absl::flat_hash_map<const MemoryHolder*, int> holding_of;  // HoldingOf()'s answers
    const MemoryHolder* last_holder = nullptr;                 // HoldingOf()'s last question
    int last_holding = -1;                                     // and answer (-1: none yet)
    std::optional<Pending> pending;  // the last out-of-memory failure, not yet resolved
  };
  struct Live {
    uint64_t size = 0;
    int32_t device = 0;
    Role role = Role::kPlain;
    bool stream_ordered = false;
    int holding = -1;  // index into the device's holdings
  };
  // The role of an allocation made with `event` in the summary's mode, and the holder that makes
  // it a holding (left out of the rows, or in kPlain a library's share of them).
  Role RoleOf(const MemoryEvent& event, const MemoryHolder** holder) {
    *holder = (*holders_)(event.stack_id());
    if (!CountedInMode(summary_.mode, event, *holder)) return Role::kHeld;
    switch (summary_.mode) {
      case SummaryMode::kTensors:
        return Role::kTensor;
      case SummaryMode::kSegments:
        return Role::kSegment;
      case SummaryMode::kPlain:
        break;
    }
    return Role::kPlain;
  }

  DeviceState& StateOf(int32_t device) {
    if (last_state_ == nullptr || last_device_ != device) {  // map nodes do not move
      last_state_ = &devices_[device];
      last_device_ = device;
    }
    return *last_state_;
  }

  int HoldingOf(DeviceState& state, const MemoryHolder* holder) {
    // Consecutive allocations nearly always share their holder (nullptr: outside every library).
    if (state.last_holding >= 0 && state.last_holder == holder) return state.last_holding;
    auto cached = state.holding_of.find(holder);
    if (cached == state.holding_of.end()) {
      cached = state.holding_of.emplace(holder, FindOrAddHolding(state, holder)).first;
    }
    state.last_holder = holder;
    state.last_holding = cached->second;
    return cached->second;
  }
  int FindOrAddHolding(DeviceState& state, const MemoryHolder* holder) {
    const std::string id = holder != nullptr ? holder->id : kOtherId;
    for (size_t i = 0; i < state.holdings.size(); ++i) {
      if (state.holdings[i].value.id == id) return static_cast<int>(i);
    }
    Holding& holding = state.holdings.emplace_back();
    holding.value.id = id;
    holding.value.name = holder != nullptr ? holder->name : kOtherName;
    return static_cast<int>(state.holdings.size() - 1);
  }

  void Count(const Live& live, bool increase) {
    DeviceSummary& device = StateOf(live.device).summary;
    const uint64_t size = live.size;
    auto apply = [&](PoolStat& stat, uint64_t amount, bool small) {
      if (increase) {
        stat.Increase(amount, small);
      } else {
        stat.Decrease(amount, small);
      }
    };
    switch (live.role) {
      case Role::kTensor:
        apply(device.allocated_bytes, size, size <= kSmallAllocationLimit);
        apply(device.allocations, 1, size <= kSmallAllocationLimit);
        break;
      case Role::kSegment:
        apply(device.reserved_bytes, size, size <= kSmallSegmentLimit);
        apply(device.segments, 1, size <= kSmallSegmentLimit);
        break;
      case Role::kPlain:
        apply(device.allocated_bytes, size, size <= kSmallAllocationLimit);
        apply(device.allocations, 1, size <= kSmallAllocationLimit);
        if (!live.stream_ordered) {
          apply(device.reserved_bytes, size, size <= kSmallAllocationLimit);
          apply(device.segments, 1, size <= kSmallAllocationLimit);
        }
        break;
      case Role::kHeld:
        break;
    }
    if (live.holding >= 0) {
      SummaryHolding& holding = StateOf(live.device).holdings[live.holding].value;
      if (increase) {
        holding.bytes = SaturatingAdd(holding.bytes, size);
        ++holding.count;
        holding.live_bytes = SaturatingAdd(holding.live_bytes, size);
        ++holding.live_count;
      } else {
        holding.live_bytes -= std::min(holding.live_bytes, size);
        holding.live_count -= std::min<uint64_t>(holding.live_count, 1);
      }
    }
  }

  // An attempt of a counted allocation on the device: resolves the previous out-of-memory failure
  // as a retry (same size and API) or an OOM.
  void Attempt(DeviceState& state, const MemoryEvent& event, bool failed) {
    if (state.pending) {
      if (state.pending->size == event.size() && state.pending->api == event.api()) {
        ++state.summary.retries;
      } else {
        ++state.summary.ooms;
      }
      state.pending.reset();
    }
    if (failed) state.pending = Pending{event.size(), event.api()};
  }

  // A device-memory allocation made with `event`: what this mode counts of it, into *live (to be
  // passed to Count()), its attempt and its holding noted. Field by field: a Live built whole and
  // copied in stalls on store forwarding (its fields' narrow stores cannot feed the copy's wide
  // loads), which cost `report --summary` a seventh of its time.
  void Begin(const MemoryEvent& event, Live* live) {
    const MemoryHolder* holder = nullptr;
    const Role role = RoleOf(event, &holder);
    DeviceState& state = StateOf(event.device());
    if (role != Role::kHeld) Attempt(state, event, false);
    live->size = event.size();
    live->device = event.device();
    live->role = role;
    live->stream_ordered = IsStreamOrdered(event);
    live->holding = -1;
    if (role == Role::kPlain && live->stream_ordered) {
      ++state.summary.pool_allocations;
      state.summary.pool_allocation_bytes =
          SaturatingAdd(state.summary.pool_allocation_bytes, event.size());
    }
    if (role == Role::kHeld || (role == Role::kPlain && holder != nullptr)) {
      live->holding = HoldingOf(state, holder);
      state.holdings[live->holding].NoteApi(event.api());
    }
  }

  void Failed(const MemoryEvent& event) {
    if (event.result() != kOutOfMemory) return;
    const MemoryHolder* holder = nullptr;
    if (RoleOf(event, &holder) == Role::kHeld) return;
    Attempt(StateOf(event.device()), event, true);
  }

  CachedHolderOf* holders_;  // the analysis's, shared by the builders of every mode
  Summary summary_;
  std::map<int32_t, DeviceState> devices_;
  DeviceState* last_state_ = nullptr;  // StateOf()'s last answer
  int32_t last_device_ = 0;
};

// The live device memory of the trace, for every mode at once: plain allocations by address
// range, physical memory until released and unmapped (as report/replay/replay.h matches frees).
// Each allocation keeps what each mode counts of it; `count(const Shared&, bool increase)` is
// called when one starts and ends.
class SummaryAnalysis::Tables {
 public:
  struct Shared {
    uint64_t size = 0;                     // LiveRanges reads it
    std::array<Builder::Live, 3> by_mode;  // indexed by SummaryMode
  };

  template <typename Count>
  void Allocate(const MemoryEvent& event, const Shared& shared, Count&& count) {
    if (SpaceOf(event) == MemorySpace::kPhysical) {
      auto old = physical_.find(event.handle());
      if (old != physical_.end()) {  // handed out again: its release was missed
        count(old->second.shared, false);
        physical_.erase(old);
      }
      physical_[event.handle()].shared = shared;
    } else {
      bool overlapped = false;
      plain_.Allocate(event.address(), event.size(), &overlapped,
                      [&](const Shared& dropped) { count(dropped, false); }) = shared;
    }
    count(shared, true);
  }

  template <typename Count>
  void Free(const MemoryEvent& event, Count&& count) {
    switch (SpaceOf(event)) {
      case MemorySpace::kPlain:
        if (event.address() != 0) {
          plain_.Free(event.address(), [&](const Shared& live) { count(live, false); });
        }
        return;
      case MemorySpace::kPhysical: {
        auto it = physical_.find(event.handle());
        if (it == physical_.end() || it->second.references == 0) return;
        if (--it->second.references > 0) return;
        if (it->second.mappings == 0) {
          count(it->second.shared, false);
          physical_.erase(it);
        }
        return;
      }
      case MemorySpace::kMapping:
        Unmap(event, count);
        return;
      case MemorySpace::kReservation:
        return;
    }
  }

  // One more reference to a live handle (cuMemRetainAllocationHandle, an import of the process's
  // own handle): one more release before it goes. Other processes' handles are not in the table.
  void Retain(const MemoryEvent& event) {
    auto it = physical_.find(event.handle());
    if (it != physical_.end() && event.result() == 0) ++it->second.references;
  }

  template <typename Count>
  void Map(const MemoryEvent& event, Count&& count) {
    auto old = mappings_.find(event.address());
    if (old != mappings_.end()) {
      const uint64_t handle = old->second;
      mappings_.erase(old);
      Unmapped(handle, count);
    }
    mappings_[event.address()] = event.handle();
    auto physical = physical_.find(event.handle());
    if (physical != physical_.end()) ++physical->second.mappings;
  }

 private:
  struct Physical {
    Shared shared;
    uint32_t references = 1;  // 0: released, kept by its mappings
    uint32_t mappings = 0;
  };

  template <typename Count>
  void Unmap(const MemoryEvent& event, Count& count) {
    auto first = mappings_.lower_bound(event.address());
    auto last = event.size() == 0 ? (first != mappings_.end() && first->first == event.address()
                                         ? std::next(first)
                                         : first)
                                  : mappings_.lower_bound(RangeEnd(event.address(), event.size()));
    std::vector<uint64_t> handles;
    for (auto it = first; it != last; ++it) handles.push_back(it->second);
    mappings_.erase(first, last);
    for (uint64_t handle : handles) Unmapped(handle, count);
  }

  template <typename Count>
  void Unmapped(uint64_t handle, Count& count) {
    auto it = physical_.find(handle);
    if (it == physical_.end()) return;
    if (it->second.mappings > 0) --it->second.mappings;
    if (it->second.mappings > 0 || it->second.references > 0) return;
    count(it->second.shared, false);
    physical_.erase(it);
  }

  LiveRanges<Shared> plain_;
  absl::flat_hash_map<uint64_t, Physical> physical_;  // by cuMemCreate handle
  std::map<uint64_t, uint64_t> mappings_;             // address -> handle, ordered for ranges
};

SummaryAnalysis::SummaryAnalysis(HolderOfStack holder_of, const TraceFile* trace,
                                 SummaryModelChoice model)
    : trace_(trace),
      model_choice_(model),
      holders_(std::make_unique<CachedHolderOf>(std::move(holder_of))),
      tables_(std::make_unique<Tables>()),
      candidates_(
          [this](SummaryMode mode) { return std::make_unique<Builder>(mode, holders_.get()); }) {}

SummaryAnalysis::SummaryAnalysis(HolderOfStack holder_of, SummaryModelChoice model)
    : SummaryAnalysis(std::move(holder_of), nullptr, model) {}

SummaryAnalysis::SummaryAnalysis(const TraceFile& trace, SummaryModelChoice model)
    : SummaryAnalysis(HoldersOfTrace(trace), &trace, model) {}

SummaryAnalysis::~SummaryAnalysis() = default;

void SummaryAnalysis::StartModel() {
  const TraceFile* trace = trace_;
  model_ = ChooseSummaryModel(model_choice_, [trace](const std::string& name) {
    return trace == nullptr ? std::nullopt : trace->HeaderOption(name);
  });
  model_choice_ = SummaryModelChoice::kNone;  // started
  if (!model_) return;
  AllocatorReplayConfig config;
  if (model_->kind == AllocatorKind::kNative) config.model.max_split_size = model_->max_split_size;
  if (trace != nullptr) {
    config.device_memory_of = [trace](int32_t device) {
      for (const Device& known : trace->devices()) {
        if (known.ordinal() == device && known.total_memory() > 0) return known.total_memory();
      }
      return kUnlimitedDeviceMemory;
    };
  }
  // The replay is the holders' second user: it asks the analysis's cache, one lookup per stack.
  CachedHolderOf* holders = holders_.get();
  replay_ = std::make_unique<AllocatorReplay>(
      model_->kind, std::move(config),
      [holders](uint64_t stack_id) { return (*holders)(stack_id); });
}

void SummaryAnalysis::Add(const MemoryEvent& event) {
  if (model_choice_ != SummaryModelChoice::kNone) StartModel();
  // Only the tensors, and the frees once there is a tensor they could free, go to the model: the
  // replay then decides on kTensors as soon as it sees one, and other traces cost it nothing.
  if (replay_) {
    if (event.action() == ALLOC &&
        CountedInMode(SummaryMode::kTensors, event, (*holders_)(event.stack_id()))) {
      tensor_replayed_ = true;
      replay_->Add(event);
    } else if (event.action() == FREE && tensor_replayed_) {
      replay_->Add(event);
    }
  }
  // First the detector: a mode it rules out is dropped before the event is counted.
  candidates_.Add(event, *holders_, [](std::unique_ptr<Builder>&) {});
  auto count = [this](const Tables::Shared& shared, bool increase) {
    candidates_.ForEach([&](std::unique_ptr<Builder>& builder) {
      builder->Count(shared.by_mode[static_cast<size_t>(builder->mode())], increase);
    });
  };
  switch (event.action()) {
    case ALLOC:
      if (IsDeviceMemory(event)) {
        Tables::Shared shared;
        shared.size = event.size();
        candidates_.ForEach([&](std::unique_ptr<Builder>& builder) {
          builder->Begin(event, &shared.by_mode[static_cast<size_t>(builder->mode())]);
        });
        tables_->Allocate(event, shared, count);
      }
      if (SpaceOf(event) == MemorySpace::kMapping) tables_->Map(event, count);
      if (IsImported(event)) tables_->Retain(event);
      break;
    case RETAIN:
      tables_->Retain(event);
      break;
    case ALLOC_FAILED:  // torch's num_ooms: out of memory only, not a refused handle type
      if (IsDeviceMemory(event) && IsOutOfMemoryResult(event.result())) {
        candidates_.ForEach([&](std::unique_ptr<Builder>& builder) { builder->Failed(event); });
      }
      break;
    case FREE:
      tables_->Free(event, count);
      break;
    default:
      break;
  }
}

Summary SummaryAnalysis::Finish() {
  Summary summary = candidates_.Chosen()->Finish();
  summary.expandable_segments = candidates_.detector().expandable_segments();
  if (replay_ && summary.mode == SummaryMode::kTensors) {
    summary.model = model_;
    const AllocatorReplayResult modelled = replay_->Finish();
    for (DeviceSummary& device : summary.devices) {
      DeviceModel& model = device.model.emplace();
      model.device_memory = modelled.device_memory;  // a device without tensors: none replayed
      for (const ModelledDevice& replayed : modelled.devices) {
        if (replayed.device != device.device) continue;
        model.device_memory = replayed.device_memory;
        model.stats = replayed.stats;
        model.pool_stats = replayed.pool_stats;
        model.non_releasable_at_peak = replayed.non_releasable_at_peak;
        model.ran_out = replayed.oom.has_value();
      }
    }
  }
  if (trace_ == nullptr) return summary;
  summary.complete = trace_->end().complete();
  summary.ended = trace_->end().recording;
  for (DeviceSummary& device : summary.devices) {
    device.name = DeviceName(device.device, *trace_);
    if (const TraceFile::PoolReserved* pools = trace_->FindPoolReserved(device.device)) {
      device.pool_reserved_known = true;
      device.pool_reserved_current = pools->current;
      device.pool_reserved_peak = pools->peak;
    }
  }
  return summary;
}

Summary ComputeSummary(const std::vector<MemoryEvent>& events, const HolderOfStack& holder_of,
                       SummaryModelChoice model) {
  SummaryAnalysis analysis(holder_of, model);
  for (const MemoryEvent& event : events) analysis.Add(event);
  return analysis.Finish();
}

Summary SummarizeTrace(const TraceFile& trace, const std::vector<MemoryEvent>& events) {
  SummaryAnalysis analysis(trace);
  for (const MemoryEvent& event : events) analysis.Add(event);
  return analysis.Finish();
}

// ---- the model of the modelled rows ----

std::optional<SummaryModel> ChooseSummaryModel(
    SummaryModelChoice choice,
    const std::function<std::optional<std::string>(const std::string&)>& option) {
  if (choice == SummaryModelChoice::kNone) return std::nullopt;
  SummaryModel model;
  model.chosen = choice != SummaryModelChoice::kFromSettings;
  if (choice == SummaryModelChoice::kExpandable) model.kind = AllocatorKind::kExpandable;
  const std::optional<UserAllocConf> conf = UserAllocConfOf(option);
  if (!conf) return model;
  const std::map<std::string, std::string> settings = ParseAllocConf(conf->value);
  std::vector<std::string> taken;
  if (auto it = settings.find("expandable_segments");
      it != settings.end() && absl::EqualsIgnoreCase(it->second, "true")) {
    if (!model.chosen) model.kind = AllocatorKind::kExpandable;
    taken.push_back(model.kind == AllocatorKind::kExpandable
                        ? "expandable_segments:True, so the expandable-segments model"
                        : "expandable_segments:True, set aside by --allocator native");
  }
  if (auto it = settings.find("max_split_size_mb"); it != settings.end()) {
    // PyTorch's floor is its 20 MiB large segment; the cap keeps the bytes in range.
    constexpr uint64_t kMaxMegabytes = uint64_t{1} << 40;
    uint64_t megabytes = 0;
    if (absl::SimpleAtoi(it->second, &megabytes)) {
      megabytes =
          std::clamp<uint64_t>(megabytes, NativeAllocatorModel::kLargeBuffer >> 20, kMaxMegabytes);
      model.max_split_size = megabytes << 20;
      taken.push_back(model.kind == AllocatorKind::kNative
                          ? absl::StrCat("max_split_size_mb:", megabytes)
                          : absl::StrCat("max_split_size_mb:", megabytes,
                                         ", which the expandable-segments model does not keep"));
    }
  }
  model.settings =
      absl::StrCat(conf->variable, conf->before_tensors ? " was '" : "='", Printable(conf->value),
                   "'", conf->before_tensors ? " before gpumem record --tensors" : "", ": ",
                   taken.empty() ? "nothing the model keeps" : absl::StrJoin(taken, "; "));
  return model;
}

// ---- rows and notes ----

namespace {

constexpr char kAllocatedMemory[] = "Allocated memory";
constexpr char kActiveMemory[] = "Active memory";
constexpr char kRequestedMemory[] = "Requested memory";
constexpr char kReservedMemory[] = "GPU reserved memory";
constexpr char kNonReleasableMemory[] = "Non-releasable memory";
constexpr char kAllocations[] = "Allocations";
constexpr char kActiveAllocs[] = "Active allocs";
constexpr char kReservedSegments[] = "GPU reserved segments";
constexpr char kNonReleasableAllocs[] = "Non-releasable allocs";
constexpr char kOversizeAllocations[] = "Oversize allocations";
constexpr char kOversizeSegments[] = "Oversize GPU segments";

// What the trace says of the device's stream-ordered memory pools' own size.
std::string PoolReservedNote(const DeviceSummary& device) {
  if (!device.pool_reserved_known) {
    return "n/a: the memory pool's reserved size is not in this trace (newer versions of gpumem "
           "record it from the pool's attributes)";
  }
  return absl::StrCat(
      "n/a in the rows (a pool's size is not split into large and small pool, and it has no "
      "segments); its own reserved size, from its attributes after each stream-ordered "
      "allocation, peaked at ",
      FormatBytes(device.pool_reserved_peak), " (", device.pool_reserved_peak,
      " bytes, what torch.cuda.max_memory_reserved() reports in this mode) and was ",
      FormatBytes(device.pool_reserved_current), " at the end");
}

// The memory a device's model was given, for a note.
std::string ModelDeviceMemory(const DeviceModel& model) {
  if (model.device_memory == kUnlimitedDeviceMemory) {
    return "with no limit on its memory (the trace does not give the device's total)";
  }
  return absl::StrCat("on a device of ", FormatBytes(model.device_memory),
                      " (its total memory; the CUDA context and memory allocated outside the "
                      "allocator, such as cuBLAS workspaces, not taken off)");
}

// The notes of a tensor-level summary's modelled rows: what was modelled, with what, and how.
void AppendModelNotes(const SummaryModel& model, const DeviceSummary& device,
                      std::vector<SummaryNote>* notes) {
  const DeviceModel& modelled = *device.model;
  const bool native = model.kind == AllocatorKind::kNative;
  const bool max_split_set = model.max_split_size != std::numeric_limits<uint64_t>::max();
  notes->push_back(
      {{},
       absl::StrCat("rows marked * are modelled: ", AllocatorKindDescription(model.kind),
                    " replayed over the recorded tensors (report/allocator/allocator_model.h) ",
                    ModelDeviceMemory(modelled), "; the others are measured")});
  if (!model.settings.empty()) {
    notes->push_back({{}, absl::StrCat("allocator settings in the trace: ", model.settings)});
  }
  if (model.chosen) {
    notes->push_back(
        {{},
         absl::StrCat("the model was chosen with --allocator ", AllocatorKindName(model.kind),
                      " (native, expandable, or none for n/a)")});
  }
  std::string reserved =
      native ? "modelled: the segments the native allocator would have cudaMalloc'd for these "
               "tensors (2 MiB for the small pool; 20 MiB, or the request rounded up to 2 MiB, "
               "for the large one), kept until empty_cache or the retry before an OOM"
             : "modelled: the pages the allocator would have mapped (2 MiB in the small pool, "
               "20 MiB in the large one); a segment is a pool's virtual range while it has a "
               "page mapped";
  if (device.pool_reserved_known) {
    absl::StrAppend(&reserved, "; measured, the cudaMallocAsync pool itself peaked at ",
                    FormatBytes(device.pool_reserved_peak), " (", device.pool_reserved_peak,
                    " bytes)");
  }
  notes->push_back({{kReservedMemory, kReservedSegments}, std::move(reserved)});
  notes->push_back(
      {{kNonReleasableMemory, kNonReleasableAllocs},
       native
           ? "modelled: free blocks inside segments that also hold tensors (PyTorch's "
             "inactive split blocks), which empty_cache cannot give back"
           : absl::StrCat("modelled: 0, as PyTorch reports it: it leaves expandable segments "
                          "out of these statistics (their whole free pages can be "
                          "unmapped); free pieces of pages, which cannot, came to ",
                          FormatBytes(modelled.non_releasable_at_peak), " at the reserved peak")});
  std::string oversize;
  if (!max_split_set) {
    oversize = "modelled: 0: max_split_size_mb was not set, so no block is oversize";
  } else if (native) {
    oversize = absl::StrCat("modelled: blocks and segments of at least max_split_size_mb:",
                            model.max_split_size >> 20, ", which are never split");
  } else {
    oversize = "n/a: the expandable-segments model does not keep max_split_size_mb";
  }
  notes->push_back({{kOversizeAllocations, kOversizeSegments}, std::move(oversize)});
  std::string failures =
      "modelled: a retry is the allocator emptying its cache to make room, an OOM running out all "
      "the same";
  if (modelled.ran_out) {
    absl::StrAppend(&failures,
                    "; it ran out, where the program would have died: the modelled rows stop "
                    "there");
  }
  notes->push_back({{"CUDA OOMs", "cudaMalloc retries"}, std::move(failures)});
}

}  // namespace

std::vector<SummaryRow> SummaryRows(const Summary& summary, const DeviceSummary& device) {
  const bool tensors = summary.mode != SummaryMode::kSegments;  // tensors or plain allocations
  const bool segments = summary.mode != SummaryMode::kTensors;  // segments or plain allocations
  const PoolStat* allocated = tensors ? &device.allocated_bytes : nullptr;
  const PoolStat* allocations = tensors ? &device.allocations : nullptr;
  const PoolStat* reserved = segments ? &device.reserved_bytes : nullptr;
  const PoolStat* segment_count = segments ? &device.segments : nullptr;
  std::vector<SummaryRow> rows = {
      {kAllocatedMemory, "allocated_bytes", true, true, allocated},
      {kActiveMemory, "active_bytes", true, true, allocated},
      {kRequestedMemory, "requested_bytes", true, true, allocated},
      {kReservedMemory, "reserved_bytes", true, true, reserved},
      {kNonReleasableMemory, "inactive_split_bytes", true, true, nullptr},
      {kAllocations, "allocation", false, true, allocations},
      {kActiveAllocs, "active", false, true, allocations},
      {kReservedSegments, "segment", false, true, segment_count},
      {kNonReleasableAllocs, "inactive_split", false, true, nullptr},
      {kOversizeAllocations, "oversize_allocations", false, false, nullptr},
      {kOversizeSegments, "oversize_segments", false, false, nullptr},
  };
  if (summary.model && device.model) {
    const AllocatorPoolStats& modelled = device.model->pool_stats;
    // The expandable model does not keep max_split_size: its oversize rows would be wrong.
    const bool oversize = summary.model->kind == AllocatorKind::kNative ||
                          summary.model->max_split_size == std::numeric_limits<uint64_t>::max();
    const std::pair<const char*, const PoolStat*> filled[] = {
        {kReservedMemory, &modelled.reserved_bytes},
        {kNonReleasableMemory, &modelled.inactive_split_bytes},
        {kReservedSegments, &modelled.segment},
        {kNonReleasableAllocs, &modelled.inactive_split},
        {kOversizeAllocations, oversize ? &modelled.oversize_allocations : nullptr},
        {kOversizeSegments, oversize ? &modelled.oversize_segments : nullptr},
    };
    for (SummaryRow& row : rows) {
      for (const auto& [metric, value] : filled) {
        if (absl::string_view(row.metric) != metric || value == nullptr) continue;
        row.value = value;
        row.modelled = true;
      }
    }
  }
  return rows;
}

namespace {

// The notes on what each mode of recording measures, and what it cannot.
void AppendTensorNotes(const Summary& summary, const DeviceSummary& device,
                       std::vector<SummaryNote>* notes) {
  notes->push_back(
      {{},
       "recorded at tensor level (PyTorch's cudaMallocAsync backend): each stream-ordered "
       "allocation made from libc10_cuda.so is one tensor; from small pool: tensors of at most "
       "1 MiB"});
  notes->push_back({{kActiveMemory, kActiveAllocs},
                    "the same as Allocated: a tensor freed with cudaFreeAsync goes back to the "
                    "pool in stream order, so no freed block waits for other streams (what "
                    "the native allocator counts as active but not allocated)"});
  notes->push_back({{kRequestedMemory},
                    "the same as Allocated: this backend asks cudaMallocAsync for exactly the "
                    "bytes requested, without rounding"});
  if (summary.model && device.model) {
    AppendModelNotes(*summary.model, device, notes);
    return;
  }
  notes->push_back({{kReservedMemory, kReservedSegments}, PoolReservedNote(device)});
  notes->push_back({{kNonReleasableMemory, kNonReleasableAllocs},
                    "n/a: the pool keeps its free blocks inside the CUDA driver, which the trace "
                    "does not see"});
  notes->push_back({{kOversizeAllocations, kOversizeSegments},
                    "n/a: oversize blocks (max_split_size_mb) belong to the native caching "
                    "allocator, not to this backend"});
}

void AppendSegmentNotes(const Summary& summary, std::vector<SummaryNote>* notes) {
  if (summary.expandable_segments) {
    notes->push_back(
        {{},
         "recorded at segment level (PyTorch's native caching allocator, expandable "
         "segments): each cuMemCreate made from libc10_cuda.so is physical memory the "
         "allocator maps into its segments; from small pool: pieces of at most 2 MiB"});
    notes->push_back({{kReservedSegments},
                      "counts the cuMemCreate pieces (live from creation until released and "
                      "unmapped); PyTorch adds mapped pieces to its reserved bytes only, not to "
                      "its segments, so its own figure may differ"});
  } else {
    notes->push_back(
        {{},
         "recorded at segment level (PyTorch's native caching allocator): each "
         "cudaMalloc/cuMemAlloc made from libc10_cuda.so is one of its segments; from small "
         "pool: segments of at most 2 MiB (the small pool's are 2 MiB, the large pool's "
         "larger)"});
  }
  notes->push_back(
      {{kAllocatedMemory, kActiveMemory, kRequestedMemory, kAllocations, kActiveAllocs},
       "n/a: tensors are not visible under the native caching allocator; record "
       "with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (gpumem record "
       "--tensors)"});
  notes->push_back({{kNonReleasableMemory, kNonReleasableAllocs},
                    "n/a: the free blocks inside segments are not visible either"});
  notes->push_back({{kOversizeAllocations, kOversizeSegments},
                    "n/a: max_split_size_mb (PYTORCH_CUDA_ALLOC_CONF) is not recorded in the "
                    "trace, and oversize allocations are tensors"});
}

void AppendPlainNotes(const DeviceSummary& device, std::vector<SummaryNote>* notes) {
  notes->push_back({{},
                    "no PyTorch allocator in the stacks: each device allocation is one "
                    "allocation and its own segment; from small pool: at most 1 MiB"});
  notes->push_back({{kActiveMemory, kActiveAllocs, kRequestedMemory},
                    "the same as Allocated: without a caching allocator memory is in use from "
                    "its allocation to its free, and its size is the one requested"});
  std::string reserved =
      "the same as Allocated: each allocation is its own segment (the driver's rounding to "
      "its page size is not in the trace)";
  if (device.pool_allocations > 0) {
    absl::StrAppend(
        &reserved, "; except ",
        Plural(device.pool_allocations, "stream-ordered allocation", "stream-ordered allocations"),
        " (", FormatBytes(device.pool_allocation_bytes),
        " in all), left out: ", PoolReservedNote(device));
  }
  notes->push_back({{kReservedMemory, kReservedSegments}, reserved});
  notes->push_back(
      {{kNonReleasableMemory, kNonReleasableAllocs, kOversizeAllocations, kOversizeSegments},
       "n/a: only a caching allocator splits or keeps blocks, and the trace shows "
       "none"});
}

// Memory held outside the allocator the table counts, one note per holder.
void AppendHoldingNotes(const Summary& summary, const DeviceSummary& device,
                        std::vector<SummaryNote>* notes) {
  for (const SummaryHolding& holding : device.holdings) {
    const std::string apis = absl::StrJoin(holding.apis, "/");
    std::string text =
        absl::StrCat(holding.name, ": ", FormatBytes(holding.bytes), " in ",
                     Plural(holding.count, "allocation", "allocations"), " made with ", apis);
    if (summary.mode == SummaryMode::kPlain) {
      absl::StrAppend(&text, ", counted above");
    } else if (holding.id == kPyTorchAllocatorId) {
      absl::StrAppend(&text, " (segments of the native allocator), not counted above");
    } else if (holding.id == kOtherId) {
      absl::StrAppend(&text, " directly, not counted above");
    } else {
      absl::StrAppend(&text, " directly, not counted above (PyTorch does not count it either)");
    }
    absl::StrAppend(&text, "; ", FormatBytes(holding.live_bytes), " still live at the ",
                    summary.complete ? "end" : "stop");
    notes->push_back({{}, std::move(text)});
  }
}

// Where the OOM and retry counts come from.
void AppendFailureNotes(const Summary& summary, const DeviceSummary& device,
                        std::vector<SummaryNote>* notes) {
  if (device.ooms > 0 || device.retries > 0) {
    // With a model the header lines are the model's: the trace's own failures are told here.
    std::string text = device.model ? absl::StrCat("the trace's own, not in the lines above: ",
                                                   Plural(device.ooms, "OOM", "OOMs"), " and ",
                                                   Plural(device.retries, "retry", "retries"), " ")
                                    : std::string();
    absl::StrAppend(&text,
                    "from the out-of-memory failures in the trace: one followed by another "
                    "attempt of the same size and API is a retry, any other an OOM");
    if (summary.mode != SummaryMode::kPlain) {
      absl::StrAppend(&text,
                      " (PyTorch counts only its retry after emptying its whole cache, so its "
                      "own figures may be lower)");
    }
    notes->push_back({{"CUDA OOMs", "cudaMalloc retries"}, std::move(text)});
  }
}

}  // namespace

std::vector<SummaryNote> SummaryNotes(const Summary& summary, const DeviceSummary& device) {
  std::vector<SummaryNote> notes;
  switch (summary.mode) {
    case SummaryMode::kTensors:
      AppendTensorNotes(summary, device, &notes);
      break;
    case SummaryMode::kSegments:
      AppendSegmentNotes(summary, &notes);
      break;
    case SummaryMode::kPlain:
      AppendPlainNotes(device, &notes);
      break;
  }
  AppendHoldingNotes(summary, device, &notes);
  AppendFailureNotes(summary, device, &notes);
  if (!summary.complete) {
    notes.push_back(
        {{"Cur Usage"}, summary.ended.Describe() + ": what was live when the trace stopped"});
  }
  return notes;
}

// ---- text ----

namespace {

constexpr size_t kWidth = 75;  // inside the | borders

std::string Boxed(const std::string& content) { return absl::StrCat("|", content, "|\n"); }

std::string Title(const DeviceSummary& device) {
  std::string title =
      absl::StrCat("gpumem memory summary, device ID ",
                   device.device >= 0 ? absl::StrCat(device.device) : std::string("?"));
  if (!device.name.empty()) absl::StrAppend(&title, " (", device.name, ")");
  // PyTorch's title starts at column 18; a longer one is centred, or overflows the box.
  constexpr size_t kColumn = 18;
  size_t left = kColumn;
  if (title.size() + kColumn + 1 > kWidth) {
    left = title.size() + 2 <= kWidth ? (kWidth - title.size()) / 2 : 1;
  }
  std::string line = std::string(left, ' ') + title;
  line.append(line.size() < kWidth ? kWidth - line.size() : 1, ' ');
  return line;
}

std::string Cell(const SummaryRow& row, uint64_t value, uint64_t reference) {
  return row.bytes ? FormatSummarySize(value, reference) : FormatSummaryCount(value, reference);
}

std::string NotAvailable(const SummaryRow& row) { return row.bytes ? "   n/a    " : "    n/a   "; }

// The column before a label: '*' when what it labels is modelled. The labels fill their column
// (21 characters: "GPU reserved segments"), so a marker after them would break the layout.
char Marker(bool modelled) { return modelled ? '*' : ' '; }

// `marker`: Marker() of the row's own line, a space on its pool lines.
void AppendRow(const SummaryRow& row, char marker, const char* name, const SummaryStat* stat,
               const SummaryStat* reference, std::string* out) {
  std::string cells[4];
  if (stat == nullptr) {
    for (std::string& cell : cells) cell = NotAvailable(row);
  } else {
    cells[0] = Cell(row, stat->current, reference->current);
    cells[1] = Cell(row, stat->peak, reference->peak);
    cells[2] = Cell(row, stat->allocated, reference->allocated);
    cells[3] = Cell(row, stat->freed, reference->freed);
  }
  absl::StrAppend(out, Boxed(absl::StrFormat("%c%-21s | %s | %s | %s | %s ", marker, name, cells[0],
                                             cells[1], cells[2], cells[3])));
}

std::string NoteText(const SummaryNote& note) {
  if (note.rows.empty()) return note.text;
  return absl::StrCat(absl::StrJoin(note.rows, ", "), ": ", note.text);
}

std::string DeviceText(const Summary& summary, const DeviceSummary& device) {
  const std::string equals(kWidth, '=');
  const std::string dashes(kWidth, '-');
  std::string out;
  absl::StrAppend(&out, Boxed(equals), Boxed(Title(device)), Boxed(dashes));
  const char failures_marker = Marker(device.model.has_value());
  const uint64_t ooms = device.model ? device.model->stats.ooms : device.ooms;
  const uint64_t retries = device.model ? device.model->stats.retries : device.retries;
  absl::StrAppend(&out,
                  Boxed(absl::StrFormat("  %9s%cCUDA OOMs: %-12d | %6s%ccudaMalloc retries: "
                                        "%-8d  ",
                                        "", failures_marker, ooms, "", failures_marker, retries)));
  absl::StrAppend(&out, Boxed(equals));
  absl::StrAppend(
      &out, Boxed("        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "));
  for (const SummaryRow& row : SummaryRows(summary, device)) {
    absl::StrAppend(&out, Boxed(dashes));
    const PoolStat* value = row.value;
    AppendRow(row, Marker(row.modelled), row.metric, value ? &value->all : nullptr,
              value ? &value->all : nullptr, &out);
    if (!row.pools) continue;
    AppendRow(row, ' ', "      from large pool", value ? &value->large_pool : nullptr,
              value ? &value->all : nullptr, &out);
    AppendRow(row, ' ', "      from small pool", value ? &value->small_pool : nullptr,
              value ? &value->all : nullptr, &out);
  }
  absl::StrAppend(&out, Boxed(equals));
  absl::StrAppend(&out, "notes:\n");
  for (const SummaryNote& note : SummaryNotes(summary, device)) {
    absl::StrAppend(&out, "  ", NoteText(note), "\n");
  }
  return out;
}

std::string JsonStat(const SummaryStat& stat) {
  return absl::StrCat("{\"current\":", stat.current, ",\"peak\":", stat.peak,
                      ",\"allocated\":", stat.allocated, ",\"freed\":", stat.freed, "}");
}

std::string DeviceJson(const Summary& summary, const DeviceSummary& device) {
  const std::vector<SummaryNote> notes = SummaryNotes(summary, device);
  std::vector<std::string> rows;
  for (const SummaryRow& row : SummaryRows(summary, device)) {
    std::string item =
        absl::StrCat("{\"metric\":", JsonString(row.metric), ",\"key\":", JsonString(row.key),
                     ",\"unit\":", row.bytes ? "\"bytes\"" : "\"count\"",
                     ",\"available\":", row.value ? "true" : "false",
                     ",\"modelled\":", row.modelled ? "true" : "false");
    if (row.value != nullptr) {
      absl::StrAppend(&item, ",\"all\":", JsonStat(row.value->all));
      if (row.pools) {
        absl::StrAppend(&item, ",\"large_pool\":", JsonStat(row.value->large_pool),
                        ",\"small_pool\":", JsonStat(row.value->small_pool));
      }
    }
    for (const SummaryNote& note : notes) {
      if (std::find(note.rows.begin(), note.rows.end(), row.metric) != note.rows.end()) {
        absl::StrAppend(&item, ",\"note\":", JsonString(note.text));
        break;
      }
    }
    rows.push_back(item + "}");
  }
  std::vector<std::string> holdings;
  for (const SummaryHolding& holding : device.holdings) {
    std::vector<std::string> apis;
    for (const std::string& api : holding.apis) apis.push_back(JsonString(api));
    holdings.push_back(absl::StrCat(
        "{\"id\":", JsonString(holding.id), ",\"name\":", JsonString(holding.name), ",\"apis\":[",
        absl::StrJoin(apis, ","), "],\"bytes\":", holding.bytes, ",\"count\":", holding.count,
        ",\"live_bytes\":", holding.live_bytes, ",\"live_count\":", holding.live_count,
        ",\"counted\":", summary.mode == SummaryMode::kPlain ? "true" : "false", "}"));
  }
  std::vector<std::string> note_texts;
  for (const SummaryNote& note : notes) note_texts.push_back(JsonString(NoteText(note)));
  std::string out = absl::StrCat("{\"device\":", device.device);
  if (!device.name.empty()) absl::StrAppend(&out, ",\"name\":", JsonString(device.name));
  absl::StrAppend(&out, ",\"mode\":\"", SummaryModeName(summary.mode), "\"",
                  ",\"expandable_segments\":", summary.expandable_segments ? "true" : "false",
                  ",\"complete\":", summary.complete ? "true" : "false",
                  ",\"num_ooms\":", device.ooms, ",\"num_alloc_retries\":", device.retries);
  if (summary.model && device.model) {
    const DeviceModel& model = *device.model;
    absl::StrAppend(&out, ",\"model\":{\"allocator\":\"", AllocatorKindName(summary.model->kind),
                    "\"", ",\"chosen\":", summary.model->chosen ? "true" : "false");
    if (summary.model->max_split_size != std::numeric_limits<uint64_t>::max()) {
      absl::StrAppend(&out, ",\"max_split_size\":", summary.model->max_split_size);
    }
    if (!summary.model->settings.empty()) {
      absl::StrAppend(&out, ",\"settings\":", JsonString(summary.model->settings));
    }
    if (model.device_memory != kUnlimitedDeviceMemory) {
      absl::StrAppend(&out, ",\"device_memory\":", model.device_memory);
    }
    absl::StrAppend(&out, ",\"num_ooms\":", model.stats.ooms,
                    ",\"num_alloc_retries\":", model.stats.retries,
                    ",\"ran_out\":", model.ran_out ? "true" : "false", "}");
  }
  absl::StrAppend(&out, ",\"rows\":[", absl::StrJoin(rows, ","), "],\"holdings\":[",
                  absl::StrJoin(holdings, ","), "],\"notes\":[", absl::StrJoin(note_texts, ","),
                  "]}");
  return out;
}

}  // namespace

std::string SummaryText(const Summary& summary) {
  if (summary.devices.empty()) return "summary: no device memory allocated\n";
  std::vector<std::string> tables;
  for (const DeviceSummary& device : summary.devices) {
    tables.push_back(DeviceText(summary, device));
  }
  return absl::StrJoin(tables, "\n");
}

std::string SummaryJson(const Summary& summary) {
  std::vector<std::string> devices;
  for (const DeviceSummary& device : summary.devices) {
    devices.push_back(DeviceJson(summary, device));
  }
  return absl::StrCat("[", absl::StrJoin(devices, ","), "]");
}

}  // namespace gpumem::report
