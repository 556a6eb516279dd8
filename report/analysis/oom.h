// OOM post-mortem: PyTorch's out-of-memory errors (FrameworkOom packets) first, then each
// allocation that failed out of memory (ALLOC_FAILED with IsOutOfMemoryResult): the request, what
// was free or allowed then, and what the trace shows live on that place at that moment, by call
// site; and what the data says would have helped (old allocations still held, the largest call
// sites that would have made room, the allocator's fragmentation). Allocation calls that failed
// with another error are listed as failed calls, never as an OOM. See report/README.md,
// "gpumem report --oom".
//
// PyTorch's errors: an OOM_EXCEPTION record that follows an OOM_OBSERVER record (on any thread)
// with no other exception record between is one error, with the request, limit and free memory of
// the observer and the message and stack of the exception; either record alone is one too.
//
// Retries are grouped: a failure of the same size, API and place as the previous failure there,
// with no successful allocation on that place in between, is another attempt at the same request
// (PyTorch's caching allocator empties its cache and calls cudaMalloc again). A group is reported
// once, as of its last attempt (after whatever was freed between attempts).
#ifndef GPUMEM_REPORT_ANALYSIS_OOM_H_
#define GPUMEM_REPORT_ANALYSIS_OOM_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/trace.pb.h"
#include "report/replay/event_counts.h"
#include "report/replay/replay.h"
#include "report/stacks/call_sites.h"

namespace gpumem::report {

// What one call site held at a failure.
struct OomSite {
  uint64_t stack_id = 0;  // the call site's stack id (CallSiteOf)
  Tally live;             // live at the failure
  Tally early;            // of which allocated before OomReport::early_before_seq
};

// One attempt at a failed request.
struct OomAttempt {
  uint64_t seq = 0;
  uint64_t timestamp_ns = 0;
  uint64_t free_bytes = 0;  // cuMemGetInfo at the failure (0 with total 0: not recorded)
  uint64_t total_bytes = 0;
  uint64_t stack_id = 0;
};

// Failed requests analysed in full (live set, call sites, what would have helped): the first ones
// of the trace; later ones are only counted (OomReport::failures_not_analysed).
inline constexpr size_t kMaxOomFailures = 64;
// Attempts listed per request: the first ones; OomFailure::attempt_count counts them all.
inline constexpr size_t kMaxOomAttempts = 64;

struct OomFailure {
  MemoryEvent request;               // the last attempt
  int32_t place = 0;                 // device ordinal, -1 unknown, or kPinnedHost
  std::vector<OomAttempt> attempts;  // in seq order, the first kMaxOomAttempts; one unless retried
  uint64_t attempt_count = 0;        // all of them
  Tally live;                        // everything live on the place at the last attempt
  Tally early;                       // of which allocated before early_before_seq
  std::vector<OomSite> sites;        // live at the last attempt by call site, largest first
};

// PyTorch's out-of-memory error, from its observer's records.
struct FrameworkOomError {
  std::optional<FrameworkOom> observer;   // the allocator's out-of-memory hook
  std::optional<FrameworkOom> exception;  // the torch.OutOfMemoryError raised
  uint64_t requested = 0;                 // bytes (0: not known)
  bool requested_exact = false;           // false: parsed from the message, rounded as printed
  uint64_t limit = 0;                     // what the allocator was allowed (0: not known)
  uint64_t device_total = 0;              // the device's memory (Device packet; 0: not known)
  uint64_t allocated = 0;                 // the allocator's, then (0: not known)
  uint64_t reserved = 0;
  uint64_t device_free = 0;
  std::string message;  // the exception's
  // The error as a failed request, for what the failures share (the live set, what would have
  // helped): request.size is `requested`, free_bytes what the allocator could still have got
  // (under the limit and the device's free memory), total_bytes the limit; the live set as of the
  // first record.
  OomFailure failure;

  // The limit is a cap below the device's memory (set_per_process_memory_fraction).
  bool capped() const { return limit > 0 && device_total > 0 && limit < device_total; }
};

// An allocation call that failed with an error other than out of memory (error 800, a handle type
// the system does not allow: PyTorch's probe under expandable segments).
struct FailedCall {
  MemoryEvent call;
  int32_t place = 0;
};
// Failed calls listed: the first ones; later ones are only counted.
inline constexpr size_t kMaxFailedCalls = 64;

struct OomReport {
  uint64_t first_seq = 0;  // the trace's seq range (all memory events)
  uint64_t last_seq = 0;
  // Allocations with a smaller seq were made in the first 10% of the seq range: "early".
  uint64_t early_before_seq = 0;
  std::vector<FrameworkOomError> framework_ooms;  // in seq order, the first kMaxOomFailures
  uint64_t framework_ooms_not_analysed = 0;       // records after those
  std::vector<OomFailure> failures;      // in seq order, the first kMaxOomFailures requests
  uint64_t failures_not_analysed = 0;    // failed requests after those
  std::vector<FailedCall> failed_calls;  // in seq order, the first kMaxFailedCalls
  uint64_t failed_calls_not_listed = 0;
};

// The OOM post-mortem of one process's memory events, fed one at a time in seq order. What is
// "early" depends on the whole trace's seq range, known only at the end: so each failed request
// kept keeps the allocations live on its place at its last attempt (stack, seq, size), and
// Finish() classifies and groups them. Memory is bounded by kMaxOomFailures such live sets and
// the replay's live set, not by the length of the trace.
class OomAnalysis {
 public:
  // `call_site_of` is called by Finish() only, so a trace being streamed is read whole by then.
  // PyTorch's errors are taken from `trace` (may be null: none) as its packets are read; `trace`
  // must outlive the analysis. With `shared_replay` (ReplayTrace's own, which adds each event
  // right after this analysis saw it), what was live is read from it; else this analysis replays
  // the events itself.
  explicit OomAnalysis(CallSiteOf call_site_of = {}, const TraceFile* trace = nullptr,
                       const Replay* shared_replay = nullptr);
  void Add(const MemoryEvent& event);
  OomReport Finish();

 private:
  struct LiveThen {
    uint64_t stack_id = 0;
    uint64_t seq = 0;
    uint64_t size = 0;
  };
  struct Request {
    OomFailure failure;
    std::vector<LiveThen> live;  // on its place at its last attempt
  };
  struct FrameworkRecord {
    FrameworkOom record;
    std::vector<LiveThen> live;  // on its device when it was noted
  };
  // Per place, the request that a failure of the same size and API would retry (cleared by a
  // successful allocation there).
  struct Open {
    uint64_t size = 0;
    Api api = API_UNKNOWN;
    bool kept = false;  // one of requests_ (the last one kept on the place), or only counted
    size_t index = 0;
  };

  // Keeps the live set of `place` (-1: every device) as of now.
  std::vector<LiveThen> LiveOn(int32_t place) const;
  // Takes the FrameworkOom packets read so far whose seq is below `seq`, with the live set now.
  void TakeFrameworkOoms(uint64_t seq);
  // The live set by call site, early or not, into `failure`.
  void Classify(const std::vector<LiveThen>& live, uint64_t early_before_seq,
                OomFailure* failure) const;
  // PyTorch's errors from the records taken, paired (see the top of this file).
  std::vector<FrameworkOomError> PairFrameworkOoms(uint64_t early_before_seq) const;
  FrameworkOomError FrameworkError(const FrameworkRecord* observer,
                                   const FrameworkRecord* exception,
                                   uint64_t early_before_seq) const;

  CallSiteOf call_site_of_;
  const TraceFile* trace_;
  const Replay* shared_replay_;
  Replay own_replay_;  // without a shared replay
  bool any_event_ = false;
  uint64_t first_seq_ = 0;
  uint64_t last_seq_ = 0;
  std::vector<Request> requests_;
  absl::flat_hash_map<int32_t, Open> open_;
  uint64_t not_analysed_ = 0;
  size_t framework_taken_ = 0;  // of trace_->framework_ooms()
  std::vector<FrameworkRecord> framework_;
  uint64_t framework_not_analysed_ = 0;
  std::vector<FailedCall> failed_calls_;
  uint64_t failed_calls_not_listed_ = 0;
};

// PyTorch's errors among `records` (FrameworkOom packets in seq order): per error, the index of
// its observer record and of its exception record (-1: none), paired as the top of this file says.
std::vector<std::pair<int, int>> PairOomRecords(const std::vector<const FrameworkOom*>& records);
// How many errors the trace's FrameworkOom packets are.
size_t CountFrameworkOoms(const TraceFile& trace);

// OomAnalysis over `events` (one process's memory events in seq order).
OomReport AnalyzeOoms(const std::vector<MemoryEvent>& events, const CallSiteOf& call_site_of = {});

// The fewest of `failure.sites` (largest first) whose bytes, freed, would have let the request fit:
// how many, or 0 when the request fit the free memory recorded, or free/total were not recorded,
// or even all of them would not have been enough (then *enough is false).
size_t SitesThatWouldHaveMadeRoom(const OomFailure& failure, bool* enough);

// Memory on the device that the trace does not show live at `failure`: total - free - live (0
// when free/total were not recorded, or when they do not add up).
uint64_t UntrackedBytes(const OomFailure& failure);
// "What would have helped" `failure`, computed from the data: one sentence each.
std::vector<std::string> HelpedLines(const OomFailure& failure, const OomReport& report,
                                     CallSites& sites);
// The same for PyTorch's error: the allocator's fragmentation and cap first, then HelpedLines.
std::vector<std::string> FrameworkHelpedLines(const FrameworkOomError& error,
                                              const OomReport& report, CallSites& sites);
// `gpumem report --oom`: PyTorch's errors (the last in full), each failure with its call site and
// the `top` call sites live then (0: all), then the failed calls; and its JSON object
// (report/README.md).
void AppendOomText(const OomReport& report, const TraceFile& trace, CallSites& sites, size_t top,
                   std::string* out);
std::string JsonOom(const OomReport& report, const TraceFile& trace, CallSites& sites, size_t top);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ANALYSIS_OOM_H_
