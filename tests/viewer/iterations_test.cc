// Iteration times for the markers: sampled in bounded memory, every stride-th occurrence exactly.
#include "viewer/iterations.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace gpumem::viewer {
namespace {

TEST(IterationsTest, SampledTimesKeepEveryStrideThOccurrence) {
  SampledTimes sampled;
  for (uint64_t i = 0; i < 1000; ++i) sampled.Add(100 + 10 * i);
  EXPECT_EQ(sampled.count, 1000u);
  EXPECT_EQ(sampled.stride, 4u);  // at most 256 kept: every 4th of 1000
  ASSERT_EQ(sampled.times.size(), 250u);
  for (size_t i = 0; i < sampled.times.size(); ++i) {
    EXPECT_EQ(sampled.times[i], 100 + 10 * (i * sampled.stride)) << i;
  }
}

TEST(IterationsTest, MarkerSiteStartsTheIterations) {
  // --iteration-marker: the first allocation whose stack matches marks the iterations.
  IterationTimes iterations([](uint64_t stack_id) { return stack_id == 7; });
  for (uint64_t step = 0; step < 5; ++step) {
    for (const uint64_t stack : {3, 7, 9}) {
      MemoryEvent event;
      event.set_action(ALLOC);
      event.set_stack_id(stack);
      iterations.AddMemory(event, 1000 * step + stack);
    }
  }
  const Iterations found = iterations.Finish([](uint64_t stack_id) { return stack_id; });
  EXPECT_EQ(found.count, 5u);
  EXPECT_EQ(found.times, (std::vector<uint64_t>{7, 1007, 2007, 3007, 4007}));
  EXPECT_FALSE(found.rule.empty());
}

}  // namespace
}  // namespace gpumem::viewer
