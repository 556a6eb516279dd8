// `gpumem report --fragmentation`: per device, memory reserved (what the allocator holds from the
// driver) against memory in use (what the program's tensors or allocations hold) over time, and
// what the trace supports of each. The recording mode is decided as for the summary table
// (report/summary_table.h): kTensors knows in use but not the pool's reserved size; kSegments knows
// reserved but not in use; kPlain: every allocation is its own segment, in use = reserved.
// Block-level fragmentation (1 - largest free block / free memory inside segments) needs the
// blocks inside segments, which no mode records: n/a until the allocator model (issue 6).
// Definitions: report/README.md ("Fragmentation").
#ifndef GPUMEM_REPORT_FRAGMENTATION_H_
#define GPUMEM_REPORT_FRAGMENTATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "report/summary_table.h"
#include "report/trace_file.h"

namespace gpumem::report {

// Reserved and in-use bytes on one device right after one event. A value the mode does not know
// is 0 (see Fragmentation::has_reserved / has_in_use).
struct FragmentationPoint {
  uint64_t timestamp_ns = 0;
  uint64_t reserved = 0;
  uint64_t in_use = 0;
  // reserved - in_use, when both are known.
  uint64_t unused() const { return reserved > in_use ? reserved - in_use : 0; }
};

struct DeviceFragmentation {
  int32_t device = 0;  // ordinal; -1 where the trace does not say
  std::string name;    // from the trace's Device packet; empty when absent
  // At the (first) peak of reserved, or of in use when reserved is not known.
  FragmentationPoint peak;
  FragmentationPoint end;  // after the last event
  // `samples` points evenly spaced in time from the trace's first to its last memory event: the
  // values after the last event at or before each time.
  std::vector<FragmentationPoint> timeline;
};

struct Fragmentation {
  SummaryMode mode = SummaryMode::kPlain;
  bool has_reserved = true;
  bool has_in_use = true;
  bool complete = true;                      // the trace has its footer: `end` is at exit
  uint64_t start_time_mono_ns = 0;           // the trace's start, for times in the output
  std::vector<DeviceFragmentation> devices;  // ascending, -1 last
};

inline constexpr size_t kFragmentationSamples = 10;

// `events`: one process's memory events in seq order; `holder_of` as for ComputeSummary.
Fragmentation ComputeFragmentation(const std::vector<MemoryEvent>& events,
                                   const HolderOfStack& holder_of,
                                   size_t samples = kFragmentationSamples);
// For a trace read whole: holders from the modules of its stacks, device names, completeness.
Fragmentation FragmentationOfTrace(const TraceFile& trace, const std::vector<MemoryEvent>& events);

// Why reserved, in use, and block-level fragmentation are n/a ("" when known).
std::string ReservedNotKnownReason(const Fragmentation& fragmentation);
std::string InUseNotKnownReason(const Fragmentation& fragmentation);
extern const char kBlockFragmentationNotKnown[];

std::string FragmentationText(const Fragmentation& fragmentation);
// The JSON object (schema: report/README.md).
std::string FragmentationJson(const Fragmentation& fragmentation);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_FRAGMENTATION_H_
