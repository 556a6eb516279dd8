// `gpumem view` as a user runs it: the page next to the trace by default, -o - to stdout, one-line
// errors and exit 2 for bad input, and a torn trace rendered with a notice (and exit 2).
#include <algorithm>
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

}  // namespace
}  // namespace gpumem
