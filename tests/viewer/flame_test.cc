// The flame graph: stacks merge outermost frame first, and pruning drops only small nodes.
#include "viewer/flame.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpumem::viewer {
namespace {

TEST(FlameTest, MergesFromTheOutermostFrameAndPrunesSmallNodes) {
  FlameGraph graph;
  // Innermost first, as the symbolizer gives them.
  graph.Add({"alloc_a", "work", "main"}, 900, 9);
  graph.Add({"alloc_b", "work", "main"}, 95, 1);
  graph.Add({"alloc_c", "other", "main"}, 5, 5);
  const FlameNode root = graph.Pruned(0.01);  // below 10 bytes goes
  EXPECT_EQ(root.name, "all");
  EXPECT_EQ(root.bytes, 1000u);
  EXPECT_EQ(root.count, 15u);
  ASSERT_EQ(root.children.size(), 1u);
  const FlameNode& main = root.children[0];
  EXPECT_EQ(main.name, "main");
  EXPECT_EQ(main.bytes, 1000u);  // the pruned branch still counts in its parent
  ASSERT_EQ(main.children.size(), 1u);
  EXPECT_EQ(main.children[0].name, "work");
  ASSERT_EQ(main.children[0].children.size(), 2u);
  EXPECT_EQ(main.children[0].children[0].name, "alloc_a");  // largest first
  EXPECT_EQ(main.children[0].children[1].name, "alloc_b");
  EXPECT_EQ(CountNodes(root), 5u);
  EXPECT_EQ(CountNodes(graph.Pruned(0.0)), 7u);  // nothing pruned
}

TEST(FlameTest, PruningBoundsTheNodes) {
  FlameGraph graph;
  for (int i = 0; i < 5000; ++i) {
    graph.Add({"leaf" + std::to_string(i), "mid" + std::to_string(i % 50), "main"}, 1 + i % 3, 1);
  }
  const FlameNode root = graph.Pruned(0.005);
  // Each kept node holds at least 0.5% of the total: at most 200 per level.
  EXPECT_LE(CountNodes(root), 1u + 1u + 200u + 200u);
  EXPECT_EQ(root.children[0].children.size(), 50u);            // each mid holds 2% of the total
  EXPECT_TRUE(root.children[0].children[0].children.empty());  // no leaf holds 0.5%
}

// A stack deeper than kMaxFlameDepth (the symbolizer gives none, a direct caller might) stops at
// that depth, its bytes in the deepest node kept: pruning, copying and counting the tree recurse
// once per level, which 50,000 levels overflowed.
TEST(FlameTest, StacksDeeperThanTheLimitStopAtIt) {
  FlameGraph graph;
  std::vector<std::string> frames;
  for (int i = 0; i < 50000; ++i) frames.push_back("f" + std::to_string(i % 7));
  graph.Add(frames, 4096, 1);
  graph.Add({"alloc", "main"}, 1024, 1);
  const FlameNode root = graph.Pruned(0.0);
  EXPECT_EQ(root.bytes, 5120u);
  EXPECT_EQ(CountNodes(root), 1 + kMaxFlameDepth + 2);  // the root, the deep chain, main, alloc
  const FlameNode* node = &root;
  size_t depth = 0;
  while (!node->children.empty()) {
    node = &node->children.front();  // the deep stack's, the larger
    ++depth;
  }
  EXPECT_EQ(depth, kMaxFlameDepth);
  EXPECT_EQ(node->bytes, 4096u);
  EXPECT_EQ(node->name, "f" + std::to_string((50000 - kMaxFlameDepth) % 7));
}

}  // namespace
}  // namespace gpumem::viewer
