// The hand decoder of memory event packets (report/trace/memory_event_decoder.h) against
// libprotobuf: on random events encoded the way the recorder encodes them and the way libprotobuf
// does, it decodes every one to what libprotobuf parses; on random damage to them, whatever it
// accepts libprotobuf parses to the same event, and what it declines is left to libprotobuf.
#include "report/trace/memory_event_decoder.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "core/trace_ids.h"
#include "core/wire_writer.h"
#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

namespace f = proto::memory_field;

class RandomEvents {
 public:
  explicit RandomEvents(uint64_t seed) : random_(seed) {}

  // Edge values (varint length boundaries, 32-bit limits, all ones) a third of the time.
  uint64_t Value() {
    static constexpr uint64_t kEdges[] = {0,
                                          1,
                                          127,
                                          128,
                                          16383,
                                          16384,
                                          0x7fffffffull,
                                          0x80000000ull,
                                          0xffffffffull,
                                          0x100000000ull,
                                          ~uint64_t{0}};
    if (random_() % 3 == 0) return kEdges[random_() % std::size(kEdges)];
    return random_() >> (random_() % 64);
  }
  // A field is set about half the time, as in real events (zeros are omitted on the wire).
  uint64_t Maybe() { return random_() % 2 == 0 ? 0 : Value(); }

  MemoryEvent Event() {
    MemoryEvent event;
    event.set_seq(Maybe());
    event.set_timestamp_ns(Maybe());
    event.set_tid(static_cast<uint32_t>(Maybe()));
    event.set_device(static_cast<int32_t>(Maybe()));  // negative ones too: 10-byte varints
    event.set_api(static_cast<Api>(random_() % 3 == 0 ? Maybe() & 0x7fffffff : random_() % 48));
    event.set_kind(static_cast<MemoryKind>(random_() % 8));
    event.set_action(static_cast<Action>(random_() % 5));
    event.set_size(Maybe());
    event.set_address(Maybe());
    event.set_stream(Maybe());
    event.set_pool(Maybe());
    event.set_result(static_cast<int32_t>(Maybe()));
    event.set_stack_id(Maybe());
    event.set_handle(Maybe());
    event.set_offset(Maybe());
    event.set_free_bytes(Maybe());
    event.set_total_bytes(Maybe());
    event.set_pitch(Maybe());
    event.set_capture(Maybe());
    event.set_writer(static_cast<uint32_t>(Maybe()));
    event.set_template_slot(static_cast<uint32_t>(Maybe()));
    return event;
  }

  std::mt19937_64& engine() { return random_; }

 private:
  std::mt19937_64 random_;
};

// The packet as core/recorder.cc's RecordMemory() writes it: one-byte tags with the unchecked
// helpers, fields 16-21 with the checked writer, headers prepended. Without the outer Trace.packet
// header (the framing reader strips it).
std::string RecorderPacket(const MemoryEvent& event) {
  constexpr size_t kHeaderRoom = 1 + wire::kMaxVarintBytes;
  uint8_t buffer[kHeaderRoom + 18 * (2 + wire::kMaxVarintBytes)];
  uint8_t* body = buffer + kHeaderRoom;
  uint8_t* out = body;
  auto int32 = [](int32_t value) { return static_cast<uint64_t>(static_cast<int64_t>(value)); };
  out = wire::PutVarintField(out, f::kSeq, event.seq());
  out = wire::PutVarintField(out, f::kTimestampNs, event.timestamp_ns());
  out = wire::PutVarintField(out, f::kTid, event.tid());
  out = wire::PutVarintField(out, f::kDevice, int32(event.device()));
  out = wire::PutVarintField(out, f::kApi, static_cast<uint64_t>(event.api()));
  out = wire::PutVarintField(out, f::kKind, static_cast<uint64_t>(event.kind()));
  out = wire::PutVarintField(out, f::kAction, static_cast<uint64_t>(event.action()));
  out = wire::PutVarintField(out, f::kSize, event.size());
  out = wire::PutVarintField(out, f::kAddress, event.address());
  out = wire::PutVarintField(out, f::kStream, event.stream());
  out = wire::PutVarintField(out, f::kPool, event.pool());
  out = wire::PutVarintField(out, f::kResult, int32(event.result()));
  out = wire::PutVarintField(out, f::kStackId, event.stack_id());
  out = wire::PutVarintField(out, f::kHandle, event.handle());
  out = wire::PutVarintField(out, f::kOffset, event.offset());
  wire::Writer tail(out, sizeof(buffer) - static_cast<size_t>(out - buffer));
  tail.Varint(f::kFreeBytes, event.free_bytes());
  tail.Varint(f::kTotalBytes, event.total_bytes());
  tail.Varint(f::kPitch, event.pitch());
  tail.Varint(f::kCapture, event.capture());
  tail.Varint(f::kWriter, event.writer());
  tail.Varint(f::kTemplateSlot, event.template_slot());
  EXPECT_FALSE(tail.overflowed());
  out += tail.size();
  const uint8_t* start =
      wire::PrependHeader(body, proto::packet_field::kMemory, static_cast<size_t>(out - body));
  return std::string(reinterpret_cast<const char*>(start), static_cast<size_t>(out - start));
}

std::string LibprotobufPacket(const MemoryEvent& event) {
  TracePacket packet;
  *packet.mutable_memory() = event;
  return packet.SerializeAsString();
}

// What libprotobuf makes of `bytes`, when it is a packet holding exactly one memory event and
// nothing else (no unknown fields, no padding): the case the hand decoder may accept.
bool LibprotobufMemoryEvent(const std::string& bytes, MemoryEventFields* out) {
  TracePacket packet;
  if (!packet.ParseFromString(bytes) || !packet.has_memory()) return false;
  const auto* reflection = TracePacket::GetReflection();
  if (!packet.padding().empty() || !reflection->GetUnknownFields(packet).empty() ||
      !MemoryEvent::GetReflection()->GetUnknownFields(packet.memory()).empty()) {
    return false;
  }
  *out = FromProto(packet.memory());
  return true;
}

std::string Varint(uint64_t value) {
  std::string out;
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>((value & 0x7F) | 0x80));
  out.push_back(static_cast<char>(value));
  return out;
}

std::string MemoryPacketOf(const std::string& body) { return "\x3A" + Varint(body.size()) + body; }

TEST(MemoryEventDecoderTest, AgreesWithLibprotobufOnRandomEvents) {
  RandomEvents random(7);
  for (int round = 0; round < 20000; ++round) {
    const MemoryEvent event = random.Event();
    SCOPED_TRACE(event.ShortDebugString());
    const MemoryEventFields expected = FromProto(event);
    for (const std::string& packet : {RecorderPacket(event), LibprotobufPacket(event)}) {
      MemoryEventFields decoded;
      ASSERT_TRUE(DecodeMemoryPacket(packet, &decoded));
      ASSERT_EQ(decoded, expected);
      MemoryEventFields parsed;
      ASSERT_TRUE(LibprotobufMemoryEvent(packet, &parsed));
      ASSERT_EQ(decoded, parsed);
    }
  }
}

TEST(MemoryEventDecoderTest, RoundTripsThroughTheProto) {
  RandomEvents random(11);
  for (int round = 0; round < 1000; ++round) {
    const MemoryEvent event = random.Event();
    MemoryEvent back;
    ToProto(FromProto(event), &back);
    ASSERT_EQ(back.SerializeAsString(), event.SerializeAsString()) << event.ShortDebugString();
  }
}

// Encodings libprotobuf accepts and the recorder never writes: fields out of order, a field twice
// (the last wins), over-long varints, an empty event, fields 16-18 first.
TEST(MemoryEventDecoderTest, AcceptsOtherValidEncodingsAsLibprotobufDoes) {
  const std::string seq_7 = "\x08\x07";
  const std::vector<std::string> bodies = {
      "",
      "\x38\x01" + seq_7 + "\x10\x05",                  // action, seq, timestamp
      seq_7 + "\x08\x09",                               // seq twice: 9 wins
      std::string("\x08\x87\x80\x80\x00", 5),           // seq 7 in four bytes
      std::string("\x88\x00\x07", 3),                   // tag of field 1 in two bytes
      "\x90\x01\x2A" + seq_7,                           // pitch 42 first
      "\x20" + Varint(~uint64_t{0}),                    // device -1
      "\x20" + std::string("\xff\xff\xff\xff\x0f", 5),  // device -1 in five bytes
      "\x18" + Varint(0x1'0000'0005),                   // tid: the low 32 bits
      "\x28" + Varint(0x7fffffff),                      // an api from a newer schema
  };
  for (const std::string& body : bodies) {
    const std::string packet = MemoryPacketOf(body);
    SCOPED_TRACE(::testing::PrintToString(packet));
    MemoryEventFields decoded;
    ASSERT_TRUE(DecodeMemoryPacket(packet, &decoded));
    MemoryEventFields parsed;
    ASSERT_TRUE(LibprotobufMemoryEvent(packet, &parsed));
    EXPECT_EQ(decoded, parsed);
  }
  MemoryEventFields decoded;
  ASSERT_TRUE(DecodeMemoryPacket(MemoryPacketOf(seq_7 + "\x08\x09"), &decoded));
  EXPECT_EQ(decoded.seq, 9u);
  ASSERT_TRUE(DecodeMemoryPacket(MemoryPacketOf("\x20" + Varint(~uint64_t{0})), &decoded));
  EXPECT_EQ(decoded.device, -1);
}

// What it leaves to libprotobuf: other packet types, unknown fields, other wire types, anything
// after the event, damage.
TEST(MemoryEventDecoderTest, DeclinesWhatItDoesNotHandle) {
  TracePacket stack;
  stack.mutable_stack()->set_id(3);
  stack.mutable_stack()->add_frame(0x1234);
  TracePacket padded;
  padded.mutable_memory()->set_seq(1);
  padded.set_padding("xx");
  const std::vector<std::string> packets = {
      "", stack.SerializeAsString(), padded.SerializeAsString(),
      MemoryPacketOf("\x08\x07") + "\x3A\x02\x10\x05",         // two events: libprotobuf merges
      MemoryPacketOf("\xb0\x01\x05"),                          // field 22: a newer schema
      MemoryPacketOf(std::string("\x00\x05", 2)),              // field 0
      MemoryPacketOf("\x09\x01\x02\x03\x04\x05\x06\x07\x08"),  // seq as fixed64
      MemoryPacketOf("\x08"),                                  // value missing
      // Bodies of eight bytes or more (the word-at-a-time path) that end early: a tag with no
      // value (tests/fuzz/regressions/decoder-tag-at-body-end.trace), a varint cut short.
      MemoryPacketOf("\x08\x07\x10\x05\x18\x03\x20\x01\x28"),
      MemoryPacketOf("\x08\x07\x10\x05\x18\x03\x20\x81"),
      MemoryPacketOf("\x08\x07\x10\x05\x18\x03\x20\x01\x28\xff\xff"),
      MemoryPacketOf("\x08\x80"),                                 // varint cut short
      MemoryPacketOf("\x08" + std::string(10, '\xff') + "\x01"),  // varint of 11 bytes
      MemoryPacketOf("\x08" + std::string(9, '\xff') + "\x02"),   // beyond 64 bits
      "\x3A\x05\x08\x07",                                         // length past the end
      std::string("\x3A\x82\x80\x80\x80\x80\x00\x08\x07", 9),     // length in six bytes
  };
  for (const std::string& packet : packets) {
    SCOPED_TRACE(::testing::PrintToString(packet));
    MemoryEventFields decoded;
    EXPECT_FALSE(DecodeMemoryPacket(packet, &decoded));
  }
}

// Random damage to valid packets: whatever the decoder accepts, libprotobuf parses to the same
// event; and the decoder accepts most undamaged-looking ones (it is not just declining all).
TEST(MemoryEventDecoderTest, AgreesWithLibprotobufOnDamagedPackets) {
  RandomEvents random(23);
  std::mt19937_64& engine = random.engine();
  int accepted = 0;
  for (int round = 0; round < 50000; ++round) {
    const MemoryEvent event = random.Event();
    std::string packet = round % 2 == 0 ? RecorderPacket(event) : LibprotobufPacket(event);
    const int mutations = 1 + static_cast<int>(engine() % 3);
    for (int m = 0; m < mutations; ++m) {
      const size_t at = packet.empty() ? 0 : engine() % packet.size();
      switch (engine() % 5) {
        case 0:  // flip a bit
          if (!packet.empty()) packet[at] = static_cast<char>(packet[at] ^ (1 << (engine() % 8)));
          break;
        case 1:  // a random byte
          if (!packet.empty()) packet[at] = static_cast<char>(engine());
          break;
        case 2:  // cut short
          packet.resize(at);
          break;
        case 3:  // a byte inserted
          packet.insert(packet.begin() + static_cast<std::ptrdiff_t>(at),
                        static_cast<char>(engine()));
          break;
        case 4:  // bytes appended
          packet += std::string(1 + engine() % 4, static_cast<char>(engine()));
          break;
      }
    }
    MemoryEventFields decoded;
    if (!DecodeMemoryPacket(packet, &decoded)) continue;
    ++accepted;
    SCOPED_TRACE(::testing::PrintToString(packet));
    MemoryEventFields parsed;
    ASSERT_TRUE(LibprotobufMemoryEvent(packet, &parsed));
    ASSERT_EQ(decoded, parsed);
  }
  EXPECT_GT(accepted, 1000);
}

}  // namespace
}  // namespace gpumem::report
