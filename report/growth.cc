#include "report/growth.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "report/replay.h"

namespace gpumem::report {
namespace {

uint64_t SiteOf(const GrowthOptions& options, uint64_t stack_id) {
  return options.call_site_of ? options.call_site_of(stack_id) : stack_id;
}

// The marker call site per the rules in growth.h; false when there is none.
bool FindMarker(const std::vector<MemoryEvent>& events, const GrowthOptions& options,
                uint64_t* marker) {
  if (options.is_marker) {
    for (const MemoryEvent& event : events) {
      if (event.action() == ALLOC && options.is_marker(event.stack_id())) {
        *marker = SiteOf(options, event.stack_id());
        return true;
      }
    }
    return false;
  }
  struct Seen {
    uint64_t count = 0;
    size_t first = 0;
  };
  absl::flat_hash_map<uint64_t, Seen> seen;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].action() != ALLOC) continue;
    auto [it, inserted] = seen.try_emplace(SiteOf(options, events[i].stack_id()), Seen{0, i});
    ++it->second.count;
  }
  const Seen* best = nullptr;
  for (const auto& [site, entry] : seen) {
    if (entry.count < kMinMarkerOccurrences) continue;
    if (best == nullptr || entry.count > best->count ||
        (entry.count == best->count && entry.first < best->first)) {
      best = &entry;
      *marker = site;
    }
  }
  return best != nullptr;
}

using Key = std::pair<int32_t, uint64_t>;  // (place, call site)

}  // namespace

GrowthReport AnalyzeGrowth(const std::vector<MemoryEvent>& events, const GrowthOptions& options) {
  GrowthReport report;
  report.rule = options.is_marker ? GrowthReport::Rule::kMarker : GrowthReport::Rule::kMostFrequent;
  report.found = FindMarker(events, options, &report.marker_stack_id);
  if (!report.found) return report;

  // Live bytes and count by (place, site) at the end of each iteration; a site missing from a
  // snapshot held nothing then.
  std::vector<absl::flat_hash_map<Key, Tally>> snapshots;
  Replay replay;
  auto snapshot = [&] {
    auto& by_site = snapshots.emplace_back();
    replay.ForEachLive([&](const LiveAllocation& live) {
      by_site[{live.place, SiteOf(options, live.stack_id)}].Add(live.size);
    });
  };
  for (const MemoryEvent& event : events) {
    if (event.action() == ALLOC && SiteOf(options, event.stack_id()) == report.marker_stack_id) {
      if (!report.iteration_seqs.empty()) snapshot();  // the end of the previous iteration
      report.iteration_seqs.push_back(event.seq());
    }
    replay.Add(event);
  }
  snapshot();  // the last iteration ends with the trace
  const size_t iterations = report.iterations();
  if (iterations < 2) return report;

  std::map<Key, GrowingSite> sites;  // ordered: deterministic output
  for (size_t i = 0; i < iterations; ++i) {
    for (const auto& [key, tally] : snapshots[i]) {
      GrowingSite& site = sites[key];
      if (site.live_bytes.empty()) {
        site.place = key.first;
        site.stack_id = key.second;
        site.live_bytes.assign(iterations, 0);
        site.live_count.assign(iterations, 0);
      }
      site.live_bytes[i] = tally.bytes;
      site.live_count[i] = tally.count;
    }
  }
  const size_t boundaries = iterations - 1;
  for (auto& [key, site] : sites) {
    for (size_t i = 1; i < iterations; ++i)
      site.rises += site.live_bytes[i] > site.live_bytes[i - 1];
    const uint64_t first = site.live_bytes.front();
    const uint64_t last = site.live_bytes.back();
    if (last <= first || static_cast<double>(site.rises) < kGrowingShare * boundaries) continue;
    site.bytes_per_iteration = static_cast<double>(last - first) / static_cast<double>(boundaries);
    report.sites.push_back(std::move(site));
  }
  std::stable_sort(report.sites.begin(), report.sites.end(),
                   [](const GrowingSite& a, const GrowingSite& b) {
                     return a.bytes_per_iteration > b.bytes_per_iteration;
                   });
  return report;
}

}  // namespace gpumem::report
