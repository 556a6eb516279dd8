// `gpumem check`'s budgets: each device's peak against a limit, and what was never freed against
// none. Each broken budget is told in one line; the Markdown summary for a CI job has one row per
// budget checked, naming the largest call site at a peak over its limit.
#ifndef GPUMEM_REPORT_ANALYSIS_BUDGETS_H_
#define GPUMEM_REPORT_ANALYSIS_BUDGETS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/replay/replay.h"
#include "report/stacks/call_sites.h"
#include "report/stacks/python_stacks.h"
#include "report/stacks/symbolizer.h"

namespace gpumem::report {

struct Budgets {
  std::optional<uint64_t> max_peak;  // --max-peak: per device
  bool no_leaks = false;             // --no-leaks
};

// The --markdown summary: one table row per budget checked, biggest call site at a broken peak.
class BudgetMarkdown {
 public:
  explicit BudgetMarkdown(GroupBy group_by) : group_by_(group_by) {}

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
  // The whole summary: a heading saying whether every budget held, and the table.
  std::string Text(bool passed) const {
    std::string text = absl::StrCat("## gpumem memory check: ", passed ? "passed" : "failed",
                                    "\n\n| trace | budget | measured | limit | result |\n"
                                    "|---|---|---|---|---|\n");
    for (const std::string& row : rows_) absl::StrAppend(&text, row, "\n");
    return text;
  }

 private:
  GroupBy group_by_;
  std::vector<std::string> rows_;
};

// What one trace broke: one line (with its newline) per broken budget (and the trace's note on what
// it could not record), in the order they are checked.
struct BudgetVerdict {
  std::vector<std::string> lines;
  uint64_t broken = 0;
};

// Checks `replay` (the trace at `path`) against `budgets`; a row per budget into `markdown` (may be
// null).
BudgetVerdict CheckBudgets(const std::string& path, const TraceReplay& replay,
                           const Budgets& budgets, BudgetMarkdown* markdown);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ANALYSIS_BUDGETS_H_
