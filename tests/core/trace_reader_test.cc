// The framing reader against trace bytes made with the real libprotobuf: clean, padded, torn at
// every byte, damaged in the middle, and files that are no trace at all.
#include "core/trace_reader.h"

#include <fcntl.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "core/trace_framing.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::FooterPacket;
using testing::Framed;
using testing::FramedAll;
using testing::UniqueTempPath;

// gtest only (no gmock in the test link): a substring check that prints both sides.
::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

TracePacket HeaderPacket() {
  TracePacket packet = testing::HeaderPacket();
  Header* header = packet.mutable_header();
  header->add_command_line("python");
  header->add_command_line("train.py");
  header->set_start_time_mono_ns(1000);
  return packet;
}

TracePacket MemoryPacket(uint64_t seq) {
  TracePacket packet;
  MemoryEvent* event = packet.mutable_memory();
  event->set_seq(seq);
  event->set_timestamp_ns(1000 + seq * 10);
  event->set_tid(77);
  event->set_api(CUDA_MALLOC);
  event->set_kind(DEVICE);
  event->set_action(ALLOC);
  event->set_size(1 << 20);
  event->set_address(0x7f0000000000 + seq * 0x100000);
  event->set_stack_id(3);
  return packet;
}

TracePacket StackPacket(int frames) {
  TracePacket packet;
  Stack* stack = packet.mutable_stack();
  stack->set_id(3);
  for (int i = 0; i < frames; ++i) stack->add_frame(0x7f12'3456'7000 + i * 0x10a0a);
  return packet;
}

std::vector<TracePacket> SamplePackets() {
  std::vector<TracePacket> packets = {HeaderPacket(), StackPacket(30)};
  for (uint64_t seq = 1; seq <= 5; ++seq) packets.push_back(MemoryPacket(seq));
  packets.push_back(FooterPacket(5));
  return packets;
}

class TraceReaderTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& bytes) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
    return path_;
  }
  void TearDown() override { std::remove(path_.c_str()); }

  struct Result {
    std::vector<std::string> packets;  // bytes of each packet
    std::vector<uint64_t> offsets;
    TraceEnd end;
  };
  // Opens path_ (expecting success) and reads every packet.
  Result ReadAll() {
    Result result;
    TraceReader reader;
    std::string error;
    EXPECT_TRUE(reader.Open(path_, &error)) << error;
    Packet packet;
    while (reader.Next(&packet)) {
      result.packets.emplace_back(packet.bytes);
      result.offsets.push_back(packet.offset);
    }
    result.end = reader.end();
    return result;
  }
  std::string OpenError() {
    TraceReader reader;
    std::string error;
    EXPECT_FALSE(reader.Open(path_, &error));
    EXPECT_EQ(error, reader.end().message);
    EXPECT_EQ(error.find('\n'), std::string::npos) << "one line";
    return error;
  }

  std::string ReadFileBytes() { return testing::ReadFile(path_); }

  std::string path_ = UniqueTempPath(".trace");
};

TEST_F(TraceReaderTest, CleanFileGivesEveryPacketAndCleanEnd) {
  const std::vector<TracePacket> packets = SamplePackets();
  std::vector<uint64_t> offsets;
  const std::string bytes = FramedAll(packets, &offsets);
  Write(bytes);

  Result result = ReadAll();
  ASSERT_EQ(result.packets.size(), packets.size());
  for (size_t i = 0; i < packets.size(); ++i) {
    EXPECT_EQ(result.packets[i], packets[i].SerializeAsString()) << "packet " << i;
    EXPECT_EQ(result.offsets[i], offsets[i]);
  }
  EXPECT_EQ(result.end.kind, TraceEnd::Kind::kClean);
  EXPECT_TRUE(result.end.ok());
  EXPECT_EQ(result.end.message, "");

  // The whole file is also one `Trace` message, as the schema promises.
  Trace trace;
  ASSERT_TRUE(trace.ParseFromString(bytes));
  EXPECT_EQ(trace.packet_size(), static_cast<int>(packets.size()));
}

TEST_F(TraceReaderTest, SkipsZerosBetweenPacketsAndReportsTheZeroTail) {
  const std::vector<TracePacket> packets = SamplePackets();
  const size_t gaps[] = {0, 1, 7, 8, 9, 100, 5000, 3, 64};
  std::string bytes;
  uint64_t zeros = 0;
  for (size_t i = 0; i < packets.size(); ++i) {
    if (i > 0) {
      bytes.append(gaps[i % std::size(gaps)], '\0');
      zeros += gaps[i % std::size(gaps)];
    }
    bytes += Framed(packets[i]);
  }
  const uint64_t tail_offset = bytes.size();
  bytes.append(1 << 20, '\0');
  Write(bytes);

  TraceReader reader;
  std::string error;
  ASSERT_TRUE(reader.Open(path_, &error)) << error;
  Packet packet;
  size_t count = 0;
  while (reader.Next(&packet)) {
    ASSERT_LT(count, packets.size());
    EXPECT_EQ(packet.bytes, packets[count].SerializeAsString());
    ++count;
  }
  EXPECT_EQ(count, packets.size());
  EXPECT_EQ(reader.end().kind, TraceEnd::Kind::kZeroTail);
  EXPECT_TRUE(reader.end().ok());
  EXPECT_EQ(reader.end().zero_tail_offset, tail_offset);
  EXPECT_EQ(reader.end().zero_tail_bytes, uint64_t{1} << 20);
  EXPECT_EQ(reader.zero_bytes_skipped(), zeros + (1 << 20));
}

TEST_F(TraceReaderTest, SkipsASparseHoleOfPreallocatedSpace) {
  Write(Framed(HeaderPacket()) + Framed(MemoryPacket(1)));
  const uint64_t written = Framed(HeaderPacket()).size() + Framed(MemoryPacket(1)).size();
  ASSERT_EQ(truncate(path_.c_str(), 1 << 30), 0);  // 1 GiB hole: must not take long to skip
  Result result = ReadAll();
  EXPECT_EQ(result.packets.size(), 2u);
  EXPECT_EQ(result.end.kind, TraceEnd::Kind::kZeroTail);
  EXPECT_EQ(result.end.zero_tail_offset, written);
  EXPECT_EQ(result.end.zero_tail_bytes, (uint64_t{1} << 30) - written);
}

// The recorder's crash: the file ends inside the last packet, wherever that is.
TEST_F(TraceReaderTest, TornAtEveryByteOfTheLastPacket) {
  for (const TracePacket& last : {FooterPacket(5), StackPacket(60), MemoryPacket(9)}) {
    std::string intact;
    for (const TracePacket& packet : SamplePackets()) {
      if (!packet.has_footer()) intact += Framed(packet);
    }
    const std::string tail = Framed(last);
    for (size_t cut = 1; cut < tail.size(); ++cut) {
      SCOPED_TRACE("last packet " + last.ShortDebugString().substr(0, 20) + ", cut after " +
                   std::to_string(cut) + " bytes");
      Write(intact + tail.substr(0, cut));
      Result result = ReadAll();
      EXPECT_EQ(result.packets.size(), SamplePackets().size() - 1);
      EXPECT_EQ(result.end.kind, TraceEnd::Kind::kTorn);
      EXPECT_FALSE(result.end.ok());
      EXPECT_EQ(result.end.offset, intact.size());
      EXPECT_EQ(result.end.unread_bytes, cut);
      EXPECT_EQ(result.end.skipped_regions, 0u);
      EXPECT_TRUE(Contains(result.end.message,
                           path_ + ": torn packet at byte " + std::to_string(intact.size())));
      EXPECT_TRUE(Contains(result.end.message, "(last " + std::to_string(cut) + " bytes"));
    }
  }
}

TEST_F(TraceReaderTest, HeaderCutShortOpensAndReportsTheTear) {
  Write(Framed(HeaderPacket()).substr(0, 12));
  TraceReader reader;
  std::string error;
  ASSERT_TRUE(reader.Open(path_, &error)) << error;
  Packet packet;
  EXPECT_FALSE(reader.Next(&packet));
  EXPECT_EQ(reader.end().kind, TraceEnd::Kind::kTorn);
  EXPECT_EQ(reader.end().offset, 0u);
}

TEST_F(TraceReaderTest, HalfWrittenPacketInTheMiddleIsSkippedAndReported) {
  // A writer killed inside memcpy: large copies store the head last, so the tag can still be
  // zero while the middle of the packet is there. Packets other threads wrote later must survive.
  const std::vector<TracePacket> packets = SamplePackets();
  std::string bytes;
  uint64_t damaged_offset = 0;
  for (size_t i = 0; i < packets.size(); ++i) {
    std::string framed = Framed(packets[i]);
    if (i == 1) {  // the 30-frame stack
      damaged_offset = bytes.size();
      std::fill(framed.begin(), framed.begin() + 32, '\0');
    }
    bytes += framed;
  }
  Write(bytes);
  Result result = ReadAll();
  ASSERT_EQ(result.packets.size(), packets.size() - 1);
  EXPECT_EQ(result.packets[0], packets[0].SerializeAsString());
  for (size_t i = 2; i < packets.size(); ++i) {
    EXPECT_EQ(result.packets[i - 1], packets[i].SerializeAsString());
  }
  EXPECT_EQ(result.end.kind, TraceEnd::Kind::kClean);
  EXPECT_FALSE(result.end.ok());
  EXPECT_EQ(result.end.skipped_regions, 1u);
  EXPECT_GT(result.end.first_skipped_offset, damaged_offset + 31);
  EXPECT_TRUE(Contains(result.end.message, path_ + ": corrupt data at byte "));
}

// Format 2: EventRefs are Trace's field 2 (tag 0x12), framed like packets and read in file order
// among them; the reader says which is which.
std::string FramedRef(uint32_t writer, uint32_t slot, int64_t time_delta) {
  EventRef ref;
  ref.set_writer(writer);
  ref.set_slot(slot);
  ref.set_time_delta(time_delta);
  const std::string body = ref.SerializeAsString();
  return "\x12" + testing::Varint(body.size()) + body;
}

TEST_F(TraceReaderTest, EventReferencesAreFramedAmongPackets) {
  const std::string first = FramedRef(1, 300, 5);
  const std::string refs = first + FramedRef(1, 2, -7);
  const std::string head = Framed(HeaderPacket()) + Framed(MemoryPacket(1));
  Write(head + refs + Framed(MemoryPacket(2)));
  TraceReader reader;
  std::string error;
  ASSERT_TRUE(reader.Open(path_, &error)) << error;
  std::vector<bool> kinds;
  std::vector<uint64_t> offsets;
  Packet packet;
  while (reader.Next(&packet)) {
    kinds.push_back(packet.event_ref);
    offsets.push_back(packet.offset);
  }
  EXPECT_EQ(kinds, (std::vector<bool>{false, false, true, true, false}));
  EXPECT_EQ(offsets[2], head.size());
  EXPECT_EQ(offsets[3], head.size() + first.size());
  EXPECT_TRUE(reader.end().ok()) << reader.end().message;
  Trace trace;  // still one Trace message, the two fields apart
  ASSERT_TRUE(trace.ParseFromString(ReadFileBytes()));
  EXPECT_EQ(trace.packet_size(), 3);
  EXPECT_EQ(trace.event_ref_size(), 2);
}

// After a half-written packet, reading resumes at the next intact frame even when only
// references follow it.
TEST_F(TraceReaderTest, DamageFollowedByReferencesResumesAtTheFirstReference) {
  std::string damaged = Framed(StackPacket(30));
  std::fill(damaged.begin(), damaged.begin() + 32, '\0');
  const std::string head = Framed(HeaderPacket()) + damaged;
  Write(head + FramedRef(1, 1, 1) + FramedRef(1, 1, 2) + FramedRef(1, 1, 3));
  Result result = ReadAll();
  ASSERT_EQ(result.packets.size(), 4u);
  EXPECT_EQ(result.offsets[1], head.size());
  EXPECT_EQ(result.end.skipped_regions, 1u);
}

TEST_F(TraceReaderTest, GarbageAtTheEndIsCorruptAtItsOffset) {
  std::string bytes = FramedAll(SamplePackets());
  const uint64_t garbage_at = bytes.size();
  bytes += "\x41\x42\x43 not a packet";
  Write(bytes);
  Result result = ReadAll();
  EXPECT_EQ(result.packets.size(), SamplePackets().size());
  EXPECT_EQ(result.end.kind, TraceEnd::Kind::kCorrupt);
  EXPECT_EQ(result.end.offset, garbage_at);
  EXPECT_TRUE(
      Contains(result.end.message, path_ + ": corrupt data at byte " + std::to_string(garbage_at) +
                                       ": byte 0x41 is neither zero padding nor a packet tag"));
}

TEST_F(TraceReaderTest, MalformedLengthIsCorrupt) {
  std::string bytes = Framed(HeaderPacket());
  const uint64_t bad_at = bytes.size();
  bytes += std::string("\x0A") + std::string(11, '\xFF') + "\x01";
  Write(bytes);
  Result result = ReadAll();
  EXPECT_EQ(result.packets.size(), 1u);
  EXPECT_EQ(result.end.kind, TraceEnd::Kind::kCorrupt);
  EXPECT_EQ(result.end.offset, bad_at);
  EXPECT_TRUE(Contains(result.end.message, "malformed packet length"));
}

TEST_F(TraceReaderTest, PacketsLargerThanTheReadChunkAndManySmallOnes) {
  TracePacket padding;
  padding.set_padding(std::string(9 << 20, '\0'));  // larger than the 4 MiB read chunk
  std::string bytes = Framed(HeaderPacket()) + Framed(padding);
  constexpr int kEvents = 200000;  // several chunks' worth, packets straddling chunk ends
  for (int seq = 1; seq <= kEvents; ++seq) bytes += Framed(MemoryPacket(seq));
  Write(bytes);

  TraceReader reader;
  std::string error;
  ASSERT_TRUE(reader.Open(path_, &error)) << error;
  Packet packet;
  ASSERT_TRUE(reader.Next(&packet));
  ASSERT_TRUE(reader.Next(&packet));
  EXPECT_EQ(packet.bytes.size(), padding.ByteSizeLong());
  uint64_t expected_seq = 1;
  TracePacket parsed;
  while (reader.Next(&packet)) {
    ASSERT_TRUE(parsed.ParseFromArray(packet.bytes.data(), static_cast<int>(packet.bytes.size())));
    ASSERT_EQ(parsed.memory().seq(), expected_seq++);
  }
  EXPECT_EQ(expected_seq, uint64_t{kEvents} + 1);
  EXPECT_EQ(reader.end().kind, TraceEnd::Kind::kClean);
  EXPECT_EQ(reader.packets_read(), uint64_t{kEvents} + 2);
}

TEST_F(TraceReaderTest, RandomBytesAreNotATrace) {
  for (unsigned seed = 1; seed <= 50; ++seed) {
    std::mt19937 random(seed);
    std::string bytes(1 + random() % 4096, '\0');
    for (char& byte : bytes) byte = static_cast<char>(random());
    Write(bytes);
    EXPECT_TRUE(Contains(OpenError(), path_ + ": not a gpumem trace")) << "seed " << seed;
  }
}

TEST_F(TraceReaderTest, TextFilesAreNotATrace) {
  for (const char* text : {"hello, world\n", "\n", "\n\n", "\n\n\nabc\n", "# gpumem\n\n"}) {
    Write(text);
    EXPECT_TRUE(Contains(OpenError(), path_ + ": not a gpumem trace (")) << text;
  }
}

TEST_F(TraceReaderTest, AnElfBinaryIsNotATrace) {
  std::ifstream self("/proc/self/exe", std::ios::binary);
  Write(std::string(std::istreambuf_iterator<char>(self), {}));
  EXPECT_EQ(OpenError(), path_ + ": not a gpumem trace (no header packet at byte 0)");
}

TEST_F(TraceReaderTest, APacketOtherThanAHeaderFirstIsNotATrace) {
  Write(Framed(MemoryPacket(1)) + Framed(HeaderPacket()));
  EXPECT_EQ(OpenError(), path_ + ": not a gpumem trace (no header packet at byte 0)");
}

// What the recorder reads of a file at GPUMEM_OUTPUT before it removes it as a stale trace: its
// first 32 bytes (or fewer) must begin like a trace's header packet.
TEST(BeginsWithHeaderPacket, OnlyTheStartOfATrace) {
  auto begins = [](const std::string& bytes) {
    return framing::BeginsWithHeaderPacket(bytes.data(), std::min<size_t>(bytes.size(), 32));
  };
  const std::string trace = Framed(HeaderPacket()) + Framed(MemoryPacket(1));
  EXPECT_TRUE(begins(trace));
  EXPECT_TRUE(begins(trace.substr(0, 4)));
  EXPECT_FALSE(begins(trace.substr(0, 3)));
  EXPECT_FALSE(begins(Framed(MemoryPacket(1)) + Framed(HeaderPacket())));
  EXPECT_FALSE(begins(std::string(4096, '\0') + trace));
  for (const char* text : {"", "\n", "\n\n", "\n\n\nabc\n", "results, not a trace\n"}) {
    EXPECT_FALSE(begins(text)) << text;
  }
}

TEST_F(TraceReaderTest, EmptyFileSaysTheProcessWroteNothing) {
  Write("");
  EXPECT_EQ(OpenError(), path_ + ": empty trace: the recorded process wrote nothing");
  Write(std::string(4096, '\0'));
  EXPECT_TRUE(Contains(OpenError(), path_ + ": empty trace: the recorded process wrote nothing"));
}

TEST_F(TraceReaderTest, MissingFileAndDirectory) {
  TraceReader reader;
  std::string error;
  EXPECT_FALSE(reader.Open("/nonexistent/x.trace", &error));
  EXPECT_EQ(error, "/nonexistent/x.trace: No such file or directory");
  EXPECT_EQ(reader.end().kind, TraceEnd::Kind::kIoError);
  TraceReader directory;
  EXPECT_FALSE(directory.Open("/", &error));
  EXPECT_EQ(error, "/: is a directory");
}

}  // namespace
}  // namespace gpumem
