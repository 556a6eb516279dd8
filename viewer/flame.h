// Icicle (flame) graph of memory by stack: stacks added outermost frame first merge along common
// prefixes; each node holds the bytes of the stacks through it (saturating at 2^64 - 1). Pruned for
// the page: nodes below a fraction of the total are dropped (their bytes stay in their parent's
// total, shown as the parent's own width beyond its children).
//
// The tree is at most kMaxFlameDepth nodes deep below its root: the functions that walk it (and
// the page's script) recurse once per level. The symbolizer gives no deeper stack
// (report::kMaxStackFrames); frames past that depth would stay in the deepest node's own width, as
// pruned ones do.
#ifndef GPUMEM_VIEWER_FLAME_H_
#define GPUMEM_VIEWER_FLAME_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "report/stacks/symbolizer.h"

namespace gpumem::viewer {

inline constexpr size_t kMaxFlameDepth = report::kMaxStackFrames;

struct FlameNode {
  std::string name;  // a frame as the text report prints it; "all" at the root
  uint64_t bytes = 0;
  uint64_t count = 0;               // allocations
  std::vector<FlameNode> children;  // largest first after Prune()
};

class FlameGraph {
 public:
  FlameGraph() { root_.name = "all"; }
  // One stack's bytes; `frames` innermost first (as the symbolizer gives them); the outermost
  // kMaxFlameDepth of them.
  void Add(const std::vector<std::string>& frames, uint64_t bytes, uint64_t count);
  // Drops every node below `min_fraction` of the root's bytes, sorts children largest first, and
  // returns the tree.
  FlameNode Pruned(double min_fraction) const;
  const FlameNode& root() const { return root_; }

 private:
  FlameNode root_;
};

// Nodes in the tree, the root included.
size_t CountNodes(const FlameNode& node);

}  // namespace gpumem::viewer

#endif  // GPUMEM_VIEWER_FLAME_H_
