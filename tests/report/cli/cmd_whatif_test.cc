// `gpumem whatif` on the traces recorded on an H100 (samples/traces/): the command's verdicts, its
// smallest fit, its out-of-memory post-mortem and its input errors.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::RunProgram;
using testing::SourcePath;

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string Sample(const std::string& name) { return SourcePath("samples/traces/" + name); }

ProgramRun Whatif(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem"), "whatif"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, {{"GPUMEM_SYMBOL_PATH", ""}});
}

TEST(WhatifCommand, SmallestFitFitsAndTwoMiBLessRunsOut) {
  const struct {
    const char* allocator;
    uint64_t smallest;
  } kCases[] = {{"native", 92274688}, {"expandable", 109051904}, {"async", 88080384}};
  for (const auto& [allocator, smallest] : kCases) {
    const std::string trace = Sample("train_mlp-async-h100.trace");
    const ProgramRun at =
        Whatif({"--device-memory", std::to_string(smallest), "--allocator", allocator, trace});
    EXPECT_EQ(at.exit_code, 0) << allocator << ": " << at.err;
    EXPECT_NE(at.out.find(std::string("smallest device memory it fits: ") +
                          std::to_string(smallest / kMiB) + ".00 MiB (" + std::to_string(smallest) +
                          " bytes)"),
              std::string::npos)
        << at.out;
    EXPECT_NE(at.out.find(std::string("whatif: ") + allocator + " fits\n"), std::string::npos);
    const ProgramRun below = Whatif(
        {"--device-memory", std::to_string(smallest - 2 * kMiB), "--allocator", allocator, trace});
    EXPECT_EQ(below.exit_code, 1) << allocator << ": " << below.err;
    EXPECT_NE(below.out.find("OUT OF MEMORY"), std::string::npos) << below.out;
    EXPECT_NE(below.out.find(std::string("whatif: ") + allocator + " runs out\n"),
              std::string::npos);
  }
}

TEST(WhatifCommand, NamesTheFailingRequestAndWhatWasLiveByCallSite) {
  const ProgramRun run = Whatif(
      {"--device-memory=60MiB", "--allocator", "native", Sample("train_mlp-async-h100.trace")});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  const std::string& out = run.out;
  const size_t oom = out.find(
      "out of memory at seq 53, 6746.569 ms after start: a request of 32.00 MiB (33554432 bytes) "
      "on stream 0, after 1 retry that emptied the cache");
  ASSERT_NE(oom, std::string::npos) << out;
  const size_t live = out.find("live then: 39.92 MiB (41864240 bytes) in 16 allocations", oom);
  ASSERT_NE(live, std::string::npos) << out;
  // The largest call site first: the ReLU activations of train_step, 5 of them.
  const size_t largest = out.find("33.50 MiB   83.9%  5 allocations", live);
  ASSERT_NE(largest, std::string::npos) << out;
  EXPECT_LT(out.find("train_mlp.py:58 in make_training.<locals>.train_step", largest),
            out.find("6.01 MiB", largest));
}

TEST(WhatifCommand, EveryAllocatorByDefaultAndSizesAsElsewhere) {
  const ProgramRun run =
      Whatif({"--device-memory", "1.5GiB", Sample("train_mlp-async-h100.trace")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("1.50 GiB (1610612736 bytes) per device"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("whatif: native fits, expandable fits, async fits\n"), std::string::npos);
  EXPECT_EQ(Whatif({"--device-memory", "8G", Sample("train_mlp-async-h100.trace")}).exit_code, 0);
}

TEST(WhatifCommand, PlainProgramsReplayThroughTheAsyncModelOnly) {
  const std::string trace = Sample("leak_loop-h200.trace");
  const ProgramRun run = Whatif({"--device-memory", "8GiB", trace});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\nasync, device 0"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("\nnative,"), std::string::npos) << run.out;
  // 56 MiB live at its peak (samples/leak_loop): 54 MiB is too little.
  EXPECT_EQ(Whatif({"--device-memory", "54MiB", trace}).exit_code, 1);
  const ProgramRun native = Whatif({"--device-memory", "8GiB", "--allocator", "native", trace});
  EXPECT_EQ(native.exit_code, 2);
  EXPECT_NE(native.err.find("only --allocator async applies"), std::string::npos) << native.err;
}

// Bad input: exit 2, one error line (and the usage hint for usage errors).
TEST(WhatifCommand, BadInputIsOneLineAndExitTwo) {
  const std::string trace = Sample("train_mlp-async-h100.trace");
  const ProgramRun segments =
      Whatif({"--device-memory", "8GiB", Sample("train_mlp-default-h100.trace")});
  EXPECT_EQ(segments.exit_code, 2);
  EXPECT_EQ(segments.out, "");
  EXPECT_EQ(segments.err,
            "gpumem: error: " + Sample("train_mlp-default-h100.trace") +
                ": recorded under PyTorch's caching allocator: only its segments are visible; "
                "record with `gpumem record --tensors`\n");
  const ProgramRun missing = Whatif({"--device-memory", "8GiB", "/nonexistent.trace"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{trace},
        {"--device-memory", "lots", trace},
        {"--device-memory", "8GiB", "--allocator", "tlsf", trace},
        {"--device-memory", "8GiB", "--bogus", trace},
        {"--device-memory", "8GiB"}}) {
    const ProgramRun run = Whatif(args);
    EXPECT_EQ(run.exit_code, 2) << args.size();
    EXPECT_EQ(run.err.rfind("gpumem: error: whatif: ", 0), 0u) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 2) << run.err;  // + the hint
  }
}

}  // namespace
}  // namespace gpumem::report
