// One trace as `gpumem advise` reads it: analysed as `gpumem report --growth --kernels` would
// (call sites by the user's line, growing sites with the line that keeps them, launches), plus the
// tensors PyTorch's allocator was asked for, kept with their lifetimes and last uses
// (report/allocator/replayed_tensors.h) so that changes can be modelled on them, and what the run
// used: its allocator settings, its device, its command line.
#ifndef GPUMEM_REPORT_ADVISE_ADVISE_TRACE_H_
#define GPUMEM_REPORT_ADVISE_ADVISE_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "report/allocator/allocator_model.h"
#include "report/allocator/replayed_tensors.h"
#include "report/analysis/process_report.h"

namespace gpumem::report {

// The allocator the run used, as its settings say (a `--tensors` recording: what the user had
// before gpumem switched PyTorch to the async backend).
struct RunAllocator {
  AllocatorKind kind = AllocatorKind::kNative;
  NativeAllocatorConfig config;  // max_split_size from the settings; device_memory unset
  std::string settings;          // the user's PYTORCH_CUDA_ALLOC_CONF, "" when none
};

struct AdviseTrace {
  std::string path;
  ProcessReport report;  // owns the trace file, its symbolizer and call sites
  SummaryMode mode = SummaryMode::kTensors;
  RunAllocator allocator;
  std::vector<ReplayedTensor> tensors;
  // Per tensor: the iteration it was allocated in (0 before the first), by the growth analysis's
  // marker; all 0 when it found none.
  std::vector<uint32_t> iterations;
  uint64_t launches = 0;
  uint64_t unscanned_launches = 0;     // graph launches, or launches whose parameters were not read
  uint64_t smallest_device_total = 0;  // of the devices recorded (0: none)
  std::vector<std::string> command_line;

  const TraceFile& file() const { return *report.replay.file; }
  CallSites& sites() { return *report.sites; }
};

// Reads and analyses the trace at `path`. Fails, with the error line, on a file that is not a
// readable trace, a damaged one, or one recorded under PyTorch's caching allocator (segments, not
// tensors: nothing the models can replay).
absl::StatusOr<AdviseTrace> LoadAdviseTrace(const std::string& path, StackStyle stacks);

// The allocator of a trace's settings (header options looked up by `option`).
RunAllocator RunAllocatorOf(
    SummaryMode mode, const std::function<std::optional<std::string>(const std::string&)>& option);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ADVISE_ADVISE_TRACE_H_
