// TalliesByStackId (report/replay/tallies_by_stack_id.h): ids the recorder hands out (1 up) and ids
// far beyond them tally alike, and a clear empties what was used since the clear before.
#include "report/replay/tallies_by_stack_id.h"

#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

TEST(TalliesByStackIdTest, DenseAndSparseIdsTallyAlike) {
  TalliesByStackId tallies;
  const uint64_t far = TalliesByStackId::kDenseStacks + 7;
  tallies[1].Add(100);
  tallies[1].Add(50);
  tallies[4000].Add(8);
  tallies[far].Add(3);
  tallies[0].Add(1);
  const auto all = tallies.ToMap();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all.at(1).count, 2u);
  EXPECT_EQ(all.at(1).bytes, 150u);
  EXPECT_EQ(all.at(4000).bytes, 8u);
  EXPECT_EQ(all.at(far).bytes, 3u);
  EXPECT_EQ(all.at(0).count, 1u);
}

TEST(TalliesByStackIdTest, ClearEmptiesEverythingAndTalliesAgain) {
  TalliesByStackId tallies;
  for (uint64_t id = 1; id <= 100; ++id) tallies[id].Add(id);
  tallies[TalliesByStackId::kDenseStacks].Add(1);
  tallies.clear();
  EXPECT_TRUE(tallies.ToMap().empty());
  tallies[7].Add(70);
  const auto all = tallies.ToMap();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all.at(7).count, 1u);
  EXPECT_EQ(all.at(7).bytes, 70u);
}

}  // namespace
}  // namespace gpumem::report
