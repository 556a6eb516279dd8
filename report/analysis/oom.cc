#include "report/analysis/oom.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/format/json.h"
#include "report/format/names.h"
#include "report/format/sizes.h"
#include "report/replay/replay.h"
#include "report/stacks/call_sites.h"
#include "report/trace/trace_file.h"

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

// ---- text and JSON ----

// Memory on the device that the trace does not show live: total - free - live (0 when free/total
// were not recorded, or when they do not add up).
uint64_t UntrackedBytes(const OomFailure& failure) {
  const uint64_t total = failure.request.total_bytes();
  const uint64_t used_by_driver = total - std::min(total, failure.request.free_bytes());
  return total == 0 ? 0 : used_by_driver - std::min(used_by_driver, failure.live.bytes);
}

// "What would have helped", computed from the data: one sentence each.
std::vector<std::string> HelpedLines(const OomFailure& failure, const OomReport& report,
                                     CallSites& sites) {
  std::vector<std::string> lines;
  std::vector<std::string> early;
  size_t early_sites = 0;
  for (const OomSite& site : failure.sites) {
    if (site.early.bytes == 0) continue;
    ++early_sites;
    if (early.size() < 3) {
      early.push_back(absl::StrCat(sites.Label(site.stack_id), " ", FormatBytes(site.early.bytes)));
    }
  }
  if (early_sites > 0) {
    lines.push_back(absl::StrCat(
        early_sites == 1 ? "this call site" : absl::StrCat("these ", early_sites, " call sites"),
        " held ", FormatBytes(failure.early.bytes), " (",
        Plural(failure.early.count, "allocation", "allocations"), ") made before seq ",
        report.early_before_seq, " (the first 10% of the trace) and still held it then: ",
        absl::StrJoin(early, "; "), early_sites > early.size() ? "; ..." : ""));
  } else {
    lines.push_back(absl::StrCat("nothing live then was allocated before seq ",
                                 report.early_before_seq, " (the first 10% of the trace)"));
  }
  const MemoryEvent& request = failure.request;
  if (request.total_bytes() == 0) return lines;  // free/total not recorded
  if (request.size() <= request.free_bytes()) {
    lines.push_back(
        absl::StrCat("the request was no more than the free memory reported (",
                     FormatBytes(request.free_bytes()),
                     "): it failed for another reason (the error code, fragmentation, a limit)"));
    return lines;
  }
  const uint64_t shortfall = request.size() - request.free_bytes();
  bool enough = false;
  const size_t needed = SitesThatWouldHaveMadeRoom(failure, &enough);
  if (enough) {
    uint64_t bytes = 0;
    for (size_t i = 0; i < needed; ++i) bytes = SaturatingAdd(bytes, failure.sites[i].live.bytes);
    lines.push_back(absl::StrCat(
        "the request was ", FormatBytes(shortfall), " more than was free: freeing what ",
        needed == 1 ? "the largest call site" : absl::StrCat("the ", needed, " largest call sites"),
        " held (", FormatBytes(bytes), ") would have made room"));
  } else {
    lines.push_back(absl::StrCat("the request was ", FormatBytes(shortfall),
                                 " more than was free, more than everything the trace shows live (",
                                 FormatBytes(failure.live.bytes),
                                 "): the rest is held outside this process's recorded ",
                                 "allocations (CUDA context, other processes)"));
  }
  return lines;
}

void AppendOomText(const OomReport& report, const TraceFile& trace, CallSites& sites, size_t top,
                   std::string* out) {
  if (report.failures.empty()) {
    absl::StrAppend(out, "\noom: no failed allocations\n");
    return;
  }
  for (const OomFailure& failure : report.failures) {
    const MemoryEvent& request = failure.request;
    absl::StrAppendFormat(
        out, "\noom, %s: %s of %s failed (error %d) at seq %d, %.3f ms after start\n",
        PlaceName(failure.place, trace), ApiName(request.api()), SizeText(request.size()),
        request.result(), request.seq(), MillisecondsSinceStart(request.timestamp_ns(), trace));
    if (failure.attempt_count > 1) {
      std::vector<std::string> seqs;
      for (const OomAttempt& attempt : failure.attempts) seqs.push_back(absl::StrCat(attempt.seq));
      if (failure.attempt_count > failure.attempts.size()) {
        seqs.push_back(
            absl::StrCat("and ", failure.attempt_count - failure.attempts.size(), " more"));
      }
      absl::StrAppend(out, "  retried: ", failure.attempt_count,
                      " failed attempts of this request (seq ", absl::StrJoin(seqs, ", "),
                      "), no allocation on this place succeeded in between; as of the last\n");
    }
    absl::StrAppend(out, "  call site:\n");
    sites.AppendStackText(request.stack_id(), out);
    if (request.total_bytes() > 0) {
      absl::StrAppend(out, "  free then: ", SizeText(request.free_bytes()), " of ",
                      SizeText(request.total_bytes()), "\n");
    } else {
      absl::StrAppend(out, "  free then: not recorded\n");
    }
    absl::StrAppend(out, "  live then: ", SizeText(failure.live.bytes), " in ",
                    Plural(failure.live.count, "allocation", "allocations"));
    if (request.total_bytes() > 0) {
      absl::StrAppend(out, "; in use but not in the trace (context, other processes): ",
                      FormatBytes(UntrackedBytes(failure)));
    }
    absl::StrAppend(out, "\n");
    std::vector<Site> live;
    for (const OomSite& site : failure.sites)
      live.push_back(sites.SiteOf(site.stack_id, site.live));
    AppendSitesText(live, top, failure.live.bytes, sites.style(), out);
    for (const std::string& line : HelpedLines(failure, report, sites)) {
      absl::StrAppend(out, "  what would have helped: ", line, "\n");
    }
  }
  if (report.failures_not_analysed > 0) {
    absl::StrAppend(
        out, "\noom: ",
        Plural(report.failures_not_analysed, "more failed request", "more failed requests"),
        " after these, not analysed (only the first ", kMaxOomFailures, " are kept)\n");
  }
}

std::string JsonOom(const OomReport& report, const TraceFile& trace, CallSites& sites, size_t top) {
  std::vector<std::string> failures;
  for (const OomFailure& failure : report.failures) {
    const MemoryEvent& request = failure.request;
    std::vector<std::string> attempts;
    for (const OomAttempt& attempt : failure.attempts) {
      attempts.push_back(absl::StrCat(
          "{\"seq\":", attempt.seq, ",\"time_ns\":", SinceStart(attempt.timestamp_ns, trace),
          ",\"free_bytes\":", attempt.free_bytes, ",\"total_bytes\":", attempt.total_bytes, "}"));
    }
    const size_t shown = top == 0 ? failure.sites.size() : std::min(top, failure.sites.size());
    std::vector<std::string> live;
    for (size_t i = 0; i < shown; ++i) {
      const OomSite& site = failure.sites[i];
      live.push_back(absl::StrFormat(
          "{\"bytes\":%d,\"count\":%d,\"share\":%.6f,\"early_bytes\":%d,\"early_count\":%d,"
          "\"frames\":%s}",
          site.live.bytes, site.live.count,
          failure.live.bytes == 0
              ? 0.0
              : static_cast<double>(site.live.bytes) / static_cast<double>(failure.live.bytes),
          site.early.bytes, site.early.count, JsonFrames(sites.Shown(site.stack_id))));
    }
    bool enough = false;
    const size_t room = SitesThatWouldHaveMadeRoom(failure, &enough);
    std::vector<std::string> helped;
    for (const std::string& line : HelpedLines(failure, report, sites)) {
      helped.push_back(JsonString(line));
    }
    failures.push_back(absl::StrCat(
        "{", JsonPlace(failure.place, trace), ",\"api\":", JsonString(ApiName(request.api())),
        ",\"result\":", request.result(), ",\"size\":", request.size(), ",\"seq\":", request.seq(),
        ",\"time_ns\":", SinceStart(request.timestamp_ns(), trace),
        ",\"free_bytes\":", request.free_bytes(), ",\"total_bytes\":", request.total_bytes(),
        ",\"attempts\":[", absl::StrJoin(attempts, ","), "]", ",\"frames\":",
        JsonFrames(sites.Shown(request.stack_id())), ",\"live_bytes\":", failure.live.bytes,
        ",\"live_count\":", failure.live.count, ",\"early_bytes\":", failure.early.bytes,
        ",\"early_count\":", failure.early.count, ",\"untracked_bytes\":", UntrackedBytes(failure),
        ",\"call_sites\":", failure.sites.size(), ",\"sites\":[", absl::StrJoin(live, ","), "]",
        ",\"room_sites\":", enough ? room : 0, ",\"helped\":[", absl::StrJoin(helped, ","), "]",
        // Only when `attempts` is cut short: otherwise it is attempts' length.
        failure.attempt_count > failure.attempts.size()
            ? absl::StrCat(",\"attempt_count\":", failure.attempt_count)
            : "",
        "}"));
  }
  std::string out = absl::StrCat("{\"early_before_seq\":", report.early_before_seq,
                                 ",\"failures\":[", absl::StrJoin(failures, ","), "]");
  if (report.failures_not_analysed > 0) {
    absl::StrAppend(&out, ",\"failures_not_analysed\":", report.failures_not_analysed);
  }
  return out + "}";
}

}  // namespace gpumem::report
