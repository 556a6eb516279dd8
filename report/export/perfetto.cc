#include "report/export/perfetto.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/analysis/kernels.h"
#include "report/format/json.h"
#include "report/format/names.h"
#include "report/replay/memory_space.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/pool_sizes.h"

namespace gpumem::report {
namespace {

constexpr int64_t kMemoryTid = 1;
constexpr int64_t kFirstStreamTid = 2;
constexpr double kHostLaunchDurationUs = 1.0;

int64_t PidOf(int32_t place) {
  if (place == kPinnedHost) return kPinnedHostPid;
  return place < 0 ? kUnknownDevicePid : int64_t{place} + 1;
}

struct Launch {
  double ts_us = 0;
  int32_t device = 0;
  uint64_t stream = 0;
  uint64_t correlation_id = 0;
  uint64_t seq = 0;
  std::string name;
};

class PerfettoObserver final : public ReplayObserver {
 public:
  PerfettoObserver(const TraceFile& trace, Progress* progress, std::string* out)
      : trace_(trace), symbolizer_(&trace), progress_(progress), out_(out) {}

  void AfterMemory(const MemoryEvent& event, const Replay& replay) override;
  void AddLaunch(const LaunchEvent& launch, const Replay& replay) override;
  void AllocationEnded(const LiveAllocation& live) override { ended_.push_back(live.place); }
  void Finished(const Replay&) override {}
  void AddPacket(const TracePacket& packet);
  // The launches, the names and the metadata, once the trace is read.
  void Finish(const TraceReplay& replay);

 private:
  // Microseconds since the trace's start of a CLOCK_MONOTONIC timestamp.
  double Us(uint64_t timestamp_ns) const {
    const uint64_t start = trace_.header().start_time_mono_ns();
    return timestamp_ns > start ? static_cast<double>(timestamp_ns - start) / 1000.0 : 0.0;
  }
  // The same for CUPTI's clock (CLOCK_REALTIME: cupti/README.md).
  double RealtimeUs(uint64_t realtime_ns) const {
    const uint64_t start = trace_.header().start_time_unix_ns();
    return realtime_ns > start ? static_cast<double>(realtime_ns - start) / 1000.0 : 0.0;
  }
  void Event(const std::string& json) {
    if (events_++ > 0) out_->push_back(',');
    out_->append("\n");
    out_->append(json);
  }
  void Counter(int32_t place, double ts, const char* name, uint64_t bytes) {
    used_pids_[PidOf(place)] = place;
    Event(
        absl::StrFormat(R"({"ph":"C","name":"%s","ts":%.3f,"pid":%d,"tid":0,"args":{"bytes":%d}})",
                        name, ts, PidOf(place), bytes));
  }
  const std::string& StackJson(uint64_t stack_id) {
    auto it = stacks_.find(stack_id);
    if (it == stacks_.end()) {
      std::vector<std::string> frames;
      for (const Frame& frame : symbolizer_.Symbolize(stack_id)) {
        frames.push_back(JsonString(frame.ToString()));
      }
      it = stacks_.emplace(stack_id, absl::StrCat("[", absl::StrJoin(frames, ","), "]")).first;
    }
    return it->second;
  }

  const TraceFile& trace_;
  Symbolizer symbolizer_;
  Progress* progress_;
  std::string* out_;
  uint64_t events_ = 0;
  std::vector<int32_t> ended_;                         // places of what the current event ended
  std::map<int32_t, uint64_t> shown_;                  // place -> live bytes last shown
  std::map<int64_t, int32_t> used_pids_;               // pid -> place
  absl::flat_hash_map<uint64_t, std::string> stacks_;  // stack id -> JSON array of frames
  std::vector<Launch> launches_;
  absl::flat_hash_map<uint64_t, std::pair<uint64_t, uint64_t>> gpu_times_;  // correlation id
  PoolSizes pools_;
};

void PerfettoObserver::AfterMemory(const MemoryEvent& event, const Replay& replay) {
  if (progress_ != nullptr) progress_->Update(trace_.bytes_read());
  const double ts = Us(event.timestamp_ns());
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
    Counter(changed, ts, "live bytes", live);
  }
  ended_.clear();
  if (SpaceOf(event) == MemorySpace::kReservation) return;  // address space, not memory
  used_pids_[PidOf(place)] = place;
  std::string args =
      absl::StrCat("\"size\":", event.size(), ",\"address\":\"0x", absl::Hex(event.address()),
                   "\",\"stream\":\"0x", absl::Hex(event.stream()), "\",\"seq\":", event.seq(),
                   ",\"kind\":", JsonString(KindName(event.kind())));
  if (event.action() == ALLOC_FAILED) {
    absl::StrAppend(&args, ",\"result\":", event.result(), ",\"free_bytes\":", event.free_bytes());
  }
  if (event.stack_id() != 0) absl::StrAppend(&args, ",\"stack\":", StackJson(event.stack_id()));
  Event(absl::StrFormat(
      R"({"ph":"i","s":"t","name":%s,"ts":%.3f,"pid":%d,"tid":%d,"args":{%s}})",
      JsonString(absl::StrCat(ActionName(event.action()), " ", ApiName(event.api()))), ts,
      PidOf(place), kMemoryTid, args));
}

void PerfettoObserver::AddLaunch(const LaunchEvent& launch, const Replay&) {
  launches_.push_back({Us(launch.timestamp_ns()), launch.device(), launch.stream(),
                       launch.correlation_id(), launch.seq(), KernelName(launch, &trace_)});
}

void PerfettoObserver::AddPacket(const TracePacket& packet) {
  if (packet.has_kernel_timing()) {
    const KernelTiming& timing = packet.kernel_timing();
    if (timing.correlation_id() != 0) {
      gpu_times_[timing.correlation_id()] = {timing.start_ns(), timing.end_ns()};
    }
  } else if (packet.has_pool_usage()) {
    const PoolUsage& usage = packet.pool_usage();
    pools_.Set(usage.pool(), usage.device(), usage.reserved_bytes());
    Counter(usage.device(), Us(usage.timestamp_ns()), "pool reserved bytes",
            pools_.Current(usage.device()));
  }
}

void PerfettoObserver::Finish(const TraceReplay& replay) {
  // Launches: one track per (device, stream), in time order.
  std::map<std::pair<int32_t, uint64_t>, std::vector<const Launch*>> tracks;
  for (const Launch& launch : launches_) tracks[{launch.device, launch.stream}].push_back(&launch);
  std::map<int32_t, int64_t> next_tid;
  uint64_t gpu_timed = 0;
  for (auto& [track, launches] : tracks) {
    const int32_t place = track.first;
    used_pids_[PidOf(place)] = place;
    auto [tid_it, added] = next_tid.try_emplace(place, kFirstStreamTid);
    const int64_t tid = tid_it->second++;
    Event(absl::StrFormat(
        R"({"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"stream 0x%x"}})",
        PidOf(place), tid, track.second));
    std::stable_sort(launches.begin(), launches.end(),
                     [](const Launch* a, const Launch* b) { return a->ts_us < b->ts_us; });
    for (size_t i = 0; i < launches.size(); ++i) {
      const Launch& launch = *launches[i];
      double ts = launch.ts_us;
      double dur = kHostLaunchDurationUs;
      const char* time = "host launch";
      const auto gpu =
          launch.correlation_id != 0 ? gpu_times_.find(launch.correlation_id) : gpu_times_.end();
      if (gpu != gpu_times_.end() && gpu->second.second >= gpu->second.first) {
        ts = RealtimeUs(gpu->second.first);
        dur = static_cast<double>(gpu->second.second - gpu->second.first) / 1000.0;
        time = "gpu";
        ++gpu_timed;
      } else if (i + 1 < launches.size()) {
        dur = std::max(0.001, std::min(dur, launches[i + 1]->ts_us - ts));
      }
      Event(absl::StrFormat(
          R"({"ph":"X","name":%s,"ts":%.3f,"dur":%.3f,"pid":%d,"tid":%d,"args":{"time":"%s","seq":%d,"correlation_id":%d}})",
          JsonString(launch.name), ts, dur, PidOf(place), tid, time, launch.seq,
          launch.correlation_id));
    }
  }
  for (const auto& [pid, place] : used_pids_) {
    Event(absl::StrFormat(R"({"ph":"M","name":"process_name","pid":%d,"tid":0,"args":{"name":%s}})",
                          pid, JsonString(PlaceName(place, trace_))));
    Event(absl::StrFormat(
        R"({"ph":"M","name":"process_sort_index","pid":%d,"tid":0,"args":{"sort_index":%d}})", pid,
        pid));
    Event(absl::StrFormat(
        R"({"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"memory"}})", pid,
        kMemoryTid));
  }
  const Header& header = trace_.header();
  absl::StrAppend(out_, "\n],\"displayTimeUnit\":\"ns\",\"metadata\":{\"source\":\"gpumem\"",
                  ",\"host\":", JsonString(header.host()), ",\"pid\":", header.pid(),
                  ",\"command_line\":", JsonString(absl::StrJoin(header.command_line(), " ")),
                  ",\"start_time_unix_ns\":", header.start_time_unix_ns(),
                  ",\"memory_events\":", replay.memory_events, ",\"launches\":", launches_.size(),
                  ",\"launches_with_gpu_times\":", gpu_timed,
                  ",\"complete\":", replay.file->end().damaged() ? "false" : "true", "}}\n");
}

}  // namespace

TraceReplay ExportPerfetto(std::unique_ptr<TraceFile> file, Progress* progress, std::string* out) {
  out->append("{\"traceEvents\":[");
  PerfettoObserver observer(*file, progress, out);
  TraceReplay replay = ReplayTrace(std::move(file), nullptr, &observer,
                                   [&observer](const PacketPosition&, const TracePacket& packet) {
                                     observer.AddPacket(packet);
                                   });
  observer.Finish(replay);
  return replay;
}

}  // namespace gpumem::report
