// report/replay/address_map.h: the ordered map by address, against std::map.
#include "report/replay/address_map.h"

#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

TEST(AddressMapTest, AgreesWithStdMap) {
  std::mt19937_64 random(5);
  AddressMap<uint32_t> map;
  std::map<uint64_t, uint32_t> reference;
  for (int step = 0; step < 200000; ++step) {
    // Phases of growth and shrinkage, so that chunks split and merge.
    const bool grow = (step / 20000) % 2 == 0;
    const uint64_t key = random() % 50000;
    const int op = static_cast<int>(random() % 10);
    if (op < (grow ? 6 : 3)) {
      if (reference.count(key) == 0) {
        const auto value = static_cast<uint32_t>(random());
        map.Insert(key, value);
        reference[key] = value;
      }
    } else if (op < 9) {
      EXPECT_EQ(map.Erase(key), reference.erase(key) == 1);
    } else {
      // Lower bound and the entry before it.
      auto expected = reference.lower_bound(key);
      AddressMap<uint32_t>::Position position = map.LowerBound(key);
      ASSERT_EQ(position == map.end(), expected == reference.end());
      if (expected != reference.end()) {
        EXPECT_EQ(map.KeyAt(position), expected->first);
        EXPECT_EQ(map.ValueAt(position), expected->second);
      }
      const bool has_previous = map.Previous(&position);
      ASSERT_EQ(has_previous, expected != reference.begin());
      if (has_previous) {
        EXPECT_EQ(map.KeyAt(position), std::prev(expected)->first);
      }
      // Erasing at a position returns the next one.
      if (has_previous && random() % 2 == 0) {
        const AddressMap<uint32_t>::Position next = map.EraseAt(position);
        reference.erase(std::prev(expected));
        ASSERT_EQ(next == map.end(), expected == reference.end());
        if (expected != reference.end()) {
          EXPECT_EQ(map.KeyAt(next), expected->first);
        }
      }
    }
    ASSERT_EQ(map.size(), reference.size());
  }
  std::vector<std::pair<uint64_t, uint32_t>> all;
  map.ForEach([&](uint64_t key, uint32_t value) { all.emplace_back(key, value); });
  const std::vector<std::pair<uint64_t, uint32_t>> expected(reference.begin(), reference.end());
  EXPECT_EQ(all, expected);
}

}  // namespace
}  // namespace gpumem::report
