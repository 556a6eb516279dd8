// Kernel launches against the replay: launches per kernel and call site, kernels at the peak,
// allocations never received by a launch (interior pointers and VMM mappings count as received),
// and allocations idle long after their last use.
#include "report/analysis/kernels.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "report/replay/replay.h"
#include "tests/support/synthetic_events.h"

namespace gpumem::report {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Memory events and launches in one seq order, fed to a Replay with a KernelAnalysis observing.
class LaunchRun : public testing::SyntheticEvents {
 public:
  LaunchRun() : analysis_(nullptr), replay_(&analysis_) {}

  void Malloc(uint64_t address, uint64_t size, uint64_t stack) {
    Feed(Add(CUDA_MALLOC, DEVICE, ALLOC, 0, size, address, stack));
  }
  void Free(uint64_t address) { Feed(testing::SyntheticEvents::Free(address)); }
  void Launch(uint64_t kernel_id, std::vector<uint64_t> pointers, uint64_t stack = 7) {
    LaunchEvent launch;
    launch.set_seq(++launch_seq_);
    launch.set_api(CU_LAUNCH_KERNEL);
    launch.set_kernel_id(kernel_id);
    launch.set_device(0);
    launch.set_stack_id(stack);
    for (uint64_t pointer : pointers) launch.add_pointer_args(pointer);
    analysis_.AddLaunch(launch, replay_);
  }
  const KernelReport& Finish() {
    analysis_.Finished(replay_);
    return analysis_.report();
  }
  Replay& replay() { return replay_; }

 private:
  void Feed(const MemoryEvent& event) {
    replay_.Add(event);
    analysis_.AfterMemory(FromProto(event), replay_);
  }
  KernelAnalysis analysis_;
  Replay replay_;
  uint64_t launch_seq_ = 0;
};

TEST(KernelAnalysisTest, NeverUsedAllocationsByCallSite) {
  LaunchRun run;
  run.Malloc(0x10000000, 8 * kMiB, /*stack=*/1);   // x
  run.Malloc(0x20000000, 8 * kMiB, /*stack=*/1);   // y
  run.Malloc(0x30000000, 64 * kMiB, /*stack=*/2);  // spare: never passed to a kernel
  run.Launch(1, {0x10000000});
  run.Launch(2, {0x20000000 + 4096, 0x10000000});  // an interior pointer into y
  run.Free(0x30000000);
  const KernelReport& report = run.Finish();
  EXPECT_EQ(report.launches, 2u);
  ASSERT_EQ(report.never_used.size(), 1u);
  EXPECT_EQ(report.never_used[0].stack_id, 2u);
  EXPECT_EQ(report.never_used[0].tally.bytes, 64 * kMiB);
  EXPECT_EQ(report.never_used[0].tally.count, 1u);
  EXPECT_TRUE(report.idle.empty());
}

TEST(KernelAnalysisTest, PointersOutsideEveryAllocationAndFreedMemoryDoNotCount) {
  LaunchRun run;
  run.Malloc(0x10000000, kMiB, 1);
  run.Free(0x10000000);
  run.Malloc(0x20000000, kMiB, 2);
  // 0x10000000 was freed: a launch given it does not use the new allocation; the end of a range
  // is outside it.
  run.Launch(1, {0x10000000, 0x20000000 + kMiB});
  const KernelReport& report = run.Finish();
  Tally never_used;
  for (const UnusedSite& site : report.never_used) never_used.Add(site.tally);
  EXPECT_EQ(never_used.count, 2u);  // both: the first was never received while it lived
}

TEST(KernelAnalysisTest, NothingIsCalledUnusedWithoutLaunches) {
  LaunchRun run;
  run.Malloc(0x10000000, kMiB, 1);
  const KernelReport& report = run.Finish();
  EXPECT_EQ(report.launches, 0u);
  EXPECT_TRUE(report.never_used.empty());
}

TEST(KernelAnalysisTest, VmmMappingsCreditThePhysicalMemoryBehindThem) {
  LaunchRun run;
  run.Add(CU_MEM_ADDRESS_RESERVE, VMM_RESERVATION, ALLOC, -1, 64 * kMiB, 0x40000000);
  MemoryEvent& create = run.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 2 * kMiB, 0, 3, 0xAB);
  MemoryEvent& map = run.Add(CU_MEM_MAP, VMM_MAPPING, ALLOC, -1, 2 * kMiB, 0x40200000, 3, 0xAB);
  for (const MemoryEvent& event : run.events()) run.replay().Add(event);
  (void)create;
  (void)map;
  ASSERT_NE(run.replay().FindContaining(0x40200000 + 100), nullptr);
  EXPECT_EQ(run.replay().FindContaining(0x40200000 + 100)->size, 2 * kMiB);
  EXPECT_EQ(run.replay().FindContaining(0x40000000), nullptr);  // reserved, not mapped
}

TEST(KernelAnalysisTest, KernelsPerNameAndCallSiteAndAtThePeak) {
  LaunchRun run;
  run.Malloc(0x10000000, kMiB, 1);
  run.Launch(1, {0x10000000}, /*stack=*/10);
  run.Malloc(0x20000000, 4 * kMiB, 2);  // the peak: 5 MiB
  run.Launch(2, {0x20000000}, 11);
  run.Launch(2, {0x20000000}, 11);
  run.Launch(2, {0x20000000}, 12);
  run.Free(0x20000000);  // below the peak: later launches are not at it
  run.Launch(1, {0x10000000}, 10);
  const KernelReport& report = run.Finish();
  ASSERT_EQ(report.kernels.size(), 2u);
  EXPECT_EQ(report.kernels[0].launches, 3u);  // kernel 2, most launches first
  ASSERT_EQ(report.kernels[0].stacks.size(), 2u);
  EXPECT_EQ(report.kernels[0].stacks[0], (std::pair<uint64_t, uint64_t>{11, 2}));
  ASSERT_EQ(report.at_peak.count(0), 1u);
  ASSERT_EQ(report.at_peak.at(0).size(), 1u);
  EXPECT_EQ(report.at_peak.at(0)[0].second, 3u);  // kernel 2's three launches, not kernel 1's
}

// The peak's line names kernels short; two instantiations of one kernel template (PyTorch's sum
// in two block sizes) are one entry there, their launches added.
TEST(KernelAnalysisTest, KernelsAtThePeakByShortNameTogether) {
  const std::string sum =
      "at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
      "at::native::sum_functor<float, float, float>::operator()(at::"
      "TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4>";
  std::optional<KernelReport> report(std::in_place);
  report->launches = 9;
  report->at_peak[0] = {{"increment(int*)", 4},
                        {"void at::native::reduce_kernel<256, 2, " + sum + " >(" + sum + ")", 3},
                        {"void at::native::reduce_kernel<128, 4, " + sum + " >(" + sum + ")", 2}};
  std::string out;
  AppendKernelsAtPeakText(report, 0, 0, &out);
  EXPECT_EQ(out,
            "  kernels launched while at the peak: reduce_kernel<sum_functor> x5, increment x4\n");
  out.clear();
  AppendKernelsAtPeakText(report, 0, 1, &out);
  EXPECT_EQ(out, "  kernels launched while at the peak: reduce_kernel<sum_functor> x5, ...\n");
}

// A stack's launches are counted apart for the first kernel it launched; another kernel from the
// same stack, and stack ids beyond the dense range, count in that kernel's own table.
TEST(KernelAnalysisTest, OneStackLaunchingTwoKernelsCountsForEach) {
  LaunchRun run;
  constexpr uint64_t kFarStack = uint64_t{1} << 40;
  run.Launch(1, {}, /*stack=*/5);
  run.Launch(2, {}, 5);
  run.Launch(1, {}, 5);
  run.Launch(2, {}, 5);
  run.Launch(2, {}, 5);
  run.Launch(1, {}, kFarStack);
  run.Launch(2, {}, 6);
  const KernelReport& report = run.Finish();
  ASSERT_EQ(report.kernels.size(), 2u);
  EXPECT_EQ(report.kernels[0].launches, 4u);  // kernel 2
  EXPECT_EQ(report.kernels[0].stacks, (std::vector<std::pair<uint64_t, uint64_t>>{{5, 3}, {6, 1}}));
  EXPECT_EQ(report.kernels[1].launches, 3u);  // kernel 1
  EXPECT_EQ(report.kernels[1].stacks,
            (std::vector<std::pair<uint64_t, uint64_t>>{{5, 2}, {kFarStack, 1}}));
}

TEST(KernelAnalysisTest, IdleAfterLastUseForMostOfItsLife) {
  LaunchRun run;
  run.Malloc(0x10000000, 16 * kMiB, 1);  // used once, then kept through 2000 launches
  run.Malloc(0x20000000, kMiB, 2);       // used all along
  run.Launch(1, {0x10000000, 0x20000000});
  for (int i = 0; i < 2000; ++i) run.Launch(2, {0x20000000});
  const KernelReport& report = run.Finish();
  ASSERT_EQ(report.idle.size(), 1u);
  EXPECT_EQ(report.idle[0].stack_id, 1u);
  EXPECT_EQ(report.idle[0].idle_launches, 2000u);
  EXPECT_TRUE(report.never_used.empty());
}

}  // namespace
}  // namespace gpumem::report
