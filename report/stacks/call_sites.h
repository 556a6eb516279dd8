// Call sites, shared by the commands that list what was live by call site (`gpumem report`,
// `gpumem check`, `gpumem whatif`): stacks grouped as --group-by says, symbolized once each, and
// printed the same way in text and JSON.
#ifndef GPUMEM_REPORT_STACKS_CALL_SITES_H_
#define GPUMEM_REPORT_STACKS_CALL_SITES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "report/format/printable.h"
#include "report/replay/event_counts.h"
#include "report/replay/replay.h"
#include "report/stacks/memory_holders.h"
#include "report/stacks/python_stacks.h"
#include "report/stacks/symbolizer.h"
#include "report/stacks/user_frames.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// Maps a stack id to the stack id that stands for its call site (stacks that symbolize the same
// share one); null: every stack is its own call site.
using CallSiteOf = std::function<uint64_t(uint64_t stack_id)>;

// One call site: the symbolized stack and what it held.
struct Site {
  std::vector<Frame> frames;  // as printed: the Python frames alone with --python-only
  Tally tally;
  const MemoryHolder* holder = nullptr;  // an allocator or library holds it, not the program
  bool for_graph = false;                // allocated during a stream capture, for a CUDA graph
  SiteLabel label;                       // its user frame and via line (from all its frames)
};

// Call sites for the analyses: stacks with the same CallSiteKey under --group-by are one call site,
// named by the first such stack id seen; printed as --stacks says (StackStyle).
class CallSites {
 public:
  CallSites(Symbolizer* symbolizer, GroupBy group_by, bool python_only,
            StackStyle style = StackStyle::kShort)
      : symbolizer_(symbolizer), group_by_(group_by), python_only_(python_only), style_(style) {}

  StackStyle style() const { return style_; }
  GroupBy group_by() const { return group_by_; }

  // The whole stack, Python frames spliced in.
  const std::vector<Frame>& Frames(uint64_t stack_id) {
    auto it = frames_.find(stack_id);
    if (it == frames_.end()) it = frames_.emplace(stack_id, symbolizer_->Symbolize(stack_id)).first;
    return it->second;
  }
  // The frames to print: only the Python ones with --python-only.
  std::vector<Frame> Shown(uint64_t stack_id) { return ShownOf(Frames(stack_id)); }
  std::vector<Frame> ShownOf(const std::vector<Frame>& frames) const {
    return python_only_ ? PythonOnly(frames) : frames;
  }
  std::string Key(uint64_t stack_id) { return CallSiteKey(Frames(stack_id), group_by_); }
  uint64_t Of(uint64_t stack_id) {
    return by_group_.Of(stack_id, [&] { return Key(stack_id); });
  }
  // Stacks that symbolize to the same frames are one allocation point, whatever --group-by says
  // (what the growth analysis tells iterations by).
  uint64_t StackSiteOf(uint64_t stack_id) {
    return by_stack_.Of(stack_id, [&] { return StackKey(stack_id); });
  }
  // The text StackSiteOf groups by: the whole stack, symbolized, with no address that changes from
  // one run of a program to the next (so two runs' allocation points can be matched).
  std::string StackKey(uint64_t stack_id) { return CallSiteKey(Frames(stack_id), GroupBy::kStack); }
  // Kernels' call sites: stacks with Python frames merged as Of() does under --group-by user or
  // python; every other stack its own, as the kernel analysis counts them.
  uint64_t KernelSiteOf(uint64_t stack_id) {
    if (group_by_ == GroupBy::kStack || !HasPythonFrames(Frames(stack_id))) return stack_id;
    return Of(stack_id);
  }
  bool AnyFunctionContains(uint64_t stack_id, absl::string_view text) {
    for (const Frame& frame : Frames(stack_id)) {
      if (absl::StrContains(frame.function, text)) return true;
    }
    return false;
  }
  // The stacks of stream-ordered allocations (TraceReplay::stream_ordered_stacks), once the trace
  // was replayed: their labels never name a caching allocator's segment (a per-tensor
  // cudaMallocAsync is none).
  void SetStreamOrderedStacks(absl::flat_hash_set<uint64_t> stacks) {
    stream_ordered_ = std::move(stacks);
  }
  // The library or allocator that holds a stack's memory (FindMemoryHolder), nullptr when the
  // program's own code does.
  const MemoryHolder* HolderOf(uint64_t stack_id);
  // The label of a stack (its holder found as FindMemoryHolder does).
  SiteLabel LabelOf(uint64_t stack_id);
  // The line that names the call site (SiteLabel::first_line: the user's line), as printed.
  std::string Label(uint64_t stack_id) { return Printable(LabelOf(stack_id).first_line); }
  // The lines that stand for a stack under --stacks (SiteLines), and the same appended to `out`,
  // each after `indent`. A launch's stack holds no memory: its via line names the library.
  std::vector<std::string> Lines(uint64_t stack_id);
  std::vector<std::string> LaunchLines(uint64_t stack_id);
  void AppendStackText(uint64_t stack_id, std::string* out, absl::string_view indent = "      ");
  // One stack as a call site of its own, holding `tally`.
  Site SiteOf(uint64_t stack_id, const Tally& tally);

 private:
  Symbolizer* symbolizer_;
  GroupBy group_by_;
  bool python_only_;
  StackStyle style_;
  absl::flat_hash_map<uint64_t, std::vector<Frame>> frames_;
  // Stacks grouped by a key text, each group named by the first stack id seen with its key.
  class KeyedSites {
   public:
    template <typename KeyFn>
    uint64_t Of(uint64_t stack_id, KeyFn key) {
      auto it = site_of_.find(stack_id);
      if (it != site_of_.end()) return it->second;
      const uint64_t site = by_key_.try_emplace(key(), stack_id).first->second;
      site_of_.emplace(stack_id, site);
      return site;
    }

   private:
    absl::flat_hash_map<uint64_t, uint64_t> site_of_;
    absl::flat_hash_map<std::string, uint64_t> by_key_;
  };
  KeyedSites by_group_;  // as --group-by says
  KeyedSites by_stack_;  // whole stacks
  absl::flat_hash_set<uint64_t> stream_ordered_;
};

// Per-stack tallies grouped by call site (CallSites: the user's frame, the Python part of the
// stack or the whole stack, as --group-by says; under `user`, stacks without a frame of the user's
// by the library and via line they print), largest first. Stacks an allocator or library
// holds stay apart from the program's own at the same call site. A site shows the stack of its
// largest member, and is marked for_graph when one of its stacks is in `graph_stacks`
// (TraceReplay::graph_stacks).
std::vector<Site> GroupSites(const std::vector<SiteTally>& tallies, CallSites& call_sites,
                             const absl::flat_hash_set<uint64_t>& stream_ordered_stacks,
                             const absl::flat_hash_set<uint64_t>* graph_stacks = nullptr);

// The first `top` sites (0: all) as "  SIZE  SHARE%  N allocations", then their lines in `style`
// (SiteLines); the rest summed in one line. `share_of` 0: no share column.
void AppendSitesText(const std::vector<Site>& sites, size_t top, uint64_t share_of,
                     StackStyle style, std::string* out);

// The frames and sites as JSON (schema: report/report.schema.json, Frame and Site): every frame
// as symbolized; a site adds its user_frame and via line.
std::string JsonFrame(const Frame& frame);
std::string JsonFrames(const std::vector<Frame>& frames);
std::string JsonSites(const std::vector<Site>& sites, size_t top, uint64_t share_of);
// A label's JSON fields, to follow a site's or a stack's "frames": `,"user_frame":…,"via":…`.
std::string JsonLabelFields(const SiteLabel& label);

// "56.00 MiB (58720256 bytes)".
std::string SizeText(uint64_t bytes);
// A CLOCK_MONOTONIC timestamp since the trace's start (0 before it): in ms, and in ns.
double MillisecondsSinceStart(uint64_t timestamp_ns, const TraceFile& trace);
uint64_t SinceStart(uint64_t timestamp_ns, const TraceFile& trace);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_STACKS_CALL_SITES_H_
