// The fake driver forbids during stream capture exactly what the real one does (capture_rules.cc
// prints the rules; capture_rules.expected holds what a real GPU printed), and recording under
// gpumem changes none of it: gpumem's own driver calls never invalidate the program's capture.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tests/support/test_support.h"

namespace gpumem::testing {
namespace {

// Lines of `text` that contain every one of `parts`.
int LinesWithAll(const std::string& text, std::initializer_list<const char*> parts) {
  std::istringstream in(text);
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    bool all = true;
    for (const char* part : parts) all = all && line.find(part) != std::string::npos;
    count += all;
  }
  return count;
}

// The expected file without its comment lines.
std::string ExpectedRules() {
  std::istringstream in(ReadFile(SourcePath("tests/fake_cuda/capture_rules.expected")));
  std::string rules;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') rules += line + "\n";
  }
  return rules;
}

TEST(CaptureRules, FakeDriverForbidsWhatTheRealOneForbids) {
  const ProgramRun run = RunProgram({BuildPath("bin/capture_rules")}, {{"LD_PRELOAD", ""}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, ExpectedRules());
}

TEST(CaptureRules, RecordingChangesNoCaptureOutcome) {
  TempDir dir;
  const ProgramRun run =
      RunProgram({BuildPath("bin/capture_rules")}, RecordingEnvironment(dir.File("rules.trace")));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, ExpectedRules());
  // ... and it recorded: every capture began and ended, every captured allocation is marked.
  const ProgramRun dump = RunProgram({BuildPath("bin/gpumem"), "dump", dir.File("rules.trace")});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  const int probes = LinesWithAll(ExpectedRules(), {"begin=0"});
  ASSERT_GT(probes, 30);
  EXPECT_EQ(LinesWithAll(dump.out, {" stream_capture ", " began mode="}), probes);
  EXPECT_EQ(LinesWithAll(dump.out, {" stream_capture ", " ended "}), probes);
  EXPECT_EQ(LinesWithAll(dump.out, {"cuMemAllocAsync alloc pool", " capture="}), probes);
  EXPECT_EQ(LinesWithAll(dump.out, {"cuMemFreeAsync free pool", " capture="}), probes);
}

}  // namespace
}  // namespace gpumem::testing
