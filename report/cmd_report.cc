// `gpumem report`: when each device peaked and what it held then, and what was never freed, by
// call site; on request the torch.cuda.memory_summary() table (report/summary_table.h), the
// post-mortem of failed allocations (report/oom.h) and call sites that grow from iteration to
// iteration (report/growth.h); readable text or one JSON object (schema:
// report/report.schema.json). Each trace is streamed once, the replay and every analysis asked for
// fed event by event in one pass (growth without a marker takes a second), so memory is bounded by
// live sets, not by trace length.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/arguments.h"
#include "report/call_sites.h"
#include "report/combined.h"
#include "report/commands.h"
#include "report/event_stream.h"
#include "report/fragmentation.h"
#include "report/growth.h"
#include "report/json.h"
#include "report/kernels.h"
#include "report/memory_holders.h"
#include "report/names.h"
#include "report/oom.h"
#include "report/output_file.h"
#include "report/printable.h"
#include "report/progress.h"
#include "report/python_stacks.h"
#include "report/replay.h"
#include "report/sizes.h"
#include "report/summary_table.h"
#include "report/symbolizer.h"
#include "report/trace_file.h"
#include "report/trace_paths.h"

namespace gpumem::report {

const char kReportUsage[] =
    R"usage(usage: gpumem report [--summary [--allocator native|expandable|none]] [--peak] [--leaks]
                     [--oom] [--fragmentation] [--kernels]
                     [--growth [--iteration-marker FUNCTION]] [--top N]
                     [--group-by user|python|stack] [--python-only] [--json] TRACE...

Replays each trace's memory operations in order and reports, per device:
  --summary    a table in the layout of PyTorch's torch.cuda.memory_summary(), with notes on
               what each row was measured from and why a row the trace cannot support is n/a
  --allocator native|expandable|none
               (implies --summary; tensor-level traces only, recorded with `gpumem record
               --tensors`) the allocator model whose replay of the tensors fills the rows the
               trace cannot measure (GPU reserved, segments, non-releasable, oversize, OOMs and
               retries), marked *: by default the native caching allocator, or expandable
               segments where the trace's allocator settings had expandable_segments:True, with
               their max_split_size_mb; none: those rows n/a
  --peak       when it peaked, by how much, and what was live then by call site, largest first
  --leaks      what was never freed at the end, by call site
  --oom        each failed allocation: the request, free/total memory then, what was live by
               call site, and what would have helped (retries of one request are grouped)
  --fragmentation
               reserved (what the allocator holds from the driver) against in use (what the
               program's allocations hold): at the peak, at the end and over time; what the
               recording mode cannot tell says n/a and why
  --kernels    kernel launches: per kernel, how many and from where; which kernels ran while
               memory stood at its peak; allocations no kernel ever received (never used) and
               allocations kept long after their last use (idle)
  --growth     call sites whose live bytes rise from iteration to iteration, in bytes/iteration
  --iteration-marker FUNCTION
               (implies --growth) an iteration starts at each allocation of the first call site
               with a frame whose function contains FUNCTION; without it, at each allocation of
               the most frequent allocation call site (at least 3)
  (none of --summary, --peak, --leaks, --oom, --fragmentation, --growth, --kernels: --peak
   and --leaks)
  --top N      call sites shown per device or failure (default 10; 0: all)
  --group-by user|python|stack
               what one call site is, for stacks with Python frames: user (default) the
               innermost Python frame of the program's own code (not the standard library or an
               installed package; else the innermost Python frame); python the whole Python
               stack; stack the whole stack, native and Python frames. Stacks without Python
               frames are always grouped by their whole stack
  --python-only
               print only the Python frames of a stack that has them (native frames dropped)
  --json       one JSON object instead of text (schema: report/report.schema.json in the
               sources)
  -h, --help   print this text

A TRACE may be a directory: every *.trace file directly inside it, each reported on its own.
With more than one trace, a combined view follows: per device, the highest sum of live bytes over
all processes at once (merged by CLOCK_MONOTONIC timestamp; per host when the hosts differ), when,
and what each process held then.
VMM: reserved address space is not memory use; cuMemCreate'd physical memory is.

A trace gpumem record wrote says how the program ended ("exit: ..." under the end line).

Exit status: 0 ok; 2 bad usage, a trace that is missing, not a trace or damaged (a damaged trace
is still reported as far as it could be read; the damage is named in one line on stderr), or
standard output that could not be written.
)usage";

namespace {

constexpr size_t kDefaultTop = 10;

bool ParseSummaryModelChoice(const std::string& text, SummaryModelChoice* choice) {
  static constexpr std::pair<const char*, SummaryModelChoice> kChoices[] = {
      {"native", SummaryModelChoice::kNative},
      {"expandable", SummaryModelChoice::kExpandable},
      {"none", SummaryModelChoice::kNone}};
  for (const auto& [name, value] : kChoices) {
    if (text == name) {
      *choice = value;
      return true;
    }
  }
  return false;
}

struct Options {
  bool summary = false;
  SummaryModelChoice allocator = SummaryModelChoice::kFromSettings;
  bool allocator_given = false;  // --allocator: an error on a trace that is not tensor-level
  bool peak = false;
  bool leaks = false;
  bool oom = false;
  bool growth = false;
  bool fragmentation = false;
  bool kernels = false;
  bool json = false;
  size_t top = kDefaultTop;
  std::string iteration_marker;  // empty: detect iterations
  GroupBy group_by = GroupBy::kUser;
  bool python_only = false;
};

// What the leaks of a trace that does not hold the whole run are.
std::string NotLeakedNote(const RecordingEnd& end) {
  return end.Describe() + ": what was live when it stopped, not necessarily leaked";
}

// ---- text ----

// Under a place's leaks: how much of it allocators and libraries hold, by holder, and the rest.
void AppendHeldText(const std::vector<Site>& sites, std::string* out) {
  std::vector<std::pair<const MemoryHolder*, Tally>> held;  // in order of first appearance
  Tally own;
  for (const Site& site : sites) {
    if (site.holder == nullptr) {
      own.Add(site.tally);
      continue;
    }
    auto it = std::find_if(held.begin(), held.end(),
                           [&](const auto& entry) { return entry.first == site.holder; });
    if (it == held.end()) it = held.insert(held.end(), {site.holder, Tally{}});
    it->second.Add(site.tally);
  }
  if (held.empty()) return;
  for (const auto& [holder, tally] : held) {
    absl::StrAppend(out, "  held by ", holder->name, ": ", FormatBytes(tally.bytes), " in ",
                    Plural(tally.count, "allocation", "allocations"), " (", holder->explanation,
                    ")\n");
  }
  absl::StrAppend(out, "  not held by an allocator or library: ", FormatBytes(own.bytes), " in ",
                  Plural(own.count, "allocation", "allocations"), "\n");
}

// ---- call sites, OOM and growth ----

// The kernel report with its call sites merged as CallSites::KernelSiteOf says (unchanged without
// Python frames or under --group-by stack).
KernelReport RegroupKernels(const KernelReport& report, CallSites& sites) {
  KernelReport out = report;
  for (KernelStats& kernel : out.kernels) {
    absl::flat_hash_map<uint64_t, uint64_t> merged;
    for (const auto& [stack, count] : kernel.stacks) merged[sites.KernelSiteOf(stack)] += count;
    kernel.stacks.assign(merged.begin(), merged.end());
    std::sort(kernel.stacks.begin(), kernel.stacks.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
  }
  for (std::vector<UnusedSite>* list : {&out.never_used, &out.idle}) {
    std::vector<UnusedSite> merged;
    absl::flat_hash_map<std::pair<int32_t, uint64_t>, size_t> index;
    for (const UnusedSite& site : *list) {
      const std::pair<int32_t, uint64_t> key{site.place, sites.KernelSiteOf(site.stack_id)};
      auto [it, inserted] = index.try_emplace(key, merged.size());
      if (inserted) {
        merged.push_back(site);
        merged.back().stack_id = key.second;
        continue;
      }
      merged[it->second].tally.Add(site.tally);
      merged[it->second].idle_launches += site.idle_launches;
    }
    std::stable_sort(merged.begin(), merged.end(), [](const UnusedSite& a, const UnusedSite& b) {
      return a.tally.bytes > b.tally.bytes;
    });
    *list = std::move(merged);
  }
  return out;
}

// The --summary, --oom, --growth and --fragmentation analyses of one trace, when asked for.
struct Findings {
  const KernelReport* kernels = nullptr;  // with --peak or --kernels
  std::optional<Summary> summary;
  std::optional<OomReport> oom;
  std::optional<GrowthReport> growth;
  std::optional<Fragmentation> fragmentation;
};

// The analyses asked for, fed one trace's memory events in the replay's own pass (ReplayTrace's
// `also`): one pass over the file for all of them, and memory bounded by their live sets, not by
// the length of the trace. Only growth without --iteration-marker reads the file a second time:
// its marker, the most frequent allocation call site, is known only after the first pass.
class Analyses {
 public:
  // `trace`, `sites` and `options` must outlive the analyses. `timeline`: build the process's
  // timeline for the combined view.
  Analyses(const TraceFile& trace, const Options& options, CallSites& sites, bool timeline)
      : options_(options), sites_(sites) {
    if (options.summary) summary_.emplace(trace, options.allocator);
    if (options.oom) oom_.emplace(CallSiteMapping());
    if (options.fragmentation) fragmentation_.emplace(trace);
    if (options.growth) {
      if (options.iteration_marker.empty()) {
        marker_counter_.emplace();
      } else {
        growth_.emplace(GrowthOptionsFor());
      }
    }
    if (timeline) timeline_.emplace();
  }

  // Launches, in seq order with the memory events: growth may take its iterations from them.
  void AddLaunch(const LaunchEvent& launch) {
    if (growth_) growth_->AddLaunch(launch);
    if (marker_counter_) marker_counter_->AddLaunch(launch);
  }
  bool wants_launches() const { return growth_.has_value() || marker_counter_.has_value(); }

  // A memory pool's size (PoolUsage packet), in file order: a little ahead of the memory events.
  void AddPoolUsage(const PoolUsage& usage) {
    if (fragmentation_) fragmentation_->AddPoolUsage(usage);
  }

  // Python references to recorded memory (PythonHolder packets), in file order.
  void AddPythonHolder(const PythonHolder& holder) {
    if (growth_ || marker_counter_) holders_.AddHolder(holder);
  }

  // Whether any analysis takes memory events: without one, the replay is not asked to pass them on.
  bool wants_events() const {
    return summary_ || oom_ || fragmentation_ || growth_ || marker_counter_ || timeline_;
  }
  void Add(const MemoryEvent& event) {
    if (growth_ || marker_counter_) holders_.AddMemory(event);
    if (summary_) summary_->Add(event);
    if (oom_) oom_->Add(event);
    if (fragmentation_) fragmentation_->Add(event);
    if (growth_) growth_->Add(event);
    if (marker_counter_) marker_counter_->Add(event);
    if (timeline_) timeline_->Add(event);
  }

  // Once the replay's pass is over (so the trace's tables are complete). Fails only when growth's
  // second pass cannot open the file again; the other findings are there all the same.
  absl::Status Finish(const std::string& path, Findings* findings) {
    if (summary_) findings->summary = summary_->Finish();
    if (oom_) findings->oom = oom_->Finish();
    if (fragmentation_) findings->fragmentation = fragmentation_->Finish();
    if (marker_counter_) {
      // An allocation call site marks the iterations; failing that, a launch site does.
      const std::optional<uint64_t> marker = marker_counter_->MostFrequent(CallSiteMapping());
      const std::optional<LaunchSite> launch_marker =
          marker ? std::nullopt : marker_counter_->LaunchMarker();
      if (launch_marker) {
        growth_.emplace(GrowthOptionsFor(), *launch_marker);
      } else {
        growth_.emplace(GrowthOptionsFor(), marker);
      }
      absl::StatusOr<std::unique_ptr<TraceFile>> again = TraceFile::Open(path);
      if (!again.ok()) return again.status();
      StreamMemoryEventsBySeq(
          **again, [this](const MemoryEvent& event) { growth_->Add(event); }, kReorderWindow,
          nullptr, [this](const LaunchEvent& launch) { growth_->AddLaunch(launch); });
    }
    if (growth_) {
      findings->growth = growth_->Finish();
      holders_.Finish();
      for (GrowingSite& site : findings->growth->sites) {
        site.holders = holders_.ForSite(site.stack_id, CallSiteMapping(), CallSiteMapping());
      }
    }
    return absl::OkStatus();
  }

  // The process's timeline (when asked for), once the pass is over.
  std::optional<ProcessTimeline> TakeTimeline(const std::string& path, const TraceFile& trace) {
    if (!timeline_) return std::nullopt;
    return timeline_->Finish(path, trace);
  }

 private:
  CallSiteOf CallSiteMapping() const {
    return [&sites = sites_](uint64_t stack_id) { return sites.Of(stack_id); };
  }
  GrowthOptions GrowthOptionsFor() const {
    GrowthOptions growth;
    growth.call_site_of = CallSiteMapping();
    if (!options_.iteration_marker.empty()) {
      growth.is_marker = [&sites = sites_, &marker = options_.iteration_marker](uint64_t stack_id) {
        return sites.AnyFunctionContains(stack_id, marker);
      };
    }
    return growth;
  }

  const Options& options_;
  CallSites& sites_;
  std::optional<SummaryAnalysis> summary_;
  std::optional<OomAnalysis> oom_;
  std::optional<FragmentationAnalysis> fragmentation_;
  std::optional<GrowthAnalysis> growth_;
  std::optional<MarkerCounter> marker_counter_;  // growth without a marker: its first pass
  PythonHolders holders_;                        // with growth
  std::optional<TimelineBuilder> timeline_;
};

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

void AppendOomText(const OomReport& report, const TraceFile& trace, CallSites& sites,
                   const Options& options, std::string* out) {
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
    AppendFramesText(sites.Shown(request.stack_id()), out);
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
      live.push_back({sites.Shown(site.stack_id), site.live});
    AppendSitesText(live, options.top, failure.live.bytes, out);
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

std::string GrowthRuleText(const GrowthReport& report, const Options& options) {
  if (report.rule == GrowthReport::Rule::kMarker) {
    return absl::StrCat("--iteration-marker ", Printable(options.iteration_marker),
                        ": the first call site with a frame whose function contains it");
  }
  if (report.rule == GrowthReport::Rule::kLaunches) {
    return absl::StrCat(
        "a launch site launched once per iteration (no allocation call site repeats; the number "
        "of launches most launch sites share is taken as the number of iterations)");
  }
  return absl::StrCat(
      "the allocation call site seen once per iteration (the number of allocations most call "
      "sites share; else the most frequent, at least ",
      kMinMarkerOccurrences, ")");
}

void AppendGrowthText(const GrowthReport& report, const TraceFile& trace, CallSites& sites,
                      const Options& options, std::string* out) {
  if (!report.found) {
    absl::StrAppend(
        out, "\ngrowth: no iterations found: no allocation call site is ",
        report.rule == GrowthReport::Rule::kMarker
            ? absl::StrCat("in a function containing '", Printable(options.iteration_marker), "'")
            : absl::StrCat("used at least ", kMinMarkerOccurrences, " times"),
        "\n");
    return;
  }
  absl::StrAppend(out, "\ngrowth: ", Plural(report.iterations(), "iteration", "iterations"),
                  report.rule == GrowthReport::Rule::kLaunches
                      ? absl::StrCat(", each starting at a launch of ",
                                     KernelLabel(&trace, report.marker_kernel_id), " from ")
                      : std::string(", each starting at an allocation of "),
                  GrowthRuleText(report, options), ":\n");
  AppendFramesText(sites.Shown(report.marker_stack_id), out);
  if (report.iterations() < 2) {
    absl::StrAppend(out, "growth: one iteration: nothing to compare\n");
    return;
  }
  if (report.sites.empty()) {
    absl::StrAppend(out, "growth: no call site's live bytes grow from iteration to iteration\n");
    return;
  }
  const size_t boundaries = report.iterations() - 1;
  const size_t shown =
      options.top == 0 ? report.sites.size() : std::min(options.top, report.sites.size());
  int32_t place = 0;
  for (size_t i = 0; i < shown; ++i) {
    const GrowingSite& site = report.sites[i];
    if (i == 0 || site.place != place) {
      place = site.place;
      size_t here = 0;
      for (const GrowingSite& other : report.sites) here += other.place == place;
      absl::StrAppend(out, "\ngrowth, ", PlaceName(place, trace), ": ",
                      Plural(here, "call site grows", "call sites grow"), "\n");
    }
    if (site.judged_iterations < report.iterations()) {
      // Judged on the complete iterations: the last one freed it (the program's teardown).
      const size_t judged_sample = (site.judged_iterations - 1) / report.sample_stride;
      absl::StrAppend(
          out, "  +", FormatBytes(RoundToBytes(site.bytes_per_iteration)), "/iteration  rose at ",
          site.rises, " of ", site.judged_iterations - 1,
          " boundaries of the complete iterations; live ", FormatBytes(site.live_bytes.front()),
          " after iteration 1, ",
          FormatBytes(site.live_bytes[std::min(judged_sample, site.live_bytes.size() - 1)]),
          " after iteration ", site.judged_iterations, ", freed in the last one (teardown)\n");
    } else {
      absl::StrAppend(out, "  +", FormatBytes(RoundToBytes(site.bytes_per_iteration)),
                      "/iteration  rose at ", site.rises, " of ", boundaries,
                      " iteration boundaries; live ", FormatBytes(site.live_bytes.front()),
                      " after iteration 1, ", FormatBytes(site.live_bytes.back()), " (",
                      Plural(site.live_count.back(), "allocation", "allocations"),
                      ") after iteration ", report.iterations(), "\n");
    }
    AppendFramesText(sites.Shown(site.stack_id), out);
    for (const HolderTally& holder : site.holders) {
      absl::StrAppend(out, "    kept by Python references (list.append) to ", holder.count,
                      " of its allocations, ", FormatBytes(holder.bytes), ", taken at:\n");
      AppendFramesText(sites.Shown(holder.stack_id), out, "          ");
    }
  }
  if (shown < report.sites.size()) {
    absl::StrAppend(out, "  ... ",
                    Plural(report.sites.size() - shown, "more call site", "more call sites"), "\n");
  }
  // A Python program whose growth names no holder: say where that line would come from.
  const bool any_holder =
      std::any_of(report.sites.begin(), report.sites.end(),
                  [](const GrowingSite& site) { return !site.holders.empty(); });
  if (!any_holder && trace.python_status() && trace.python_status()->supported()) {
    absl::StrAppend(out,
                    "  (no list.append of these allocations was recorded: the line that keeps them "
                    "is named when gpumem record's Python observer runs, on CPython 3.12+)\n");
  }
}

// "kernels while at the peak: ..." under a place's peak, when launches were recorded.
void AppendKernelsAtPeakText(const KernelReport* kernels, int32_t place, size_t top,
                             std::string* out) {
  if (kernels == nullptr || kernels->launches == 0) return;
  auto it = kernels->at_peak.find(place);
  if (it == kernels->at_peak.end()) {
    absl::StrAppend(out, "  kernels launched while at the peak: none\n");
    return;
  }
  const size_t shown = top == 0 ? it->second.size() : std::min(top, it->second.size());
  std::vector<std::string> items;
  for (size_t i = 0; i < shown; ++i) {
    items.push_back(absl::StrCat(it->second[i].first, " x", it->second[i].second));
  }
  if (shown < it->second.size()) items.push_back("...");
  absl::StrAppend(out, "  kernels launched while at the peak: ", absl::StrJoin(items, ", "), "\n");
}

// What the program captured into CUDA graphs, when it did: one line.
void AppendCudaGraphsText(const TraceReplay& replay, std::string* out) {
  const CaptureCounts captures = CountCaptures(*replay.file);
  if (captures.captures == 0 && replay.for_graph.count == 0) return;
  absl::StrAppend(out,
                  "CUDA graphs: ", Plural(captures.captures, "stream capture", "stream captures"));
  if (captures.failed > 0) absl::StrAppend(out, " (", captures.failed, " made no graph)");
  absl::StrAppend(out, "; ", Plural(replay.for_graph.count, "allocation", "allocations"),
                  " made for them, ", FormatBytes(replay.for_graph.bytes),
                  " (a graph's memory is in use while it runs, and until it is freed)\n");
}

std::string TextReport(const TraceReplay& replay, const Findings& findings, CallSites& sites,
                       const Options& options) {
  const TraceFile& trace = *replay.file;
  const absl::flat_hash_set<uint64_t>& stream_ordered = replay.stream_ordered_stacks;
  std::string out;
  const Header& header = trace.header();
  absl::StrAppend(&out, "process: pid ", header.pid(), DescribeRank(header), " on ",
                  Printable(header.host()), ": ",
                  Printable(absl::StrJoin(header.command_line(), " ")), "\n");
  absl::StrAppend(&out, "end: ", trace.end().Describe(), "\n");
  if (const std::string note = trace.end().recording.UnrecordedNote(); !note.empty()) {
    absl::StrAppend(&out, "note: ", note, "\n");
  }
  if (trace.process_end()) {
    absl::StrAppend(&out, "exit: ", DescribeProcessEnd(*trace.process_end()), "\n");
  }
  absl::StrAppend(&out, "memory events: ", replay.memory_events,
                  "; failed allocations: ", replay.failed_allocations,
                  "; anomalies: ", DescribeAnomalies(replay.anomalies), "\n");
  if (replay.reserved_peak_bytes > 0) {
    absl::StrAppend(&out, "VMM address space reserved (not memory use): at most ",
                    FormatBytes(replay.reserved_peak_bytes), "\n");
  }
  AppendCudaGraphsText(replay, &out);
  if (replay.imported_mapped_peak_bytes > 0) {
    absl::StrAppend(&out,
                    "mapped from other processes (their memory, counted in their traces): at most ",
                    FormatBytes(replay.imported_mapped_peak_bytes), "\n");
  }
  // What CUPTI's absence means for this trace (another tool held it, or it was not found).
  if (trace.cupti() && trace.cupti()->state() != CUPTI_ACTIVE) {
    absl::StrAppend(&out, "CUPTI: ", CuptiStateName(trace.cupti()->state()), ": ",
                    Printable(trace.cupti()->detail()), "\n");
  }
  if (findings.summary) absl::StrAppend(&out, "\n", SummaryText(*findings.summary));
  if (options.peak) {
    if (replay.places.empty()) absl::StrAppend(&out, "\npeak: no memory allocated\n");
    for (const PlaceUsage& place : replay.places) {
      absl::StrAppendFormat(&out, "\npeak, %s: %s (%d bytes) at seq %d, %.3f ms after start\n",
                            PlaceName(place.place, trace), FormatBytes(place.peak_bytes),
                            place.peak_bytes, place.peak_seq,
                            MillisecondsSinceStart(place.peak_timestamp_ns, trace));
      AppendSitesText(GroupSites(place.peak_sites, sites, stream_ordered, &replay.graph_stacks),
                      options.top, place.peak_bytes, &out);
      AppendKernelsAtPeakText(findings.kernels, place.place, options.top, &out);
    }
  }
  if (options.leaks) {
    const bool clean = trace.end().complete();
    bool any = false;
    if (!clean) absl::StrAppend(&out, "\nleaks: ", NotLeakedNote(trace.end().recording), "\n");
    for (const PlaceUsage& place : replay.places) {
      if (place.live.count == 0) continue;
      any = true;
      absl::StrAppend(&out, "\nleaks, ", PlaceName(place.place, trace), ": ",
                      Plural(place.live.count, "allocation", "allocations"), ", ",
                      FormatBytes(place.live.bytes), " (", place.live.bytes, " bytes) ",
                      clean ? "never freed" : "live when it stopped", "\n");
      std::vector<Site> live =
          GroupSites(place.live_sites, sites, stream_ordered, &replay.graph_stacks);
      AppendHeldText(live, &out);
      AppendSitesText(live, options.top, 0, &out);
    }
    if (!any) absl::StrAppend(&out, "\nleaks: none: everything allocated was freed\n");
  }
  if (findings.oom) AppendOomText(*findings.oom, trace, sites, options, &out);
  if (findings.growth) AppendGrowthText(*findings.growth, trace, sites, options, &out);
  if (findings.fragmentation) absl::StrAppend(&out, FragmentationText(*findings.fragmentation));
  if (options.kernels) {
    absl::StrAppend(&out, "\n",
                    KernelsText(*findings.kernels, trace, options.top, [&sites](uint64_t stack_id) {
                      std::vector<std::string> texts;
                      for (const Frame& frame : sites.Shown(stack_id)) {
                        texts.push_back(frame.ToString());
                      }
                      return texts;
                    }));
  }
  return out;
}

// What follows the replay event by event: the kernel analysis (--peak, --kernels) and the launches
// growth may take its iterations from. Either may be null.
class ReportObserver final : public ReplayObserver {
 public:
  ReportObserver(KernelAnalysis* kernels, Analyses* analyses)
      : kernels_(kernels), analyses_(analyses) {}
  bool active() const { return kernels_ != nullptr || analyses_ != nullptr; }

  void AfterMemory(const MemoryEvent& event, const Replay& replay) override {
    if (kernels_ != nullptr) kernels_->AfterMemory(event, replay);
  }
  void AddLaunch(const LaunchEvent& launch, const Replay& replay) override {
    if (kernels_ != nullptr) kernels_->AddLaunch(launch, replay);
    if (analyses_ != nullptr) analyses_->AddLaunch(launch);
  }
  void AllocationEnded(const LiveAllocation& live) override {
    if (kernels_ != nullptr) kernels_->AllocationEnded(live);
  }
  void Finished(const Replay& replay) override {
    if (kernels_ != nullptr) kernels_->Finished(replay);
  }

 private:
  KernelAnalysis* kernels_;
  Analyses* analyses_;
};

// ---- JSON ----

std::string JsonPlace(int32_t place, const TraceFile& trace) {
  std::string out = absl::StrCat("\"memory\":", place == kPinnedHost ? "\"host\"" : "\"device\"",
                                 ",\"device\":", place == kPinnedHost ? -1 : place);
  for (const Device& device : trace.devices()) {
    if (device.ordinal() == place) {
      absl::StrAppend(&out, ",\"name\":", JsonString(device.name()),
                      ",\"total_memory\":", device.total_memory());
    }
  }
  return out;
}

std::string JsonOom(const OomReport& report, const TraceFile& trace, CallSites& sites,
                    const Options& options) {
  std::vector<std::string> failures;
  for (const OomFailure& failure : report.failures) {
    const MemoryEvent& request = failure.request;
    std::vector<std::string> attempts;
    for (const OomAttempt& attempt : failure.attempts) {
      attempts.push_back(absl::StrCat(
          "{\"seq\":", attempt.seq, ",\"time_ns\":", SinceStart(attempt.timestamp_ns, trace),
          ",\"free_bytes\":", attempt.free_bytes, ",\"total_bytes\":", attempt.total_bytes, "}"));
    }
    const size_t shown =
        options.top == 0 ? failure.sites.size() : std::min(options.top, failure.sites.size());
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

std::string JsonGrowth(const GrowthReport& report, const TraceFile& trace, CallSites& sites,
                       const Options& options) {
  const char* rule = report.rule == GrowthReport::Rule::kMarker     ? "\"iteration_marker\""
                     : report.rule == GrowthReport::Rule::kLaunches ? "\"launch_site\""
                                                                    : "\"most_frequent_call_site\"";
  std::string out = absl::StrCat("{\"rule\":", rule);
  if (report.rule == GrowthReport::Rule::kLaunches) {
    absl::StrAppend(
        &out, ",\"marker_kernel\":", JsonString(KernelLabel(&trace, report.marker_kernel_id)));
  }
  if (report.rule == GrowthReport::Rule::kMarker) {
    absl::StrAppend(&out, ",\"marker\":", JsonString(options.iteration_marker));
  }
  absl::StrAppend(&out, ",\"found\":", report.found ? "true" : "false",
                  ",\"iterations\":", report.iterations(), ",\"iteration_seqs\":[",
                  absl::StrJoin(report.iteration_seqs, ","), "]");
  if (report.found) {
    absl::StrAppend(&out, ",\"marker_frames\":", JsonFrames(sites.Shown(report.marker_stack_id)));
  }
  const size_t shown =
      options.top == 0 ? report.sites.size() : std::min(options.top, report.sites.size());
  std::vector<std::string> items;
  for (size_t i = 0; i < shown; ++i) {
    const GrowingSite& site = report.sites[i];
    items.push_back(absl::StrFormat(
        "{%s,\"bytes_per_iteration\":%.1f,\"rises\":%d,\"boundaries\":%d,"
        "\"judged_iterations\":%d,\"live_bytes\":[%s],\"live_count\":[%s],\"frames\":%s,"
        "\"held_by\":[%s]}",
        JsonPlace(site.place, trace), site.bytes_per_iteration, site.rises,
        site.judged_iterations - 1, site.judged_iterations, absl::StrJoin(site.live_bytes, ","),
        absl::StrJoin(site.live_count, ","), JsonFrames(sites.Shown(site.stack_id)),
        absl::StrJoin(site.holders, ",", [&sites](std::string* out, const HolderTally& holder) {
          absl::StrAppend(out, "{\"how\":\"list.append\",\"count\":", holder.count,
                          ",\"bytes\":", holder.bytes,
                          ",\"frames\":", JsonFrames(sites.Shown(holder.stack_id)), "}");
        })));
  }
  absl::StrAppend(&out, ",\"growing_sites\":", report.sites.size(), ",\"sites\":[",
                  absl::StrJoin(items, ","), "]");
  // Only when the series are sampled: otherwise every iteration is there.
  if (report.sample_stride > 1) absl::StrAppend(&out, ",\"sample_stride\":", report.sample_stride);
  absl::StrAppend(&out, "}");
  return out;
}

// ",\"process_end\":{...}" where `gpumem record` wrote how the program ended; else nothing.
std::string JsonProcessEnd(const TraceFile& trace) {
  if (!trace.process_end()) return "";
  const ProcessEnd& end = *trace.process_end();
  return absl::StrCat(",\"process_end\":{\"pid\":", end.pid(),
                      ",\"exit_status\":", end.exit_status(), ",\"signal\":", end.signal(),
                      ",\"core_dumped\":", end.core_dumped() ? "true" : "false",
                      ",\"description\":", JsonString(DescribeProcessEnd(end)), "}");
}

std::string JsonReport(const std::string& path, const TraceReplay& replay, const Findings& findings,
                       CallSites& sites, const Options& options) {
  const TraceFile& trace = *replay.file;
  const absl::flat_hash_set<uint64_t>& stream_ordered = replay.stream_ordered_stacks;
  const Header& header = trace.header();
  std::vector<std::string> argv;
  for (const std::string& arg : header.command_line()) argv.push_back(JsonString(arg));
  const RecordingEnd& end = trace.end().recording;
  std::string out = absl::StrCat("{\"path\":", JsonString(path), ",\"pid\":", header.pid(),
                                 header.has_rank() ? absl::StrCat(",\"rank\":", header.rank()) : "",
                                 ",\"host\":", JsonString(header.host()), ",\"command_line\":[",
                                 absl::StrJoin(argv, ","), "]",
                                 ",\"clean_exit\":", end.complete() ? "true" : "false");
  if (end.exit_status) absl::StrAppend(&out, ",\"exit_status\":", *end.exit_status);
  if (end.stop_reason != STOP_NONE) {
    absl::StrAppend(
        &out, ",\"recording_stopped\":{\"reason\":", JsonString(RecordingStopName(end.stop_reason)),
        ",\"at_seq\":", end.stopped_at_seq, ",\"events_dropped\":", end.events_dropped,
        ",\"process_exited\":", end.exited ? "true" : "false", "}");
  }
  absl::StrAppend(&out, ",\"damaged\":", trace.end().damaged() ? "true" : "false",
                  ",\"end\":", JsonString(trace.end().Describe()), JsonProcessEnd(trace),
                  ",\"memory_events\":", replay.memory_events,
                  ",\"failed_allocations\":", replay.failed_allocations,
                  ",\"anomalies\":{\"unknown_frees\":", replay.anomalies.unknown_frees,
                  ",\"double_frees\":", replay.anomalies.double_frees,
                  ",\"overlapping_allocations\":", replay.anomalies.overlapping_allocations,
                  ",\"impossible_sizes\":", replay.anomalies.impossible_sizes, "}",
                  ",\"vmm_reserved_peak_bytes\":", replay.reserved_peak_bytes,
                  ",\"imported_mapped_peak_bytes\":", replay.imported_mapped_peak_bytes,
                  ",\"events_not_recorded\":{\"total\":", end.events_not_recorded(),
                  ",\"reentrant\":", end.events_reentrant, ",\"dropped\":", end.events_dropped,
                  ",\"note\":", JsonString(end.UnrecordedNote()), "}");
  const CaptureCounts captures = CountCaptures(trace);
  absl::StrAppend(&out, ",\"cuda_graphs\":{\"stream_captures\":", captures.captures,
                  ",\"failed_captures\":", captures.failed,
                  ",\"allocations\":", replay.for_graph.count,
                  ",\"allocated_bytes\":", replay.for_graph.bytes, "}");
  if (trace.cupti()) {
    absl::StrAppend(&out,
                    ",\"cupti\":{\"state\":", JsonString(CuptiStateName(trace.cupti()->state())),
                    ",\"detail\":", JsonString(trace.cupti()->detail()), "}");
  }
  if (findings.summary) absl::StrAppend(&out, ",\"summary\":", SummaryJson(*findings.summary));
  if (options.kernels) {
    absl::StrAppend(&out, ",\"kernels\":",
                    KernelsJson(*findings.kernels, options.top, [&sites](uint64_t stack_id) {
                      return JsonFrames(sites.Shown(stack_id));
                    }));
  }
  if (options.peak) {
    std::vector<std::string> items;
    for (const PlaceUsage& place : replay.places) {
      items.push_back(absl::StrCat(
          "{", JsonPlace(place.place, trace), ",\"peak_bytes\":", place.peak_bytes,
          ",\"seq\":", place.peak_seq, ",\"time_ns\":",
          place.peak_timestamp_ns >= header.start_time_mono_ns()
              ? place.peak_timestamp_ns - header.start_time_mono_ns()
              : 0,
          ",\"allocations\":", place.allocated.count, ",\"allocated_bytes\":",
          place.allocated.bytes, ",\"call_sites\":", place.peak_sites.size(), ",\"sites\":",
          JsonSites(GroupSites(place.peak_sites, sites, stream_ordered, &replay.graph_stacks),
                    options.top, place.peak_bytes),
          "}"));
    }
    absl::StrAppend(&out, ",\"peak\":[", absl::StrJoin(items, ","), "]");
  }
  if (options.leaks) {
    std::vector<std::string> items;
    for (const PlaceUsage& place : replay.places) {
      if (place.live.count == 0) continue;
      std::vector<Site> live =
          GroupSites(place.live_sites, sites, stream_ordered, &replay.graph_stacks);
      Tally held;
      for (const Site& site : live) {
        if (site.holder != nullptr) held.Add(site.tally);
      }
      items.push_back(absl::StrCat(
          "{", JsonPlace(place.place, trace), ",\"bytes\":", place.live.bytes,
          ",\"count\":", place.live.count, ",\"sites\":", JsonSites(live, options.top, 0),
          ",\"held_bytes\":", held.bytes, ",\"held_count\":", held.count, "}"));
    }
    absl::StrAppend(&out, ",\"leaks\":{\"complete\":", end.complete() ? "true" : "false");
    if (!end.complete()) absl::StrAppend(&out, ",\"note\":", JsonString(NotLeakedNote(end)));
    absl::StrAppend(&out, ",\"places\":[", absl::StrJoin(items, ","), "]}");
  }
  if (findings.oom) {
    absl::StrAppend(&out, ",\"oom\":", JsonOom(*findings.oom, trace, sites, options));
  }
  if (findings.growth) {
    absl::StrAppend(&out, ",\"growth\":", JsonGrowth(*findings.growth, trace, sites, options));
  }
  if (findings.fragmentation) {
    absl::StrAppend(&out, ",\"fragmentation\":", FragmentationJson(*findings.fragmentation));
  }
  absl::StrAppend(&out, "}");
  return out;
}

}  // namespace

int RunReport(const std::vector<std::string>& args) {
  Options options;
  ArgumentWalker walker(args);
  std::string value;
  bool missing = false;
  while (walker.NextOption()) {
    if (walker.Is("--summary")) {
      options.summary = true;
    } else if (walker.TakesValue("--allocator", &value, &missing)) {
      if (missing) {
        return UsageError("report: --allocator needs native, expandable or none", "report");
      }
      if (!ParseSummaryModelChoice(value, &options.allocator)) {
        return UsageError(
            absl::StrCat("report: --allocator: not native, expandable or none: '", value, "'"),
            "report");
      }
      options.allocator_given = true;
      options.summary = true;
    } else if (walker.Is("--peak")) {
      options.peak = true;
    } else if (walker.Is("--leaks")) {
      options.leaks = true;
    } else if (walker.Is("--oom")) {
      options.oom = true;
    } else if (walker.Is("--fragmentation")) {
      options.fragmentation = true;
    } else if (walker.Is("--kernels")) {
      options.kernels = true;
    } else if (walker.Is("--growth")) {
      options.growth = true;
    } else if (walker.TakesValue("--iteration-marker", &value, &missing)) {
      if (missing || value.empty()) {
        return UsageError("report: --iteration-marker needs a function name", "report");
      }
      options.iteration_marker = value;
      options.growth = true;
    } else if (walker.Is("--json")) {
      options.json = true;
    } else if (walker.TakesValue("--group-by", &value, &missing)) {
      if (missing) return UsageError("report: --group-by needs user, python or stack", "report");
      if (!ParseGroupBy(value, &options.group_by)) {
        return UsageError(
            absl::StrCat("report: --group-by: not user, python or stack: '", value, "'"), "report");
      }
    } else if (walker.Is("--python-only")) {
      options.python_only = true;
    } else if (walker.TakesValue("--top", &value, &missing)) {
      if (missing) return UsageError("report: --top needs a number", "report");
      if (!absl::SimpleAtoi(value, &options.top)) {
        return UsageError(absl::StrCat("report: --top: not a number: '", value, "'"), "report");
      }
    } else if (walker.Is("-h") || walker.Is("--help")) {
      WriteOutput(kReportUsage);
      return kExitOk;
    } else {
      return UsageError(absl::StrCat("report: unknown flag '", walker.option(), "'"), "report");
    }
  }
  const std::vector<std::string>& inputs = walker.positional();
  if (inputs.empty()) return UsageError("report: no trace file given", "report");
  if (!options.summary && !options.peak && !options.leaks && !options.oom && !options.growth &&
      !options.fragmentation && !options.kernels) {
    options.peak = options.leaks = true;
  }

  absl::StatusOr<std::vector<std::string>> paths = ExpandTracePaths(inputs);
  if (!paths.ok()) {
    PrintError(paths.status().message());
    return kExitBadInput;
  }
  if (absl::Status status = RefuseOutputOverInputs(kStandardOutput, *paths); !status.ok()) {
    PrintError(status.message());
    return kExitBadInput;
  }
  bool ok = true;
  std::vector<std::string> json_traces;
  // More than one trace: each process's timelines, for the combined view.
  std::vector<ProcessTimeline> timelines;
  for (const std::string& path : *paths) {
    absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
    if (!file.ok()) {
      PrintError(file.status().message());
      ok = false;
      continue;
    }
    // One pass over the file: the replay (peak, leaks) and every analysis asked for.
    Symbolizer symbolizer(file->get());
    CallSites sites(&symbolizer, options.group_by, options.python_only);
    Analyses analyses(**file, options, sites, paths->size() > 1);
    KernelAnalysis kernels(file->get());
    ReportObserver observer(options.peak || options.kernels ? &kernels : nullptr,
                            analyses.wants_launches() ? &analyses : nullptr);
    // Progress on a terminal (report/progress.h), ticked by every memory event.
    const TraceFile* reading = file->get();
    Progress progress(path, reading->file_size());
    const bool wants_events = analyses.wants_events();
    MemoryEventVisitor analyses_events = [&](const MemoryEvent& event) {
      progress.Update(reading->bytes_read());
      if (wants_events) analyses.Add(event);
    };
    const TraceReplay replay =
        ReplayTrace(*std::move(file), analyses_events, observer.active() ? &observer : nullptr,
                    [&analyses](const PacketPosition&, const TracePacket& packet) {
                      if (packet.has_pool_usage()) analyses.AddPoolUsage(packet.pool_usage());
                      if (packet.has_python_holder()) {
                        analyses.AddPythonHolder(packet.python_holder());
                      }
                    });
    progress.Finish();
    Findings findings;
    std::optional<KernelReport> regrouped;
    if (options.peak || options.kernels) {
      findings.kernels = &kernels.report();
      if (options.group_by != GroupBy::kStack && kernels.report().launches > 0) {
        regrouped = RegroupKernels(kernels.report(), sites);
        findings.kernels = &*regrouped;
      }
    }
    if (absl::Status status = analyses.Finish(path, &findings); !status.ok()) {
      PrintError(status.message());
      ok = false;
    }
    if (options.allocator_given && findings.summary &&
        findings.summary->mode != SummaryMode::kTensors) {
      PrintError(absl::StrCat(
          path, ": --allocator needs a tensor-level trace (gpumem record --tensors); ",
          findings.summary->mode == SummaryMode::kSegments
              ? "this one was recorded under PyTorch's caching allocator, whose reserved rows "
                "are measured"
              : "this one has no PyTorch allocator in its stacks"));
      ok = false;
      continue;
    }
    if (options.json) {
      json_traces.push_back(JsonReport(path, replay, findings, sites, options));
    } else {
      std::string text = TextReport(replay, findings, sites, options);
      if (paths->size() > 1) text = absl::StrCat("== ", Printable(path), "\n", text, "\n");
      WriteOutput(text);
    }
    if (replay.file->end().damaged()) {
      PrintError(replay.file->end().ErrorLine(path));
      ok = false;
    }
    if (std::optional<ProcessTimeline> timeline = analyses.TakeTimeline(path, *replay.file)) {
      AddProcessRows(replay, &*timeline);
      timelines.push_back(std::move(*timeline));
    }
  }
  std::string combined;
  if (timelines.size() > 1) {
    const Combined merged = CombineTimelines(timelines);
    combined = options.json ? CombinedJson(merged, timelines) : CombinedText(merged, timelines);
    if (!options.json) WriteOutput(combined);
  }
  if (options.json) {
    const std::string json =
        absl::StrCat("{\"gpumem_report\":1,\"traces\":[", absl::StrJoin(json_traces, ","), "]",
                     combined.empty() ? "" : ",\"combined\":", combined, "}\n");
    WriteOutput(json);
  }
  return ok ? kExitOk : kExitBadInput;
}

}  // namespace gpumem::report
