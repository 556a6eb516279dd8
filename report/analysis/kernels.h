// Kernel launches against memory: how often each kernel ran and from where, which kernels ran
// while a device stood at its peak, and which allocations no kernel ever received (never used) or
// kept for many launches after their last use (idle). See report/README.md ("Kernels").
//
// Fed in seq order alongside a Replay (report/replay/replay.h): memory events after the replay
// applied them, launches as they come, and each allocation as it leaves the live set. A launch
// "receives" an allocation when one of its pointer-sized parameter values
// (LaunchEvent.pointer_args) lies inside it at that moment, interior pointers included. Memory is
// bounded by the live set and the number of distinct kernels and call sites.
#ifndef GPUMEM_REPORT_ANALYSIS_KERNELS_H_
#define GPUMEM_REPORT_ANALYSIS_KERNELS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "core/trace.pb.h"
#include "report/replay/dense_index.h"
#include "report/replay/event_counts.h"
#include "report/replay/replay.h"
#include "report/stacks/call_sites.h"

namespace gpumem::report {

// One kernel (by name; graph launches by graph) and where it was launched from.
struct KernelStats {
  std::string name;  // demangled, escaped; "graph 0x..." for a graph launch
  uint64_t launches = 0;
  // Launch call sites (stack ids), most launches first (ties by stack id).
  std::vector<std::pair<uint64_t, uint64_t>> stacks;  // (stack id, launches)
};

// Allocations of one call site on one place that no launch received, or that stayed idle.
struct UnusedSite {
  int32_t place = 0;
  uint64_t stack_id = 0;
  Tally tally;
  // Idle only: launches between the last use and the end of the allocations, summed.
  uint64_t idle_launches = 0;
};

struct KernelReport {
  uint64_t launches = 0;
  uint64_t graph_launches = 0;
  // Launches whose parameters could not be read (params_unknown) or that were graph launches:
  // what they received is not known, so "never used" is a lower bound of use when they are > 0.
  uint64_t unscanned_launches = 0;
  std::vector<KernelStats> kernels;  // most launches first (ties by name)
  // Per place that peaked: the kernels launched while live bytes stood at the (last) peak.
  std::map<int32_t, std::vector<std::pair<std::string, uint64_t>>> at_peak;
  // Allocations no launch received, by call site, largest first. Empty without launches.
  std::vector<UnusedSite> never_used;
  // Allocations that lived on for at least kIdleLaunches launches, and for most (kIdleShare) of
  // the launches of their life, after the last launch that received them.
  std::vector<UnusedSite> idle;
};

// A kernel's name, demangled and escaped for printing (report/format/printable.h); "kernel <id>"
// when the trace does not name it (`trace` may be null).
std::string KernelLabel(const TraceFile* trace, uint64_t kernel_id);

// A launch's kernel, as KernelLabel names it; "graph 0x..." for a graph launch.
std::string KernelName(const LaunchEvent& launch, const TraceFile* trace);

inline constexpr uint64_t kIdleLaunches = 1000;
inline constexpr double kIdleShare = 0.9;

class KernelAnalysis final : public ReplayObserver {
 public:
  // `trace` names the kernels (may be null: "kernel <id>").
  explicit KernelAnalysis(const TraceFile* trace) : trace_(trace) {}

  // `replay` has applied `event` (live bytes and the live set are as of after it).
  void AfterMemory(const MemoryEventFields& event, const Replay& replay) override;
  void AddLaunch(const LaunchEvent& launch, const Replay& replay) override;
  void AllocationStarted(const LiveAllocation& live) override;
  void AllocationEnded(const LiveAllocation& live) override;
  // What was live at the end still counts: as never used or idle through to the end.
  void Finished(const Replay& replay) override;

  const KernelReport& report() const { return report_; }
  // The report, moved out once the replay is over.
  KernelReport TakeReport() { return std::move(report_); }

 private:
  struct Use {
    uint64_t launches = 0;         // launches that received it
    uint64_t last_use_launch = 0;  // launch_index_ of the last of them
    uint64_t first_launch = 0;     // launch_index_ when it was allocated
  };
  struct Kernel {
    std::string name;
    uint64_t launches = 0;
    absl::flat_hash_map<uint64_t, uint64_t> stacks;
  };
  struct PeakWindow {
    uint64_t peak_bytes = 0;
    bool at_peak = false;
    absl::flat_hash_map<uint64_t, uint64_t> kernels;  // kernel key -> launches at the peak
  };

  // UnusedSites by (place, stack id), one looked up per allocation that ends. Indexed by stack id
  // in a vector per place, which stays small and in cache since a recorder numbers its stacks from
  // 1 (a hash map's probes cost `gpumem report` a twentieth of its time); hashed beyond
  // kDenseStackIds, and for places beyond the first kDensePlaces (a trace has a few devices): the
  // vectors take at most kDensePlaces x kDenseStackIds sites (21 MB), whatever ids a trace gives.
  class SiteTable {
   public:
    // The site, with place and stack id set; its tally is zero when new.
    UnusedSite& At(int32_t place, uint64_t stack_id);
    // Every site with a tally, largest first (ties by place and stack id).
    std::vector<UnusedSite> Largest() const;

   private:
    static constexpr uint64_t kDenseStackIds = uint64_t{1} << 16;
    static constexpr size_t kDensePlaces = 8;
    UnusedSite& Sparse(int32_t place, uint64_t stack_id);
    struct Place {
      int32_t place = 0;
      std::vector<UnusedSite> by_stack;  // by stack id; a site never added to has a zero tally
    };
    std::vector<Place> places_;
    size_t last_place_ = 0;  // index in places_ of At()'s last place
    absl::flat_hash_map<std::pair<int32_t, uint64_t>, UnusedSite> sparse_;
  };

  // The launch's kernel key and entry (added, named, when new).
  std::pair<uint64_t, Kernel*> KernelOf(const LaunchEvent& launch);
  void Classify(const LiveAllocation& live, const Use& use);

  const TraceFile* trace_;
  KernelReport report_;
  uint64_t launch_index_ = 0;  // launches so far
  uint64_t graph_launches_ = 0;
  uint64_t unscanned_launches_ = 0;
  absl::node_hash_map<uint64_t, Kernel> kernels_;  // by kernel key; entries stay in place
  // kernels_'s entries by kernel id, for the ids a recorder gives (from 1 up), without hashing.
  static constexpr uint64_t kDenseKernelIds = uint64_t{1} << 16;
  std::vector<Kernel*> kernels_by_id_;
  // Launches by stack id, for the first kernel each stack launched: a launch's stack ends at the
  // launch call, so nearly every stack launches one kernel, and its count is one array entry
  // instead of a probe of that kernel's `stacks` (a twentieth of a launch-heavy report's time).
  // Another kernel from the same stack counts in its own `stacks`; Finished() merges the two.
  struct StackLaunches {
    uint64_t kernel_key = 0;
    uint64_t launches = 0;  // 0: no launch from this stack yet
  };
  static constexpr uint64_t kDenseLaunchStacks = uint64_t{1} << 20;
  std::vector<StackLaunches> launches_by_stack_;
  void CountStack(uint64_t stack_id, uint64_t kernel_key, Kernel* kernel);
  // By LiveAllocation::index, from the first launch on: every live allocation's.
  std::vector<Use> uses_;
  Use& UseOf(const LiveAllocation& live) { return GrownToHold(uses_, live.index); }
  std::map<int32_t, PeakWindow> peaks_;
  size_t open_windows_ = 0;  // of peaks_, those at_peak
  // peaks_'s entry looked up last (map nodes do not move): consecutive events share a place.
  PeakWindow* last_window_ = nullptr;
  int32_t last_window_place_ = 0;
  SiteTable never_used_;
  SiteTable idle_;
};

// The "kernels" section of `gpumem report --kernels`, and its JSON object (report/README.md).
// `frames_of(stack_id)` gives a call site's text, innermost first, one frame per entry. The text
// names kernels by ShortKernelName (report/stacks/user_frames.h), the JSON in full.
std::string KernelsText(const KernelReport& report, const TraceFile& trace, size_t top,
                        const std::function<std::vector<std::string>(uint64_t)>& frames_of);
std::string KernelsJson(const KernelReport& report, size_t top,
                        const std::function<std::string(uint64_t)>& json_frames_of);

// `report` with its call sites merged as CallSites::KernelSiteOf says (unchanged without Python
// frames or under --group-by stack).
KernelReport RegroupKernels(const KernelReport& report, CallSites& sites);
// "  kernels launched while at the peak: ..." under `place`'s peak, when launches were recorded:
// kernels by short name, those that share one counted together.
void AppendKernelsAtPeakText(const std::optional<KernelReport>& kernels, int32_t place, size_t top,
                             std::string* out);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ANALYSIS_KERNELS_H_
