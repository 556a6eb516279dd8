// The budgets of `gpumem check` (report/analysis/budgets.h) on the leak_loop sample recorded on an
// H200 (samples/traces/leak_loop-h200.trace): its device peaked at 56 MiB, 40 MiB in 10
// allocations never freed.
#include "report/analysis/budgets.h"

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "report/replay/replay.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

Budgets MaxPeak(uint64_t bytes) {
  Budgets budgets;
  budgets.max_peak = bytes;
  return budgets;
}

Budgets NoLeaks(std::optional<uint64_t> max_peak = std::nullopt) {
  Budgets budgets;
  budgets.max_peak = max_peak;
  budgets.no_leaks = true;
  return budgets;
}

constexpr uint64_t kMiB = uint64_t{1} << 20;

const std::string& LeakLoop() {
  static const std::string path = testing::SourcePath("samples/traces/leak_loop-h200.trace");
  return path;
}

TraceReplay Replayed() {
  absl::StatusOr<TraceReplay> replay = ReplayTrace(LeakLoop());
  EXPECT_TRUE(replay.ok()) << replay.status();
  return *std::move(replay);
}

TEST(BudgetsTest, APeakOverItsLimitIsOneLineSayingByHowMuch) {
  const TraceReplay replay = Replayed();
  const BudgetVerdict verdict = CheckBudgets(LeakLoop(), replay, MaxPeak(48 * kMiB), nullptr);
  EXPECT_EQ(verdict.broken, 1u);
  ASSERT_EQ(verdict.lines.size(), 1u);
  EXPECT_EQ(verdict.lines[0],
            LeakLoop() +
                ": device 0 (NVIDIA H200) peaked at 56.00 MiB (58720256 bytes), over "
                "--max-peak 48.00 MiB by 8.00 MiB (8388608 bytes)\n");
}

TEST(BudgetsTest, APeakAtItsLimitHolds) {
  const TraceReplay replay = Replayed();
  const BudgetVerdict verdict = CheckBudgets(LeakLoop(), replay, MaxPeak(56 * kMiB), nullptr);
  EXPECT_EQ(verdict.broken, 0u);
  EXPECT_TRUE(verdict.lines.empty());
}

TEST(BudgetsTest, LeaksBreakOnlyTheNoLeaksBudget) {
  const TraceReplay replay = Replayed();
  EXPECT_EQ(CheckBudgets(LeakLoop(), replay, MaxPeak(1024 * kMiB), nullptr).broken, 0u);
  const BudgetVerdict verdict = CheckBudgets(LeakLoop(), replay, NoLeaks(), nullptr);
  EXPECT_EQ(verdict.broken, 1u);
  ASSERT_EQ(verdict.lines.size(), 1u);
  EXPECT_EQ(verdict.lines[0], LeakLoop() +
                                  ": 10 allocations, 40.00 MiB (41943040 bytes) never "
                                  "freed (--no-leaks)\n");
}

TEST(BudgetsTest, TheMarkdownHasARowPerBudgetAndNamesTheLargestCallSite) {
  const TraceReplay replay = Replayed();
  BudgetMarkdown markdown(GroupBy::kUser);
  CheckBudgets(LeakLoop(), replay, NoLeaks(50 * kMiB), &markdown);
  const std::string text = markdown.Text(false);
  EXPECT_EQ(text.rfind("## gpumem memory check: failed\n\n| trace | budget |", 0), 0u) << text;
  EXPECT_NE(
      text.find("| peak, device 0 (NVIDIA H200) | 56.00 MiB | ≤ 50.00 MiB | ❌ over by "
                "6.00 MiB; largest call site 40.00 MiB: `leak_loop.cc:26 in leak_iteration()` |"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("| never freed | 40.00 MiB in 10 allocations | none | ❌ |"),
            std::string::npos)
      << text;
  EXPECT_EQ(BudgetMarkdown(GroupBy::kUser).Text(true),
            "## gpumem memory check: passed\n\n| trace | budget | measured | limit | result |\n"
            "|---|---|---|---|---|\n");
}

}  // namespace
}  // namespace gpumem::report
