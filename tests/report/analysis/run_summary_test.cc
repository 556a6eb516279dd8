// The summary `gpumem record` prints at the end (report/analysis/run_summary.h): one process's
// lines on the bundled traces recorded on an H200 and an H100, and the summary of several
// processes from their briefs (the largest first, the rest summed).
#include "report/analysis/run_summary.h"

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// The summary of the bundled trace `name` (samples/traces/), and its brief.
std::string SummaryOf(const std::string& name, ProcessBrief* brief) {
  absl::StatusOr<ProcessReport> report = AnalyzeProcess(
      testing::SourcePath("samples/traces/" + name), RunSummaryRequest(/*several=*/false));
  EXPECT_TRUE(report.ok()) << report.status();
  if (!report.ok()) return "";
  *brief = BriefOf(*report);
  return ProcessSummaryText(*report);
}

// Whether `text` has a line that starts with `start`.
bool HasLine(const std::string& text, const std::string& start) {
  return text.rfind(start, 0) == 0 || text.find("\n" + start) != std::string::npos;
}

TEST(RunSummaryTest, OneProcessPeakNeverFreedGrowthAndNoFailures) {
  ProcessBrief brief;
  const std::string text = SummaryOf("leak_loop-h200.trace", &brief);
  EXPECT_TRUE(HasLine(text, "peak, device 0 (NVIDIA H200): 56.00 MiB (58720256 bytes) at "))
      << text;
  EXPECT_TRUE(HasLine(text, "  40.00 MiB   71.4%  10 allocations\n")) << text;
  EXPECT_TRUE(HasLine(text, "  16.00 MiB   28.6%  1 allocation\n")) << text;
  EXPECT_TRUE(HasLine(text,
                      "never freed, device 0 (NVIDIA H200): 40.00 MiB (41943040 bytes) in 10 "
                      "allocations from 1 call site\n"))
      << text;
  EXPECT_TRUE(HasLine(text,
                      "growth, device 0 (NVIDIA H200): +4.00 MiB/iteration over 10 "
                      "iterations at "))
      << text;
  EXPECT_TRUE(HasLine(text, "out of memory: never\n")) << text;
  EXPECT_FALSE(HasLine(text, "note: ")) << text;
  EXPECT_EQ(brief.peak_bytes, 56 * kMiB);
  EXPECT_EQ(brief.peak_place, "device 0 (NVIDIA H200)");
  EXPECT_EQ(brief.never_freed_bytes, 40 * kMiB);
  EXPECT_EQ(brief.failed_allocations, 0u);
  EXPECT_DOUBLE_EQ(brief.growth_per_iteration, 4.0 * kMiB);
}

// PyTorch's probe under expandable segments (error 800) is a failed call, never out of memory.
TEST(RunSummaryTest, AFailedCallThatIsNotOutOfMemoryIsToldApart) {
  ProcessBrief brief;
  const std::string text = SummaryOf("train_mlp-expandable-h100.trace", &brief);
  EXPECT_TRUE(HasLine(text, "out of memory: never\n")) << text;
  EXPECT_TRUE(HasLine(text, "failed calls (not out of memory): 1\n")) << text;
  EXPECT_EQ(brief.failed_allocations, 0u);
  EXPECT_EQ(brief.failed_calls, 1u);
}

ProcessBrief Brief(uint32_t pid, uint64_t peak_mib, uint64_t never_freed_mib, uint64_t failed = 0) {
  ProcessBrief brief;
  brief.pid = pid;
  brief.peak_bytes = peak_mib * kMiB;
  brief.peak_place = "device 0 (GPU)";
  brief.never_freed_bytes = never_freed_mib * kMiB;
  brief.failed_allocations = failed;
  return brief;
}

TEST(RunSummaryTest, SeveralProcessesTheHighestFirstAndTheRestSummed) {
  std::vector<ProcessBrief> briefs = {Brief(1, 10, 1), Brief(2, 60, 0),    Brief(3, 30, 2, 1),
                                      Brief(4, 50, 4), Brief(5, 20, 8, 2), Brief(6, 40, 16)};
  briefs[1].rank = " (rank 1 of 6)";
  briefs[3].growth_per_iteration = 2.0 * kMiB;
  briefs.push_back(ProcessBrief{});  // no memory allocated
  briefs.back().pid = 7;
  EXPECT_EQ(ProcessesSummaryText(briefs, {}),
            "7 processes, the highest peak first:\n"
            "  pid 2 (rank 1 of 6): peak 60.00 MiB on device 0 (GPU), never freed 0 B\n"
            "  pid 4: peak 50.00 MiB on device 0 (GPU), never freed 4.00 MiB, growing "
            "+2.00 MiB/iteration\n"
            "  pid 6: peak 40.00 MiB on device 0 (GPU), never freed 16.00 MiB\n"
            "  pid 3: peak 30.00 MiB on device 0 (GPU), never freed 2.00 MiB, 1 failed "
            "allocation\n"
            "  and 3 more processes: peaks up to 20.00 MiB, never freed 9.00 MiB in all, 2 "
            "failed allocations\n");
}

}  // namespace
}  // namespace gpumem::report
