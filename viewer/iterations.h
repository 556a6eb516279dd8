// Iteration boundaries for the timeline's markers, found in the replay's one pass by growth's rules
// (report/analysis/growth.h): the allocations of the marker call site (--iteration-marker, or detected: the
// site that allocates once per iteration, or most often), failing that the launches of the launch
// site that runs once per iteration. The marker is known only at the end, so the times of every
// allocation stack and launch site are kept, sampled: at most kMaxIterationTimes per key (every
// stride-th occurrence, the stride doubling), which bounds memory by the number of stacks.
#ifndef GPUMEM_VIEWER_ITERATIONS_H_
#define GPUMEM_VIEWER_ITERATIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/trace.pb.h"
#include "report/analysis/growth.h"
#include "report/analysis/oom.h"

namespace gpumem::viewer {

inline constexpr size_t kMaxIterationTimes = 256;

// Every stride-th occurrence's time, at most kMaxIterationTimes of them.
struct SampledTimes {
  std::vector<uint64_t> times;
  uint64_t count = 0;
  uint64_t stride = 1;
  void Add(uint64_t t);
};

struct Iterations {
  uint64_t count = 0;           // iterations found (0: none)
  std::vector<uint64_t> times;  // their starts, sampled (every `stride`-th)
  uint64_t stride = 1;
  std::string rule;  // how they were found, for the page
};

class IterationTimes {
 public:
  // `is_marker` (may be null: detect) says whether an allocation's stack is at the marker.
  explicit IterationTimes(std::function<bool(uint64_t stack_id)> is_marker)
      : is_marker_(std::move(is_marker)) {}
  // In seq order; `t` the event's time (any origin, the same for every call).
  void AddMemory(const MemoryEvent& event, uint64_t t);
  void AddLaunch(const LaunchEvent& launch, uint64_t t);
  // Once the pass is over; `call_site_of` merges stacks into call sites.
  Iterations Finish(const report::CallSiteOf& call_site_of) const;

 private:
  Iterations FromStacks(uint64_t site, const report::CallSiteOf& call_site_of) const;

  std::function<bool(uint64_t)> is_marker_;
  std::optional<uint64_t> first_marker_stack_;
  report::MarkerCounter counter_;
  absl::flat_hash_map<uint64_t, SampledTimes> by_stack_;
  absl::flat_hash_map<report::LaunchSite, SampledTimes> by_launch_site_;
};

}  // namespace gpumem::viewer

#endif  // GPUMEM_VIEWER_ITERATIONS_H_
