// `gpumem export`: a trace in another tool's format: PyTorch's memory snapshot
// (report/export/memory_viz.h), Perfetto's protobuf trace (report/export/perfetto.h), Chrome's
// trace JSON (report/export/chrome_json.h), pprof's profile (report/export/pprof.h), folded stacks
// and speedscope (report/export/folded.h). The output is written to a temporary file next
// to it and renamed into place, so a failed export never leaves half a file.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "report/cli/commands.h"
#include "report/cli/flags.h"
#include "report/cli/output_file.h"
#include "report/export/chrome_json.h"
#include "report/export/chunked_output.h"
#include "report/export/folded.h"
#include "report/export/memory_viz.h"
#include "report/export/perfetto.h"
#include "report/export/pprof.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/trace/progress.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

namespace {

constexpr char kSynopsis[] =
    R"usage(usage: gpumem export --format FORMAT [--what peak|leaks] [-o OUT] TRACE

Writes TRACE in another tool's format:
)usage";

constexpr char kEpilogue[] = R"usage(
Progress is shown on standard error when it is a terminal. A damaged trace exports what could be
read and says what was lost.

Exit status: 0 ok; 2 bad usage, a trace that is missing, not a trace or damaged, or an output that
cannot be written (one line: "gpumem: error: writing OUT: REASON").
)usage";

enum class Format { kMemoryViz, kPerfetto, kChromeJson, kPprof, kFolded, kSpeedscope };

struct Options {
  Format format = Format::kMemoryViz;
  StackWeight what = StackWeight::kPeak;
  bool what_given = false;  // an error for the formats without a weight
  std::string output;       // empty: next to the trace
};

CommandLine ExportCommandLine(Options* options) {
  Flag format = Choice<Format>({"--format"},
                               {{"memory-viz", Format::kMemoryViz},
                                {"perfetto", Format::kPerfetto},
                                {"chrome-json", Format::kChromeJson},
                                {"perfetto-json", Format::kChromeJson},
                                {"pprof", Format::kPprof},
                                {"folded", Format::kFolded},
                                {"speedscope", Format::kSpeedscope}},
                               "", &options->format)
                    .Once()
                    .Required();
  format.value_name = "FORMAT";
  format.value_help = {
      {"memory-viz",
       "PyTorch's memory snapshot (the pickle torch.cuda.memory._dump_snapshot()\n"
       "writes): open it at https://pytorch.org/memory_viz or with\n"
       "torch.cuda._memory_viz; segments live at the end, and each device's\n"
       "allocations, frees, segments and failed allocations with their stacks"},
      {"perfetto",
       "Perfetto's protobuf trace for https://ui.perfetto.dev and its trace\n"
       "processor: live bytes per device as a counter (its peak is gpumem\n"
       "report's), allocations and frees as instant events with their stacks,\n"
       "kernel launches per stream; far smaller than JSON, and loads where JSON\n"
       "is too large"},
      {"chrome-json",
       "the same timeline as Chrome Trace Event JSON (chrome://tracing,\n"
       "ui.perfetto.dev); also accepted as perfetto-json"},
      {"pprof",
       "pprof's profile.proto, gzip-compressed (pprof, Pyroscope, Parca): per\n"
       "stack alloc_objects/alloc_space (every allocation), peak_objects/\n"
       "peak_space (live at the device's peak, the default) and\n"
       "never_freed_objects/never_freed_space; labels place and device"},
      {"folded",
       "collapsed stacks, \"device;outer;...;inner BYTES\" per line, for\n"
       "flamegraph.pl and speedscope"},
      {"speedscope", "speedscope's JSON format, one profile per device, in bytes"},
  };
  return CommandLine{
      .command = "export",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 24,
      .flags = {
          std::move(format),
          Choice<StackWeight>({"--what"},
                              {{"peak", StackWeight::kPeak}, {"leaks", StackWeight::kLeaks}},
                              "folded, speedscope: what was live at each device's peak (default), "
                              "or\nwhat was never freed",
                              &options->what)
              .Also([options] { options->what_given = true; }),
          OutputFlag({"-o", "--output"}, "OUT",
                     "where to write ('-': standard output); default next to TRACE:\n"
                     "TRACE without .trace plus .pickle, .pftrace, .perfetto.json, .pb.gz,\n"
                     ".peak.folded, .peak.speedscope.json (leaks: .leaks.folded, ...). OUT\n"
                     "is a regular file (or new), never TRACE itself",
                     &options->output),
      }};
}

std::string DefaultOutput(const std::string& trace, Format format, StackWeight what) {
  const std::string stem(absl::StripSuffix(trace, ".trace"));
  const char* weight = what == StackWeight::kPeak ? ".peak" : ".leaks";
  switch (format) {
    case Format::kMemoryViz:
      return stem + ".pickle";
    case Format::kPerfetto:
      return stem + ".pftrace";
    case Format::kChromeJson:
      return stem + ".perfetto.json";
    case Format::kPprof:
      return stem + ".pb.gz";
    case Format::kFolded:
      return absl::StrCat(stem, weight, ".folded");
    case Format::kSpeedscope:
      return absl::StrCat(stem, weight, ".speedscope.json");
  }
  return stem;
}

// The flags and the one trace; false when the command is done (`*done`: its exit status).
bool ParseExportFlags(const std::vector<std::string>& args, Options* options, std::string* path,
                      int* done) {
  std::vector<std::string> inputs;
  if (!ParseCommandLine(ExportCommandLine(options), args, &inputs, done)) return false;
  if (inputs.size() != 1) {
    *done = UsageError("export: give exactly one trace file", "export");
    return false;
  }
  if (options->what_given && options->format != Format::kFolded &&
      options->format != Format::kSpeedscope) {
    *done = UsageError("export: --what applies to --format folded and speedscope only", "export");
    return false;
  }
  *path = inputs[0];
  if (options->output.empty())
    options->output = DefaultOutput(*path, options->format, options->what);
  if (absl::Status status = RefuseOutputOverInputs(options->output, inputs); !status.ok()) {
    PrintError(status.message());
    *done = kExitBadInput;
    return false;
  }
  return true;
}

// The trace `file` in the chosen format, into `out`; the replay that read it.
TraceReplay Convert(std::unique_ptr<TraceFile> file, const std::string& path,
                    const Options& options, Progress* progress, ChunkedOutput* out) {
  std::string* bytes = out->text();
  switch (options.format) {
    case Format::kMemoryViz:
      return ExportMemoryViz(std::move(file), progress, bytes);
    case Format::kPerfetto:
      return ExportPerfetto(std::move(file), progress, out);
    case Format::kChromeJson:
      return ExportChromeJson(std::move(file), progress, out);
    case Format::kPprof:
      return ExportPprof(std::move(file), progress, bytes);
    case Format::kFolded:
    case Format::kSpeedscope:
      break;
  }
  WeightedStacks stacks;
  TraceReplay replay = WeighStacks(std::move(file), options.what, progress, &stacks);
  *bytes = options.format == Format::kFolded ? FoldedText(stacks) : SpeedscopeJson(stacks, path);
  return replay;
}

}  // namespace

std::string ExportUsage() { return UsageOf(ExportCommandLine); }

int RunExport(const std::vector<std::string>& args) {
  Options options;
  std::string path;
  if (int done = kExitOk; !ParseExportFlags(args, &options, &path, &done)) return done;
  const std::string& output = options.output;

  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  if (!file.ok()) {
    PrintError(file.status().message());
    return kExitBadInput;
  }
  // The output is created before the trace is read, and the timeline formats reach it as they
  // are produced: their size grows with the trace's events.
  absl::StatusOr<std::unique_ptr<OutputWriter>> writer = OutputWriter::Open(output);
  if (!writer.ok()) {
    PrintError(writer.status().message());
    return kExitBadInput;
  }
  ChunkedOutput bytes([&writer](absl::string_view chunk) { return (*writer)->Write(chunk); });
  Progress progress(path, (*file)->file_size());
  const TraceReplay replay = Convert(*std::move(file), path, options, &progress, &bytes);
  progress.Finish();
  absl::Status written = bytes.Finish();
  if (written.ok()) written = (*writer)->Finish();
  if (!written.ok()) {
    PrintError(written.message());
    return kExitBadInput;
  }
  if (replay.file->end().damaged()) {
    PrintError(absl::StrCat(replay.file->end().ErrorLine(path), "; exported what could be read",
                            output == "-" ? "" : absl::StrCat(" to ", output)));
    return kExitBadInput;
  }
  if (output != "-") {
    std::fprintf(stderr, "gpumem: exported %s to %s (%s)\n", Printable(path).c_str(),
                 Printable(output).c_str(), FormatBytes(bytes.size()).c_str());
  }
  return kExitOk;
}

}  // namespace gpumem::report
