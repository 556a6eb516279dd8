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
#include "report/cli/arguments.h"
#include "report/cli/commands.h"
#include "report/cli/output_file.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/replay/replay.h"
#include "report/stacks/python_stacks.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_paths.h"

namespace gpumem::report {

const char kCheckUsage[] =
    R"usage(usage: gpumem check [--max-peak SIZE] [--no-leaks] [--markdown FILE]
                    [--group-by user|python|stack] TRACE...

Checks memory budgets on each trace (a TRACE may be a directory of *.trace files):
  --max-peak SIZE  no device's peak may exceed SIZE: bytes, or a number with KiB, MiB, GiB, TiB
                   (powers of 1024) or KB, MB, GB, TB (powers of 1000), e.g. 6GiB, 1.5GB
  --no-leaks       nothing (device or pinned host memory) may still be allocated at the end
  --markdown FILE  also write a short Markdown summary to FILE, for a CI job to post ('-':
                   standard output)
  --group-by user|python|stack
                   what the summary's "largest call site" at a broken peak is, for stacks with
                   Python frames (as in gpumem report): user (default) the innermost Python frame
                   of the program's own code, python the whole Python stack, stack the stack
  -h, --help       print this text

Prints one line per broken budget, or one line saying all hold.
Exit status: 0 every budget holds; 1 a budget is broken; 2 bad usage, a trace that is missing,
not a trace or damaged, or output that could not be written.
)usage";

namespace {

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

}  // namespace

int RunCheck(const std::vector<std::string>& args) {
  std::optional<uint64_t> max_peak;
  bool no_leaks = false;
  std::string markdown_path;
  GroupBy group_by = GroupBy::kUser;
  ArgumentWalker walker(args);
  std::string value;
  bool missing = false;
  while (walker.NextOption()) {
    if (walker.TakesValue("--max-peak", &value, &missing)) {
      if (missing) return UsageError("check: --max-peak needs a size", "check");
      absl::StatusOr<uint64_t> size = ParseSize(value);
      if (!size.ok()) {
        return UsageError(absl::StrCat("check: --max-peak: ", size.status().message()), "check");
      }
      max_peak = *size;
    } else if (walker.TakesValue("--markdown", &value, &missing)) {
      if (missing) return UsageError("check: --markdown needs a file name", "check");
      markdown_path = value;
    } else if (walker.TakesValue("--group-by", &value, &missing)) {
      if (missing) return UsageError("check: --group-by needs user, python or stack", "check");
      if (!ParseGroupBy(value, &group_by)) {
        return UsageError(
            absl::StrCat("check: --group-by: not user, python or stack: '", value, "'"), "check");
      }
    } else if (walker.Is("--no-leaks")) {
      no_leaks = true;
    } else if (walker.Is("-h") || walker.Is("--help")) {
      WriteOutput(kCheckUsage);
      return kExitOk;
    } else {
      return UsageError(absl::StrCat("check: unknown flag '", walker.option(), "'"), "check");
    }
  }
  const std::vector<std::string>& inputs = walker.positional();
  if (!max_peak && !no_leaks) {
    return UsageError("check: no budget given (--max-peak SIZE, --no-leaks)", "check");
  }
  if (inputs.empty()) return UsageError("check: no trace file given", "check");
  absl::StatusOr<std::vector<std::string>> paths = ExpandTracePaths(inputs);
  if (!paths.ok()) {
    PrintError(paths.status().message());
    return kExitBadInput;
  }
  for (const std::string& output : {std::string(kStandardOutput), markdown_path}) {
    if (output.empty()) continue;
    if (absl::Status status = RefuseOutputOverInputs(output, *paths); !status.ok()) {
      PrintError(status.message());
      return kExitBadInput;
    }
  }

  bool bad_input = false;
  uint64_t broken = 0;
  MarkdownSummary markdown(group_by);
  for (const std::string& path : *paths) {
    absl::StatusOr<TraceReplay> replay = ReplayTrace(path);
    if (!replay.ok()) {
      PrintError(replay.status().message());
      bad_input = true;
      continue;
    }
    if (replay->file->end().damaged()) {
      PrintError(replay->file->end().ErrorLine(path));
      bad_input = true;
      continue;
    }
    Tally leaked;
    // Only a Markdown summary names call sites: without one, no stack is symbolized.
    const bool summarize = !markdown_path.empty();
    for (const PlaceUsage& place : replay->places) {
      leaked.Add(place.live);
      if (summarize && max_peak && place.place != kPinnedHost) {
        markdown.AddPeak(path, *replay, place, *max_peak);
      }
      if (!max_peak || place.place == kPinnedHost || place.peak_bytes <= *max_peak) continue;
      ++broken;
      const uint64_t over = place.peak_bytes - *max_peak;
      WriteOutput(absl::StrCat(Printable(path), ": ", PlaceName(place.place, *replay->file),
                               " peaked at ", FormatBytes(place.peak_bytes), " (", place.peak_bytes,
                               " bytes), over --max-peak ", FormatBytes(*max_peak), " by ",
                               FormatBytes(over), " (", over, " bytes)\n"));
    }
    const RecordingEnd& end = replay->file->end().recording;
    if (const std::string note = end.UnrecordedNote(); !note.empty()) {
      WriteOutput(absl::StrCat(Printable(path), ": ", note, "\n"));
    }
    if (summarize && no_leaks) markdown.AddLeaks(path, leaked, end);
    if (no_leaks && leaked.count > 0) {
      ++broken;
      const std::string state =
          end.complete() ? "never freed" : "live when the trace ended (" + end.Describe() + ")";
      WriteOutput(absl::StrCat(Printable(path), ": ", leaked.count, " allocation",
                               leaked.count == 1 ? "" : "s", ", ", FormatBytes(leaked.bytes), " (",
                               leaked.bytes, " bytes) ", state, " (--no-leaks)\n"));
    }
  }
  if (!markdown_path.empty()) {
    if (absl::Status written = markdown.Write(markdown_path, broken == 0 && !bad_input);
        !written.ok()) {
      PrintError(absl::StrCat(written.message(), " (the Markdown summary)"));
      return kExitBadInput;
    }
  }
  if (bad_input) return kExitBadInput;
  if (broken > 0) return kExitCheckFailed;
  WriteOutput(absl::StrCat("gpumem check: all budgets hold (", paths->size(), " trace",
                           paths->size() == 1 ? "" : "s", ")\n"));
  return kExitOk;
}

}  // namespace gpumem::report
