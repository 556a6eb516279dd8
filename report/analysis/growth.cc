#include "report/analysis/growth.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/analysis/kernels.h"
#include "report/format/json.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/stacks/user_frames.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {
namespace {

// Keeps the elements at even indexes: the samples left when the stride doubles.
template <typename T>
void KeepEveryOther(std::vector<T>& values) {
  for (size_t i = 0; 2 * i < values.size(); ++i) values[i] = values[2 * i];
  values.resize((values.size() + 1) / 2);
}

// The site that occurs once per iteration, by the rule in growth.h, among `sites` whose
// occurrences are numbered 0..total-1.
template <typename Site, typename Seen>
std::optional<Site> OncePerIteration(const absl::flat_hash_map<Site, Seen>& sites, uint64_t total) {
  // Sites that recur through the run: set-up is bunched at the start.
  auto recurring = [total](const Seen& seen) {
    return seen.count >= kMinMarkerOccurrences && 2 * (seen.last - seen.first) >= total;
  };
  struct Count {
    uint64_t sites = 0;  // sites that occur exactly this often
    uint64_t first = 0;  // the earliest first occurrence among them
    Site site{};
  };
  std::map<uint64_t, Count> by_count;
  for (const auto& [site, seen] : sites) {
    if (!recurring(seen)) continue;
    auto [it, inserted] = by_count.try_emplace(seen.count, Count{0, seen.first, site});
    ++it->second.sites;
    if (seen.first < it->second.first) {
      it->second.first = seen.first;
      it->second.site = site;
    }
  }
  // A count at least two sites have exactly is a candidate; the one whose multiples the most
  // recurring sites have wins (ties: the larger count).
  uint64_t best_count = 0;
  uint64_t best_multiples = 0;
  for (const auto& [count, group] : by_count) {  // ascending: ties go to the larger count
    if (group.sites < 2) continue;
    uint64_t multiples = 0;
    for (const auto& [other, other_group] : by_count) {
      if (other % count == 0) multiples += other_group.sites;
    }
    if (multiples >= best_multiples) {
      best_multiples = multiples;
      best_count = count;
    }
  }
  if (best_count == 0) return std::nullopt;
  return by_count.at(best_count).site;
}

}  // namespace

void MarkerCounter::Add(const MemoryEvent& event) {
  if (event.action() != ALLOC) return;
  Seen& seen = by_stack_.try_emplace(event.stack_id(), Seen{0, allocations_, 0}).first->second;
  ++seen.count;
  seen.last = allocations_;
  ++allocations_;
}

std::optional<uint64_t> MarkerCounter::MostFrequent(const CallSiteOf& call_site_of) const {
  absl::flat_hash_map<uint64_t, Seen> by_site;
  for (const auto& [stack_id, seen] : by_stack_) {
    auto [it, inserted] =
        by_site.try_emplace(call_site_of ? call_site_of(stack_id) : stack_id, seen);
    if (inserted) continue;
    it->second.count += seen.count;
    it->second.first = std::min(it->second.first, seen.first);
    it->second.last = std::max(it->second.last, seen.last);
  }
  if (std::optional<uint64_t> once = OncePerIteration(by_site, allocations_)) return once;
  std::optional<uint64_t> marker;
  const Seen* best = nullptr;
  for (const auto& [site, seen] : by_site) {
    if (seen.count < kMinMarkerOccurrences) continue;
    if (best == nullptr || seen.count > best->count ||
        (seen.count == best->count && seen.first < best->first)) {
      best = &seen;
      marker = site;
    }
  }
  return marker;
}

void MarkerCounter::AddLaunch(const LaunchEvent& launch) {
  const LaunchSite site{launch.kernel_id(), launch.stack_id()};
  Seen& seen = by_launch_site_.try_emplace(site, Seen{0, launches_, 0}).first->second;
  ++seen.count;
  seen.last = launches_;
  ++launches_;
}

std::optional<LaunchSite> MarkerCounter::LaunchMarker() const {
  return OncePerIteration(by_launch_site_, launches_);
}

GrowthAnalysis::GrowthAnalysis(GrowthOptions options, LaunchSite marker)
    : options_(std::move(options)), launch_marker_(marker) {
  report_.rule = GrowthReport::Rule::kLaunches;
  report_.found = true;
  report_.marker_stack_id = marker.stack_id;
  report_.marker_kernel_id = marker.kernel_id;
}

void GrowthAnalysis::AddLaunch(const LaunchEvent& launch) {
  if (launch_marker_ && LaunchSite{launch.kernel_id(), launch.stack_id()} == *launch_marker_) {
    StartIteration(launch.seq());
  }
}

GrowthAnalysis::GrowthAnalysis(GrowthOptions options, std::optional<uint64_t> marker)
    : options_(std::move(options)) {
  report_.rule =
      options_.is_marker ? GrowthReport::Rule::kMarker : GrowthReport::Rule::kMostFrequent;
  if (!options_.is_marker && marker) {
    report_.found = true;
    report_.marker_stack_id = *marker;
  }
}

uint64_t GrowthAnalysis::SiteOf(uint64_t stack_id) const {
  return options_.call_site_of ? options_.call_site_of(stack_id) : stack_id;
}

namespace {

// What tells one allocation point from another when iterations are detected.
const CallSiteOf& MarkerSites(const GrowthOptions& options) {
  return options.marker_site_of ? options.marker_site_of : options.call_site_of;
}

}  // namespace

uint64_t GrowthAnalysis::MarkerSiteOf(uint64_t stack_id) const {
  const CallSiteOf& marker_site_of = MarkerSites(options_);
  return marker_site_of ? marker_site_of(stack_id) : stack_id;
}

void GrowthAnalysis::Add(const MemoryEventFields& event) {
  if (event.action == ALLOC) {
    if (!report_.found && options_.is_marker && options_.is_marker(event.stack_id)) {
      report_.found = true;
      report_.marker_stack_id = MarkerSiteOf(event.stack_id);
    }
    if (report_.found && !launch_marker_ &&
        MarkerSiteOf(event.stack_id) == report_.marker_stack_id) {
      StartIteration(event.seq);
    }
  }
  replay_.Add(event);
}

void GrowthAnalysis::LiveByStack::AllocationStarted(const LiveAllocation& live) {
  Live& tally = by_key_[{live.place, live.stack_id}];
  ++tally.count;
  tally.bytes += live.size;
}

void GrowthAnalysis::LiveByStack::AllocationEnded(const LiveAllocation& live) {
  Live& tally = by_key_[{live.place, live.stack_id}];
  --tally.count;
  tally.bytes -= live.size;
}

void GrowthAnalysis::StartIteration(uint64_t seq) {
  if (report_.iteration_count > 0) EndIteration();  // the previous one ends here
  // This iteration is sampled when on the stride; past kMaxGrowthSamples the stride doubles.
  const size_t index = report_.iteration_count++;
  if (index % report_.sample_stride == 0 && index / report_.sample_stride == kMaxGrowthSamples) {
    report_.sample_stride *= 2;
    KeepEveryOther(report_.iteration_seqs);
    for (auto& [key, site] : sites_) KeepEveryOther(site.samples);
  }
  if (index % report_.sample_stride == 0) report_.iteration_seqs.push_back(seq);
  last_iteration_seq_ = seq;
}

void GrowthAnalysis::EndIteration() {
  const size_t index = report_.iteration_count - 1;
  const bool sampled = index % report_.sample_stride == 0;
  const size_t sample = index / report_.sample_stride;
  absl::flat_hash_map<Key, Tally> snapshot;
  live_by_stack_.ForEach([&](int32_t place, uint64_t stack_id, const Tally& tally) {
    snapshot[{place, SiteOf(stack_id)}].Add(tally);
  });
  for (auto& [key, site] : sites_) {  // the iteration before this one, for Finish()
    site.before_previous = site.previous;
    site.rises_before_previous = site.rises;
  }
  for (const auto& [key, tally] : snapshot) {
    Site& site = sites_[key];  // new: nothing was live there before
    if (index == 0) site.first = tally.bytes;
    if (index > 0 && tally.bytes > site.previous.bytes) ++site.rises;
    site.previous = tally;
    if (sampled) {
      site.samples.resize(sample);  // sampled iterations it missed held nothing
      site.samples.push_back(tally);
    }
  }
  for (const auto& [key, tally] : last_snapshot_) {
    if (!snapshot.contains(key)) sites_[key].previous = {};  // fell to nothing
  }
  last_snapshot_ = std::move(snapshot);
}

GrowthReport GrowthAnalysis::Finish() {
  if (report_.iteration_count == 0) return report_;
  EndIteration();  // the last iteration ends with the trace
  const size_t iterations = report_.iteration_count;
  const bool last_sampled = (iterations - 1) % report_.sample_stride == 0;
  const size_t samples = report_.iteration_seqs.size() + (last_sampled ? 0 : 1);
  if (!last_sampled) report_.iteration_seqs.push_back(last_iteration_seq_);
  if (iterations < 2) return report_;

  for (auto& [key, site] : sites_) {
    // Fell in the last iteration, which runs into teardown: judged on the complete ones.
    const bool fell_at_end = iterations >= 3 && site.previous.bytes < site.before_previous.bytes;
    const size_t judged = fell_at_end ? iterations - 1 : iterations;
    const size_t boundaries = judged - 1;
    const uint64_t first = site.first;
    const uint64_t last = fell_at_end ? site.before_previous.bytes : site.previous.bytes;
    const size_t rises = fell_at_end ? site.rises_before_previous : site.rises;
    if (last <= first || static_cast<double>(rises) < kGrowingShare * boundaries) continue;
    GrowingSite& growing = report_.sites.emplace_back();
    growing.place = key.first;
    growing.stack_id = key.second;
    growing.rises = rises;
    growing.judged_iterations = judged;
    growing.bytes_per_iteration =
        static_cast<double>(last - first) / static_cast<double>(boundaries);
    site.samples.resize(last_sampled ? samples : samples - 1);
    if (!last_sampled) site.samples.push_back(site.previous);
    for (const Tally& tally : site.samples) {
      growing.live_bytes.push_back(tally.bytes);
      growing.live_count.push_back(tally.count);
    }
  }
  std::stable_sort(report_.sites.begin(), report_.sites.end(),
                   [](const GrowingSite& a, const GrowingSite& b) {
                     return a.bytes_per_iteration > b.bytes_per_iteration;
                   });
  return report_;
}

GrowthReport AnalyzeGrowth(const std::vector<MemoryEvent>& events, const GrowthOptions& options) {
  std::optional<uint64_t> marker;
  if (!options.is_marker) {
    MarkerCounter counter;
    for (const MemoryEvent& event : events) counter.Add(event);
    marker = counter.MostFrequent(MarkerSites(options));
  }
  GrowthAnalysis analysis(options, marker);
  for (const MemoryEvent& event : events) analysis.Add(event);
  return analysis.Finish();
}

// ---- text and JSON ----

namespace {

std::string GrowthRuleText(const GrowthReport& report, const std::string& iteration_marker) {
  if (report.rule == GrowthReport::Rule::kMarker) {
    return absl::StrCat("--iteration-marker ", Printable(iteration_marker),
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

}  // namespace

void AppendGrowthText(const GrowthReport& report, const TraceFile& trace, CallSites& sites,
                      size_t top, const std::string& iteration_marker, std::string* out) {
  if (!report.found) {
    absl::StrAppend(
        out, "\ngrowth: no iterations found: no allocation call site is ",
        report.rule == GrowthReport::Rule::kMarker
            ? absl::StrCat("in a function containing '", Printable(iteration_marker), "'")
            : absl::StrCat("used at least ", kMinMarkerOccurrences, " times"),
        "\n");
    return;
  }
  absl::StrAppend(
      out, "\ngrowth: ", Plural(report.iterations(), "iteration", "iterations"),
      report.rule == GrowthReport::Rule::kLaunches
          ? absl::StrCat(", each starting at a launch of ",
                         ShortKernelName(KernelLabel(&trace, report.marker_kernel_id)), " from ")
          : std::string(", each starting at an allocation of "),
      GrowthRuleText(report, iteration_marker), ":\n");
  sites.AppendStackText(report.marker_stack_id, out);
  if (report.iterations() < 2) {
    absl::StrAppend(out, "growth: one iteration: nothing to compare\n");
    return;
  }
  if (report.sites.empty()) {
    absl::StrAppend(out, "growth: no call site's live bytes grow from iteration to iteration\n");
    return;
  }
  const size_t boundaries = report.iterations() - 1;
  const size_t shown = top == 0 ? report.sites.size() : std::min(top, report.sites.size());
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
    sites.AppendStackText(site.stack_id, out);
    for (const HolderTally& holder : site.holders) {
      absl::StrAppend(out, "    kept by Python references (list.append) to ", holder.count,
                      " of its allocations, ", FormatBytes(holder.bytes), ", taken at:\n");
      sites.AppendStackText(holder.stack_id, out, "          ");
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

std::string JsonGrowth(const GrowthReport& report, const TraceFile& trace, CallSites& sites,
                       size_t top, const std::string& iteration_marker) {
  const char* rule = report.rule == GrowthReport::Rule::kMarker     ? "\"iteration_marker\""
                     : report.rule == GrowthReport::Rule::kLaunches ? "\"launch_site\""
                                                                    : "\"most_frequent_call_site\"";
  std::string out = absl::StrCat("{\"rule\":", rule);
  if (report.rule == GrowthReport::Rule::kLaunches) {
    absl::StrAppend(
        &out, ",\"marker_kernel\":", JsonString(KernelLabel(&trace, report.marker_kernel_id)));
  }
  if (report.rule == GrowthReport::Rule::kMarker) {
    absl::StrAppend(&out, ",\"marker\":", JsonString(iteration_marker));
  }
  absl::StrAppend(&out, ",\"found\":", report.found ? "true" : "false",
                  ",\"iterations\":", report.iterations(), ",\"iteration_seqs\":[",
                  absl::StrJoin(report.iteration_seqs, ","), "]");
  if (report.found) {
    absl::StrAppend(&out, ",\"marker_frames\":", JsonFrames(sites.Shown(report.marker_stack_id)));
  }
  const size_t shown = top == 0 ? report.sites.size() : std::min(top, report.sites.size());
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

}  // namespace gpumem::report
