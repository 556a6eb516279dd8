// The tensors a replay keeps, replayed again on their own (report/allocator/replayed_tensors.h):
// unchanged, they give every model's figures exactly as the replay of the trace did; a free moved
// earlier lowers the peak as the model says; launches mark each tensor's last use.
#include "report/allocator/replayed_tensors.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "report/allocator/allocator_replay.h"
#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using testing::SourcePath;

constexpr uint64_t kMiB = uint64_t{1} << 20;

AllocatorReplayResult KeptReplay(AllocatorKind kind, uint64_t device_memory) {
  absl::StatusOr<std::unique_ptr<TraceFile>> file =
      TraceFile::Open(SourcePath("samples/traces/train_mlp-async-h100.trace"));
  EXPECT_TRUE(file.ok()) << file.status();
  AllocatorReplayConfig config;
  config.model.device_memory = device_memory;
  config.keep_tensors = true;
  return std::move(ReplayThroughAllocators(**file, {kind}, config).front());
}

TEST(ReplayedTensorsTest, UnchangedTheyReplayAsTheTraceDid) {
  for (const AllocatorKind kind : kAllAllocators) {
    const AllocatorReplayResult traced = KeptReplay(kind, kUnlimitedDeviceMemory);
    ASSERT_EQ(traced.devices.size(), 1u);
    EXPECT_EQ(traced.tensors.size(), traced.devices[0].allocations);
    NativeAllocatorConfig unlimited;
    const TensorReplayOutcome again = ReplayTensors(traced.tensors, kind, unlimited);
    ASSERT_EQ(again.devices.size(), 1u);
    EXPECT_EQ(again.devices[0].reserved_peak, traced.devices[0].stats.reserved_peak)
        << AllocatorKindName(kind);
    EXPECT_EQ(again.devices[0].allocated_peak, traced.devices[0].stats.allocated_peak);
    EXPECT_EQ(again.devices[0].peak_at, PositionOf(traced.devices[0].peak_seq));
    EXPECT_TRUE(again.Fits());
  }
}

TEST(ReplayedTensorsTest, RunsOutWhereTheTraceRanOut) {
  // 60 MiB: every model runs out on this trace (whatif's test), at the same request.
  for (const AllocatorKind kind : kAllAllocators) {
    const AllocatorReplayResult traced = KeptReplay(kind, 60 * kMiB);
    ASSERT_TRUE(traced.devices[0].oom.has_value()) << AllocatorKindName(kind);
    // The tensors kept stop at the request that failed: keep them with no limit instead.
    const std::vector<ReplayedTensor> tensors = KeptReplay(kind, kUnlimitedDeviceMemory).tensors;
    NativeAllocatorConfig limited;
    limited.device_memory = 60 * kMiB;
    const TensorReplayOutcome again = ReplayTensors(tensors, kind, limited);
    ASSERT_TRUE(again.devices[0].oom.has_value());
    EXPECT_FALSE(again.Fits());
    EXPECT_EQ(tensors[*again.devices[0].oom].allocated_at, PositionOf(traced.devices[0].oom->seq));
  }
}

TEST(ReplayedTensorsTest, LaunchesMarkTheLastUse) {
  const std::vector<ReplayedTensor> tensors =
      KeptReplay(AllocatorKind::kNative, kUnlimitedDeviceMemory).tensors;
  const size_t used = std::count_if(tensors.begin(), tensors.end(),
                                    [](const ReplayedTensor& t) { return t.last_use_at != 0; });
  EXPECT_GT(used, tensors.size() / 2);
  for (const ReplayedTensor& tensor : tensors) {
    if (tensor.last_use_at == 0) continue;
    EXPECT_EQ(tensor.last_use_at % 2, 1u);  // just after a launch
    EXPECT_GT(tensor.last_use_at, tensor.allocated_at);
    EXPECT_LT(tensor.last_use_at, tensor.freed_at);
  }
}

ReplayedTensor Tensor(uint64_t size, uint64_t allocated_seq, uint64_t freed_seq) {
  ReplayedTensor tensor;
  tensor.size = size;
  tensor.allocated_at = PositionOf(allocated_seq);
  tensor.freed_at = PositionOf(freed_seq);
  return tensor;
}

TEST(ReplayedTensorsTest, AFreeMovedBeforeTheNextAllocationLowersThePeak) {
  // Two 30 MiB tensors that overlap (the second allocated at seq 2, the first freed at seq 3):
  // two segments under the native model. Freed just after seq 1, the first leaves its segment to
  // the second.
  std::vector<ReplayedTensor> tensors = {Tensor(30 * kMiB, 1, 3), Tensor(30 * kMiB, 2, 4)};
  const NativeAllocatorConfig unlimited;
  EXPECT_EQ(ReplayTensors(tensors, AllocatorKind::kNative, unlimited).ReservedPeak(), 60 * kMiB);
  tensors[0].freed_at = JustAfter(1);
  const TensorReplayOutcome moved = ReplayTensors(tensors, AllocatorKind::kNative, unlimited);
  EXPECT_EQ(moved.ReservedPeak(), 30 * kMiB);
  EXPECT_EQ(moved.devices[0].peak_at, PositionOf(1));
  // Size 0 is left out; a tensor never freed stays.
  tensors.push_back(Tensor(0, 5, 6));
  tensors.push_back(Tensor(2 * kMiB, 7, 8));
  tensors.back().freed_at = kNeverFreed;
  EXPECT_EQ(ReplayTensors(tensors, AllocatorKind::kNative, unlimited).devices[0].allocated_peak,
            30 * kMiB);
}

}  // namespace
}  // namespace gpumem::report
