// Output that cannot be written is an error, never an exit 0 with the output cut: every command
// writing to standard output, run with standard output on /dev/full (every write fails with
// ENOSPC), exits 2 with the one line "gpumem: error: writing standard output: No space left on
// device". Output files must be regular files: one that is a device is refused, and never
// replaced. (`gpumem view` is tested in tests/viewer/view_command_test.cc.)
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::SourcePath;
using testing::TempDir;

namespace fs = std::filesystem;

constexpr char kFull[] = "/dev/full";
constexpr char kNoSpace[] = "gpumem: error: writing standard output: No space left on device\n";

std::string Trace() { return SourcePath("samples/traces/leak_loop-h200.trace"); }

// gpumem `args` with standard output on /dev/full.
ProgramRun GpumemToFullDisk(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem")};
  argv.insert(argv.end(), args.begin(), args.end());
  testing::SpawnOptions options;
  options.out_path = kFull;
  ProgramRun run = testing::RunProgramWithin(
      std::chrono::seconds(60), argv, testing::Environment({{"GPUMEM_SYMBOL_PATH", ""}}), options);
  EXPECT_EQ(run.spawn_error, 0) << "cannot run " << argv[0];
  return run;
}

class OutputErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat info;
    if (stat(kFull, &info) != 0 || !S_ISCHR(info.st_mode)) GTEST_SKIP() << "no /dev/full here";
  }
};

// gpumem `args` with standard output on a full disk: exit 2 and the one line saying so.
void ExpectNoSpaceLeft(const std::vector<std::string>& args) {
  std::string command;
  for (const std::string& arg : args) command += " " + arg;
  SCOPED_TRACE("gpumem" + command);
  const ProgramRun run = GpumemToFullDisk(args);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, kNoSpace);
}

TEST_F(OutputErrorsTest, DumpToAFullDisk) {
  ExpectNoSpaceLeft({"dump", Trace()});
  ExpectNoSpaceLeft({"dump", "--counts", Trace()});
  ExpectNoSpaceLeft({"dump", "--symbolize", Trace()});
}

TEST_F(OutputErrorsTest, ReportJsonToAFullDisk) {
  ExpectNoSpaceLeft({"report", "--json", Trace()});
  ExpectNoSpaceLeft({"report", Trace()});
}

TEST_F(OutputErrorsTest, EveryOtherCommandToAFullDisk) {
  TempDir dir;
  const std::string trace = dir.File("run.trace");
  fs::copy_file(Trace(), trace);
  ExpectNoSpaceLeft({"check", "--max-peak", "1TiB", trace});
  ExpectNoSpaceLeft({"whatif", "--device-memory", "1GiB", trace});
  ExpectNoSpaceLeft({"whatif", "--device-memory", "1GiB", "--json", trace});
  ExpectNoSpaceLeft({"symbolize", trace});
  ExpectNoSpaceLeft({"export", "--format", "perfetto", "-o", "-", trace});
  ExpectNoSpaceLeft({"--help"});
  ExpectNoSpaceLeft({"help", "report"});
  ExpectNoSpaceLeft({"--version"});
}

// An output file that is a device (here through a link in a directory of the test's own, so that
// nothing outside it could be replaced) is refused before anything is written.
TEST_F(OutputErrorsTest, AnOutputThatIsNotARegularFileIsRefused) {
  TempDir dir;
  const std::string device = dir.File("full");
  fs::create_symlink(kFull, device);
  for (const std::vector<std::string>& args : {
           std::vector<std::string>{"export", "--format", "folded", "-o", device, Trace()},
           {"check", "--max-peak", "1TiB", "--markdown", device, Trace()},
       }) {
    SCOPED_TRACE(args[0]);
    const ProgramRun run = GpumemToFullDisk(args);
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(run.err.rfind("gpumem: error: " + device + ": not a regular file", 0), 0u) << run.err;
    EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << run.err;
    EXPECT_TRUE(fs::is_symlink(device));
    EXPECT_EQ(fs::read_symlink(device), kFull);
  }
}

}  // namespace
}  // namespace gpumem
