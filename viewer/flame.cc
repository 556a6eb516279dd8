#include "viewer/flame.h"

#include <algorithm>
#include <cmath>

#include "report/format/sizes.h"

namespace gpumem::viewer {

namespace {

void AddTo(FlameNode* node, uint64_t bytes, uint64_t count) {
  node->bytes = report::SaturatingAdd(node->bytes, bytes);
  node->count += count;
}

}  // namespace

void FlameGraph::Add(const std::vector<std::string>& frames, uint64_t bytes, uint64_t count) {
  FlameNode* node = &root_;
  AddTo(node, bytes, count);
  const size_t depth = std::min(frames.size(), kMaxFlameDepth);
  for (auto frame = frames.rbegin(); frame != frames.rbegin() + depth; ++frame) {
    auto child = std::find_if(node->children.begin(), node->children.end(),
                              [&](const FlameNode& c) { return c.name == *frame; });
    if (child == node->children.end()) {
      node->children.push_back(FlameNode{*frame, 0, 0, {}});
      child = node->children.end() - 1;
    }
    node = &*child;
    AddTo(node, bytes, count);
  }
}

namespace {

void Prune(FlameNode& node, uint64_t min_bytes) {
  std::erase_if(node.children, [&](const FlameNode& c) { return c.bytes < min_bytes; });
  std::sort(node.children.begin(), node.children.end(), [](const FlameNode& a, const FlameNode& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.name < b.name;
  });
  for (FlameNode& child : node.children) Prune(child, min_bytes);
}

}  // namespace

FlameNode FlameGraph::Pruned(double min_fraction) const {
  FlameNode copy = root_;
  const uint64_t min_bytes = std::max<uint64_t>(
      1, report::RoundToBytes(std::ceil(static_cast<double>(root_.bytes) * min_fraction)));
  Prune(copy, min_bytes);
  return copy;
}

size_t CountNodes(const FlameNode& node) {
  size_t count = 1;
  for (const FlameNode& child : node.children) count += CountNodes(child);
  return count;
}

}  // namespace gpumem::viewer
