// The tables the replay's analyses keep by a small dense id (a stack id, a LiveAllocation::index):
// a vector indexed by the id, grown when an id beyond it comes.
#ifndef GPUMEM_REPORT_REPLAY_DENSE_INDEX_H_
#define GPUMEM_REPORT_REPLAY_DENSE_INDEX_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace gpumem::report {

// Grows `values` to hold `index`: at least doubled, to at most `limit` entries. Apart, so that
// the lookup below stays small enough to inline on the replay's hot paths.
template <typename T>
[[gnu::noinline]] void GrowToHold(std::vector<T>& values, uint64_t index, uint64_t limit) {
  values.resize(std::min<uint64_t>(limit, std::max<uint64_t>(index + 1, 2 * values.size())));
}

// `values[index]`, `values` first grown to hold it (GrowToHold; `index` must be below `limit`),
// new entries value-initialised.
template <typename T>
T& GrownToHold(std::vector<T>& values, uint64_t index,
               uint64_t limit = std::numeric_limits<size_t>::max()) {
  if (index >= values.size()) [[unlikely]] {
    GrowToHold(values, index, limit);
  }
  return values[index];
}

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_REPLAY_DENSE_INDEX_H_
