#include "report/analysis/budgets.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/stacks/call_sites.h"
#include "report/stacks/symbolizer.h"

namespace gpumem::report {

void BudgetMarkdown::AddPeak(const std::string& path, const TraceReplay& replay,
                             const PlaceUsage& place, uint64_t budget) {
  const bool over = place.peak_bytes > budget;
  std::string detail;
  if (over && !place.peak_sites.empty()) {
    // Stacks grouped by --group-by (as `gpumem report` does), named by their user line.
    Symbolizer symbolizer(replay.file.get());
    CallSites call_sites(&symbolizer, group_by_, /*python_only=*/false);
    std::map<uint64_t, Tally> by_site;
    uint64_t largest_site = 0;
    uint64_t largest_bytes = 0;
    for (const SiteTally& entry : place.peak_sites) {
      const uint64_t site = call_sites.Of(entry.stack_id);
      Tally& tally = by_site[site];
      tally.Add(entry.tally);
      if (tally.bytes > largest_bytes || by_site.size() == 1) {
        largest_bytes = tally.bytes;
        largest_site = site;
      }
    }
    detail = absl::StrCat("largest call site ", FormatBytes(largest_bytes), ": `",
                          call_sites.Label(largest_site), "`");
  }
  rows_.push_back(
      absl::StrCat("| `", Printable(path), "` | peak, ", PlaceName(place.place, *replay.file),
                   " | ", FormatBytes(place.peak_bytes), " | ≤ ", FormatBytes(budget), " | ",
                   over ? "❌ over by " + FormatBytes(place.peak_bytes - budget) : std::string("✅"),
                   detail.empty() ? "" : "; " + detail, " |"));
}

void BudgetMarkdown::AddLeaks(const std::string& path, const Tally& leaked,
                              const RecordingEnd& end) {
  rows_.push_back(absl::StrCat(
      "| `", Printable(path), "` | never freed | ", FormatBytes(leaked.bytes), " in ", leaked.count,
      " allocation", leaked.count == 1 ? "" : "s", " | none | ", leaked.count == 0 ? "✅" : "❌",
      end.complete() ? "" : " (" + end.Describe() + ")", " |"));
}

std::string BudgetMarkdown::Text(bool passed) const {
  std::string text = absl::StrCat("## gpumem memory check: ", passed ? "passed" : "failed",
                                  "\n\n| trace | budget | measured | limit | result |\n"
                                  "|---|---|---|---|---|\n");
  for (const std::string& row : rows_) absl::StrAppend(&text, row, "\n");
  return text;
}

namespace {

// Each device's peak against --max-peak.
uint64_t CheckPeaks(const std::string& path, const TraceReplay& replay, const Budgets& budgets,
                    BudgetMarkdown* markdown, std::vector<std::string>* lines) {
  uint64_t broken = 0;
  for (const PlaceUsage& place : replay.places) {
    if (!budgets.max_peak || place.place == kPinnedHost) continue;
    // Only a Markdown summary names call sites: without one, no stack is symbolized.
    if (markdown != nullptr) markdown->AddPeak(path, replay, place, *budgets.max_peak);
    if (place.peak_bytes <= *budgets.max_peak) continue;
    ++broken;
    const uint64_t over = place.peak_bytes - *budgets.max_peak;
    lines->push_back(absl::StrCat(
        Printable(path), ": ", PlaceName(place.place, *replay.file), " peaked at ",
        FormatBytes(place.peak_bytes), " (", place.peak_bytes, " bytes), over --max-peak ",
        FormatBytes(*budgets.max_peak), " by ", FormatBytes(over), " (", over, " bytes)\n"));
  }
  return broken;
}

// What was never freed, against --no-leaks (and the trace's note on what it could not record).
uint64_t CheckLeaks(const std::string& path, const TraceReplay& replay, const Budgets& budgets,
                    BudgetMarkdown* markdown, std::vector<std::string>* lines) {
  Tally leaked;
  for (const PlaceUsage& place : replay.places) leaked.Add(place.live);
  const RecordingEnd& end = replay.file->end().recording;
  if (const std::string note = end.UnrecordedNote(); !note.empty()) {
    lines->push_back(absl::StrCat(Printable(path), ": ", note, "\n"));
  }
  if (markdown != nullptr && budgets.no_leaks) markdown->AddLeaks(path, leaked, end);
  if (!budgets.no_leaks || leaked.count == 0) return 0;
  const std::string state =
      end.complete() ? "never freed" : "live when the trace ended (" + end.Describe() + ")";
  lines->push_back(absl::StrCat(Printable(path), ": ", leaked.count, " allocation",
                                leaked.count == 1 ? "" : "s", ", ", FormatBytes(leaked.bytes), " (",
                                leaked.bytes, " bytes) ", state, " (--no-leaks)\n"));
  return 1;
}

}  // namespace

BudgetVerdict CheckBudgets(const std::string& path, const TraceReplay& replay,
                           const Budgets& budgets, BudgetMarkdown* markdown) {
  BudgetVerdict verdict;
  verdict.broken = CheckPeaks(path, replay, budgets, markdown, &verdict.lines);
  verdict.broken += CheckLeaks(path, replay, budgets, markdown, &verdict.lines);
  return verdict;
}

}  // namespace gpumem::report
