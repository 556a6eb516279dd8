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
  std::optional<uint64_t> max_peak;
  bool no_leaks = false;
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
               &options->max_peak),
          Switch({"--no-leaks"},
                 "nothing (device or pinned host memory) may still be allocated at the end",
                 &options->no_leaks),
          Text({"--markdown"}, "FILE", "a file name",
               "also write a short Markdown summary to FILE, for a CI job to post ('-':\n"
               "standard output)",
               &options->markdown_path),
          GroupByFlag(
              "what the summary's \"largest call site\" at a broken peak is, for stacks with\n"
              "Python frames (as in gpumem report): user (default) the innermost Python frame\n"
              "of the program's own code, python the whole Python stack, stack the stack",
              &options->group_by),
      }};
}

// The --markdown summary: one table row per budget checked, biggest call site at a broken peak.
class MarkdownSummary {
 public:
  explicit MarkdownSummary(GroupBy group_by) : group_by_(group_by) {}

  void AddPeak(const std::string& path, const TraceReplay& replay, const PlaceUsage& place,
               uint64_t budget) {
    const bool over = place.peak_bytes > budget;
    std::string detail;
    if (over && !place.peak_sites.empty()) {
      // Stacks with Python frames grouped by --group-by (as `gpumem report` does), named by the
      // frame that names their call site; any other stack is its own call site.
      Symbolizer symbolizer(replay.file.get());
      std::map<std::string, std::pair<Tally, std::string>> by_site;
      std::string largest_key;
      uint64_t largest_bytes = 0;
      for (const SiteTally& entry : place.peak_sites) {
        std::vector<Frame> frames = symbolizer.Symbolize(entry.stack_id);
        const std::string key = HasPythonFrames(frames) ? CallSiteKey(frames, group_by_)
                                                        : absl::StrCat("#", entry.stack_id);
        auto& [tally, label] = by_site[key];
        if (tally.count == 0) {
          const Frame* frame = CallSiteFrame(frames, group_by_);
          label = frame == nullptr ? "no stack" : frame->ToString();
        }
        tally.Add(entry.tally);
        if (tally.bytes > largest_bytes || largest_key.empty()) {
          largest_bytes = tally.bytes;
          largest_key = key;
        }
      }
      detail = absl::StrCat("largest call site ", FormatBytes(largest_bytes), ": `",
                            by_site[largest_key].second, "`");
    }
    rows_.push_back(absl::StrCat(
        "| `", Printable(path), "` | peak, ", PlaceName(place.place, *replay.file), " | ",
        FormatBytes(place.peak_bytes), " | ≤ ", FormatBytes(budget), " | ",
        over ? "❌ over by " + FormatBytes(place.peak_bytes - budget) : std::string("✅"),
        detail.empty() ? "" : "; " + detail, " |"));
  }
  void AddLeaks(const std::string& path, const Tally& leaked, const RecordingEnd& end) {
    rows_.push_back(absl::StrCat(
        "| `", Printable(path), "` | never freed | ", FormatBytes(leaked.bytes), " in ",
        leaked.count, " allocation", leaked.count == 1 ? "" : "s", " | none | ",
        leaked.count == 0 ? "✅" : "❌", end.complete() ? "" : " (" + end.Describe() + ")", " |"));
  }
  absl::Status Write(const std::string& path, bool passed) const {
    std::string text = absl::StrCat("## gpumem memory check: ", passed ? "passed" : "failed",
                                    "\n\n| trace | budget | measured | limit | result |\n"
                                    "|---|---|---|---|---|\n");
    for (const std::string& row : rows_) absl::StrAppend(&text, row, "\n");
    return WriteWholeFile(path, text);
  }

 private:
  GroupBy group_by_;
  std::vector<std::string> rows_;
};

// The budgets broken by one trace, each told in one line on standard output (and a row of
// `markdown`, with one); a damaged or unreadable trace is bad input.
struct TraceVerdict {
  bool bad_input = false;
  uint64_t broken = 0;
};

// Each device's peak against --max-peak.
uint64_t CheckPeaks(const std::string& path, const TraceReplay& replay, const Options& options,
                    MarkdownSummary* markdown) {
  uint64_t broken = 0;
  for (const PlaceUsage& place : replay.places) {
    if (!options.max_peak || place.place == kPinnedHost) continue;
    // Only a Markdown summary names call sites: without one, no stack is symbolized.
    if (!options.markdown_path.empty()) markdown->AddPeak(path, replay, place, *options.max_peak);
    if (place.peak_bytes <= *options.max_peak) continue;
    ++broken;
    const uint64_t over = place.peak_bytes - *options.max_peak;
    WriteOutput(absl::StrCat(Printable(path), ": ", PlaceName(place.place, *replay.file),
                             " peaked at ", FormatBytes(place.peak_bytes), " (", place.peak_bytes,
                             " bytes), over --max-peak ", FormatBytes(*options.max_peak), " by ",
                             FormatBytes(over), " (", over, " bytes)\n"));
  }
  return broken;
}

// What was never freed, against --no-leaks (and the trace's note on what it could not record).
uint64_t CheckLeaks(const std::string& path, const TraceReplay& replay, const Options& options,
                    MarkdownSummary* markdown) {
  Tally leaked;
  for (const PlaceUsage& place : replay.places) leaked.Add(place.live);
  const RecordingEnd& end = replay.file->end().recording;
  if (const std::string note = end.UnrecordedNote(); !note.empty()) {
    WriteOutput(absl::StrCat(Printable(path), ": ", note, "\n"));
  }
  if (!options.markdown_path.empty() && options.no_leaks) markdown->AddLeaks(path, leaked, end);
  if (!options.no_leaks || leaked.count == 0) return 0;
  const std::string state =
      end.complete() ? "never freed" : "live when the trace ended (" + end.Describe() + ")";
  WriteOutput(absl::StrCat(Printable(path), ": ", leaked.count, " allocation",
                           leaked.count == 1 ? "" : "s", ", ", FormatBytes(leaked.bytes), " (",
                           leaked.bytes, " bytes) ", state, " (--no-leaks)\n"));
  return 1;
}

TraceVerdict CheckTrace(const std::string& path, const Options& options,
                        MarkdownSummary* markdown) {
  absl::StatusOr<TraceReplay> replay = ReplayTrace(path);
  if (!replay.ok()) {
    PrintError(replay.status().message());
    return {.bad_input = true};
  }
  if (replay->file->end().damaged()) {
    PrintError(replay->file->end().ErrorLine(path));
    return {.bad_input = true};
  }
  const uint64_t peaks = CheckPeaks(path, *replay, options, markdown);
  return {.broken = peaks + CheckLeaks(path, *replay, options, markdown)};
}

// The traces to check, after the flags: an error printed and nullopt when there is none, or when
// an output (standard output, the Markdown file) is one of them.
std::optional<std::vector<std::string>> CheckedTraces(const std::vector<std::string>& inputs,
                                                      const Options& options, int* exit_code) {
  *exit_code = kExitBadInput;
  if (!options.max_peak && !options.no_leaks) {
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
  MarkdownSummary markdown(options.group_by);
  for (const std::string& path : *paths) {
    const TraceVerdict verdict = CheckTrace(path, options, &markdown);
    all.bad_input = all.bad_input || verdict.bad_input;
    all.broken += verdict.broken;
  }
  if (!options.markdown_path.empty()) {
    if (absl::Status written =
            markdown.Write(options.markdown_path, all.broken == 0 && !all.bad_input);
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
