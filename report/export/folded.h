// `gpumem export --format folded|speedscope`: memory by stack, for flame graphs.
//
// One piece tallies the stacks of every place (TallyStacks: every allocation, what was live at the
// place's peak, what was never freed), shared with pprof (pprof.h); WeighStacks picks one weight
// of it for both formats here: with --what peak, the bytes each stack held when its place
// (device, pinned host) stood at its peak (report/replay/replay.h: PlaceUsage::peak_sites, what
// `gpumem report` lists at the peak); with --what leaks, the bytes each stack still held at the
// end, never freed. Stacks are symbolized once each, Python frames spliced in
// (report/stacks/symbolizer.h); stacks that symbolize the same are one. So the weights of a place
// add up to its peak (or its never-freed bytes) in `gpumem report --json`.
//
// - folded (collapsed stacks, for flamegraph.pl, speedscope, inferno): one line per stack,
//   "PLACE;outermost;...;innermost BYTES", PLACE being the place's name ("device 0 (NVIDIA H100
//   80GB HBM3)", "pinned host"), so the places of one trace stay apart. Frames read as `gpumem
//   report` prints them; a ';' inside a frame becomes ',' and a line break a space
//   (FoldedFrameName), the only characters the format reserves. A stack without frames is
//   "(no stack recorded)".
// - speedscope (https://www.speedscope.app/file-format-schema.json): the frames in one shared
//   table ({"name", "file", "line"}), one "sampled" profile per place, unit "bytes", each sample a
//   stack of frame indices outermost first with its bytes as weight.
#ifndef GPUMEM_REPORT_EXPORT_FOLDED_H_
#define GPUMEM_REPORT_EXPORT_FOLDED_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "report/replay/event_counts.h"
#include "report/replay/replay.h"
#include "report/trace/progress.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

enum class StackWeight { kPeak, kLeaks };

// One frame as the exports show it: one entry per distinct printed frame.
struct FrameInfo {
  std::string name;  // as `gpumem report` prints the frame, made safe by FoldedFrameName
  std::string file;  // empty when unknown
  int line = 0;
  std::string function;  // the function alone (Frame::function); empty when not resolved
  std::string module;    // Frame::module: empty for Python frames and addresses outside modules
  uint64_t pc = 0;       // the recorded return address (0 for Python frames)
  uint64_t module_offset = 0;
};

// What one stack (as symbolized: stacks that read the same are one) did on one place.
struct StackTallies {
  Tally allocated;    // every allocation (PlaceUsage::allocated_sites)
  Tally at_peak;      // live when the place stood at its peak (PlaceUsage::peak_sites)
  Tally never_freed;  // still live at the end (PlaceUsage::live_sites)
};

// Every stack of every place with its three tallies: what folded, speedscope and pprof share.
struct TalliedStacks {
  struct Place {
    int32_t place = 0;
    std::string name;  // PlaceName()
    // Frame indices outermost first ("(no stack recorded)" for a stack without frames).
    std::map<std::vector<uint32_t>, StackTallies> stacks;
  };
  std::vector<FrameInfo> frames;
  std::vector<Place> places;   // as Replay::Places orders them
  uint64_t last_event_ns = 0;  // the latest memory event's CLOCK_MONOTONIC timestamp
};

// Replays `file` (opened, not read yet) and tallies its stacks. `progress` may be null.
TraceReplay TallyStacks(std::unique_ptr<TraceFile> file, Progress* progress, TalliedStacks* out);

struct WeightedStacks {
  using FrameInfo = report::FrameInfo;
  struct Sample {
    std::vector<uint32_t> frames;  // indices into `frames`, outermost first
    uint64_t bytes = 0;
  };
  struct Profile {
    int32_t place = 0;
    std::string name;  // PlaceName()
    uint64_t total_bytes = 0;
    std::vector<Sample> samples;  // largest first
  };
  std::vector<FrameInfo> frames;
  std::vector<Profile> profiles;  // places with something to show, as Replay::Places orders them
};

// Replays `file` (opened, not read yet) and weighs its stacks. `progress` may be null.
TraceReplay WeighStacks(std::unique_ptr<TraceFile> file, StackWeight what, Progress* progress,
                        WeightedStacks* out);

// `name` with ';' as ',' and line breaks as spaces.
std::string FoldedFrameName(absl::string_view name);

std::string FoldedText(const WeightedStacks& stacks);
// `name`: the profile's file name, shown by speedscope.
std::string SpeedscopeJson(const WeightedStacks& stacks, absl::string_view name);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_EXPORT_FOLDED_H_
