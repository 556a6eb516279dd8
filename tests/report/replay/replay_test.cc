// Replay of memory events: per-device live bytes, peaks and the live set at the peak by stack,
// VMM accounting (reservations are not memory; physical memory lives until released and
// unmapped), anomalies, and the bundled real H100 traces against their known answers.
#include "report/replay/replay.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/replay/event_counts.h"
#include "report/trace/trace_file.h"
#include "tests/support/synthetic_events.h"

namespace gpumem::report {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Builds events with increasing seq and timestamps (seq * 1000 ns).
class Events : public testing::SyntheticEvents {
 public:
  using SyntheticEvents::Free;
  MemoryEvent& Malloc(int32_t device, uint64_t size, uint64_t address, uint64_t stack_id) {
    return Add(CUDA_MALLOC, DEVICE, ALLOC, device, size, address, stack_id);
  }

  Replay Run() const {
    Replay replay;
    for (const MemoryEvent& event : events_) replay.Add(event);
    return replay;
  }
};

// (stack id, bytes, count) triples, in order.
struct Expected {
  uint64_t stack_id;
  uint64_t bytes;
  uint64_t count;
};
void ExpectSites(const std::vector<SiteTally>& sites, const std::vector<Expected>& expected) {
  ASSERT_EQ(sites.size(), expected.size());
  for (size_t i = 0; i < sites.size(); ++i) {
    EXPECT_EQ(sites[i].stack_id, expected[i].stack_id) << "site " << i;
    EXPECT_EQ(sites[i].tally.bytes, expected[i].bytes) << "site " << i;
    EXPECT_EQ(sites[i].tally.count, expected[i].count) << "site " << i;
  }
}

TEST(ReplayTest, PeakAndLiveSetAtThePeak) {
  Events events;
  events.Malloc(0, 10 * kMiB, 0x1000'0000, 1);  // seq 1: 10
  events.Malloc(0, 20 * kMiB, 0x2000'0000, 2);  // seq 2: 30 <- peak
  events.Free(0x1000'0000);                     // seq 3: 20
  events.Malloc(0, 5 * kMiB, 0x3000'0000, 3);   // seq 4: 25
  events.Free(0x2000'0000);                     // seq 5: 5 (stack 2 was live at the peak)
  events.Malloc(0, 1 * kMiB, 0x4000'0000, 1);   // seq 6: 6
  const std::vector<PlaceUsage> places = events.Run().Places();
  ASSERT_EQ(places.size(), 1u);
  const PlaceUsage& device = places[0];
  EXPECT_EQ(device.place, 0);
  EXPECT_EQ(device.peak_bytes, 30 * kMiB);
  EXPECT_EQ(device.peak_seq, 2u);
  EXPECT_EQ(device.peak_timestamp_ns, 2000u);
  ExpectSites(device.peak_sites, {{2, 20 * kMiB, 1}, {1, 10 * kMiB, 1}});
  EXPECT_EQ(device.live.bytes, 6 * kMiB);
  EXPECT_EQ(device.live.count, 2u);
  ExpectSites(device.live_sites, {{3, 5 * kMiB, 1}, {1, 1 * kMiB, 1}});
  EXPECT_EQ(device.allocated.count, 4u);
  EXPECT_EQ(device.allocated.bytes, 36 * kMiB);
  // Every allocation by stack, freed or not: they add up to `allocated`.
  ExpectSites(device.allocated_sites, {{2, 20 * kMiB, 1}, {1, 11 * kMiB, 2}, {3, 5 * kMiB, 1}});
}

TEST(ReplayTest, ALaterHigherPeakForgetsWhatWasFreedBeforeIt) {
  Events events;
  events.Malloc(0, 10, 0x1000, 1);  // 10
  events.Malloc(0, 20, 0x2000, 2);  // 30 (first peak)
  events.Free(0x1000);              // 20: freed after the first peak
  events.Malloc(0, 40, 0x3000, 3);  // 60 <- the peak: stacks 2 and 3 only
  events.Free(0x2000);              // 40
  events.Free(0x3000);              // 0
  const std::vector<PlaceUsage> places = events.Run().Places();
  ASSERT_EQ(places.size(), 1u);
  EXPECT_EQ(places[0].peak_bytes, 60u);
  EXPECT_EQ(places[0].peak_seq, 4u);
  ExpectSites(places[0].peak_sites, {{3, 40, 1}, {2, 20, 1}});
  EXPECT_EQ(places[0].live.count, 0u);
  EXPECT_TRUE(places[0].live_sites.empty());
}

TEST(ReplayTest, SameStackIsOneSiteWithItsCount) {
  Events events;
  for (uint64_t i = 0; i < 5; ++i) events.Malloc(0, 4 * kMiB, 0x1000'0000 + i * 4 * kMiB, 7);
  events.Malloc(0, 16 * kMiB, 0x9000'0000, 8);
  const std::vector<PlaceUsage> places = events.Run().Places();
  ASSERT_EQ(places.size(), 1u);
  EXPECT_EQ(places[0].peak_bytes, 36 * kMiB);
  ExpectSites(places[0].peak_sites, {{7, 20 * kMiB, 5}, {8, 16 * kMiB, 1}});
  ExpectSites(places[0].live_sites, {{7, 20 * kMiB, 5}, {8, 16 * kMiB, 1}});
}

// Reservations are address space, not memory; physical memory counts from cuMemCreate until it is
// released and unmapped (whichever comes last); mappings are not counted again.
TEST(ReplayTest, VmmCountsPhysicalMemoryOnly) {
  Events events;
  const uint64_t base = 0x7f00'0000'0000;
  events.Add(CU_MEM_ADDRESS_RESERVE, VMM_RESERVATION, ALLOC, -1, 64 * kMiB, base, 1);  // 1
  events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 2 * kMiB, 0, 2, /*handle=*/0xA);   // 2: 2
  events.Add(CU_MEM_MAP, VMM_MAPPING, ALLOC, -1, 2 * kMiB, base, 3, 0xA);              // 3
  events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 8 * kMiB, 0, 4, 0xB);              // 4: 10
  events.Add(CU_MEM_MAP, VMM_MAPPING, ALLOC, -1, 8 * kMiB, base + 2 * kMiB, 3, 0xB);   // 5
  // Released while mapped: the driver keeps it until the unmap.
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xB);                    // 6: 10
  events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 2 * kMiB, 0, 5, 0xC);              // 7: 12
  events.Add(CU_MEM_MAP, VMM_MAPPING, ALLOC, -1, 2 * kMiB, base + 10 * kMiB, 3, 0xC);  // 8
  events.Add(CU_MEM_UNMAP, VMM_MAPPING, FREE, -1, 8 * kMiB, base + 2 * kMiB);          // 9: 4
  // One cuMemUnmap over two mappings; the handles stay until released.
  events.Add(CU_MEM_UNMAP, VMM_MAPPING, FREE, -1, 12 * kMiB, base);             // 10: 4
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xA);             // 11: 2
  events.Add(CU_MEM_ADDRESS_FREE, VMM_RESERVATION, FREE, -1, 64 * kMiB, base);  // 12
  const Replay replay = events.Run();
  const std::vector<PlaceUsage> places = replay.Places();
  ASSERT_EQ(places.size(), 1u);
  const PlaceUsage& device = places[0];
  EXPECT_EQ(device.place, 0);
  EXPECT_EQ(device.peak_bytes, 12 * kMiB);
  EXPECT_EQ(device.peak_seq, 7u);
  ExpectSites(device.peak_sites, {{4, 8 * kMiB, 1}, {2, 2 * kMiB, 1}, {5, 2 * kMiB, 1}});
  // Handle 0xC was never released: 2 MiB of physical memory still held.
  EXPECT_EQ(device.live.bytes, 2 * kMiB);
  ExpectSites(device.live_sites, {{5, 2 * kMiB, 1}});
  EXPECT_EQ(device.allocated.count, 3u);
  EXPECT_EQ(replay.reserved_peak_bytes(), 64 * kMiB);
  EXPECT_EQ(replay.reserved_bytes(), 0u);
  EXPECT_EQ(replay.anomalies().total(), 0u);
}

// NCCL frees a buffer with cuMemRetainAllocationHandle, cuMemRelease, cuMemUnmap, cuMemRelease:
// the memory goes at the last release (references: create 1, retain +1, release -1), and nothing
// is an anomaly. A release past the last reference still is a double free, whether the driver
// took it (a retain the replay missed) or refused it.
TEST(ReplayTest, PhysicalHandlesAreReferenceCounted) {
  Events events;
  const uint64_t base = 0x7f00'0000'0000;
  events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 2 * kMiB, 0, 1, 0xA);                  // 1: 2
  events.Add(CU_MEM_MAP, VMM_MAPPING, ALLOC, -1, 2 * kMiB, base, 1, 0xA);                  // 2
  events.Add(CU_MEM_RETAIN_ALLOCATION_HANDLE, VMM_PHYSICAL, RETAIN, -1, 0, base, 0, 0xA);  // 3
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xA);                        // 4: 2
  events.Add(CU_MEM_UNMAP, VMM_MAPPING, FREE, -1, 2 * kMiB, base);                         // 5: 2
  {
    const Replay replay = events.Run();
    EXPECT_EQ(replay.LiveBytes(0), 2 * kMiB) << "a reference is left: the memory stays";
    EXPECT_EQ(replay.anomalies().total(), 0u);
  }
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xA);  // 6: 0
  {
    const Replay replay = events.Run();
    EXPECT_EQ(replay.LiveBytes(0), 0u);
    EXPECT_EQ(replay.anomalies().total(), 0u) << DescribeAnomalies(replay.anomalies());
  }
  // A retain that failed took no reference.
  events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 2 * kMiB, 0, 1, 0xB);  // 7: 2
  events.Add(CU_MEM_RETAIN_ALLOCATION_HANDLE, VMM_PHYSICAL, RETAIN, -1, 0, base, 0, 0xB)
      .set_result(1);                                                // 8
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xB);  // 9: 0
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xB);  // 10: double free
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE_FAILED, -1, 0, 0, 0, 0xB).set_result(1);  // 11
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0x77);  // 12: never seen
  const Replay replay = events.Run();
  EXPECT_EQ(replay.LiveBytes(0), 0u);
  EXPECT_EQ(replay.anomalies().double_frees, 2u);
  EXPECT_EQ(replay.anomalies().unknown_frees, 1u);
  const std::vector<PlaceUsage> places = replay.Places();
  ASSERT_EQ(places.size(), 1u);
  EXPECT_EQ(places[0].peak_bytes, 2 * kMiB);
}

// A handle imported from another process is that process's memory: not on any device here, not
// in the live set; its mappings count as mapped from other processes. An import of this process's
// own handle is one more reference to it.
TEST(ReplayTest, ImportedHandlesAreNotThisProcesssMemory) {
  Events events;
  const uint64_t base = 0x7f00'0000'0000;
  events.Add(CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE, VMM_IMPORTED, ALLOC, -1, 0, 0, 1, 0xE);  // 1
  events.Add(CU_MEM_MAP, VMM_MAPPING, ALLOC, -1, 10 * kMiB, base, 1, 0xE);                 // 2
  events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 2 * kMiB, 0, 2, 0xA);                  // 3: 2
  events.Add(CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE, VMM_IMPORTED, ALLOC, -1, 0, 0, 1, 0xA);  // 4
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xA);                        // 5: 2
  {
    const Replay replay = events.Run();
    EXPECT_EQ(replay.LiveBytes(0), 2 * kMiB);
    EXPECT_EQ(replay.LiveBytes(-1), 0u);
    EXPECT_EQ(replay.FindContaining(base + 4096), nullptr);
    EXPECT_EQ(replay.imported_mapped_bytes(), 10 * kMiB);
    size_t live = 0;
    replay.ForEachLive([&](const LiveAllocation&) { ++live; });
    EXPECT_EQ(live, 1u);
  }
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xA);                        // 6: 0
  events.Add(CU_MEM_RETAIN_ALLOCATION_HANDLE, VMM_PHYSICAL, RETAIN, -1, 0, base, 0, 0xE);  // 7
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xE);                        // 8
  events.Add(CU_MEM_UNMAP, VMM_MAPPING, FREE, -1, 10 * kMiB, base);                        // 9
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xE);                        // 10
  const Replay replay = events.Run();
  EXPECT_EQ(replay.anomalies().total(), 0u) << DescribeAnomalies(replay.anomalies());
  EXPECT_EQ(replay.imported_mapped_bytes(), 0u);
  EXPECT_EQ(replay.imported_mapped_peak_bytes(), 10 * kMiB);
  const std::vector<PlaceUsage> places = replay.Places();
  ASSERT_EQ(places.size(), 1u);
  EXPECT_EQ(places[0].place, 0);
  EXPECT_EQ(places[0].peak_bytes, 2 * kMiB);
  EXPECT_EQ(places[0].live.bytes, 0u);
}

TEST(ReplayTest, AnomaliesAreCountedNotFatal) {
  Events events;
  events.Malloc(0, 100, 0x1000, 1);  // 1: 100 <- peak
  events.Free(0x1000);               // 2: 0
  events.Free(0x1000);               // 3: double free
  events.Free(0xDEAD0000);           // 4: never allocated
  events.Free(0);                    // 5: cudaFree(nullptr): no anomaly
  events.Malloc(0, 50, 0x2000, 2);   // 6: 50
  events.Malloc(0, 30, 0x2010, 3);   // 7: inside the live 0x2000: overlap, the older one dropped
  events.Malloc(0, 20, 0x3000, 4);   // 8: 50
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0x77);  // 9: unknown handle
  events.Add(CUDA_FREE, KIND_UNKNOWN, FREE_FAILED, -1, 0, 0x3000);    // 10: nothing freed
  events.Add(CUDA_MALLOC, DEVICE, ALLOC_FAILED, 0, uint64_t{1} << 40, 0).set_result(2);  // 11
  events.Free(0x1000);  // 12: still a double free
  const Replay replay = events.Run();
  EXPECT_EQ(replay.anomalies().double_frees, 2u);
  EXPECT_EQ(replay.anomalies().unknown_frees, 2u);
  EXPECT_EQ(replay.anomalies().overlapping_allocations, 1u);
  EXPECT_EQ(replay.failed_allocations(), 1u);
  const std::vector<PlaceUsage> places = replay.Places();
  ASSERT_EQ(places.size(), 1u);
  EXPECT_EQ(places[0].peak_bytes, 100u);
  EXPECT_EQ(places[0].peak_seq, 1u);
  ExpectSites(places[0].peak_sites, {{1, 100, 1}});
  EXPECT_EQ(places[0].live.bytes, 50u);
  ExpectSites(places[0].live_sites, {{3, 30, 1}, {4, 20, 1}});
}

TEST(ReplayTest, AnAddressFreedAndAllocatedAgainIsNoDoubleFree) {
  Events events;
  events.Malloc(0, 10, 0x1000, 1);
  events.Free(0x1000);
  events.Malloc(0, 10, 0x1000, 1);
  events.Free(0x1000);
  const Replay replay = events.Run();
  EXPECT_EQ(replay.anomalies().total(), 0u);
  EXPECT_EQ(replay.Places()[0].peak_bytes, 10u);
}

// Frees carry device -1: each takes its device from the allocation it frees. Managed and pool
// memory count on their device; pinned host memory on its own.
TEST(ReplayTest, TwoDevicesAndPinnedHost) {
  Events events;
  events.Malloc(0, 10 * kMiB, 0xA000'0000, 1);                                         // 1 d0=10
  events.Malloc(1, 20 * kMiB, 0xB000'0000, 2);                                         // 2 d1=20
  events.Add(CUDA_MALLOC_HOST, PINNED_HOST, ALLOC, -1, 5 * kMiB, 0x5000'0000, 3);      // 3 h=5
  events.Add(CUDA_MALLOC_MANAGED, MANAGED, ALLOC, 0, 6 * kMiB, 0xC000'0000, 4);        // 4 d0=16
  events.Free(0xB000'0000);                                                            // 5 d1=0
  events.Add(CUDA_MALLOC_ASYNC, POOL, ALLOC, 1, 8 * kMiB, 0xD000'0000, 5);             // 6 d1=8
  events.Add(CUDA_FREE_ASYNC, KIND_UNKNOWN, FREE, -1, 0, 0xA000'0000);                 // 7 d0=6
  events.Add(CUDA_FREE_HOST, KIND_UNKNOWN, FREE, -1, 0, 0x5000'0000);                  // 8 h=0
  events.Add(CU_MEM_ALLOC_FROM_POOL_ASYNC, POOL, ALLOC, 0, 1 * kMiB, 0xE000'0000, 6);  // 9 d0=7
  const Replay replay = events.Run();
  EXPECT_EQ(replay.anomalies().total(), 0u);
  const std::vector<PlaceUsage> places = replay.Places();
  ASSERT_EQ(places.size(), 3u);
  EXPECT_EQ(places[0].place, 0);
  EXPECT_EQ(places[1].place, 1);
  EXPECT_EQ(places[2].place, kPinnedHost);

  EXPECT_EQ(places[0].peak_bytes, 16 * kMiB);
  EXPECT_EQ(places[0].peak_seq, 4u);
  ExpectSites(places[0].peak_sites, {{1, 10 * kMiB, 1}, {4, 6 * kMiB, 1}});
  EXPECT_EQ(places[0].live.bytes, 7 * kMiB);
  ExpectSites(places[0].live_sites, {{4, 6 * kMiB, 1}, {6, 1 * kMiB, 1}});

  EXPECT_EQ(places[1].peak_bytes, 20 * kMiB);
  EXPECT_EQ(places[1].peak_seq, 2u);
  ExpectSites(places[1].peak_sites, {{2, 20 * kMiB, 1}});
  EXPECT_EQ(places[1].live.bytes, 8 * kMiB);

  EXPECT_EQ(places[2].peak_bytes, 5 * kMiB);
  EXPECT_EQ(places[2].peak_seq, 3u);
  EXPECT_EQ(places[2].live.bytes, 0u);
}

// ---- the bundled real traces (recorded on an H100) ----

std::string Sample(const std::string& name) {
  return std::string(GPUMEM_SOURCE_DIR) + "/samples/traces/" + name;
}

// Observers index what they keep of each allocation by LiveAllocation::index: no two live
// allocations share one (plain and VMM physical alike, also when an allocation over a live range
// drops it), an index comes back only after its allocation ended, and they stay as few as the
// largest live set. Every start is told once, and so is every end.
class IndexChecker final : public ReplayObserver {
 public:
  void AfterMemory(const MemoryEventFields&, const Replay&) override {}
  void AddLaunch(const LaunchEvent&, const Replay&) override {}
  void AllocationStarted(const LiveAllocation& live) override {
    EXPECT_TRUE(live_.emplace(live.index, live.seq).second) << "index " << live.index << " in use";
    max_index_ = std::max(max_index_, live.index);
    max_live_ = std::max(max_live_, live_.size());
    ++started_;
  }
  void AllocationEnded(const LiveAllocation& live) override {
    auto it = live_.find(live.index);
    ASSERT_NE(it, live_.end()) << "index " << live.index << " was not live";
    EXPECT_EQ(it->second, live.seq);
    live_.erase(it);
    ++ended_;
  }
  void Finished(const Replay& replay) override {
    size_t still_live = 0;
    replay.ForEachLive([&](const LiveAllocation& live) {
      ++still_live;
      EXPECT_EQ(live_.at(live.index), live.seq);
    });
    EXPECT_EQ(still_live, live_.size());
  }

  std::map<uint32_t, uint64_t> live_;  // index -> seq of its allocation
  uint32_t max_index_ = 0;
  size_t max_live_ = 0;
  size_t started_ = 0;
  size_t ended_ = 0;
};

TEST(ReplayTest, LiveAllocationsHaveDistinctIndicesReusedOnlyAfterTheyEnd) {
  Events events;
  for (uint64_t round = 0; round < 3; ++round) {
    for (uint64_t i = 0; i < 8; ++i) events.Malloc(0, kMiB, 0x1000'0000 + i * 0x100'0000, i);
    events.Malloc(0, 4 * 0x100'0000, 0x1000'0000, 9);  // over the first four: they are dropped
    events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 2 * kMiB, 0, 2, /*handle=*/0xA + round);
    for (uint64_t i = 4; i < 8; ++i) events.Free(0x1000'0000 + i * 0x100'0000);
    events.Free(0x1000'0000);
    events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xA + round);
  }
  events.Malloc(0, kMiB, 0x9000'0000, 1);  // still live at the end
  IndexChecker checker;
  Replay replay(&checker);
  for (const MemoryEvent& event : events.events()) replay.Add(event);
  checker.Finished(replay);
  EXPECT_EQ(checker.started_, 3u * 10 + 1);
  EXPECT_EQ(checker.ended_, 3u * 10);
  EXPECT_EQ(checker.live_.size(), 1u);
  EXPECT_EQ(checker.max_live_, 8u);  // eight, four of them dropped before the ninth starts
  EXPECT_LT(checker.max_index_, checker.max_live_);
}

TEST(ReplayRealTraceTest, LeakLoop) {
  // samples/leak_loop/leak_loop.cc: 10 iterations of a 16 MiB buffer (freed) and a 4 MiB
  // activation (kept). The peak is the last iteration's buffer with all 10 activations.
  constexpr uint64_t kIterations = 10, kWork = 16 * kMiB, kActivation = 4 * kMiB;
  absl::StatusOr<TraceReplay> replay = ReplayTrace(Sample("leak_loop-h200.trace"));
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ(replay->anomalies.total(), 0u);
  ASSERT_EQ(replay->places.size(), 1u);
  const PlaceUsage& device = replay->places[0];
  EXPECT_EQ(device.place, 0);
  EXPECT_EQ(device.peak_bytes, kWork + kIterations * kActivation);  // 56 MiB
  EXPECT_EQ(device.peak_seq, 29u);  // the 10th activation, before its buffer's free
  ASSERT_EQ(device.peak_sites.size(), 2u);
  EXPECT_EQ(device.peak_sites[0].tally.bytes, kIterations * kActivation);
  EXPECT_EQ(device.peak_sites[0].tally.count, kIterations);
  EXPECT_EQ(device.peak_sites[1].tally.bytes, kWork);
  EXPECT_EQ(device.peak_sites[1].tally.count, 1u);
  // samples/leak_loop/expected.txt: live count=10 bytes=41943040, from one call site.
  EXPECT_EQ(device.live.count, 10u);
  EXPECT_EQ(device.live.bytes, 41943040u);
  ASSERT_EQ(device.live_sites.size(), 1u);
  EXPECT_EQ(device.live_sites[0].stack_id, device.peak_sites[0].stack_id);
  EXPECT_EQ(device.allocated.count, 20u);
  EXPECT_EQ(device.allocated.bytes, 209715200u);
}

TEST(ReplayRealTraceTest, ExpandableSegmentsCountPhysicalMemoryNotReservations) {
  const std::string path = Sample("train_mlp-expandable-h100.trace");
  // The expected answer, computed independently from the events: physical memory is what
  // cuMemCreate made minus what cuMemRelease gave back, plus plain cuMemAlloc'd memory; the two
  // reservations (about 178 GiB of address space) and the mappings count nothing.
  absl::StatusOr<SortedTrace> sorted = ReadMemoryEventsBySeq(path);
  ASSERT_TRUE(sorted.ok()) << sorted.status();
  int64_t live = 0, peak = 0, created = 0, releases = 0, reserved = 0;
  for (const MemoryEvent& event : sorted->events) {
    if (event.api() == CU_MEM_CREATE && event.action() == ALLOC) {
      live += event.size();
      ++created;
    } else if (event.api() == CU_MEM_RELEASE && event.action() == FREE) {
      ++releases;  // none in this trace; would need the size of its handle
    } else if (event.api() == CU_MEM_ALLOC && event.action() == ALLOC) {
      live += event.size();
    } else if (event.api() == CU_MEM_ADDRESS_RESERVE && event.action() == ALLOC) {
      reserved += event.size();
    }
    peak = std::max(peak, live);
  }
  ASSERT_EQ(created, 7);  // and one cuMemCreate that failed
  ASSERT_EQ(releases, 0);
  ASSERT_GT(reserved, 100 * peak);

  absl::StatusOr<TraceReplay> replay = ReplayTrace(path);
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ(replay->anomalies.total(), 0u);
  // PyTorch's fabric-handle probe (cuMemCreate, error 800): a failed call, not out of memory.
  EXPECT_EQ(replay->failed_allocations, 0u);
  EXPECT_EQ(replay->failed_calls, 1u);
  EXPECT_EQ(replay->reserved_peak_bytes, static_cast<uint64_t>(reserved));
  ASSERT_EQ(replay->places.size(), 1u);
  EXPECT_EQ(replay->places[0].place, 0);
  EXPECT_EQ(replay->places[0].peak_bytes, static_cast<uint64_t>(peak));
  EXPECT_EQ(replay->places[0].peak_bytes, 243533824u);
  Tally at_peak;
  for (const SiteTally& site : replay->places[0].peak_sites) at_peak.Add(site.tally);
  EXPECT_EQ(at_peak.bytes, replay->places[0].peak_bytes);
}

// For traces of plain allocations only, what the replay leaves live agrees with the event counts.
TEST(ReplayRealTraceTest, LiveAtEndAgreesWithEventCounts) {
  for (const char* name :
       {"static_cudart-h200.trace", "train_mlp-async-h100.trace", "leak_loop-h200.trace"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<SortedTrace> sorted = ReadMemoryEventsBySeq(Sample(name));
    ASSERT_TRUE(sorted.ok()) << sorted.status();
    const EventCounts counts = CountEvents(sorted->events);
    absl::StatusOr<TraceReplay> replay = ReplayTrace(Sample(name));
    ASSERT_TRUE(replay.ok()) << replay.status();
    Tally live;
    for (const PlaceUsage& place : replay->places) {
      live.Add(place.live);
      Tally at_peak;
      for (const SiteTally& site : place.peak_sites) at_peak.Add(site.tally);
      EXPECT_EQ(at_peak.bytes, place.peak_bytes);
      EXPECT_GE(place.peak_bytes, place.live.bytes);
    }
    EXPECT_EQ(live.count, counts.live.count);
    EXPECT_EQ(live.bytes, counts.live.bytes);
    EXPECT_EQ(replay->anomalies.total(), 0u);
  }
}

}  // namespace
}  // namespace gpumem::report
