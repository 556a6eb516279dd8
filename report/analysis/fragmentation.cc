#include "report/analysis/fragmentation.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "report/format/json.h"
#include "report/format/sizes.h"
#include "report/replay/memory_space.h"
#include "report/replay/replay.h"

namespace gpumem::report {

const char kBlockFragmentationNotKnown[] =
    "needs the free blocks inside the allocator's segments, which no recording mode sees; "
    "gpumem whatif models them from a tensor-level trace (gpumem record --tensors)";

namespace {

std::string Time(uint64_t timestamp_ns, uint64_t start) {
  return absl::StrFormat(
      "%.3f ms", static_cast<double>(timestamp_ns >= start ? timestamp_ns - start : 0) / 1e6);
}

}  // namespace

// The replay of one recording mode: the allocations it counts (tensors, segments, or every device
// allocation); every other event passes, so frees, releases and unmaps match as in
// report/replay/replay.h. A free of an allocation left out is an unknown free to it, which counts
// nothing.
struct FragmentationAnalysis::Candidate {
  struct Track {
    uint64_t live = 0;      // bytes after the last point
    uint64_t reserved = 0;  // the pools' size after the last point (tensor level)
    bool any = false;
    FragmentationPoint peak;
    FragmentationPoint end;
    BucketedTimeline timeline;
  };

  // `pools`: the pools' sizes (tensor level), or null.
  Candidate(SummaryMode mode, const PoolSizes* pools)
      : mode(mode),
        has_reserved(mode != SummaryMode::kTensors),
        has_in_use(mode != SummaryMode::kSegments),
        pools(pools) {}

  // Reserved at tensor level is the pools' size, once the trace has given any.
  bool PoolsKnown() const { return pools != nullptr && !pools->empty(); }

  void Add(const MemoryEvent& event, CachedHolderOf& holders) {
    if (event.action() == ALLOC && IsDeviceMemory(event)) {
      if (!CountedInMode(mode, event, holders(event.stack_id()))) return;
      devices.try_emplace(event.device());
    } else if (event.action() == ALLOC && SpaceOf(event) == MemorySpace::kPlain) {
      return;  // pinned host memory
    }
    replay.Add(event);
    // A free names no device; any may have changed. Devices are few.
    const bool known_pools = PoolsKnown();
    for (auto& [device, track] : devices) {
      const uint64_t now = replay.LiveBytes(device);
      const uint64_t reserved = known_pools ? pools->Current(device) : has_reserved ? now : 0;
      if (track.any && now == track.live && reserved == track.reserved) continue;
      track.any = true;
      track.live = now;
      track.reserved = reserved;
      FragmentationPoint point;
      point.timestamp_ns = event.timestamp_ns();
      point.reserved = reserved;
      point.in_use = has_in_use ? now : 0;
      // The peak of reserved when known, else of in use.
      if (known_pools || has_reserved ? point.reserved > track.peak.reserved
                                      : point.in_use > track.peak.in_use) {
        track.peak = point;
      }
      track.end = point;
      track.timeline.Add(point);
    }
  }

  SummaryMode mode;
  bool has_reserved;
  bool has_in_use;
  const PoolSizes* pools;
  Replay replay;
  std::map<int32_t, Track> devices;
};

FragmentationAnalysis::FragmentationAnalysis(HolderOfStack holder_of, size_t samples,
                                             const TraceFile* trace)
    : trace_(trace),
      samples_(samples),
      holders_(std::make_unique<CachedHolderOf>(std::move(holder_of))),
      candidates_([this](SummaryMode mode) {
        return std::make_unique<Candidate>(mode,
                                           mode == SummaryMode::kTensors ? &pool_sizes_ : nullptr);
      }) {}

FragmentationAnalysis::FragmentationAnalysis(HolderOfStack holder_of, size_t samples)
    : FragmentationAnalysis(std::move(holder_of), samples, nullptr) {}

FragmentationAnalysis::FragmentationAnalysis(const TraceFile& trace)
    : FragmentationAnalysis(HoldersOfTrace(trace), kFragmentationSamples, &trace) {}

FragmentationAnalysis::~FragmentationAnalysis() = default;

void FragmentationAnalysis::AddPoolUsage(const PoolUsage& usage) {
  pending_pool_sizes_.push_back(
      {usage.timestamp_ns(), usage.pool(), usage.device(), usage.reserved_bytes()});
}

void FragmentationAnalysis::ApplyPoolSizes(uint64_t timestamp_ns) {
  while (!pending_pool_sizes_.empty() && pending_pool_sizes_.front().timestamp_ns <= timestamp_ns) {
    const PendingPoolSize size = pending_pool_sizes_.front();
    pending_pool_sizes_.pop_front();
    pool_sizes_.Set(size.pool, size.device, size.reserved);
  }
}

void FragmentationAnalysis::Add(const MemoryEvent& event) {
  ApplyPoolSizes(event.timestamp_ns());
  const uint64_t timestamp = event.timestamp_ns();
  first_timestamp_ns_ = any_event_ ? std::min(first_timestamp_ns_, timestamp) : timestamp;
  last_timestamp_ns_ = any_event_ ? std::max(last_timestamp_ns_, timestamp) : timestamp;
  any_event_ = true;
  candidates_.Add(event, *holders_,
                  [&](std::unique_ptr<Candidate>& candidate) { candidate->Add(event, *holders_); });
}

Fragmentation FragmentationAnalysis::Finish() {
  ApplyPoolSizes(~uint64_t{0});  // what came after the last memory event
  const Candidate& chosen = *candidates_.Chosen();
  Fragmentation result;
  result.mode = chosen.mode;
  result.has_reserved = chosen.has_reserved || chosen.PoolsKnown();
  result.has_in_use = chosen.has_in_use;
  for (const auto& [device, track] : chosen.devices) {
    DeviceFragmentation entry;
    entry.device = device;
    entry.peak = track.peak;
    entry.end = track.end;
    if (chosen.PoolsKnown()) entry.end.reserved = pool_sizes_.Current(device);
    entry.end.timestamp_ns = last_timestamp_ns_;
    entry.timeline =
        SampleTimeline(track.timeline.Points(), first_timestamp_ns_, last_timestamp_ns_, samples_);
    result.devices.push_back(std::move(entry));
  }
  std::stable_partition(result.devices.begin(), result.devices.end(),
                        [](const DeviceFragmentation& device) { return device.device >= 0; });
  if (trace_ != nullptr) {
    result.complete = trace_->end().complete();
    result.ended = trace_->end().recording;
    result.start_time_mono_ns = trace_->header().start_time_mono_ns();
    for (DeviceFragmentation& device : result.devices) {
      device.name = DeviceName(device.device, *trace_);
    }
  }
  return result;
}

Fragmentation ComputeFragmentation(const std::vector<MemoryEvent>& events,
                                   const HolderOfStack& holder_of, size_t samples) {
  FragmentationAnalysis analysis(holder_of, samples);
  for (const MemoryEvent& event : events) analysis.Add(event);
  return analysis.Finish();
}

Fragmentation FragmentationOfTrace(const TraceFile& trace, const std::vector<MemoryEvent>& events) {
  FragmentationAnalysis analysis(trace);
  for (const MemoryEvent& event : events) analysis.Add(event);
  return analysis.Finish();
}

std::string ReservedNotKnownReason(const Fragmentation& fragmentation) {
  if (fragmentation.has_reserved) return "";
  return "tensor-level recording (PyTorch's cudaMallocAsync backend): each tensor is recorded, the "
         "memory pool's own reserved size is not in this trace (recorded by newer versions of "
         "gpumem)";
}

std::string InUseNotKnownReason(const Fragmentation& fragmentation) {
  if (fragmentation.has_in_use) return "";
  return "segment-level recording (PyTorch's caching allocator): its segments are recorded, the "
         "tensors it places inside them are not";
}

namespace {

const char* ModeText(SummaryMode mode) {
  switch (mode) {
    case SummaryMode::kTensors:
      return "tensor level (PyTorch's cudaMallocAsync backend)";
    case SummaryMode::kSegments:
      return "segment level (PyTorch's caching allocator)";
    case SummaryMode::kPlain:
      break;
  }
  return "plain (no framework allocator: each allocation is its own segment, in use = reserved)";
}

std::string Bytes(uint64_t bytes, bool known) {
  return known ? absl::StrCat(FormatBytes(bytes), " (", bytes, " bytes)") : "n/a";
}

std::string PointText(const Fragmentation& f, const FragmentationPoint& point) {
  return absl::StrCat("reserved ", Bytes(point.reserved, f.has_reserved), ", in use ",
                      Bytes(point.in_use, f.has_in_use), ", reserved but unused ",
                      Bytes(point.unused(), f.has_reserved && f.has_in_use));
}

std::string JsonValue(uint64_t value, bool known) { return known ? absl::StrCat(value) : "null"; }

std::string PointJson(const Fragmentation& f, const FragmentationPoint& point) {
  const uint64_t start = f.start_time_mono_ns;
  return absl::StrCat(
      "{\"time_ns\":", point.timestamp_ns >= start ? point.timestamp_ns - start : 0,
      ",\"reserved_bytes\":", JsonValue(point.reserved, f.has_reserved),
      ",\"in_use_bytes\":", JsonValue(point.in_use, f.has_in_use),
      ",\"unused_bytes\":", JsonValue(point.unused(), f.has_reserved && f.has_in_use), "}");
}

}  // namespace

std::string FragmentationText(const Fragmentation& f) {
  std::string out = absl::StrCat("\nfragmentation: recording mode ", ModeText(f.mode), "\n");
  if (!f.has_reserved) absl::StrAppend(&out, "  reserved: n/a: ", ReservedNotKnownReason(f), "\n");
  if (!f.has_in_use) absl::StrAppend(&out, "  in use: n/a: ", InUseNotKnownReason(f), "\n");
  if (f.devices.empty()) absl::StrAppend(&out, "  no device memory allocated\n");
  for (const DeviceFragmentation& device : f.devices) {
    absl::StrAppend(&out, "\nfragmentation, device ",
                    device.device < 0 ? std::string("?") : absl::StrCat(device.device));
    if (!device.name.empty()) absl::StrAppend(&out, " (", device.name, ")");
    absl::StrAppend(&out, ":\n");
    absl::StrAppend(&out, "  at the peak of ", f.has_reserved ? "reserved" : "in use", " (",
                    Time(device.peak.timestamp_ns, f.start_time_mono_ns),
                    " after start): ", PointText(f, device.peak), "\n");
    absl::StrAppend(&out, "  at the end", f.complete ? "" : " (" + f.ended.Describe() + ")", ": ",
                    PointText(f, device.end), "\n");
    absl::StrAppend(&out, "  block-level fragmentation: n/a (1)\n");
    absl::StrAppend(&out, "  timeline (", device.timeline.size(), " evenly spaced points):\n");
    absl::StrAppendFormat(&out, "    %12s  %12s  %12s  %12s\n", "time", "reserved", "in use",
                          "unused");
    for (const FragmentationPoint& point : device.timeline) {
      absl::StrAppendFormat(&out, "    %12s  %12s  %12s  %12s\n",
                            Time(point.timestamp_ns, f.start_time_mono_ns),
                            f.has_reserved ? FormatBytes(point.reserved) : "n/a",
                            f.has_in_use ? FormatBytes(point.in_use) : "n/a",
                            f.has_reserved && f.has_in_use ? FormatBytes(point.unused()) : "n/a");
    }
    absl::StrAppend(&out, "  (1) ", kBlockFragmentationNotKnown, "\n");
  }
  return out;
}

std::string FragmentationJson(const Fragmentation& f) {
  std::vector<std::string> devices;
  for (const DeviceFragmentation& device : f.devices) {
    std::vector<std::string> timeline;
    for (const FragmentationPoint& point : device.timeline) timeline.push_back(PointJson(f, point));
    devices.push_back(absl::StrCat(
        "{\"device\":", device.device, ",\"name\":", JsonString(device.name),
        ",\"peak\":", PointJson(f, device.peak), ",\"end\":", PointJson(f, device.end),
        ",\"block_fragmentation\":null,\"timeline\":[", absl::StrJoin(timeline, ","), "]}"));
  }
  std::string out = absl::StrCat("{\"mode\":\"", SummaryModeName(f.mode),
                                 "\",\"complete\":", f.complete ? "true" : "false",
                                 ",\"peak_of\":", f.has_reserved ? "\"reserved\"" : "\"in_use\"");
  absl::StrAppend(&out, ",\"notes\":{");
  std::vector<std::string> notes;
  if (!f.has_reserved)
    notes.push_back(absl::StrCat("\"reserved\":", JsonString(ReservedNotKnownReason(f))));
  if (!f.has_in_use)
    notes.push_back(absl::StrCat("\"in_use\":", JsonString(InUseNotKnownReason(f))));
  notes.push_back(
      absl::StrCat("\"block_fragmentation\":", JsonString(kBlockFragmentationNotKnown)));
  absl::StrAppend(&out, absl::StrJoin(notes, ","), "},\"devices\":[", absl::StrJoin(devices, ","),
                  "]}");
  return out;
}

}  // namespace gpumem::report
