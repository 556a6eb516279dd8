#include "viewer/page_data.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "report/analysis/summary_table.h"
#include "report/format/names.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/replay/replay.h"
#include "report/stacks/call_sites.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/pool_sizes.h"
#include "report/trace/progress.h"
#include "report/trace/trace_file.h"
#include "viewer/timeline_buckets.h"

namespace gpumem::viewer {

namespace {

using report::CallSites;
using report::Frame;
using report::LiveAllocation;
using report::Replay;
using report::TraceFile;

// One allocation's bytes as a SiteChange holds them (no allocation reaches 2^63:
// report/format/sizes.h).
int64_t Signed(uint64_t bytes) {
  return static_cast<int64_t>(std::min<uint64_t>(bytes, std::numeric_limits<int64_t>::max()));
}

std::vector<std::string> FrameTexts(const std::vector<Frame>& frames) {
  std::vector<std::string> texts;
  texts.reserve(frames.size());
  for (const Frame& frame : frames) texts.push_back(frame.ToString());
  return texts;
}

// Follows the replay: each place's in-use bytes by call site into its TimelineBuckets, launches,
// the pools' reserved sizes, failed allocations and the iterations' times.
class ViewObserver final : public report::MemoryEventObserver {
 public:
  ViewObserver(const TraceFile& trace, CallSites& sites, const ViewOptions& options,
               IterationTimes& iterations)
      : trace_(trace), sites_(sites), options_(options), iterations_(iterations) {}

  void AfterMemoryEvent(const MemoryEvent& event, const Replay& replay) override {
    const uint64_t t = Since(event.timestamp_ns());
    last_ns_ = std::max(last_ns_, t);
    ApplyPoolSizes(event.timestamp_ns());
    const bool allocated = event.action() == ALLOC;
    const int32_t alloc_place = report::PlaceOf(event);
    // The places this event changed: where allocations ended, and where one was made.
    std::vector<int32_t>& places = places_;
    places.clear();
    for (const Ended& ended : ended_) {
      if (std::find(places.begin(), places.end(), ended.place) == places.end()) {
        places.push_back(ended.place);
      }
    }
    if (allocated && std::find(places.begin(), places.end(), alloc_place) == places.end()) {
      places.push_back(alloc_place);
    }
    for (const int32_t place : places) {
      changes_.clear();
      uint64_t& tracked = tracked_[place];
      for (const Ended& ended : ended_) {
        if (ended.place != place) continue;
        changes_.push_back({ended.site, -Signed(ended.bytes)});
        tracked -= std::min(tracked, ended.bytes);
      }
      // What the replay added is its live bytes beyond those tracked: the new allocation (VMM
      // physical memory included, reservations and mappings not).
      const uint64_t live = replay.LiveBytes(place);
      if (allocated && place == alloc_place && live > tracked) {
        changes_.push_back({SiteIndex(event.stack_id()), Signed(live - tracked)});
      }
      tracked = live;
      if (!changes_.empty()) Timeline(place).Apply(t, changes_);
    }
    ended_.clear();
    if (event.action() == ALLOC_FAILED && report::IsOutOfMemoryResult(event.result())) {
      Failures& failures = failures_[alloc_place];
      if (failures.first.size() < kMaxFailureMarkers) {
        failures.first.push_back(
            {t, event.seq(), event.size(), static_cast<int32_t>(SiteIndex(event.stack_id()))});
      }
      ++failures.second;
    }
    iterations_.AddMemory(event, t);
  }

  void AddLaunch(const LaunchEvent& launch, const Replay&) override {
    const uint64_t t = Since(launch.timestamp_ns());
    last_ns_ = std::max(last_ns_, t);
    if (launch.device() >= 0) Timeline(launch.device()).Launch(t);
    iterations_.AddLaunch(launch, t);
  }

  void AllocationEnded(const LiveAllocation& live) override {
    ended_.push_back({live.place, SiteIndex(live.stack_id), live.size});
  }

  void Finished(const Replay&) override {
    ApplyPoolSizes(UINT64_MAX);
    for (auto& [place, timeline] : timelines_) timeline.Finish();
  }

  // PoolUsage packets come in file order, a little ahead of the events replayed in seq order:
  // each takes effect at the first memory event stamped at or after it.
  void AddPoolUsage(const PoolUsage& usage) { pending_pools_.push_back(usage); }

  // The call site of `stack_id` as a dense index, and back.
  uint32_t SiteIndex(uint64_t stack_id) {
    const uint64_t site = sites_.Of(stack_id);
    const auto [it, added] = dense_.try_emplace(site, static_cast<uint32_t>(site_stacks_.size()));
    if (added) site_stacks_.push_back(site);
    return it->second;
  }
  uint64_t SiteStack(uint32_t index) const { return site_stacks_[index]; }

  // nullptr for a place that saw no event.
  const TimelineBuckets* FindTimeline(int32_t place) const {
    const auto it = timelines_.find(place);
    return it == timelines_.end() ? nullptr : &it->second;
  }
  const std::pair<std::vector<PageFailure>, uint64_t>* FindFailures(int32_t place) const {
    const auto it = failures_.find(place);
    return it == failures_.end() ? nullptr : &it->second;
  }
  uint64_t last_ns() const { return last_ns_; }

 private:
  struct Ended {
    int32_t place;
    uint32_t site;
    uint64_t bytes;
  };
  using Failures = std::pair<std::vector<PageFailure>, uint64_t>;  // the first ones, and all

  uint64_t Since(uint64_t timestamp_ns) const { return report::SinceStart(timestamp_ns, trace_); }
  TimelineBuckets& Timeline(int32_t place) {
    return timelines_.try_emplace(place, options_.buckets).first->second;
  }
  void ApplyPoolSizes(uint64_t timestamp_ns) {
    while (!pending_pools_.empty() && pending_pools_.front().timestamp_ns() <= timestamp_ns) {
      const PoolUsage& usage = pending_pools_.front();
      pool_sizes_.Set(usage.pool(), usage.device(), usage.reserved_bytes());
      Timeline(usage.device())
          .Reserved(Since(usage.timestamp_ns()), pool_sizes_.Current(usage.device()));
      pending_pools_.pop_front();
    }
  }

  const TraceFile& trace_;
  CallSites& sites_;
  const ViewOptions& options_;
  IterationTimes& iterations_;
  std::map<int32_t, TimelineBuckets> timelines_;
  std::map<int32_t, uint64_t> tracked_;  // live bytes per place as the timelines have them
  std::vector<Ended> ended_;             // by the event being replayed
  std::vector<SiteChange> changes_;
  std::vector<int32_t> places_;  // changed by the event being replayed
  absl::flat_hash_map<uint64_t, uint32_t> dense_;
  std::vector<uint64_t> site_stacks_;
  std::map<int32_t, Failures> failures_;
  std::deque<PoolUsage> pending_pools_;
  report::PoolSizes pool_sizes_;
  uint64_t last_ns_ = 0;
};

// The page's call sites, each once (by its frames and holder).
class SiteTable {
 public:
  explicit SiteTable(std::vector<PageSite>* sites) : sites_(sites) {}
  int32_t Add(const std::vector<Frame>& frames, const report::MemoryHolder* holder) {
    std::vector<std::string> texts = FrameTexts(frames);
    std::string key = absl::StrJoin(texts, "\n");
    if (holder != nullptr) key = absl::StrCat(holder->id, "\n", key);
    const auto [it, added] = index_.try_emplace(key, static_cast<int32_t>(sites_->size()));
    if (added) {
      report::SiteLabel label = report::LabelOf(frames, holder);
      sites_->push_back({report::Printable(label.first_line), report::Printable(label.via),
                         std::move(texts), holder == nullptr ? "" : holder->name});
    }
    return it->second;
  }

 private:
  std::vector<PageSite>* sites_;
  absl::flat_hash_map<std::string, int32_t> index_;
};

FlameNode Flame(const std::vector<report::SiteTally>& tallies, CallSites& sites,
                double min_fraction) {
  FlameGraph graph;
  for (const report::SiteTally& tally : tallies) {
    graph.Add(FrameTexts(sites.Frames(tally.stack_id)), tally.tally.bytes, tally.tally.count);
  }
  return graph.Pruned(min_fraction);
}

std::vector<PageRow> Rows(const std::vector<report::SiteTally>& tallies, CallSites& sites,
                          const report::TraceReplay& replay, size_t limit, SiteTable& table) {
  std::vector<PageRow> rows;
  for (const report::Site& site :
       report::GroupSites(tallies, sites, replay.stream_ordered_stacks)) {
    if (rows.size() == limit) break;
    rows.push_back({table.Add(site.frames, site.holder), site.tally.bytes, site.tally.count});
  }
  return rows;
}

// The timeline of one place: buckets, and the largest call sites (by their area over the
// buckets) as bands, the rest as "other".
void FillTimeline(const TimelineBuckets& timeline, const ViewObserver& observer, CallSites& sites,
                  const ViewOptions& options, SiteTable& table, PagePlace* out) {
  const std::vector<TimeBucket>& buckets = timeline.buckets();
  out->end_ns = timeline.end();
  absl::flat_hash_map<uint32_t, uint64_t> area;
  for (const TimeBucket& bucket : buckets) {
    out->start_ns.push_back(bucket.start);
    out->in_use_max.push_back(bucket.max_in_use);
    out->in_use_last.push_back(bucket.last_in_use);
    out->launches.push_back(bucket.launches);
    if (timeline.has_reserved()) out->reserved.push_back(bucket.reserved);
    for (const auto& [site, bytes] : bucket.at_max) {
      if (site != kRestSite) area[site] = report::SaturatingAdd(area[site], bytes);
    }
  }
  std::vector<std::pair<uint32_t, uint64_t>> ranked(area.begin(), area.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (ranked.size() > options.bands) ranked.resize(options.bands);
  absl::flat_hash_map<uint32_t, size_t> band_of;
  for (const auto& [site, unused] : ranked) {
    band_of.emplace(site, out->band_sites.size());
    out->band_sites.push_back(table.Add(sites.Frames(observer.SiteStack(site)), nullptr));
  }
  out->band_bytes.assign(ranked.size() + 1, std::vector<uint64_t>(buckets.size(), 0));
  for (size_t i = 0; i < buckets.size(); ++i) {
    uint64_t in_bands = 0;
    for (const auto& [site, bytes] : buckets[i].at_max) {
      const auto band = band_of.find(site);
      if (band == band_of.end()) continue;
      out->band_bytes[band->second][i] = bytes;
      in_bands = report::SaturatingAdd(in_bands, bytes);
    }
    out->band_bytes.back()[i] = buckets[i].max_in_use - std::min(buckets[i].max_in_use, in_bands);
  }
}

// Replays the trace into `observer` and `summary`, with progress on a terminal
// (report/trace/progress.h) ticked by every memory event.
report::TraceReplay ReplayForPage(std::unique_ptr<TraceFile> opened, const std::string& path,
                                  ViewObserver* observer, report::SummaryAnalysis* summary) {
  const TraceFile& trace = *opened;
  report::Progress progress(path, trace.file_size());
  report::TraceReplay replay = report::ReplayTrace(
      std::move(opened),
      [&](const MemoryEvent& event) {
        progress.Update(trace.bytes_read());
        summary->Add(event);
      },
      observer,
      [&](const report::PacketPosition&, const TracePacket& packet) {
        if (packet.has_pool_usage()) observer->AddPoolUsage(packet.pool_usage());
      });
  progress.Finish();
  return replay;
}

// What the page says of the trace as a whole: the process, how it ended, what was counted.
void FillTraceFacts(const std::string& path, const report::TraceReplay& replay,
                    const ViewObserver& observer, PageData* page) {
  const TraceFile& file = *replay.file;
  const Header& header = file.header();
  // Shown as the text reports show them (report/format/printable.h), JSON-escaped on top.
  page->trace_path = report::Printable(path);
  page->host = report::Printable(header.host());
  page->pid = header.pid();
  for (const std::string& arg : header.command_line()) {
    page->command_line.push_back(report::Printable(arg));
  }
  page->start_unix_ns = header.start_time_unix_ns();
  page->duration_ns = observer.last_ns();
  if (file.footer() && file.footer()->end_time_mono_ns() > 0) {
    page->duration_ns =
        std::max(page->duration_ns, report::SinceStart(file.footer()->end_time_mono_ns(), file));
  }
  page->footer = file.end().complete();
  page->end = file.end().Describe();
  if (file.end().damaged()) page->notice = report::Printable(file.end().ErrorLine(path));
  page->memory_events = replay.memory_events;
  page->launches = file.launch_event_count();
  if (replay.anomalies.total() > 0) page->anomalies = report::DescribeAnomalies(replay.anomalies);
  page->unrecorded_events = file.end().recording.events_not_recorded();
  page->unrecorded = file.end().recording.UnrecordedNote();
}

// One device's (or pinned host memory's) part of the page: timeline, peak, leaks, failures.
PagePlace PlaceOf(const report::PlaceUsage& usage, const report::TraceReplay& replay,
                  ViewObserver& observer, CallSites& sites, const ViewOptions& options,
                  SiteTable& table) {
  const TraceFile& file = *replay.file;
  PagePlace place;
  place.place = usage.place;
  place.name = report::PlaceName(usage.place, file);
  for (const Device& device : file.devices()) {
    if (device.ordinal() == usage.place) place.total_memory = device.total_memory();
  }
  if (const TimelineBuckets* timeline = observer.FindTimeline(usage.place)) {
    FillTimeline(*timeline, observer, sites, options, table, &place);
  }
  place.peak_bytes = usage.peak_bytes;
  place.peak_time_ns = report::SinceStart(usage.peak_timestamp_ns, file);
  place.peak_seq = usage.peak_seq;
  place.leaked = usage.live;
  if (const auto* failures = observer.FindFailures(usage.place)) {
    place.failures = failures->first;
    place.failure_count = failures->second;
  }
  place.peak_flame = Flame(usage.peak_sites, sites, options.flame_min_fraction);
  place.leak_flame = Flame(usage.live_sites, sites, options.flame_min_fraction);
  place.peak_sites = Rows(usage.peak_sites, sites, replay, options.table_rows, table);
  place.leak_sites = Rows(usage.live_sites, sites, replay, options.table_rows, table);
  return place;
}

}  // namespace

absl::StatusOr<PageData> BuildPageData(const std::string& path, const ViewOptions& options) {
  absl::StatusOr<std::unique_ptr<TraceFile>> opened = TraceFile::Open(path);
  if (!opened.ok()) return opened.status();
  const TraceFile& trace = **opened;
  report::Symbolizer symbolizer(&trace);
  CallSites sites(&symbolizer, options.group_by, /*python_only=*/false);
  std::function<bool(uint64_t)> is_marker;
  if (!options.iteration_marker.empty()) {
    is_marker = [&](uint64_t stack_id) {
      return sites.AnyFunctionContains(stack_id, options.iteration_marker);
    };
  }
  IterationTimes iterations(is_marker);
  ViewObserver observer(trace, sites, options, iterations);
  report::SummaryAnalysis summary(trace);
  const report::TraceReplay replay = ReplayForPage(*std::move(opened), path, &observer, &summary);

  PageData page;
  FillTraceFacts(path, replay, observer, &page);
  SiteTable table(&page.sites);
  for (const report::PlaceUsage& usage : replay.places) {
    page.places.push_back(PlaceOf(usage, replay, observer, sites, options, table));
  }
  // Failed allocations name their call site by dense index until here.
  for (PagePlace& place : page.places) {
    for (PageFailure& failure : place.failures) {
      failure.site = table.Add(sites.Frames(observer.SiteStack(failure.site)), nullptr);
    }
  }
  // Iterations are told by allocation point (a user's line may stand for many per iteration).
  page.iterations =
      iterations.Finish([&](uint64_t stack_id) { return sites.StackSiteOf(stack_id); });
  page.summary = report::SummaryText(summary.Finish());
  return page;
}

}  // namespace gpumem::viewer
