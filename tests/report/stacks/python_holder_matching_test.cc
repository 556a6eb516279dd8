// report/stacks/python_holders.h: PythonHolder packets matched in seq order to the allocation
// starting at their address, tallied by call site. (Named apart from
// tests/integration/python_holders_test.cc: test binaries are named by file alone.)
#include <cstdint>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/stacks/python_holders.h"

namespace gpumem::report {
namespace {

MemoryEvent Memory(uint64_t seq, Action action, uint64_t address, uint64_t stack_id = 0) {
  MemoryEvent event;
  event.set_seq(seq);
  event.set_action(action);
  event.set_address(address);
  event.set_stack_id(stack_id);
  return event;
}

PythonHolder Holder(uint64_t seq, uint64_t address, uint64_t stack_id, uint64_t size) {
  PythonHolder holder;
  holder.set_seq(seq);
  holder.set_address(address);
  holder.set_stack_id(stack_id);
  holder.set_size(size);
  return holder;
}

TEST(PythonHoldersTest, AHolderNamesTheAllocationLiveAtItsSeq) {
  PythonHolders holders;
  EXPECT_TRUE(holders.empty());
  // Holder packets arrive ahead of the seq-ordered memory events, and out of order. One at seq N
  // sees the memory as it was after memory event N.
  holders.AddHolder(Holder(5, 0xB000, 202, 32));  // 0xB000 allocated again, by stack 3
  holders.AddHolder(Holder(3, 0xB000, 200, 64));  // stack 2's
  holders.AddHolder(Holder(4, 0xB000, 201, 8));   // freed at seq 4: nobody's
  holders.AddHolder(Holder(2, 0xA000, 100, 16));  // stack 1's
  holders.AddHolder(Holder(3, 0xA010, 100, 16));  // inside, not at the start: no allocation
  holders.AddMemory(Memory(1, ALLOC, 0xA000, 1));
  holders.AddMemory(Memory(2, ALLOC, 0xB000, 2));
  holders.AddMemory(Memory(4, FREE, 0xB000));
  holders.AddMemory(Memory(5, ALLOC, 0xB000, 3));
  holders.AddMemory(Memory(6, ALLOC, 0xC000, 4));
  holders.Finish();

  const std::vector<HolderTally> of_1 = holders.ForSite(1, nullptr, nullptr);
  ASSERT_EQ(of_1.size(), 1u);
  EXPECT_EQ(of_1[0].stack_id, 100u);
  EXPECT_EQ(of_1[0].count, 1u);
  EXPECT_EQ(of_1[0].bytes, 16u);
  const std::vector<HolderTally> of_2 = holders.ForSite(2, nullptr, nullptr);
  ASSERT_EQ(of_2.size(), 1u);
  EXPECT_EQ(of_2[0].stack_id, 200u);
  EXPECT_EQ(of_2[0].bytes, 64u);
  const std::vector<HolderTally> of_3 = holders.ForSite(3, nullptr, nullptr);
  ASSERT_EQ(of_3.size(), 1u);
  EXPECT_EQ(of_3[0].stack_id, 202u);
  EXPECT_TRUE(holders.ForSite(4, nullptr, nullptr).empty());
}

TEST(PythonHoldersTest, TalliesMergeByCallSiteMostReferencesFirst) {
  PythonHolders holders;
  holders.AddMemory(Memory(1, ALLOC, 0xA000, 1));
  holders.AddMemory(Memory(2, ALLOC, 0xB000, 2));
  holders.AddHolder(Holder(3, 0xA000, 100, 10));
  holders.AddHolder(Holder(4, 0xB000, 101, 20));
  holders.AddHolder(Holder(5, 0xB000, 102, 30));
  holders.AddHolder(Holder(6, 0xA000, 300, 40));
  holders.Finish();  // the trace ended before any later memory event
  ASSERT_FALSE(holders.empty());
  // Allocation stacks 1 and 2 are one call site (1); holder stacks 101 and 102 are 100's.
  const CallSiteOf site_of = [](uint64_t stack) -> uint64_t { return stack == 2 ? 1 : stack; };
  const CallSiteOf holder_site_of = [](uint64_t stack) -> uint64_t {
    return stack >= 100 && stack < 200 ? 100 : stack;
  };
  const std::vector<HolderTally> tallies = holders.ForSite(1, site_of, holder_site_of);
  ASSERT_EQ(tallies.size(), 2u);
  EXPECT_EQ(tallies[0].stack_id, 100u);
  EXPECT_EQ(tallies[0].count, 3u);
  EXPECT_EQ(tallies[0].bytes, 60u);
  EXPECT_EQ(tallies[1].stack_id, 300u);
  EXPECT_EQ(tallies[1].count, 1u);
  EXPECT_EQ(tallies[1].bytes, 40u);
  // Without grouping, stack 2's allocation is a site of its own.
  const std::vector<HolderTally> of_2 = holders.ForSite(2, nullptr, nullptr);
  ASSERT_EQ(of_2.size(), 2u);
  EXPECT_EQ(of_2[0].stack_id, 101u);  // equal counts: by stack id
  EXPECT_EQ(of_2[1].stack_id, 102u);
}

}  // namespace
}  // namespace gpumem::report
