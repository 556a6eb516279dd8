// The page's data from the bundled real traces: the exact peak, bands that add up to in use,
// 'other' folding, the known leak, launches, and the reduction of a long trace to few buckets.
#include "viewer/page_data.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem::viewer {
namespace {

using testing::SourcePath;

// The page data of a bundled trace (empty, with a failure, when it cannot be built).
PageData Build(const std::string& name, const ViewOptions& options = {}) {
  absl::StatusOr<PageData> page = BuildPageData(SourcePath("samples/traces/" + name), options);
  EXPECT_TRUE(page.ok()) << page.status();
  return page.ok() ? *std::move(page) : PageData{};
}

// samples/leak_loop/expected.txt's "leaked bytes=N count=N site=FUNCTION".
std::map<std::string, std::string> ExpectedLeak() {
  std::ifstream in(SourcePath("samples/leak_loop/expected.txt"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("leaked ", 0) != 0) continue;
    std::map<std::string, std::string> fields;
    std::istringstream words(line.substr(7));
    for (std::string word; words >> word;) {
      const size_t equals = word.find('=');
      fields[word.substr(0, equals)] = word.substr(equals + 1);
    }
    return fields;
  }
  return {};
}

void ExpectBandsAddUp(const PagePlace& place) {
  ASSERT_EQ(place.band_bytes.size(), place.band_sites.size() + 1);
  for (size_t i = 0; i < place.in_use_max.size(); ++i) {
    uint64_t sum = 0;
    for (const std::vector<uint64_t>& band : place.band_bytes) sum += band[i];
    EXPECT_EQ(sum, place.in_use_max[i]) << "bucket " << i;
  }
}

TEST(PageDataTest, LeakLoopPeakLeakAndBands) {
  const PageData page = Build("leak_loop-h200.trace");
  ASSERT_EQ(page.places.size(), 1u);
  const PagePlace& place = page.places[0];
  EXPECT_EQ(place.peak_bytes, 58720256u);  // 10 x 4 MiB kept + 16 MiB working buffer
  EXPECT_EQ(*std::max_element(place.in_use_max.begin(), place.in_use_max.end()), place.peak_bytes);
  ExpectBandsAddUp(place);
  EXPECT_EQ(place.band_sites.size(), 2u);  // two call sites: both are bands, 'other' is empty
  for (uint64_t other : place.band_bytes.back()) EXPECT_EQ(other, 0u);

  const std::map<std::string, std::string> leak = ExpectedLeak();
  ASSERT_FALSE(leak.empty());
  EXPECT_EQ(place.leaked.bytes, std::stoull(leak.at("bytes")));
  EXPECT_EQ(place.leaked.count, std::stoull(leak.at("count")));
  ASSERT_EQ(place.leak_sites.size(), 1u);
  const PageSite& site = page.sites[place.leak_sites[0].site];
  EXPECT_NE(site.label.find(leak.at("site")), std::string::npos) << site.label;
  EXPECT_NE(site.frames[0].find("leak_loop.cc:26"), std::string::npos) << site.frames[0];
  // The never-freed flame graph: outermost first, the leak's function at the bottom.
  const FlameNode* node = &place.leak_flame;
  EXPECT_EQ(node->bytes, place.leaked.bytes);
  while (!node->children.empty()) node = &node->children[0];
  EXPECT_NE(node->name.find(leak.at("site")), std::string::npos) << node->name;
  EXPECT_TRUE(page.notice.empty());
  EXPECT_TRUE(page.footer);
  EXPECT_EQ(page.memory_events, 30u);
}

TEST(PageDataTest, OtherFoldsWhatIsNotABand) {
  ViewOptions options;
  options.bands = 1;
  const PageData page = Build("leak_loop-h200.trace", options);
  ASSERT_EQ(page.places.size(), 1u);
  const PagePlace& place = page.places[0];
  ASSERT_EQ(place.band_sites.size(), 1u);
  ExpectBandsAddUp(place);
  // The band is the larger area (the kept activations); the working buffers are 'other'.
  EXPECT_NE(page.sites[place.band_sites[0]].frames[0].find("leak_loop.cc:26"), std::string::npos);
  EXPECT_EQ(*std::max_element(place.band_bytes[1].begin(), place.band_bytes[1].end()), 16u << 20);
}

TEST(PageDataTest, TrainMlpLaunchesReservedIterations) {
  const PageData page = Build("train_mlp-async-h100.trace");
  ASSERT_EQ(page.places.size(), 1u);
  const PagePlace& place = page.places[0];
  EXPECT_EQ(place.peak_bytes, 222055040u);  // gpumem report's peak of this trace
  EXPECT_EQ(*std::max_element(place.in_use_max.begin(), place.in_use_max.end()), place.peak_bytes);
  ExpectBandsAddUp(place);
  // A band per user's line that held memory at a bucket's highest point: 6, fewer than the
  // kDefaultBands a page may have.
  EXPECT_EQ(place.band_sites.size(), 6u);
  EXPECT_LT(place.band_sites.size(), kDefaultBands);
  uint64_t launches = 0;
  for (uint64_t count : place.launches) launches += count;
  EXPECT_EQ(launches, page.launches);
  EXPECT_GT(launches, 0u);
  // The pool's reserved size (at most 100663296 bytes in that run, samples/traces/README.md).
  ASSERT_FALSE(place.reserved.empty());
  EXPECT_EQ(*std::max_element(place.reserved.begin(), place.reserved.end()), 100663296u);
  // 20 training steps.
  EXPECT_EQ(page.iterations.count, 20u);
  ASSERT_EQ(page.iterations.times.size(), 20u);
  EXPECT_TRUE(std::is_sorted(page.iterations.times.begin(), page.iterations.times.end()));
  // Python frames spliced into the flame graph's stacks.
  bool python = false;
  for (const PageSite& site : page.sites) {
    for (const std::string& frame : site.frames)
      python |=
          frame.find("train_mlp.py:") == 0 || frame.find("/train_mlp.py:") != std::string::npos;
  }
  EXPECT_TRUE(python);
  EXPECT_FALSE(page.summary.empty());
}

TEST(PageDataTest, FewBucketsKeepThePeakExact) {
  ViewOptions options;
  options.buckets = 16;
  const PageData page = Build("train_mlp-async-h100.trace", options);
  ASSERT_EQ(page.places.size(), 1u);
  const PagePlace& place = page.places[0];
  EXPECT_LE(place.in_use_max.size(), 16u);
  EXPECT_EQ(*std::max_element(place.in_use_max.begin(), place.in_use_max.end()), 222055040u);
  ExpectBandsAddUp(place);
  EXPECT_TRUE(std::is_sorted(place.start_ns.begin(), place.start_ns.end()));
  EXPECT_LE(place.start_ns.back(), place.end_ns);
}

TEST(PageDataTest, MissingFileFails) {
  absl::StatusOr<PageData> page = BuildPageData("/nonexistent/x.trace", {});
  ASSERT_FALSE(page.ok());
  EXPECT_NE(page.status().message().find("/nonexistent/x.trace"), std::string::npos);
}

}  // namespace
}  // namespace gpumem::viewer
