// report/trace/trace_paths.h: arguments naming trace files or directories of them.
#include "report/trace/trace_paths.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using ::gpumem::testing::TempDir;

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

TEST(TracePathsTest, FilesAreKeptAsGivenInTheirOrder) {
  // Not opened here: a missing file is reported when it is read.
  absl::StatusOr<std::vector<std::string>> paths =
      ExpandTracePaths({"b.trace", "missing.trace", "a.bin"});
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_EQ(*paths, (std::vector<std::string>{"b.trace", "missing.trace", "a.bin"}));
}

TEST(TracePathsTest, ADirectoryIsItsTraceFilesSortedByName) {
  TempDir dir;
  Touch(dir.File("rank1.trace"));
  Touch(dir.File("rank0.trace"));
  Touch(dir.File("notes.txt"));                                 // not a trace
  std::filesystem::create_directory(dir.File("nested.trace"));  // a directory, not a file
  std::filesystem::create_directory(dir.File("sub"));
  Touch(dir.File("sub/deeper.trace"));  // only directly inside
  absl::StatusOr<std::vector<std::string>> paths = ExpandTracePaths({"first.trace", dir.path()});
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_EQ(*paths, (std::vector<std::string>{"first.trace", dir.File("rank0.trace"),
                                              dir.File("rank1.trace")}));
}

TEST(TracePathsTest, ADirectoryWithoutTracesIsAnErrorNamingIt) {
  TempDir dir;
  Touch(dir.File("run.log"));
  absl::StatusOr<std::vector<std::string>> paths = ExpandTracePaths({dir.path()});
  ASSERT_FALSE(paths.ok());
  EXPECT_EQ(paths.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(paths.status().message(), dir.path() + ": directory holds no *.trace file");
}

}  // namespace
}  // namespace gpumem::report
