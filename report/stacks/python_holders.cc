#include "report/stacks/python_holders.h"

#include <algorithm>

namespace gpumem::report {

void PythonHolders::AddMemory(const MemoryEvent& event) {
  while (!pending_.empty() && pending_.front().seq() < event.seq()) {
    Match(pending_.front());
    pending_.pop_front();
  }
  if (event.action() == ALLOC) {
    live_stack_[event.address()] = event.stack_id();
  } else if (event.action() == FREE) {
    live_stack_.erase(event.address());
  }
}

void PythonHolders::AddHolder(const PythonHolder& holder) {
  // Kept in seq order (they come nearly sorted: file order).
  auto at =
      std::upper_bound(pending_.begin(), pending_.end(), holder.seq(),
                       [](uint64_t seq, const PythonHolder& other) { return seq < other.seq(); });
  pending_.insert(at, holder);
}

void PythonHolders::Finish() {
  for (const PythonHolder& holder : pending_) Match(holder);
  pending_.clear();
}

void PythonHolders::Match(const PythonHolder& holder) {
  auto live = live_stack_.find(holder.address());
  if (live == live_stack_.end()) return;  // not the start of a recorded allocation
  HolderTally& tally = by_allocation_stack_[live->second][holder.stack_id()];
  tally.stack_id = holder.stack_id();
  ++tally.count;
  tally.bytes += holder.size();
}

std::vector<HolderTally> PythonHolders::ForSite(uint64_t site, const CallSiteOf& call_site_of,
                                                const CallSiteOf& holder_site_of) const {
  absl::flat_hash_map<uint64_t, HolderTally> merged;  // by the holder's own call site
  for (const auto& [allocation_stack, holders] : by_allocation_stack_) {
    if ((call_site_of ? call_site_of(allocation_stack) : allocation_stack) != site) continue;
    for (const auto& [holder_stack, tally] : holders) {
      const uint64_t holder_site = holder_site_of ? holder_site_of(holder_stack) : holder_stack;
      HolderTally& into = merged[holder_site];
      into.stack_id = holder_site;
      into.count += tally.count;
      into.bytes += tally.bytes;
    }
  }
  std::vector<HolderTally> result;
  for (const auto& [holder_site, tally] : merged) result.push_back(tally);
  std::sort(result.begin(), result.end(), [](const HolderTally& a, const HolderTally& b) {
    return a.count != b.count ? a.count > b.count : a.stack_id < b.stack_id;
  });
  return result;
}

}  // namespace gpumem::report
