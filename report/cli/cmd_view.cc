// `gpumem view`: one self-contained HTML page of a trace (viewer/): the memory timeline per
// device with its largest call sites as bands, launches, the peak, failed allocations and
// iterations marked; flame graphs of what was live at the peak and never freed; the summary table
// and tables of call sites; gpumem advise's ranked changes (viewer/page_advice.h). Written
// atomically (a temporary file renamed into place).
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "report/cli/commands.h"
#include "report/cli/flags.h"
#include "report/cli/output_file.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "viewer/html_page.h"
#include "viewer/page_advice.h"
#include "viewer/page_data.h"

namespace gpumem::report {

namespace {

constexpr char kSynopsis[] =
    R"usage(usage: gpumem view [-o OUT.html] [--bands N] [--group-by user|python|stack]
                  [--iteration-marker FUNCTION] [--device-memory SIZE] TRACE

Writes one self-contained HTML page of TRACE (no network needed: open it from disk): per device,
memory in use over time with the largest call sites as bands (zoom with the wheel, pan by
dragging, hover or click for a call site's stack), reserved memory where the trace knows it,
kernel launches, the peak, failed allocations and iterations marked; flame graphs of what was live
at the peak and what was never freed; the summary table and tables of call sites; and, for a trace
recorded at tensor level, what would lower the peak, as gpumem advise TRACE ranks it.
)usage";

constexpr char kEpilogue[] = R"usage(
Exit status: 0 ok, also for a trace gpumem advise cannot answer for (the page says why); 2 bad
usage, a trace that is missing, not a trace or damaged (a damaged trace still gives a page of what
could be read, with a notice at its top), or a page that could not be written.
)usage";

struct Options {
  viewer::ViewOptions view;
  std::optional<uint64_t> device_memory;  // advice's limit; nullopt: the recorded device's
  std::string output;                     // empty: next to the trace
};

CommandLine ViewCommandLine(Options* options) {
  return CommandLine{
      .command = "view",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 15,
      .flags = {
          OutputFlag(
              {"-o"}, "OUT",
              "where to write the page (default: TRACE with .html for .trace; '-': stdout);\n"
              "a regular file (or new), never TRACE itself",
              &options->output),
          Number({"--bands"},
                 "call sites drawn as bands of their own, the rest as 'other' (default 12)",
                 &options->view.bands),
          GroupByFlag("what one call site is (as gpumem report; default user: the line of your\n"
                      "own code it came from)",
                      &options->view.group_by),
          Text({"--iteration-marker"}, "FUNCTION", "a function name",
               "iterations start at allocations whose stack has a function containing FUNCTION\n"
               "(default: detected, as gpumem report --growth does)",
               &options->view.iteration_marker),
          AdviseDeviceMemoryFlag(&options->device_memory),
      }};
}

// TRACE.trace -> TRACE.html; anything else gets .html appended.
std::string DefaultOutput(const std::string& trace) {
  if (absl::EndsWith(trace, ".trace")) {
    return absl::StrCat(trace.substr(0, trace.size() - 6), ".html");
  }
  return absl::StrCat(trace, ".html");
}

}  // namespace

std::string ViewUsage() { return UsageOf(ViewCommandLine); }

int RunView(const std::vector<std::string>& args) {
  Options options;
  std::vector<std::string> inputs;
  if (int done = kExitOk; !ParseCommandLine(ViewCommandLine(&options), args, &inputs, &done)) {
    return done;
  }
  if (inputs.empty()) return UsageError("view: no trace file given", "view");
  if (inputs.size() > 1) return UsageError("view: one trace at a time", "view");
  const std::string& path = inputs[0];
  std::string& output = options.output;
  if (output.empty()) output = DefaultOutput(path);
  if (absl::Status status = RefuseOutputOverInputs(output, inputs); !status.ok()) {
    PrintError(status.message());
    return kExitBadInput;
  }

  absl::StatusOr<viewer::PageData> page = viewer::BuildPageData(path, options.view);
  if (!page.ok()) {
    PrintError(page.status().message());
    return kExitBadInput;
  }
  page->advice = viewer::BuildPageAdvice(path, options.device_memory);
  const std::string html = viewer::RenderPage(*page);
  if (absl::Status written = WriteWholeFile(output, html); !written.ok()) {
    PrintError(written.message());
    return kExitBadInput;
  }
  if (output != kStandardOutput) {
    std::fprintf(stderr, "gpumem: page written to %s (%s)\n", Printable(output).c_str(),
                 FormatBytes(html.size()).c_str());
  }
  if (!page->notice.empty()) {
    PrintError(page->notice);
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace gpumem::report
