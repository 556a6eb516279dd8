// What keeps memory alive, as gpumem's Python observer saw it (PythonHolder packets: a CUDA
// tensor appended to a list): for each allocation call site, the places that took references to
// its allocations. The growth report names them next to the growing site — the line of
// `history.append(loss)`, not only the line that allocated the tensor.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/trace.pb.h"
#include "report/stacks/call_sites.h"  // CallSiteOf

namespace gpumem::report {

struct HolderTally {
  uint64_t stack_id = 0;  // where the references were taken
  uint64_t count = 0;     // how many
  uint64_t bytes = 0;     // of how much memory
};

class PythonHolders {
 public:
  // Memory events in seq order: which allocation lives at an address when a holder names it.
  void AddMemory(const MemoryEvent& event);
  // Holder packets as they come (file order, a little ahead of the seq-ordered memory events):
  // each is matched once the memory events have reached its seq.
  void AddHolder(const PythonHolder& holder);
  // Matches what is still pending (the trace ended).
  void Finish();

  bool empty() const { return by_allocation_stack_.empty(); }
  // The holders of allocations from the call site `site` (call_site_of groups allocation
  // stacks; null: the stack id itself), most references first.
  std::vector<HolderTally> ForSite(uint64_t site, const CallSiteOf& call_site_of,
                                   const CallSiteOf& holder_site_of) const;

 private:
  void Match(const PythonHolder& holder);

  absl::flat_hash_map<uint64_t, uint64_t> live_stack_;  // allocation address -> its stack id
  std::deque<PythonHolder> pending_;
  // allocation stack id -> holder stack id -> tally
  absl::flat_hash_map<uint64_t, absl::flat_hash_map<uint64_t, HolderTally>> by_allocation_stack_;
};

}  // namespace gpumem::report
