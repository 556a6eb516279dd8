// Changes to when tensors are freed, as a user would make them in the script, found in a trace:
// - a growing call site's tensors released each iteration (the list that kept them gone, the
//   variable that held each one rebound by the next iteration);
// - tensors held at the peak that no later launch received, freed just after their last use (a
//   `del`, or no autograd graph kept: `torch.no_grad()`).
// Memory a library holds (report/stacks/memory_holders.h) is left as it is. Each change is a list
// of new free positions for some tensors; applied to a copy of the tensors
// and replayed, it gives the peak the change would leave.
#ifndef GPUMEM_REPORT_ADVISE_LIFETIME_REMEDIES_H_
#define GPUMEM_REPORT_ADVISE_LIFETIME_REMEDIES_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "report/advise/advise_trace.h"
#include "report/allocator/replayed_tensors.h"

namespace gpumem::report {

struct LifetimeChange {
  int32_t device = 0;
  // A stack of the call site (CallSites::Of) whose tensors it frees earlier: growth's, or the
  // stack of the site that holds the most of them.
  uint64_t site = 0;
  uint64_t holder_stack_id = 0;  // a growing site: where Python kept them (0: not known)
  uint64_t bytes = 0;            // growth per iteration; bytes held idle at the peak
  std::vector<std::pair<size_t, uint64_t>> frees;  // (tensor index, new freed_at)
};

// `tensors` with `change` applied.
std::vector<ReplayedTensor> Applied(const std::vector<ReplayedTensor>& tensors,
                                    const LifetimeChange& change);

// One change per growing site of the trace's growth analysis, in its order: each tensor of the site
// in iteration k that lives past the allocation of its counterpart in iteration k + 1 (the same
// allocation point, the same occurrence within the iteration) is freed just after it. Tensors of
// the last iteration, or with no counterpart, keep their lifetimes. None without iterations.
std::vector<LifetimeChange> ReleaseGrowingSites(AdviseTrace& trace);

// Tensors live on `device` at `peak_at` that no launch received from then on, by call site, the
// most bytes first (at most `top`): each site's freed just after its last use (just after its
// allocation when no launch ever received it). None when the trace has no launches.
std::vector<LifetimeChange> FreeIdleAtPeak(AdviseTrace& trace, int32_t device, uint64_t peak_at,
                                           size_t top);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ADVISE_LIFETIME_REMEDIES_H_
