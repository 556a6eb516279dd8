// Growth: call sites whose live bytes rise from one iteration to the next (the
// `list.append(tensor)` mistake), with the rate per iteration. See report/README.md,
// "gpumem report --growth".
//
// Iterations start at the allocations of one call site, the marker site:
// - with a marker predicate (`--iteration-marker FUNCTION`: some frame's function contains
//   FUNCTION), the first call site whose stack matches; when several match (the function allocates
//   more than once per iteration), the first to allocate marks the iterations;
// - otherwise the allocation call site that allocates once per iteration. Only sites whose
//   occurrences spread over at least half of the run count (set-up allocations are bunched at the
//   start); in a loop each of them occurs a whole number of times per iteration, so of the
//   occurrence counts that at least two sites have exactly (at least kMinMarkerOccurrences), the
//   number of iterations is the one whose multiples the most sites have (ties: the larger), and
//   the first site that occurs exactly that often marks them. Failing that, the call site that
//   allocates most often (at least kMinMarkerOccurrences times; ties: the one that allocated
//   first);
// - and when no allocation call site repeats that often (PyTorch's caching allocator allocates a
//   few segments and then nothing), from the launches: in a loop each step launches the same
//   kernels, most of them once per step, so the number of launches shared by the most launch
//   sites (kernel and stack) is the number of iterations; the first of those sites to launch is
//   the marker, and each of its launches starts an iteration.
// Each occurrence starts an iteration, which ends where the next starts; the last ends with the
// trace. What comes before the first is no iteration. For
// every (place, call site), the live bytes at the end of each iteration are recorded; a site is
// growing when they rose at no fewer than kGrowingShare of the boundaries between iterations and
// were higher at the end of the last iteration than at the end of the first. Its rate is (last -
// first) / (iterations - 1).
#ifndef GPUMEM_REPORT_ANALYSIS_GROWTH_H_
#define GPUMEM_REPORT_ANALYSIS_GROWTH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/trace.pb.h"
#include "report/analysis/oom.h"
#include "report/replay/event_counts.h"
#include "report/replay/replay.h"
#include "report/stacks/call_sites.h"
#include "report/stacks/python_holders.h"

namespace gpumem::report {

inline constexpr uint64_t kMinMarkerOccurrences = 3;
inline constexpr double kGrowingShare = 0.8;
// Iterations whose values are kept for the output (GrowingSite::live_bytes, iteration_seqs): every
// sample_stride-th from the first, at most this many; the stride doubles (every other sample is
// dropped) when more would be needed. The last iteration is always added.
inline constexpr size_t kMaxGrowthSamples = 256;

struct GrowthOptions {
  // Whether an allocation with this stack id is at the marker; null: detect the iterations.
  std::function<bool(uint64_t stack_id)> is_marker;
  CallSiteOf call_site_of;  // null: every stack is its own call site
  // What counts as one allocation point when the iterations are detected: finer than the call
  // sites the growth is told by (a user's line such as loss.backward() stands for many
  // allocations per iteration). Null: call_site_of.
  CallSiteOf marker_site_of;
};

struct GrowingSite {
  int32_t place = 0;      // device ordinal, -1 unknown, or kPinnedHost
  uint64_t stack_id = 0;  // the call site's stack id
  // At the end of the sampled iterations (GrowthReport::sample_stride), the last one included.
  std::vector<uint64_t> live_bytes;
  std::vector<uint64_t> live_count;
  size_t rises = 0;                // boundaries at which live bytes rose (over judged iterations)
  double bytes_per_iteration = 0;  // (last - first) / (judged iterations - 1)
  // Iterations the rule judged: all of them, or all but the last when the site's live bytes fell
  // in the last one — it runs into the program's teardown (a list of tensors kept by every
  // iteration and freed at exit still grew through every complete iteration).
  size_t judged_iterations = 0;
  // Where Python took references to this site's allocations (report/stacks/python_holders.h), most
  // first; empty when the trace has none.
  std::vector<HolderTally> holders;
};

struct GrowthReport {
  enum class Rule {
    kMarker,        // is_marker given
    kMostFrequent,  // detected: an allocation call site (once per iteration, or most frequent)
    kLaunches,      // detected: a launch site launched once per iteration (no allocation repeats)
  };
  Rule rule = Rule::kMostFrequent;
  // The call site whose allocations start iterations (0 with found false); with kLaunches, the
  // stack of the launches that do, and their kernel.
  bool found = false;
  uint64_t marker_stack_id = 0;
  uint64_t marker_kernel_id = 0;
  size_t iteration_count = 0;
  // The values kept are those of iterations 1, 1 + stride, 1 + 2 stride, ... and the last.
  size_t sample_stride = 1;
  // The seq of each sampled iteration's first allocation.
  std::vector<uint64_t> iteration_seqs;
  size_t iterations() const { return iteration_count; }
  // Growing sites, fastest growing first (ties: place, then stack id). Needs 2 iterations.
  std::vector<GrowingSite> sites;
};

// Without a marker predicate the marker is the call site that allocates most often, which is
// known only at the end: this counts allocations per stack over one pass (memory bounded by the
// stacks of the trace) and names the marker afterwards, for a GrowthAnalysis in a second pass.
// A launch site: the kernel and the stack it was launched from.
struct LaunchSite {
  uint64_t kernel_id = 0;
  uint64_t stack_id = 0;
  bool operator==(const LaunchSite&) const = default;
  template <typename H>
  friend H AbslHashValue(H hash, const LaunchSite& site) {
    return H::combine(std::move(hash), site.kernel_id, site.stack_id);
  }
};

class MarkerCounter {
 public:
  void Add(const MemoryEvent& event);
  void AddLaunch(const LaunchEvent& launch);
  // The most frequent allocation call site with at least kMinMarkerOccurrences allocations (ties:
  // the one that allocated first), stacks merged by `call_site_of` now; nullopt: none.
  std::optional<uint64_t> MostFrequent(const CallSiteOf& call_site_of) const;
  // The launch site that marks iterations when no allocation call site does (the rule above);
  // nullopt: no launch count is shared by two sites or more, or it is below
  // kMinMarkerOccurrences.
  std::optional<LaunchSite> LaunchMarker() const;

 private:
  struct Seen {
    uint64_t count = 0;
    uint64_t first = 0;  // index of its first occurrence among the allocations (launches)
    uint64_t last = 0;   // and of its last
  };
  absl::flat_hash_map<uint64_t, Seen> by_stack_;
  uint64_t allocations_ = 0;
  absl::flat_hash_map<LaunchSite, Seen> by_launch_site_;
  uint64_t launches_ = 0;
};

// Growth over one process's memory events, fed one at a time in seq order. At each iteration's
// end it takes the live bytes of every (place, call site) and keeps, per site, only what the rule
// needs (the first and last values, the previous one, the rises) and the sampled series: memory is
// bounded by the live set and the call sites, not by the number of iterations.
class GrowthAnalysis {
 public:
  // With options.is_marker, the marker is the first call site to allocate that matches, found as
  // the events come. Without, `marker` is MarkerCounter::MostFrequent() of a pass over the same
  // events before this one (nullopt: none, so no iterations).
  explicit GrowthAnalysis(GrowthOptions options, std::optional<uint64_t> marker = std::nullopt);
  // Iterations start at the launches of `marker` (MarkerCounter::LaunchMarker()) instead.
  GrowthAnalysis(GrowthOptions options, LaunchSite marker);
  // Its replay holds the address of a member.
  GrowthAnalysis(const GrowthAnalysis&) = delete;
  GrowthAnalysis& operator=(const GrowthAnalysis&) = delete;
  void Add(const MemoryEventFields& event);
  void Add(const MemoryEvent& event) { Add(FromProto(event)); }
  void AddLaunch(const LaunchEvent& launch);
  // The report, once every event was added (once).
  GrowthReport Finish();

 private:
  using Key = std::pair<int32_t, uint64_t>;  // (place, call site)

  // The live allocations and bytes of every (place, stack), kept as the replay makes allocations
  // live and ends them, so that an iteration's end reads the stacks instead of every live
  // allocation (which made `--growth` cost the live set times the iterations: most of its time
  // on a long run with thousands of parameters live).
  class LiveByStack final : public ReplayObserver {
   public:
    void AfterMemory(const MemoryEventFields&, const Replay&) override {}
    void AddLaunch(const LaunchEvent&, const Replay&) override {}
    void AllocationStarted(const LiveAllocation& live) override;
    void AllocationEnded(const LiveAllocation& live) override;
    void Finished(const Replay&) override {}
    // Calls `visit(place, stack_id, tally)` for every (place, stack) with live allocations; the
    // tally's bytes saturate as Tally's do.
    template <typename Visit>
    void ForEach(Visit&& visit) const {
      for (const auto& [key, live] : by_key_) {
        if (live.count == 0) continue;
        const unsigned __int128 most = std::numeric_limits<uint64_t>::max();
        visit(key.first, key.second,
              Tally{live.count, static_cast<uint64_t>(std::min(live.bytes, most))});
      }
    }

   private:
    struct Live {
      uint64_t count = 0;
      unsigned __int128 bytes = 0;  // exact: a saturated sum could not be taken back
    };
    absl::flat_hash_map<Key, Live> by_key_;  // by (place, stack id)
  };

  struct Site {
    uint64_t first = 0;  // live bytes after iteration 1 (0: nothing then)
    Tally previous;      // after the last iteration ended
    size_t rises = 0;
    Tally before_previous;  // after the iteration before that
    size_t rises_before_previous = 0;
    std::vector<Tally> samples;  // after sampled iterations; missing at the end: nothing then
  };

  uint64_t SiteOf(uint64_t stack_id) const;
  uint64_t MarkerSiteOf(uint64_t stack_id) const;
  // The latest iteration (report_.iteration_count - 1) ends: takes its live set.
  void EndIteration();
  // An occurrence of the marker at `seq`: the previous iteration ends, one starts.
  void StartIteration(uint64_t seq);

  GrowthOptions options_;
  std::optional<LaunchSite> launch_marker_;
  GrowthReport report_;
  uint64_t last_iteration_seq_ = 0;
  LiveByStack live_by_stack_;
  Replay replay_{&live_by_stack_};
  std::map<Key, Site> sites_;  // ordered: deterministic output
  // The (place, site) keys live after the last iteration ended: one that is missing next time
  // fell to 0.
  absl::flat_hash_map<Key, Tally> last_snapshot_;
};

// MarkerCounter (unless options.is_marker) and GrowthAnalysis over `events` (one process's memory
// events in seq order).
GrowthReport AnalyzeGrowth(const std::vector<MemoryEvent>& events, const GrowthOptions& options);

// `gpumem report --growth`: the iterations found, and the first `top` growing call sites (0: all)
// with what keeps them; `iteration_marker` is --iteration-marker's value ("" without it). And its
// JSON object (report/README.md).
void AppendGrowthText(const GrowthReport& report, const TraceFile& trace, CallSites& sites,
                      size_t top, const std::string& iteration_marker, std::string* out);
std::string JsonGrowth(const GrowthReport& report, const TraceFile& trace, CallSites& sites,
                       size_t top, const std::string& iteration_marker);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ANALYSIS_GROWTH_H_
