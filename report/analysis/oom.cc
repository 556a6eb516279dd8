#include "report/analysis/oom.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/format/json.h"
#include "report/format/names.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/replay/replay.h"
#include "report/stacks/call_sites.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

OomAnalysis::OomAnalysis(CallSiteOf call_site_of, const TraceFile* trace,
                         const Replay* shared_replay)
    : call_site_of_(std::move(call_site_of)), trace_(trace), shared_replay_(shared_replay) {}

void OomAnalysis::Add(const MemoryEvent& event) {
  TakeFrameworkOoms(event.seq());
  first_seq_ = any_event_ ? std::min(first_seq_, event.seq()) : event.seq();
  last_seq_ = any_event_ ? std::max(last_seq_, event.seq()) : event.seq();
  any_event_ = true;
  // A shared replay adds the event after this: a failed allocation, the one event whose live set
  // is read below, changes no live set.
  if (shared_replay_ == nullptr) own_replay_.Add(event);
  if (event.action() == ALLOC) {
    open_.erase(PlaceOf(event));
    return;
  }
  if (event.action() != ALLOC_FAILED) return;
  if (!IsOutOfMemoryResult(event.result())) {
    if (failed_calls_.size() < kMaxFailedCalls) {
      failed_calls_.push_back({event, PlaceOf(event)});
    } else {
      ++failed_calls_not_listed_;
    }
    return;
  }
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
  request.live = LiveOn(place);
}

std::vector<OomAnalysis::LiveThen> OomAnalysis::LiveOn(int32_t place) const {
  std::vector<LiveThen> live;
  const Replay& replay = shared_replay_ != nullptr ? *shared_replay_ : own_replay_;
  replay.ForEachLive([&](const LiveAllocation& allocation) {
    if (allocation.place == place || (place == -1 && allocation.place != kPinnedHost)) {
      live.push_back({allocation.stack_id, allocation.seq, allocation.size});
    }
  });
  return live;
}

void OomAnalysis::TakeFrameworkOoms(uint64_t seq) {
  if (trace_ == nullptr) return;
  const std::vector<FrameworkOom>& records = trace_->framework_ooms();
  // In file order, which is their seq order but for races between threads.
  for (; framework_taken_ < records.size() && records[framework_taken_].seq() < seq;
       ++framework_taken_) {
    if (framework_.size() >= 2 * kMaxOomFailures) {
      ++framework_not_analysed_;
      continue;
    }
    const FrameworkOom& record = records[framework_taken_];
    framework_.push_back({record, LiveOn(record.device() >= 0 ? record.device() : -1)});
  }
}

void OomAnalysis::Classify(const std::vector<LiveThen>& live, uint64_t early_before_seq,
                           OomFailure* failure) const {
  absl::flat_hash_map<uint64_t, OomSite> by_site;
  for (const LiveThen& allocation : live) {
    const uint64_t site = call_site_of_ ? call_site_of_(allocation.stack_id) : allocation.stack_id;
    OomSite& entry = by_site[site];
    entry.stack_id = site;
    entry.live.Add(allocation.size);
    failure->live.Add(allocation.size);
    if (allocation.seq < early_before_seq) {
      entry.early.Add(allocation.size);
      failure->early.Add(allocation.size);
    }
  }
  for (auto& [site, entry] : by_site) failure->sites.push_back(entry);
  std::sort(failure->sites.begin(), failure->sites.end(), [](const OomSite& a, const OomSite& b) {
    if (a.live.bytes != b.live.bytes) return a.live.bytes > b.live.bytes;
    return a.stack_id < b.stack_id;
  });
}

OomReport OomAnalysis::Finish() {
  TakeFrameworkOoms(~uint64_t{0});
  OomReport report;
  report.failures_not_analysed = not_analysed_;
  report.failed_calls = failed_calls_;
  report.failed_calls_not_listed = failed_calls_not_listed_;
  report.framework_ooms_not_analysed = framework_not_analysed_;
  if (!any_event_ && framework_.empty()) return report;
  report.first_seq = first_seq_;
  report.last_seq = last_seq_;
  // The first 10% of the seq range, rounded up: seq 1..100 -> 1..10, 1..15 -> 1..2. (The range's
  // size less one: all 2^64 seqs do not fit in 64 bits.)
  const uint64_t span_less_one = last_seq_ - first_seq_;
  report.early_before_seq = first_seq_ + span_less_one / 10 + 1;
  report.framework_ooms = PairFrameworkOoms(report.early_before_seq);
  for (const Request& request : requests_) {
    Classify(request.live, report.early_before_seq, &report.failures.emplace_back(request.failure));
  }
  return report;
}

std::vector<std::pair<int, int>> PairOomRecords(const std::vector<const FrameworkOom*>& records) {
  std::vector<std::pair<int, int>> errors;
  int observer = -1;  // waiting for its exception
  for (int i = 0; i < static_cast<int>(records.size()); ++i) {
    if (records[i]->source() == OOM_EXCEPTION) {
      errors.emplace_back(observer, i);
      observer = -1;
      continue;
    }
    if (observer >= 0) errors.emplace_back(observer, -1);
    observer = i;
  }
  if (observer >= 0) errors.emplace_back(observer, -1);
  return errors;
}

namespace {

// `records` in seq order (ties in file order).
template <typename Record, typename RecordOf>
std::vector<const Record*> BySeq(const std::vector<Record>& records, RecordOf record_of) {
  std::vector<const Record*> sorted;
  for (const Record& record : records) sorted.push_back(&record);
  std::stable_sort(sorted.begin(), sorted.end(), [&](const Record* a, const Record* b) {
    return record_of(*a).seq() < record_of(*b).seq();
  });
  return sorted;
}

}  // namespace

size_t CountFrameworkOoms(const TraceFile& trace) {
  return PairOomRecords(
             BySeq(trace.framework_ooms(),
                   [](const FrameworkOom& record) -> const FrameworkOom& { return record; }))
      .size();
}

std::vector<FrameworkOomError> OomAnalysis::PairFrameworkOoms(uint64_t early_before_seq) const {
  const std::vector<const FrameworkRecord*> records = BySeq(
      framework_, [](const FrameworkRecord& kept) -> const FrameworkOom& { return kept.record; });
  std::vector<const FrameworkOom*> packets;
  for (const FrameworkRecord* kept : records) packets.push_back(&kept->record);
  std::vector<FrameworkOomError> errors;
  for (const auto& [observer, exception] : PairOomRecords(packets)) {
    if (errors.size() == kMaxOomFailures) break;
    errors.push_back(FrameworkError(observer >= 0 ? records[observer] : nullptr,
                                    exception >= 0 ? records[exception] : nullptr,
                                    early_before_seq));
  }
  return errors;
}

namespace {

// The first of the records' values that is known (non-zero).
uint64_t Known(const FrameworkOom* first, const FrameworkOom* second,
               uint64_t (FrameworkOom::*field)() const) {
  if (first != nullptr && (first->*field)() != 0) return (first->*field)();
  return second != nullptr ? (second->*field)() : 0;
}

uint64_t DeviceTotal(int32_t device, const TraceFile* trace) {
  if (trace == nullptr) return 0;
  for (const Device& known : trace->devices()) {
    if (known.ordinal() == device) return known.total_memory();
  }
  return 0;
}

}  // namespace

FrameworkOomError OomAnalysis::FrameworkError(const FrameworkRecord* observer,
                                              const FrameworkRecord* exception,
                                              uint64_t early_before_seq) const {
  FrameworkOomError error;
  if (observer != nullptr) error.observer = observer->record;
  if (exception != nullptr) error.exception = exception->record;
  const FrameworkRecord& first = observer != nullptr ? *observer : *exception;
  const FrameworkOom* seen = observer != nullptr ? &observer->record : nullptr;
  const FrameworkOom* raised = exception != nullptr ? &exception->record : nullptr;
  // The observer's figures are the allocator's own; the message's request is rounded.
  if (seen != nullptr && seen->requested() != 0) {
    error.requested = seen->requested();
    error.requested_exact = !seen->requested_from_message();
  } else if (raised != nullptr) {
    error.requested = raised->requested();
    error.requested_exact = !raised->requested_from_message();
  }
  error.limit = Known(seen, raised, &FrameworkOom::limit);
  error.allocated = Known(seen, raised, &FrameworkOom::allocated);
  error.reserved = Known(seen, raised, &FrameworkOom::reserved);
  error.device_free = Known(seen, raised, &FrameworkOom::device_free);
  error.device_total = DeviceTotal(first.record.device(), trace_);
  if (raised != nullptr) error.message = raised->message();

  OomFailure& failure = error.failure;
  failure.place = first.record.device();
  MemoryEvent& request = failure.request;
  request.set_seq(first.record.seq());
  request.set_timestamp_ns(first.record.timestamp_ns());
  request.set_tid(first.record.tid());
  request.set_device(first.record.device());
  request.set_size(error.requested);
  request.set_stack_id(raised != nullptr ? raised->stack_id() : seen->stack_id());
  // What the allocator could still have got: up to its limit, and no more than the device had.
  uint64_t room = error.device_free;
  if (error.limit > 0 && error.reserved > 0) {
    const uint64_t under_limit = error.limit - std::min(error.limit, error.reserved);
    room = error.device_free > 0 ? std::min(room, under_limit) : under_limit;
  }
  request.set_free_bytes(room);
  request.set_total_bytes(error.limit > 0 ? error.limit : error.device_total);
  failure.attempts.push_back(
      {request.seq(), request.timestamp_ns(), room, request.total_bytes(), request.stack_id()});
  failure.attempt_count = 1;
  Classify(first.live, early_before_seq, &failure);
  return error;
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

namespace {

// What was live at `failure`, by call site, as the sites' text and JSON take it.
std::vector<Site> LiveSites(const OomFailure& failure, CallSites& sites) {
  std::vector<Site> live;
  for (const OomSite& site : failure.sites) live.push_back(sites.SiteOf(site.stack_id, site.live));
  return live;
}

}  // namespace

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

std::vector<std::string> FrameworkHelpedLines(const FrameworkOomError& error,
                                              const OomReport& report, CallSites& sites) {
  std::vector<std::string> lines;
  const uint64_t cached = error.reserved - std::min(error.reserved, error.allocated);
  if (error.requested > 0 && error.reserved > 0 && cached >= error.requested) {
    lines.push_back(absl::StrCat(
        "the allocator held ", FormatBytes(cached),
        " reserved but not allocated, at least the request, in blocks too small or split apart: ",
        "expandable_segments:True (PYTORCH_CUDA_ALLOC_CONF) or torch.cuda.empty_cache() before "
        "this step would have let it fit"));
  }
  if (error.capped() && error.requested > 0 && error.device_free >= error.requested) {
    lines.push_back(absl::StrCat("the device had ", FormatBytes(error.device_free),
                                 " free: a higher cap (set_per_process_memory_fraction) would "
                                 "have let it fit"));
  }
  OomFailure failure = error.failure;
  if (error.limit > 0 && error.requested > error.limit) {
    lines.push_back(absl::StrCat("the request alone was more than the limit of ",
                                 FormatBytes(error.limit),
                                 ": freeing memory under it could not have made room"));
    failure.request.set_total_bytes(0);  // what HelpedLines then says: only what was held early
  }
  for (std::string& line : HelpedLines(failure, report, sites)) lines.push_back(std::move(line));
  return lines;
}

namespace {

// "1.00 GiB (1073741824 bytes)", or "≈ 1.00 GiB, as the message printed", or "not known".
std::string RequestText(const FrameworkOomError& error) {
  if (error.requested == 0) return "not known";
  if (error.requested_exact) return SizeText(error.requested);
  return absl::StrCat("\u2248 ", FormatBytes(error.requested), ", as the message printed");
}

// What the allocator was allowed: its cap, or the device's memory.
std::string LimitText(const FrameworkOomError& error) {
  if (error.capped()) {
    return absl::StrCat("the process's cap of ", SizeText(error.limit),
                        " (set_per_process_memory_fraction), of the device's ",
                        FormatBytes(error.device_total));
  }
  if (error.limit > 0) return absl::StrCat("the device's memory, ", SizeText(error.limit));
  if (error.device_total > 0) {
    return absl::StrCat("the device's memory, ", SizeText(error.device_total));
  }
  return "not recorded";
}

// "3.50 GiB allocated, 3.80 GiB reserved; the device had 70.00 GiB free" (what is known).
std::string AllocatorText(const FrameworkOomError& error) {
  std::vector<std::string> parts;
  if (error.allocated > 0 || error.reserved > 0) {
    parts.push_back(absl::StrCat(FormatBytes(error.allocated), " allocated, ",
                                 FormatBytes(error.reserved), " reserved"));
  }
  if (error.device_free > 0) {
    parts.push_back(absl::StrCat("the device had ", FormatBytes(error.device_free), " free"));
  }
  return parts.empty() ? "not recorded" : absl::StrJoin(parts, "; ");
}

// The message's first line (PyTorch's goes on with advice on the allocator's settings).
std::string FirstLine(const std::string& message) {
  return Printable(message.substr(0, message.find('\n')));
}

// One of PyTorch's errors: in full (`last`), or in three lines.
void AppendFrameworkOomText(const FrameworkOomError& error, bool last, const OomReport& report,
                            const TraceFile& trace, CallSites& sites, size_t top,
                            std::string* out) {
  const OomFailure& failure = error.failure;
  const MemoryEvent& request = failure.request;
  absl::StrAppendFormat(out,
                        "\noom, %s: PyTorch ran out of memory at seq %d, %.3f ms after start\n",
                        PlaceName(failure.place, trace), request.seq(),
                        MillisecondsSinceStart(request.timestamp_ns(), trace));
  absl::StrAppend(out, "  requested: ", RequestText(error), "\n");
  if (!last) {
    absl::StrAppend(out, "  raised at: ", sites.Label(request.stack_id()), "\n");
    return;
  }
  absl::StrAppend(out, "  limit: ", LimitText(error), "\n");
  absl::StrAppend(out, "  the allocator then: ", AllocatorText(error), "\n");
  if (!error.message.empty()) absl::StrAppend(out, "  message: ", FirstLine(error.message), "\n");
  absl::StrAppend(out, "  raised at:\n");
  sites.AppendStackText(request.stack_id(), out);
  absl::StrAppend(out, "  live then: ", SizeText(failure.live.bytes), " in ",
                  Plural(failure.live.count, "allocation", "allocations"), "\n");
  AppendSitesText(LiveSites(failure, sites), top, failure.live.bytes, sites.style(), out);
  for (const std::string& line : FrameworkHelpedLines(error, report, sites)) {
    absl::StrAppend(out, "  what would have helped: ", line, "\n");
  }
}

// "cuMemCreate of 20.00 MiB (20971520 bytes) failed: error 800 (CUDA_ERROR_NOT_PERMITTED)".
std::string FailedCallText(const MemoryEvent& call) {
  const std::string name = ResultName(call.api(), call.result());
  return absl::StrCat(ApiName(call.api()), " of ", SizeText(call.size()), " failed: error ",
                      call.result(), name.empty() ? "" : absl::StrCat(" (", name, ")"));
}

// Allocation calls that failed with another error than out of memory.
void AppendFailedCallsText(const OomReport& report, const TraceFile& trace, CallSites& sites,
                           std::string* out) {
  if (report.failed_calls.empty()) return;
  absl::StrAppend(out, "\nfailed calls (not out of memory): ",
                  report.failed_calls.size() + report.failed_calls_not_listed, "\n");
  for (const FailedCall& failed : report.failed_calls) {
    const MemoryEvent& call = failed.call;
    absl::StrAppendFormat(out, "  %s, %s, at seq %d, %.3f ms after start\n", FailedCallText(call),
                          PlaceName(failed.place, trace), call.seq(),
                          MillisecondsSinceStart(call.timestamp_ns(), trace));
    sites.AppendStackText(call.stack_id(), out);
  }
  if (report.failed_calls_not_listed > 0) {
    absl::StrAppend(out, "  and ", report.failed_calls_not_listed, " more\n");
  }
}

}  // namespace

void AppendOomText(const OomReport& report, const TraceFile& trace, CallSites& sites, size_t top,
                   std::string* out) {
  for (size_t i = 0; i < report.framework_ooms.size(); ++i) {
    const bool last = i + 1 == report.framework_ooms.size();
    AppendFrameworkOomText(report.framework_ooms[i], last, report, trace, sites, top, out);
  }
  if (report.framework_ooms_not_analysed > 0) {
    absl::StrAppend(out, "\noom: ", report.framework_ooms_not_analysed,
                    " more of PyTorch's out-of-memory records after these, not analysed\n");
  }
  if (report.failures.empty() && report.framework_ooms.empty()) {
    absl::StrAppend(out, "\noom: no failed allocations\n");
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
    AppendSitesText(LiveSites(failure, sites), top, failure.live.bytes, sites.style(), out);
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
  AppendFailedCallsText(report, trace, sites, out);
}

namespace {

// The `top` call sites live at `failure` (0: all), as a JSON array.
std::string JsonOomSites(const OomFailure& failure, CallSites& sites, size_t top) {
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
        site.early.bytes, site.early.count,
        absl::StrCat(JsonFrames(sites.Shown(site.stack_id)),
                     JsonLabelFields(sites.LabelOf(site.stack_id)))));
  }
  return absl::StrCat("[", absl::StrJoin(live, ","), "]");
}

std::string JsonStrings(const std::vector<std::string>& lines) {
  std::vector<std::string> quoted;
  for (const std::string& line : lines) quoted.push_back(JsonString(line));
  return absl::StrCat("[", absl::StrJoin(quoted, ","), "]");
}

// One of PyTorch's errors as a JSON object.
std::string JsonFrameworkOom(const FrameworkOomError& error, const OomReport& report,
                             const TraceFile& trace, CallSites& sites, size_t top) {
  const OomFailure& failure = error.failure;
  const MemoryEvent& request = failure.request;
  std::vector<std::string> sources;
  if (error.observer) sources.push_back("\"observer\"");
  if (error.exception) sources.push_back("\"exception\"");
  return absl::StrCat(
      "{", JsonPlace(failure.place, trace), ",\"seq\":", request.seq(),
      ",\"time_ns\":", SinceStart(request.timestamp_ns(), trace), ",\"sources\":[",
      absl::StrJoin(sources, ","), "],\"requested\":", error.requested,
      ",\"requested_exact\":", error.requested_exact ? "true" : "false", ",\"limit\":", error.limit,
      ",\"capped\":", error.capped() ? "true" : "false", ",\"device_total\":", error.device_total,
      ",\"allocated\":", error.allocated, ",\"reserved\":", error.reserved,
      ",\"device_free\":", error.device_free, ",\"message\":", JsonString(error.message),
      ",\"raised_at\":", JsonString(sites.Label(request.stack_id())),
      ",\"frames\":", JsonFrames(sites.Shown(request.stack_id())),
      JsonLabelFields(sites.LabelOf(request.stack_id())), ",\"live_bytes\":", failure.live.bytes,
      ",\"live_count\":", failure.live.count, ",\"early_bytes\":", failure.early.bytes,
      ",\"early_count\":", failure.early.count, ",\"call_sites\":", failure.sites.size(),
      ",\"sites\":", JsonOomSites(failure, sites, top),
      ",\"helped\":", JsonStrings(FrameworkHelpedLines(error, report, sites)), "}");
}

// One failed call (not out of memory) as a JSON object.
std::string JsonFailedCall(const FailedCall& failed, const TraceFile& trace, CallSites& sites) {
  const MemoryEvent& call = failed.call;
  return absl::StrCat(
      "{", JsonPlace(failed.place, trace), ",\"api\":", JsonString(ApiName(call.api())),
      ",\"size\":", call.size(), ",\"result\":", call.result(),
      ",\"result_name\":", JsonString(ResultName(call.api(), call.result())),
      ",\"seq\":", call.seq(), ",\"time_ns\":", SinceStart(call.timestamp_ns(), trace),
      ",\"frames\":", JsonFrames(sites.Shown(call.stack_id())),
      JsonLabelFields(sites.LabelOf(call.stack_id())), "}");
}

}  // namespace

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
    bool enough = false;
    const size_t room = SitesThatWouldHaveMadeRoom(failure, &enough);
    failures.push_back(absl::StrCat(
        "{", JsonPlace(failure.place, trace), ",\"api\":", JsonString(ApiName(request.api())),
        ",\"result\":", request.result(), ",\"size\":", request.size(), ",\"seq\":", request.seq(),
        ",\"time_ns\":", SinceStart(request.timestamp_ns(), trace),
        ",\"free_bytes\":", request.free_bytes(), ",\"total_bytes\":", request.total_bytes(),
        ",\"attempts\":[", absl::StrJoin(attempts, ","), "]",
        ",\"frames\":", JsonFrames(sites.Shown(request.stack_id())),
        JsonLabelFields(sites.LabelOf(request.stack_id())), ",\"live_bytes\":", failure.live.bytes,
        ",\"live_count\":", failure.live.count, ",\"early_bytes\":", failure.early.bytes,
        ",\"early_count\":", failure.early.count, ",\"untracked_bytes\":", UntrackedBytes(failure),
        ",\"call_sites\":", failure.sites.size(), ",\"sites\":", JsonOomSites(failure, sites, top),
        ",\"room_sites\":", enough ? room : 0,
        ",\"helped\":", JsonStrings(HelpedLines(failure, report, sites)),
        // Only when `attempts` is cut short: otherwise it is attempts' length.
        failure.attempt_count > failure.attempts.size()
            ? absl::StrCat(",\"attempt_count\":", failure.attempt_count)
            : "",
        "}"));
  }
  std::vector<std::string> framework;
  for (const FrameworkOomError& error : report.framework_ooms) {
    framework.push_back(JsonFrameworkOom(error, report, trace, sites, top));
  }
  std::vector<std::string> failed_calls;
  for (const FailedCall& failed : report.failed_calls) {
    failed_calls.push_back(JsonFailedCall(failed, trace, sites));
  }
  std::string out = absl::StrCat("{\"early_before_seq\":", report.early_before_seq,
                                 ",\"framework_ooms\":[", absl::StrJoin(framework, ","), "]",
                                 ",\"failures\":[", absl::StrJoin(failures, ","), "]",
                                 ",\"failed_calls\":[", absl::StrJoin(failed_calls, ","), "]");
  if (report.framework_ooms_not_analysed > 0) {
    absl::StrAppend(&out, ",\"framework_ooms_not_analysed\":", report.framework_ooms_not_analysed);
  }
  if (report.failures_not_analysed > 0) {
    absl::StrAppend(&out, ",\"failures_not_analysed\":", report.failures_not_analysed);
  }
  if (report.failed_calls_not_listed > 0) {
    absl::StrAppend(&out, ",\"failed_calls_not_listed\":", report.failed_calls_not_listed);
  }
  return out + "}";
}

}  // namespace gpumem::report
