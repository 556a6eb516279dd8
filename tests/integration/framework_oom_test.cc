// PyTorch's out-of-memory error and backward passes, from a script that notes them through
// gpumem's entry points as gpumem's Python observer does (any CPython), under the real preload
// library and the fake CUDA: `report --oom` leads with the framework's error (its request, the
// cap, the user's line, what was live), the fabric-handle probe the driver refuses with error 800
// is a failed call and no OOM, and the autograd thread's allocations group under the script's
// backward line.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::RecordingEnvironment;
using testing::RunProgram;
using testing::SourcePath;
using testing::TempDir;

std::string Script() { return SourcePath("tests/integration/programs/framework_oom.py"); }

std::string Line(const std::string& marker) {
  const std::map<std::string, uint32_t> markers = testing::MarkedLines(Script());
  auto it = markers.find(marker);
  if (it == markers.end()) ADD_FAILURE() << "no marker " << marker;
  return "framework_oom.py:" + std::to_string(it == markers.end() ? 0 : it->second) + " in train";
}

class FrameworkOomTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ProgramRun run =
        RunProgram({"python3", Script(),
                    BuildPath("tests/programs/site-packages/torch/lib/libfake_autograd_engine.so")},
                   RecordingEnvironment(trace_));
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  }
  std::string Report(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {BuildPath("bin/gpumem"), "report"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back(trace_);
    const ProgramRun report = RunProgram(argv);
    EXPECT_EQ(report.exit_code, 0) << report.err;
    return report.out;
  }

  TempDir dir_;
  std::string trace_ = dir_.File("framework_oom.trace");
};

TEST_F(FrameworkOomTest, OomLeadsWithPyTorchsError) {
  const std::string oom = Report({"--oom"});
  const size_t lead = oom.find("\noom, device 0");
  ASSERT_NE(lead, std::string::npos) << oom;
  EXPECT_NE(oom.find(": PyTorch ran out of memory at seq", lead), std::string::npos) << oom;
  EXPECT_NE(oom.find("  requested: 512.00 MiB (536870912 bytes)\n"), std::string::npos) << oom;
  // Where it was raised: the user's line first, on the line after the heading.
  EXPECT_NE(oom.find("  raised at:\n      " + Line("oom") + "\n"), std::string::npos) << oom;
  EXPECT_NE(oom.find("  limit: the process's cap of 128.00 MiB (134217728 bytes) "
                     "(set_per_process_memory_fraction)"),
            std::string::npos)
      << oom;
  EXPECT_NE(oom.find("  the allocator then: 88.00 MiB allocated, 96.00 MiB reserved"),
            std::string::npos)
      << oom;
  EXPECT_NE(oom.find("  message: CUDA out of memory. Tried to allocate 512.00 MiB."),
            std::string::npos)
      << oom;
  // What was live then, by call site (the innermost line of the user's): the weights, at the
  // script's allocate(), then the backward pass's buffers.
  const size_t live = oom.find("  live then: 88.00 MiB (92274688 bytes) in 4 allocations\n");
  ASSERT_NE(live, std::string::npos) << oom;
  std::string allocate_line = Line("allocate");
  allocate_line.replace(allocate_line.rfind(" in train"), std::string::npos, " in allocate");
  const size_t weights = oom.find(allocate_line, live);
  const size_t backward = oom.find(Line("backward"), live);
  EXPECT_LT(weights, backward) << oom;
  EXPECT_NE(backward, std::string::npos) << oom;
  EXPECT_NE(oom.find("what would have helped: the device had 1.86 GiB free: a higher cap"),
            std::string::npos)
      << oom;
  // Observer and exception are one error, and the probe none.
  EXPECT_EQ(testing::CountLines(oom, "oom, "), 1) << oom;
  EXPECT_EQ(oom.find("no failed allocations"), std::string::npos) << oom;
}

TEST_F(FrameworkOomTest, TheRefusedFabricHandleIsAFailedCallOnly) {
  const std::string oom = Report({"--oom"});
  EXPECT_NE(oom.find("failed allocations: 0; failed calls (not out of memory): 1"),
            std::string::npos)
      << oom;
  const size_t failed = oom.find("\nfailed calls (not out of memory): 1\n");
  ASSERT_NE(failed, std::string::npos) << oom;
  EXPECT_NE(oom.find("  cuMemCreate of 20.00 MiB (20971520 bytes) failed: error 800 "
                     "(CUDA_ERROR_NOT_PERMITTED)",
                     failed),
            std::string::npos)
      << oom;
  EXPECT_NE(oom.find(Line("probe"), failed), std::string::npos) << oom;
  EXPECT_EQ(oom.find("cuMemCreate"), oom.find("cuMemCreate", failed)) << oom;
  EXPECT_EQ(oom.find("error 800"), oom.find("error 800", failed)) << oom;
}

TEST_F(FrameworkOomTest, BackwardAllocationsGroupUnderTheLineThatBeganThePass) {
  for (const char* section : {"--peak", "--leaks"}) {
    SCOPED_TRACE(section);
    const std::string report = Report({section, "--python-only"});
    const size_t site = report.find("  24.00 MiB");
    ASSERT_NE(site, std::string::npos) << report;
    EXPECT_NE(report.find(Line("backward"), site), std::string::npos) << report;
  }
}

TEST_F(FrameworkOomTest, JsonHasTheFrameworkOomAndTheFailedCall) {
  const std::string json = Report({"--oom", "--json"});
  EXPECT_NE(json.find("\"failed_calls\":1,\"framework_ooms\":1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"framework_ooms\":[{\"memory\":\"device\",\"device\":0"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"sources\":[\"observer\",\"exception\"],\"requested\":536870912,"
                      "\"requested_exact\":true,\"limit\":134217728,\"capped\":true"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"failures\":[]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"api\":\"cuMemCreate\",\"size\":20971520,\"result\":800,"
                      "\"result_name\":\"CUDA_ERROR_NOT_PERMITTED\""),
            std::string::npos)
      << json;
}

}  // namespace
}  // namespace gpumem
