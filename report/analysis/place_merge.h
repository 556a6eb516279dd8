// The combined view's merge of one place's timelines (report/analysis/combined.h): the highest sum
// of several processes' live bytes at once, found in one pass over their points in time order, cut
// into slices of time merged on several threads.
#ifndef GPUMEM_REPORT_ANALYSIS_PLACE_MERGE_H_
#define GPUMEM_REPORT_ANALYSIS_PLACE_MERGE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "report/analysis/combined.h"

namespace gpumem::report {

// Merges the timelines of `place` of the processes `members` (indexes into `processes`; one
// without that place holds nothing there) on up to `threads` threads, each merging at least
// `min_points_per_thread` points.
CombinedPlace MergePlace(int32_t place, const std::vector<size_t>& members,
                         const std::vector<ProcessTimeline>& processes, size_t threads,
                         uint64_t min_points_per_thread);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ANALYSIS_PLACE_MERGE_H_
