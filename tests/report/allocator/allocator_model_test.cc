// report/allocator/allocator_model.h against cases computed by hand from the rules of PyTorch's
// native caching allocator: rounding, the small and large pools and their segment sizes, splitting,
// merging, streams, max_split_size, and the empty-the-cache retry before an out-of-memory error;
// and the expandable-segments and cudaMallocAsync-pool models beside it.
#include "report/allocator/allocator_model.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>

#include "tests/support/summary_stats.h"

namespace gpumem::report {
namespace {

using gpumem::testing::ExpectStat;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;

TEST(NativeAllocatorModel, RoundsRequestsTo512Bytes) {
  EXPECT_EQ(NativeAllocatorModel::RoundSize(1), 512u);
  EXPECT_EQ(NativeAllocatorModel::RoundSize(512), 512u);
  EXPECT_EQ(NativeAllocatorModel::RoundSize(513), 1024u);
  NativeAllocatorModel model;
  ASSERT_TRUE(model.Allocate(1, 1, 0));
  EXPECT_EQ(model.stats().allocated, 512u);
  EXPECT_EQ(model.stats().requested, 1u);
}

TEST(NativeAllocatorModel, SegmentSizesPerPool) {
  EXPECT_EQ(NativeAllocatorModel::SegmentSize(512), 2 * kMiB);       // small pool
  EXPECT_EQ(NativeAllocatorModel::SegmentSize(1 * kMiB), 2 * kMiB);  // 1 MiB is still small
  EXPECT_EQ(NativeAllocatorModel::SegmentSize(1 * kMiB + 512), 20 * kMiB);
  EXPECT_EQ(NativeAllocatorModel::SegmentSize(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(NativeAllocatorModel::SegmentSize(10 * kMiB), 10 * kMiB);  // large: to 2 MiB
  EXPECT_EQ(NativeAllocatorModel::SegmentSize(11 * kMiB), 12 * kMiB);
}

TEST(NativeAllocatorModel, SmallRequestsShareASegmentBySplitting) {
  NativeAllocatorModel model;
  ASSERT_TRUE(model.Allocate(1, 100 * kKiB, 0));
  ASSERT_TRUE(model.Allocate(2, 300 * kKiB, 0));
  EXPECT_EQ(model.stats().reserved, 2 * kMiB);
  EXPECT_EQ(model.stats().segments, 1u);
  EXPECT_EQ(model.stats().allocated, 400 * kKiB);
  EXPECT_EQ(model.NonReleasable(), 2 * kMiB - 400 * kKiB);
  // Both freed: one free block again, and empty_cache gives the segment back.
  model.Free(1);
  model.Free(2);
  EXPECT_EQ(model.LargestFreeBlock(), 2 * kMiB);
  EXPECT_EQ(model.NonReleasable(), 0u);
  model.EmptyCache();
  EXPECT_EQ(model.stats().reserved, 0u);
  EXPECT_EQ(model.stats().reserved_peak, 2 * kMiB);
}

TEST(NativeAllocatorModel, LargePoolSplitsOnlyWhenMoreThan1MiBIsLeft) {
  NativeAllocatorModel model;
  // 19.5 MiB from a 20 MiB segment: 0.5 MiB left, not split, the whole block counts.
  ASSERT_TRUE(model.Allocate(1, 19 * kMiB + 512 * kKiB, 0));
  EXPECT_EQ(model.stats().reserved, 20 * kMiB);
  EXPECT_EQ(model.stats().allocated, 20 * kMiB);
  // 5 MiB from another 20 MiB segment: 15 MiB left, split; a 14 MiB request then fits in it.
  ASSERT_TRUE(model.Allocate(2, 5 * kMiB, 0));
  EXPECT_EQ(model.stats().reserved, 40 * kMiB);
  ASSERT_TRUE(model.Allocate(3, 14 * kMiB, 0));
  EXPECT_EQ(model.stats().reserved, 40 * kMiB);
  EXPECT_EQ(model.stats().segment_allocations, 2u);
  EXPECT_EQ(model.stats().allocated, 20 * kMiB + 5 * kMiB + 15 * kMiB);  // 1 MiB left: unsplit
}

TEST(NativeAllocatorModel, BestFitAndMergingWithNeighbours) {
  NativeAllocatorModel model;
  // A 20 MiB segment cut in 4 + 4 + 4 + 8 MiB.
  ASSERT_TRUE(model.Allocate(1, 4 * kMiB, 0));
  ASSERT_TRUE(model.Allocate(2, 4 * kMiB, 0));
  ASSERT_TRUE(model.Allocate(3, 4 * kMiB, 0));
  EXPECT_EQ(model.stats().segments, 1u);
  model.Free(1);  // free: 4 MiB at the start, 8 MiB at the end
  EXPECT_EQ(model.LargestFreeBlock(), 8 * kMiB);
  // 3 MiB goes to the 4 MiB block (the smallest that fits), not the 8 MiB one.
  ASSERT_TRUE(model.Allocate(4, 3 * kMiB, 0));
  EXPECT_EQ(model.LargestFreeBlock(), 8 * kMiB);
  model.Free(4);
  model.Free(2);  // 4 + 4 MiB merge at the start
  EXPECT_EQ(model.LargestFreeBlock(), 8 * kMiB);
  model.Free(3);  // and everything merges into the segment
  EXPECT_EQ(model.LargestFreeBlock(), 20 * kMiB);
  EXPECT_EQ(model.NonReleasable(), 0u);
}

TEST(NativeAllocatorModel, StreamsHaveTheirOwnBlocks) {
  NativeAllocatorModel model;
  ASSERT_TRUE(model.Allocate(1, 4 * kMiB, /*stream=*/1));
  model.Free(1);
  ASSERT_TRUE(model.Allocate(2, 4 * kMiB, /*stream=*/2));  // the stream-1 block is not used
  EXPECT_EQ(model.stats().segments, 2u);
  ASSERT_TRUE(model.Allocate(3, 4 * kMiB, /*stream=*/1));  // this one is
  EXPECT_EQ(model.stats().segments, 2u);
}

TEST(NativeAllocatorModel, MaxSplitSizeKeepsLargeBlocksWhole) {
  NativeAllocatorConfig config;
  config.max_split_size = 16 * kMiB;
  NativeAllocatorModel model(config);
  ASSERT_TRUE(model.Allocate(1, 30 * kMiB, 0));  // a 30 MiB segment
  model.Free(1);
  // A smaller request never takes an oversize block: a 20 MiB segment of its own.
  ASSERT_TRUE(model.Allocate(2, 5 * kMiB, 0));
  EXPECT_EQ(model.stats().reserved, 50 * kMiB);
  // An oversize request takes it whole when it wastes less than 20 MiB (not split): 5 MiB
  // (split off its segment) + 30 MiB.
  ASSERT_TRUE(model.Allocate(3, 17 * kMiB, 0));
  EXPECT_EQ(model.stats().reserved, 50 * kMiB);
  EXPECT_EQ(model.stats().allocated, 35 * kMiB);
  // One that would waste 20 MiB or more does not take it.
  model.Free(3);
  ASSERT_TRUE(model.Allocate(4, 16 * kMiB, 0));  // 30 >= 16 + 20? no: taken
  model.Free(4);
  NativeAllocatorModel strict(config);
  ASSERT_TRUE(strict.Allocate(1, 40 * kMiB, 0));
  strict.Free(1);
  ASSERT_TRUE(strict.Allocate(2, 18 * kMiB, 0));  // 40 >= 18 + 20: a new 18 MiB segment
  EXPECT_EQ(strict.stats().reserved, 58 * kMiB);
}

TEST(NativeAllocatorModel, EmptiesTheCacheBeforeRunningOutOfMemory) {
  NativeAllocatorConfig config;
  config.device_memory = 24 * kMiB;
  NativeAllocatorModel model(config);
  ASSERT_TRUE(model.Allocate(1, 1536 * kKiB, 0));  // large pool: a 20 MiB segment
  ASSERT_TRUE(model.Allocate(2, 100 * kKiB, 0));   // small pool: 2 MiB; 22 MiB reserved
  model.Free(1);                                   // the 20 MiB segment stays cached
  // 22 MiB does not fit in the cached block, nor next to it: the cache goes, then it fits.
  ASSERT_TRUE(model.Allocate(3, 22 * kMiB, 0));
  EXPECT_EQ(model.stats().retries, 1u);
  EXPECT_EQ(model.stats().reserved, 24 * kMiB);
  EXPECT_EQ(model.stats().reserved_peak, 24 * kMiB);
  // Nothing left to give back: 2 MiB more is out of memory, and nothing changes.
  EXPECT_FALSE(model.Allocate(4, 2 * kMiB, 0));
  EXPECT_EQ(model.stats().ooms, 1u);
  EXPECT_EQ(model.stats().reserved, 24 * kMiB);
  EXPECT_EQ(model.stats().allocated, 22 * kMiB + 512 * 200);
}

// ---- expandable segments ----

TEST(ExpandableSegmentsModel, MapsWholePagesAndSplitsDownTo512Bytes) {
  ExpandableSegmentsModel model;
  ASSERT_TRUE(model.Allocate(1, 5 * kMiB, 0));  // large pool: one 20 MiB page
  EXPECT_EQ(model.stats().reserved, 20 * kMiB);
  EXPECT_EQ(model.stats().segments, 1u);
  EXPECT_EQ(model.stats().segment_allocations, 1u);
  EXPECT_EQ(model.stats().allocated, 5 * kMiB);
  // 14 MiB of the 15 MiB left: the 1 MiB rest is split off too (the native allocator would hand
  // out the whole 15 MiB block).
  ASSERT_TRUE(model.Allocate(2, 14 * kMiB, 0));
  EXPECT_EQ(model.stats().allocated, 19 * kMiB);
  EXPECT_EQ(model.LargestFreeBlock(), 1 * kMiB);
  // 3 MiB: the free 1 MiB at the end of the mapped part grows into one more page (2 MiB lacking,
  // one 20 MiB page), and the request takes it from there: 18 MiB stay free after it.
  ASSERT_TRUE(model.Allocate(3, 3 * kMiB, 0));
  EXPECT_EQ(model.stats().reserved, 40 * kMiB);
  EXPECT_EQ(model.stats().segments, 1u);  // still one segment: it grew
  EXPECT_EQ(model.stats().segment_allocations, 2u);
  EXPECT_EQ(model.LargestFreeBlock(), 18 * kMiB);
  // [22 MiB, 40 MiB) holds no whole page (pages start at 0, 20, 40 MiB): none of it can go back.
  EXPECT_EQ(model.NonReleasable(), 18 * kMiB);
  EXPECT_EQ(model.FreeInSegments(), 18 * kMiB);
  model.Free(1);
  model.Free(2);
  model.Free(3);
  EXPECT_EQ(model.LargestFreeBlock(), 40 * kMiB);  // merged into one block again
  EXPECT_EQ(model.NonReleasable(), 0u);
  EXPECT_EQ(model.stats().reserved, 40 * kMiB);  // freed pages stay mapped
  model.EmptyCache();
  EXPECT_EQ(model.stats().reserved, 0u);
  EXPECT_EQ(model.stats().segments, 0u);
  EXPECT_EQ(model.stats().reserved_peak, 40 * kMiB);
}

TEST(ExpandableSegmentsModel, LargeRequestsMapWholePagesAndPoolsAndStreamsHaveSegmentsOfTheirOwn) {
  ExpandableSegmentsModel model;
  ASSERT_TRUE(model.Allocate(1, 50 * kMiB, 0));  // 3 pages of 20 MiB (native: a 50 MiB segment)
  EXPECT_EQ(model.stats().reserved, 60 * kMiB);
  EXPECT_EQ(model.stats().segment_allocations, 3u);
  ASSERT_TRUE(model.Allocate(2, 100 * kKiB, 0));  // small pool: a 2 MiB page of its own
  ASSERT_TRUE(model.Allocate(3, 100 * kKiB, 7));  // another stream: another segment
  EXPECT_EQ(model.stats().reserved, 64 * kMiB);
  EXPECT_EQ(model.stats().segments, 3u);
  // The 10 MiB left after the 50 MiB serves a 10 MiB request of its stream, not of another.
  ASSERT_TRUE(model.Allocate(4, 10 * kMiB, 0));
  EXPECT_EQ(model.stats().reserved, 64 * kMiB);
  ASSERT_TRUE(model.Allocate(5, 10 * kMiB, 7));
  EXPECT_EQ(model.stats().reserved, 84 * kMiB);
}

TEST(ExpandableSegmentsModel, UnmapsFreePagesBeforeRunningOutOfMemory) {
  ExpandableSegmentsModel model(40 * kMiB);
  ASSERT_TRUE(model.Allocate(1, 30 * kMiB, 0));  // 2 pages
  model.Free(1);                                 // they stay mapped: 40 MiB reserved
  // Another stream's 10 MiB needs a page of its own: the device is full, so stream 0's free pages
  // are unmapped first (one retry), then it fits.
  ASSERT_TRUE(model.Allocate(2, 10 * kMiB, 1));
  EXPECT_EQ(model.stats().retries, 1u);
  EXPECT_EQ(model.stats().reserved, 20 * kMiB);
  EXPECT_EQ(model.stats().segments, 1u);
  // 30 MiB on stream 1: its free 10 MiB grows by one page into 30 MiB.
  ASSERT_TRUE(model.Allocate(3, 30 * kMiB, 1));
  EXPECT_EQ(model.stats().reserved, 40 * kMiB);
  EXPECT_EQ(model.FreeInSegments(), 0u);
  // Nothing free to unmap: 2 MiB more is out of memory after one more retry.
  EXPECT_FALSE(model.Allocate(4, 2 * kMiB, 1));
  EXPECT_EQ(model.stats().retries, 2u);
  EXPECT_EQ(model.stats().ooms, 1u);
  EXPECT_EQ(model.stats().reserved, 40 * kMiB);
}

TEST(ExpandableSegmentsModel, UnmappedHolesAreMappedAgainBeforeTheEnd) {
  ExpandableSegmentsModel model;
  ASSERT_TRUE(model.Allocate(1, 40 * kMiB, 0));  // pages [0, 40 MiB)
  ASSERT_TRUE(model.Allocate(2, 20 * kMiB, 0));  // page [40, 60 MiB)
  model.Free(1);
  model.EmptyCache();  // [0, 40 MiB) unmapped: a hole before the allocation
  EXPECT_EQ(model.stats().reserved, 20 * kMiB);
  // The hole is the smallest unmapped range that fits: 20 MiB is mapped there, at its start.
  ASSERT_TRUE(model.Allocate(3, 20 * kMiB, 0));
  EXPECT_EQ(model.stats().reserved, 40 * kMiB);
  EXPECT_EQ(model.LargestFreeBlock(), 0u);
  model.Free(3);
  model.Free(2);
  // [0, 20) and [40, 60 MiB) are free, [20, 40) unmapped between them: two blocks, not one.
  EXPECT_EQ(model.LargestFreeBlock(), 20 * kMiB);
  EXPECT_EQ(model.FreeInSegments(), 40 * kMiB);
  EXPECT_EQ(model.NonReleasable(), 0u);
}

// ---- torch.cuda.memory_stats() per pool, as CUDACachingAllocator.cpp keeps them ----

// Inactive split blocks (PyTorch's non-releasable memory) change by each operation's net amount:
// a split of a whole segment adds what is left, a split of a split block takes off what is
// allocated, a free adds its block and takes off the neighbours it merges.
TEST(NativeAllocatorModel, KeepsReservedSegmentsAndInactiveSplitStatsPerPool) {
  NativeAllocatorModel model;
  ASSERT_TRUE(model.Allocate(1, 512 * kKiB, 0));    // A: new 2 MiB small segment, 1.5 MiB left
  ASSERT_TRUE(model.Allocate(2, 4 * kMiB, 0));      // B: new 20 MiB large segment, 16 MiB left
  ASSERT_TRUE(model.Allocate(3, 1 * kMiB, 0));      // C: from the 1.5 MiB, 0.5 MiB left: -1 MiB
  model.Free(1);                                    // A: a free block of a split segment: +0.5 MiB
  ASSERT_TRUE(model.Allocate(4, 1 * kMiB + 1, 0));  // D: 1 MiB + 512 from the 16 MiB
  model.Free(2);                                    // B: +4 MiB, its neighbour D is allocated
  const AllocatorPoolStats& stats = model.pool_stats();
  ExpectStat(stats.reserved_bytes.all, 22 * kMiB, 22 * kMiB, 22 * kMiB, 0, "reserved");
  ExpectStat(stats.reserved_bytes.large_pool, 20 * kMiB, 20 * kMiB, 20 * kMiB, 0, "reserved L");
  ExpectStat(stats.reserved_bytes.small_pool, 2 * kMiB, 2 * kMiB, 2 * kMiB, 0, "reserved S");
  ExpectStat(stats.segment.large_pool, 1, 1, 1, 0, "segments L");
  ExpectStat(stats.segment.small_pool, 1, 1, 1, 0, "segments S");
  // Small: +1.5, -1, +0.5 MiB. Large: +16 MiB, -(1 MiB + 512), +4 MiB.
  ExpectStat(stats.inactive_split_bytes.small_pool, 1 * kMiB, 1536 * kKiB, 2 * kMiB, 1 * kMiB,
             "inactive S");
  ExpectStat(stats.inactive_split_bytes.large_pool, 19 * kMiB - 512, 19 * kMiB - 512, 20 * kMiB,
             1 * kMiB + 512, "inactive L");
  ExpectStat(stats.inactive_split_bytes.all, 20 * kMiB - 512, 20 * kMiB - 512, 22 * kMiB,
             2 * kMiB + 512, "inactive");
  EXPECT_EQ(stats.inactive_split_bytes.all.current, model.NonReleasable());
  ExpectStat(stats.inactive_split.small_pool, 2, 2, 2, 0, "inactive blocks S");
  ExpectStat(stats.inactive_split.large_pool, 2, 2, 2, 0, "inactive blocks L");
  // Everything freed: each segment is one free block again, nothing inactive split; empty_cache
  // gives both back.
  model.Free(3);
  model.Free(4);
  ExpectStat(stats.inactive_split.all, 0, 4, 4, 4, "inactive blocks");
  EXPECT_EQ(stats.inactive_split_bytes.all.current, 0u);
  model.EmptyCache();
  ExpectStat(stats.reserved_bytes.all, 0, 22 * kMiB, 22 * kMiB, 22 * kMiB, "reserved, emptied");
  ExpectStat(stats.segment.all, 0, 2, 2, 2, "segments, emptied");
  ExpectStat(stats.oversize_allocations.all, 0, 0, 0, 0, "no max_split_size: nothing oversize");
}

TEST(NativeAllocatorModel, CountsOversizeAllocationsAndSegmentsFromMaxSplitSize) {
  NativeAllocatorConfig config;
  config.max_split_size = 30 * kMiB;
  NativeAllocatorModel model(config);
  ASSERT_TRUE(model.Allocate(1, 40 * kMiB, 0));  // a 40 MiB segment and block: both oversize
  ASSERT_TRUE(model.Allocate(2, 5 * kMiB, 0));   // a 20 MiB segment: neither
  const AllocatorPoolStats& stats = model.pool_stats();
  ExpectStat(stats.oversize_allocations.all, 1, 1, 1, 0, "oversize allocations");
  ExpectStat(stats.oversize_segments.all, 1, 1, 1, 0, "oversize segments");
  ExpectStat(stats.inactive_split_bytes.all, 15 * kMiB, 15 * kMiB, 15 * kMiB, 0, "inactive");
  model.Free(1);
  ExpectStat(stats.oversize_allocations.all, 0, 1, 1, 1, "oversize allocation freed");
  EXPECT_EQ(stats.oversize_segments.all.current, 1u);  // still held
  model.EmptyCache();
  ExpectStat(stats.oversize_segments.all, 0, 1, 1, 1, "oversize segment released");
  ExpectStat(stats.reserved_bytes.large_pool, 20 * kMiB, 60 * kMiB, 60 * kMiB, 40 * kMiB,
             "reserved");
}

// Pages count in the pool of their segment; PyTorch leaves expandable segments out of the
// inactive split statistics.
TEST(ExpandableSegmentsModel, KeepsReservedAndSegmentsPerPool) {
  ExpandableSegmentsModel model;
  ASSERT_TRUE(model.Allocate(1, 512 * kKiB, 0));  // one 2 MiB page of the small pool's segment
  ASSERT_TRUE(model.Allocate(2, 30 * kMiB, 0));   // two 20 MiB pages of the large pool's
  const AllocatorPoolStats& stats = model.pool_stats();
  ExpectStat(stats.reserved_bytes.small_pool, 2 * kMiB, 2 * kMiB, 2 * kMiB, 0, "reserved S");
  ExpectStat(stats.reserved_bytes.large_pool, 40 * kMiB, 40 * kMiB, 40 * kMiB, 0, "reserved L");
  ExpectStat(stats.segment.all, 2, 2, 2, 0, "segments");
  EXPECT_EQ(stats.inactive_split_bytes.all.allocated, 0u);
  model.Free(1);
  model.Free(2);
  model.EmptyCache();
  ExpectStat(stats.reserved_bytes.all, 0, 42 * kMiB, 42 * kMiB, 42 * kMiB, "reserved, emptied");
  ExpectStat(stats.segment.large_pool, 0, 1, 1, 1, "segments L, emptied");
  ExpectStat(stats.segment.small_pool, 0, 1, 1, 1, "segments S, emptied");
}

// ---- the cudaMallocAsync pool ----

TEST(AsyncPoolModel, HoldsTheLiveBytesRoundedTo2MiBAtTheirHighest) {
  AsyncPoolModel model(4 * kMiB);
  const AllocatorModel& base = model;
  EXPECT_FALSE(base.KnowsBlocks());
  ASSERT_TRUE(model.Allocate(1, 1 * kMiB, 0));
  EXPECT_EQ(model.stats().reserved, 2 * kMiB);
  ASSERT_TRUE(model.Allocate(2, 1536 * kKiB, 0));  // 2.5 MiB live: 4 MiB
  EXPECT_EQ(model.stats().reserved, 4 * kMiB);
  EXPECT_EQ(model.stats().allocated, 2560 * kKiB);  // exact bytes: no rounding per request
  model.Free(1);
  EXPECT_EQ(model.stats().reserved, 4 * kMiB);  // the pool keeps what it took
  model.EmptyCache();
  EXPECT_EQ(model.stats().reserved, 2 * kMiB);  // trimmed to the live 1.5 MiB, rounded
  // 1.5 + 3 MiB live would need 6 MiB of a 4 MiB device.
  EXPECT_FALSE(model.Allocate(3, 3 * kMiB, 0));
  EXPECT_EQ(model.stats().ooms, 1u);
  EXPECT_EQ(model.stats().retries, 0u);
  EXPECT_EQ(model.stats().reserved_peak, 4 * kMiB);
}

// A request over 2^48 bytes (report/format/sizes.h) fits no device: each model refuses it as out of
// memory, holds nothing for it, and goes on serving the others. Sizes near 2^64 once rounded to 0
// (a block of 0 bytes split off itself) and wrapped the async pool's sum.
TEST(AllocatorModels, RefuseSizesNoDeviceCanHold) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (const AllocatorKind kind : kAllAllocators) {
    SCOPED_TRACE(AllocatorKindName(kind));
    const std::unique_ptr<AllocatorModel> model = MakeAllocatorModel(kind, {});
    ASSERT_TRUE(model->Allocate(1, 3 * kMiB, 0));
    uint64_t id = 2;
    for (const uint64_t size : {kMax, kMax - 511, kMax - (20 * kMiB), (uint64_t{1} << 48) + 1}) {
      EXPECT_FALSE(model->Allocate(id++, size, 0)) << size;
    }
    EXPECT_EQ(model->stats().ooms, 4u);
    EXPECT_EQ(model->stats().allocated, 3 * kMiB);
    EXPECT_LE(model->stats().reserved_peak, 20 * kMiB);
    // A large possible one, on a stream of its own (an expandable segment spans 2^48 bytes).
    ASSERT_TRUE(model->Allocate(id, uint64_t{1} << 47, 1));
    model->Free(id);
    model->Free(1);
    model->EmptyCache();
    EXPECT_EQ(model->stats().allocated, 0u);
    EXPECT_EQ(model->stats().reserved, 0u);
  }
}

}  // namespace
}  // namespace gpumem::report
