// `gpumem view` as a user runs it: the page next to the trace by default, -o - to stdout, one-line
// errors and exit 2 for bad input, and a torn trace rendered with a notice (and exit 2); never over
// its input, never an output error ignored.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::ReadFile;
using testing::SourcePath;
using testing::TempDir;

ProgramRun View(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem"), "view"};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::RunProgram(argv, {{"GPUMEM_SYMBOL_PATH", ""}});
}

size_t Lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(ViewCommandTest, WritesThePageNextToTheTrace) {
  TempDir dir;
  const std::string trace = dir.File("run.trace");
  std::filesystem::copy_file(SourcePath("samples/traces/leak_loop-h200.trace"), trace);
  const ProgramRun run = View({trace});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::string html = ReadFile(dir.File("run.html"));
  EXPECT_TRUE(absl::StartsWith(html, "<!DOCTYPE html>"));
  EXPECT_TRUE(absl::StrContains(html, "\"peak\":{\"bytes\":58720256"));
  EXPECT_TRUE(absl::StrContains(run.err, "page written to " + dir.File("run.html")));
  // Written through a temporary file: only the trace and the page are left.
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 2u);
}

TEST(ViewCommandTest, DashWritesToStdout) {
  const ProgramRun run = View({"-o", "-", SourcePath("samples/traces/leak_loop-h200.trace")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(absl::StartsWith(run.out, "<!DOCTYPE html>"));
  EXPECT_TRUE(absl::StrContains(run.out, "</html>"));
  EXPECT_EQ(run.err, "");
}

TEST(ViewCommandTest, BadInputIsOneLineAndExit2) {
  TempDir dir;
  ProgramRun run = View({dir.File("missing.trace")});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(absl::StartsWith(run.err, "gpumem: error: " + dir.File("missing.trace")));
  EXPECT_EQ(Lines(run.err), 1u) << run.err;

  run = View({"--frobnicate", SourcePath("samples/traces/leak_loop-h200.trace")});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(absl::StartsWith(run.err, "gpumem: error: view: unknown flag '--frobnicate'"));

  run = View({});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(absl::StartsWith(run.err, "gpumem: error: view: no trace file given"));

  const std::string not_a_trace = dir.File("notes.trace");
  std::ofstream(not_a_trace) << "hello, not a trace\n";
  run = View({not_a_trace, "-o", dir.File("out.html")});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(Lines(run.err), 1u) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir.File("out.html")));

  run = View({"--help"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_TRUE(absl::StartsWith(run.out, "usage: gpumem view"));
}

TEST(ViewCommandTest, TornTraceRendersWhatWasReadWithANotice) {
  TempDir dir;
  const std::string whole = ReadFile(SourcePath("samples/traces/train_mlp-async-h100.trace"));
  const std::string torn = dir.File("torn.trace");
  std::ofstream(torn, std::ios::binary) << whole.substr(0, whole.size() * 2 / 3);
  const ProgramRun run = View({torn, "-o", dir.File("torn.html")});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(run.err, "gpumem: error: " + torn)) << run.err;
  const std::string html = ReadFile(dir.File("torn.html"));
  ASSERT_FALSE(html.empty());
  // The notice names the damage; what was read is there.
  EXPECT_FALSE(absl::StrContains(html, "\"notice\":\"\""));
  EXPECT_TRUE(absl::StrContains(html, "\"notice\":\"" + torn));
  EXPECT_TRUE(absl::StrContains(html, "\"places\":[{\"place\":0"));
}

// -o naming the input trace itself, a symbolic link to it or a hard link to it: refused in one
// line, the trace untouched.
TEST(ViewCommandTest, NeverWritesOverItsInput) {
  TempDir dir;
  const std::string trace = dir.File("run.trace");
  std::filesystem::copy_file(SourcePath("samples/traces/leak_loop-h200.trace"), trace);
  const std::string original = ReadFile(trace);
  std::filesystem::create_symlink(trace, dir.File("link.html"));
  std::filesystem::create_hard_link(trace, dir.File("hard.html"));
  for (const std::string& output : {trace, dir.File("link.html"), dir.File("hard.html")}) {
    SCOPED_TRACE(output);
    const ProgramRun run = View({"-o", output, trace});
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_TRUE(absl::StartsWith(
        run.err, "gpumem: error: " + output + ": the output would overwrite the input trace"))
        << run.err;
    EXPECT_EQ(Lines(run.err), 1u) << run.err;
    EXPECT_EQ(ReadFile(trace), original);
  }
  EXPECT_TRUE(std::filesystem::is_symlink(dir.File("link.html")));
}

// The page to standard output on a full disk is an error; to a device it is refused (the device,
// behind a link of the test's own, is never replaced).
TEST(ViewCommandTest, AnOutputThatCannotBeWrittenIsAnError) {
  struct stat info;
  if (stat("/dev/full", &info) != 0 || !S_ISCHR(info.st_mode)) GTEST_SKIP() << "no /dev/full";
  const std::string trace = SourcePath("samples/traces/leak_loop-h200.trace");
  TempDir dir;
  testing::SpawnOptions to_full;
  to_full.out_path = "/dev/full";
  ProgramRun run = testing::RunProgramWithin(
      std::chrono::seconds(60), {BuildPath("bin/gpumem"), "view", "-o", "-", trace},
      testing::Environment({{"GPUMEM_SYMBOL_PATH", ""}}), to_full);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "gpumem: error: writing standard output: No space left on device\n");

  const std::string device = dir.File("full.html");
  std::filesystem::create_symlink("/dev/full", device);
  run = View({"-o", device, trace});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(absl::StartsWith(run.err, "gpumem: error: " + device + ": not a regular file"))
      << run.err;
  EXPECT_EQ(Lines(run.err), 1u) << run.err;
  EXPECT_TRUE(std::filesystem::is_symlink(device));
}

}  // namespace
}  // namespace gpumem
