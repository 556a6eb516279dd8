// Launch events in seq order with memory events (report/trace/event_stream.h): a file's order is not
// seq order (threads race for file space), and a launch must be matched against the memory live
// at its seq, not at its place in the file.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/trace/event_stream.h"
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

}  // namespace
}  // namespace gpumem::report
