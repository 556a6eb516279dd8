// The timeline's reduction to a fixed number of buckets: the peak stays exact whatever the merging,
// each split sums to its value, and sites beyond the split's size fold into the rest.
#include "viewer/timeline_buckets.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gpumem::viewer {
namespace {

uint64_t SplitSum(const Split& split) {
  return std::accumulate(split.begin(), split.end(), uint64_t{0},
                         [](uint64_t sum, const auto& entry) { return sum + entry.second; });
}

// A random walk of allocations and frees over `sites` call sites: the true in-use series.
struct Walk {
  std::vector<uint64_t> in_use;  // after each event
  uint64_t peak = 0;
  size_t peak_event = 0;
};

Walk RunWalk(TimelineBuckets& timeline, size_t events, uint32_t sites, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<std::pair<uint32_t, uint64_t>> live;
  Walk walk;
  uint64_t in_use = 0;
  for (size_t i = 0; i < events; ++i) {
    const uint64_t t = 1000 + i * 10 + random() % 7;
    std::vector<SiteChange> changes;
    if (!live.empty() && random() % 100 < 48) {
      const size_t at = random() % live.size();
      changes.push_back({live[at].first, -static_cast<int64_t>(live[at].second)});
      in_use -= live[at].second;
      live.erase(live.begin() + static_cast<ptrdiff_t>(at));
    } else {
      const uint32_t site = random() % sites;
      const uint64_t bytes = 512 * (1 + random() % 4096);
      changes.push_back({site, static_cast<int64_t>(bytes)});
      in_use += bytes;
      live.emplace_back(site, bytes);
    }
    timeline.Apply(t, changes);
    walk.in_use.push_back(in_use);
    if (in_use > walk.peak) {
      walk.peak = in_use;
      walk.peak_event = i;
    }
  }
  timeline.Finish();
  return walk;
}

TEST(TimelineBucketsTest, PeakStaysExactThroughMerges) {
  TimelineBuckets timeline(/*max_buckets=*/64, /*split_sites=*/8);
  const Walk walk = RunWalk(timeline, 100000, 40, 7);
  const std::vector<TimeBucket>& buckets = timeline.buckets();
  ASSERT_LE(buckets.size(), 64u);
  ASSERT_GE(buckets.size(), 32u);  // merged down to between half and all of them
  uint64_t highest = 0;
  for (const TimeBucket& bucket : buckets) highest = std::max(highest, bucket.max_in_use);
  EXPECT_EQ(highest, walk.peak);
  // Buckets hold equal numbers of events: the peak's event is in bucket peak_event / per bucket.
  const size_t per_bucket = (100000 + buckets.size() - 1) / buckets.size();
  size_t per = 1;
  while (per < per_bucket) per *= 2;
  EXPECT_EQ(buckets[walk.peak_event / per].max_in_use, walk.peak);
  EXPECT_EQ(buckets.back().last_in_use, walk.in_use.back());
}

TEST(TimelineBucketsTest, SplitsSumToTheirValueAndFoldTheRest) {
  TimelineBuckets timeline(/*max_buckets=*/50, /*split_sites=*/4);
  RunWalk(timeline, 20000, 30, 11);
  bool folded = false;
  for (const TimeBucket& bucket : timeline.buckets()) {
    EXPECT_EQ(SplitSum(bucket.at_max), bucket.max_in_use);
    EXPECT_EQ(SplitSum(bucket.at_last), bucket.last_in_use);
    ASSERT_LE(bucket.at_max.size(), 5u);  // 4 sites and the rest
    if (bucket.at_max.size() == 5) {
      EXPECT_EQ(bucket.at_max.back().first, kRestSite);
      folded = true;
    }
    for (size_t i = 1; i + 1 < bucket.at_max.size(); ++i) {
      EXPECT_GE(bucket.at_max[i - 1].second, bucket.at_max[i].second);  // largest first
    }
  }
  EXPECT_TRUE(folded);
}

TEST(TimelineBucketsTest, StartsAscendLaunchesAddUpAndReservedIsKept) {
  TimelineBuckets timeline(/*max_buckets=*/10);
  for (uint64_t i = 0; i < 1000; ++i) {
    if (i % 3 == 0) {
      timeline.Launch(500 + i);
    } else {
      timeline.Apply(500 + i, {{static_cast<uint32_t>(i % 5), 4096}});
    }
  }
  timeline.Reserved(2000, 1 << 20);
  timeline.Finish();
  uint64_t launches = 0;
  uint64_t previous = 0;
  for (const TimeBucket& bucket : timeline.buckets()) {
    launches += bucket.launches;
    EXPECT_GE(bucket.start, previous);
    previous = bucket.start;
  }
  EXPECT_EQ(launches, 334u);
  EXPECT_EQ(timeline.buckets().front().start, 500u);
  EXPECT_EQ(timeline.end(), 2000u);
  EXPECT_TRUE(timeline.has_reserved());
  EXPECT_EQ(timeline.buckets().back().reserved, uint64_t{1} << 20);
  EXPECT_EQ(timeline.in_use(), 666u * 4096);
}

TEST(TimelineBucketsTest, AFallRightAfterANewHighSplitsTheHigh) {
  TimelineBuckets timeline(/*max_buckets=*/2);
  timeline.Apply(10, {{0, 100}});
  timeline.Apply(11, {{1, 10}});
  timeline.Apply(12, {{2, 50}});    // buckets merged, 2 events each: a new high of bucket 1, 160
  timeline.Apply(13, {{0, -100}});  // falls to 60 in the same bucket: its split must be of 160
  timeline.Finish();
  ASSERT_EQ(timeline.buckets().size(), 2u);
  const TimeBucket& bucket = timeline.buckets()[1];
  EXPECT_EQ(bucket.start, 12u);
  EXPECT_EQ(bucket.max_in_use, 160u);
  EXPECT_EQ(SplitSum(bucket.at_max), 160u);
  EXPECT_EQ(bucket.at_max.front(), (std::pair<uint32_t, uint64_t>{0, 100}));
  EXPECT_EQ(bucket.last_in_use, 60u);
  EXPECT_EQ(SplitSum(bucket.at_last), 60u);
  EXPECT_EQ(timeline.buckets()[0].max_in_use, 110u);
}

}  // namespace
}  // namespace gpumem::viewer
