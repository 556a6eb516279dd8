// report/replay/memory_timeline.h: a device's reserved and in-use bytes over time, bounded, and
// sampled at evenly spaced times.
#include "report/replay/memory_timeline.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

// Times at both ends of the uint64_t range: the samples are exact (a double of the span rounded
// the last one up to 2^64, which does not convert back to uint64_t).
TEST(FragmentationTest, TimelineSamplesTheWholeRangeOfTimestamps) {
  constexpr uint64_t kLast = std::numeric_limits<uint64_t>::max();
  const std::vector<FragmentationPoint> points = {{0, 10, 10}, {kLast / 2, 20, 20}, {kLast, 0, 0}};
  const std::vector<FragmentationPoint> samples = SampleTimeline(points, 0, kLast, 3);
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].timestamp_ns, 0u);
  EXPECT_EQ(samples[1].timestamp_ns, kLast / 2);
  EXPECT_EQ(samples[1].reserved, 20u);
  EXPECT_EQ(samples[2].timestamp_ns, kLast);
  EXPECT_EQ(samples[2].reserved, 0u);
}

TEST(FragmentationTest, BucketedTimelineDoublesItsWidth) {
  BucketedTimeline timeline(8);
  for (uint64_t t = 0; t < 8; ++t) timeline.Add({t, t, 0});
  EXPECT_EQ(timeline.bucket_width_ns(), 1u);
  EXPECT_EQ(timeline.Points().size(), 8u);  // few points: every one kept
  timeline.Add({8, 8, 0});                  // beyond the 8th bucket: pairs merge
  EXPECT_EQ(timeline.bucket_width_ns(), 2u);
  std::vector<FragmentationPoint> points = timeline.Points();
  ASSERT_EQ(points.size(), 5u);  // the later of each pair: 1, 3, 5, 7, then 8
  EXPECT_EQ(points[0].reserved, 1u);
  EXPECT_EQ(points[3].reserved, 7u);
  EXPECT_EQ(points[4].reserved, 8u);
  timeline.Add({5, 50, 0});  // stamped before the latest: goes into the latest's bucket
  points = timeline.Points();
  EXPECT_EQ(points.back().reserved, 50u);
  timeline.Add({1000, 1000, 0});  // far ahead: several doublings at once
  EXPECT_EQ(timeline.bucket_width_ns(), 128u);
  points = timeline.Points();
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].reserved, 50u);
  EXPECT_EQ(points[1].reserved, 1000u);
  for (uint64_t t = 0; t < 100000; ++t) timeline.Add({1000 + t * 7, t, 0});
  EXPECT_LE(timeline.Points().size(), 8u);
}

TEST(MemoryTimelineTest, SamplesAreTheLastValueAtOrBeforeEachTimeAndZeroBeforeTheFirst) {
  const std::vector<FragmentationPoint> points = {{100, 10, 4}, {250, 30, 20}, {300, 5, 5}};
  // Samples at 0, 100, 200, 300.
  const std::vector<FragmentationPoint> samples = SampleTimeline(points, 0, 300, 4);
  ASSERT_EQ(samples.size(), 4u);
  const uint64_t times[] = {0, 100, 200, 300};
  const uint64_t reserved[] = {0, 10, 10, 5};
  const uint64_t in_use[] = {0, 4, 4, 5};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(samples[i].timestamp_ns, times[i]) << i;
    EXPECT_EQ(samples[i].reserved, reserved[i]) << i;
    EXPECT_EQ(samples[i].in_use, in_use[i]) << i;
  }
  EXPECT_EQ(samples[1].unused(), 6u);
  // One sample: the value at the end.
  const std::vector<FragmentationPoint> one = SampleTimeline(points, 0, 300, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].timestamp_ns, 300u);
  EXPECT_EQ(one[0].reserved, 5u);
  EXPECT_TRUE(SampleTimeline(points, 0, 300, 0).empty());
}

TEST(MemoryTimelineTest, PointsAtOneTimeKeepTheLastInReplayOrder) {
  BucketedTimeline timeline(4);
  timeline.Add({10, 1, 1});
  timeline.Add({10, 2, 2});
  timeline.Add({11, 3, 0});
  timeline.Add({11, 4, 1});  // same nanosecond: replaces the one before
  const std::vector<FragmentationPoint> points = timeline.Points();
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].timestamp_ns, 10u);
  EXPECT_EQ(points[0].reserved, 2u);
  EXPECT_EQ(points[1].reserved, 4u);
  EXPECT_EQ(points[1].in_use, 1u);
  EXPECT_EQ(points[1].unused(), 3u);
  EXPECT_EQ(timeline.bucket_width_ns(), 1u);  // a span of 1 ns fits in 4 buckets
}

TEST(MemoryTimelineTest, UnusedIsZeroWhenInUseExceedsReserved) {
  EXPECT_EQ((FragmentationPoint{0, 10, 30}).unused(), 0u);
  EXPECT_EQ((FragmentationPoint{0, 30, 10}).unused(), 20u);
}

}  // namespace
}  // namespace gpumem::report
