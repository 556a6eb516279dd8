// report/trace/event_stream.h: a file's order is not seq order (threads race for file space). The
// reorder window restores seq order to events shuffled within it and counts those beyond it; launch
// events take their place among the memory events, so a launch is matched against the memory live
// at its seq, not at its place in the file.
#include "report/trace/event_stream.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using testing::FramedAll;
using testing::HeaderPacket;
using testing::UniqueTempPath;

TracePacket Memory(uint64_t seq, Action action, uint64_t address) {
  TracePacket packet;
  MemoryEvent& event = *packet.mutable_memory();
  event.set_seq(seq);
  event.set_api(action == ALLOC ? CUDA_MALLOC : CUDA_FREE);
  event.set_kind(DEVICE);
  event.set_action(action);
  event.set_size(action == ALLOC ? 4096 : 0);
  event.set_address(address);
  return packet;
}

TracePacket Launch(uint64_t seq, uint64_t pointer) {
  TracePacket packet;
  LaunchEvent& launch = *packet.mutable_launch();
  launch.set_seq(seq);
  launch.set_api(CU_LAUNCH_KERNEL);
  launch.set_kernel_id(1);
  launch.add_pointer_args(pointer);
  return packet;
}

// Visits `packets` (written in the given file order) and returns "m<seq>" / "l<seq>" in the order
// the visitors saw them.
std::vector<std::string> VisitOrder(const std::vector<TracePacket>& packets, size_t window,
                                    MemoryStreamStats* stats) {
  std::vector<TracePacket> all = {HeaderPacket()};
  all.insert(all.end(), packets.begin(), packets.end());
  const std::string path = UniqueTempPath(".trace");
  std::ofstream(path, std::ios::binary) << FramedAll(all);
  std::vector<std::string> order;
  auto file = TraceFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return order;
  *stats = StreamMemoryEventsBySeq(
      **file, [&](const MemoryEvent& event) { order.push_back("m" + std::to_string(event.seq())); },
      window, nullptr,
      [&](const LaunchEvent& launch) {
        order.push_back("l" + std::to_string(launch.seq()));
        EXPECT_EQ(launch.pointer_args_size(), 1);  // the event itself, not a stale slot
        EXPECT_EQ(launch.pointer_args(0), 0x1000 * launch.seq());
      });
  std::remove(path.c_str());
  return order;
}

TEST(LaunchStreamTest, LaunchesTakeTheirPlaceInSeqOrder) {
  // File order: alloc 1, launch 3, alloc 2, free 5, launch 4, launch 6.
  MemoryStreamStats stats;
  std::vector<std::string> order =
      VisitOrder({Memory(1, ALLOC, 0xA000), Launch(3, 0x3000), Memory(2, ALLOC, 0xB000),
                  Memory(5, FREE, 0xA000), Launch(4, 0x4000), Launch(6, 0x6000)},
                 /*window=*/8, &stats);
  EXPECT_EQ(order, (std::vector<std::string>{"m1", "m2", "l3", "l4", "m5", "l6"}));
  EXPECT_EQ(stats.events, 3u);
  EXPECT_EQ(stats.launches, 3u);
  EXPECT_EQ(stats.out_of_order, 0u);
}

TEST(LaunchStreamTest, TheWindowCountsLaunchesAndSlotsAreReused) {
  // 1000 launches between two memory events, a window of 4: the buffer never holds more than 5
  // entries, so launch slots are reused many times; every launch still arrives with its own data.
  std::vector<TracePacket> packets = {Memory(1, ALLOC, 0xA000)};
  for (uint64_t seq = 2; seq < 1002; ++seq) packets.push_back(Launch(seq, 0x1000 * seq));
  packets.push_back(Memory(1002, FREE, 0xA000));
  MemoryStreamStats stats;
  std::vector<std::string> order = VisitOrder(packets, /*window=*/4, &stats);
  ASSERT_EQ(order.size(), 1002u);
  EXPECT_EQ(order.front(), "m1");
  EXPECT_EQ(order[500], "l501");
  EXPECT_EQ(order.back(), "m1002");
  EXPECT_EQ(stats.launches, 1000u);
}

TEST(LaunchStreamTest, WithoutALaunchVisitorLaunchesGoToThePacketVisitor) {
  const std::string path = UniqueTempPath(".trace");
  std::ofstream(path, std::ios::binary)
      << FramedAll({HeaderPacket(), Memory(1, ALLOC, 0xA000), Launch(2, 0x2000)});
  auto file = TraceFile::Open(path);
  ASSERT_TRUE(file.ok());
  int launch_packets = 0;
  MemoryStreamStats stats = StreamMemoryEventsBySeq(
      **file, [](const MemoryEvent&) {}, kReorderWindow,
      [&](const PacketPosition&, const TracePacket& packet) {
        launch_packets += packet.data_case() == TracePacket::kLaunch;
      });
  EXPECT_EQ(launch_packets, 1);
  EXPECT_EQ(stats.events, 1u);
  EXPECT_EQ(stats.launches, 0u);
  std::remove(path.c_str());
}

// ---- the seq reorder window ----

MemoryEventFields Event(uint64_t seq, uint64_t address = 0) {
  MemoryEventFields event;
  event.seq = seq;
  event.address = address;
  return event;
}

// Pushes `events` in order through a buffer of `window`; returns what came out, in order.
std::vector<MemoryEventFields> Reorder(const std::vector<MemoryEventFields>& events, size_t window,
                                       uint64_t* out_of_order = nullptr) {
  SeqReorderBuffer buffer(window);
  std::vector<MemoryEventFields> released;
  auto release = [&](const MemoryEventFields& event) { released.push_back(event); };
  for (const MemoryEventFields& event : events) {
    buffer.Push(event, release);
    EXPECT_LE(buffer.size(), window);
  }
  buffer.Flush(release);
  EXPECT_EQ(buffer.size(), 0u);
  if (out_of_order != nullptr) *out_of_order = buffer.out_of_order();
  return released;
}

std::vector<uint64_t> Seqs(const std::vector<MemoryEventFields>& events) {
  std::vector<uint64_t> seqs;
  for (const MemoryEventFields& event : events) seqs.push_back(event.seq);
  return seqs;
}

// 1..n, each moved at most `distance` places from where it belongs.
std::vector<MemoryEventFields> LocallyShuffled(uint64_t n, size_t distance, uint64_t seed) {
  std::vector<MemoryEventFields> events;
  for (uint64_t seq = 1; seq <= n; ++seq) events.push_back(Event(seq));
  std::mt19937_64 random(seed);
  for (size_t begin = 0; begin < events.size(); begin += distance) {
    const size_t end = std::min(events.size(), begin + distance);
    std::shuffle(events.begin() + static_cast<std::ptrdiff_t>(begin),
                 events.begin() + static_cast<std::ptrdiff_t>(end), random);
  }
  return events;
}

TEST(SeqReorderBufferTest, ShuffledWithinTheWindowComesOutSorted) {
  // Blocks of 300: events move by up to 299 places, more than a ring shift (the heap takes
  // those) and less than the window.
  for (const size_t distance : {2u, 10u, 300u}) {
    SCOPED_TRACE(distance);
    uint64_t out_of_order = 0;
    const std::vector<MemoryEventFields> released =
        Reorder(LocallyShuffled(20000, distance, distance), 512, &out_of_order);
    std::vector<uint64_t> expected(20000);
    for (uint64_t i = 0; i < expected.size(); ++i) expected[i] = i + 1;
    EXPECT_EQ(Seqs(released), expected);
    EXPECT_EQ(out_of_order, 0u);
  }
}

TEST(SeqReorderBufferTest, TwoThreadsThatNeverLeaveItEmptyComeOutSorted) {
  // Odd seqs from one thread, even ones from another that lags two of them behind: 1 3 5 2 7 4 9
  // 6 ...: the buffer never empties, so the ring's head goes round and round it, wrapping.
  for (const size_t window : {1000u, 300u}) {
    SCOPED_TRACE(window);
    constexpr uint64_t kEvents = 20000;
    std::vector<MemoryEventFields> events;
    uint64_t even = 2;
    for (uint64_t odd = 1; odd <= kEvents; odd += 2) {
      events.push_back(Event(odd));
      if (odd >= 5) events.push_back(Event(std::exchange(even, even + 2)));
    }
    for (; even <= kEvents; even += 2) events.push_back(Event(even));
    uint64_t out_of_order = 0;
    const std::vector<uint64_t> seqs = Seqs(Reorder(events, window, &out_of_order));
    std::vector<uint64_t> expected(kEvents);
    for (uint64_t i = 0; i < kEvents; ++i) expected[i] = i + 1;
    EXPECT_EQ(seqs, expected);
    EXPECT_EQ(out_of_order, 0u);
  }
}

TEST(SeqReorderBufferTest, EqualSeqsKeepFileOrder) {
  // Seq 1 never comes: all six wait for the window (or the end), then leave by seq, ties in file
  // order.
  const std::vector<MemoryEventFields> events = {Event(3, 1), Event(2, 1), Event(3, 2),
                                                 Event(2, 2), Event(3, 3), Event(2, 3)};
  const std::vector<MemoryEventFields> released = Reorder(events, 16);
  ASSERT_EQ(released.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(released[i].seq, i < 3 ? 2u : 3u) << i;
    EXPECT_EQ(released[i].address, i % 3 + 1) << i;
  }
}

TEST(SeqReorderBufferTest, TheNextSeqLeavesAtOnceAndAGapHoldsTheWindowOnce) {
  SeqReorderBuffer buffer(100);
  std::vector<uint64_t> released;
  auto release = [&](const MemoryEventFields& event) { released.push_back(event.seq); };
  // 1, 3, 2: 1 leaves at once, 3 waits for 2, then both leave.
  buffer.Push(Event(1), release);
  EXPECT_EQ(buffer.size(), 0u);
  buffer.Push(Event(3), release);
  EXPECT_EQ(buffer.size(), 1u);
  buffer.Push(Event(2), release);
  EXPECT_EQ(buffer.size(), 0u);
  EXPECT_EQ(released, (std::vector<uint64_t>{1, 2, 3}));
  // Seq 4 is lost: 5.. wait until the window is full, then everything after the gap leaves.
  for (uint64_t seq = 5; seq <= 104; ++seq) buffer.Push(Event(seq), release);
  EXPECT_EQ(buffer.size(), 100u);
  EXPECT_EQ(released.size(), 3u);
  buffer.Push(Event(105), release);
  EXPECT_EQ(buffer.size(), 0u);
  ASSERT_EQ(released.size(), 104u);
  EXPECT_EQ(released.back(), 105u);
  buffer.Push(Event(106), release);
  EXPECT_EQ(buffer.size(), 0u);
  EXPECT_EQ(buffer.out_of_order(), 0u);
}

TEST(SeqReorderBufferTest, BeyondTheWindowIsCountedAndReleasedLate) {
  // Window 4: seq 1 comes after 10 larger ones. The fifth (14) made the window release 10, and
  // each one after it followed at once, being the next seq: 10..19 are out before 1.
  std::vector<MemoryEventFields> events;
  for (uint64_t seq = 10; seq < 20; ++seq) events.push_back(Event(seq));
  events.push_back(Event(1));
  events.push_back(Event(20));
  uint64_t out_of_order = 0;
  const std::vector<uint64_t> seqs = Seqs(Reorder(events, 4, &out_of_order));
  EXPECT_EQ(out_of_order, 1u);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 1, 20}));
  // Just within the window: in its place.
  events = {Event(5), Event(6), Event(7), Event(8), Event(1), Event(9)};
  EXPECT_EQ(Seqs(Reorder(events, 4, &out_of_order)), (std::vector<uint64_t>{1, 5, 6, 7, 8, 9}));
  EXPECT_EQ(out_of_order, 0u);
}

TEST(SeqReorderBufferTest, WindowZeroPassesThrough) {
  uint64_t out_of_order = 0;
  const std::vector<MemoryEventFields> events = {Event(1), Event(3), Event(2), Event(4)};
  EXPECT_EQ(Seqs(Reorder(events, 0, &out_of_order)), (std::vector<uint64_t>{1, 3, 2, 4}));
  EXPECT_EQ(out_of_order, 1u);
}

TEST(SeqReorderBufferTest, SlotAndCommitAsPush) {
  const std::vector<MemoryEventFields> events = LocallyShuffled(5000, 100, 3);
  SeqReorderBuffer buffer(64);  // some events beyond it
  std::vector<uint64_t> released;
  auto release = [&](const MemoryEventFields& event) { released.push_back(event.seq); };
  for (const MemoryEventFields& event : events) {
    *buffer.Slot() = event;
    buffer.Commit(release);
  }
  buffer.Flush(release);
  uint64_t out_of_order = 0;
  EXPECT_EQ(released, Seqs(Reorder(events, 64, &out_of_order)));
  EXPECT_EQ(buffer.out_of_order(), out_of_order);
  EXPECT_GT(out_of_order, 0u);
  EXPECT_GT(buffer.reordered(), 0u);
}

// ---- whole traces ----

}  // namespace
}  // namespace gpumem::report
