#include "report/analysis/run_summary.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/format/names.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"

namespace gpumem::report {

ReportRequest RunSummaryRequest(bool several) {
  ReportRequest request;
  request.oom = true;
  request.growth = true;
  request.top = kSummarySites;
  request.timeline = several;
  return request;
}

ProcessBrief BriefOf(const ProcessReport& report) {
  const TraceReplay& replay = report.replay;
  ProcessBrief brief;
  brief.pid = replay.file->header().pid();
  brief.rank = DescribeRank(replay.file->header());
  for (const PlaceUsage& place : replay.places) {
    if (place.peak_bytes > brief.peak_bytes || brief.peak_place.empty()) {
      brief.peak_bytes = place.peak_bytes;
      brief.peak_place = PlaceName(place.place, *replay.file);
    }
    brief.never_freed_bytes = SaturatingAdd(brief.never_freed_bytes, place.live.bytes);
  }
  brief.failed_allocations = replay.failed_allocations;
  brief.failed_calls = replay.failed_calls;
  if (report.findings.oom) {
    brief.framework_ooms = report.findings.oom->framework_ooms.size() +
                           report.findings.oom->framework_ooms_not_analysed;
  }
  const std::optional<GrowthReport>& growth = report.findings.growth;
  if (growth && !growth->sites.empty()) {
    brief.growth_per_iteration = growth->sites.front().bytes_per_iteration;
  }
  return brief;
}

namespace {

// The places with the highest peaks, at most kSummaryPlaces, in the replay's order.
std::vector<const PlaceUsage*> HighestPlaces(const TraceReplay& replay) {
  std::vector<const PlaceUsage*> places;
  for (const PlaceUsage& place : replay.places) places.push_back(&place);
  std::stable_sort(places.begin(), places.end(), [](const PlaceUsage* a, const PlaceUsage* b) {
    return a->peak_bytes > b->peak_bytes;
  });
  if (places.size() > kSummaryPlaces) places.resize(kSummaryPlaces);
  std::sort(places.begin(), places.end());  // back in the replay's order: they point into it
  return places;
}

// Each shown place's peak and its largest call sites.
void AppendPeaks(ProcessReport& report, const std::vector<const PlaceUsage*>& places,
                 std::string* out) {
  const TraceReplay& replay = report.replay;
  const TraceFile& trace = *replay.file;
  if (places.empty()) absl::StrAppend(out, "peak: no memory allocated\n");
  for (const PlaceUsage* place : places) {
    absl::StrAppendFormat(out, "peak, %s: %s at %.3f ms after start\n",
                          PlaceName(place->place, trace), SizeText(place->peak_bytes),
                          MillisecondsSinceStart(place->peak_timestamp_ns, trace));
    AppendSitesText(GroupSites(place->peak_sites, *report.sites, replay.stream_ordered_stacks,
                               &replay.graph_stacks),
                    kSummarySites, place->peak_bytes, report.sites->style(), out);
  }
  if (replay.places.size() > places.size()) {
    absl::StrAppend(out, "(", replay.places.size() - places.size(),
                    " more devices or host memory: in the report)\n");
  }
}

// What each shown place held at the end, by how many call sites, and what allocators and
// libraries hold of it: cached memory is not memory the program lost.
void AppendNeverFreed(ProcessReport& report, const std::vector<const PlaceUsage*>& places,
                      std::string* out) {
  const TraceReplay& replay = report.replay;
  const TraceFile& trace = *replay.file;
  const char* what = trace.end().complete() ? "never freed" : "live when recording stopped";
  bool any = false;
  for (const PlaceUsage* place : places) {
    if (place->live.count == 0) continue;
    any = true;
    const std::vector<Site> sites = GroupSites(place->live_sites, *report.sites,
                                               replay.stream_ordered_stacks, &replay.graph_stacks);
    absl::StrAppend(out, what, ", ", PlaceName(place->place, trace), ": ",
                    SizeText(place->live.bytes), " in ",
                    Plural(place->live.count, "allocation", "allocations"), " from ",
                    Plural(sites.size(), "call site", "call sites"), "\n");
    Tally own;
    const std::vector<std::pair<const MemoryHolder*, Tally>> held = HeldByHolder(sites, &own);
    if (held.empty()) continue;
    absl::StrAppend(out, " ");
    for (const auto& [holder, tally] : held) {
      absl::StrAppend(out, " held by ", holder->name, ": ", FormatBytes(tally.bytes), ";");
    }
    absl::StrAppend(out, " the program's own: ", FormatBytes(own.bytes), "\n");
  }
  if (!any) {
    absl::StrAppend(out, what, ": nothing",
                    trace.end().complete() ? " (everything allocated was freed)\n" : "\n");
  }
}

// The fastest growing call site, if any grows.
void AppendGrowth(ProcessReport& report, std::string* out) {
  const std::optional<GrowthReport>& growth = report.findings.growth;
  if (!growth || growth->sites.empty()) return;
  const GrowingSite& fastest = growth->sites.front();
  absl::StrAppend(out, "growth, ", PlaceName(fastest.place, *report.replay.file), ": +",
                  FormatBytes(RoundToBytes(fastest.bytes_per_iteration)), "/iteration over ",
                  growth->iterations(), " iterations at ", report.sites->Label(fastest.stack_id));
  if (growth->sites.size() > 1) {
    absl::StrAppend(out, " (and ", growth->sites.size() - 1, " more growing call sites)");
  }
  absl::StrAppend(out, "\n");
}

// PyTorch's last out-of-memory error: "PyTorch raised 1 (the last: 1.00 GiB (...) on device 0
// (...), over its cap of 8.00 GiB, at train.py:42 in main)".
void AppendFrameworkOoms(const OomReport& oom, ProcessReport& report, std::string* out) {
  const FrameworkOomError& last = oom.framework_ooms.back();
  const uint64_t raised = oom.framework_ooms.size() + oom.framework_ooms_not_analysed;
  absl::StrAppend(out, "out of memory: PyTorch raised ", raised, " (the last: ",
                  last.requested > 0 ? SizeText(last.requested) : std::string("a request"),
                  last.requested_exact || last.requested == 0 ? "" : " as its message says", " on ",
                  PlaceName(last.failure.place, *report.replay.file));
  if (last.capped()) absl::StrAppend(out, ", over its cap of ", FormatBytes(last.limit));
  absl::StrAppend(out, ", at ", report.sites->Label(last.failure.request.stack_id()), ")\n");
}

// Out of memory (PyTorch's errors, else the driver's failed allocations, the first named), and
// the calls that failed otherwise.
void AppendFailures(ProcessReport& report, std::string* out) {
  const TraceReplay& replay = report.replay;
  const std::optional<OomReport>& oom = report.findings.oom;
  if (oom && !oom->framework_ooms.empty()) {
    AppendFrameworkOoms(*oom, report, out);
  } else if (replay.failed_allocations == 0) {
    absl::StrAppend(out, "out of memory: never\n");
  } else {
    absl::StrAppend(out, "out of memory: ",
                    Plural(replay.failed_allocations, "failed allocation", "failed allocations"));
    if (oom && !oom->failures.empty()) {
      const OomFailure& first = oom->failures.front();
      absl::StrAppendFormat(out, ", the first a %s of %s on %s, at %.3f ms after start",
                            ApiName(first.request.api()), SizeText(first.request.size()),
                            PlaceName(first.place, *replay.file),
                            MillisecondsSinceStart(first.request.timestamp_ns(), *replay.file));
    }
    absl::StrAppend(out, "\n");
  }
  if (replay.failed_calls > 0) {
    absl::StrAppend(out, "failed calls (not out of memory): ", replay.failed_calls, "\n");
  }
}

}  // namespace

std::string ProcessSummaryText(ProcessReport& report) {
  const TraceFile& trace = *report.replay.file;
  std::string out;
  if (!trace.end().complete() || trace.end().damaged()) {
    absl::StrAppend(&out, "note: ", trace.end().Describe(), "\n");
  }
  const std::vector<const PlaceUsage*> places = HighestPlaces(report.replay);
  AppendPeaks(report, places, &out);
  AppendNeverFreed(report, places, &out);
  AppendGrowth(report, &out);
  AppendFailures(report, &out);
  return out;
}

namespace {

// "pid 4242 (rank 0 of 2): peak 56.00 MiB on device 0 (...), never freed 40.00 MiB, ..."
std::string BriefLine(const ProcessBrief& brief) {
  std::string line = absl::StrCat("  pid ", brief.pid, brief.rank, ": ");
  if (brief.peak_place.empty()) return absl::StrCat(line, "no memory allocated\n");
  absl::StrAppend(&line, "peak ", FormatBytes(brief.peak_bytes), " on ",
                  Printable(brief.peak_place), ", never freed ",
                  FormatBytes(brief.never_freed_bytes));
  if (brief.growth_per_iteration > 0) {
    absl::StrAppend(&line, ", growing +", FormatBytes(RoundToBytes(brief.growth_per_iteration)),
                    "/iteration");
  }
  if (brief.framework_ooms > 0) {
    absl::StrAppend(&line, ", ",
                    Plural(brief.framework_ooms, "PyTorch out-of-memory error",
                           "PyTorch out-of-memory errors"));
  } else if (brief.failed_allocations > 0) {
    absl::StrAppend(&line, ", ",
                    Plural(brief.failed_allocations, "failed allocation", "failed allocations"));
  }
  return absl::StrCat(line, "\n");
}

// Per host and device, the highest sum of the processes' live bytes at once (merged on every core).
void AppendCombined(const std::vector<ProcessTimeline>& timelines, std::string* out) {
  const Combined combined =
      CombineTimelines(timelines, std::max(1u, std::thread::hardware_concurrency()));
  for (const CombinedHost& host : combined.hosts) {
    for (const CombinedPlace& place : host.places) {
      size_t holding = 0;
      for (const CombinedShare& share : place.shares) holding += share.bytes > 0;
      absl::StrAppend(out, "combined peak, ", CombinedPlaceName(place.place, host, timelines),
                      combined.per_host ? absl::StrCat(" of ", Printable(host.host)) : "", ": ",
                      SizeText(place.peak_bytes), ", ", Plural(holding, "process", "processes"),
                      " holding memory then\n");
    }
  }
}

}  // namespace

std::string ProcessesSummaryText(std::vector<ProcessBrief> briefs,
                                 const std::vector<ProcessTimeline>& timelines) {
  std::stable_sort(briefs.begin(), briefs.end(), [](const ProcessBrief& a, const ProcessBrief& b) {
    return a.peak_bytes > b.peak_bytes;
  });
  std::string out = absl::StrCat(briefs.size(), " processes, the highest peak first:\n");
  const size_t shown = std::min(briefs.size(), kSummaryProcesses);
  for (size_t i = 0; i < shown; ++i) absl::StrAppend(&out, BriefLine(briefs[i]));
  if (briefs.size() > shown) {
    uint64_t never_freed = 0;
    uint64_t failed = 0;
    for (size_t i = shown; i < briefs.size(); ++i) {
      never_freed = SaturatingAdd(never_freed, briefs[i].never_freed_bytes);
      failed += briefs[i].failed_allocations;
    }
    absl::StrAppend(&out, "  and ", Plural(briefs.size() - shown, "more process", "more processes"),
                    ": peaks up to ", FormatBytes(briefs[shown].peak_bytes), ", never freed ",
                    FormatBytes(never_freed), " in all",
                    failed > 0 ? absl::StrCat(", ", failed, " failed allocations") : "", "\n");
  }
  AppendCombined(timelines, &out);
  return out;
}

}  // namespace gpumem::report
