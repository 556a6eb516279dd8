// The combined view's merge of one place (place_merge.h), which reads only the stretches of time
// whose bounds can still beat the best sum found: against one merge of every point, on timelines
// built by hand, with blocks down to one point so that the bounds are tested at every edge.
#include "report/analysis/place_merge.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "report/analysis/combined.h"

namespace gpumem::report {
namespace {

constexpr int32_t kPlace = 0;

// Each process's points at kPlace (none: the process has no such place), in spools of
// `block_points` points a block, written to their files every `buffered` encoded bytes.
std::vector<ProcessTimeline> Timelines(const std::vector<std::vector<TimelinePoint>>& points,
                                       size_t block_points, size_t buffered = 1 << 20) {
  std::vector<ProcessTimeline> timelines(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    timelines[i].host = "node1";
    if (points[i].empty()) continue;
    TimelineSpool& spool =
        timelines[i].places.try_emplace(kPlace, buffered, block_points).first->second;
    for (const TimelinePoint& point : points[i]) spool.Append(point);
  }
  return timelines;
}

struct Expected {
  uint64_t peak = 0;
  uint64_t timestamp_ns = 0;
  std::vector<uint64_t> at_peak;  // per process
};

// One merge of every point of `timelines` (as their spools hold them), by timestamp, ties by
// process, then in each process's order: the first strictly highest sum.
Expected MergeEverything(const std::vector<ProcessTimeline>& timelines) {
  std::vector<std::tuple<uint64_t, size_t, size_t, uint64_t>> all;  // time, process, order, bytes
  for (size_t i = 0; i < timelines.size(); ++i) {
    const auto it = timelines[i].places.find(kPlace);
    if (it == timelines[i].places.end()) continue;
    const std::vector<TimelinePoint> points = it->second.ReadAll();
    for (size_t j = 0; j < points.size(); ++j) {
      all.emplace_back(points[j].timestamp_ns, i, j, points[j].live_bytes);
    }
  }
  std::sort(all.begin(), all.end());
  Expected best;
  std::vector<uint64_t> current(timelines.size(), 0);
  uint64_t sum = 0;
  for (const auto& [time, process, order, bytes] : all) {
    sum = sum - current[process] + bytes;
    current[process] = bytes;
    if (sum > best.peak) best = {sum, time, current};
  }
  if (best.at_peak.empty()) best.at_peak.assign(timelines.size(), 0);
  return best;
}

// MergePlace of every process on `threads` threads gives what one merge of everything gives.
void ExpectAsOneMerge(const std::vector<ProcessTimeline>& timelines, size_t threads) {
  std::vector<size_t> members(timelines.size());
  for (size_t i = 0; i < members.size(); ++i) members[i] = i;
  const CombinedPlace place = MergePlace(kPlace, members, timelines, threads, 1);
  const Expected expected = MergeEverything(timelines);
  EXPECT_EQ(place.peak_bytes, expected.peak);
  EXPECT_EQ(place.timestamp_ns, expected.timestamp_ns);
  ASSERT_EQ(place.shares.size(), timelines.size());
  for (const CombinedShare& share : place.shares) {
    EXPECT_EQ(share.bytes, expected.at_peak[share.process]) << "process " << share.process;
  }
}

// For each block size: MergePlace of the two processes is one merge of everything, and peaks at
// `bytes` at `timestamp_ns`.
void ExpectPeakAt(const std::vector<std::vector<TimelinePoint>>& points,
                  const std::vector<size_t>& block_sizes, uint64_t bytes, uint64_t timestamp_ns) {
  for (const size_t block_points : block_sizes) {
    SCOPED_TRACE(block_points);
    const std::vector<ProcessTimeline> timelines = Timelines(points, block_points);
    ExpectAsOneMerge(timelines, 1);
    const CombinedPlace place = MergePlace(kPlace, {0, 1}, timelines, 1, 1);
    EXPECT_EQ(place.peak_bytes, bytes);
    EXPECT_EQ(place.timestamp_ns, timestamp_ns);
  }
}

TEST(PlaceMergeTest, PeakInAWindowWhoseBoundIsNotTheHighest) {
  // A rises to 100 and falls back at once, while B is at 0 (t10-t12), then both hold 60 together
  // (t20-t30): the first window's bound, 100 + B's 70 at t11 (freed at t11 too), is the highest,
  // but its sum only reaches 100; the answer, 120, lies in a window of a lower bound.
  const std::vector<std::vector<TimelinePoint>> points = {
      {{10, 100}, {11, 0}, {20, 60}, {30, 0}},
      {{11, 70}, {11, 0}, {25, 60}, {40, 0}},
  };
  ExpectPeakAt(points, {1, 2, 1024}, 120, 25);
}

TEST(PlaceMergeTest, TiesGoToTheEarliestMoment) {
  // The sum 10 is reached first at t10 (a window bounded by exactly 10) and again at t100, in a
  // window whose bound (18) is merged first: the earlier one still counts.
  const std::vector<std::vector<TimelinePoint>> points = {
      {{10, 10}, {20, 0}, {100, 8}, {101, 0}},
      {{100, 2}, {101, 10}, {102, 0}},
  };
  ExpectPeakAt(points, {1, 2}, 10, 10);
}

TEST(PlaceMergeTest, ProcessWithoutPointsInAWindowCountsWhatItHeld) {
  // A takes 50 at t1 and keeps it to the end without another point; B's points come later, one per
  // block: the windows of B's blocks must count A's 50, though A has no block there.
  std::vector<std::vector<TimelinePoint>> points = {{{1, 50}}, {}};
  for (uint64_t t = 10; t < 60; ++t) points[1].push_back({t, t % 7 == 0 ? 30 : t % 5});
  ExpectPeakAt(points, {1, 3}, 80, 14);
}

TEST(PlaceMergeTest, ProcessWithoutThePlaceHoldsNothingThere) {
  const std::vector<ProcessTimeline> timelines = Timelines({{}, {{5, 7}, {6, 9}, {8, 1}}}, 1);
  ExpectAsOneMerge(timelines, 1);
  const CombinedPlace place = MergePlace(kPlace, {0, 1}, timelines, 1, 1);
  EXPECT_EQ(place.peak_bytes, 9u);
  ASSERT_EQ(place.shares.size(), 2u);
  EXPECT_EQ(place.shares[1].process, 0u);
  EXPECT_EQ(place.shares[1].bytes, 0u);
}

// Four processes whose points interleave within a few microseconds, then each one a minute later:
// the merge's buckets of time are sized for the whole minute, so the burst falls into one of them,
// as runs of one process each that must be interleaved (more moves than insertion is let make).
TEST(PlaceMergeTest, ABurstOfInterleavedPointsMergesAsOne) {
  std::vector<std::vector<TimelinePoint>> points(4);
  for (uint64_t j = 0; j < 400; ++j) {
    for (uint64_t p = 0; p < 4; ++p) {
      points[p].push_back(
          {1000 + 4 * j + p + (j % 3 == 0 ? 0 : p % 2), (j * 7 + p * 13) % 50 * 10});
    }
  }
  for (uint64_t p = 0; p < 4; ++p) points[p].push_back({60'000'000'000 + p, 5});
  for (const size_t block_points : {size_t{1024}, size_t{100}}) {
    for (const size_t threads : {size_t{1}, size_t{2}}) {
      SCOPED_TRACE(::testing::Message() << block_points << " points a block, " << threads);
      ExpectAsOneMerge(Timelines(points, block_points), threads);
    }
  }
}

// Processes of random points: few distinct byte counts (many equal sums) and many equal
// timestamps, within a process and across processes, so that ties between windows are common.
// `jumps`: now and then a second passes, so that time spans far more nanoseconds than there are
// points (the merge then orders points many to a bucket of time).
std::vector<std::vector<TimelinePoint>> RandomPoints(uint64_t seed, size_t processes,
                                                     size_t most_points, bool jumps = false) {
  uint64_t state = seed * 2654435761u + 1;
  auto random = [&state](uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  };
  std::vector<std::vector<TimelinePoint>> points(processes);
  for (std::vector<TimelinePoint>& process : points) {
    const size_t count = random(most_points + 1);
    uint64_t time = random(20);
    for (size_t i = 0; i < count; ++i) {
      time += random(3) == 0 ? random(8) : 0;
      if (jumps && random(40) == 0) time += 1'000'000'000;
      // Now and then a stamp before the one before: the spool takes that one's time.
      const uint64_t stamp = random(10) == 0 && time > 3 ? time - 3 : time;
      process.push_back({stamp, random(6) * 10});
    }
  }
  return points;
}

TEST(PlaceMergeTest, RandomTimelinesMergeAsOneMergeOfEverything) {
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const size_t processes = 1 + seed % 6;
    const std::vector<std::vector<TimelinePoint>> points =
        RandomPoints(seed, processes, seed % 6 == 0 ? 2000 : 60, seed % 3 == 1);
    for (const size_t block_points : {1, 2, 3, 16, 1024}) {
      for (const size_t threads : {1, 3}) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed << ", " << block_points
                                          << " points a block, " << threads << " threads");
        ExpectAsOneMerge(Timelines(points, block_points, seed % 4 == 0 ? 5 : 1 << 20), threads);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace gpumem::report
