// One trace's report as `gpumem report` prints it: its error lines and text in order, its JSON
// object, and its timeline for the combined view; and the same as bytes and descriptors, as a
// worker process hands it to the parent (report/cli/worker_processes.h).
#ifndef GPUMEM_REPORT_CLI_TRACE_OUTCOME_H_
#define GPUMEM_REPORT_CLI_TRACE_OUTCOME_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "report/analysis/combined.h"
#include "report/cli/worker_processes.h"

namespace gpumem::report {

// One trace's report as the sequential loop printed it: its error lines and its text, in order,
// kept until it is its turn to print (traces are analysed in parallel, printed in order).
struct TraceOutcome {
  struct Piece {
    bool error = false;  // an error line (PrintError), else text for standard output
    std::string text;
  };
  std::vector<Piece> pieces;
  std::optional<std::string> json;  // the trace's object, with --json (none when it failed)
  std::optional<ProcessTimeline> timeline;
  bool ok = true;

  void Error(std::string line) {
    pieces.push_back({true, std::move(line)});
    ok = false;
  }
};

// `outcome` as bytes, with a descriptor of its own (dup) of each timeline spool's file.
WorkerResult EncodeOutcome(const TraceOutcome& outcome);
// The outcome `EncodeOutcome` made, taking the result's descriptors over (closed on failure).
absl::StatusOr<TraceOutcome> DecodeOutcome(WorkerResult result);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_CLI_TRACE_OUTCOME_H_
