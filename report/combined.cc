#include "report/combined.h"

#include <algorithm>
#include <queue>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/event_stream.h"
#include "report/json.h"
#include "report/sizes.h"

namespace gpumem::report {
namespace {

// Devices ascending, then -1, then kPinnedHost (as Replay::Places).
bool PlaceBefore(int32_t a, int32_t b) {
  const auto rank = [](int32_t place) {
    return std::make_pair(place >= 0 ? 0 : place == -1 ? 1 : 2, place);
  };
  return rank(a) < rank(b);
}

std::string NameOf(int32_t place, const CombinedHost& host,
                   const std::vector<ProcessTimeline>& processes) {
  for (const size_t index : host.processes) {
    const auto it = processes[index].place_names.find(place);
    if (it != processes[index].place_names.end()) return it->second;
  }
  if (place == kPinnedHost) return "pinned host";
  if (place < 0) return "device ?";
  return absl::StrCat("device ", place);
}

// One place of one host: k-way merge of its processes' timelines by timestamp.
CombinedPlace CombinePlace(int32_t place, const std::vector<size_t>& members,
                           const std::vector<ProcessTimeline>& processes) {
  CombinedPlace result;
  result.place = place;
  std::vector<const std::vector<TimelinePoint>*> lines(members.size(), nullptr);
  for (size_t i = 0; i < members.size(); ++i) {
    const auto it = processes[members[i]].places.find(place);
    if (it != processes[members[i]].places.end()) lines[i] = &it->second;
  }
  // (timestamp, member, position): the smallest first.
  using Head = std::tuple<uint64_t, size_t, size_t>;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] != nullptr && !lines[i]->empty()) heads.emplace((*lines[i])[0].timestamp_ns, i, 0);
  }
  std::vector<uint64_t> current(members.size(), 0);
  std::vector<uint64_t> at_peak(members.size(), 0);
  uint64_t sum = 0;
  while (!heads.empty()) {
    const auto [timestamp, member, position] = heads.top();
    heads.pop();
    const uint64_t bytes = (*lines[member])[position].live_bytes;
    sum = sum - current[member] + bytes;
    current[member] = bytes;
    if (sum > result.peak_bytes) {
      result.peak_bytes = sum;
      result.timestamp_ns = timestamp;
      at_peak = current;
    }
    if (position + 1 < lines[member]->size()) {
      heads.emplace((*lines[member])[position + 1].timestamp_ns, member, position + 1);
    }
  }
  for (size_t i = 0; i < members.size(); ++i) result.shares.push_back({members[i], at_peak[i]});
  std::stable_sort(
      result.shares.begin(), result.shares.end(),
      [](const CombinedShare& a, const CombinedShare& b) { return a.bytes > b.bytes; });
  return result;
}

uint64_t Since(uint64_t timestamp_ns, uint64_t start) {
  return timestamp_ns >= start ? timestamp_ns - start : 0;
}

}  // namespace

void TimelineBuilder::Add(const MemoryEvent& event) {
  replay_.Add(event);
  // A free names no place; any place may have changed. Places are few (devices, pinned host).
  if (event.action() == ALLOC) last_.try_emplace(PlaceOf(event), 0);
  for (auto& [place, last] : last_) {
    const uint64_t now = replay_.LiveBytes(place);
    if (now == last) continue;
    last = now;
    places_[place].push_back({event.timestamp_ns(), now});
  }
}

absl::StatusOr<ProcessTimeline> ReadProcessTimeline(const std::string& path) {
  TimelineBuilder builder;
  absl::StatusOr<StreamedTrace> streamed =
      ForEachMemoryEventBySeq(path, [&](const MemoryEvent& event) { builder.Add(event); });
  if (!streamed.ok()) return streamed.status();
  const TraceFile& trace = *streamed->file;
  ProcessTimeline timeline;
  timeline.path = path;
  timeline.host = trace.header().host();
  timeline.pid = trace.header().pid();
  timeline.start_time_mono_ns = trace.header().start_time_mono_ns();
  for (const std::string& arg : trace.header().command_line()) timeline.command_line.push_back(arg);
  timeline.places = builder.Take();
  for (const auto& [place, points] : timeline.places) {
    timeline.place_names[place] = PlaceName(place, trace);
  }
  return timeline;
}

Combined CombineTimelines(const std::vector<ProcessTimeline>& processes) {
  Combined combined;
  combined.processes = processes.size();
  for (size_t i = 0; i < processes.size(); ++i) {
    auto it =
        std::find_if(combined.hosts.begin(), combined.hosts.end(),
                     [&](const CombinedHost& host) { return host.host == processes[i].host; });
    if (it == combined.hosts.end()) {
      it = combined.hosts.insert(combined.hosts.end(), CombinedHost{});
      it->host = processes[i].host;
      it->start_time_mono_ns = processes[i].start_time_mono_ns;
    }
    it->processes.push_back(i);
    it->start_time_mono_ns = std::min(it->start_time_mono_ns, processes[i].start_time_mono_ns);
  }
  combined.per_host = combined.hosts.size() > 1;
  for (CombinedHost& host : combined.hosts) {
    std::vector<int32_t> places;
    for (const size_t index : host.processes) {
      for (const auto& [place, points] : processes[index].places) {
        if (std::find(places.begin(), places.end(), place) == places.end()) places.push_back(place);
      }
    }
    std::sort(places.begin(), places.end(), PlaceBefore);
    for (const int32_t place : places) {
      host.places.push_back(CombinePlace(place, host.processes, processes));
    }
  }
  return combined;
}

std::string CombinedText(const Combined& combined, const std::vector<ProcessTimeline>& processes) {
  std::string out = absl::StrCat("== combined, ", combined.processes, " processes\n");
  if (combined.per_host) {
    absl::StrAppend(&out, "the traces come from ", combined.hosts.size(),
                    " hosts: CLOCK_MONOTONIC is per host, so the combined view is per host\n");
  }
  for (const CombinedHost& host : combined.hosts) {
    const std::string host_name = host.host.empty() ? "(unknown host)" : host.host;
    if (combined.per_host) {
      absl::StrAppend(&out, "\nhost ", host_name, ": ", host.processes.size(),
                      host.processes.size() == 1 ? " process\n" : " processes\n");
    }
    if (host.places.empty()) absl::StrAppend(&out, "\ncombined: no memory allocated\n");
    for (const CombinedPlace& place : host.places) {
      absl::StrAppendFormat(
          &out, "\ncombined peak, %s: %s (%d bytes) at %.3f ms after the first process started\n",
          NameOf(place.place, host, processes), FormatBytes(place.peak_bytes), place.peak_bytes,
          static_cast<double>(Since(place.timestamp_ns, host.start_time_mono_ns)) / 1e6);
      for (const CombinedShare& share : place.shares) {
        const ProcessTimeline& process = processes[share.process];
        absl::StrAppendFormat(
            &out, "  %s  %5.1f%%  pid %d  %s\n", FormatBytes(share.bytes),
            place.peak_bytes == 0
                ? 0.0
                : 100.0 * static_cast<double>(share.bytes) / static_cast<double>(place.peak_bytes),
            process.pid,
            process.command_line.empty() ? process.path : absl::StrJoin(process.command_line, " "));
      }
    }
  }
  return out;
}

std::string CombinedJson(const Combined& combined, const std::vector<ProcessTimeline>& processes) {
  std::vector<std::string> hosts;
  for (const CombinedHost& host : combined.hosts) {
    std::vector<std::string> places;
    for (const CombinedPlace& place : host.places) {
      std::vector<std::string> shares;
      for (const CombinedShare& share : place.shares) {
        const ProcessTimeline& process = processes[share.process];
        std::vector<std::string> argv;
        for (const std::string& arg : process.command_line) argv.push_back(JsonString(arg));
        shares.push_back(absl::StrCat("{\"pid\":", process.pid,
                                      ",\"path\":", JsonString(process.path), ",\"command_line\":[",
                                      absl::StrJoin(argv, ","), "],\"bytes\":", share.bytes, "}"));
      }
      places.push_back(absl::StrCat(
          "{\"memory\":", place.place == kPinnedHost ? "\"host\"" : "\"device\"",
          ",\"device\":", place.place == kPinnedHost ? -1 : place.place,
          ",\"name\":", JsonString(NameOf(place.place, host, processes)),
          ",\"peak_bytes\":", place.peak_bytes, ",\"timestamp_ns\":", place.timestamp_ns,
          ",\"time_ns\":", Since(place.timestamp_ns, host.start_time_mono_ns), ",\"processes\":[",
          absl::StrJoin(shares, ","), "]}"));
    }
    std::vector<std::string> pids;
    for (const size_t index : host.processes) pids.push_back(absl::StrCat(processes[index].pid));
    hosts.push_back(absl::StrCat("{\"host\":", JsonString(host.host), ",\"pids\":[",
                                 absl::StrJoin(pids, ","), "],\"places\":[",
                                 absl::StrJoin(places, ","), "]}"));
  }
  return absl::StrCat("{\"processes\":", combined.processes,
                      ",\"per_host\":", combined.per_host ? "true" : "false", ",\"hosts\":[",
                      absl::StrJoin(hosts, ","), "]}");
}

}  // namespace gpumem::report
