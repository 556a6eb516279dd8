#include "report/advise/lifetime_remedies.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/container/flat_hash_map.h"

namespace gpumem::report {
namespace {

// (allocation point, iteration, occurrence within it) of every tensor: the key a tensor shares with
// its counterpart in another iteration (iteration + 1) or another run.
using Occurrence = std::tuple<uint64_t, uint32_t, uint32_t>;

// Memory a library holds (a cuBLAS workspace, NCCL's buffers) is not the script's to free.
bool UsersOwn(AdviseTrace& trace, const ReplayedTensor& tensor) {
  return trace.sites().HolderOf(tensor.stack_id) == nullptr;
}

std::vector<Occurrence> OccurrencesOf(AdviseTrace& trace) {
  std::vector<Occurrence> occurrences(trace.tensors.size());
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> seen;
  for (size_t i = 0; i < trace.tensors.size(); ++i) {
    const uint64_t point = trace.sites().StackSiteOf(trace.tensors[i].stack_id);
    const uint32_t iteration = trace.iterations[i];
    occurrences[i] = {point, iteration, seen[{point, iteration}]++};
  }
  return occurrences;
}

LifetimeChange ReleaseEachIteration(AdviseTrace& trace, const GrowingSite& site,
                                    const std::vector<Occurrence>& occurrences,
                                    const std::map<Occurrence, size_t>& by_occurrence) {
  LifetimeChange change;
  change.device = site.place;
  change.site = site.stack_id;
  change.bytes = static_cast<uint64_t>(std::max(0.0, site.bytes_per_iteration));
  if (!site.holders.empty()) change.holder_stack_id = site.holders.front().stack_id;
  for (size_t i = 0; i < trace.tensors.size(); ++i) {
    const ReplayedTensor& tensor = trace.tensors[i];
    if (tensor.device != site.place || trace.sites().Of(tensor.stack_id) != site.stack_id ||
        !UsersOwn(trace, tensor)) {
      continue;
    }
    const auto& [point, iteration, occurrence] = occurrences[i];
    if (iteration == 0) continue;  // before the loop
    const auto next = by_occurrence.find({point, iteration + 1, occurrence});
    if (next == by_occurrence.end()) continue;
    const uint64_t replaced_at = trace.tensors[next->second].allocated_at + 1;
    if (tensor.freed_at > replaced_at) change.frees.emplace_back(i, replaced_at);
  }
  return change;
}

}  // namespace

std::vector<ReplayedTensor> Applied(const std::vector<ReplayedTensor>& tensors,
                                    const LifetimeChange& change) {
  std::vector<ReplayedTensor> changed = tensors;
  for (const auto& [index, freed_at] : change.frees) changed[index].freed_at = freed_at;
  return changed;
}

std::vector<LifetimeChange> ReleaseGrowingSites(AdviseTrace& trace) {
  std::vector<LifetimeChange> changes;
  const std::optional<GrowthReport>& growth = trace.report.findings.growth;
  if (!growth || growth->sites.empty()) return changes;
  const std::vector<Occurrence> occurrences = OccurrencesOf(trace);
  std::map<Occurrence, size_t> by_occurrence;
  for (size_t i = 0; i < occurrences.size(); ++i) by_occurrence.emplace(occurrences[i], i);
  for (const GrowingSite& site : growth->sites) {
    LifetimeChange change = ReleaseEachIteration(trace, site, occurrences, by_occurrence);
    if (!change.frees.empty()) changes.push_back(std::move(change));
  }
  return changes;
}

std::vector<LifetimeChange> FreeIdleAtPeak(AdviseTrace& trace, int32_t device, uint64_t peak_at,
                                           size_t top) {
  std::vector<LifetimeChange> changes;
  if (trace.launches == 0) return changes;
  absl::flat_hash_map<uint64_t, size_t> by_site;  // index in changes
  // Per change, its bytes by stack: the site is shown by its largest stack, as reports show one.
  std::vector<absl::flat_hash_map<uint64_t, uint64_t>> stack_bytes;
  for (size_t i = 0; i < trace.tensors.size(); ++i) {
    const ReplayedTensor& tensor = trace.tensors[i];
    const bool live = tensor.allocated_at <= peak_at && peak_at < tensor.freed_at;
    if (tensor.device != device || !live || tensor.last_use_at > peak_at ||
        !UsersOwn(trace, tensor)) {
      continue;
    }
    auto [it, added] = by_site.try_emplace(trace.sites().Of(tensor.stack_id), changes.size());
    if (added) {
      changes.emplace_back().device = device;
      stack_bytes.emplace_back();
    }
    LifetimeChange& change = changes[it->second];
    change.bytes += tensor.size;
    change.frees.emplace_back(i, std::max(tensor.last_use_at, tensor.allocated_at + 1));
    stack_bytes[it->second][tensor.stack_id] += tensor.size;
  }
  for (size_t i = 0; i < changes.size(); ++i) {
    uint64_t largest = 0;
    for (const auto& [stack_id, bytes] : stack_bytes[i]) {
      if (bytes > largest || (bytes == largest && stack_id < changes[i].site)) {
        largest = bytes;
        changes[i].site = stack_id;
      }
    }
  }
  std::stable_sort(
      changes.begin(), changes.end(),
      [](const LifetimeChange& a, const LifetimeChange& b) { return a.bytes > b.bytes; });
  if (top != 0 && changes.size() > top) changes.resize(top);
  return changes;
}

}  // namespace gpumem::report
