#include "core/self_timing.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/clock.h"

namespace gpumem::self_timing {
namespace {

void SpinFor(uint64_t ns) {
  const uint64_t until = MonotonicNs() + ns;
  while (MonotonicNs() < until) {
  }
}

PhaseTotals Since(Phase phase, const PhaseTotals& before) {
  const PhaseTotals now = Totals(phase);
  return {now.count - before.count, now.ns - before.ns, now.exclusive_ns - before.exclusive_ns};
}

class SelfTimingTest : public testing::Test {
 protected:
  void SetUp() override {
    InitClock();
    g_enabled = true;
  }
  void TearDown() override { g_enabled = false; }
};

// An enclosing phase is what its nested phases took plus its own work: their bookkeeping (clock
// reads, shared counters) is in neither, and its time outside them is its own work only.
TEST_F(SelfTimingTest, NestedScopesBookkeepingIsLeftOutOfTheEnclosingPhase) {
  constexpr int kNested = 20000;
  // Counting it, the enclosing phase's time outside the nested ones holds all of their
  // bookkeeping (a ratio of 1 or more), whatever the machine does; without it, the loop and the
  // scopes' own clock reads only (0.50 to 0.54 of it on a 2-core build VM). Best of up to 50
  // rounds, done once one is below the bound: a preemption may land in either, but never brings a
  // counted bookkeeping below 1.
  constexpr double kBound = 0.8;
  double best_ratio = 1e9;
  for (int round = 0; round < 50 && best_ratio >= kBound; ++round) {
    const PhaseTotals outer_before = Totals(kLaunchHook);
    const PhaseTotals inner_before = Totals(kKernelLookup);
    const PhaseTotals bookkeeping_before = Bookkeeping();
    {
      Scope outer(kLaunchHook);
      for (int i = 0; i < kNested; ++i) Scope inner(kKernelLookup);
    }
    const PhaseTotals outer = Since(kLaunchHook, outer_before);
    const PhaseTotals inner = Since(kKernelLookup, inner_before);
    const PhaseTotals bookkeeping = Bookkeeping();
    EXPECT_EQ(outer.count, 1u);
    EXPECT_EQ(inner.count, static_cast<uint64_t>(kNested));
    EXPECT_EQ(bookkeeping.count - bookkeeping_before.count, static_cast<uint64_t>(kNested) + 1);
    EXPECT_EQ(outer.ns - outer.exclusive_ns, inner.ns);
    const uint64_t bookkeeping_ns = bookkeeping.ns - bookkeeping_before.ns;
    ASSERT_GT(bookkeeping_ns, 0u);
    best_ratio = std::min(
        best_ratio, static_cast<double>(outer.exclusive_ns) / static_cast<double>(bookkeeping_ns));
  }
  EXPECT_LT(best_ratio, kBound);
}

TEST_F(SelfTimingTest, ExclusiveTimeIsWhatNoNestedPhaseTook) {
  const PhaseTotals outer_before = Totals(kAllocationHook);
  const PhaseTotals first_before = Totals(kNativeStack);
  const PhaseTotals second_before = Totals(kSinkWrite);
  {
    Scope outer(kAllocationHook);
    SpinFor(200000);
    {
      Scope first(kNativeStack);
      SpinFor(300000);
      Scope nested(kSinkWrite);  // in `first`: not a direct child of `outer`
      SpinFor(100000);
    }
  }
  const PhaseTotals outer = Since(kAllocationHook, outer_before);
  const PhaseTotals first = Since(kNativeStack, first_before);
  const PhaseTotals nested = Since(kSinkWrite, second_before);
  EXPECT_GE(nested.ns, 100000u);
  EXPECT_EQ(nested.exclusive_ns, nested.ns);
  EXPECT_EQ(first.exclusive_ns, first.ns - nested.ns);
  EXPECT_EQ(outer.exclusive_ns, outer.ns - first.ns);
  // No upper bound on wall time: a loaded machine may preempt the thread inside any scope; the
  // equalities above are what the subtraction must hold to.
  EXPECT_GE(outer.exclusive_ns, 200000u);
}

TEST_F(SelfTimingTest, DisabledScopesRecordNothing) {
  g_enabled = false;
  const PhaseTotals before = Totals(kPoolQuery);
  const PhaseTotals bookkeeping_before = Bookkeeping();
  { Scope scope(kPoolQuery); }
  EXPECT_EQ(Totals(kPoolQuery).count, before.count);
  EXPECT_EQ(Bookkeeping().count, bookkeeping_before.count);
}

}  // namespace
}  // namespace gpumem::self_timing
