// `gpumem check`'s budgets: each device's peak against a limit, and what was never freed against
// none. Each broken budget is told in one line; the Markdown summary for a CI job has one row per
// budget checked, naming the largest call site at a peak over its limit.
#ifndef GPUMEM_REPORT_ANALYSIS_BUDGETS_H_
#define GPUMEM_REPORT_ANALYSIS_BUDGETS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/replay/replay.h"
#include "report/stacks/call_sites.h"

namespace gpumem::report {

struct Budgets {
  std::optional<uint64_t> max_peak;  // --max-peak: per device
  bool no_leaks = false;             // --no-leaks
};

// The --markdown summary: one table row per budget checked, biggest call site at a broken peak.
class BudgetMarkdown {
 public:
  explicit BudgetMarkdown(GroupBy group_by) : group_by_(group_by) {}

  // A row for `place`'s peak against `budget`; over it, the largest call site at the peak.
  void AddPeak(const std::string& path, const TraceReplay& replay, const PlaceUsage& place,
               uint64_t budget);
  // A row for what was never freed (against none).
  void AddLeaks(const std::string& path, const Tally& leaked, const RecordingEnd& end);
  // The whole summary: a heading saying whether every budget held, and the table.
  std::string Text(bool passed) const;

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
