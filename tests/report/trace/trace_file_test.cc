// TraceFile: packets streamed in file order, the interned tables, and how the file ended.
#include "report/trace/trace_file.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using testing::FooterPacket;
using testing::Framed;
using testing::FramedAll;
using testing::HeaderPacket;
using testing::UniqueTempPath;

TracePacket DevicePacket(int ordinal, const std::string& name) {
  TracePacket packet;
  packet.mutable_device()->set_ordinal(ordinal);
  packet.mutable_device()->set_name(name);
  packet.mutable_device()->set_total_memory(80ull << 30);
  return packet;
}

TracePacket ModulePacket(uint32_t id, const std::string& path, uint64_t start) {
  TracePacket packet;
  Module* module = packet.mutable_module();
  module->set_id(id);
  module->set_path(path);
  module->set_start(start);
  module->set_end(start + 0x10000);
  module->set_load_bias(start);
  return packet;
}

TracePacket UnloadPacket(uint32_t id) {
  TracePacket packet;
  packet.mutable_module_unload()->set_id(id);
  return packet;
}

TracePacket ThreadPacket(uint32_t tid, const std::string& name) {
  TracePacket packet;
  packet.mutable_thread()->set_tid(tid);
  packet.mutable_thread()->set_name(name);
  return packet;
}

TracePacket StackPacket(uint64_t id) {
  TracePacket packet;
  packet.mutable_stack()->set_id(id);
  packet.mutable_stack()->add_frame(0x1234);
  return packet;
}

TracePacket MemoryPacket(uint64_t seq) {
  TracePacket packet;
  packet.mutable_memory()->set_seq(seq);
  packet.mutable_memory()->set_api(CUDA_MALLOC);
  packet.mutable_memory()->set_action(ALLOC);
  packet.mutable_memory()->set_size(4096);
  packet.mutable_memory()->set_address(0x7000 + seq);
  return packet;
}

class TraceFileTest : public ::testing::Test {
 protected:
  void Write(const std::string& bytes) { std::ofstream(path_, std::ios::binary) << bytes; }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_ = UniqueTempPath(".trace");
};

TEST_F(TraceFileTest, CollectsTablesAndVisitsEveryPacketInFileOrder) {
  const std::vector<TracePacket> packets = {
      HeaderPacket(),
      DevicePacket(0, "GPU A"),
      DevicePacket(1, "GPU B"),
      DevicePacket(0, "GPU A'"),  // the same device again: replaces
      ModulePacket(1, "/lib/a.so", 0x10000),
      ModulePacket(2, "/lib/b.so", 0x40000),
      ThreadPacket(77, "main"),
      StackPacket(5),
      MemoryPacket(2),
      MemoryPacket(1),
      UnloadPacket(2),
      ThreadPacket(77, "renamed"),
      FooterPacket(3),
  };
  std::vector<uint64_t> offsets;
  Write(FramedAll(packets, &offsets));

  std::vector<PacketPosition> seen;
  absl::StatusOr<std::unique_ptr<TraceFile>> trace =
      TraceFile::Read(path_, [&](const PacketPosition& position, const TracePacket& packet) {
        EXPECT_EQ(packet.SerializeAsString(), packets[seen.size()].SerializeAsString());
        seen.push_back(position);
      });
  ASSERT_TRUE(trace.ok()) << trace.status();
  const TraceFile& file = **trace;
  ASSERT_EQ(seen.size(), packets.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].index, i);
    EXPECT_EQ(seen[i].offset, offsets[i]);
    EXPECT_TRUE(seen[i].parsed);
  }
  EXPECT_EQ(file.header().host(), "testhost");
  ASSERT_EQ(file.devices().size(), 2u);
  EXPECT_EQ(file.devices()[0].name(), "GPU A'");
  ASSERT_EQ(file.modules().size(), 2u);
  EXPECT_TRUE(file.modules()[0].LoadedAt(12));
  EXPECT_FALSE(file.modules()[1].LoadedAt(3));  // before its Module packet
  EXPECT_TRUE(file.modules()[1].LoadedAt(9));
  EXPECT_FALSE(file.modules()[1].LoadedAt(10));  // unloaded by packet 10
  ASSERT_NE(file.FindThread(77), nullptr);
  EXPECT_EQ(file.FindThread(77)->name(), "renamed");
  ASSERT_NE(file.FindStack(5), nullptr);
  EXPECT_EQ(file.FindStack(5)->written_at, 7u);
  EXPECT_EQ(file.FindStack(6), nullptr);
  EXPECT_EQ(file.memory_event_count(), 2u);
  EXPECT_EQ(file.packet_count(), packets.size());
  ASSERT_TRUE(file.footer().has_value());
  EXPECT_EQ(file.footer()->events(), 3u);
  EXPECT_FALSE(file.end().damaged());
  EXPECT_EQ(file.end().Describe(), "clean (footer present)");
  EXPECT_EQ(file.end().ErrorLine(path_), "");
}

TracePacket PoolPacket(uint64_t pool, int32_t device, uint64_t reserved) {
  TracePacket packet;
  packet.mutable_pool_usage()->set_pool(pool);
  packet.mutable_pool_usage()->set_device(device);
  packet.mutable_pool_usage()->set_reserved_bytes(reserved);
  return packet;
}

// The pools' reserved sizes per device: each pool's latest size, summed over the device's pools,
// and the largest such sum.
TEST_F(TraceFileTest, PoolSizesAreSummedPerDevice) {
  constexpr uint64_t kMiB = 1 << 20;
  Write(FramedAll({HeaderPacket(), PoolPacket(0xA, 0, 32 * kMiB), PoolPacket(0xB, 0, 8 * kMiB),
                   PoolPacket(0xA, 0, 64 * kMiB),  // 72 MiB: the peak
                   PoolPacket(0xC, 1, 2 * kMiB), PoolPacket(0xA, 0, 16 * kMiB),
                   PoolPacket(0xB, 0, 0), FooterPacket(0)},
                  nullptr));
  absl::StatusOr<std::unique_ptr<TraceFile>> trace = TraceFile::Read(path_);
  ASSERT_TRUE(trace.ok()) << trace.status();
  const TraceFile::PoolReserved* device0 = (*trace)->FindPoolReserved(0);
  ASSERT_NE(device0, nullptr);
  EXPECT_EQ(device0->current, 16 * kMiB);
  EXPECT_EQ(device0->peak, 72 * kMiB);
  const TraceFile::PoolReserved* device1 = (*trace)->FindPoolReserved(1);
  ASSERT_NE(device1, nullptr);
  EXPECT_EQ(device1->current, 2 * kMiB);
  EXPECT_EQ(device1->peak, 2 * kMiB);
  EXPECT_EQ((*trace)->FindPoolReserved(2), nullptr);
}

// How recording ended, as every report tells it: from the last footer.
TEST(RecordingEndTest, SaysHowTheTraceEnded) {
  RecordingEnd none = RecordingEnd::FromFooter(std::nullopt);
  EXPECT_FALSE(none.complete());
  EXPECT_EQ(none.Describe(), "the process did not exit cleanly");

  Footer footer;
  footer.set_events(40);
  footer.set_clean_exit(true);
  RecordingEnd exited = RecordingEnd::FromFooter(footer);
  EXPECT_TRUE(exited.complete());
  EXPECT_EQ(exited.Describe(), "exited");
  footer.set_exit_status(3);
  EXPECT_EQ(RecordingEnd::FromFooter(footer).Describe(), "exited with status 3");

  footer.set_stop_reason(SIZE_LIMIT);
  footer.set_stopped_at_seq(25);
  footer.set_events_dropped(16);
  RecordingEnd stopped = RecordingEnd::FromFooter(footer);
  EXPECT_FALSE(stopped.complete());
  EXPECT_EQ(stopped.Describe(),
            "recording stopped at event 25 of 40: the trace reached the file size limit (ulimit "
            "-f) (16 events not recorded); exited with status 3");

  // Only the footer written when it stopped: the process never got to exit().
  footer.set_clean_exit(false);
  footer.clear_exit_status();
  footer.set_stop_reason(DESCRIPTOR_LOST);
  footer.set_events_dropped(1);
  EXPECT_EQ(RecordingEnd::FromFooter(footer).Describe(),
            "recording stopped at event 25: the program closed or replaced the trace's file "
            "descriptor (1 event not recorded); the process did not exit cleanly");
}

TEST_F(TraceFileTest, TheLastFooterSaysHowRecordingEnded) {
  TracePacket at_stop;
  at_stop.mutable_footer()->set_events(1);
  at_stop.mutable_footer()->set_stop_reason(DISK_FULL);
  at_stop.mutable_footer()->set_stopped_at_seq(2);
  TracePacket at_exit = at_stop;
  at_exit.mutable_footer()->set_clean_exit(true);
  at_exit.mutable_footer()->set_events(5);
  at_exit.mutable_footer()->set_events_dropped(4);
  at_exit.mutable_footer()->set_exit_status(0);
  Write(Framed(HeaderPacket()) + Framed(MemoryPacket(1)) + Framed(at_stop) + Framed(at_exit));
  absl::StatusOr<std::unique_ptr<TraceFile>> trace = TraceFile::Read(path_);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_FALSE((*trace)->end().complete());
  EXPECT_FALSE((*trace)->end().damaged());
  EXPECT_EQ((*trace)->end().Describe(),
            "recording stopped at event 2 of 5: no space left on the file system (4 events not "
            "recorded); "
            "exited with status 0");
}

TEST_F(TraceFileTest, NoFooterWithUnusedSpaceIsNotDamage) {
  Write(Framed(HeaderPacket()) + Framed(MemoryPacket(1)) + std::string(4096, '\0'));
  absl::StatusOr<std::unique_ptr<TraceFile>> trace = TraceFile::Read(path_);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_FALSE((*trace)->end().recording.footer_present);
  EXPECT_FALSE((*trace)->end().damaged());
  EXPECT_EQ((*trace)->end().Describe(),
            "no footer — the process did not exit cleanly; 4096 bytes of unused zero space at the "
            "end");
}

TEST_F(TraceFileTest, TornTraceKeepsEveryCompletePacket) {
  const std::string intact = Framed(HeaderPacket()) + Framed(MemoryPacket(1));
  const std::string last = Framed(MemoryPacket(2));
  Write(intact + last.substr(0, last.size() - 3));
  uint64_t memory_events = 0;
  absl::StatusOr<std::unique_ptr<TraceFile>> trace =
      TraceFile::Read(path_, [&](const PacketPosition&, const TracePacket& packet) {
        memory_events += packet.has_memory();
      });
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(memory_events, 1u);
  const TraceEndStatus& end = (*trace)->end();
  EXPECT_TRUE(end.damaged());
  const std::string torn_at = std::to_string(intact.size());
  const std::string unreadable = std::to_string(last.size() - 3);
  EXPECT_EQ(end.Describe(), "no footer — the process did not exit cleanly; torn packet at byte " +
                                torn_at + " (last " + unreadable + " bytes unreadable)");
  EXPECT_EQ(end.ErrorLine(path_), end.framing.message);
  EXPECT_EQ(end.ErrorLine(path_).rfind(path_ + ": torn packet at byte " + torn_at, 0), 0u);
}

TEST_F(TraceFileTest, PacketCutShortInsideItsReservedSpaceDoesNotParse) {
  // The recorder reserved the packet's space, wrote its length and part of it, then died: the
  // rest of the space is zeros, so framing finds a complete packet that libprotobuf rejects.
  const std::string intact = Framed(HeaderPacket());
  std::string cut = Framed(MemoryPacket(1));
  std::fill(cut.begin() + 6, cut.end(), '\0');
  Write(intact + cut + Framed(MemoryPacket(2)));
  std::vector<PacketPosition> positions;
  absl::StatusOr<std::unique_ptr<TraceFile>> trace = TraceFile::Read(
      path_,
      [&](const PacketPosition& position, const TracePacket&) { positions.push_back(position); });
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(positions.size(), 3u);
  EXPECT_FALSE(positions[1].parsed);
  EXPECT_TRUE(positions[2].parsed);
  EXPECT_EQ((*trace)->memory_event_count(), 1u);
  EXPECT_TRUE((*trace)->end().damaged());
  EXPECT_EQ(
      (*trace)->end().ErrorLine(path_),
      path_ + ": 1 packet(s) did not parse (first at byte " + std::to_string(intact.size()) + ")");
}

TEST_F(TraceFileTest, OpenErrorsAreOneLineNamingThePath) {
  Write("");
  EXPECT_EQ(TraceFile::Open(path_).status().message(),
            path_ + ": empty trace: the recorded process wrote nothing");

  // Framing accepts it (an empty header field first), but a zero tag follows: no valid packet.
  Write(std::string("\x0A\x04\x0A\x00\x00\x00", 6));
  EXPECT_EQ(TraceFile::Open(path_).status().message(),
            path_ + ": not a gpumem trace (the first packet is not a header)");

  Write(Framed(HeaderPacket(/*version=*/4)));
  EXPECT_EQ(TraceFile::Open(path_).status().message(),
            path_ +
                ": trace format version 4 is newer than this gpumem reads (3); use a newer "
                "gpumem");

  Write(Framed(HeaderPacket()).substr(0, 8));
  EXPECT_EQ(TraceFile::Open(path_).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(TraceFileTest, MemoryEventsBySeq) {
  std::string bytes = Framed(HeaderPacket());
  for (uint64_t seq : {3, 1, 2, 5, 4}) bytes += Framed(MemoryPacket(seq));
  Write(bytes);
  absl::StatusOr<SortedTrace> sorted = ReadMemoryEventsBySeq(path_);
  ASSERT_TRUE(sorted.ok()) << sorted.status();
  ASSERT_EQ(sorted->events.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) EXPECT_EQ(sorted->events[i].seq(), i + 1);
  EXPECT_EQ(sorted->file->header().pid(), 4242u);
}

}  // namespace
}  // namespace gpumem::report
