// report/trace/backward_credit.h: an allocation without Python frames, on an autograd thread,
// while a backward pass begun on another thread is open, takes a derived stack (its native frames,
// then the pass's Python frames outermost), one per pair, under an id no recorded stack has; any
// other allocation keeps its own. Streamed through a synthetic trace, as every report reads it.
#include "report/trace/backward_credit.h"

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

constexpr uint32_t kMain = 10;      // the thread that calls loss.backward()
constexpr uint32_t kAutograd = 11;  // pt_autograd_0
constexpr uint32_t kOther = 12;     // another native thread (a data loader's)
constexpr uint64_t kNative = 100;   // the autograd thread's native stack
constexpr uint64_t kPython = 200;   // a stack with Python frames
constexpr uint64_t kBegin = 300;    // where backward() was called: Python frames only

TracePacket Thread(uint32_t tid, const std::string& name) {
  TracePacket packet;
  packet.mutable_thread()->set_tid(tid);
  packet.mutable_thread()->set_name(name);
  return packet;
}

TracePacket StackPacket(uint64_t id, std::vector<uint64_t> frames, std::vector<uint64_t> codes) {
  TracePacket packet;
  Stack& stack = *packet.mutable_stack();
  stack.set_id(id);
  for (uint64_t frame : frames) stack.add_frame(frame);
  for (uint64_t code : codes) {
    stack.add_python_code(code);
    stack.add_python_line(static_cast<uint32_t>(code));
    stack.add_python_group(0);
  }
  return packet;
}

TracePacket Pass(uint64_t seq, uint32_t tid, uint64_t pass, bool ended) {
  TracePacket packet;
  BackwardPass& backward = *packet.mutable_backward_pass();
  backward.set_seq(seq);
  backward.set_tid(tid);
  backward.set_pass(pass);
  backward.set_ended(ended);
  if (!ended) backward.set_stack_id(kBegin);
  return packet;
}

TracePacket Alloc(uint64_t seq, uint32_t tid, uint64_t stack_id) {
  TracePacket packet;
  MemoryEvent& event = *packet.mutable_memory();
  event.set_seq(seq);
  event.set_tid(tid);
  event.set_api(CUDA_MALLOC);
  event.set_kind(DEVICE);
  event.set_action(ALLOC);
  event.set_size(4096);
  event.set_address(0x1000 * seq);
  event.set_stack_id(stack_id);
  return packet;
}

struct Streamed {
  std::unique_ptr<TraceFile> file;
  std::vector<uint64_t> stacks;  // by event, in seq order
};

Streamed Stream(const std::vector<TracePacket>& packets) {
  std::vector<TracePacket> all = {HeaderPacket(),
                                  Thread(kMain, "python3"),
                                  Thread(kAutograd, "pt_autograd_0"),
                                  Thread(kOther, "loader"),
                                  StackPacket(kNative, {0x10, 0x20}, {}),
                                  StackPacket(kPython, {0x30}, {7}),
                                  StackPacket(kBegin, {}, {8, 9})};
  all.insert(all.end(), packets.begin(), packets.end());
  const std::string path = UniqueTempPath(".trace");
  std::ofstream(path, std::ios::binary) << FramedAll(all);
  Streamed streamed;
  auto file = TraceFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  streamed.file = *std::move(file);
  StreamMemoryEventsBySeq(*streamed.file, [&](const MemoryEvent& event) {
    streamed.stacks.push_back(event.stack_id());
  });
  std::remove(path.c_str());
  return streamed;
}

TEST(BackwardCreditTest, AutogradAllocationsInAPassTakeTheBeginsPythonFrames) {
  const Streamed streamed = Stream({
      Alloc(1, kAutograd, kNative),                            // before the pass: its own
      Pass(2, kMain, 1, false), Alloc(3, kAutograd, kNative),  // credited
      Alloc(4, kAutograd, kNative),  // the same pair: the same derived stack
      Alloc(5, kMain, kNative),      // the thread that began it: its own
      Alloc(6, kOther, kNative),     // not an autograd thread: its own
      Alloc(7, kAutograd, kPython),  // has Python frames: its own
      Pass(8, kMain, 1, true), Alloc(9, kAutograd, kNative),  // after the pass: its own
  });
  ASSERT_EQ(streamed.stacks.size(), 7u);
  const uint64_t derived = streamed.stacks[1];
  EXPECT_EQ(streamed.stacks,
            (std::vector<uint64_t>{kNative, derived, derived, kNative, kNative, kPython, kNative}));
  EXPECT_NE(derived, kNative);
  EXPECT_NE(derived, kPython);
  EXPECT_NE(derived, kBegin);
  const StackRecord* record = streamed.file->FindStack(derived);
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(std::vector<uint64_t>(record->stack.frame().begin(), record->stack.frame().end()),
            (std::vector<uint64_t>{0x10, 0x20}));
  EXPECT_EQ(
      std::vector<uint64_t>(record->stack.python_code().begin(), record->stack.python_code().end()),
      (std::vector<uint64_t>{8, 9}));
  // Past any eval-loop frame of the native part: the Python frames follow it, outermost.
  for (uint32_t group : record->stack.python_group()) EXPECT_GT(group, 256u);
}

TEST(BackwardCreditTest, OfSeveralOpenPassesTheLatestBegunCredits) {
  TracePacket second = Pass(3, kOther, 2, false);
  second.mutable_backward_pass()->set_stack_id(kPython);
  const Streamed streamed =
      Stream({Pass(2, kMain, 1, false), second, Alloc(4, kAutograd, kNative),
              Pass(5, kOther, 2, true), Alloc(6, kAutograd, kNative), Pass(7, kMain, 1, true)});
  ASSERT_EQ(streamed.stacks.size(), 2u);
  const StackRecord* inner = streamed.file->FindStack(streamed.stacks[0]);
  const StackRecord* outer = streamed.file->FindStack(streamed.stacks[1]);
  ASSERT_NE(inner, nullptr);
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(inner->stack.python_code(0), 7u);  // pass 2's begin (kPython's frames)
  EXPECT_EQ(outer->stack.python_code(0), 8u);  // pass 1's, once pass 2 ended
}

TEST(BackwardCreditTest, ADerivedIdNeverTakesARecordedOne) {
  const Streamed streamed = Stream({Pass(1, kMain, 1, false), Alloc(2, kAutograd, kNative)});
  ASSERT_EQ(streamed.stacks.size(), 1u);
  // The same derivation on a table that already holds the id it would take: the next free one.
  const uint64_t id = streamed.stacks[0];
  Streamed again =
      Stream({StackPacket(id, {0x99}, {}), Pass(1, kMain, 1, false), Alloc(2, kAutograd, kNative)});
  ASSERT_EQ(again.stacks.size(), 1u);
  EXPECT_NE(again.stacks[0], id);
  EXPECT_EQ(again.file->FindStack(id)->stack.frame(0), 0x99u);
}

TEST(BackwardCreditTest, ThreadNames) {
  EXPECT_TRUE(IsAutogradThreadName("pt_autograd_0"));
  EXPECT_TRUE(IsAutogradThreadName("pt_autograd_12"));
  EXPECT_FALSE(IsAutogradThreadName("python3"));
  EXPECT_FALSE(IsAutogradThreadName(""));
}

}  // namespace
}  // namespace gpumem::report
