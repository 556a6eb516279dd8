// When a memory pool's size is asked after an allocation (core/driver_queries.h,
// PoolMayHaveGrown): always when the allocation lies beyond the addresses the pool served so far,
// within them only at every kPoolRecheck-th allocation.
#include <gtest/gtest.h>

#include "core/driver_queries.h"

namespace gpumem::driver {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kBase = 0x7f0000000000ull;

TEST(PoolQueries, EveryAllocationBeyondTheSpanIsAsked) {
  PoolSpan span;
  uint32_t within = 0;
  EXPECT_TRUE(PoolMayHaveGrown(span, kBase + 4 * kMiB, kMiB, within));      // the first
  EXPECT_TRUE(PoolMayHaveGrown(span, kBase + 6 * kMiB, kMiB, within));      // above
  EXPECT_TRUE(PoolMayHaveGrown(span, kBase, kMiB, within));                 // below
  EXPECT_TRUE(PoolMayHaveGrown(span, kBase + 6 * kMiB, 2 * kMiB, within));  // ends above
  EXPECT_EQ(span.low.load(), kBase);
  EXPECT_EQ(span.high.load(), kBase + 8 * kMiB);
  EXPECT_EQ(within, 0u);
}

TEST(PoolQueries, WithinTheSpanOnlyEveryRecheckthAllocationIsAsked) {
  PoolSpan span;
  uint32_t within = 0;
  ASSERT_TRUE(PoolMayHaveGrown(span, kBase, 64 * kMiB, within));
  int asked = 0;
  for (uint32_t i = 0; i < 4 * kPoolRecheck; ++i) {
    asked += PoolMayHaveGrown(span, kBase + (i % 60) * kMiB, kMiB, within) ? 1 : 0;
  }
  EXPECT_EQ(asked, 4);
  // The span is unchanged by what fell inside it.
  EXPECT_EQ(span.low.load(), kBase);
  EXPECT_EQ(span.high.load(), kBase + 64 * kMiB);
}

}  // namespace
}  // namespace gpumem::driver
