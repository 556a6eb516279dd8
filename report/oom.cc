#include "report/oom.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "report/replay.h"
#include "report/sizes.h"

namespace gpumem::report {

OomAnalysis::OomAnalysis(CallSiteOf call_site_of) : call_site_of_(std::move(call_site_of)) {}

void OomAnalysis::Add(const MemoryEvent& event) {
  first_seq_ = any_event_ ? std::min(first_seq_, event.seq()) : event.seq();
  last_seq_ = any_event_ ? std::max(last_seq_, event.seq()) : event.seq();
  any_event_ = true;
  replay_.Add(event);
  if (event.action() == ALLOC) {
    open_.erase(PlaceOf(event));
    return;
  }
  if (event.action() != ALLOC_FAILED) return;
  const int32_t place = PlaceOf(event);
  auto open = open_.find(place);
  const bool retry =
      open != open_.end() && open->second.size == event.size() && open->second.api == event.api();
  if (!retry) {
    Open request{event.size(), event.api(), requests_.size() < kMaxOomFailures, requests_.size()};
    if (request.kept) {
      requests_.emplace_back().failure.place = place;
    } else {
      ++not_analysed_;
    }
    open = open_.insert_or_assign(place, request).first;
  }
  if (!open->second.kept) return;
  Request& request = requests_[open->second.index];
  OomFailure& failure = request.failure;
  failure.request = event;
  if (failure.attempts.size() < kMaxOomAttempts) {
    failure.attempts.push_back({event.seq(), event.timestamp_ns(), event.free_bytes(),
                                event.total_bytes(), event.stack_id()});
  }
  ++failure.attempt_count;
  // As of the last attempt: what was freed since an earlier one is gone.
  request.live.clear();
  replay_.ForEachLive([&](const LiveAllocation& live) {
    if (live.place == place) request.live.push_back({live.stack_id, live.seq, live.size});
  });
}

OomReport OomAnalysis::Finish() const {
  OomReport report;
  report.failures_not_analysed = not_analysed_;
  if (!any_event_) return report;
  report.first_seq = first_seq_;
  report.last_seq = last_seq_;
  // The first 10% of the seq range, rounded up: seq 1..100 -> 1..10, 1..15 -> 1..2. (The range's
  // size less one: all 2^64 seqs do not fit in 64 bits.)
  const uint64_t span_less_one = last_seq_ - first_seq_;
  report.early_before_seq = first_seq_ + span_less_one / 10 + 1;
  for (const Request& request : requests_) {
    OomFailure& failure = report.failures.emplace_back(request.failure);
    absl::flat_hash_map<uint64_t, OomSite> by_site;
    for (const LiveThen& live : request.live) {
      const uint64_t site = call_site_of_ ? call_site_of_(live.stack_id) : live.stack_id;
      OomSite& entry = by_site[site];
      entry.stack_id = site;
      entry.live.Add(live.size);
      failure.live.Add(live.size);
      if (live.seq < report.early_before_seq) {
        entry.early.Add(live.size);
        failure.early.Add(live.size);
      }
    }
    for (auto& [site, entry] : by_site) failure.sites.push_back(entry);
    std::sort(failure.sites.begin(), failure.sites.end(), [](const OomSite& a, const OomSite& b) {
      if (a.live.bytes != b.live.bytes) return a.live.bytes > b.live.bytes;
      return a.stack_id < b.stack_id;
    });
  }
  return report;
}

OomReport AnalyzeOoms(const std::vector<MemoryEvent>& events, const CallSiteOf& call_site_of) {
  OomAnalysis analysis(call_site_of);
  for (const MemoryEvent& event : events) analysis.Add(event);
  return analysis.Finish();
}

size_t SitesThatWouldHaveMadeRoom(const OomFailure& failure, bool* enough) {
  *enough = false;
  const uint64_t free_bytes = failure.request.free_bytes();
  const uint64_t size = failure.request.size();
  if (failure.request.total_bytes() == 0 || size <= free_bytes) return 0;
  const uint64_t shortfall = size - free_bytes;
  uint64_t freed = 0;
  for (size_t i = 0; i < failure.sites.size(); ++i) {
    freed = SaturatingAdd(freed, failure.sites[i].live.bytes);
    if (freed >= shortfall) {
      *enough = true;
      return i + 1;
    }
  }
  return 0;
}

}  // namespace gpumem::report
