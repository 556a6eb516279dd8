// `gpumem export`: a trace in another tool's format: PyTorch's memory snapshot
// (report/export/memory_viz.h), Chrome/Perfetto trace JSON (report/export/perfetto.h), folded
// stacks and speedscope (report/export/folded.h). The output is written to a temporary file next
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
#include "report/cli/arguments.h"
#include "report/cli/commands.h"
#include "report/cli/output_file.h"
#include "report/export/folded.h"
#include "report/export/memory_viz.h"
#include "report/export/perfetto.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/trace/progress.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

const char kExportUsage[] =
    R"usage(usage: gpumem export --format FORMAT [--what peak|leaks] [-o OUT] TRACE

Writes TRACE in another tool's format:
  --format memory-viz   PyTorch's memory snapshot (the pickle torch.cuda.memory._dump_snapshot()
                        writes): open it at https://pytorch.org/memory_viz or with
                        torch.cuda._memory_viz; segments live at the end, and each device's
                        allocations, frees, segments and failed allocations with their stacks
  --format perfetto     Chrome Trace Event JSON for https://ui.perfetto.dev: live bytes per
                        device as a counter (its peak is gpumem report's), allocations and frees
                        as instant events with their stacks, kernel launches per stream
  --format folded       collapsed stacks, "device;outer;...;inner BYTES" per line, for
                        flamegraph.pl and speedscope
  --format speedscope   speedscope's JSON format, one profile per device, in bytes
  --what peak|leaks     folded, speedscope: what was live at each device's peak (default), or
                        what was never freed
  -o, --output OUT      where to write ('-': standard output); default next to TRACE:
                        TRACE without .trace plus .pickle, .perfetto.json, .peak.folded,
                        .peak.speedscope.json (leaks: .leaks.folded, ...). OUT is a regular
                        file (or new), never TRACE itself
  -h, --help            print this text

Progress is shown on standard error when it is a terminal. A damaged trace exports what could be
read and says what was lost.

Exit status: 0 ok; 2 bad usage, a trace that is missing, not a trace or damaged, or an output that
cannot be written (one line: "gpumem: error: writing OUT: REASON").
)usage";

namespace {

enum class Format { kMemoryViz, kPerfetto, kFolded, kSpeedscope };

bool ParseFormat(absl::string_view text, Format* format) {
  if (text == "memory-viz") {
    *format = Format::kMemoryViz;
  } else if (text == "perfetto") {
    *format = Format::kPerfetto;
  } else if (text == "folded") {
    *format = Format::kFolded;
  } else if (text == "speedscope") {
    *format = Format::kSpeedscope;
  } else {
    return false;
  }
  return true;
}

std::string DefaultOutput(const std::string& trace, Format format, StackWeight what) {
  const std::string stem(absl::StripSuffix(trace, ".trace"));
  const char* weight = what == StackWeight::kPeak ? ".peak" : ".leaks";
  switch (format) {
    case Format::kMemoryViz:
      return stem + ".pickle";
    case Format::kPerfetto:
      return stem + ".perfetto.json";
    case Format::kFolded:
      return absl::StrCat(stem, weight, ".folded");
    case Format::kSpeedscope:
      return absl::StrCat(stem, weight, ".speedscope.json");
  }
  return stem;
}

}  // namespace

int RunExport(const std::vector<std::string>& args) {
  std::optional<Format> format;
  StackWeight what = StackWeight::kPeak;
  bool what_given = false;
  std::string output;
  ArgumentWalker walker(args);
  std::string value;
  bool missing = false;
  while (walker.NextOption()) {
    if (walker.TakesValue("--format", &value, &missing)) {
      Format parsed = Format::kMemoryViz;
      if (missing || !ParseFormat(value, &parsed)) {
        return UsageError(absl::StrCat("export: --format: not memory-viz, perfetto, folded or "
                                       "speedscope: '",
                                       value, "'"),
                          "export");
      }
      format = parsed;
    } else if (walker.TakesValue("--what", &value, &missing)) {
      if (missing || (value != "peak" && value != "leaks")) {
        return UsageError(absl::StrCat("export: --what: not peak or leaks: '", value, "'"),
                          "export");
      }
      what = value == "peak" ? StackWeight::kPeak : StackWeight::kLeaks;
      what_given = true;
    } else if (walker.TakesValue("-o", &value, &missing) ||
               walker.TakesValue("--output", &value, &missing)) {
      if (missing || value.empty()) return UsageError("export: -o needs a path", "export");
      output = value;
    } else if (walker.Is("-h") || walker.Is("--help")) {
      WriteOutput(kExportUsage);
      return kExitOk;
    } else {
      return UsageError(absl::StrCat("export: unknown flag '", walker.option(), "'"), "export");
    }
  }
  if (!format) return UsageError("export: --format FORMAT is required", "export");
  const std::vector<std::string>& inputs = walker.positional();
  if (inputs.size() != 1) return UsageError("export: give exactly one trace file", "export");
  if (what_given && *format != Format::kFolded && *format != Format::kSpeedscope) {
    return UsageError("export: --what applies to --format folded and speedscope only", "export");
  }
  const std::string& path = inputs[0];
  if (output.empty()) output = DefaultOutput(path, *format, what);
  if (absl::Status status = RefuseOutputOverInputs(output, inputs); !status.ok()) {
    PrintError(status.message());
    return kExitBadInput;
  }

  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  if (!file.ok()) {
    PrintError(file.status().message());
    return kExitBadInput;
  }
  Progress progress(path, (*file)->file_size());
  std::string bytes;
  TraceReplay replay;
  switch (*format) {
    case Format::kMemoryViz:
      replay = ExportMemoryViz(*std::move(file), &progress, &bytes);
      break;
    case Format::kPerfetto:
      replay = ExportPerfetto(*std::move(file), &progress, &bytes);
      break;
    case Format::kFolded:
    case Format::kSpeedscope: {
      WeightedStacks stacks;
      replay = WeighStacks(*std::move(file), what, &progress, &stacks);
      bytes = *format == Format::kFolded ? FoldedText(stacks) : SpeedscopeJson(stacks, path);
      break;
    }
  }
  progress.Finish();
  if (absl::Status written = WriteWholeFile(output, bytes); !written.ok()) {
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
