#include "report/fragmentation.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "report/memory_holders.h"
#include "report/memory_space.h"
#include "report/replay.h"
#include "report/sizes.h"
#include "report/symbolizer.h"

namespace gpumem::report {

const char kBlockFragmentationNotKnown[] =
    "needs the free blocks inside the allocator's segments, which no recording mode sees; it will "
    "come from the allocator model (issue 6)";

namespace {

constexpr char kPyTorchAllocatorId[] = "pytorch_caching_allocator";

// Device memory an allocation makes, as the summary table counts it: plain allocations other than
// pinned host memory, and VMM physical memory.
bool IsDeviceMemory(const MemoryEvent& event) {
  switch (SpaceOf(event)) {
    case MemorySpace::kPlain:
      return PlaceOf(event) != kPinnedHost;
    case MemorySpace::kPhysical:
      return true;
    default:
      return false;
  }
}

// The value at each of `samples` evenly spaced times from `first` to `last`: the last point at or
// before it (points in replay order), zeros before the first.
std::vector<FragmentationPoint> Sample(const std::vector<FragmentationPoint>& points,
                                       uint64_t first, uint64_t last, size_t samples) {
  std::vector<FragmentationPoint> out;
  size_t next = 0;
  FragmentationPoint value;
  for (size_t i = 0; i < samples; ++i) {
    const uint64_t time = samples == 1
                              ? last
                              : first + static_cast<uint64_t>(static_cast<double>(last - first) *
                                                              static_cast<double>(i) /
                                                              static_cast<double>(samples - 1));
    while (next < points.size() && points[next].timestamp_ns <= time) value = points[next++];
    FragmentationPoint sample = value;
    sample.timestamp_ns = time;
    out.push_back(sample);
  }
  return out;
}

std::string Time(uint64_t timestamp_ns, uint64_t start) {
  return absl::StrFormat(
      "%.3f ms", static_cast<double>(timestamp_ns >= start ? timestamp_ns - start : 0) / 1e6);
}

}  // namespace

Fragmentation ComputeFragmentation(const std::vector<MemoryEvent>& events,
                                   const HolderOfStack& holder_of, size_t samples) {
  absl::flat_hash_map<uint64_t, bool> pytorch;  // by stack id
  auto is_pytorch = [&](uint64_t stack_id) {
    auto it = pytorch.find(stack_id);
    if (it == pytorch.end()) {
      const MemoryHolder* holder = holder_of ? holder_of(stack_id) : nullptr;
      it = pytorch
               .emplace(stack_id,
                        holder != nullptr && absl::string_view(holder->id) == kPyTorchAllocatorId)
               .first;
    }
    return it->second;
  };
  HolderOfStack cached = [&holder_of](uint64_t stack_id) {
    return holder_of ? holder_of(stack_id) : nullptr;
  };
  Fragmentation result;
  result.mode = ComputeSummary(events, cached).mode;  // the same detection as --summary
  result.has_reserved = result.mode != SummaryMode::kTensors;
  result.has_in_use = result.mode != SummaryMode::kSegments;

  // One replay of the allocations the mode counts (tensors, segments, or every device allocation);
  // every other event passes, so frees, releases and unmaps match as in report/replay.h. A free of
  // an allocation left out is an unknown free to it, which counts nothing.
  Replay replay;
  std::map<int32_t, std::vector<FragmentationPoint>> points;
  std::map<int32_t, uint64_t> last;
  for (const MemoryEvent& event : events) {
    if (event.action() == ALLOC && IsDeviceMemory(event)) {
      bool counted = true;
      if (result.mode == SummaryMode::kTensors) {
        counted = is_pytorch(event.stack_id()) && IsStreamOrdered(event);
      } else if (result.mode == SummaryMode::kSegments) {
        counted = is_pytorch(event.stack_id()) && !IsStreamOrdered(event);
      }
      if (!counted) continue;
      last.try_emplace(event.device(), 0);
    } else if (event.action() == ALLOC && SpaceOf(event) == MemorySpace::kPlain) {
      continue;  // pinned host memory
    }
    replay.Add(event);
    for (auto& [device, bytes] : last) {
      const uint64_t now = replay.LiveBytes(device);
      if (now == bytes && !points[device].empty()) continue;
      bytes = now;
      FragmentationPoint point;
      point.timestamp_ns = event.timestamp_ns();
      point.reserved = result.has_reserved ? now : 0;
      point.in_use = result.has_in_use ? now : 0;
      points[device].push_back(point);
    }
  }
  uint64_t first = 0;
  uint64_t final = 0;
  if (!events.empty()) {
    first = final = events.front().timestamp_ns();
    for (const MemoryEvent& event : events) {
      first = std::min(first, event.timestamp_ns());
      final = std::max(final, event.timestamp_ns());
    }
  }
  for (const auto& [device, line] : points) {
    DeviceFragmentation entry;
    entry.device = device;
    for (const FragmentationPoint& point : line) {
      const uint64_t value = result.has_reserved ? point.reserved : point.in_use;
      const uint64_t peak = result.has_reserved ? entry.peak.reserved : entry.peak.in_use;
      if (value > peak) entry.peak = point;
    }
    entry.end = line.back();
    entry.end.timestamp_ns = final;
    entry.timeline = Sample(line, first, final, samples);
    result.devices.push_back(std::move(entry));
  }
  std::stable_partition(result.devices.begin(), result.devices.end(),
                        [](const DeviceFragmentation& device) { return device.device >= 0; });
  return result;
}

Fragmentation FragmentationOfTrace(const TraceFile& trace, const std::vector<MemoryEvent>& events) {
  Fragmentation result = ComputeFragmentation(events, [&trace](uint64_t stack_id) {
    return FindMemoryHolder(ModuleFrames(trace, stack_id), false);
  });
  result.complete = trace.end().footer_present;
  result.start_time_mono_ns = trace.header().start_time_mono_ns();
  for (DeviceFragmentation& device : result.devices) {
    for (const Device& known : trace.devices()) {
      if (known.ordinal() == device.device) device.name = known.name();
    }
  }
  return result;
}

std::string ReservedNotKnownReason(const Fragmentation& fragmentation) {
  if (fragmentation.has_reserved) return "";
  return "tensor-level recording (PyTorch's cudaMallocAsync backend): each tensor is recorded, the "
         "memory pool's own reserved size is not";
}

std::string InUseNotKnownReason(const Fragmentation& fragmentation) {
  if (fragmentation.has_in_use) return "";
  return "segment-level recording (PyTorch's caching allocator): its segments are recorded, the "
         "tensors it places inside them are not";
}

namespace {

const char* ModeName(SummaryMode mode) {
  switch (mode) {
    case SummaryMode::kTensors:
      return "tensors";
    case SummaryMode::kSegments:
      return "segments";
    case SummaryMode::kPlain:
      break;
  }
  return "plain";
}

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

std::string JsonText(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
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
    absl::StrAppend(&out, "  at the end", f.complete ? "" : " (the process did not exit cleanly)",
                    ": ", PointText(f, device.end), "\n");
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
        "{\"device\":", device.device, ",\"name\":", JsonText(device.name),
        ",\"peak\":", PointJson(f, device.peak), ",\"end\":", PointJson(f, device.end),
        ",\"block_fragmentation\":null,\"timeline\":[", absl::StrJoin(timeline, ","), "]}"));
  }
  std::string out = absl::StrCat("{\"mode\":\"", ModeName(f.mode),
                                 "\",\"complete\":", f.complete ? "true" : "false",
                                 ",\"peak_of\":", f.has_reserved ? "\"reserved\"" : "\"in_use\"");
  absl::StrAppend(&out, ",\"notes\":{");
  std::vector<std::string> notes;
  if (!f.has_reserved)
    notes.push_back(absl::StrCat("\"reserved\":", JsonText(ReservedNotKnownReason(f))));
  if (!f.has_in_use) notes.push_back(absl::StrCat("\"in_use\":", JsonText(InUseNotKnownReason(f))));
  notes.push_back(absl::StrCat("\"block_fragmentation\":", JsonText(kBlockFragmentationNotKnown)));
  absl::StrAppend(&out, absl::StrJoin(notes, ","), "},\"devices\":[", absl::StrJoin(devices, ","),
                  "]}");
  return out;
}

}  // namespace gpumem::report
