// `gpumem report` of one process: its trace replayed once, with every analysis asked for fed in
// the same pass (growth without a marker takes a second), then written as text or as one JSON
// object (schema: report/report.schema.json): the process, how it ended, when each device peaked
// and what it held then, what was never freed, and the findings of the analyses asked for.
// Memory is bounded by live sets, not by trace length.
#ifndef GPUMEM_REPORT_ANALYSIS_PROCESS_REPORT_H_
#define GPUMEM_REPORT_ANALYSIS_PROCESS_REPORT_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "report/analysis/combined.h"
#include "report/analysis/fragmentation.h"
#include "report/analysis/growth.h"
#include "report/analysis/kernels.h"
#include "report/analysis/oom.h"
#include "report/analysis/summary_table.h"
#include "report/replay/replay.h"
#include "report/stacks/call_sites.h"
#include "report/stacks/memory_holders.h"
#include "report/stacks/symbolizer.h"

namespace gpumem::report {

// What `gpumem report` was asked for.
struct ReportRequest {
  bool summary = false;
  SummaryModelChoice allocator = SummaryModelChoice::kFromSettings;
  bool peak = false;
  bool leaks = false;
  bool oom = false;
  bool growth = false;
  bool fragmentation = false;
  bool kernels = false;
  size_t top = 10;               // call sites shown per device or failure (0: all)
  std::string iteration_marker;  // empty: detect iterations
  GroupBy group_by = GroupBy::kUser;
  bool python_only = false;
  StackStyle stacks = StackStyle::kShort;  // how call sites print in text
  bool timeline = false;  // build the process's timeline, for the combined view of several
  bool progress = true;   // "reading TRACE: 43%" on stderr when it is a terminal
};

// The --summary, --oom, --growth and --fragmentation analyses of one trace, when asked for.
struct Findings {
  std::optional<KernelReport> kernels;  // with --peak or --kernels
  std::optional<Summary> summary;
  std::optional<OomReport> oom;
  std::optional<GrowthReport> growth;
  std::optional<Fragmentation> fragmentation;
};

// One process's trace, analysed.
struct ProcessReport {
  TraceReplay replay;  // owns the trace file, which the symbolizer reads: declared first
  std::unique_ptr<Symbolizer> symbolizer;
  std::unique_ptr<CallSites> sites;  // symbolized as the report is written
  Findings findings;
  std::optional<ProcessTimeline> timeline;  // with request.timeline
  // Growth's second pass, when it could not open the file again (the other findings stand).
  absl::Status second_pass;
};

// Opens and analyses the trace at `path` (progress on a terminal). Fails as TraceFile::Open does;
// a damaged trace is analysed as far as it could be read (replay.file->end() says what was lost).
absl::StatusOr<ProcessReport> AnalyzeProcess(const std::string& path, const ReportRequest& request);

// What allocators and libraries hold of `sites` (report/stacks/memory_holders.h), by holder in the
// order first seen; what none holds is added to `*own`. The leaks report tells them apart.
std::vector<std::pair<const MemoryHolder*, Tally>> HeldByHolder(const std::vector<Site>& sites,
                                                                Tally* own);

// The report as text, and as JSON (`path` as given). Both symbolize through `report.sites`.
std::string ProcessReportText(ProcessReport& report, const ReportRequest& request);
std::string ProcessReportJson(const std::string& path, ProcessReport& report,
                              const ReportRequest& request);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ANALYSIS_PROCESS_REPORT_H_
