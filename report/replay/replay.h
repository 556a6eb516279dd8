// Replay of one trace's memory events in `seq` order: what was live on each device at every
// moment, when each device peaked and what it held then (by call site), and what was still live at
// the end. The base of `gpumem report` and `gpumem check`.
//
// Accounting (report/README.md, "Memory accounting"):
// - Memory use is counted per place: a device ordinal, or kPinnedHost for page-locked host memory.
//   Device, managed and pool (stream-ordered) allocations count on their device.
// - VMM: a reservation (cuMemAddressReserve) is address space, not memory; a physical allocation
//   (cuMemCreate) is the memory, counted on its device from creation until its last reference is
//   released (cuMemRelease) and it is unmapped everywhere (cuMemUnmap), as the driver frees it;
//   mappings are not counted again. References: cuMemCreate makes one, cuMemRetainAllocationHandle
//   and an import of the process's own handle one more each, cuMemRelease takes one; a release
//   with none left is a double free.
// - A handle imported from another process (cuMemImportFromShareableHandle) is that process's
//   memory: never counted on a device here, nor in the live set; what is mapped of it is counted
//   apart ("mapped from other processes").
// - A free names no device (-1): it takes the device of the allocation it matches. Plain frees
//   (cudaFree, cuMemFree, often KIND_UNKNOWN) match any plain allocation by address.
// - Anomalies are counted, never fatal: a free of a pointer never allocated, a second free of an
//   allocation, an allocation over a live range (the older allocation is dropped from the live set:
//   its free was evidently missed), and, when a file is replayed, an allocation of an impossible
//   size (left out before the replay: report/trace/event_stream.h).
//
// Memory used by the replay is bounded by the live set (and the set of addresses freed, for double
// free detection, and a tally per call site), not by trace length: the peak's live set is kept as
// per-stack tallies of what was freed since the peak, not as snapshots.
#ifndef GPUMEM_REPORT_REPLAY_REPLAY_H_
#define GPUMEM_REPORT_REPLAY_REPLAY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "core/trace.pb.h"
#include "report/replay/event_counts.h"
#include "report/replay/live_ranges.h"
#include "report/replay/tallies_by_stack_id.h"
#include "report/trace/event_stream.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// The place of page-locked host memory. Device ordinals are >= 0; -1 is a device allocation whose
// device the trace does not say.
inline constexpr int32_t kPinnedHost = -2;

// Bytes and count held by one call site (stack id; 0: no stack recorded).
struct SiteTally {
  uint64_t stack_id = 0;
  Tally tally;
};

// One allocation that is live (plain, or VMM physical memory; reservations and mappings are not
// memory use): where it counts, its size, and the event that made it.
struct LiveAllocation {
  uint64_t size = 0;
  uint64_t seq = 0;
  uint64_t stack_id = 0;
  int32_t place = 0;
  // A number no other live allocation has, taken again once this one ends: small and dense, so
  // that observers keep what they track of each allocation in an array, not a hash map by seq.
  uint32_t index = 0;
};

// The place an allocation (or failed allocation) event counts on: kPinnedHost for page-locked host
// memory, else the event's device.
int32_t PlaceOf(const MemoryEvent& event);
int32_t PlaceOf(const MemoryEventFields& event);

struct ReplayAnomalies {
  uint64_t unknown_frees = 0;            // a free of an address or handle never allocated
  uint64_t double_frees = 0;             // a free of an allocation already freed
  uint64_t overlapping_allocations = 0;  // an allocation over a live range
  uint64_t impossible_sizes = 0;         // an allocation larger than kMaxAllocationBytes, left out

  uint64_t total() const {
    return unknown_frees + double_frees + overlapping_allocations + impossible_sizes;
  }
};

// One place's memory over the replay.
struct PlaceUsage {
  int32_t place = 0;               // device ordinal, -1 unknown device, or kPinnedHost
  Tally allocated;                 // every allocation counted here (VMM: cuMemCreate)
  Tally live;                      // live now (at the end of the replay: never freed)
  uint64_t peak_bytes = 0;         // highest live bytes
  uint64_t peak_seq = 0;           // seq of the event that first reached it
  uint64_t peak_timestamp_ns = 0;  // its CLOCK_MONOTONIC timestamp
  // What was live at the peak, by call site, largest first (ties by stack id).
  std::vector<SiteTally> peak_sites;
  // What is live now, by call site, largest first.
  std::vector<SiteTally> live_sites;
  // Every allocation counted here (`allocated`), by call site, largest first.
  std::vector<SiteTally> allocated_sites;
};

class Replay;

// Analyses that follow a replay event by event (report/analysis/kernels.h): told after each memory
// event and each launch, in seq order, and when an allocation leaves the live set.
class ReplayObserver {
 public:
  virtual ~ReplayObserver() = default;
  // The event as plain fields (report/trace/memory_event_decoder.h): no MemoryEvent is built for
  // the replay's own pass; ToProto() makes one where an observer needs it.
  virtual void AfterMemory(const MemoryEventFields& event, const Replay& replay) = 0;
  virtual void AddLaunch(const LaunchEvent& launch, const Replay& replay) = 0;
  // Made live (plain, or VMM physical memory of this process), before AfterMemory() of its event.
  virtual void AllocationStarted(const LiveAllocation&) {}
  // Freed, released (VMM: released and unmapped everywhere), or dropped under a newer allocation.
  virtual void AllocationEnded(const LiveAllocation& live) = 0;
  // The end of the trace; `replay` holds what is still live.
  virtual void Finished(const Replay& replay) = 0;
};

// An observer that takes each memory event as a MemoryEvent (the exports and the viewer, which
// read many of its fields), built once per event into one reused message.
class MemoryEventObserver : public ReplayObserver {
 public:
  void AfterMemory(const MemoryEventFields& fields, const Replay& replay) final {
    ToProto(fields, &event_);
    AfterMemoryEvent(event_, replay);
  }
  virtual void AfterMemoryEvent(const MemoryEvent& event, const Replay& replay) = 0;

 private:
  MemoryEvent event_;
};

class Replay {
 public:
  explicit Replay(ReplayObserver* observer = nullptr) : observer_(observer) {}
  ReplayObserver* observer() const { return observer_; }
  // `event` must come in seq order (one process's events).
  void Add(const MemoryEventFields& event);
  void Add(const MemoryEvent& event) { Add(FromProto(event)); }

  // Every place that saw an allocation: devices ascending, then -1, then kPinnedHost.
  std::vector<PlaceUsage> Places() const;
  const ReplayAnomalies& anomalies() const { return anomalies_; }
  // Allocations that failed out of memory (IsOutOfMemoryResult), and those that failed otherwise.
  uint64_t failed_allocations() const { return failed_allocations_; }
  uint64_t failed_calls() const { return failed_calls_; }
  // VMM address space reserved (not memory): live now and at most.
  uint64_t reserved_bytes() const { return reserved_bytes_; }
  uint64_t reserved_peak_bytes() const { return reserved_peak_bytes_; }
  // Memory of other processes mapped here (imported handles' mappings): live now and at most.
  uint64_t imported_mapped_bytes() const { return imported_mapped_bytes_; }
  uint64_t imported_mapped_peak_bytes() const { return imported_mapped_peak_bytes_; }
  // Where LiveBytes(place) is kept, nullptr until the place's first allocation: the same counter
  // for the replay's whole life (places are never dropped), so a follower of every event reads it
  // without a lookup.
  const uint64_t* LiveBytesCounter(int32_t place) const {
    const auto it = places_.find(place);
    return it == places_.end() ? nullptr : &it->second.usage.live.bytes;
  }
  // Bytes live now on `place` (0 for a place that saw no allocation): cheap, for timelines.
  uint64_t LiveBytes(int32_t place) const {
    // Nearly always the place of the event just replayed: no search.
    if (last_state_ != nullptr && last_place_ == place) return last_state_->usage.live.bytes;
    const auto it = places_.find(place);
    return it == places_.end() ? 0 : it->second.usage.live.bytes;
  }

  // The live allocation whose range holds `address` (an interior pointer too): a plain
  // allocation, or the physical memory behind a VMM mapping. nullptr when none does.
  const LiveAllocation* FindContaining(uint64_t address) const;

  // Calls `visit(const LiveAllocation&)` for every allocation live after the events added so far,
  // in no particular order: the live set at any moment, for analyses that stop the replay there
  // (an OOM, an iteration boundary). Costs one pass over the live set.
  template <typename Visit>
  void ForEachLive(Visit&& visit) const {
    plain_.ForEach(visit);
    for (const auto& [handle, physical] : physical_) {
      if (!physical.imported) visit(physical.live);
    }
  }

 private:
  using Live = LiveAllocation;
  struct Physical {
    Live live;
    uint32_t references = 1;  // 0: released, kept by its mappings
    uint32_t mappings = 0;
    bool imported = false;  // another process's memory
  };
  struct Mapping {
    uint64_t size = 0;
    uint64_t handle = 0;
    bool imported = false;  // of an imported handle: counted in imported_mapped_bytes_
  };
  struct PlaceState {
    PlaceUsage usage;
    // Since the last peak: what was live at it and freed after it, by stack id.
    TalliesByStackId freed_since_peak;
    TalliesByStackId allocated_by_stack;  // PlaceUsage::allocated_sites
  };

  void Count(const Live& live, const MemoryEventFields& event);
  void Uncount(const Live& live);
  PlaceState& StateOf(int32_t place) {
    if (last_state_ != nullptr && last_place_ == place) return *last_state_;  // nearly always
    return FindState(place);
  }
  PlaceState& FindState(int32_t place);
  void AllocPlain(const MemoryEventFields& event);
  void FreePlain(const MemoryEventFields& event);
  void AllocPhysical(const MemoryEventFields& event);
  void ImportPhysical(const MemoryEventFields& event);
  void RetainPhysical(const MemoryEventFields& event);
  void ReleasePhysical(const MemoryEventFields& event);
  void EndPhysical(absl::flat_hash_map<uint64_t, Physical>::iterator it);
  void Map(const MemoryEventFields& event);
  void Unmap(const MemoryEventFields& event);
  void Unmapped(uint64_t handle, const Mapping& mapping);
  void ReserveAddress(const MemoryEventFields& event);
  void FreeAddress(const MemoryEventFields& event);
  void FreeNotFound(absl::flat_hash_set<uint64_t>& freed, uint64_t key);

  // LiveAllocation::index: the next never used, and those given back.
  uint32_t TakeIndex() {
    if (free_indices_.empty()) return next_index_++;
    const uint32_t index = free_indices_.back();
    free_indices_.pop_back();
    return index;
  }

  LiveRanges<Live> plain_;                            // plain allocations
  absl::flat_hash_map<uint64_t, Physical> physical_;  // by cuMemCreate (or imported) handle
  std::map<uint64_t, Mapping> mappings_;              // by address, ordered for cuMemUnmap ranges
  absl::flat_hash_map<uint64_t, uint64_t> reservations_;  // address -> size
  // Keys freed and not allocated again since: a free of one of them is a double free.
  absl::flat_hash_set<uint64_t> freed_handles_;
  absl::flat_hash_set<uint64_t> freed_reservations_;
  std::map<int32_t, PlaceState> places_;
  PlaceState* last_state_ = nullptr;  // StateOf()'s last answer (map nodes do not move)
  int32_t last_place_ = 0;
  ReplayObserver* observer_ = nullptr;
  uint32_t next_index_ = 0;
  std::vector<uint32_t> free_indices_;
  ReplayAnomalies anomalies_;
  uint64_t failed_allocations_ = 0;
  uint64_t failed_calls_ = 0;
  uint64_t reserved_bytes_ = 0;
  uint64_t reserved_peak_bytes_ = 0;
  uint64_t imported_mapped_bytes_ = 0;
  uint64_t imported_mapped_peak_bytes_ = 0;
};

// One trace file replayed whole.
struct TraceReplay {
  std::unique_ptr<TraceFile> file;
  uint64_t memory_events = 0;
  std::vector<PlaceUsage> places;
  ReplayAnomalies anomalies;
  uint64_t failed_allocations = 0;  // out of memory
  uint64_t failed_calls = 0;        // allocation calls that failed otherwise (error 800, ...)
  uint64_t reserved_peak_bytes = 0;
  uint64_t imported_mapped_peak_bytes = 0;  // other processes' memory mapped here, at most
  // Memory events that came in the file beyond the reorder window (report/trace/event_stream.h):
  // replayed late, out of seq order. Not a memory anomaly (not in anomalies.total()): the recording
  // raced.
  uint64_t out_of_order_events = 0;
  // Stack ids of stream-ordered pool allocations (cudaMallocAsync and kin): under PyTorch's
  // cudaMallocAsync backend each is one tensor, never an allocator's cached segment.
  absl::flat_hash_set<uint64_t> stream_ordered_stacks;
  // Allocations made during a stream capture, for the CUDA graph being captured (memory: not VMM
  // reservations or mappings), and their stacks.
  Tally for_graph;
  absl::flat_hash_set<uint64_t> graph_stacks;
};
// Streams `path` in seq order (ForEachMemoryEventBySeq, report/trace/event_stream.h) and replays
// it: memory bounded by the live set, the interned tables and the reorder window, not by the length
// of the trace. Fails as TraceFile::Open does; a damaged file replays what could be read
// (file->end() says what was lost).
absl::StatusOr<TraceReplay> ReplayTrace(const std::string& path);
// The same for a file opened (TraceFile::Open) and not read yet; `also` (may be null) sees every
// memory event too, in the same pass, just before the replay adds it: the analyses that follow the
// replay need no pass of their own. The file's tables are current up to the packet read last,
// which is ahead of the event visited.
// With an `observer`, launch events are replayed too, in seq order with the memory events.
// `packets` (may be null) sees every other packet in file order, as StreamMemoryEventsBySeq says.
TraceReplay ReplayTrace(std::unique_ptr<TraceFile> file, const MemoryEventVisitor& also,
                        ReplayObserver* observer = nullptr, const PacketVisitor& packets = nullptr);
// The same into the caller's `replay` (fresh; its observer is the pass's), which outlives the pass:
// what `also` feeds may read its live set, as it was just before each event, instead of keeping a
// replay of its own.
TraceReplay ReplayTrace(std::unique_ptr<TraceFile> file, Replay& replay,
                        const MemoryEventVisitor& also, const PacketVisitor& packets = nullptr);

// "1 free of an unknown pointer, 2 double frees" (non-zero counts), or "none".
std::string DescribeAnomalies(const ReplayAnomalies& anomalies);

// The device's name as the driver reported it, escaped for printing (report/format/printable.h);
// empty when the trace has no Device packet for it.
std::string DeviceName(int32_t ordinal, const TraceFile& trace);

// "device 0 (NVIDIA H100 80GB HBM3)" (the name when the trace has the Device packet), "device ?"
// for -1, "pinned host" for kPinnedHost.
std::string PlaceName(int32_t place, const TraceFile& trace);
// The place as JSON members: "memory":"device"|"host","device":N, and the device's name and
// total memory where the trace has them.
std::string JsonPlace(int32_t place, const TraceFile& trace);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_REPLAY_REPLAY_H_
