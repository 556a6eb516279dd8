// Replay of a trace's allocations through an allocator model (report/allocator/allocator_model.h):
// what PyTorch's native caching allocator, its expandable segments, or the cudaMallocAsync pool
// would have reserved from the driver for the same tensors, per device, over time, at its peak, and
// on a device of a given size whether (and where) it would have run out. The base of `gpumem
// whatif` and of the summary table's modelled rows.
//
// What is replayed depends on the trace's recording mode (report/stacks/recording_mode.h), decided
// as the summary table decides it and through the same rule (CountedInMode):
// - kTensors: the stream-ordered allocations PyTorch made, one per tensor; memory other libraries
//   allocated directly (cuBLAS workspaces, NCCL's cuMem buffers) is not the allocator's, and is
//   kept apart (`outside`; VMM memory by replay.h's rules, other processes' imported memory not);
// - kPlain: every plain device allocation (a plain CUDA program's cudaMalloc calls), as allocations
//   the model serves; VMM memory is not replayed;
// - kSegments: PyTorch's segments, not its tensors: nothing a model could serve. Replayed all the
//   same (as if each segment were a tensor) so the replay stays one pass; callers refuse the mode.
//
// Each device has a model of its own, fed in seq order: an allocation by its address, a free by
// the address it names (a free names no device). Once a device runs out of memory its model stops
// (the program would have died there): its figures are as of that moment.
#ifndef GPUMEM_REPORT_ALLOCATOR_ALLOCATOR_REPLAY_H_
#define GPUMEM_REPORT_ALLOCATOR_ALLOCATOR_REPLAY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/trace.pb.h"
#include "report/allocator/allocator_model.h"
#include "report/allocator/replayed_tensors.h"
#include "report/replay/event_counts.h"
#include "report/replay/memory_timeline.h"
#include "report/replay/replay.h"
#include "report/stacks/recording_mode.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// Where a device ran out of memory under the model.
struct ModelledOom {
  uint64_t seq = 0;
  uint64_t timestamp_ns = 0;
  uint64_t size = 0;  // the request
  uint64_t stream = 0;
  uint64_t stack_id = 0;
  Tally live;                         // the replayed allocations live then
  std::vector<SiteTally> live_sites;  // the same by stack id, largest first
};

struct ModelledDevice {
  int32_t device = 0;
  uint64_t device_memory = 0;     // what the model was given
  AllocatorModelStats stats;      // at the end, or at the out-of-memory error
  AllocatorPoolStats pool_stats;  // the same moment, as torch.cuda.memory_stats() keeps them
  bool knows_blocks = true;       // AllocatorModel::KnowsBlocks()
  // At the (first) highest reserved: when, and the blocks then.
  uint64_t peak_seq = 0;
  uint64_t peak_timestamp_ns = 0;
  uint64_t allocated_at_peak = 0;
  uint64_t non_releasable_at_peak = 0;
  uint64_t largest_free_at_peak = 0;
  uint64_t free_in_segments_at_peak = 0;
  // Reserved and allocated (in_use) at kFragmentationSamples evenly spaced times.
  std::vector<FragmentationPoint> timeline;
  uint64_t allocations = 0;   // replayed
  uint64_t outside_peak = 0;  // highest live device memory not replayed (cuBLAS, ...)
  std::optional<ModelledOom> oom;
};

struct AllocatorReplayResult {
  AllocatorKind kind = AllocatorKind::kNative;
  uint64_t device_memory = 0;
  SummaryMode mode = SummaryMode::kPlain;
  std::vector<ModelledDevice> devices;  // ascending, -1 last
  // With AllocatorReplayConfig::keep_tensors: every allocation the model was given, in seq order,
  // with its free and its last use by a launch (AllocatorReplay::AddLaunch).
  std::vector<ReplayedTensor> tensors;
};

// What each device's model is given.
struct AllocatorReplayConfig {
  // device_memory: for every device, unless device_memory_of says; max_split_size: the native
  // model's.
  NativeAllocatorConfig model;
  // When set, the memory of each device by ordinal (its total, from the trace).
  std::function<uint64_t(int32_t device)> device_memory_of;
  // Keep the allocations replayed (AllocatorReplayResult::tensors), for replays of their own.
  bool keep_tensors = false;
};

class AllocatorReplay {
 public:
  // `holder_of` decides which allocations PyTorch made (HoldersOfTrace for a trace).
  AllocatorReplay(AllocatorKind kind, AllocatorReplayConfig config, HolderOfStack holder_of);
  // Every device of `device_memory`, max_split_size not set.
  AllocatorReplay(AllocatorKind kind, uint64_t device_memory, HolderOfStack holder_of);
  ~AllocatorReplay();
  // `event` in seq order.
  void Add(const MemoryEvent& event);
  // A launch in the same seq order: the kept tensors it received were used then.
  void AddLaunch(const LaunchEvent& launch);
  AllocatorReplayResult Finish();

 private:
  class Candidate;
  std::unique_ptr<CachedHolderOf> holders_;
  ModeCandidates<std::unique_ptr<Candidate>> candidates_;
  AllocatorKind kind_;
  AllocatorReplayConfig config_;
  bool any_event_ = false;
  uint64_t first_timestamp_ns_ = 0;
  uint64_t last_timestamp_ns_ = 0;
};

// Streams `file` (opened, not read yet: TraceFile::ReadPackets reads a file once) in seq order
// through one AllocatorReplay per kind, in one pass; the results in the order of `kinds`. Launches
// are read too when `config` keeps tensors.
std::vector<AllocatorReplayResult> ReplayThroughAllocators(TraceFile& file,
                                                           const std::vector<AllocatorKind>& kinds,
                                                           uint64_t device_memory);
// The same with each device's memory and max_split_size as `config` says.
std::vector<AllocatorReplayResult> ReplayThroughAllocators(TraceFile& file,
                                                           const std::vector<AllocatorKind>& kinds,
                                                           const AllocatorReplayConfig& config);
// The same for one kind and the trace at `path`. Fails as TraceFile::Open does.
absl::StatusOr<AllocatorReplayResult> ReplayThroughAllocator(const std::string& path,
                                                             AllocatorKind kind,
                                                             uint64_t device_memory);

// The step of the smallest-fit search: PyTorch's large segments round to 2 MiB.
inline constexpr uint64_t kFitSearchStep = uint64_t{2} << 20;

// The smallest multiple of kFitSearchStep on which every device of `unlimited` (the replay with no
// limit) fits, per device in the order of `unlimited.devices` (2^64 - 1 for a peak that rounds past
// it): a binary search over replays of `path`, each probing every device at a size of its own
// (assuming that a device that fits fits on any larger one too, which holds when the model's
// choices do not depend on the limit: they do only through the empty-the-cache retry). Fails when
// the file cannot be opened again.
absl::StatusOr<std::vector<uint64_t>> SmallestFit(const std::string& path, AllocatorKind kind,
                                                  const AllocatorReplayResult& unlimited);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ALLOCATOR_ALLOCATOR_REPLAY_H_
