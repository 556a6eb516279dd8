// Counts of memory operations per (action, API) with their bytes, and what was still live at the
// end: the first, simplest report, and the one tests compare against known programs.
//
// Output of FormatEventCounts(), one line each, by action (alloc, free, alloc_failed, free_failed)
// then API name, and `live` last:
//   alloc cudaMalloc count=12 bytes=50331648
//   free cudaFree count=6 bytes=25165824
//   live count=6 bytes=25165824
// and, when the trace has any, the memory made for CUDA graphs by API and the stream captures:
//   for_graph alloc cudaMallocAsync count=6 bytes=18874368
//   captures count=3 failed=0
// and `impossible count=N`: allocations larger than kMaxAllocationBytes,
// which are left out (report/format/sizes.h). Bytes saturate at 2^64 - 1.
#ifndef GPUMEM_REPORT_REPLAY_EVENT_COUNTS_H_
#define GPUMEM_REPORT_REPLAY_EVENT_COUNTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/trace.pb.h"
#include "report/format/sizes.h"
#include "report/replay/memory_space.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// A count of allocations and their bytes; the bytes saturate (SaturatingAdd).
struct Tally {
  uint64_t count = 0;
  uint64_t bytes = 0;

  void Add(uint64_t more_bytes) {
    ++count;
    bytes = SaturatingAdd(bytes, more_bytes);
  }
  void Add(const Tally& other) {
    count += other.count;
    bytes = SaturatingAdd(bytes, other.bytes);
  }
};

// Launches of one kernel with one shape through one API: "launch cuLaunchKernel
// kernel=increment(int*, int) count=1000 grid=4,1,1 block=128,1,1" (graph launches: no kernel).
struct LaunchKey {
  std::string api;
  std::string kernel;  // demangled; empty for graph launches
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};

  auto operator<=>(const LaunchKey&) const = default;
};

// The stream captures of a trace (its CUDA graphs): how many began, and how many of those ended
// without a graph (the capture was invalidated, or never ended).
struct CaptureCounts {
  uint64_t captures = 0;
  uint64_t failed = 0;
};
CaptureCounts CountCaptures(const TraceFile& trace);

struct EventCounts {
  // Key: (action, API name). Bytes: for allocations (and failed ones) the size asked for; for
  // frees the size of the allocation they freed (0 when it was never seen allocated), except
  // cuMemUnmap and cuMemAddressFree, which carry their own size.
  std::map<std::pair<Action, std::string>, Tally> by_action_api;
  Tally live;                     // allocations of any kind whose free never came
  uint64_t impossible_sizes = 0;  // allocations left out (MemoryStreamStats::impossible_sizes)
  std::map<std::string, Tally> for_graph;  // by API: allocations made during a stream capture
  CaptureCounts captures;
  std::map<LaunchKey, uint64_t> launches;

  void Merge(const EventCounts& other);
};

// Replays the memory events of one process, which must come in `seq` order, matching frees to
// allocations. One counter per trace file: addresses of different processes are unrelated.
class EventCounter {
 public:
  void Add(const MemoryEvent& event);
  // `kernel_name` as the trace's KernelName packet has it (mangled), or empty.
  void AddLaunch(const LaunchEvent& launch, const std::string& kernel_name);
  // The tallies so far, with what is live now as `live`.
  EventCounts Counts() const;

 private:
  // One map per MemorySpace (memory_space.h).
  using Space = MemorySpace;

  // Size of the allocation `event` frees, removing it (and, for cuMemUnmap, every mapping in the
  // range) when `remove`.
  uint64_t MatchFree(const MemoryEvent& event, bool remove);

  absl::flat_hash_map<uint64_t, uint64_t> plain_;         // address -> size
  absl::flat_hash_map<uint64_t, uint64_t> reservations_;  // address -> size
  absl::flat_hash_map<uint64_t, uint64_t> physical_;      // cuMemCreate handle -> size
  std::map<uint64_t, uint64_t> mappings_;                 // address -> size; ordered for ranges
  // References taken on a live handle beyond its first (cuMemRetainAllocationHandle, an import of
  // the process's own handle): that many releases free nothing.
  absl::flat_hash_map<uint64_t, uint64_t> extra_references_;
  EventCounts counts_;
};

// Counts the events of `events`, which are one process's memory events sorted by seq.
template <typename Events>
EventCounts CountEvents(const Events& events) {
  EventCounter counter;
  for (const MemoryEvent& event : events) counter.Add(event);
  return counter.Counts();
}

// A trace file counted whole, streamed (memory bounded by the reorder window): memory events in
// seq order, launches with their kernel names.
struct CountedTrace {
  std::unique_ptr<TraceFile> file;
  EventCounts counts;
};
absl::StatusOr<CountedTrace> CountTraceFile(const std::string& path);

// The lines shown at the top of this file, each ending in '\n'.
std::string FormatEventCounts(const EventCounts& counts);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_REPLAY_EVENT_COUNTS_H_
