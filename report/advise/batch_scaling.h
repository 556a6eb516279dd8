// The batch size, extrapolated from two recordings of one script at two batch sizes: each
// allocation of the first run matched to its counterpart in the second (the same allocation point,
// the same occurrence within its iteration), its size fitted as constant + per-sample, the tensor
// stream synthesized at any batch and replayed through an allocator model to find the largest batch
// that fits, and the gradient-accumulation steps that keep the first run's effective batch.
//
// The rules:
// - A tensor's identity across the two runs is (allocation point, iteration, occurrence): the
//   occurrence counts the tensors of the same allocation point allocated before it in the same
//   iteration. A tensor of an iteration the other run does not have, or one past the other run's
//   count, has no counterpart; it keeps its size at every batch (per_sample 0).
// - A matched size is the straight line through its two sizes; lifetimes (allocated_at, freed_at,
//   last_use_at), stream, device and stack id are the first run's at every batch.
// - The search assumes that a batch that fits means every smaller one fits: it doubles from 1 to
//   find a batch that does not fit, then halves the interval; peaks are reserved peaks.
#ifndef GPUMEM_REPORT_ADVISE_BATCH_SCALING_H_
#define GPUMEM_REPORT_ADVISE_BATCH_SCALING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "report/allocator/allocator_model.h"
#include "report/allocator/replayed_tensors.h"

namespace gpumem::report {

// One recording, as the fit needs it.
struct BatchTrace {
  int64_t batch = 0;
  std::vector<ReplayedTensor> tensors;  // AllocatorReplayResult::tensors, in seq order
  // Per tensor: its allocation point, comparable across two runs of the same script (the whole
  // stack's symbolized frames, no addresses).
  std::vector<std::string> keys;
  // Per tensor: the iteration it was allocated in (0 before the first, 1, 2, ...); all 0 when no
  // iterations were found.
  std::vector<uint32_t> iterations;
};

// Each tensor of the first trace, sized as constant + per_sample x batch.
struct BatchModel {
  int64_t first_batch = 0;
  int64_t second_batch = 0;
  std::vector<ReplayedTensor> tensors;  // the first trace's
  std::vector<double> constant;         // per tensor
  std::vector<double> per_sample;       // per tensor; 0 for one not matched (its size kept)
  size_t matched = 0;                   // tensors matched to the second trace
};

// Matches the two traces' tensors and fits each matched size: per_sample = (size1 - size2) /
// (batch1 - batch2), constant = size1 - per_sample x batch1. Fails when the batch sizes are equal
// or not positive, when a trace's keys or iterations are not one per tensor, or when no tensor
// matches (not the same script).
absl::StatusOr<BatchModel> FitBatchModel(const BatchTrace& first, const BatchTrace& second);

// The first trace's tensors at `batch`: llround(constant + per_sample x batch); a size that would
// fall to 0 or below leaves the tensor out, as size 0 (ReplayTensors skips it).
std::vector<ReplayedTensor> TensorsAtBatch(const BatchModel& model, int64_t batch);

struct LargestBatch {
  AllocatorKind kind = AllocatorKind::kNative;
  int64_t batch = 0;       // 0: not even a batch of 1 fits
  uint64_t peak = 0;       // the modelled reserved peak at `batch` (at 1 when none fits)
  bool unbounded = false;  // still fits at kMaxBatch
};
inline constexpr int64_t kMaxBatch = int64_t{1} << 20;

// The largest batch (1..kMaxBatch) whose synthesized stream fits under `config` with `kind`,
// searched assuming a batch that fits means every smaller one fits.
LargestBatch FindLargestBatch(const BatchModel& model, AllocatorKind kind,
                              const NativeAllocatorConfig& config);

struct Accumulation {
  int64_t effective_batch = 0;
  int64_t steps = 0;        // micro-batches per optimizer step; 0: no batch fits
  int64_t micro_batch = 0;  // effective_batch / steps, exactly
};
// The fewest steps k with effective_batch % k == 0 and effective_batch / k <= largest.
Accumulation AccumulationFor(int64_t effective_batch, int64_t largest);

// The batch sizes of two recordings of one script, from their command lines, compared argument by
// argument: the one position where both hold a positive integer ("16" as in "--batch 16", or
// "NAME=16" with the same NAME in both, as "--batch=16" or "batch_size=16") and the two differ.
// Positions that differ otherwise (a log file's name) are not the batch and are passed over.
// Fails, telling the user to pass --batch-sizes A,B, when the lines differ in length or when no
// such position or several are found.
absl::StatusOr<std::pair<int64_t, int64_t>> BatchSizesFromCommandLines(
    const std::vector<std::string>& first, const std::vector<std::string>& second);

// The command that records a second run at another batch size, for a user who gave one trace:
// "gpumem record --tensors -o second.trace -- " and `command_line` with its batch argument halved
// (doubled when 1), each argument a shell word (ShellWord, report/format/printable.h). The batch
// argument is the first of: an option ("-..." without '=') whose name contains "batch" in any case,
// followed by a positive integer ("--batch-size 16"), or NAME=N with NAME containing "batch"
// ("--batch=16", "--per_device_train_batch_size=16", "batch_size=16"). nullopt when there is none.
std::optional<std::string> SecondRecordingCommand(const std::vector<std::string>& command_line);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ADVISE_BATCH_SCALING_H_
