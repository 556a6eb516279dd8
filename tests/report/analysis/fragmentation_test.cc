// `gpumem report --fragmentation`: reserved against in use per recording mode, on the bundled
// real H100 traces (segment level, tensor level, plain) and on synthetic events.
#include "report/analysis/fragmentation.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/analysis/summary_table.h"
#include "report/stacks/memory_holders.h"
#include "report/trace/event_stream.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using gpumem::testing::SourcePath;

constexpr uint64_t kMiB = 1 << 20;

Fragmentation OfSample(const std::string& name, Summary* summary = nullptr) {
  const std::string path = SourcePath("samples/traces/" + name);
  absl::StatusOr<SortedTrace> sorted = ReadMemoryEventsBySeq(path);
  EXPECT_TRUE(sorted.ok()) << sorted.status();
  if (!sorted.ok()) return {};
  if (summary != nullptr) *summary = SummarizeTrace(*sorted->file, sorted->events);
  return FragmentationOfTrace(*sorted->file, sorted->events);
}

TEST(FragmentationTest, SegmentLevelKnowsReservedOnly) {
  Summary summary;
  const Fragmentation f = OfSample("train_mlp-default-h100.trace", &summary);
  EXPECT_EQ(f.mode, SummaryMode::kSegments);
  EXPECT_TRUE(f.has_reserved);
  EXPECT_FALSE(f.has_in_use);
  EXPECT_FALSE(InUseNotKnownReason(f).empty());
  ASSERT_EQ(f.devices.size(), 1u);
  const DeviceFragmentation& device = f.devices[0];
  EXPECT_EQ(device.device, 0);
  EXPECT_EQ(device.peak.reserved, 92274688u);
  EXPECT_EQ(device.peak.reserved, summary.devices.at(0).reserved_bytes.all.peak);
  EXPECT_EQ(device.end.reserved, summary.devices.at(0).reserved_bytes.all.current);
  EXPECT_EQ(device.peak.in_use, 0u);
  ASSERT_EQ(device.timeline.size(), kFragmentationSamples);
  EXPECT_EQ(device.timeline.back().reserved, device.end.reserved);
  for (size_t i = 1; i < device.timeline.size(); ++i) {
    EXPECT_GE(device.timeline[i].timestamp_ns, device.timeline[i - 1].timestamp_ns);
    EXPECT_LE(device.timeline[i].reserved, device.peak.reserved);
  }
  const std::string text = FragmentationText(f);
  EXPECT_NE(text.find("reserved 88.00 MiB (92274688 bytes), in use n/a"), std::string::npos)
      << text;
  EXPECT_NE(text.find("block-level fragmentation: n/a"), std::string::npos) << text;
  EXPECT_NE(text.find("gpumem whatif models them"), std::string::npos) << text;
  const std::string json = FragmentationJson(f);
  EXPECT_NE(json.find("\"mode\":\"segments\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"reserved_bytes\":92274688,\"in_use_bytes\":null"), std::string::npos)
      << json;
}

TEST(FragmentationTest, TensorLevelKnowsInUseOnly) {
  Summary summary;
  const Fragmentation f = OfSample("train_mlp-async-h100.trace", &summary);
  EXPECT_EQ(f.mode, SummaryMode::kTensors);
  EXPECT_FALSE(f.has_reserved);
  EXPECT_TRUE(f.has_in_use);
  EXPECT_FALSE(ReservedNotKnownReason(f).empty());
  ASSERT_EQ(f.devices.size(), 1u);
  const DeviceFragmentation& device = f.devices[0];
  EXPECT_EQ(device.peak.in_use, summary.devices.at(0).allocated_bytes.all.peak);
  EXPECT_EQ(device.end.in_use, summary.devices.at(0).allocated_bytes.all.current);
  EXPECT_EQ(device.peak.reserved, 0u);
  const std::string text = FragmentationText(f);
  EXPECT_NE(text.find("at the peak of in use"), std::string::npos) << text;
  EXPECT_NE(text.find("reserved: n/a: tensor-level"), std::string::npos) << text;
  EXPECT_NE(FragmentationJson(f).find("\"peak_of\":\"in_use\""), std::string::npos);
}

TEST(FragmentationTest, PlainProgramHasNothingReservedButUnused) {
  Summary summary;
  const Fragmentation f = OfSample("leak_loop-h200.trace", &summary);
  EXPECT_EQ(f.mode, SummaryMode::kPlain);
  EXPECT_TRUE(f.has_reserved);
  EXPECT_TRUE(f.has_in_use);
  ASSERT_EQ(f.devices.size(), 1u);
  const DeviceFragmentation& device = f.devices[0];
  EXPECT_EQ(device.peak.reserved, summary.devices.at(0).reserved_bytes.all.peak);
  EXPECT_EQ(device.peak.in_use, device.peak.reserved);
  EXPECT_EQ(device.end.in_use, device.end.reserved);
  EXPECT_EQ(device.peak.unused(), 0u);
  for (const FragmentationPoint& point : device.timeline) EXPECT_EQ(point.unused(), 0u);
  EXPECT_NE(FragmentationText(f).find("reserved but unused 0 B"), std::string::npos);
}

MemoryEvent Event(uint64_t seq, Action action, int32_t device, uint64_t size, uint64_t address) {
  MemoryEvent event;
  event.set_seq(seq);
  event.set_timestamp_ns(seq * 100);
  event.set_api(action == ALLOC ? CUDA_MALLOC : CUDA_FREE);
  event.set_kind(action == ALLOC ? DEVICE : KIND_UNKNOWN);
  event.set_action(action);
  event.set_device(device);
  event.set_size(size);
  event.set_address(address);
  return event;
}

TEST(FragmentationTest, TimelineSamplesEvenlySpacedPoints) {
  // t100 +10, t200 +20 (30: the peak), t300 -10 (20), t1000 -20 (0). Samples at t100, t400, t700,
  // t1000: 10, 20, 20, 0.
  const std::vector<MemoryEvent> events = {
      Event(1, ALLOC, 0, 10 * kMiB, 0x1000'0000), Event(2, ALLOC, 0, 20 * kMiB, 0x2000'0000),
      Event(3, FREE, -1, 0, 0x1000'0000), Event(10, FREE, -1, 0, 0x2000'0000)};
  const Fragmentation f = ComputeFragmentation(events, nullptr, 4);
  ASSERT_EQ(f.devices.size(), 1u);
  const DeviceFragmentation& device = f.devices[0];
  EXPECT_EQ(device.peak.reserved, 30 * kMiB);
  EXPECT_EQ(device.peak.timestamp_ns, 200u);
  EXPECT_EQ(device.end.reserved, 0u);
  ASSERT_EQ(device.timeline.size(), 4u);
  const uint64_t expected[] = {10 * kMiB, 20 * kMiB, 20 * kMiB, 0};
  const uint64_t times[] = {100, 400, 700, 1000};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(device.timeline[i].timestamp_ns, times[i]) << i;
    EXPECT_EQ(device.timeline[i].reserved, expected[i]) << i;
    EXPECT_EQ(device.timeline[i].in_use, expected[i]) << i;
  }
}

// The value after the last point at or before `time` (points in order), 0 before the first.
uint64_t ExactAt(const std::vector<FragmentationPoint>& points, uint64_t time) {
  uint64_t value = 0;
  for (const FragmentationPoint& point : points) {
    if (point.timestamp_ns > time) break;
    value = point.reserved;
  }
  return value;
}

TEST(FragmentationTest, LongTimelineKeepsPeakAndEndExactInBoundedMemory) {
  // 60000 allocations of 1 KiB (one every 100 ns), then 40000 frees: 1e5 points. Peak 60000 KiB
  // at the last allocation, 20000 KiB at the end.
  constexpr uint64_t kKiB = 1024;
  constexpr uint64_t kAllocations = 60000;
  constexpr uint64_t kFrees = 40000;
  std::vector<MemoryEvent> events;
  std::vector<FragmentationPoint> exact;
  for (uint64_t i = 0; i < kAllocations + kFrees; ++i) {
    const bool alloc = i < kAllocations;
    events.push_back(Event(i + 1, alloc ? ALLOC : FREE, alloc ? 0 : -1, kKiB,
                           0x1000'0000 + (alloc ? i : i - kAllocations) * kKiB));
    const uint64_t live = (alloc ? i + 1 : kAllocations - (i - kAllocations + 1)) * kKiB;
    exact.push_back({(i + 1) * 100, live, live});
  }
  const Fragmentation f = ComputeFragmentation(events, nullptr);
  ASSERT_EQ(f.devices.size(), 1u);
  const DeviceFragmentation& device = f.devices[0];
  EXPECT_EQ(device.peak.reserved, kAllocations * kKiB);
  EXPECT_EQ(device.peak.timestamp_ns, kAllocations * 100);
  EXPECT_EQ(device.end.reserved, (kAllocations - kFrees) * kKiB);
  EXPECT_EQ(device.end.timestamp_ns, (kAllocations + kFrees) * 100);
  // A sample may lag the exact value by up to one bucket width (and the 100 ns to the point
  // before): 1e7 ns over 1024 buckets makes them 16384 ns wide.
  ASSERT_EQ(device.timeline.size(), kFragmentationSamples);
  constexpr uint64_t kWidth = 16384 + 100;
  for (const FragmentationPoint& sample : device.timeline) {
    const uint64_t now = ExactAt(exact, sample.timestamp_ns);
    const uint64_t before =
        ExactAt(exact, sample.timestamp_ns - std::min(sample.timestamp_ns, kWidth));
    EXPECT_GE(sample.reserved, std::min(now, before)) << sample.timestamp_ns;
    EXPECT_LE(sample.reserved, std::max(now, before)) << sample.timestamp_ns;
  }
  EXPECT_EQ(device.timeline.back().reserved, device.end.reserved);
}

TEST(FragmentationTest, ModeDecidedAtTheEndCountsOnlyItsAllocations) {
  // A plain-looking allocation first, a PyTorch segment later: segment level, the first left out.
  Frame torch;
  torch.module = "/site-packages/torch/lib/libc10_cuda.so";
  const MemoryHolder* pytorch = FindMemoryHolder({torch}, false);
  std::vector<MemoryEvent> events = {Event(1, ALLOC, 0, 4 * kMiB, 0x1000'0000),
                                     Event(2, ALLOC, 0, 20 * kMiB, 0x2000'0000),
                                     Event(3, FREE, -1, 0, 0x1000'0000)};
  events[1].set_stack_id(7);
  const Fragmentation f = ComputeFragmentation(
      events, [pytorch](uint64_t stack_id) { return stack_id == 7 ? pytorch : nullptr; });
  EXPECT_EQ(f.mode, SummaryMode::kSegments);
  ASSERT_EQ(f.devices.size(), 1u);
  EXPECT_EQ(f.devices[0].peak.reserved, 20 * kMiB);
  EXPECT_EQ(f.devices[0].peak.timestamp_ns, 200u);
  EXPECT_EQ(f.devices[0].end.reserved, 20 * kMiB);
}

PoolUsage PoolSize(uint64_t timestamp_ns, uint64_t reserved) {
  PoolUsage usage;
  usage.set_pool(0xB00);
  usage.set_device(0);
  usage.set_reserved_bytes(reserved);
  usage.set_timestamp_ns(timestamp_ns);
  return usage;
}

TEST(FragmentationTest, TensorLevelWithPoolSizesKnowsReservedToo) {
  // PyTorch tensors (stream-ordered, from libc10_cuda.so) at t100 +4, t200 +8, t300 -4, t400 +2
  // MiB; the pool's size read after the allocations that grew it: 32 MiB at t150, 64 at t250.
  Frame torch;
  torch.module = "/site-packages/torch/lib/libc10_cuda.so";
  const MemoryHolder* pytorch = FindMemoryHolder({torch}, false);
  std::vector<MemoryEvent> events = {
      Event(1, ALLOC, 0, 4 * kMiB, 0x1000'0000), Event(2, ALLOC, 0, 8 * kMiB, 0x2000'0000),
      Event(3, FREE, -1, 0, 0x1000'0000), Event(4, ALLOC, 0, 2 * kMiB, 0x3000'0000)};
  for (MemoryEvent& event : events) {
    event.set_api(event.action() == ALLOC ? CUDA_MALLOC_ASYNC : CUDA_FREE_ASYNC);
    event.set_kind(POOL);
    event.set_stack_id(7);
  }
  FragmentationAnalysis analysis(
      [pytorch](uint64_t stack_id) { return stack_id == 7 ? pytorch : nullptr; });
  // The packets come in file order, ahead of the events replayed: each waits for its time.
  analysis.AddPoolUsage(PoolSize(150, 32 * kMiB));
  analysis.Add(events[0]);
  analysis.AddPoolUsage(PoolSize(250, 64 * kMiB));
  for (size_t i = 1; i < events.size(); ++i) analysis.Add(events[i]);
  const Fragmentation f = analysis.Finish();
  EXPECT_EQ(f.mode, SummaryMode::kTensors);
  EXPECT_TRUE(f.has_reserved);
  EXPECT_TRUE(f.has_in_use);
  EXPECT_EQ(ReservedNotKnownReason(f), "");
  ASSERT_EQ(f.devices.size(), 1u);
  const DeviceFragmentation& device = f.devices[0];
  // The pool reached 64 MiB from the event at t300 on (the first one stamped after t250): 8 MiB in
  // use then.
  EXPECT_EQ(device.peak.timestamp_ns, 300u);
  EXPECT_EQ(device.peak.reserved, 64 * kMiB);
  EXPECT_EQ(device.peak.in_use, 8 * kMiB);
  EXPECT_EQ(device.peak.unused(), 56 * kMiB);
  EXPECT_EQ(device.end.reserved, 64 * kMiB);
  EXPECT_EQ(device.end.in_use, 10 * kMiB);
  EXPECT_NE(FragmentationText(f).find("at the peak of reserved"), std::string::npos);
}

}  // namespace
}  // namespace gpumem::report
