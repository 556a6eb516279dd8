// core/stack_capture.h: the stack starts at the hooked call's caller whatever gpumem's own frames
// above it, including once their count has been learnt for that call site and a second path with
// more own frames reaches the same site.
#include "core/stack_capture.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace gpumem {
namespace {

constexpr size_t kCapacity = 6;
volatile int g_sink = 0;

// gpumem's side: a "hook" whose caller is the program, reaching CaptureStack through `extra`
// more frames of its own.
__attribute__((noinline)) std::vector<uint64_t> OwnFrames(uintptr_t caller_pc, int extra) {
  std::vector<uint64_t> frames(kCapacity);
  if (extra > 0) {
    frames = OwnFrames(caller_pc, extra - 1);
  } else {
    frames.resize(CaptureStack(caller_pc, frames.data(), frames.size()));
  }
  g_sink = g_sink + 1;  // no tail call: each level stays a frame
  return frames;
}

__attribute__((noinline)) std::vector<uint64_t> Hook(int extra) {
  std::vector<uint64_t> frames =
      OwnFrames(reinterpret_cast<uintptr_t>(__builtin_return_address(0)), extra);
  g_sink = g_sink + 1;
  return frames;
}

// The program's side: the call site of Hook() is `depth` frames deep.
__attribute__((noinline)) std::vector<uint64_t> Program(int depth, int extra, uintptr_t* site) {
  if (depth > 0) {
    std::vector<uint64_t> frames = Program(depth - 1, extra, site);
    g_sink = g_sink + 1;
    return frames;
  }
  std::vector<uint64_t> frames = Hook(extra);
  *site = reinterpret_cast<uintptr_t>(__builtin_return_address(0));  // Program's own caller
  g_sink = g_sink + 1;
  return frames;
}

class StackCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!InitStackCapture(nullptr, /*fast_unwind=*/true, dlopen, dlsym)) GTEST_SKIP() << "no libunwind.so.8";
  }
};

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
