// The summary `gpumem record` prints once the program ended, from the analyses `gpumem report`
// makes (process_report.h): a few lines, so the answer is there the moment the run ends, and the
// report has the rest. One process: per device its peak with the largest call sites, what was
// never freed (what allocators and libraries hold told apart), the fastest growing call site, the
// failed allocations. Several processes: a line each, the largest first, and the combined peak.
#ifndef GPUMEM_REPORT_ANALYSIS_RUN_SUMMARY_H_
#define GPUMEM_REPORT_ANALYSIS_RUN_SUMMARY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "report/analysis/combined.h"
#include "report/analysis/process_report.h"

namespace gpumem::report {

// Call sites shown under a peak, devices shown per process, processes shown one line each.
inline constexpr size_t kSummarySites = 3;
inline constexpr size_t kSummaryPlaces = 2;
inline constexpr size_t kSummaryProcesses = 4;

// What AnalyzeProcess is asked for: failed allocations and growth besides the replay (peak and
// leaks); `several`: the timeline too, for the combined peak.
ReportRequest RunSummaryRequest(bool several);

// One process in a line of the summary of several, and what the commands after it suggest.
struct ProcessBrief {
  uint32_t pid = 0;
  std::string rank;                 // " (rank 0 of 2, local rank 0)", or ""
  uint64_t peak_bytes = 0;          // its highest peak on one place
  std::string peak_place;           // that place, "device 0 (NVIDIA H100 80GB HBM3)"
  uint64_t never_freed_bytes = 0;   // on every place (or live when recording stopped)
  uint64_t failed_allocations = 0;  // that ran out of memory (the driver's answer)
  uint64_t framework_ooms = 0;      // out-of-memory errors PyTorch raised
  uint64_t failed_calls = 0;        // allocation calls that failed otherwise (error 800, ...)
  double growth_per_iteration = 0;  // of its fastest growing call site; 0: none grows
};
ProcessBrief BriefOf(const ProcessReport& report);

// One process: the peaks of its kSummaryPlaces highest places with their kSummarySites largest
// call sites (as `gpumem report` prints them), never freed, growth, out of memory (PyTorch's
// errors, else the driver's failed allocations), other failed calls.
std::string ProcessSummaryText(ProcessReport& report);

// Several processes: one line each, the highest peak first, at most kSummaryProcesses and then
// how many more; then the combined peak per device (`timelines`: every process's, in any order).
std::string ProcessesSummaryText(std::vector<ProcessBrief> briefs,
                                 const std::vector<ProcessTimeline>& timelines);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ANALYSIS_RUN_SUMMARY_H_
