#include "report/replay/event_counts.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "report/format/names.h"
#include "report/format/printable.h"
#include "report/trace/event_stream.h"

namespace gpumem::report {

void EventCounts::Merge(const EventCounts& other) {
  for (const auto& [key, tally] : other.by_action_api) by_action_api[key].Add(tally);
  live.Add(other.live);
  impossible_sizes += other.impossible_sizes;
  for (const auto& [api, tally] : other.for_graph) for_graph[api].Add(tally);
  captures.captures += other.captures.captures;
  captures.failed += other.captures.failed;
  for (const auto& [key, count] : other.launches) launches[key] += count;
}

void EventCounter::AddLaunch(const LaunchEvent& launch, const std::string& kernel_name) {
  LaunchKey key;
  key.api = LaunchApiName(launch.api());
  if (launch.api() != CU_GRAPH_LAUNCH) {
    key.kernel = Printable(Demangle(kernel_name.c_str()));
    key.grid[0] = launch.grid_x();
    key.grid[1] = launch.grid_y();
    key.grid[2] = launch.grid_z();
    key.block[0] = launch.block_x();
    key.block[1] = launch.block_y();
    key.block[2] = launch.block_z();
  }
  ++counts_.launches[key];
}

uint64_t EventCounter::MatchFree(const MemoryEvent& event, bool remove) {
  auto take = [remove](auto& live, uint64_t key) -> uint64_t {
    auto it = live.find(key);
    if (it == live.end()) return 0;
    const uint64_t size = it->second;
    if (remove) live.erase(it);
    return size;
  };
  switch (SpaceOf(event)) {
    case Space::kPlain:
      return take(plain_, event.address());
    case Space::kPhysical: {
      auto extra = extra_references_.find(event.handle());
      if (extra != extra_references_.end() && physical_.contains(event.handle())) {
        if (remove && --extra->second == 0) extra_references_.erase(extra);
        return 0;  // a reference went, the memory stays
      }
      return take(physical_, event.handle());
    }
    case Space::kReservation: {
      const uint64_t matched = take(reservations_, event.address());
      return event.size() != 0 ? event.size() : matched;
    }
    case Space::kMapping: {
      // cuMemUnmap(ptr, size) unmaps every mapping in [ptr, ptr + size), e.g. several handles
      // PyTorch's expandable segments mapped one after another.
      if (event.size() == 0) return take(mappings_, event.address());
      const uint64_t end = event.address() > std::numeric_limits<uint64_t>::max() - event.size()
                               ? std::numeric_limits<uint64_t>::max()
                               : event.address() + event.size();
      if (remove) {
        mappings_.erase(mappings_.lower_bound(event.address()), mappings_.lower_bound(end));
      }
      return event.size();
    }
  }
  return 0;
}

CaptureCounts CountCaptures(const TraceFile& trace) {
  CaptureCounts counts;
  uint64_t ended_with_graph = 0;
  for (const StreamCapture& capture : trace.stream_captures()) {
    if (!capture.ended()) ++counts.captures;
    if (capture.ended() && capture.result() == 0) ++ended_with_graph;
  }
  counts.failed = counts.captures > ended_with_graph ? counts.captures - ended_with_graph : 0;
  return counts;
}

void EventCounter::Add(const MemoryEvent& event) {
  if (event.capture() != 0 && event.action() == ALLOC) {
    counts_.for_graph[ApiName(event.api())].Add(event.size());
  }
  Tally& tally = counts_.by_action_api[{event.action(), ApiName(event.api())}];
  switch (event.action()) {
    case ALLOC:
      switch (SpaceOf(event)) {
        case Space::kPlain:
          plain_[event.address()] = event.size();
          break;
        case Space::kReservation:
          reservations_[event.address()] = event.size();
          break;
        case Space::kPhysical:
          if (physical_.contains(event.handle()) && IsImported(event)) {
            ++extra_references_[event.handle()];  // this process's own handle again
          } else {
            physical_[event.handle()] = event.size();
            extra_references_.erase(event.handle());
          }
          break;
        case Space::kMapping:
          mappings_[event.address()] = event.size();
          break;
      }
      tally.Add(event.size());
      break;
    case FREE:
      tally.Add(MatchFree(event, /*remove=*/true));
      break;
    case RETAIN:
      if (event.result() == 0 && physical_.contains(event.handle())) {
        ++extra_references_[event.handle()];
      }
      tally.Add(0);
      break;
    case FREE_FAILED:  // nothing was freed: the allocation stays live
      tally.Add(MatchFree(event, /*remove=*/false));
      break;
    case ALLOC_FAILED:
    default:
      tally.Add(event.size());
      break;
  }
}

EventCounts EventCounter::Counts() const {
  EventCounts counts = counts_;
  auto add_live = [&counts](const auto& live) {
    for (const auto& [key, size] : live) counts.live.Add(size);
  };
  add_live(plain_);
  add_live(reservations_);
  add_live(physical_);
  add_live(mappings_);
  return counts;
}

absl::StatusOr<CountedTrace> CountTraceFile(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  if (!file.ok()) return file.status();
  CountedTrace counted;
  counted.file = *std::move(file);
  EventCounter counter;
  const TraceFile& trace = *counted.file;
  const MemoryStreamStats stats = StreamMemoryEventsBySeq(
      *counted.file, [&](const MemoryEvent& event) { counter.Add(event); }, kReorderWindow,
      [&](const PacketPosition&, const TracePacket& packet) {
        if (packet.data_case() != TracePacket::kLaunch) return;
        // The KernelName packet comes before its first launch: the table has it by now.
        const std::string* name = trace.FindKernelName(packet.launch().kernel_id());
        counter.AddLaunch(packet.launch(), name != nullptr ? *name : "");
      });
  counted.counts = counter.Counts();
  counted.counts.impossible_sizes = stats.impossible_sizes;
  counted.counts.captures = CountCaptures(trace);
  return counted;
}

std::string FormatEventCounts(const EventCounts& counts) {
  // Known actions in their schema order; ACTION_UNKNOWN and newer values after them.
  auto rank = [](Action action) {
    return action == ACTION_UNKNOWN ? std::numeric_limits<int>::max() : static_cast<int>(action);
  };
  std::vector<std::pair<const std::pair<Action, std::string>*, const Tally*>> rows;
  for (const auto& [key, tally] : counts.by_action_api) rows.push_back({&key, &tally});
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    return rank(a.first->first) < rank(b.first->first);
  });
  std::string text;
  for (const auto& [key, tally] : rows) {
    absl::StrAppend(&text, ActionName(key->first), " ", key->second, " count=", tally->count,
                    " bytes=", tally->bytes, "\n");
  }
  absl::StrAppend(&text, "live count=", counts.live.count, " bytes=", counts.live.bytes, "\n");
  for (const auto& [api, tally] : counts.for_graph) {
    absl::StrAppend(&text, "for_graph alloc ", api, " count=", tally.count, " bytes=", tally.bytes,
                    "\n");
  }
  if (counts.captures.captures > 0) {
    absl::StrAppend(&text, "captures count=", counts.captures.captures,
                    " failed=", counts.captures.failed, "\n");
  }
  if (counts.impossible_sizes > 0) {
    absl::StrAppend(&text, "impossible count=", counts.impossible_sizes, "\n");
  }
  for (const auto& [key, count] : counts.launches) {
    absl::StrAppend(&text, "launch ", key.api);
    if (key.api == LaunchApiName(CU_GRAPH_LAUNCH)) {
      absl::StrAppend(&text, " count=", count, "\n");
      continue;
    }
    absl::StrAppend(&text, " kernel=", key.kernel, " count=", count, " grid=", key.grid[0], ",",
                    key.grid[1], ",", key.grid[2], " block=", key.block[0], ",", key.block[1], ",",
                    key.block[2], "\n");
  }
  return text;
}

}  // namespace gpumem::report
