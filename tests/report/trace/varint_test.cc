// The analyzer's varint readers (report/trace/varint.h): ReadPadded, which loads eight bytes
// whatever the packet's end, must answer as Read does on every input, whatever the bytes after the
// end hold; and Read as the protobuf rules say.
#include "report/trace/varint.h"

#include <cstdint>
#include <random>
#include <vector>

#include "core/wire_writer.h"
#include "gtest/gtest.h"

namespace gpumem::report::varint {
namespace {

struct Answer {
  bool ok = false;
  size_t used = 0;
  uint64_t value = 0;
  bool operator==(const Answer&) const = default;
};

// The packet's bytes, then the 16 of slack a TraceReader packet has (kPacketReadSlack).
template <typename Reader>
Answer Ask(Reader read, const std::vector<uint8_t>& packet, const std::vector<uint8_t>& slack) {
  std::vector<uint8_t> bytes = packet;
  bytes.insert(bytes.end(), slack.begin(), slack.end());
  Answer answer;
  const uint8_t* next = read(bytes.data(), bytes.data() + packet.size(), &answer.value);
  answer.ok = next != nullptr;
  if (answer.ok) answer.used = static_cast<size_t>(next - bytes.data());
  if (!answer.ok) answer.value = 0;
  return answer;
}

TEST(VarintTest, ReadDecodesEveryLengthAsWritten) {
  std::mt19937_64 random(7);
  for (int bits = 0; bits <= 64; ++bits) {
    for (int i = 0; i < 50; ++i) {
      const uint64_t value = bits == 0 ? 0 : (random() | uint64_t{1} << 63) >> (64 - bits);
      std::vector<uint8_t> packet(wire::kMaxVarintBytes);
      packet.resize(static_cast<size_t>(wire::PutVarint(packet.data(), value) - packet.data()));
      const std::vector<uint8_t> slack(16, 0xFF);  // continuation bits after the end
      const Answer read = Ask(Read, packet, slack);
      EXPECT_TRUE(read.ok) << value;
      EXPECT_EQ(read.value, value);
      EXPECT_EQ(read.used, packet.size());
      EXPECT_EQ(Ask(ReadPadded, packet, slack), read) << value;
    }
  }
}

TEST(VarintTest, ReadPaddedAnswersAsReadOnRandomBytes) {
  std::mt19937_64 random(11);
  size_t accepted = 0;
  size_t declined = 0;
  for (int i = 0; i < 200000; ++i) {
    // Mostly continuation bytes, so that varints run long, end in the slack, or never end.
    std::vector<uint8_t> packet(random() % 13);
    for (uint8_t& byte : packet) {
      byte = static_cast<uint8_t>(random() % 4 == 0 ? random() % 0x80 : 0x80 | random());
    }
    std::vector<uint8_t> slack(16);
    for (uint8_t& byte : slack) byte = static_cast<uint8_t>(random());
    const Answer read = Ask(Read, packet, slack);
    ASSERT_EQ(Ask(ReadPadded, packet, slack), read) << "packet of " << packet.size() << " bytes";
    ++(read.ok ? accepted : declined);
  }
  // Both outcomes were exercised, often.
  EXPECT_GT(accepted, 50000u);
  EXPECT_GT(declined, 50000u);
}

TEST(VarintTest, DeclinedAsProtobufWouldNot) {
  const std::vector<uint8_t> slack(16, 0x00);
  // Cut short by the packet's end, though the slack would end it.
  EXPECT_FALSE(Ask(ReadPadded, {0x80, 0x80}, {0x01}).ok);
  EXPECT_FALSE(Ask(ReadPadded, {}, slack).ok);
  // Eleven bytes, and ten whose last carries more than the 64th bit.
  const std::vector<uint8_t> eleven(11, 0x80);
  EXPECT_FALSE(Ask(ReadPadded, eleven, slack).ok);
  std::vector<uint8_t> ten(9, 0xFF);
  ten.push_back(0x02);
  EXPECT_FALSE(Ask(ReadPadded, ten, slack).ok);
  ten.back() = 0x01;
  const Answer max = Ask(ReadPadded, ten, slack);
  EXPECT_TRUE(max.ok);
  EXPECT_EQ(max.value, ~uint64_t{0});
}

}  // namespace
}  // namespace gpumem::report::varint
