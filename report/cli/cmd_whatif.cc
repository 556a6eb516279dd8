// `gpumem whatif`: would a recorded run have fitted on a device of a given size, under each of
// PyTorch's allocators? The trace's tensors are replayed through the allocator models
// (report/allocator/allocator_replay.h): per allocator and device, fits or not, where it ran out
// and what was live then by call site, what the allocator reserved at its peak with no limit, and
// the smallest device memory on which it fits. Exit 0 when it fits under every allocator asked, 1
// when one runs out (a CI gate), 2 for bad input. JSON schema: report/whatif.schema.json.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/allocator/allocator_replay.h"
#include "report/cli/commands.h"
#include "report/cli/flags.h"
#include "report/cli/output_file.h"
#include "report/format/json.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/replay/replay.h"
#include "report/stacks/call_sites.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

namespace {

constexpr char kSynopsis[] =
    R"usage(usage: gpumem whatif --device-memory SIZE [--allocator native|expandable|async|all]
                     [--top N] [--json] TRACE

Replays the tensors of a trace recorded at tensor level (gpumem record --tensors, or
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) through models of PyTorch's allocators and says,
per allocator and device, whether the run would have fitted in SIZE, where it would have run out
and what was live then by call site, what the allocator reserves at its peak, and the smallest
device memory on which it fits (searched in 2 MiB steps).
)usage";

constexpr char kEpilogue[] = R"usage(
A trace of a plain CUDA program (no PyTorch allocator in its stacks) is replayed as its own
allocations served by the async pool model only: native and expandable model PyTorch's allocator,
which such a program does not use. A trace recorded under PyTorch's caching allocator shows only
its segments, not its tensors, and cannot be replayed.

Exit status: 0 it fits under every allocator asked; 1 it runs out under one; 2 bad usage, a
trace that is missing, not a trace, or not replayable, or standard output that could not be
written.
)usage";

constexpr size_t kDefaultTop = 10;

constexpr char kLimitNote[] =
    "the allocator's limit (what torch.cuda.set_per_process_memory_fraction x total memory caps), "
    "not counting the CUDA context or memory other libraries allocate directly";

struct Options {
  std::optional<uint64_t> device_memory;  // required
  std::vector<AllocatorKind> kinds;       // empty: all that apply to the trace
  size_t top = kDefaultTop;
  bool json = false;
};

// --allocator: one of kAllAllocators by name, or all.
Flag AllocatorFlag(std::vector<AllocatorKind>* kinds) {
  std::vector<std::string> words;
  for (const AllocatorKind kind : kAllAllocators) words.push_back(AllocatorKindName(kind));
  words.push_back("all");
  return ChoiceOf({"--allocator"}, words,
                  "native: PyTorch's caching allocator; expandable: the same with\n"
                  "expandable_segments:True; async: the cudaMallocAsync pool (default: all)",
                  [words, kinds](size_t chosen) {
                    kinds->clear();
                    AllocatorKind kind = AllocatorKind::kNative;
                    if (ParseAllocatorKind(words[chosen], &kind)) kinds->push_back(kind);
                  });
}

CommandLine WhatifCommandLine(Options* options) {
  return CommandLine{
      .command = "whatif",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 15,
      .flags = {
          Size({"--device-memory"},
               "what the allocator may reserve on each device: 8GiB, 8G, 1.5GiB, 8589934592 (the\n"
               "limit torch.cuda.set_per_process_memory_fraction sets, fraction x total memory;\n"
               "the CUDA context and memory other libraries allocate directly come on top)",
               &options->device_memory)
              .Required(),
          AllocatorFlag(&options->kinds),
          Number({"--top"}, "call sites shown at an out-of-memory error (default 10; 0: all)",
                 &options->top),
          Switch({"--json"}, "one JSON object instead of text (schema: report/whatif.schema.json)",
                 &options->json),
      }};
}

// One allocator's answer for one device.
struct Answer {
  const ModelledDevice* limited = nullptr;    // at --device-memory
  const ModelledDevice* unlimited = nullptr;  // with no limit: the peak figures
  uint64_t smallest_fit = 0;
};

struct AllocatorAnswers {
  AllocatorKind kind = AllocatorKind::kNative;
  AllocatorReplayResult limited;
  AllocatorReplayResult unlimited;
  std::vector<uint64_t> smallest_fit;  // per device of `unlimited`

  bool Fits() const {
    for (const ModelledDevice& device : limited.devices) {
      if (device.oom) return false;
    }
    return true;
  }
  // The limited replay's device matching `unlimited.devices[i]` (nullptr: it never allocated).
  const ModelledDevice* LimitedOf(size_t i) const {
    for (const ModelledDevice& device : limited.devices) {
      if (device.device == unlimited.devices[i].device) return &device;
    }
    return nullptr;
  }
};

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
                      CallSites& sites, const Options& options, std::string* out) {
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
  AppendFramesText(sites.Shown(oom.stack_id), out);
  absl::StrAppend(out, "  live then: ", SizeText(oom.live.bytes), " in ",
                  Plural(oom.live.count, "allocation", "allocations"), "; the allocator reserved ",
                  FormatBytes(limited->stats.reserved), "\n");
  AppendSitesText(OomSites(oom, sites), options.top, oom.live.bytes, out);
}

std::string TextAnswer(const std::string& path, const std::vector<AllocatorAnswers>& all,
                       const TraceFile& trace, CallSites& sites, const Options& options) {
  std::string out =
      absl::StrCat("whatif: ", SizeText(*options.device_memory), " per device: ", kLimitNote, "\n");
  absl::StrAppend(&out, "trace: ", Printable(path), ": ", ModeDescription(all.front().limited.mode),
                  "\n");
  if (all.front().unlimited.devices.empty()) {
    absl::StrAppend(&out, "\nwhatif: nothing to replay: no allocation\n");
    return out;
  }
  for (const AllocatorAnswers& answers : all) {
    for (size_t i = 0; i < answers.unlimited.devices.size(); ++i) {
      AppendDeviceText(answers, i, trace, sites, options, &out);
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

std::string JsonDevice(const AllocatorAnswers& answers, size_t i, const TraceFile& trace,
                       CallSites& sites, const Options& options) {
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
        ",\"sites\":", JsonSites(live, options.top, oom.live.bytes), "}");
  }
  return out + "}";
}

std::string JsonAnswer(const std::string& path, const std::vector<AllocatorAnswers>& all,
                       const TraceFile& trace, CallSites& sites, const Options& options) {
  std::vector<std::string> allocators;
  for (const AllocatorAnswers& answers : all) {
    std::vector<std::string> devices;
    for (size_t i = 0; i < answers.unlimited.devices.size(); ++i) {
      devices.push_back(JsonDevice(answers, i, trace, sites, options));
    }
    allocators.push_back(absl::StrCat(
        "{\"allocator\":", JsonString(AllocatorKindName(answers.kind)), ",\"fits\":",
        answers.Fits() ? "true" : "false", ",\"devices\":[", absl::StrJoin(devices, ","), "]}"));
  }
  return absl::StrCat("{\"gpumem_whatif\":1,\"path\":", JsonString(path),
                      ",\"mode\":", JsonString(SummaryModeName(all.front().limited.mode)),
                      ",\"device_memory\":", *options.device_memory,
                      ",\"limit_note\":", JsonString(kLimitNote),
                      ",\"step_bytes\":", kFitSearchStep, ",\"allocators\":[",
                      absl::StrJoin(allocators, ","), "]}\n");
}

// The kinds to replay for a trace of `mode`, or an error line.
absl::StatusOr<std::vector<AllocatorKind>> KindsFor(SummaryMode mode, const Options& options) {
  switch (mode) {
    case SummaryMode::kSegments:
      return absl::InvalidArgumentError(
          "recorded under PyTorch's caching allocator: only its segments are visible; record "
          "with `gpumem record --tensors`");
    case SummaryMode::kPlain:
      for (const AllocatorKind kind : options.kinds) {
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
  if (!options.kinds.empty()) return options.kinds;
  return std::vector<AllocatorKind>(std::begin(kAllAllocators), std::end(kAllAllocators));
}

// Each allocator's answers for the trace at `path`, given its replays at the limit (`limited`,
// one per kAllAllocators), or the error line.
absl::StatusOr<std::vector<AllocatorAnswers>> AnswerAll(const std::string& path,
                                                        std::vector<AllocatorReplayResult> limited,
                                                        const Options& options) {
  absl::StatusOr<std::vector<AllocatorKind>> kinds = KindsFor(limited.front().mode, options);
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

}  // namespace

std::string WhatifUsage() { return UsageOf(WhatifCommandLine); }

int RunWhatif(const std::vector<std::string>& args) {
  Options options;
  std::vector<std::string> inputs;
  if (int done = kExitOk; !ParseCommandLine(WhatifCommandLine(&options), args, &inputs, &done)) {
    return done;
  }
  if (inputs.size() != 1) return UsageError("whatif: give exactly one trace file", "whatif");
  const std::string& path = inputs[0];
  if (absl::Status status = RefuseOutputOverInputs(kStandardOutput, inputs); !status.ok()) {
    PrintError(status.message());
    return kExitBadInput;
  }

  // The replay at the limit reads this file, so its tables are complete for symbolizing after.
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  if (!file.ok()) {
    PrintError(file.status().message());
    return kExitBadInput;
  }
  std::vector<AllocatorReplayResult> limited = ReplayThroughAllocators(
      **file, {std::begin(kAllAllocators), std::end(kAllAllocators)}, *options.device_memory);
  if ((*file)->end().damaged()) {
    PrintError((*file)->end().ErrorLine(path));
    return kExitBadInput;
  }
  const absl::StatusOr<std::vector<AllocatorAnswers>> all =
      AnswerAll(path, std::move(limited), options);
  if (!all.ok()) {
    PrintError(all.status().message());
    return kExitBadInput;
  }
  Symbolizer symbolizer(file->get());
  CallSites sites(&symbolizer, GroupBy::kUser, false);
  WriteOutput(options.json ? JsonAnswer(path, *all, **file, sites, options)
                           : TextAnswer(path, *all, **file, sites, options));
  for (const AllocatorAnswers& answers : *all) {
    if (!answers.Fits()) return kExitCheckFailed;
  }
  return kExitOk;
}

}  // namespace gpumem::report
