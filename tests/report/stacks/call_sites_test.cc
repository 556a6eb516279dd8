// Call sites (report/stacks/call_sites.h): how sites are printed in text and JSON, and how
// CallSites groups the stacks of the bundled leak_loop trace (samples/traces/leak_loop-h200.trace,
// symbolized: its 10 leaked allocations come from one line).
#include "report/stacks/call_sites.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "report/replay/replay.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

Frame Native(const std::string& function, const std::string& file, int line) {
  Frame frame;
  frame.function = function;
  frame.file = file;
  frame.line = line;
  frame.module = "/opt/app/bin/app";
  return frame;
}

Site SiteOf(uint64_t bytes, uint64_t count, std::vector<Frame> frames) {
  Site site;
  site.tally.bytes = bytes;
  site.tally.count = count;
  site.label = LabelOf(frames, nullptr);
  site.frames = std::move(frames);
  return site;
}

TEST(CallSitesTest, SitesPrintSizeShareCountThenTheirFramesAndTheRestInOneLine) {
  const std::vector<Site> sites = {SiteOf(30 * kMiB, 3, {Native("grow", "app.cc", 12)}),
                                   SiteOf(10 * kMiB, 1, {}), SiteOf(4 * kMiB, 2, {})};
  std::string out;
  AppendSitesText(sites, 2, 40 * kMiB, StackStyle::kShort, &out);
  EXPECT_EQ(out,
            "  30.00 MiB   75.0%  3 allocations\n"
            "      app.cc:12 in grow\n"
            "  10.00 MiB   25.0%  1 allocation\n"
            "      (no stack recorded)\n"
            "  ... 1 more call site: 4.00 MiB in 2 allocations\n");
}

TEST(CallSitesTest, HeldAndGraphSitesAreMarked) {
  MemoryHolder holder;
  holder.name = "cuBLAS";
  Site site = SiteOf(kMiB, 1, {});
  site.holder = &holder;
  site.for_graph = true;
  std::string out;
  AppendSitesText({site}, 0, 0, StackStyle::kShort, &out);
  EXPECT_EQ(out.substr(0, out.find('\n')),
            "  1.00 MiB  1 allocation  [held by cuBLAS]  [for a CUDA graph]");
}

TEST(CallSitesTest, FullStacksPrintEveryFrame) {
  std::string out;
  AppendSitesText({SiteOf(kMiB, 1, {Native("grow", "app.cc", 12), Native("main", "app.cc", 30)})},
                  0, 0, StackStyle::kFull, &out);
  EXPECT_EQ(out,
            "  1.00 MiB  1 allocation\n"
            "      grow (app.cc:12)\n"
            "      main (app.cc:30)\n");
}

TEST(CallSitesTest, JsonSitesKeepEveryFrameFieldAndAddTheUserFrame) {
  const std::string json =
      JsonSites({SiteOf(2 * kMiB, 2, {Native("grow", "app.cc", 12)})}, 0, 4 * kMiB);
  EXPECT_NE(json.find("\"user_frame\":{\"text\":\"grow (app.cc:12)\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"via\":\"\""), std::string::npos) << json;
  EXPECT_NE(JsonSites({SiteOf(kMiB, 1, {})}, 0, 0).find("\"user_frame\":null"), std::string::npos);
  EXPECT_NE(json.find("\"bytes\":2097152"), std::string::npos) << json;
  EXPECT_NE(json.find("\"share\":0.5"), std::string::npos) << json;
  EXPECT_NE(json.find("\"function\":\"grow\",\"file\":\"app.cc\",\"line\":12"), std::string::npos)
      << json;
  EXPECT_EQ(SizeText(58720256), "56.00 MiB (58720256 bytes)");
}

TEST(CallSitesTest, TheLeakLoopsLeaksAreOneSiteNamedByItsLine) {
  absl::StatusOr<TraceReplay> replay =
      ReplayTrace(testing::SourcePath("samples/traces/leak_loop-h200.trace"));
  ASSERT_TRUE(replay.ok()) << replay.status();
  ASSERT_EQ(replay->places.size(), 1u);
  Symbolizer symbolizer(replay->file.get());
  CallSites call_sites(&symbolizer, GroupBy::kUser, false);
  const std::vector<Site> sites =
      GroupSites(replay->places[0].live_sites, call_sites, replay->stream_ordered_stacks);
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0].tally.count, 10u);
  EXPECT_EQ(sites[0].tally.bytes, 40 * kMiB);
  const uint64_t stack = replay->places[0].live_sites.at(0).stack_id;
  EXPECT_EQ(call_sites.Label(stack), "leak_loop.cc:26 in leak_iteration()");
  std::string text;
  call_sites.AppendStackText(stack, &text);
  EXPECT_EQ(text, "      leak_loop.cc:26 in leak_iteration()\n");
  EXPECT_EQ(call_sites.Of(stack), call_sites.Of(stack));
}

}  // namespace
}  // namespace gpumem::report
