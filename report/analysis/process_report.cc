#include "report/analysis/process_report.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/format/json.h"
#include "report/format/names.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/replay/event_counts.h"
#include "report/stacks/python_holders.h"
#include "report/trace/event_stream.h"
#include "report/trace/progress.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

namespace {

// The analyses asked for, fed one trace's memory events in the replay's own pass (ReplayTrace's
// `also`): one pass over the file for all of them, and memory bounded by their live sets, not by
// the length of the trace. Only growth without --iteration-marker reads the file a second time:
// its marker, the most frequent allocation call site, is known only after the first pass.
class Analyses {
 public:
  // `trace`, `sites` and `request` must outlive the analyses.
  Analyses(const TraceFile& trace, const ReportRequest& request, CallSites& sites)
      : trace_(trace), request_(request), sites_(sites) {
    if (request.summary) summary_.emplace(trace, request.allocator);
    if (request.oom) oom_.emplace(CallSiteMapping(), &trace);
    if (request.fragmentation) fragmentation_.emplace(trace);
    if (request.growth) {
      if (request.iteration_marker.empty()) {
        marker_counter_.emplace();
      } else {
        growth_.emplace(GrowthOptionsFor());
      }
    }
    if (request.timeline) timeline_.emplace();
  }

  // Before the pass: the OOM analysis reads what was live from the pass's own replay (which adds
  // each event right after the analyses saw it) instead of replaying every event a second time.
  void ShareReplay(const Replay& replay) {
    if (oom_) oom_.emplace(CallSiteMapping(), &trace_, &replay);
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
    return summary_ || oom_ || fragmentation_ || growth_ || marker_counter_;
  }
  void Add(const MemoryEvent& event) {
    if (growth_ || marker_counter_) holders_.AddMemory(event);
    if (summary_) summary_->Add(event);
    if (oom_) oom_->Add(event);
    if (fragmentation_) fragmentation_->Add(event);
    if (growth_) growth_->Add(event);
    if (marker_counter_) marker_counter_->Add(event);
  }
  // The timeline (when asked for) takes its events from the replay (ReportObserver), which has
  // the live bytes already.
  TimelineBuilder* timeline() { return timeline_ ? &*timeline_ : nullptr; }

  // Once the replay's pass is over (so the trace's tables are complete). Fails only when growth's
  // second pass cannot open the file again; the other findings are there all the same.
  absl::Status Finish(const std::string& path, Findings* findings) {
    if (summary_) findings->summary = summary_->Finish();
    if (oom_) findings->oom = oom_->Finish();
    if (fragmentation_) findings->fragmentation = fragmentation_->Finish();
    if (marker_counter_) {
      // An allocation call site marks the iterations; failing that, a launch site does.
      const std::optional<uint64_t> marker = marker_counter_->MostFrequent(MarkerSiteMapping());
      const std::optional<LaunchSite> launch_marker =
          marker ? std::nullopt : marker_counter_->LaunchMarker();
      if (launch_marker) {
        growth_.emplace(GrowthOptionsFor(), *launch_marker);
      } else {
        growth_.emplace(GrowthOptionsFor(), marker);
      }
      absl::StatusOr<std::unique_ptr<TraceFile>> again = TraceFile::Open(path);
      if (!again.ok()) return again.status();
      StreamMemoryEventFieldsBySeq(
          **again, [this](const MemoryEventFields& event) { growth_->Add(event); }, kReorderWindow,
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
  CallSiteOf MarkerSiteMapping() const {
    return [&sites = sites_](uint64_t stack_id) { return sites.StackSiteOf(stack_id); };
  }
  GrowthOptions GrowthOptionsFor() const {
    GrowthOptions growth;
    growth.call_site_of = CallSiteMapping();
    growth.marker_site_of = MarkerSiteMapping();
    if (!request_.iteration_marker.empty()) {
      growth.is_marker = [&sites = sites_, &marker = request_.iteration_marker](uint64_t stack_id) {
        return sites.AnyFunctionContains(stack_id, marker);
      };
    }
    return growth;
  }

  const TraceFile& trace_;
  const ReportRequest& request_;
  CallSites& sites_;
  std::optional<SummaryAnalysis> summary_;
  std::optional<OomAnalysis> oom_;
  std::optional<FragmentationAnalysis> fragmentation_;
  std::optional<GrowthAnalysis> growth_;
  std::optional<MarkerCounter> marker_counter_;  // growth without a marker: its first pass
  PythonHolders holders_;                        // with growth
  std::optional<TimelineBuilder> timeline_;
};

// What follows the replay event by event: the kernel analysis (--peak, --kernels), the launches
// growth may take its iterations from, the timeline of the combined view, and the progress shown
// on a terminal. Any may be null.
class ReportObserver final : public ReplayObserver {
 public:
  ReportObserver(KernelAnalysis* kernels, Analyses* analyses, TimelineBuilder* timeline,
                 Progress* progress, const TraceFile* reading)
      : kernels_(kernels),
        analyses_(analyses),
        timeline_(timeline),
        progress_(progress),
        reading_(reading) {}
  // Without anything to follow the replay, it is not asked to hand events on: launches then take
  // no place in the reorder buffer.
  bool active() const {
    return kernels_ != nullptr || analyses_ != nullptr || timeline_ != nullptr ||
           progress_->enabled();
  }

  void AfterMemory(const MemoryEventFields& event, const Replay& replay) override {
    progress_->Update(reading_->bytes_read());
    if (kernels_ != nullptr) kernels_->AfterMemory(event, replay);
    if (timeline_ != nullptr) timeline_->AddReplayed(event, replay);
  }
  void AddLaunch(const LaunchEvent& launch, const Replay& replay) override {
    if (kernels_ != nullptr) kernels_->AddLaunch(launch, replay);
    if (analyses_ != nullptr) analyses_->AddLaunch(launch);
  }
  void AllocationStarted(const LiveAllocation& live) override {
    if (kernels_ != nullptr) kernels_->AllocationStarted(live);
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
  TimelineBuilder* timeline_;
  Progress* progress_;
  const TraceFile* reading_;  // how far it has been read, for the progress
};

}  // namespace

absl::StatusOr<ProcessReport> AnalyzeProcess(const std::string& path,
                                             const ReportRequest& request) {
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  if (!file.ok()) return file.status();
  ProcessReport report;
  report.symbolizer = std::make_unique<Symbolizer>(file->get());
  report.sites = std::make_unique<CallSites>(report.symbolizer.get(), request.group_by,
                                             request.python_only, request.stacks);
  CreditAutogradEngineStacks(report.symbolizer.get(), file->get());
  Analyses analyses(**file, request, *report.sites);
  KernelAnalysis kernels(file->get());
  const bool wants_kernels = request.peak || request.kernels;
  // Progress on a terminal (report/trace/progress.h), ticked by every memory event.
  const TraceFile* reading = file->get();
  Progress progress(path, reading->file_size(), request.progress ? stderr : nullptr);
  ReportObserver observer(wants_kernels ? &kernels : nullptr,
                          analyses.wants_launches() ? &analyses : nullptr, analyses.timeline(),
                          &progress, reading);
  Replay replay(observer.active() ? &observer : nullptr);
  analyses.ShareReplay(replay);
  // The analyses take MemoryEvents: built for them only when one is asked for.
  MemoryEventVisitor analyses_events;
  if (analyses.wants_events()) {
    analyses_events = [&analyses](const MemoryEvent& event) { analyses.Add(event); };
  }
  report.replay = ReplayTrace(*std::move(file), replay, analyses_events,
                              [&analyses](const PacketPosition&, const TracePacket& packet) {
                                if (packet.has_pool_usage())
                                  analyses.AddPoolUsage(packet.pool_usage());
                                if (packet.has_python_holder())
                                  analyses.AddPythonHolder(packet.python_holder());
                              });
  progress.Finish();
  report.sites->SetStreamOrderedStacks(report.replay.stream_ordered_stacks);
  if (wants_kernels) {
    const bool regroup = request.group_by != GroupBy::kStack && kernels.report().launches > 0;
    report.findings.kernels =
        regroup ? RegroupKernels(kernels.report(), *report.sites) : kernels.TakeReport();
  }
  report.second_pass = analyses.Finish(path, &report.findings);
  report.timeline = analyses.TakeTimeline(path, *report.replay.file);
  if (report.timeline) AddProcessRows(report.replay, &*report.timeline);
  return report;
}

std::vector<std::pair<const MemoryHolder*, Tally>> HeldByHolder(const std::vector<Site>& sites,
                                                                Tally* own) {
  std::vector<std::pair<const MemoryHolder*, Tally>> held;  // in order of first appearance
  for (const Site& site : sites) {
    if (site.holder == nullptr) {
      own->Add(site.tally);
      continue;
    }
    auto it = std::find_if(held.begin(), held.end(),
                           [&](const auto& entry) { return entry.first == site.holder; });
    if (it == held.end()) it = held.insert(held.end(), {site.holder, Tally{}});
    it->second.Add(site.tally);
  }
  return held;
}

// ---- text ----

namespace {

// What the leaks of a trace that does not hold the whole run are.
std::string NotLeakedNote(const RecordingEnd& end) {
  return end.Describe() + ": what was live when it stopped, not necessarily leaked";
}

// Under a place's leaks: how much of it allocators and libraries hold, by holder, and the rest.
void AppendHeldText(const std::vector<Site>& sites, std::string* out) {
  Tally own;
  const std::vector<std::pair<const MemoryHolder*, Tally>> held = HeldByHolder(sites, &own);
  if (held.empty()) return;
  for (const auto& [holder, tally] : held) {
    absl::StrAppend(out, "  held by ", holder->name, ": ", FormatBytes(tally.bytes), " in ",
                    Plural(tally.count, "allocation", "allocations"), " (", holder->explanation,
                    ")\n");
  }
  absl::StrAppend(out, "  not held by an allocator or library: ", FormatBytes(own.bytes), " in ",
                  Plural(own.count, "allocation", "allocations"), "\n");
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

}  // namespace

namespace {

// The process, how it ended and what the trace holds: the lines before the sections.
void AppendProcessText(const TraceReplay& replay, std::string* out) {
  const TraceFile& trace = *replay.file;
  const Header& header = trace.header();
  absl::StrAppend(out, "process: pid ", header.pid(), DescribeRank(header), " on ",
                  Printable(header.host()), ": ",
                  Printable(absl::StrJoin(header.command_line(), " ")), "\n");
  absl::StrAppend(out, "end: ", trace.end().Describe(), "\n");
  if (const std::string note = trace.end().recording.UnrecordedNote(); !note.empty()) {
    absl::StrAppend(out, "note: ", note, "\n");
  }
  if (trace.process_end()) {
    absl::StrAppend(out, "exit: ", DescribeProcessEnd(*trace.process_end()), "\n");
  }
  absl::StrAppend(out, "memory events: ", replay.memory_events,
                  "; failed allocations: ", replay.failed_allocations);
  if (replay.failed_calls > 0) {
    absl::StrAppend(out, "; failed calls (not out of memory): ", replay.failed_calls);
  }
  if (!trace.framework_ooms().empty()) {
    absl::StrAppend(out, "; PyTorch out-of-memory errors: ", CountFrameworkOoms(trace));
  }
  absl::StrAppend(out, "; anomalies: ", DescribeAnomalies(replay.anomalies), "\n");
  if (trace.end().lost_events_midway()) {
    absl::StrAppend(out,
                    "note: events were lost to the damage; what they allocated or freed is missing "
                    "from every section (anomalies and leaks may come from that)\n");
  }
  if (replay.reserved_peak_bytes > 0) {
    absl::StrAppend(out, "VMM address space reserved (not memory use): at most ",
                    FormatBytes(replay.reserved_peak_bytes), "\n");
  }
  AppendCudaGraphsText(replay, out);
  if (replay.imported_mapped_peak_bytes > 0) {
    absl::StrAppend(out,
                    "mapped from other processes (their memory, counted in their traces): at most ",
                    FormatBytes(replay.imported_mapped_peak_bytes), "\n");
  }
  // What CUPTI's absence means for this trace (another tool held it, or it was not found).
  if (trace.cupti() && trace.cupti()->state() != CUPTI_ACTIVE) {
    absl::StrAppend(out, "CUPTI: ", CuptiStateName(trace.cupti()->state()), ": ",
                    Printable(trace.cupti()->detail()), "\n");
  }
}

// Each place's peak: when, how high, and what was live then by call site.
void AppendPeakText(ProcessReport& report, size_t top, std::string* out) {
  const TraceReplay& replay = report.replay;
  const TraceFile& trace = *replay.file;
  if (replay.places.empty()) absl::StrAppend(out, "\npeak: no memory allocated\n");
  for (const PlaceUsage& place : replay.places) {
    absl::StrAppendFormat(out, "\npeak, %s: %s (%d bytes) at seq %d, %.3f ms after start\n",
                          PlaceName(place.place, trace), FormatBytes(place.peak_bytes),
                          place.peak_bytes, place.peak_seq,
                          MillisecondsSinceStart(place.peak_timestamp_ns, trace));
    AppendSitesText(GroupSites(place.peak_sites, *report.sites, replay.stream_ordered_stacks,
                               &replay.graph_stacks),
                    top, place.peak_bytes, report.sites->style(), out);
    AppendKernelsAtPeakText(report.findings.kernels, place.place, top, out);
  }
}

// What was live at the end, per place, by holder and by call site.
void AppendLeaksText(ProcessReport& report, size_t top, std::string* out) {
  const TraceReplay& replay = report.replay;
  const TraceFile& trace = *replay.file;
  const bool clean = trace.end().complete();
  bool any = false;
  if (!clean) absl::StrAppend(out, "\nleaks: ", NotLeakedNote(trace.end().recording), "\n");
  for (const PlaceUsage& place : replay.places) {
    if (place.live.count == 0) continue;
    any = true;
    absl::StrAppend(out, "\nleaks, ", PlaceName(place.place, trace), ": ",
                    Plural(place.live.count, "allocation", "allocations"), ", ",
                    FormatBytes(place.live.bytes), " (", place.live.bytes, " bytes) ",
                    clean ? "never freed" : "live when it stopped", "\n");
    std::vector<Site> live = GroupSites(place.live_sites, *report.sites,
                                        replay.stream_ordered_stacks, &replay.graph_stacks);
    AppendHeldText(live, out);
    AppendSitesText(live, top, 0, report.sites->style(), out);
  }
  if (!any) absl::StrAppend(out, "\nleaks: none: everything allocated was freed\n");
}

}  // namespace

std::string ProcessReportText(ProcessReport& report, const ReportRequest& request) {
  const Findings& findings = report.findings;
  CallSites& sites = *report.sites;
  const TraceFile& trace = *report.replay.file;
  std::string out;
  AppendProcessText(report.replay, &out);
  if (findings.summary) absl::StrAppend(&out, "\n", SummaryText(*findings.summary));
  if (request.peak) AppendPeakText(report, request.top, &out);
  if (request.leaks) AppendLeaksText(report, request.top, &out);
  if (findings.oom) AppendOomText(*findings.oom, trace, sites, request.top, &out);
  if (findings.growth) {
    AppendGrowthText(*findings.growth, trace, sites, request.top, request.iteration_marker, &out);
  }
  if (findings.fragmentation) absl::StrAppend(&out, FragmentationText(*findings.fragmentation));
  if (request.kernels) {
    absl::StrAppend(&out, "\n",
                    KernelsText(*findings.kernels, trace, request.top, [&sites](uint64_t stack_id) {
                      return sites.LaunchLines(stack_id);
                    }));
  }
  return out;
}

// ---- JSON ----

namespace {

// ",\"process_end\":{...}" where `gpumem record` wrote how the program ended; else nothing.
std::string JsonProcessEnd(const TraceFile& trace) {
  if (!trace.process_end()) return "";
  const ProcessEnd& end = *trace.process_end();
  return absl::StrCat(",\"process_end\":{\"pid\":", end.pid(),
                      ",\"exit_status\":", end.exit_status(), ",\"signal\":", end.signal(),
                      ",\"core_dumped\":", end.core_dumped() ? "true" : "false",
                      ",\"description\":", JsonString(DescribeProcessEnd(end)), "}");
}

}  // namespace

namespace {

// The process, how it ended and what the trace holds: the members before the sections.
std::string JsonProcess(const std::string& path, const TraceReplay& replay) {
  const TraceFile& trace = *replay.file;
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
                  ",\"failed_calls\":", replay.failed_calls,
                  ",\"framework_ooms\":", CountFrameworkOoms(trace),
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
  return out;
}

// ",\"peak\":[...]": each place's peak and what was live then.
std::string JsonPeak(ProcessReport& report, size_t top) {
  const TraceReplay& replay = report.replay;
  const TraceFile& trace = *replay.file;
  const uint64_t start = trace.header().start_time_mono_ns();
  std::vector<std::string> items;
  for (const PlaceUsage& place : replay.places) {
    items.push_back(absl::StrCat(
        "{", JsonPlace(place.place, trace), ",\"peak_bytes\":", place.peak_bytes,
        ",\"seq\":", place.peak_seq,
        ",\"time_ns\":", place.peak_timestamp_ns >= start ? place.peak_timestamp_ns - start : 0,
        ",\"allocations\":", place.allocated.count, ",\"allocated_bytes\":", place.allocated.bytes,
        ",\"call_sites\":", place.peak_sites.size(), ",\"sites\":",
        JsonSites(GroupSites(place.peak_sites, *report.sites, replay.stream_ordered_stacks,
                             &replay.graph_stacks),
                  top, place.peak_bytes),
        "}"));
  }
  return absl::StrCat(",\"peak\":[", absl::StrJoin(items, ","), "]");
}

// ",\"leaks\":{...}": what was live at the end, per place.
std::string JsonLeaks(ProcessReport& report, size_t top) {
  const TraceReplay& replay = report.replay;
  const TraceFile& trace = *replay.file;
  const RecordingEnd& end = trace.end().recording;
  std::vector<std::string> items;
  for (const PlaceUsage& place : replay.places) {
    if (place.live.count == 0) continue;
    std::vector<Site> live = GroupSites(place.live_sites, *report.sites,
                                        replay.stream_ordered_stacks, &replay.graph_stacks);
    Tally own;
    Tally held;
    for (const auto& [holder, tally] : HeldByHolder(live, &own)) held.Add(tally);
    items.push_back(
        absl::StrCat("{", JsonPlace(place.place, trace), ",\"bytes\":", place.live.bytes,
                     ",\"count\":", place.live.count, ",\"sites\":", JsonSites(live, top, 0),
                     ",\"held_bytes\":", held.bytes, ",\"held_count\":", held.count, "}"));
  }
  std::string out = absl::StrCat(",\"leaks\":{\"complete\":", end.complete() ? "true" : "false");
  if (!end.complete()) absl::StrAppend(&out, ",\"note\":", JsonString(NotLeakedNote(end)));
  absl::StrAppend(&out, ",\"places\":[", absl::StrJoin(items, ","), "]}");
  return out;
}

}  // namespace

std::string ProcessReportJson(const std::string& path, ProcessReport& report,
                              const ReportRequest& request) {
  const Findings& findings = report.findings;
  CallSites& sites = *report.sites;
  const TraceFile& trace = *report.replay.file;
  std::string out = JsonProcess(path, report.replay);
  if (findings.summary) absl::StrAppend(&out, ",\"summary\":", SummaryJson(*findings.summary));
  if (request.kernels) {
    absl::StrAppend(&out, ",\"kernels\":",
                    KernelsJson(*findings.kernels, request.top, [&sites](uint64_t stack_id) {
                      return JsonFrames(sites.Shown(stack_id));
                    }));
  }
  if (request.peak) absl::StrAppend(&out, JsonPeak(report, request.top));
  if (request.leaks) absl::StrAppend(&out, JsonLeaks(report, request.top));
  if (findings.oom) {
    absl::StrAppend(&out, ",\"oom\":", JsonOom(*findings.oom, trace, sites, request.top));
  }
  if (findings.growth) {
    absl::StrAppend(
        &out, ",\"growth\":",
        JsonGrowth(*findings.growth, trace, sites, request.top, request.iteration_marker));
  }
  if (findings.fragmentation) {
    absl::StrAppend(&out, ",\"fragmentation\":", FragmentationJson(*findings.fragmentation));
  }
  absl::StrAppend(&out, "}");
  return out;
}

}  // namespace gpumem::report
