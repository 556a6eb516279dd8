#include "report/export/timeline.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "report/analysis/kernels.h"
#include "report/replay/memory_space.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/pool_sizes.h"

namespace gpumem::report {
namespace {

constexpr uint64_t kHostLaunchDurationNs = 1000;

struct Launch {
  uint64_t ns = 0;
  int32_t device = 0;
  uint64_t stream = 0;
  uint64_t correlation_id = 0;
  uint64_t seq = 0;
  const std::string* name = nullptr;  // TimelineObserver::names_
};

class TimelineObserver final : public MemoryEventObserver {
 public:
  TimelineObserver(const TraceFile& trace, Progress* progress, TimelineWriter* writer)
      : trace_(trace), symbolizer_(&trace), progress_(progress), writer_(writer) {}

  void AfterMemoryEvent(const MemoryEvent& event, const Replay& replay) override;
  void AddLaunch(const LaunchEvent& launch, const Replay& replay) override;
  void AllocationEnded(const LiveAllocation& live) override { ended_.push_back(live.place); }
  void Finished(const Replay&) override {}
  void AddPacket(const TracePacket& packet);
  // The launches and the totals, once the trace is read.
  void Finish(const TraceReplay& replay);

 private:
  // Nanoseconds since the trace's start of a CLOCK_MONOTONIC timestamp.
  uint64_t Ns(uint64_t timestamp_ns) const {
    const uint64_t start = trace_.header().start_time_mono_ns();
    return timestamp_ns > start ? timestamp_ns - start : 0;
  }
  // The same for CUPTI's clock (CLOCK_REALTIME: cupti/README.md).
  uint64_t RealtimeNs(uint64_t realtime_ns) const {
    const uint64_t start = trace_.header().start_time_unix_ns();
    return realtime_ns > start ? realtime_ns - start : 0;
  }
  const std::vector<std::string>& Frames(uint64_t stack_id) {
    auto it = stacks_.find(stack_id);
    if (it == stacks_.end()) {
      std::vector<std::string> frames;
      for (const Frame& frame : symbolizer_.Symbolize(stack_id)) {
        frames.push_back(frame.ToString());
      }
      it = stacks_.emplace(stack_id, std::move(frames)).first;
    }
    return it->second;
  }
  // The kernel's (or graph's) name, made once for all its launches.
  const std::string* NameOf(const LaunchEvent& launch) {
    const bool graph = launch.api() == CU_GRAPH_LAUNCH;
    auto [it, added] = names_.try_emplace({graph, graph ? launch.graph() : launch.kernel_id()});
    if (added) it->second = KernelName(launch, &trace_);
    return &it->second;
  }
  // The launches of one stream, in time order, with their times.
  std::vector<TimelineLaunch> Timed(std::vector<const Launch*> launches, uint64_t* gpu_timed);

  const TraceFile& trace_;
  Symbolizer symbolizer_;
  Progress* progress_;
  TimelineWriter* writer_;
  std::vector<int32_t> ended_;         // places of what the current event ended
  std::map<int32_t, uint64_t> shown_;  // place -> live bytes last shown
  absl::flat_hash_map<uint64_t, std::vector<std::string>> stacks_;  // stack id -> frames
  std::vector<Launch> launches_;
  std::map<std::pair<bool, uint64_t>, std::string> names_;  // (graph, id) -> name; nodes stay put
  absl::flat_hash_map<uint64_t, std::pair<uint64_t, uint64_t>> gpu_times_;  // correlation id
  PoolSizes pools_;
};

void TimelineObserver::AfterMemoryEvent(const MemoryEvent& event, const Replay& replay) {
  if (progress_ != nullptr) progress_->Update(trace_.bytes_read());
  const uint64_t ns = Ns(event.timestamp_ns());
  // The place of the event: a free takes that of what it freed.
  int32_t place = PlaceOf(event);
  if (event.action() == FREE && !ended_.empty()) place = ended_.front();
  ended_.push_back(PlaceOf(event));
  for (const int32_t changed : ended_) {
    const uint64_t live = replay.LiveBytes(changed);
    auto [it, added] = shown_.try_emplace(changed, live);
    if (!added && it->second == live) continue;
    it->second = live;
    if (added && live == 0) continue;  // nothing allocated there
    writer_->Counter(changed, ns, kLiveBytesCounter, live);
  }
  ended_.clear();
  if (SpaceOf(event) == MemorySpace::kReservation) return;  // address space, not memory
  static const std::vector<std::string> kNoFrames;
  writer_->Memory(place, ns, event, event.stack_id() != 0 ? Frames(event.stack_id()) : kNoFrames);
}

void TimelineObserver::AddLaunch(const LaunchEvent& launch, const Replay&) {
  launches_.push_back({Ns(launch.timestamp_ns()), launch.device(), launch.stream(),
                       launch.correlation_id(), launch.seq(), NameOf(launch)});
}

void TimelineObserver::AddPacket(const TracePacket& packet) {
  if (packet.has_kernel_timing()) {
    const KernelTiming& timing = packet.kernel_timing();
    if (timing.correlation_id() != 0) {
      gpu_times_[timing.correlation_id()] = {timing.start_ns(), timing.end_ns()};
    }
  } else if (packet.has_pool_usage()) {
    const PoolUsage& usage = packet.pool_usage();
    pools_.Set(usage.pool(), usage.device(), usage.reserved_bytes());
    writer_->Counter(usage.device(), Ns(usage.timestamp_ns()), kPoolReservedCounter,
                     pools_.Current(usage.device()));
  }
}

std::vector<TimelineLaunch> TimelineObserver::Timed(std::vector<const Launch*> launches,
                                                    uint64_t* gpu_timed) {
  std::stable_sort(launches.begin(), launches.end(),
                   [](const Launch* a, const Launch* b) { return a->ns < b->ns; });
  std::vector<TimelineLaunch> timed;
  timed.reserve(launches.size());
  for (size_t i = 0; i < launches.size(); ++i) {
    const Launch& launch = *launches[i];
    TimelineLaunch& out = timed.emplace_back();
    out.ns = launch.ns;
    out.duration_ns = kHostLaunchDurationNs;
    out.seq = launch.seq;
    out.correlation_id = launch.correlation_id;
    out.name = launch.name;
    const auto gpu =
        launch.correlation_id != 0 ? gpu_times_.find(launch.correlation_id) : gpu_times_.end();
    if (gpu != gpu_times_.end() && gpu->second.second >= gpu->second.first) {
      out.ns = RealtimeNs(gpu->second.first);
      out.duration_ns = gpu->second.second - gpu->second.first;
      out.gpu_time = true;
      ++*gpu_timed;
    } else if (i + 1 < launches.size()) {
      const uint64_t gap = launches[i + 1]->ns - launch.ns;
      out.duration_ns = std::max<uint64_t>(1, std::min(out.duration_ns, gap));
    }
  }
  return timed;
}

void TimelineObserver::Finish(const TraceReplay& replay) {
  // Launches: one track per (device, stream).
  std::map<std::pair<int32_t, uint64_t>, std::vector<const Launch*>> streams;
  for (const Launch& launch : launches_) {
    streams[{launch.device, launch.stream}].push_back(&launch);
  }
  TimelineTotals totals;
  for (auto& [stream, launches] : streams) {
    writer_->Stream(stream.first, stream.second,
                    Timed(std::move(launches), &totals.launches_with_gpu_times));
  }
  totals.memory_events = replay.memory_events;
  totals.launches = launches_.size();
  totals.complete = !replay.file->end().damaged();
  writer_->Finish(totals);
}

}  // namespace

int64_t TimelinePid(int32_t place) {
  if (place == kPinnedHost) return kPinnedHostPid;
  return place < 0 ? kUnknownDevicePid : int64_t{place} + 1;
}

TraceReplay ReplayTimeline(std::unique_ptr<TraceFile> file, Progress* progress,
                           TimelineWriter* writer) {
  TimelineObserver observer(*file, progress, writer);
  TraceReplay replay = ReplayTrace(std::move(file), nullptr, &observer,
                                   [&observer](const PacketPosition&, const TracePacket& packet) {
                                     observer.AddPacket(packet);
                                   });
  observer.Finish(replay);
  return replay;
}

}  // namespace gpumem::report
