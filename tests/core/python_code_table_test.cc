// core/python_frames: str objects decoded from fake objects laid out as CPython 3.12 lays them
// out (compact ASCII, UCS1/2/4, legacy), and the code-object table: one PythonCode packet per code
// object, re-interned when a freed address is reused, lines computed once per (code, offset).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/packet_sink.h"
#include "core/python_frames.h"
#include "core/trace.pb.h"
#include "core/trace_reader.h"

namespace gpumem {
namespace {

// A stand-in for PyUnicode_Type: only its address matters.
alignas(8) char g_unicode_type[64];
const uintptr_t kUnicodeType = reinterpret_cast<uintptr_t>(g_unicode_type);

// A fake str object of the 3.12 layout: header, length at 16, state at 32, data after the
// ASCII (40) or compact (56) header.
std::vector<uint64_t> MakeString(const std::vector<uint32_t>& chars, uint32_t kind, bool ascii,
                                 bool compact = true) {
  std::vector<uint64_t> words(8 + chars.size() + 1, 0);
  auto* bytes = reinterpret_cast<uint8_t*>(words.data());
  const uintptr_t type = kUnicodeType;
  memcpy(bytes + 8, &type, 8);
  const int64_t length = static_cast<int64_t>(chars.size());
  memcpy(bytes + 16, &length, 8);
  const uint32_t state = (kind << 2) | (compact ? 0x20 : 0) | (ascii ? 0x40 : 0);
  memcpy(bytes + 32, &state, 4);
  uint8_t* data = bytes + (ascii ? 40 : 56);
  for (size_t i = 0; i < chars.size(); ++i) {
    if (kind == 1) data[i] = static_cast<uint8_t>(chars[i]);
    if (kind == 2) reinterpret_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(chars[i]);
    if (kind == 4) reinterpret_cast<uint32_t*>(data)[i] = chars[i];
  }
  return words;
}

std::string Decode(const std::vector<uint64_t>& str, size_t capacity = 256) {
  std::vector<char> out(capacity);
  const size_t n = DecodePythonString(reinterpret_cast<uintptr_t>(str.data()), PythonLayoutFor(12),
                                      kUnicodeType, out.data(), capacity);
  EXPECT_EQ(n, strlen(out.data()));
  return std::string(out.data(), n);
}

TEST(PythonStrings, CompactAsciiAndNonAsciiToUtf8) {
  EXPECT_EQ(Decode(MakeString({'m', 'a', 'i', 'n'}, 1, true)), "main");
  EXPECT_EQ(Decode(MakeString({0xFC, 'x'}, 1, false)), "\xC3\xBCx");  // ü (UCS1)
  EXPECT_EQ(Decode(MakeString({0x51FD, 0x6570}, 2, false)), "\xE5\x87\xBD\xE6\x95\xB0");  // 函数
  EXPECT_EQ(Decode(MakeString({0x1F600}, 4, false)), "\xF0\x9F\x98\x80");                 // emoji
}

// Python decodes a file name that is not UTF-8 with surrogateescape: byte 0xff is U+DCFF. The
// trace keeps the name's own bytes (readers escape them), not the surrogate's invalid UTF-8.
TEST(PythonStrings, SurrogateEscapedBytesAreTheFileNamesBytes) {
  EXPECT_EQ(Decode(MakeString({'/', 'd', 0xDCFF, '/', 'x'}, 2, false)), "/d\xFF/x");
  EXPECT_EQ(Decode(MakeString({0xDC80, 0x3B1, 0xDCCE}, 2, false)), "\x80\xCE\xB1\xCE");
  EXPECT_EQ(Decode(MakeString({0xD800}, 2, false)), "\xED\xA0\x80");  // not an escaped byte
}

TEST(PythonStrings, AnythingElseIsAQuestionMark) {
  EXPECT_EQ(Decode(MakeString({'a'}, 1, true, /*compact=*/false)), "?");  // legacy string
  std::vector<uint64_t> not_a_str = MakeString({'a'}, 1, true);
  not_a_str[1] = 0x1234560;  // another type
  EXPECT_EQ(Decode(not_a_str), "?");
  std::vector<char> out(8);
  EXPECT_EQ(DecodePythonString(0, PythonLayoutFor(12), kUnicodeType, out.data(), 8), 1u);
  EXPECT_STREQ(out.data(), "?");
}

TEST(PythonStrings, CutOnACharacterBoundary) {
  EXPECT_EQ(Decode(MakeString({'a', 'b', 'c', 'd'}, 1, true), 3), "ab");
  // Two 3-byte characters do not fit in 5 bytes + NUL: only the first is kept, whole.
  EXPECT_EQ(Decode(MakeString({0x51FD, 0x6570}, 2, false), 6), "\xE5\x87\xBD");
}

TEST(PythonLayouts, KnownVersionsOnly) {
  for (int minor : {10, 11, 12, 13}) EXPECT_EQ(PythonLayoutFor(minor).minor, minor);
  for (int minor : {9, 14, 0}) EXPECT_EQ(PythonLayoutFor(minor).minor, 0);
  // DESIGN's measurement on the GPU machine (3.12.3).
  const PythonLayout l = PythonLayoutFor(12);
  EXPECT_EQ(l.thread_frame, 56u);
  EXPECT_EQ(l.cframe_frame, 0);
  EXPECT_EQ(l.frame_code, 0u);
  EXPECT_EQ(l.frame_previous, 8u);
  EXPECT_EQ(l.frame_instr, 56u);
  EXPECT_EQ(l.frame_owner, 70);
  EXPECT_EQ(l.code_filename, 112u);
  EXPECT_EQ(l.code_name, 128u);
  EXPECT_EQ(l.ascii_data, 40u);
}

class CollectingSink final : public PacketSink {
 public:
  bool AppendPacket(const uint8_t* data, size_t size) override {
    bytes.append(reinterpret_cast<const char*>(data), size);
    return true;
  }
  std::vector<PythonCode> Codes() const {
    Trace trace;
    EXPECT_TRUE(trace.ParseFromString(bytes));
    std::vector<PythonCode> codes;
    for (const TracePacket& packet : trace.packet()) {
      if (packet.has_python_code()) codes.push_back(packet.python_code());
    }
    return codes;
  }
  std::string bytes;
};

int g_addr2line_calls = 0;
int FakeAddr2Line(void*, int byte_offset) {
  ++g_addr2line_calls;
  return 100 + byte_offset / 2;
}

TEST(PythonCodeTable, OnePacketPerCodeObjectAndLinesCached) {
  const std::vector<uint64_t> filename = MakeString({'a', '.', 'p', 'y'}, 1, true);
  const std::vector<uint64_t> name = MakeString({'f'}, 1, true);
  const std::vector<uint64_t> other_name = MakeString({'g'}, 1, true);
  alignas(8) static char code_object[256];

  PythonCodeTable table;
  ASSERT_TRUE(table.Init());
  table.Configure(PythonLayoutFor(12), kUnicodeType, &FakeAddr2Line);
  CollectingSink sink;
  PythonFrame frame;
  frame.code = reinterpret_cast<uintptr_t>(code_object);
  frame.filename = reinterpret_cast<uintptr_t>(filename.data());
  frame.name = reinterpret_cast<uintptr_t>(name.data());
  frame.first_line = 7;
  frame.byte_offset = 20;

  const uint64_t id = table.Intern(frame, sink);
  EXPECT_NE(id, 0u);
  EXPECT_EQ(table.Intern(frame, sink), id);
  g_addr2line_calls = 0;
  EXPECT_EQ(table.Line(id, frame), 110u);
  EXPECT_EQ(table.Line(id, frame), 110u);
  EXPECT_EQ(g_addr2line_calls, 1);  // cached
  PythonFrame other_offset = frame;
  other_offset.byte_offset = 40;
  EXPECT_EQ(table.Line(id, other_offset), 120u);
  EXPECT_EQ(g_addr2line_calls, 2);
  PythonFrame not_started = frame;
  not_started.byte_offset = -1;
  EXPECT_EQ(table.Line(id, not_started), 7u);  // co_firstlineno, as CPython says

  // The code object freed and another allocated at its address: a new PythonCode.
  PythonFrame reused = frame;
  reused.name = reinterpret_cast<uintptr_t>(other_name.data());
  reused.first_line = 30;
  const uint64_t reused_id = table.Intern(reused, sink);
  EXPECT_NE(reused_id, id);
  EXPECT_EQ(table.Intern(frame, sink), id);

  const std::vector<PythonCode> codes = sink.Codes();
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_EQ(codes[0].id(), id);
  EXPECT_EQ(codes[0].filename(), "a.py");
  EXPECT_EQ(codes[0].function(), "f");
  EXPECT_EQ(codes[0].first_line(), 7u);
  EXPECT_EQ(codes[1].function(), "g");
  EXPECT_EQ(codes[1].first_line(), 30u);

  // A new trace file: everything is written again.
  table.Reset();
  CollectingSink after_fork;
  EXPECT_EQ(table.Intern(frame, after_fork), 1u);
  EXPECT_EQ(after_fork.Codes().size(), 1u);
}

TEST(PythonFrames, HashTellsLinesAndActivationsApart) {
  PythonFrame frame;
  frame.code = 0x7f0000001000;
  frame.filename = 0x7f0000002000;
  frame.name = 0x7f0000003000;
  frame.first_line = 3;
  frame.byte_offset = 10;
  PythonFrame other_line = frame;
  other_line.byte_offset = 12;
  PythonFrame other_group = frame;
  other_group.group = 1;
  const uint64_t base = HashPythonFrames(42, &frame, 1, false);
  EXPECT_NE(base, HashPythonFrames(42, &other_line, 1, false));
  EXPECT_NE(base, HashPythonFrames(42, &other_group, 1, false));
  EXPECT_NE(base, HashPythonFrames(42, &frame, 1, true));
  EXPECT_NE(base, HashPythonFrames(43, &frame, 1, false));
  EXPECT_EQ(base, HashPythonFrames(42, &frame, 1, false));
}

TEST(PythonFrames, NoneReadInAProcessWithoutPython) {
  // This test binary has no interpreter: FindPython() was never told of one.
  PythonFrame frames[4];
  bool truncated = true;
  EXPECT_EQ(ReadPythonFrames(frames, 4, &truncated), 0u);
  EXPECT_FALSE(truncated);
  PythonStatusInfo info;
  EXPECT_FALSE(FindPython(&dlsym, &info));
  EXPECT_FALSE(info.found);
}

}  // namespace
}  // namespace gpumem
