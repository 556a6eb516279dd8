// report/export/folded.h: weighed stacks written as collapsed stacks and as speedscope JSON.
#include "report/export/folded.h"

#include <string>

#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

FrameInfo Frame(const std::string& name, const std::string& file, int line) {
  FrameInfo frame;
  frame.name = name;
  frame.file = file;
  frame.line = line;
  return frame;
}

// Two places; frames shared between stacks by index.
WeightedStacks TwoPlaces() {
  WeightedStacks stacks;
  stacks.frames = {Frame("main", "/src/train.py", 3), Frame("step", "/src/train.py", 12),
                   Frame("cudaMalloc", "", 0)};
  WeightedStacks::Profile device;
  device.place = 0;
  device.name = "device 0 (GPU; A)";
  device.total_bytes = 3072;
  device.samples = {{{0, 1, 2}, 2048}, {{0, 2}, 1024}};
  WeightedStacks::Profile host;
  host.place = -1;
  host.name = "pinned host";
  host.total_bytes = 512;
  host.samples = {{{}, 512}};  // no frames recorded
  stacks.profiles = {device, host};
  return stacks;
}

TEST(FoldedTest, FrameNamesLoseOnlyTheFormatsSeparators) {
  EXPECT_EQ(FoldedFrameName("a;b\nc\rd"), "a,b c d");
  EXPECT_EQ(FoldedFrameName("ns::f(int, char*) (x.cc:3)"), "ns::f(int, char*) (x.cc:3)");
  EXPECT_EQ(FoldedFrameName(""), "");
}

TEST(FoldedTest, OneLinePerStackUnderItsPlaceOutermostFirst) {
  // The place's own name is made safe too: its ';' would start a frame.
  EXPECT_EQ(FoldedText(TwoPlaces()),
            "device 0 (GPU, A);main;step;cudaMalloc 2048\n"
            "device 0 (GPU, A);main;cudaMalloc 1024\n"
            "pinned host 512\n");
  EXPECT_EQ(FoldedText(WeightedStacks{}), "");
}

TEST(FoldedTest, SpeedscopeSharesTheFramesAndWeighsEachSample) {
  const std::string json = SpeedscopeJson(TwoPlaces(), "run.trace");
  EXPECT_EQ(json,
            "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
            "\"name\":\"run.trace\",\"exporter\":\"gpumem\",\"activeProfileIndex\":0,"
            "\"shared\":{\"frames\":[{\"name\":\"main\",\"file\":\"/src/train.py\",\"line\":3},"
            "{\"name\":\"step\",\"file\":\"/src/train.py\",\"line\":12},"
            "{\"name\":\"cudaMalloc\"}]},\"profiles\":["
            "{\"type\":\"sampled\",\"name\":\"device 0 (GPU; A)\",\"unit\":\"bytes\","
            "\"startValue\":0,\"endValue\":3072,\"samples\":[[0,1,2],[0,2]],"
            "\"weights\":[2048,1024]},\n"
            "{\"type\":\"sampled\",\"name\":\"pinned host\",\"unit\":\"bytes\",\"startValue\":0,"
            "\"endValue\":512,\"samples\":[[]],\"weights\":[512]}]}\n");
}

}  // namespace
}  // namespace gpumem::report
