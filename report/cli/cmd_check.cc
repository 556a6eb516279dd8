// `gpumem check`: memory budgets for CI. Exit 0 when every budget holds, 1 when one is broken
// (one line each, saying by how much), 2 on bad input.
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "report/analysis/budgets.h"
#include "report/cli/commands.h"
#include "report/cli/flags.h"
#include "report/cli/output_file.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/replay/replay.h"
#include "report/stacks/python_stacks.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_paths.h"

namespace gpumem::report {

namespace {

constexpr char kSynopsis[] =
    R"usage(usage: gpumem check [--max-peak SIZE] [--no-leaks] [--markdown FILE]
                    [--group-by user|python|stack] TRACE...

Checks memory budgets on each trace (a TRACE may be a directory of *.trace files):
)usage";

constexpr char kEpilogue[] = R"usage(
Prints one line per broken budget, or one line saying all hold.
Exit status: 0 every budget holds; 1 a budget is broken; 2 bad usage, a trace that is missing,
not a trace or damaged, or output that could not be written.
)usage";

struct Options {
  Budgets budgets;
  std::string markdown_path;  // empty: no Markdown summary
  GroupBy group_by = GroupBy::kUser;
};

CommandLine CheckCommandLine(Options* options) {
  return CommandLine{
      .command = "check",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 19,
      .flags = {
          Size({"--max-peak"},
               "no device's peak may exceed SIZE: bytes, or a number with KiB, MiB, GiB, TiB\n"
               "(powers of 1024) or KB, MB, GB, TB (powers of 1000), e.g. 6GiB, 1.5GB",
               &options->budgets.max_peak),
          Switch({"--no-leaks"},
                 "nothing (device or pinned host memory) may still be allocated at the end",
                 &options->budgets.no_leaks),
          Text({"--markdown"}, "FILE", "a file name",
               "also write a short Markdown summary to FILE, for a CI job to post ('-':\n"
               "standard output)",
               &options->markdown_path),
          GroupByFlag(
              "what the summary's \"largest call site\" at a broken peak is (as in gpumem\n"
              "report): user (default) the innermost frame of your own code, python the whole\n"
              "Python stack, stack the whole stack; it is named by its user line",
              &options->group_by),
      }};
}

// The budgets broken by one trace, each told in one line on standard output (and a row of
// `markdown`, with one); a damaged or unreadable trace is bad input.
struct TraceVerdict {
  bool bad_input = false;
  uint64_t broken = 0;
};

TraceVerdict CheckTrace(const std::string& path, const Options& options, BudgetMarkdown* markdown) {
  absl::StatusOr<TraceReplay> replay = ReplayTrace(path);
  if (!replay.ok()) {
    PrintError(replay.status().message());
    return {.bad_input = true};
  }
  if (replay->file->end().damaged()) {
    PrintError(replay->file->end().ErrorLine(path));
    return {.bad_input = true};
  }
  const BudgetVerdict verdict = CheckBudgets(path, *replay, options.budgets,
                                             options.markdown_path.empty() ? nullptr : markdown);
  for (const std::string& line : verdict.lines) WriteOutput(line);
  return {.broken = verdict.broken};
}

// The traces to check, after the flags: an error printed and nullopt when there is none, or when
// an output (standard output, the Markdown file) is one of them.
std::optional<std::vector<std::string>> CheckedTraces(const std::vector<std::string>& inputs,
                                                      const Options& options, int* exit_code) {
  *exit_code = kExitBadInput;
  if (!options.budgets.max_peak && !options.budgets.no_leaks) {
    *exit_code = UsageError("check: no budget given (--max-peak SIZE, --no-leaks)", "check");
    return std::nullopt;
  }
  if (inputs.empty()) {
    *exit_code = UsageError("check: no trace file given", "check");
    return std::nullopt;
  }
  absl::StatusOr<std::vector<std::string>> paths = ExpandTracePaths(inputs);
  if (!paths.ok()) {
    PrintError(paths.status().message());
    return std::nullopt;
  }
  for (const std::string& output : {std::string(kStandardOutput), options.markdown_path}) {
    if (output.empty()) continue;
    if (absl::Status status = RefuseOutputOverInputs(output, *paths); !status.ok()) {
      PrintError(status.message());
      return std::nullopt;
    }
  }
  return *std::move(paths);
}

}  // namespace

std::string CheckUsage() { return UsageOf(CheckCommandLine); }

int RunCheck(const std::vector<std::string>& args) {
  Options options;
  std::vector<std::string> inputs;
  int exit_code = kExitOk;
  if (!ParseCommandLine(CheckCommandLine(&options), args, &inputs, &exit_code)) return exit_code;
  const std::optional<std::vector<std::string>> paths = CheckedTraces(inputs, options, &exit_code);
  if (!paths) return exit_code;

  TraceVerdict all;
  BudgetMarkdown markdown(options.group_by);
  for (const std::string& path : *paths) {
    const TraceVerdict verdict = CheckTrace(path, options, &markdown);
    all.bad_input = all.bad_input || verdict.bad_input;
    all.broken += verdict.broken;
  }
  if (!options.markdown_path.empty()) {
    if (absl::Status written =
            WriteWholeFile(options.markdown_path, markdown.Text(all.broken == 0 && !all.bad_input));
        !written.ok()) {
      PrintError(absl::StrCat(written.message(), " (the Markdown summary)"));
      return kExitBadInput;
    }
  }
  if (all.bad_input) return kExitBadInput;
  if (all.broken > 0) return kExitCheckFailed;
  WriteOutput(absl::StrCat("gpumem check: all budgets hold (", paths->size(), " trace",
                           paths->size() == 1 ? "" : "s", ")\n"));
  return kExitOk;
}

}  // namespace gpumem::report
