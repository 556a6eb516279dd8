#include "report/oom.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "report/replay.h"

namespace gpumem::report {
namespace {

// The snapshot of `replay`'s live set on `place`, by call site, into `failure`.
void TakeLiveSet(const Replay& replay, int32_t place, uint64_t early_before_seq,
                 const CallSiteOf& call_site_of, OomFailure* failure) {
  absl::flat_hash_map<uint64_t, OomSite> by_site;
  failure->live = {};
  failure->early = {};
  replay.ForEachLive([&](const LiveAllocation& live) {
    if (live.place != place) return;
    const uint64_t site = call_site_of ? call_site_of(live.stack_id) : live.stack_id;
    OomSite& entry = by_site[site];
    entry.stack_id = site;
    entry.live.Add(live.size);
    failure->live.Add(live.size);
    if (live.seq < early_before_seq) {
      entry.early.Add(live.size);
      failure->early.Add(live.size);
    }
  });
  failure->sites.clear();
  for (auto& [site, entry] : by_site) failure->sites.push_back(entry);
  std::sort(failure->sites.begin(), failure->sites.end(), [](const OomSite& a, const OomSite& b) {
    if (a.live.bytes != b.live.bytes) return a.live.bytes > b.live.bytes;
    return a.stack_id < b.stack_id;
  });
}

}  // namespace

OomReport AnalyzeOoms(const std::vector<MemoryEvent>& events, const CallSiteOf& call_site_of) {
  OomReport report;
  if (events.empty()) return report;
  report.first_seq = events.front().seq();
  report.last_seq = events.back().seq();
  for (const MemoryEvent& event : events) {
    report.first_seq = std::min(report.first_seq, event.seq());
    report.last_seq = std::max(report.last_seq, event.seq());
  }
  // The first 10% of the seq range, rounded up: seq 1..100 -> 1..10, 1..15 -> 1..2.
  const uint64_t span = report.last_seq - report.first_seq + 1;
  report.early_before_seq = report.first_seq + (span + 9) / 10;

  Replay replay;
  // Per place: the index in report.failures of the group a retry would join, if any (cleared by a
  // successful allocation there).
  absl::flat_hash_map<int32_t, size_t> open_group;
  for (const MemoryEvent& event : events) {
    replay.Add(event);
    if (event.action() == ALLOC) {
      open_group.erase(PlaceOf(event));
      continue;
    }
    if (event.action() != ALLOC_FAILED) continue;
    const int32_t place = PlaceOf(event);
    OomFailure* failure = nullptr;
    auto open = open_group.find(place);
    if (open != open_group.end()) {
      OomFailure& previous = report.failures[open->second];
      if (previous.request.size() == event.size() && previous.request.api() == event.api()) {
        failure = &previous;
      }
    }
    if (failure == nullptr) {
      open_group[place] = report.failures.size();
      failure = &report.failures.emplace_back();
      failure->place = place;
    }
    failure->request = event;
    failure->attempts.push_back({event.seq(), event.timestamp_ns(), event.free_bytes(),
                                 event.total_bytes(), event.stack_id()});
    TakeLiveSet(replay, place, report.early_before_seq, call_site_of, failure);
  }
  return report;
}

size_t SitesThatWouldHaveMadeRoom(const OomFailure& failure, bool* enough) {
  *enough = false;
  const uint64_t free_bytes = failure.request.free_bytes();
  const uint64_t size = failure.request.size();
  if (failure.request.total_bytes() == 0 || size <= free_bytes) return 0;
  const uint64_t shortfall = size - free_bytes;
  uint64_t freed = 0;
  for (size_t i = 0; i < failure.sites.size(); ++i) {
    freed += failure.sites[i].live.bytes;
    if (freed >= shortfall) {
      *enough = true;
      return i + 1;
    }
  }
  return 0;
}

}  // namespace gpumem::report
