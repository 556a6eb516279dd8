// gpumem whatif's answers (report/allocator/whatif.h) on the tensors of train_mlp.py recorded on an
// H100 (samples/traces/train_mlp-async-h100.trace): under the native allocator they need 88 MiB
// (92274688 bytes, what PyTorch reserved when the same script ran under that allocator).
#include "report/allocator/whatif.h"

#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

WhatifRequest Limit(uint64_t device_memory, std::vector<AllocatorKind> kinds = {}) {
  WhatifRequest request;
  request.device_memory = device_memory;
  request.kinds = std::move(kinds);
  return request;
}

std::string Sample(const std::string& name) {
  return testing::SourcePath("samples/traces/" + name);
}

absl::StatusOr<std::vector<AllocatorAnswers>> Answer(const std::string& path,
                                                     const WhatifRequest& request) {
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  if (!file.ok()) return file.status();
  std::vector<AllocatorReplayResult> limited = ReplayThroughAllocators(
      **file, {std::begin(kAllAllocators), std::end(kAllAllocators)}, request.device_memory);
  return AnswerWhatif(path, std::move(limited), request);
}

TEST(WhatifTest, TheNativeAllocatorFitsAtItsPeakAndRunsOutTwoMiBBelow) {
  const std::string path = Sample("train_mlp-async-h100.trace");
  for (const uint64_t limit : {88 * kMiB, 86 * kMiB}) {
    absl::StatusOr<std::vector<AllocatorAnswers>> all =
        Answer(path, Limit(limit, {AllocatorKind::kNative}));
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->size(), 1u);
    const AllocatorAnswers& native = all->front();
    EXPECT_EQ(native.Fits(), limit == 88 * kMiB) << limit;
    ASSERT_EQ(native.smallest_fit.size(), 1u);
    EXPECT_EQ(native.smallest_fit[0], 92274688u);
    EXPECT_EQ(native.unlimited.devices.at(0).stats.reserved_peak, 92274688u);
  }
}

TEST(WhatifTest, ATraceOfSegmentsCannotBeReplayed) {
  const std::string path = Sample("train_mlp-default-h100.trace");
  absl::StatusOr<std::vector<AllocatorAnswers>> all = Answer(path, Limit(80 * kMiB));
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("recorded under PyTorch's caching allocator"),
            std::string::npos)
      << all.status();
}

TEST(WhatifTest, ThePlainProgramIsReplayedThroughTheAsyncPoolOnly) {
  const std::string path = Sample("leak_loop-h200.trace");
  absl::StatusOr<std::vector<AllocatorAnswers>> all = Answer(path, Limit(64 * kMiB));
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->front().kind, AllocatorKind::kAsync);
  absl::StatusOr<std::vector<AllocatorAnswers>> native =
      Answer(path, Limit(64 * kMiB, {AllocatorKind::kNative}));
  EXPECT_FALSE(native.ok());
}

TEST(WhatifTest, TheTextEndsWithOneVerdictPerAllocator) {
  const std::string path = Sample("train_mlp-async-h100.trace");
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const WhatifRequest request = Limit(86 * kMiB);
  std::vector<AllocatorReplayResult> limited = ReplayThroughAllocators(
      **file, {std::begin(kAllAllocators), std::end(kAllAllocators)}, request.device_memory);
  absl::StatusOr<std::vector<AllocatorAnswers>> all =
      AnswerWhatif(path, std::move(limited), request);
  ASSERT_TRUE(all.ok()) << all.status();
  Symbolizer symbolizer(file->get());
  CallSites sites(&symbolizer, GroupBy::kUser, false);
  const std::string text = WhatifText(path, *all, **file, sites, request);
  EXPECT_NE(text.find("\nwhatif: native runs out, expandable runs out, async fits\n"),
            std::string::npos)
      << text;
  const std::string json = WhatifJson(path, *all, **file, sites, request);
  EXPECT_EQ(json.rfind("{\"gpumem_whatif\":1,", 0), 0u) << json;
}

}  // namespace
}  // namespace gpumem::report
