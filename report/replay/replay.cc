#include "report/replay/replay.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "report/format/json.h"
#include "report/format/names.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/replay/memory_space.h"
#include "report/trace/event_stream.h"

namespace gpumem::report {
namespace {

// Largest first, then by stack id, so output is deterministic.
std::vector<SiteTally> Sorted(const absl::flat_hash_map<uint64_t, Tally>& by_stack) {
  std::vector<SiteTally> sites;
  sites.reserve(by_stack.size());
  for (const auto& [stack_id, tally] : by_stack) sites.push_back({stack_id, tally});
  std::sort(sites.begin(), sites.end(), [](const SiteTally& a, const SiteTally& b) {
    if (a.tally.bytes != b.tally.bytes) return a.tally.bytes > b.tally.bytes;
    return a.stack_id < b.stack_id;
  });
  return sites;
}

}  // namespace

int32_t PlaceOf(const MemoryEvent& event) {
  return IsPinnedHost(event) ? kPinnedHost : event.device();
}

int32_t PlaceOf(const MemoryEventFields& event) {
  return IsPinnedHost(event) ? kPinnedHost : event.device;
}

Replay::PlaceState& Replay::FindState(int32_t place) {
  last_state_ = &places_[place];
  last_place_ = place;
  return *last_state_;
}

void Replay::Count(const Live& live, const MemoryEventFields& event) {
  PlaceState& state = StateOf(live.place);
  PlaceUsage& usage = state.usage;
  usage.place = live.place;
  usage.allocated.Add(live.size);
  state.allocated_by_stack[live.stack_id].Add(live.size);
  usage.live.Add(live.size);
  if (usage.live.bytes > usage.peak_bytes) {
    usage.peak_bytes = usage.live.bytes;
    usage.peak_seq = event.seq;
    usage.peak_timestamp_ns = event.timestamp_ns;
    state.freed_since_peak.clear();  // everything live at the new peak is still live
  }
  if (observer_ != nullptr) observer_->AllocationStarted(live);
}

void Replay::Uncount(const Live& live) {
  PlaceState& state = StateOf(live.place);
  PlaceUsage& usage = state.usage;
  usage.live.count -= std::min(usage.live.count, uint64_t{1});
  usage.live.bytes -= std::min(usage.live.bytes, live.size);
  // Allocated at or before the peak and freed only now: it was live at the peak.
  if (live.seq <= usage.peak_seq) state.freed_since_peak[live.stack_id].Add(live.size);
  if (observer_ != nullptr) observer_->AllocationEnded(live);
  free_indices_.push_back(live.index);
}

const LiveAllocation* Replay::FindContaining(uint64_t address) const {
  if (const Live* live = plain_.FindContaining(address)) return live;
  auto mapping = mappings_.upper_bound(address);
  if (mapping == mappings_.begin()) return nullptr;
  --mapping;
  if (address >= RangeEnd(mapping->first, mapping->second.size)) return nullptr;
  auto physical = physical_.find(mapping->second.handle);
  if (physical == physical_.end() || physical->second.imported) return nullptr;
  return &physical->second.live;
}

void Replay::AllocPlain(const MemoryEventFields& event) {
  bool overlapped = false;
  Live& live = plain_.Allocate(event.address, event.size, &overlapped,
                               [this](const Live& dropped) { Uncount(dropped); });
  if (overlapped) ++anomalies_.overlapping_allocations;
  // Field by field: a Live built whole and copied in stalls on store forwarding.
  live.size = event.size;
  live.seq = event.seq;
  live.stack_id = event.stack_id;
  live.place = PlaceOf(event);
  live.index = TakeIndex();
  Count(live, event);
}

void Replay::FreeNotFound(absl::flat_hash_set<uint64_t>& freed, uint64_t key) {
  if (freed.contains(key)) {
    ++anomalies_.double_frees;
  } else {
    ++anomalies_.unknown_frees;
  }
}

void Replay::FreePlain(const MemoryEventFields& event) {
  if (event.address == 0) return;  // cudaFree(nullptr) and the like: a no-op
  switch (plain_.Free(event.address, [this](const Live& live) { Uncount(live); })) {
    case FreeOutcome::kFreed:
      return;
    case FreeOutcome::kUnknownAddress:
      ++anomalies_.unknown_frees;
      return;
    case FreeOutcome::kDoubleFree:
      ++anomalies_.double_frees;
      return;
  }
}

void Replay::AllocPhysical(const MemoryEventFields& event) {
  auto it = physical_.find(event.handle);
  if (it != physical_.end()) {  // a handle the driver handed out again: its release was missed
    ++anomalies_.overlapping_allocations;
    if (!it->second.imported) Uncount(it->second.live);
    physical_.erase(it);
  }
  Physical physical;
  physical.live = {event.size, event.seq, event.stack_id, event.device, TakeIndex()};
  physical_.emplace(event.handle, physical);
  freed_handles_.erase(event.handle);
  Count(physical.live, event);
}

// Another process's memory, or this process's own handle again (one more reference to it).
void Replay::ImportPhysical(const MemoryEventFields& event) {
  auto it = physical_.find(event.handle);
  if (it != physical_.end()) {
    ++it->second.references;
    return;
  }
  Physical physical;
  physical.imported = true;
  physical.live = {0, event.seq, event.stack_id, -1};
  physical_.emplace(event.handle, physical);
  freed_handles_.erase(event.handle);
}

void Replay::RetainPhysical(const MemoryEventFields& event) {
  if (event.result != 0) return;  // no reference was taken
  auto it = physical_.find(event.handle);
  // A handle made before recording began: its releases will say so.
  if (it != physical_.end()) ++it->second.references;
}

void Replay::ReleasePhysical(const MemoryEventFields& event) {
  auto it = physical_.find(event.handle);
  if (it == physical_.end()) return FreeNotFound(freed_handles_, event.handle);
  if (it->second.references == 0) {  // released already, kept by a mapping
    ++anomalies_.double_frees;
    return;
  }
  if (--it->second.references > 0) return;
  if (it->second.mappings > 0) return;  // the driver frees it at the last unmap
  EndPhysical(it);
}

void Replay::EndPhysical(absl::flat_hash_map<uint64_t, Physical>::iterator it) {
  if (!it->second.imported) Uncount(it->second.live);
  freed_handles_.insert(it->first);
  physical_.erase(it);
}

void Replay::Unmapped(uint64_t handle, const Mapping& mapping) {
  if (mapping.imported) imported_mapped_bytes_ -= std::min(imported_mapped_bytes_, mapping.size);
  auto it = physical_.find(handle);
  if (it == physical_.end()) return;
  if (it->second.mappings > 0) --it->second.mappings;
  if (it->second.mappings > 0 || it->second.references > 0) return;
  EndPhysical(it);
}

void Replay::Map(const MemoryEventFields& event) {
  auto old = mappings_.find(event.address);
  if (old != mappings_.end()) {
    ++anomalies_.overlapping_allocations;
    const Mapping dropped = old->second;
    mappings_.erase(old);
    Unmapped(dropped.handle, dropped);
  }
  Mapping mapping{event.size, event.handle, false};
  auto physical = physical_.find(event.handle);
  if (physical != physical_.end()) {
    ++physical->second.mappings;
    mapping.imported = physical->second.imported;
  }
  if (mapping.imported) {
    imported_mapped_bytes_ = SaturatingAdd(imported_mapped_bytes_, event.size);
    imported_mapped_peak_bytes_ = std::max(imported_mapped_peak_bytes_, imported_mapped_bytes_);
  }
  mappings_[event.address] = mapping;
}

void Replay::Unmap(const MemoryEventFields& event) {
  // cuMemUnmap(ptr, size) unmaps every mapping in [ptr, ptr + size).
  auto first = mappings_.lower_bound(event.address);
  auto last =
      event.size == 0
          ? (first != mappings_.end() && first->first == event.address ? std::next(first) : first)
          : mappings_.lower_bound(RangeEnd(event.address, event.size));
  if (first == last) {
    ++anomalies_.unknown_frees;
    return;
  }
  std::vector<Mapping> unmapped;
  for (auto it = first; it != last; ++it) unmapped.push_back(it->second);
  mappings_.erase(first, last);
  for (const Mapping& mapping : unmapped) Unmapped(mapping.handle, mapping);
}

void Replay::ReserveAddress(const MemoryEventFields& event) {
  auto [it, inserted] = reservations_.try_emplace(event.address, event.size);
  if (!inserted) {
    ++anomalies_.overlapping_allocations;
    reserved_bytes_ -= std::min(reserved_bytes_, it->second);
    it->second = event.size;
  }
  freed_reservations_.erase(event.address);
  reserved_bytes_ = SaturatingAdd(reserved_bytes_, event.size);
  reserved_peak_bytes_ = std::max(reserved_peak_bytes_, reserved_bytes_);
}

void Replay::FreeAddress(const MemoryEventFields& event) {
  auto it = reservations_.find(event.address);
  if (it == reservations_.end()) return FreeNotFound(freed_reservations_, event.address);
  reserved_bytes_ -= std::min(reserved_bytes_, it->second);
  reservations_.erase(it);
  freed_reservations_.insert(event.address);
}

void Replay::Add(const MemoryEventFields& event) {
  const MemorySpace space = SpaceOf(event);
  switch (event.action) {
    case ALLOC:
      switch (space) {
        case MemorySpace::kPlain:
          return AllocPlain(event);
        case MemorySpace::kPhysical:
          return IsImported(event) ? ImportPhysical(event) : AllocPhysical(event);
        case MemorySpace::kMapping:
          return Map(event);
        case MemorySpace::kReservation:
          return ReserveAddress(event);
      }
      return;
    case FREE:
      switch (space) {
        case MemorySpace::kPlain:
          return FreePlain(event);
        case MemorySpace::kPhysical:
          return ReleasePhysical(event);
        case MemorySpace::kMapping:
          return Unmap(event);
        case MemorySpace::kReservation:
          return FreeAddress(event);
      }
      return;
    case RETAIN:
      if (space == MemorySpace::kPhysical) RetainPhysical(event);
      return;
    case ALLOC_FAILED:
      // Out of memory, or another error (a handle type the system refuses): never an OOM.
      ++(IsOutOfMemoryResult(event.result) ? failed_allocations_ : failed_calls_);
      return;
    case FREE_FAILED:  // nothing was freed
      // But a handle released past its last reference is the program's double free, which the
      // driver refused (a plain pointer freed twice may have been allocated again by then).
      if (space == MemorySpace::kPhysical && freed_handles_.contains(event.handle) &&
          !physical_.contains(event.handle)) {
        ++anomalies_.double_frees;
      }
      return;
    default:
      return;
  }
}

std::vector<PlaceUsage> Replay::Places() const {
  absl::flat_hash_map<int32_t, absl::flat_hash_map<uint64_t, Tally>> at_peak;
  absl::flat_hash_map<int32_t, absl::flat_hash_map<uint64_t, Tally>> live;
  for (const auto& [place, state] : places_) at_peak[place] = state.freed_since_peak.ToMap();
  auto add = [&](const Live& entry) {
    live[entry.place][entry.stack_id].Add(entry.size);
    if (entry.seq <= places_.at(entry.place).usage.peak_seq) {
      at_peak[entry.place][entry.stack_id].Add(entry.size);
    }
  };
  plain_.ForEach(add);
  for (const auto& [handle, physical] : physical_) {
    if (!physical.imported) add(physical.live);
  }

  std::vector<PlaceUsage> places;
  for (const auto& [place, state] : places_) {
    PlaceUsage usage = state.usage;
    usage.peak_sites = Sorted(at_peak[place]);
    usage.live_sites = Sorted(live[place]);
    usage.allocated_sites = Sorted(state.allocated_by_stack.ToMap());
    places.push_back(std::move(usage));
  }
  // Devices ascending, then the unknown device, then pinned host.
  auto rank = [](int32_t place) -> int64_t {
    return place >= 0 ? place : int64_t{std::numeric_limits<int32_t>::max()} - place;
  };
  std::sort(places.begin(), places.end(), [&](const PlaceUsage& a, const PlaceUsage& b) {
    return rank(a.place) < rank(b.place);
  });
  return places;
}

absl::StatusOr<TraceReplay> ReplayTrace(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  if (!file.ok()) return file.status();
  return ReplayTrace(*std::move(file), nullptr);
}

TraceReplay ReplayTrace(std::unique_ptr<TraceFile> file, const MemoryEventVisitor& also,
                        ReplayObserver* observer, const PacketVisitor& packets) {
  Replay replay(observer);
  return ReplayTrace(std::move(file), replay, also, packets);
}

TraceReplay ReplayTrace(std::unique_ptr<TraceFile> file, Replay& replay,
                        const MemoryEventVisitor& also, const PacketVisitor& packets) {
  ReplayObserver* observer = replay.observer();
  TraceReplay result;
  LaunchVisitor launches;
  if (observer != nullptr) {
    launches = [&](const LaunchEvent& launch) { observer->AddLaunch(launch, replay); };
  }
  MemoryEvent also_event;  // built only for `also`, reused: ToProto() sets every field
  const MemoryStreamStats stats = StreamMemoryEventFieldsBySeq(
      *file,
      [&](const MemoryEventFields& event) {
        if (also) {
          ToProto(event, &also_event);
          also(also_event);
        }
        replay.Add(event);
        if (observer != nullptr) observer->AfterMemory(event, replay);
        if (event.action == ALLOC && event.kind == POOL) {
          result.stream_ordered_stacks.insert(event.stack_id);
        }
        // Address space and the mappings of physical memory already counted are not memory.
        if (event.action == ALLOC && event.capture != 0 && event.kind != VMM_RESERVATION &&
            event.kind != VMM_MAPPING) {
          result.for_graph.Add(event.size);
          result.graph_stacks.insert(event.stack_id);
        }
      },
      kReorderWindow, packets, launches);
  result.file = std::move(file);
  result.memory_events = stats.events + stats.impossible_sizes;
  result.out_of_order_events = stats.out_of_order;
  if (observer != nullptr) observer->Finished(replay);
  result.places = replay.Places();
  result.anomalies = replay.anomalies();
  result.anomalies.impossible_sizes = stats.impossible_sizes;
  result.failed_allocations = replay.failed_allocations();
  result.failed_calls = replay.failed_calls();
  result.reserved_peak_bytes = replay.reserved_peak_bytes();
  result.imported_mapped_peak_bytes = replay.imported_mapped_peak_bytes();
  return result;
}

std::string DeviceName(int32_t ordinal, const TraceFile& trace) {
  for (const Device& device : trace.devices()) {
    if (device.ordinal() == ordinal && !device.name().empty()) return Printable(device.name());
  }
  return "";
}

std::string PlaceName(int32_t place, const TraceFile& trace) {
  if (place == kPinnedHost) return "pinned host";
  if (place < 0) return "device ?";
  const std::string name = DeviceName(place, trace);
  if (!name.empty()) return absl::StrCat("device ", place, " (", name, ")");
  return absl::StrCat("device ", place);
}

std::string DescribeAnomalies(const ReplayAnomalies& anomalies) {
  if (anomalies.total() == 0) return "none";
  std::vector<std::string> parts;
  if (anomalies.unknown_frees > 0) {
    parts.push_back(
        Plural(anomalies.unknown_frees, "free of an unknown pointer", "frees of unknown pointers"));
  }
  if (anomalies.double_frees > 0) {
    parts.push_back(Plural(anomalies.double_frees, "double free", "double frees"));
  }
  if (anomalies.overlapping_allocations > 0) {
    parts.push_back(Plural(anomalies.overlapping_allocations, "allocation over a live range",
                           "allocations over a live range"));
  }
  if (anomalies.impossible_sizes > 0) {
    parts.push_back(Plural(anomalies.impossible_sizes,
                           "allocation of an impossible size (over 256 TiB), left out",
                           "allocations of impossible sizes (over 256 TiB), left out"));
  }
  return absl::StrJoin(parts, ", ");
}

std::string JsonPlace(int32_t place, const TraceFile& trace) {
  std::string out = absl::StrCat("\"memory\":", place == kPinnedHost ? "\"host\"" : "\"device\"",
                                 ",\"device\":", place == kPinnedHost ? -1 : place);
  for (const Device& device : trace.devices()) {
    if (device.ordinal() == place) {
      absl::StrAppend(&out, ",\"name\":", JsonString(device.name()),
                      ",\"total_memory\":", device.total_memory());
    }
  }
  return out;
}

}  // namespace gpumem::report
