// The combined view's merge of one place's timelines (report/analysis/combined.h): the highest sum
// of several processes' live bytes at once, the first moment it was reached. Time is cut at every
// block start of the spools (TimelineSpool::blocks()) into windows, each bounded by the sum of what
// each process can have held in it (the highest of its blocks there, or what it held entering the
// window); windows are merged exactly, the highest bound first and several threads at once, until
// no window left can hold a higher sum than the best found, nor as high a sum earlier.
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
