#include "report/allocator/whatif.h"

#include <iterator>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/format/json.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/replay/replay.h"

namespace gpumem::report {

namespace {

const char* ModeDescription(SummaryMode mode) {
  switch (mode) {
    case SummaryMode::kTensors:
      return "recorded at tensor level (PyTorch's cudaMallocAsync backend): its tensors replayed";
    case SummaryMode::kPlain:
      return "a plain CUDA program (no PyTorch allocator in its stacks): its device allocations "
             "replayed through the async pool model";
    case SummaryMode::kSegments:
      break;
  }
  return "";
}

// 1 - largest free block / free inside segments: 0 when the free memory is one block.
double Fragmentation(const ModelledDevice& device) {
  if (device.free_in_segments_at_peak == 0) return 0.0;
  return 1.0 - static_cast<double>(device.largest_free_at_peak) /
                   static_cast<double>(device.free_in_segments_at_peak);
}

// The OOM's live set by call site: tensors, so stream-ordered (no cached segment among them).
std::vector<Site> OomSites(const ModelledOom& oom, CallSites& sites) {
  absl::flat_hash_set<uint64_t> tensors;
  for (const SiteTally& site : oom.live_sites) tensors.insert(site.stack_id);
  return GroupSites(oom.live_sites, sites, tensors);
}

// ---- text ----

void AppendDeviceText(const AllocatorAnswers& answers, size_t i, const TraceFile& trace,
                      CallSites& sites, const WhatifRequest& request, std::string* out) {
  const ModelledDevice& peak = answers.unlimited.devices[i];
  const ModelledDevice* limited = answers.LimitedOf(i);
  const bool fits = limited == nullptr || !limited->oom;
  absl::StrAppend(out, "\n", AllocatorKindName(answers.kind), ", ", PlaceName(peak.device, trace),
                  ": ", fits ? "fits" : "OUT OF MEMORY", " (",
                  AllocatorKindDescription(answers.kind), ")\n");
  absl::StrAppendFormat(out,
                        "  reserved peak (modelled, no limit): %s at seq %d, %.3f ms after start; "
                        "allocated then %s, allocated peak %s\n",
                        SizeText(peak.stats.reserved_peak), peak.peak_seq,
                        MillisecondsSinceStart(peak.peak_timestamp_ns, trace),
                        FormatBytes(peak.allocated_at_peak),
                        FormatBytes(peak.stats.allocated_peak));
  if (peak.knows_blocks) {
    absl::StrAppend(out, "  at that peak: ", Plural(peak.stats.segments, "segment", "segments"),
                    "; free inside them ", FormatBytes(peak.free_in_segments_at_peak),
                    ", the largest free block ", FormatBytes(peak.largest_free_at_peak),
                    " (fragmentation ", absl::StrFormat("%.1f%%", 100.0 * Fragmentation(peak)),
                    "); non-releasable ", FormatBytes(peak.non_releasable_at_peak), "\n");
  } else {
    absl::StrAppend(out,
                    "  segments, free blocks, non-releasable: n/a (the pool's blocks are the "
                    "driver's; the model keeps the live bytes rounded up to 2 MiB)\n");
  }
  absl::StrAppend(out, "  ", Plural(peak.allocations, "allocation", "allocations"),
                  " replayed; cudaMalloc retries ", peak.stats.retries, ", OOMs ", peak.stats.ooms,
                  " (no limit)\n");
  if (peak.outside_peak > 0) {
    absl::StrAppend(
        out, "  allocated outside the allocator (cuBLAS workspaces, NCCL buffers, ...): at most ",
        FormatBytes(peak.outside_peak), " live, which the device must hold too\n");
  }
  absl::StrAppend(out, "  smallest device memory it fits: ", SizeText(answers.smallest_fit[i]),
                  " (the allocator's limit, searched in 2 MiB steps)\n");
  if (fits) return;
  const ModelledOom& oom = *limited->oom;
  absl::StrAppendFormat(
      out, "  out of memory at seq %d, %.3f ms after start: a request of %s on stream %#x%s\n",
      oom.seq, MillisecondsSinceStart(oom.timestamp_ns, trace), SizeText(oom.size), oom.stream,
      limited->stats.retries > 0
          ? absl::StrCat(", after ", Plural(limited->stats.retries, "retry", "retries"),
                         " that emptied the cache")
          : "");
  absl::StrAppend(out, "  call site:\n");
  sites.AppendStackText(oom.stack_id, out);
  absl::StrAppend(out, "  live then: ", SizeText(oom.live.bytes), " in ",
                  Plural(oom.live.count, "allocation", "allocations"), "; the allocator reserved ",
                  FormatBytes(limited->stats.reserved), "\n");
  AppendSitesText(OomSites(oom, sites), request.top, oom.live.bytes, sites.style(), out);
}

}  // namespace

std::string WhatifText(const std::string& path, const std::vector<AllocatorAnswers>& all,
                       const TraceFile& trace, CallSites& sites, const WhatifRequest& request) {
  std::string out = absl::StrCat("whatif: ", SizeText(request.device_memory),
                                 " per device: ", kWhatifLimitNote, "\n");
  absl::StrAppend(&out, "trace: ", Printable(path), ": ", ModeDescription(all.front().limited.mode),
                  "\n");
  if (all.front().unlimited.devices.empty()) {
    absl::StrAppend(&out, "\nwhatif: nothing to replay: no allocation\n");
    return out;
  }
  for (const AllocatorAnswers& answers : all) {
    for (size_t i = 0; i < answers.unlimited.devices.size(); ++i) {
      AppendDeviceText(answers, i, trace, sites, request, &out);
    }
  }
  std::vector<std::string> verdicts;
  for (const AllocatorAnswers& answers : all) {
    verdicts.push_back(
        absl::StrCat(AllocatorKindName(answers.kind), " ", answers.Fits() ? "fits" : "runs out"));
  }
  absl::StrAppend(&out, "\nwhatif: ", absl::StrJoin(verdicts, ", "), "\n");
  return out;
}

// ---- JSON ----

namespace {

std::string JsonDevice(const AllocatorAnswers& answers, size_t i, const TraceFile& trace,
                       CallSites& sites, const WhatifRequest& request) {
  const ModelledDevice& peak = answers.unlimited.devices[i];
  const ModelledDevice* limited = answers.LimitedOf(i);
  std::string out = absl::StrCat("{\"device\":", peak.device);
  for (const Device& known : trace.devices()) {
    if (known.ordinal() == peak.device)
      absl::StrAppend(&out, ",\"name\":", JsonString(known.name()));
  }
  absl::StrAppend(
      &out, ",\"fits\":", limited == nullptr || !limited->oom ? "true" : "false",
      ",\"smallest_fit_bytes\":", answers.smallest_fit[i], ",\"allocations\":", peak.allocations,
      ",\"reserved_peak_bytes\":", peak.stats.reserved_peak, ",\"peak_seq\":", peak.peak_seq,
      ",\"peak_time_ns\":", SinceStart(peak.peak_timestamp_ns, trace),
      ",\"allocated_at_peak_bytes\":", peak.allocated_at_peak,
      ",\"allocated_peak_bytes\":", peak.stats.allocated_peak,
      ",\"num_alloc_retries\":", peak.stats.retries, ",\"num_ooms\":", peak.stats.ooms,
      ",\"outside_allocator_peak_bytes\":", peak.outside_peak);
  if (peak.knows_blocks) {
    absl::StrAppendFormat(&out,
                          ",\"segments\":%d,\"free_in_segments_bytes\":%d,"
                          "\"largest_free_block_bytes\":%d,\"non_releasable_bytes\":%d,"
                          "\"fragmentation\":%.6f",
                          peak.stats.segments, peak.free_in_segments_at_peak,
                          peak.largest_free_at_peak, peak.non_releasable_at_peak,
                          Fragmentation(peak));
  }
  std::vector<std::string> points;
  for (const FragmentationPoint& point : peak.timeline) {
    points.push_back(absl::StrCat("{\"time_ns\":", SinceStart(point.timestamp_ns, trace),
                                  ",\"reserved_bytes\":", point.reserved,
                                  ",\"allocated_bytes\":", point.in_use, "}"));
  }
  absl::StrAppend(&out, ",\"timeline\":[", absl::StrJoin(points, ","), "]");
  if (limited != nullptr && limited->oom) {
    const ModelledOom& oom = *limited->oom;
    const std::vector<Site> live = OomSites(oom, sites);
    absl::StrAppend(
        &out, ",\"oom\":{\"seq\":", oom.seq, ",\"time_ns\":", SinceStart(oom.timestamp_ns, trace),
        ",\"size\":", oom.size, ",\"stream\":", oom.stream, ",\"retries\":", limited->stats.retries,
        ",\"reserved_bytes\":", limited->stats.reserved,
        ",\"frames\":", JsonFrames(sites.Shown(oom.stack_id)), ",\"live_bytes\":", oom.live.bytes,
        ",\"live_count\":", oom.live.count, ",\"call_sites\":", live.size(),
        ",\"sites\":", JsonSites(live, request.top, oom.live.bytes), "}");
  }
  return out + "}";
}

}  // namespace

std::string WhatifJson(const std::string& path, const std::vector<AllocatorAnswers>& all,
                       const TraceFile& trace, CallSites& sites, const WhatifRequest& request) {
  std::vector<std::string> allocators;
  for (const AllocatorAnswers& answers : all) {
    std::vector<std::string> devices;
    for (size_t i = 0; i < answers.unlimited.devices.size(); ++i) {
      devices.push_back(JsonDevice(answers, i, trace, sites, request));
    }
    allocators.push_back(absl::StrCat(
        "{\"allocator\":", JsonString(AllocatorKindName(answers.kind)), ",\"fits\":",
        answers.Fits() ? "true" : "false", ",\"devices\":[", absl::StrJoin(devices, ","), "]}"));
  }
  return absl::StrCat("{\"gpumem_whatif\":1,\"path\":", JsonString(path),
                      ",\"mode\":", JsonString(SummaryModeName(all.front().limited.mode)),
                      ",\"device_memory\":", request.device_memory,
                      ",\"limit_note\":", JsonString(kWhatifLimitNote),
                      ",\"step_bytes\":", kFitSearchStep, ",\"allocators\":[",
                      absl::StrJoin(allocators, ","), "]}\n");
}

// The kinds to replay for a trace of `mode`, or an error line.
namespace {

absl::StatusOr<std::vector<AllocatorKind>> KindsFor(SummaryMode mode,
                                                    const WhatifRequest& request) {
  switch (mode) {
    case SummaryMode::kSegments:
      return absl::InvalidArgumentError(
          "recorded under PyTorch's caching allocator: only its segments are visible; record "
          "with `gpumem record --tensors`");
    case SummaryMode::kPlain:
      for (const AllocatorKind kind : request.kinds) {
        if (kind != AllocatorKind::kAsync) {
          return absl::InvalidArgumentError(absl::StrCat(
              "a plain CUDA program (no PyTorch allocator in its stacks): --allocator ",
              AllocatorKindName(kind),
              " models PyTorch's allocator, which it does not use; "
              "only --allocator async applies"));
        }
      }
      return std::vector<AllocatorKind>{AllocatorKind::kAsync};
    case SummaryMode::kTensors:
      break;
  }
  if (!request.kinds.empty()) return request.kinds;
  return std::vector<AllocatorKind>(std::begin(kAllAllocators), std::end(kAllAllocators));
}

}  // namespace

// Each allocator's answers for the trace at `path`, given its replays at the limit (`limited`,
// one per kAllAllocators), or the error line.
absl::StatusOr<std::vector<AllocatorAnswers>> AnswerWhatif(
    const std::string& path, std::vector<AllocatorReplayResult> limited,
    const WhatifRequest& request) {
  absl::StatusOr<std::vector<AllocatorKind>> kinds = KindsFor(limited.front().mode, request);
  if (!kinds.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", kinds.status().message()));
  std::vector<AllocatorAnswers> all;
  for (const AllocatorKind kind : *kinds) {
    AllocatorAnswers& answers = all.emplace_back();
    answers.kind = kind;
    answers.limited = std::move(limited[static_cast<size_t>(kind)]);
    absl::StatusOr<AllocatorReplayResult> unlimited =
        ReplayThroughAllocator(path, kind, kUnlimitedDeviceMemory);
    absl::StatusOr<std::vector<uint64_t>> smallest =
        unlimited.ok() ? SmallestFit(path, kind, *unlimited) : unlimited.status();
    if (!smallest.ok()) return smallest.status();
    answers.unlimited = *std::move(unlimited);
    answers.smallest_fit = *std::move(smallest);
  }
  return all;
}

}  // namespace gpumem::report
