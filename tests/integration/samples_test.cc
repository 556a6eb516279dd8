// Every sample, run under the real preload library against the fake CUDA, is recorded exactly as
// its samples/<name>/expected.txt says. With GPUMEM_GPU_TRACES=<dir> the same checks run on
// traces recorded on a real GPU by tests/gpu/run.sh (<dir>/<name>/<name>.trace, exit_code).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/integration/expected_answer.h"
#include "tests/support/test_support.h"

namespace gpumem::testing {
namespace {

std::vector<std::string> SampleNames() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(SourcePath("samples"))) {
    if (std::filesystem::exists(entry.path() / "expected.txt")) {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

const char* GpuTracesDir() { return getenv("GPUMEM_GPU_TRACES"); }

class SampleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SampleTest, RecordedExactlyAsExpected) {
  const std::string name = GetParam();
  ExpectedAnswer answer = ReadExpectedAnswer(SourcePath("samples/" + name + "/expected.txt"));
  std::vector<std::string> traces;
  TempDir dir;
  if (const char* gpu_dir = GpuTracesDir()) {
    std::string sample_dir = std::string(gpu_dir) + "/" + name;
    if (!std::filesystem::exists(sample_dir)) GTEST_SKIP() << "not recorded on the GPU: " << name;
    int exit_code = std::stoi(ReadFile(sample_dir + "/exit_code"));
    EXPECT_EQ(exit_code, answer.exit_code) << ReadFile(sample_dir + "/stderr");
    traces = TraceFilesOfRun(sample_dir, name);
  } else {
    if (answer.gpu_only) GTEST_SKIP() << name << " needs a real GPU (tests/gpu/run.sh)";
    auto environment = RecordingEnvironment(dir.File(name + ".trace"));
    for (const auto& [variable, value] : answer.env) environment[variable] = value;
    ProgramRun run = RunProgram({BuildPath("bin/" + name)}, environment);
    ASSERT_EQ(run.exit_code, answer.exit_code) << run.out << run.err;
    EXPECT_EQ(run.err.find("gpumem:"), std::string::npos) << run.err;
    traces = TraceFilesOfRun(dir.path(), name);
  }
  std::vector<std::string> problems =
      CheckAgainstAnswer(traces, answer, /*counts_only_where_device_dependent=*/GpuTracesDir());
  std::string report;
  for (const std::string& problem : problems) report += "\n  " + problem;
  EXPECT_TRUE(problems.empty()) << name << ":" << report;
}

INSTANTIATE_TEST_SUITE_P(Samples, SampleTest, ::testing::ValuesIn(SampleNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpumem::testing
