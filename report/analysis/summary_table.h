// `gpumem report --summary`: per device, a table in the layout of PyTorch's
// `torch.cuda.memory_summary()` (rows, columns, large/small pool sub-rows, unit formatting), filled
// from the trace's memory events, followed by notes that say what each row was measured from and
// why a row the trace cannot support says n/a. The rules per recording mode are in
// report/README.md ("Summary table").
//
// Recording modes, decided once per trace from the allocations' stacks
// (report/stacks/memory_holders.h):
// - kTensors: PyTorch's cudaMallocAsync backend. Each stream-ordered allocation made from
//   libc10_cuda.so is one tensor: the Allocated, Active, Requested, Allocations and Active allocs
//   rows are measured from them. The native caching allocator did not run: its reserved,
//   segment, non-releasable and oversize rows and its OOMs and retries are modelled, the tensors
//   replayed through an allocator model (report/allocator/allocator_replay.h), and marked so;
//   without a model they are n/a.
// - kSegments: PyTorch's native caching allocator. Each cudaMalloc/cuMemAlloc (or, with expandable
//   segments, cuMemCreate) made from libc10_cuda.so is one of its segments: GPU reserved memory and
//   GPU reserved segments are measured; tensors are not visible (n/a).
// - kPlain: no PyTorch allocator in the stacks. Every device allocation is an allocation and its
//   own segment.
// In the PyTorch modes, memory that PyTorch does not count either (cuBLAS and cuDNN workspaces,
// cudaMalloc calls made outside its allocator) is left out of the rows and named in a note.
#ifndef GPUMEM_REPORT_ANALYSIS_SUMMARY_TABLE_H_
#define GPUMEM_REPORT_ANALYSIS_SUMMARY_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/trace.pb.h"
#include "report/allocator/allocator_model.h"
#include "report/stacks/memory_holders.h"
#include "report/stacks/recording_mode.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

class AllocatorReplay;

// PyTorch's `_format_size`: 6-digit integer and a 3-character binary unit ("  1234 KiB",
// "    12 B  "). The unit is chosen by `reference` (the value of the row's "all" line in that
// column): the next unit while the reference is at least 768 of the current one; the value is
// divided (rounding down) as many times.
std::string FormatSummarySize(uint64_t bytes, uint64_t reference);
// PyTorch's `_format_count`: 7-digit integer, a unit " ", "K" or "M" (powers of 1000, the next
// while the reference is at least 750 000 of the current one) and a space ("    475   ").
std::string FormatSummaryCount(uint64_t count, uint64_t reference);

// The 1 MiB rule of PyTorch's caching allocator: an allocation of at most this size comes from
// the small pool. Its small-pool segments are 2 MiB, its large-pool segments larger. The values are
// the allocator model's (report/allocator/allocator_model.h), the one place that states PyTorch's
// rules.
inline constexpr uint64_t kSmallAllocationLimit = NativeAllocatorModel::kSmallSize;
inline constexpr uint64_t kSmallSegmentLimit = NativeAllocatorModel::kSmallBuffer;

// Device memory the rows leave out (PyTorch modes) or include (plain mode), by who made it.
struct SummaryHolding {
  std::string id;    // "cublas_workspace", "cudnn_workspace", "pytorch_caching_allocator", "other"
  std::string name;  // "cuBLAS", ..., "outside PyTorch's allocator"
  std::vector<std::string> apis;  // the APIs it was allocated with, by name
  uint64_t bytes = 0;             // everything allocated
  uint64_t count = 0;
  uint64_t live_bytes = 0;  // still live at the end
  uint64_t live_count = 0;
};

// Which model fills the rows a tensor-level trace cannot measure (`report --allocator`).
enum class SummaryModelChoice {
  kFromSettings,  // the native model, or the expandable one where the trace's allocator settings
                  // had expandable_segments:True; their max_split_size_mb
  kNative,
  kExpandable,
  kNone,  // n/a
};

// The model behind a tensor-level summary's modelled rows.
struct SummaryModel {
  AllocatorKind kind = AllocatorKind::kNative;
  bool chosen = false;  // by --allocator, not from the settings
  // max_split_size_mb from the settings, in bytes (the native model keeps it; the expandable
  // one does not); unlimited when not set.
  uint64_t max_split_size = std::numeric_limits<uint64_t>::max();
  // The user's allocator settings that the trace gives ("PYTORCH_CUDA_ALLOC_CONF was
  // 'max_split_size_mb:128' before gpumem record --tensors"), and what the model took from them;
  // empty without settings.
  std::string settings;
};

// The model of `choice`, with the user's allocator settings from a trace header's options (looked
// up by `option`, see UserAllocConfOf); nullopt for kNone.
std::optional<SummaryModel> ChooseSummaryModel(
    SummaryModelChoice choice,
    const std::function<std::optional<std::string>(const std::string&)>& option);

// One device as the model left it: at the end, or where it ran out (the program would have died
// there).
struct DeviceModel {
  uint64_t device_memory = 0;     // what the model was given: the device's total memory, if known
  AllocatorModelStats stats;      // retries, OOMs, its own allocated bytes
  AllocatorPoolStats pool_stats;  // the modelled rows
  uint64_t non_releasable_at_peak = 0;  // AllocatorModel::NonReleasable() at the reserved peak
  bool ran_out = false;
};

struct DeviceSummary {
  int32_t device = 0;  // ordinal; -1 where the trace does not say
  std::string name;    // from the trace's Device packet, escaped; empty when absent
  // Tensors (kTensors) or allocations (kPlain); unused in kSegments.
  PoolStat allocated_bytes;
  PoolStat allocations;
  // Segments (kSegments) or the allocations that are their own segments (kPlain); unused in
  // kTensors.
  PoolStat reserved_bytes;
  PoolStat segments;
  // kPlain: stream-ordered allocations, left out of the reserved rows (their pool's size is not
  // recorded).
  uint64_t pool_allocations = 0;
  uint64_t pool_allocation_bytes = 0;
  // The device's memory pools' own reserved size, from the trace's PoolUsage packets (the pools'
  // attributes), when it has any: at the end and at most. Reported in the notes, not in the rows
  // (it is not split by pool, and a pool has no segments).
  bool pool_reserved_known = false;
  uint64_t pool_reserved_current = 0;
  uint64_t pool_reserved_peak = 0;
  // Out-of-memory failures (result 2) of the allocations the rows count: a failure followed, as the
  // next attempt of that kind on the device, by one of the same size and API is a retry; any other
  // is an OOM.
  uint64_t ooms = 0;
  uint64_t retries = 0;
  // kTensors, kSegments: left out of the rows; kPlain: the libraries' share of the rows.
  std::vector<SummaryHolding> holdings;
  // kTensors with Summary::model: the model's figures for this device.
  std::optional<DeviceModel> model;
};

struct Summary {
  SummaryMode mode = SummaryMode::kPlain;
  bool expandable_segments = false;    // kSegments made of cuMemCreate physical memory
  bool complete = true;                // the trace holds the whole run: Cur Usage is at exit
  RecordingEnd ended;                  // when not complete: how the trace ended
  std::optional<SummaryModel> model;   // kTensors only: the model of the modelled rows
  std::vector<DeviceSummary> devices;  // ascending, -1 last
};

// The summary of one process's memory events, fed one at a time in seq order: one table builder
// per candidate mode in the same pass (ModeCandidates); memory is bounded by the live set.
class SummaryAnalysis {
 public:
  // Holders from `holder_of` (may be empty); device names left empty, the trace taken as complete;
  // `model` without allocator settings, on devices of unlimited memory.
  explicit SummaryAnalysis(HolderOfStack holder_of,
                           SummaryModelChoice model = SummaryModelChoice::kNone);
  // For a trace being streamed: holders from the modules of its stacks (HoldersOfTrace); Finish()
  // takes device names from its Device packets and completeness from its footer; `model` with the
  // allocator settings of its header and on devices of their total memory. `trace` must outlive
  // the analysis.
  explicit SummaryAnalysis(const TraceFile& trace,
                           SummaryModelChoice model = SummaryModelChoice::kNone);
  ~SummaryAnalysis();

  void Add(const MemoryEvent& event);
  // The summary, once every event was added.
  Summary Finish();

 private:
  class Builder;
  class Tables;
  SummaryAnalysis(HolderOfStack holder_of, const TraceFile* trace, SummaryModelChoice model);
  // The replay for the modelled rows, made at the first event: the trace's header is read by
  // then.
  void StartModel();

  const TraceFile* trace_ = nullptr;
  SummaryModelChoice model_choice_;
  std::optional<SummaryModel> model_;
  std::unique_ptr<AllocatorReplay> replay_;  // with a model
  bool tensor_replayed_ = false;
  std::unique_ptr<CachedHolderOf> holders_;  // the builders point at it: it must not move
  std::unique_ptr<Tables> tables_;           // the live allocations, shared by every mode
  ModeCandidates<std::unique_ptr<Builder>> candidates_;
};

// SummaryAnalysis over `events` (one process's memory events in seq order). Device names are left
// empty.
Summary ComputeSummary(const std::vector<MemoryEvent>& events, const HolderOfStack& holder_of,
                       SummaryModelChoice model = SummaryModelChoice::kNone);

// The same for a trace that was read whole: holders from the modules of its stacks (no symbols
// needed), device names from its Device packets, completeness from its footer.
Summary SummarizeTrace(const TraceFile& trace, const std::vector<MemoryEvent>& events);

// One row of the table: PyTorch's metric name and memory_stats key.
struct SummaryRow {
  const char* metric;               // "Allocated memory"
  const char* key;                  // "allocated_bytes"
  bool bytes;                       // sizes (else counts)
  bool pools;                       // has the "from large pool" / "from small pool" lines
  const PoolStat* value = nullptr;  // nullptr: n/a
  bool modelled = false;            // from Summary::model, not measured
};
// The 11 rows in PyTorch's order, for one device.
std::vector<SummaryRow> SummaryRows(const Summary& summary, const DeviceSummary& device);

// A note under a device's table: the rows it is about (none for a general one) and what it says.
struct SummaryNote {
  std::vector<std::string> rows;
  std::string text;
};
std::vector<SummaryNote> SummaryNotes(const Summary& summary, const DeviceSummary& device);

// The table of each device (75 columns inside the `|` borders, as PyTorch prints it) followed by
// its notes; devices separated by a blank line. "summary: no device memory allocated" without any.
std::string SummaryText(const Summary& summary);
// The JSON array of devices (schema: report/README.md).
std::string SummaryJson(const Summary& summary);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ANALYSIS_SUMMARY_TABLE_H_
