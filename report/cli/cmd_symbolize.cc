// `gpumem symbolize`: resolves every return address of a trace's stacks with the binaries on this
// machine and appends the results to the trace as SymbolizedFrame packets, so that the trace reads
// the same (function, file, line) on a machine without the binaries. Several traces, or directories
// of them, are each symbolized in place: written aside, then renamed over the original.
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "report/cli/commands.h"
#include "report/cli/flags.h"
#include "report/cli/output_file.h"
#include "report/cli/symbolize_file.h"
#include "report/format/printable.h"
#include "report/trace/trace_paths.h"

namespace gpumem::report {

namespace {

constexpr char kSynopsis[] = R"usage(usage: gpumem symbolize [-o OUT] TRACE...

Resolves every stack frame of each TRACE to function, file and line with the binaries on this
machine (as `dump --symbolize` does: the recorded paths, else GPUMEM_SYMBOL_PATH matched by GNU
build id) and appends the results to that TRACE as SymbolizedFrame packets. `gpumem report`,
`check` and `dump --symbolize` use them before any local binary, so the trace then reads the same
on a machine without the binaries: from then on reports never open a binary for the modules it
looked at, whatever lies at their recorded paths elsewhere. Frames already recorded are not
resolved again: running it twice adds nothing; frames that no binary here resolves are left out
(print as module+offset).

A TRACE may be a directory: every *.trace file directly inside it (one per process), each
symbolized in place. A trace that fails does not stop the others.

The new trace is written to a temporary file beside it, flushed to disk and renamed over TRACE
(keeping its permissions): if anything fails (a full disk, a file-size limit), TRACE is left
byte for byte as it was.

)usage";

constexpr char kEpilogue[] = R"usage(
Exit status: 0 ok; 2 bad usage, or a trace that is missing, not a trace, damaged or unwritable
(the others are still symbolized), or output that could not be written.
)usage";

struct Options {
  std::string output;  // empty: each trace in place
};

CommandLine SymbolizeCommandLine(Options* options) {
  return CommandLine{
      .command = "symbolize",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 14,
      .flags = {
          OutputFlag({"-o", "--output"}, "OUT",
                     "write a copy of TRACE with the frames appended to OUT; TRACE is left as it "
                     "is\n(only with a single trace file; OUT may not be TRACE under any name)",
                     &options->output),
      }};
}

// Symbolizes one trace file, in place or (with `output`) into a copy; prints one line on stdout,
// or the error on stderr and returns false.
bool SymbolizeTrace(const std::string& path, const std::string& output) {
  const std::string target = output.empty() ? path : output;
  const absl::StatusOr<SymbolizeCounts> counts = SymbolizeTraceFile(path, target);
  if (!counts.ok()) {
    PrintError(counts.status().message());
    return false;
  }
  WriteOutput(absl::StrCat(Printable(target), ": ", counts->frames,
                           " return address(es) symbolized, ", counts->already,
                           " already in the trace, ", counts->unresolved, " unresolved\n"));
  FlushOutput();  // each trace's line before the next trace's error, if any
  return true;
}

}  // namespace

std::string SymbolizeUsage() { return UsageOf(SymbolizeCommandLine); }

int RunSymbolize(const std::vector<std::string>& args) {
  Options options;
  std::vector<std::string> inputs;
  if (int done = kExitOk; !ParseCommandLine(SymbolizeCommandLine(&options), args, &inputs, &done)) {
    return done;
  }
  const std::string& output = options.output;
  if (inputs.empty()) return UsageError("symbolize: no trace file given", "symbolize");
  std::error_code error;
  if (!output.empty() && (inputs.size() != 1 || std::filesystem::is_directory(inputs[0], error))) {
    return UsageError("symbolize: -o takes a single trace file, not a directory or several traces",
                      "symbolize");
  }
  absl::StatusOr<std::vector<std::string>> paths = ExpandTracePaths(inputs);
  if (!paths.ok()) {
    PrintError(paths.status().message());
    return kExitBadInput;
  }
  for (const std::string& written : {std::string(kStandardOutput), output}) {
    if (written.empty()) continue;
    if (absl::Status status = RefuseOutputOverInputs(written, *paths); !status.ok()) {
      PrintError(status.message());
      return kExitBadInput;
    }
  }
  bool ok = true;
  for (const std::string& path : *paths) ok = SymbolizeTrace(path, output) && ok;
  return ok ? kExitOk : kExitBadInput;
}

}  // namespace gpumem::report
