// core/eh_frame_unwinder.h: the same return addresses as libunwind's unw_backtrace taken at the
// same place — through deep recursion, frames addressed from rbp (alloca), glibc's own code
// (qsort calling back), a thread's outermost frames, the main thread's down to _start — and -1
// where it must leave the stack to libunwind (a signal handler's frame); and that an earlier
// unwind is replayed only where every word it read is still there, near its start or twenty frames
// up, for many paths at one stack pointer too, and never where its reads lie beyond a memo's reach.
#include "core/eh_frame_unwinder.h"

#include <alloca.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <array>
#include <thread>
#include <utility>
#include <vector>

#include "core/self_timing.h"

namespace gpumem {
namespace {

using UnwBacktraceFn = int (*)(void**, int);
UnwBacktraceFn g_unw_backtrace = nullptr;
volatile int g_sink = 0;

struct Stacks {
  std::vector<void*> fast;
  std::vector<void*> libunwind;
  int fast_depth = 0;
};

// Both unwinders from one frame: their first entries are the two return addresses in here, the
// rest must be equal.
__attribute__((noinline)) Stacks TakeBoth(int capacity) {
  Stacks stacks;
  stacks.fast.resize(static_cast<size_t>(capacity));
  stacks.libunwind.resize(static_cast<size_t>(capacity));
  stacks.fast_depth = eh_frame_unwinder::Backtrace(stacks.fast.data(), capacity);
  const int slow_depth = g_unw_backtrace(stacks.libunwind.data(), capacity);
  stacks.fast.resize(static_cast<size_t>(std::max(stacks.fast_depth, 0)));
  stacks.libunwind.resize(static_cast<size_t>(std::max(slow_depth, 0)));
  g_sink = g_sink + 1;
  return stacks;
}

void ExpectSameBelowFirst(const Stacks& stacks) {
  ASSERT_GT(stacks.fast_depth, 1);
  ASSERT_EQ(stacks.fast.size(), stacks.libunwind.size());
  for (size_t i = 1; i < stacks.fast.size(); ++i) {
    EXPECT_EQ(stacks.fast[i], stacks.libunwind[i]) << "frame " << i;
  }
}

__attribute__((noinline)) Stacks Recurse(int depth, int capacity) {
  if (depth == 0) return TakeBoth(capacity);
  Stacks stacks = Recurse(depth - 1, capacity);
  g_sink = g_sink + 1;  // no tail call: each level stays a frame
  return stacks;
}

// alloca makes the compiler address this frame from rbp: its CFA rule is rbp-based.
__attribute__((noinline)) Stacks WithAlloca(int bytes, int depth, int capacity) {
  volatile char* buffer = static_cast<char*>(alloca(static_cast<size_t>(bytes)));
  buffer[0] = 1;
  Stacks stacks = Recurse(depth, capacity);
  g_sink = g_sink + buffer[0];
  return stacks;
}

// An over-aligned local next to alloca: GCC realigns the stack through a saved pointer (DRAP), so
// the CFA is the word at rbp - 8 and rbp is saved at rbp + 0, both as DWARF expressions (how
// cuBLAS's frames look).
__attribute__((noinline)) Stacks Realigned(int bytes, int capacity) {
  alignas(64) volatile char aligned[64];
  volatile char* dynamic = static_cast<char*>(alloca(static_cast<size_t>(bytes)));
  aligned[0] = 1;
  dynamic[0] = 2;
  Stacks stacks = Recurse(2, capacity);
  g_sink = g_sink + aligned[0] + dynamic[0];
  return stacks;
}

__attribute__((noinline)) Stacks AllocaChain(int levels, int capacity) {
  if (levels == 0) return Recurse(3, capacity);
  volatile char* buffer = static_cast<char*>(alloca(static_cast<size_t>(16 * levels + 8)));
  buffer[0] = 2;
  Stacks stacks = AllocaChain(levels - 1, capacity);
  g_sink = g_sink + buffer[0];
  return stacks;
}

class EhFrameUnwinderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (g_unw_backtrace == nullptr) {
      void* handle = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) {
        g_unw_backtrace = reinterpret_cast<UnwBacktraceFn>(dlsym(handle, "unw_backtrace"));
      }
    }
    if (g_unw_backtrace == nullptr) GTEST_SKIP() << "no libunwind.so.8 to compare with";
    if (!eh_frame_unwinder::Init(dlsym)) GTEST_SKIP() << "no _dl_find_object (glibc < 2.35)";
  }
};

TEST_F(EhFrameUnwinderTest, DeepRecursionDownToStart) {
  const Stacks stacks = Recurse(100, 256);
  ExpectSameBelowFirst(stacks);
  // 100 levels of Recurse, the test body and gtest's frames, main, libc, _start: all of it.
  EXPECT_GT(stacks.fast.size(), 110u);
  EXPECT_LT(stacks.fast.size(), 256u);
}

TEST_F(EhFrameUnwinderTest, StopsAtTheCapacity) {
  const Stacks stacks = Recurse(50, 20);
  EXPECT_EQ(stacks.fast_depth, 20);
  ExpectSameBelowFirst(stacks);
}

TEST_F(EhFrameUnwinderTest, FramesAddressedFromTheFramePointer) {
  ExpectSameBelowFirst(WithAlloca(4000, 5, 256));
  ExpectSameBelowFirst(AllocaChain(8, 256));
}

TEST_F(EhFrameUnwinderTest, ARealignedFrame) {
  for (const int bytes : {8, 100, 5000}) ExpectSameBelowFirst(Realigned(bytes, 256));
}

Stacks g_from_callback;
int CompareAndCapture(const void* a, const void* b) {
  if (g_from_callback.fast.empty()) g_from_callback = Recurse(2, 256);
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}

TEST_F(EhFrameUnwinderTest, ThroughGlibcCallingBack) {
  std::vector<int> values = {5, 3, 9, 1, 7, 2, 8, 4, 6, 0};
  g_from_callback = {};
  qsort(values.data(), values.size(), sizeof(int), CompareAndCapture);
  ExpectSameBelowFirst(g_from_callback);
}

TEST_F(EhFrameUnwinderTest, AThreadsOutermostFrames) {
  Stacks stacks;
  std::thread([&] { stacks = Recurse(10, 256); }).join();
  ExpectSameBelowFirst(stacks);
  EXPECT_GT(stacks.fast.size(), 12u);
}

TEST_F(EhFrameUnwinderTest, CachedRulesGiveTheSameStackAgain) {
  std::vector<Stacks> runs;
  for (int run = 0; run < 2; ++run) runs.push_back(Recurse(30, 256));  // one call site
  ASSERT_EQ(runs[0].fast.size(), runs[1].fast.size());
  for (size_t i = 1; i < runs[0].fast.size(); ++i) EXPECT_EQ(runs[0].fast[i], runs[1].fast[i]);
  eh_frame_unwinder::ForgetRules();
  ExpectSameBelowFirst(Recurse(30, 256));
}

// Callers with the same frame layout, one per kPath, called from one place: the unwinder starts
// from the same registers each time, so only the words on the stack tell the stacks apart (the
// return address into each, right above TakeBoth's frame or `depth` Recurse frames up).
template <int kPath>
__attribute__((noinline)) Stacks Via(int depth, int capacity) {
  Stacks stacks = depth == 0 ? TakeBoth(capacity) : Recurse(depth, capacity);
  g_sink = g_sink + kPath;
  return stacks;
}

TEST_F(EhFrameUnwinderTest, AReplayedUnwindChecksEveryWordItRead) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    const Stacks first = Via<1>(0, 64);
    const Stacks second = Via<2>(0, 64);
    ExpectSameBelowFirst(first);
    ExpectSameBelowFirst(second);
    ASSERT_GT(first.fast.size(), 2u);
    ASSERT_GT(second.fast.size(), 2u);
    EXPECT_NE(first.fast[1], second.fast[1]);  // the return addresses into Via<1>, Via<2>
  }
}

// The same, with the word that tells the stacks apart twenty frames up: a replay checks the words
// far from its start as well as the near ones.
TEST_F(EhFrameUnwinderTest, AReplayNoticesAWordThatChangedFarUpTheStack) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    const Stacks first = Via<1>(20, 64);
    const Stacks second = Via<2>(20, 64);
    ExpectSameBelowFirst(first);
    ExpectSameBelowFirst(second);
    ASSERT_EQ(first.fast.size(), second.fast.size());
    // Equal up to the return address into Via<1> / Via<2>, past twenty Recurse frames.
    size_t first_difference = 1;
    while (first_difference < first.fast.size() &&
           first.fast[first_difference] == second.fast[first_difference]) {
      ++first_difference;
    }
    EXPECT_GT(first_difference, 20u);
    EXPECT_LT(first_difference, first.fast.size());
  }
}

// A frame larger than a memo can place its reads in (512 KiB): such a stack is unwound anew each
// time, never replayed, and still right.
__attribute__((noinline)) Stacks UnderALargeFrame(int capacity) {
  constexpr size_t kBytes = 640 * 1024;
  volatile char* buffer = static_cast<char*>(alloca(kBytes));
  buffer[0] = 1;
  buffer[kBytes - 1] = 1;
  Stacks stacks = Recurse(3, capacity);
  g_sink = g_sink + buffer[0];
  return stacks;
}

TEST_F(EhFrameUnwinderTest, AStackBeyondWhatAMemoHoldsIsUnwoundAnewEachTime) {
  const bool was_enabled = self_timing::g_enabled;
  self_timing::g_enabled = true;
  const uint64_t replayed = self_timing::CountOf(self_timing::kUnwindReplayed);
  const uint64_t not_kept = self_timing::CountOf(self_timing::kUnwindTooDeepToReplay);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    ExpectSameBelowFirst(UnderALargeFrame(64));
  }
  const uint64_t replayed_now = self_timing::CountOf(self_timing::kUnwindReplayed) - replayed;
  const uint64_t not_kept_now =
      self_timing::CountOf(self_timing::kUnwindTooDeepToReplay) - not_kept;
  self_timing::g_enabled = was_enabled;
  EXPECT_EQ(replayed_now, 0u);
  EXPECT_EQ(not_kept_now, 3u);
}

// Callers of one frame layout, each a call path of its own, all reached from one call site: the
// unwinder starts from the same stack pointer for every one (as PyTorch's generated operator
// wrappers reach an allocation), so all of them must be kept for that stack pointer at once.
template <int kPath>
__attribute__((noinline)) int ViaPath(void** frames, int capacity) {
  const int depth = eh_frame_unwinder::Backtrace(frames, capacity);
  g_sink = g_sink + kPath;
  return depth;
}
template <int... kPaths>
constexpr std::array<int (*)(void**, int), sizeof...(kPaths)> PathsOf(
    std::integer_sequence<int, kPaths...>) {
  return {&ViaPath<kPaths>...};
}

TEST_F(EhFrameUnwinderTest, ManyCallPathsAtOneStackPointerAreAllReplayed) {
  constexpr auto kPaths = PathsOf(std::make_integer_sequence<int, 12>());
  std::vector<std::vector<void*>> first(kPaths.size());
  const bool was_enabled = self_timing::g_enabled;
  self_timing::g_enabled = true;  // the counters say whether an unwind was replayed
  uint64_t missed_after_first_round = 0;
  uint64_t replayed_after_first_round = 0;
  for (int round = 0; round < 4; ++round) {
    const uint64_t missed = self_timing::CountOf(self_timing::kUnwindMemoAbsent) +
                            self_timing::CountOf(self_timing::kUnwindMemoChanged);
    const uint64_t replayed = self_timing::CountOf(self_timing::kUnwindReplayed);
    for (size_t path = 0; path < kPaths.size(); ++path) {
      void* frames[64];
      const int depth = kPaths[path](frames, 64);  // one call instruction for every path
      ASSERT_GT(depth, 2);
      std::vector<void*> stack(frames, frames + depth);
      if (round == 0) {
        first[path] = stack;
      } else {
        EXPECT_EQ(stack, first[path]) << "path " << path << ", round " << round;
      }
    }
    if (round > 0) {
      missed_after_first_round += self_timing::CountOf(self_timing::kUnwindMemoAbsent) +
                                  self_timing::CountOf(self_timing::kUnwindMemoChanged) - missed;
      replayed_after_first_round += self_timing::CountOf(self_timing::kUnwindReplayed) - replayed;
    }
  }
  self_timing::g_enabled = was_enabled;
  // frames[0]: the return address into each path, read from the stack at the same place.
  for (size_t path = 1; path < kPaths.size(); ++path) EXPECT_NE(first[path][0], first[0][0]);
  EXPECT_EQ(missed_after_first_round, 0u);
  EXPECT_EQ(replayed_after_first_round, 3 * kPaths.size());
}

int g_in_handler_depth = 0;
int g_in_handler_libunwind = 0;
void Handler(int) {
  void* frames[256];
  g_in_handler_depth = eh_frame_unwinder::Backtrace(frames, 256);
  g_in_handler_libunwind = g_unw_backtrace(frames, 256);
}

TEST_F(EhFrameUnwinderTest, ASignalFrameIsLeftToLibunwind) {
  struct sigaction action = {};
  struct sigaction previous = {};
  action.sa_handler = Handler;
  ASSERT_EQ(sigaction(SIGUSR1, &action, &previous), 0);
  raise(SIGUSR1);
  sigaction(SIGUSR1, &previous, nullptr);
  EXPECT_EQ(g_in_handler_depth, -1);
  EXPECT_GT(g_in_handler_libunwind, 5);  // libunwind goes through the signal frame
}

}  // namespace
}  // namespace gpumem
