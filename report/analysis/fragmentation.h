// `gpumem report --fragmentation`: per device, memory reserved (what the allocator holds from the
// driver) against memory in use (what the program's tensors or allocations hold) over time, and
// what the trace supports of each. The recording mode is decided as for the summary table
// (report/stacks/recording_mode.h): kTensors knows in use, and reserved where the trace has the
// pool's own size (PoolUsage packets, AddPoolUsage); kSegments knows reserved but not in use;
// kPlain: every allocation is its own segment, in use = reserved. Block-level fragmentation (1 -
// largest free block / free memory inside segments) needs the blocks inside segments, which no mode
// records: n/a here (`gpumem whatif` models them). Definitions: report/README.md ("Fragmentation").
#ifndef GPUMEM_REPORT_ANALYSIS_FRAGMENTATION_H_
#define GPUMEM_REPORT_ANALYSIS_FRAGMENTATION_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "report/analysis/summary_table.h"
#include "report/replay/memory_timeline.h"
#include "report/trace/pool_sizes.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

struct DeviceFragmentation {
  int32_t device = 0;  // ordinal; -1 where the trace does not say
  std::string name;    // from the trace's Device packet, escaped; empty when absent
  // At the (first) peak of reserved, or of in use when reserved is not known: exact.
  FragmentationPoint peak;
  FragmentationPoint end;  // after the last event: exact
  // `samples` points evenly spaced in time from the trace's first to its last memory event: the
  // values after the last point at or before each time, of the points a BucketedTimeline kept.
  std::vector<FragmentationPoint> timeline;
};

struct Fragmentation {
  SummaryMode mode = SummaryMode::kPlain;
  bool has_reserved = true;
  bool has_in_use = true;
  bool complete = true;                      // the trace holds the whole run: `end` is at exit
  RecordingEnd ended;                        // when not complete: how the trace ended
  uint64_t start_time_mono_ns = 0;           // the trace's start, for times in the output
  std::vector<DeviceFragmentation> devices;  // ascending, -1 last
};

// Fragmentation of one process's memory events, fed one at a time in seq order. The recording
// mode is known only at the end, so the replay of each mode still possible runs in the same pass
// (ModeCandidates, report/analysis/summary_table.h); memory is bounded by the live set and a
// BucketedTimeline per device and mode.
class FragmentationAnalysis {
 public:
  // Holders as for ComputeSummary (may be empty); devices unnamed, the trace taken as complete.
  explicit FragmentationAnalysis(HolderOfStack holder_of, size_t samples = kFragmentationSamples);
  // For a trace being streamed: holders from the modules of its stacks; Finish() takes device
  // names, completeness and the start time from it. `trace` must outlive the analysis.
  explicit FragmentationAnalysis(const TraceFile& trace);
  ~FragmentationAnalysis();

  void Add(const MemoryEvent& event);
  // A memory pool's reserved size (PoolUsage packet, from the pool's attributes). Packets come in
  // file order, a little ahead of the events replayed in seq order: each takes effect at the first
  // memory event stamped at or after it. With them, tensor-level recording knows reserved too.
  void AddPoolUsage(const PoolUsage& usage);
  Fragmentation Finish();

 private:
  struct Candidate;
  struct PendingPoolSize {
    uint64_t timestamp_ns = 0;
    uint64_t pool = 0;
    int32_t device = 0;
    uint64_t reserved = 0;
  };
  // Applies the pending pool sizes stamped at or before `timestamp_ns`.
  void ApplyPoolSizes(uint64_t timestamp_ns);
  FragmentationAnalysis(HolderOfStack holder_of, size_t samples, const TraceFile* trace);

  const TraceFile* trace_ = nullptr;
  size_t samples_;
  std::unique_ptr<CachedHolderOf> holders_;
  ModeCandidates<std::unique_ptr<Candidate>> candidates_;
  bool any_event_ = false;
  uint64_t first_timestamp_ns_ = 0;  // of all memory events
  uint64_t last_timestamp_ns_ = 0;
  std::deque<PendingPoolSize> pending_pool_sizes_;  // a handful: the reorder lag
  PoolSizes pool_sizes_;                            // the pool sizes applied so far
};

// FragmentationAnalysis over `events` (one process's memory events in seq order).
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

#endif  // GPUMEM_REPORT_ANALYSIS_FRAGMENTATION_H_
