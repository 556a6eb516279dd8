// Tallies by stack id, as the replay keeps them for every allocation and free (what each stack
// allocated; what was live at the peak and freed since): the recorder numbers its stacks from 1 up
// (core/stack_table.h), so an id below kDenseStacks indexes an array, with no hashing on the
// replay's hot path; any other id (damage, a trace from another writer) goes to a hash map.
#ifndef GPUMEM_REPORT_REPLAY_TALLIES_BY_STACK_ID_H_
#define GPUMEM_REPORT_REPLAY_TALLIES_BY_STACK_ID_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "report/replay/dense_index.h"
#include "report/replay/event_counts.h"

namespace gpumem::report {

class TalliesByStackId {
 public:
  // Ids below this index the array (grown as ids come): 16 bytes each, 16 MiB at most.
  static constexpr uint64_t kDenseStacks = uint64_t{1} << 20;

  Tally& operator[](uint64_t stack_id) {
    if (stack_id >= kDenseStacks) return sparse_[stack_id];
    Tally& tally = GrownToHold(dense_, stack_id, kDenseStacks);
    if (tally.count == 0 && tally.bytes == 0) touched_.push_back(stack_id);
    return tally;
  }

  // Empties every tally, in time proportional to the ids used since the last clear.
  void clear() {
    for (uint64_t stack_id : touched_) dense_[stack_id] = Tally{};
    touched_.clear();
    sparse_.clear();
  }

  // The tallies that hold anything, by stack id.
  absl::flat_hash_map<uint64_t, Tally> ToMap() const {
    absl::flat_hash_map<uint64_t, Tally> all = sparse_;
    for (uint64_t stack_id : touched_) {
      const Tally& tally = dense_[stack_id];
      if (tally.count != 0 || tally.bytes != 0) all[stack_id] = tally;
    }
    return all;
  }

 private:
  std::vector<Tally> dense_;
  std::vector<uint64_t> touched_;  // ids of dense_ whose tally was empty when taken
  absl::flat_hash_map<uint64_t, Tally> sparse_;
};

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_REPLAY_TALLIES_BY_STACK_ID_H_
