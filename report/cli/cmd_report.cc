// `gpumem report`: the flags, then each trace analysed (report/analysis/process_report.h) and
// written as text or JSON, then, with several traces, the combined view of all the processes
// (report/analysis/combined.h).
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "report/analysis/combined.h"
#include "report/analysis/process_report.h"
#include "report/analysis/run_parts.h"
#include "report/analysis/summary_table.h"
#include "report/cli/commands.h"
#include "report/cli/flags.h"
#include "report/cli/output_file.h"
#include "report/cli/trace_outcome.h"
#include "report/cli/worker_processes.h"
#include "report/format/printable.h"
#include "report/stacks/python_stacks.h"
#include "report/trace/trace_paths.h"

namespace gpumem::report {

namespace {

constexpr char kSynopsis[] =
    R"usage(usage: gpumem report [--summary [--allocator native|expandable|none]] [--peak] [--leaks]
                     [--oom] [--fragmentation] [--kernels]
                     [--growth [--iteration-marker FUNCTION]] [--top N]
                     [--group-by user|python|stack] [--stacks short|full] [--python-only]
                     [--json] [--jobs N] TRACE...

Replays each trace's memory operations in order and reports, per device:
)usage";

constexpr char kEpilogue[] = R"usage(
A TRACE may be a directory: every *.trace file directly inside it, each reported on its own.
Several traces are analysed at once (--jobs), and printed in the order given, as one at a time
would print them.
With more than one trace, a combined view follows: per device, the highest sum of live bytes over
all processes at once (merged by CLOCK_MONOTONIC timestamp; per host when the hosts differ), when,
and what each process held then.
VMM: reserved address space is not memory use; cuMemCreate'd physical memory is.

A trace gpumem record wrote says how the program ended ("exit: ..." under the end line).

Exit status: 0 ok; 2 bad usage, a trace that is missing, not a trace or damaged (a damaged trace
is still reported as far as it could be read; the damage is named in one line on stderr), or
standard output that could not be written.
)usage";

struct Options {
  ReportRequest request;
  bool allocator_given = false;  // --allocator: an error on a trace that is not tensor-level
  bool json = false;
  size_t jobs = 0;  // traces analysed at once (0: one per hardware thread)
};

CommandLine ReportCommandLine(Options* options) {
  ReportRequest& request = options->request;
  return CommandLine{
      .command = "report",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 15,
      .flags = {
          Switch({"--summary"},
                 "a table in the layout of PyTorch's torch.cuda.memory_summary(), with notes on\n"
                 "what each row was measured from and why a row the trace cannot support is n/a",
                 &request.summary),
          Choice<SummaryModelChoice>(
              {"--allocator"},
              {{"native", SummaryModelChoice::kNative},
               {"expandable", SummaryModelChoice::kExpandable},
               {"none", SummaryModelChoice::kNone}},
              "(implies --summary; tensor-level traces only, recorded with `gpumem record\n"
              "--tensors`) the allocator model whose replay of the tensors fills the rows the\n"
              "trace cannot measure (GPU reserved, segments, non-releasable, oversize, OOMs and\n"
              "retries), marked *: by default the native caching allocator, or expandable\n"
              "segments where the trace's allocator settings had expandable_segments:True, with\n"
              "their max_split_size_mb; none: those rows n/a",
              &request.allocator)
              .Also([options] { options->allocator_given = options->request.summary = true; }),
          Switch({"--peak"},
                 "when it peaked, by how much, and what was live then by call site, largest first",
                 &request.peak),
          Switch({"--leaks"}, "what was never freed at the end, by call site", &request.leaks),
          Switch({"--oom"},
                 "each failed allocation: the request, free/total memory then, what was live by\n"
                 "call site, and what would have helped (retries of one request are grouped)",
                 &request.oom),
          Switch({"--fragmentation"},
                 "reserved (what the allocator holds from the driver) against in use (what the\n"
                 "program's allocations hold): at the peak, at the end and over time; what the\n"
                 "recording mode cannot tell says n/a and why",
                 &request.fragmentation),
          Switch({"--kernels"},
                 "kernel launches: per kernel, how many and from where; which kernels ran while\n"
                 "memory stood at its peak; allocations no kernel ever received (never used) and\n"
                 "allocations kept long after their last use (idle)",
                 &request.kernels),
          Switch({"--growth"},
                 "call sites whose live bytes rise from iteration to iteration, in bytes/iteration",
                 &request.growth),
          Text({"--iteration-marker"}, "FUNCTION", "a function name",
               "(implies --growth) an iteration starts at each allocation of the first call site\n"
               "with a frame whose function contains FUNCTION; without it, at each allocation of\n"
               "the most frequent allocation call site (at least 3)",
               &request.iteration_marker)
              .Also([&request] { request.growth = true; }),
          Note("  (none of --summary, --peak, --leaks, --oom, --fragmentation, --growth, "
               "--kernels: --peak\n   and --leaks)"),
          Number({"--top"}, "call sites shown per device or failure (default 10; 0: all)",
                 &request.top),
          GroupByFlag(
              "what one call site is: user (default) the innermost frame of your own code (a\n"
              "Python file outside the standard library and installed packages, or a native\n"
              "frame of your program's own binaries and libraries; without one, the library\n"
              "that allocated); python the whole Python stack (stacks without Python frames:\n"
              "the whole stack); stack the whole stack, native and Python frames",
              &request.group_by),
          StacksFlag(&request.stacks),
          Switch({"--python-only"},
                 "print only the Python frames of a stack that has them (native frames dropped)",
                 &request.python_only),
          Switch({"--json"},
                 "one JSON object instead of text (schema: report/report.schema.json in the\n"
                 "sources)",
                 &options->json),
          Number({"--jobs"},
                 "traces analysed at once, each in a process of its own (default: one per\n"
                 "hardware thread; 1: one after the other, in this process)",
                 &options->jobs),
      }};
}

// Reads the flags into `options` and the traces into `inputs`. False when the command is done
// already (`*done`: its exit status): --help, or a usage error (printed).
bool ParseReportFlags(const std::vector<std::string>& args, Options* options,
                      std::vector<std::string>* inputs, int* done) {
  if (!ParseCommandLine(ReportCommandLine(options), args, inputs, done)) return false;
  if (inputs->empty()) {
    *done = UsageError("report: no trace file given", "report");
    return false;
  }
  ReportRequest& request = options->request;
  if (!request.summary && !request.peak && !request.leaks && !request.oom && !request.growth &&
      !request.fragmentation && !request.kernels) {
    request.peak = request.leaks = true;
  }
  return true;
}

// --allocator on a trace whose rows are measured, not modelled: the error line; "" otherwise.
std::string AllocatorMisused(const std::string& path, const Options& options,
                             const Findings& findings) {
  if (!options.allocator_given || !findings.summary ||
      findings.summary->mode == SummaryMode::kTensors) {
    return "";
  }
  return absl::StrCat(path, ": --allocator needs a tensor-level trace (gpumem record --tensors); ",
                      findings.summary->mode == SummaryMode::kSegments
                          ? "this one was recorded under PyTorch's caching allocator, whose "
                            "reserved rows are measured"
                          : "this one has no PyTorch allocator in its stacks");
}

// The combined view of the processes (`timelines`, more than one), merged on `jobs` threads
// (--jobs), written at once as text; as JSON, returned for the document's "combined" member.
std::string CombinedView(const std::vector<ProcessTimeline>& timelines, size_t jobs, bool json) {
  if (timelines.size() < 2) return "";
  const Combined merged =
      CombineTimelines(timelines, JobCount(jobs, std::numeric_limits<size_t>::max()));
  if (json) return CombinedJson(merged, timelines);
  WriteOutput(CombinedText(merged, timelines));
  return "";
}

// Frees the timelines on up to `jobs` threads (--jobs). Each spool's file is a few MB of page
// cache that its last close frees: 64 ranks' files took 35-45 ms on one thread of a 64-core host,
// most of what the command spent after printing.
void ReleaseTimelines(std::vector<ProcessTimeline> timelines, size_t jobs) {
  RunParts(timelines.size(), JobCount(jobs, timelines.size()),
           [&](size_t i) { timelines[i] = ProcessTimeline{}; });
}

// Analyses and writes the trace at `path` (`several`: one of several, headed by its path).
TraceOutcome ReportTrace(const std::string& path, const Options& options, bool several) {
  TraceOutcome outcome;
  absl::StatusOr<ProcessReport> report = AnalyzeProcess(path, options.request);
  if (!report.ok()) {
    outcome.Error(std::string(report.status().message()));
    return outcome;
  }
  if (!report->second_pass.ok()) outcome.Error(std::string(report->second_pass.message()));
  if (std::string misused = AllocatorMisused(path, options, report->findings); !misused.empty()) {
    outcome.Error(std::move(misused));
    return outcome;
  }
  if (options.json) {
    outcome.json = ProcessReportJson(path, *report, options.request);
  } else {
    std::string text = ProcessReportText(*report, options.request);
    if (several) text = absl::StrCat("== ", Printable(path), "\n", text, "\n");
    outcome.pieces.push_back({false, std::move(text)});
  }
  if (report->replay.file->end().damaged()) {
    outcome.Error(report->replay.file->end().ErrorLine(path));
  }
  outcome.timeline = std::move(report->timeline);
  return outcome;
}

// The traces' sizes on disk (0 where there is none: opening it reports why), which stand for the
// time each takes: RunInWorkers starts the largest first.
std::vector<uint64_t> TraceSizes(const std::vector<std::string>& paths) {
  std::vector<uint64_t> sizes;
  sizes.reserve(paths.size());
  for (const std::string& path : paths) {
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(path, error);
    sizes.push_back(error ? 0 : static_cast<uint64_t>(size));
  }
  return sizes;
}

}  // namespace

std::string ReportUsage() { return UsageOf(ReportCommandLine); }

int RunReport(const std::vector<std::string>& args) {
  Options options;
  std::vector<std::string> inputs;
  if (int done = kExitOk; !ParseReportFlags(args, &options, &inputs, &done)) return done;
  absl::StatusOr<std::vector<std::string>> paths = ExpandTracePaths(inputs);
  if (!paths.ok()) {
    PrintError(paths.status().message());
    return kExitBadInput;
  }
  if (absl::Status status = RefuseOutputOverInputs(kStandardOutput, *paths); !status.ok()) {
    PrintError(status.message());
    return kExitBadInput;
  }
  const bool several = paths->size() > 1;
  options.request.timeline = several;
  // Traces analysed at once would draw their progress lines over one another.
  options.request.progress = JobCount(options.jobs, paths->size()) == 1;
  bool ok = true;
  std::vector<std::string> json_traces;
  std::vector<ProcessTimeline> timelines;
  RunInWorkers(
      paths->size(), options.jobs,
      [&](size_t i) { return EncodeOutcome(ReportTrace((*paths)[i], options, several)); },
      [&](size_t i, absl::StatusOr<WorkerResult> result) {
        absl::StatusOr<TraceOutcome> decoded =
            result.ok() ? DecodeOutcome(std::move(*result)) : result.status();
        TraceOutcome outcome;
        if (decoded.ok()) {
          outcome = std::move(*decoded);
        } else {
          outcome.Error(absl::StrCat((*paths)[i], ": ", decoded.status().message()));
        }
        for (const TraceOutcome::Piece& piece : outcome.pieces) {
          if (piece.error) {
            PrintError(piece.text);
          } else {
            WriteOutput(piece.text);
          }
        }
        ok = ok && outcome.ok;
        if (outcome.json) json_traces.push_back(std::move(*outcome.json));
        if (outcome.timeline) timelines.push_back(std::move(*outcome.timeline));
      },
      LargestFirst(TraceSizes(*paths)));
  const std::string combined = CombinedView(timelines, options.jobs, options.json);
  ReleaseTimelines(std::move(timelines), options.jobs);
  if (options.json) {
    WriteOutput(absl::StrCat("{\"gpumem_report\":1,\"traces\":[", absl::StrJoin(json_traces, ","),
                             "]", combined.empty() ? "" : ",\"combined\":", combined, "}\n"));
  }
  return ok ? kExitOk : kExitBadInput;
}

}  // namespace gpumem::report
