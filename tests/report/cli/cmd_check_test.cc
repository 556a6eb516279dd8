// `gpumem check --markdown FILE`: the summary a CI job posts, for passing and failing budgets.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/test_support.h"

namespace gpumem::testing {
namespace {

const std::string kLeakLoop = SourcePath("samples/traces/leak_loop-h200.trace");

TEST(CheckMarkdown, FailingBudgetsNameTheOverrunAndTheLargestCallSite) {
  TempDir dir;
  ProgramRun run = RunProgram({BuildPath("bin/gpumem"), "check", "--max-peak", "50MiB",
                               "--no-leaks", "--markdown", dir.File("ci.md"), kLeakLoop});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  const std::string markdown = ReadFile(dir.File("ci.md"));
  EXPECT_EQ(markdown.rfind("## gpumem memory check: failed\n", 0), 0u) << markdown;
  EXPECT_NE(markdown.find("| 56.00 MiB | ≤ 50.00 MiB | ❌ over by 6.00 MiB; largest call site "
                          "40.00 MiB: `leak_loop.cc:26 in leak_iteration()`"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| never freed | 40.00 MiB in 10 allocations | none | ❌ |"),
            std::string::npos)
      << markdown;
}

TEST(CheckMarkdown, PassingBudgets) {
  TempDir dir;
  ProgramRun run = RunProgram({BuildPath("bin/gpumem"), "check", "--max-peak=1GiB", "--markdown",
                               dir.File("ci.md"), kLeakLoop});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::string markdown = ReadFile(dir.File("ci.md"));
  EXPECT_EQ(markdown.rfind("## gpumem memory check: passed\n", 0), 0u) << markdown;
  EXPECT_NE(markdown.find("| 56.00 MiB | ≤ 1.00 GiB | ✅ |"), std::string::npos) << markdown;
  EXPECT_EQ(markdown.find("never freed"), std::string::npos);  // --no-leaks was not asked for
}

TEST(CheckMarkdown, BadMarkdownArgumentsAreUsageOrInputErrors) {
  ProgramRun missing =
      RunProgram({BuildPath("bin/gpumem"), "check", "--no-leaks", kLeakLoop, "--markdown"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err.rfind("gpumem: error: check: --markdown needs a file name\n", 0), 0u)
      << missing.err;
  ProgramRun unwritable = RunProgram({BuildPath("bin/gpumem"), "check", "--max-peak", "1GiB",
                                      "--markdown", "/proc/no/such/dir/ci.md", kLeakLoop});
  EXPECT_EQ(unwritable.exit_code, 2);
  EXPECT_EQ(unwritable.err,
            "gpumem: error: writing /proc/no/such/dir/ci.md: No such file or directory (the "
            "Markdown summary)\n");
}

}  // namespace
}  // namespace gpumem::testing
