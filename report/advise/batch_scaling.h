// The batch size, extrapolated from two recordings of one script at two batch sizes: each
// allocation of the first run matched to its counterpart in the second (the same allocation point,
// the same occurrence within its iteration), its size fitted as constant + per-sample, the tensor
// stream synthesized at any batch and replayed through an allocator model to find the largest batch
// that fits, and the gradient-accumulation steps that keep the first run's effective batch.
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

// Matches the two traces' tensors and fits each matched size. Fails when the batch sizes are
// equal or not positive, or when no tensor matches (not the same script).
absl::StatusOr<BatchModel> FitBatchModel(const BatchTrace& first, const BatchTrace& second);

// The first trace's tensors at `batch` (sizes rounded to the byte; a size that would fall to 0 or
// below leaves the tensor out, as size 0).
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

// The batch sizes of two recordings of one script, from their command lines: the one argument that
// is an integer in both and differs (as "--batch 16", "--batch=16", "batch_size=16" or a bare
// "16"). Fails, saying so, when none or several differ.
absl::StatusOr<std::pair<int64_t, int64_t>> BatchSizesFromCommandLines(
    const std::vector<std::string>& first, const std::vector<std::string>& second);

// The command that records a second run at another batch size, for a user who gave one trace:
// `first` with its batch argument (an option whose name contains "batch", or "batch_size=N")
// halved (doubled when 1); nullopt when no argument says the batch.
std::optional<std::string> SecondRecordingCommand(const std::vector<std::string>& command_line);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ADVISE_BATCH_SCALING_H_
