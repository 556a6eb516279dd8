// core/stack_capture.h: the stack starts at the hooked call's caller whatever gpumem's own frames
// above it, including once their count has been learnt for that call site and a second path with
// more own frames reaches the same site.
#include "core/stack_capture.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <set>
#include <vector>

#include "core/stack_table.h"

namespace gpumem {
namespace {

constexpr size_t kCapacity = 6;
volatile int g_sink = 0;

// gpumem's side: a "hook" whose caller is the program, reaching CaptureStack through `extra`
// more frames of its own.
__attribute__((noinline)) std::vector<uint64_t> OwnFrames(uintptr_t caller_pc, int extra,
                                                          StackPrint* print) {
  std::vector<uint64_t> frames(kCapacity);
  if (extra > 0) {
    frames = OwnFrames(caller_pc, extra - 1, print);
  } else {
    UnwindScratch scratch;
    frames.resize(CaptureStack(caller_pc, frames.data(), frames.size(), &scratch, print));
  }
  g_sink = g_sink + 1;  // no tail call: each level stays a frame
  return frames;
}

__attribute__((noinline)) std::vector<uint64_t> Hook(int extra, StackPrint* print) {
  std::vector<uint64_t> frames =
      OwnFrames(reinterpret_cast<uintptr_t>(__builtin_return_address(0)), extra, print);
  g_sink = g_sink + 1;
  return frames;
}

// The program's side: the call site of Hook() is `depth` frames deep.
__attribute__((noinline)) std::vector<uint64_t> Program(int depth, int extra, uintptr_t* site,
                                                        StackPrint* print = nullptr) {
  if (depth > 0) {
    std::vector<uint64_t> frames = Program(depth - 1, extra, site, print);
    g_sink = g_sink + 1;
    return frames;
  }
  std::vector<uint64_t> frames = Hook(extra, print);
  *site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));  // Program's own caller
  g_sink = g_sink + 1;
  return frames;
}

class StackCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!InitStackCapture(nullptr, /*fast_unwind=*/true, dlopen, dlsym))
      GTEST_SKIP() << "no libunwind.so.8";
  }
};

// The constant the recorder starts each stack's print from.
TEST(StackTable, EmptyHashIsTheHashOfNoFrames) {
  const uint64_t frame = 0x1234;
  EXPECT_EQ(StackTable::kEmptyHash, StackTable::Hash(&frame, 0));
  EXPECT_NE(StackTable::kEmptyHash, StackTable::Hash(&frame, 1));
}

TEST_F(StackCaptureTest, StartsAtTheCallerAndKeepsTheCapacity) {
  uintptr_t site = 0;
  const std::vector<uint64_t> first = Program(20, 2, &site);
  ASSERT_EQ(first.size(), kCapacity);
  // Frame 0 is the return address into Program() after its call of Hook(); frame 1 the return
  // into the Program() above it, the one `site` names.
  EXPECT_EQ(first[1], site);
  // Once more (the own frames now learnt), and through two more own frames, and two fewer: the
  // same program frames each time.
  for (const int extra : {2, 4, 0, 2}) {
    SCOPED_TRACE(extra);
    uintptr_t again_site = 0;
    EXPECT_EQ(Program(20, extra, &again_site), first);
  }
}

// With a print: the hash of the frames kept; and once the unwinder keeps the stack for replaying
// (by the second call, the first having learnt gpumem's own frames), the same count and hash
// again from its note, without the frames being written. Another stack: another hash.
TEST_F(StackCaptureTest, ARepeatedStackIsPrintedFromItsNote) {
  constexpr size_t kKept = kCapacity - 1;
  uintptr_t site = 0;
  StackPrint print;
  print.kept = kKept;
  const std::vector<uint64_t> frames = Program(20, 0, &site, &print);
  ASSERT_EQ(frames.size(), kCapacity);
  ASSERT_TRUE(print.frames_written);
  EXPECT_EQ(print.hash, StackTable::Hash(frames.data(), kKept));
  bool from_note = false;
  for (int call = 0; call < 3 && !from_note; ++call) {
    StackPrint again;
    again.kept = kKept;
    const std::vector<uint64_t> repeated = Program(20, 0, &site, &again);
    EXPECT_EQ(repeated.size(), frames.size());
    EXPECT_EQ(again.hash, print.hash);
    if (again.frames_written) {
      EXPECT_EQ(repeated, frames);
    } else {
      from_note = true;
    }
  }
  EXPECT_TRUE(from_note) << "a stack taken 4 times was never replayed from its note";
  StackPrint other;
  other.kept = kKept;
  const std::vector<uint64_t> shallow = Program(2, 0, &site, &other);  // the test body within reach
  EXPECT_TRUE(other.frames_written);
  EXPECT_NE(other.hash, print.hash);
  EXPECT_EQ(other.hash, StackTable::Hash(shallow.data(), std::min(kKept, shallow.size())));
  // Without a print the frames are always written, note or not.
  EXPECT_EQ(Program(20, 0, &site), frames);
}

// One hooked call site (the same caller_pc) reached from sibling callers: the same stack pointer
// at the hook, different return addresses further out.
__attribute__((noinline)) std::vector<uint64_t> Site(StackPrint* print) {
  std::vector<uint64_t> frames = Hook(0, print);
  g_sink = g_sink + 1;
  return frames;
}

// The print keeps two frames, the return into Site and into the caller, so each caller's stack
// has its own hash and every call of one caller the same.
constexpr size_t kCallerFramesKept = 2;

template <int kCaller>
__attribute__((noinline)) uint64_t Caller(bool* frames_written) {
  StackPrint print;
  print.kept = kCallerFramesKept;
  const std::vector<uint64_t> frames = Site(&print);
  g_sink = g_sink + kCaller;
  *frames_written = print.frames_written;
  if (print.frames_written && frames.size() >= kCallerFramesKept) {
    EXPECT_EQ(print.hash, StackTable::Hash(frames.data(), kCallerFramesKept));
  }
  return print.hash;
}

// More stacks through one stack pointer than the unwinder keeps for it (4): each keeps evicting
// another, and a note must never outlive the stack it describes.
TEST_F(StackCaptureTest, ANoteNeverOutlivesItsStack) {
  using CallerFn = uint64_t (*)(bool*);
  const CallerFn callers[] = {Caller<1>, Caller<2>, Caller<3>, Caller<4>, Caller<5>, Caller<6>};
  std::vector<uint64_t> hashes;
  bool frames_written = false;
  for (const CallerFn caller : callers) hashes.push_back(caller(&frames_written));
  EXPECT_EQ(std::set<uint64_t>(hashes.begin(), hashes.end()).size(), std::size(callers));
  int from_notes = 0;
  for (int round = 0; round < 4; ++round) {
    for (size_t i = 0; i < std::size(callers); ++i) {
      // Every other caller twice in a row: the second replays, from its note.
      for (int repeat = 0; repeat < (i % 2 == 0 ? 2 : 1); ++repeat) {
        EXPECT_EQ(callers[i](&frames_written), hashes[i])
            << "caller " << i + 1 << ", round " << round << ", repeat " << repeat;
        from_notes += frames_written ? 0 : 1;
      }
    }
  }
  EXPECT_GT(from_notes, 0);
}

TEST_F(StackCaptureTest, AShallowStackIsKeptWhole) {
  uintptr_t site = 0;
  const std::vector<uint64_t> deep = Program(20, 0, &site);
  ASSERT_EQ(deep.size(), kCapacity);
  const std::vector<uint64_t> shallow = Program(1, 0, &site);
  // Program, Program, the test body, and gtest's frames below: at most kCapacity.
  ASSERT_GE(shallow.size(), 3u);
  EXPECT_EQ(shallow[0], deep[0]);  // the same call site of Hook()
  EXPECT_EQ(shallow[1], site);
}

}  // namespace
}  // namespace gpumem
