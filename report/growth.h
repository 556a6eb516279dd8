// Growth: call sites whose live bytes rise from one iteration to the next (the
// `list.append(tensor)` mistake), with the rate per iteration. See report/README.md,
// "gpumem report --growth".
//
// Iterations start at the allocations of one call site, the marker site:
// - with a marker predicate (`--iteration-marker FUNCTION`: some frame's function contains
//   FUNCTION), the first call site whose stack matches; when several match (the function allocates
//   more than once per iteration), the first to allocate marks the iterations;
// - otherwise the call site that allocates most often, at least kMinMarkerOccurrences times (ties:
//   the one that allocated first).
// Each occurrence starts an iteration, which ends where the next starts; the last ends with the
// trace. What comes before the first is no iteration. For every (place, call site), the live bytes
// at the end of each iteration are recorded; a site is growing when they rose at no fewer than
// kGrowingShare of the boundaries between iterations and were higher at the end of the last
// iteration than at the end of the first. Its rate is (last - first) / (iterations - 1).
#ifndef GPUMEM_REPORT_GROWTH_H_
#define GPUMEM_REPORT_GROWTH_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "core/trace.pb.h"
#include "report/oom.h"

namespace gpumem::report {

inline constexpr uint64_t kMinMarkerOccurrences = 3;
inline constexpr double kGrowingShare = 0.8;

struct GrowthOptions {
  // Whether an allocation with this stack id is at the marker; null: detect the iterations.
  std::function<bool(uint64_t stack_id)> is_marker;
  CallSiteOf call_site_of;  // null: every stack is its own call site
};

struct GrowingSite {
  int32_t place = 0;                 // device ordinal, -1 unknown, or kPinnedHost
  uint64_t stack_id = 0;             // the call site's stack id
  std::vector<uint64_t> live_bytes;  // at the end of each iteration
  std::vector<uint64_t> live_count;
  size_t rises = 0;                // boundaries at which live bytes rose
  double bytes_per_iteration = 0;  // (last - first) / (iterations - 1)
};

struct GrowthReport {
  enum class Rule {
    kMarker,        // is_marker given
    kMostFrequent,  // detected: the most frequent allocation call site
  };
  Rule rule = Rule::kMostFrequent;
  // The call site whose allocations start iterations (0 with found false).
  bool found = false;
  uint64_t marker_stack_id = 0;
  std::vector<uint64_t> iteration_seqs;  // the seq of each iteration's first allocation
  size_t iterations() const { return iteration_seqs.size(); }
  // Growing sites, fastest growing first (ties: place, then stack id). Needs 2 iterations.
  std::vector<GrowingSite> sites;
};

// `events`: one process's memory events in seq order.
GrowthReport AnalyzeGrowth(const std::vector<MemoryEvent>& events, const GrowthOptions& options);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_GROWTH_H_
