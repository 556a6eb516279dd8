// report/replay/live_ranges.h: the live plain allocations by range, against a plain model.
#include "report/replay/live_ranges.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

struct Entry {
  uint64_t size = 0;
  uint64_t id = 0;
};

// The rules of live_ranges.h written out naively: live ranges by address, and the freed addresses.
class Model {
 public:
  std::vector<uint64_t> Allocate(uint64_t address, uint64_t size, uint64_t id) {
    std::vector<uint64_t> dropped;
    const uint64_t end = RangeEnd(address, size);
    for (auto it = live_.begin(); it != live_.end();) {
      if (it->first < end && address < RangeEnd(it->first, it->second.size)) {
        dropped.push_back(it->second.id);
        freed_.erase(it->first);
        it = live_.erase(it);
      } else {
        ++it;
      }
    }
    live_[address] = {size, id};
    freed_.erase(address);
    std::sort(dropped.begin(), dropped.end());
    return dropped;
  }
  FreeOutcome Free(uint64_t address, uint64_t* id) {
    auto it = live_.find(address);
    if (it == live_.end()) {
      return freed_.count(address) ? FreeOutcome::kDoubleFree : FreeOutcome::kUnknownAddress;
    }
    *id = it->second.id;
    live_.erase(it);
    freed_.insert(address);
    return FreeOutcome::kFreed;
  }
  const Entry* FindContaining(uint64_t address) const {
    for (const auto& [begin, entry] : live_) {
      if (begin <= address && address < RangeEnd(begin, entry.size)) return &entry;
    }
    return nullptr;
  }
  const std::map<uint64_t, Entry>& live() const { return live_; }

 private:
  std::map<uint64_t, Entry> live_;
  std::set<uint64_t> freed_;
};

std::vector<uint64_t> Allocate(LiveRanges<Entry>& ranges, uint64_t address, uint64_t size,
                               uint64_t id) {
  std::vector<uint64_t> dropped;
  bool overlapped = false;
  Entry& entry = ranges.Allocate(address, size, &overlapped,
                                 [&](const Entry& gone) { dropped.push_back(gone.id); });
  entry.size = size;
  entry.id = id;
  EXPECT_EQ(overlapped, !dropped.empty());
  std::sort(dropped.begin(), dropped.end());
  return dropped;
}

// An allocation inside a freed range, then one at the freed address that covers it again: the
// second must find the first (the freed range is no longer empty).
TEST(LiveRangesTest, AllocationAtAFreedAddressFindsWhatWasAllocatedInsideItsRange) {
  LiveRanges<Entry> ranges;
  EXPECT_TRUE(Allocate(ranges, 1000, 100, 1).empty());
  EXPECT_EQ(ranges.Free(1000, [](const Entry&) {}), FreeOutcome::kFreed);
  EXPECT_TRUE(Allocate(ranges, 1050, 10, 2).empty());
  EXPECT_EQ(Allocate(ranges, 1000, 100, 3), std::vector<uint64_t>{2});
  EXPECT_EQ(ranges.Free(1050, [](const Entry&) {}), FreeOutcome::kUnknownAddress);
}

// The same address allocated again at the same size, and larger, and smaller, over and over.
TEST(LiveRangesTest, AllocationsAgainAtFreedAddresses) {
  LiveRanges<Entry> ranges;
  EXPECT_TRUE(Allocate(ranges, 0, 100, 1).empty());
  EXPECT_TRUE(Allocate(ranges, 100, 100, 2).empty());
  for (uint64_t round = 0; round < 3; ++round) {
    EXPECT_EQ(ranges.Free(0, [](const Entry&) {}), FreeOutcome::kFreed);
    EXPECT_EQ(ranges.Free(0, [](const Entry&) {}), FreeOutcome::kDoubleFree);
    EXPECT_TRUE(Allocate(ranges, 0, 50, 3).empty());  // smaller: inside the freed range
    EXPECT_EQ(ranges.FindContaining(60), nullptr);
    EXPECT_EQ(ranges.Free(0, [](const Entry&) {}), FreeOutcome::kFreed);
    EXPECT_TRUE(Allocate(ranges, 0, 100, 4).empty());  // the freed range's size again
  }
  // Larger than the freed range: over the neighbour.
  EXPECT_EQ(ranges.Free(0, [](const Entry&) {}), FreeOutcome::kFreed);
  EXPECT_EQ(Allocate(ranges, 0, 150, 5), std::vector<uint64_t>{2});
  ASSERT_NE(ranges.FindContaining(120), nullptr);
  EXPECT_EQ(ranges.FindContaining(120)->id, 5u);
}

// Random allocations and frees on a few addresses, many of them again at addresses freed before,
// at sizes that reach over their neighbours or not: the same outcomes as the model, and the same
// allocation found for an address.
TEST(LiveRangesTest, AgreesWithAModel) {
  std::mt19937_64 random(11);
  LiveRanges<Entry> ranges;
  Model model;
  uint64_t next_id = 1;
  for (int step = 0; step < 200000; ++step) {
    const uint64_t address = (random() % 400) * 64;
    if (random() % 2 == 0) {
      const uint64_t size = random() % 4 == 0 ? (random() % 8) * 64 : 64 + random() % 64;
      const uint64_t id = next_id++;
      ASSERT_EQ(Allocate(ranges, address, size, id), model.Allocate(address, size, id))
          << "step " << step;
    } else {
      uint64_t freed_id = 0;
      uint64_t model_id = 0;
      ASSERT_EQ(ranges.Free(address, [&](const Entry& gone) { freed_id = gone.id; }),
                model.Free(address, &model_id))
          << "step " << step;
      ASSERT_EQ(freed_id, model_id);
    }
    // Phases of probes at addresses allocations start at, and at any address: FindContaining()
    // probes by address first in the former, and searches first in the latter.
    const uint64_t probe = (step / 1000) % 2 == 0 ? (random() % 400) * 64 : random() % (400 * 64);
    const Entry* found = ranges.FindContaining(probe);
    const Entry* expected = model.FindContaining(probe);
    ASSERT_EQ(found == nullptr, expected == nullptr) << "step " << step << " probe " << probe;
    if (found != nullptr) {
      ASSERT_EQ(found->id, expected->id);
    }
  }
  size_t live = 0;
  ranges.ForEach([&](const Entry&) { ++live; });
  EXPECT_EQ(live, model.live().size());
}

}  // namespace
}  // namespace gpumem::report
