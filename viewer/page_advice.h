// The page's "What would lower the peak" section: `gpumem advise`'s answer for the one trace
// (report/advise/advice.h), reduced to the figures and lines its text report shows: the verdict,
// each remedy (rank, change, modelled peak after it and the saving, fits or not, modelled or
// extrapolated, the call site's user and via lines and the line that keeps it), what a second
// recording adds, and the notes. A trace advise refuses gives the reason instead.
#ifndef GPUMEM_VIEWER_PAGE_ADVICE_H_
#define GPUMEM_VIEWER_PAGE_ADVICE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::viewer {

struct PageRemedy {
  size_t rank = 0;     // 1: the largest saving
  std::string kind;    // report::RemedyKindName
  std::string change;  // what to change, in the user's terms
  std::string allocator;
  uint64_t peak = 0;    // modelled reserved peak after the change
  uint64_t saving = 0;  // the run's peak less `peak`
  bool fits = false;
  bool extrapolated = false;              // from two batch sizes, not modelled from the tensors
  std::string site_heading;               // "4.00 MiB more each iteration, allocated at:"; or ""
  std::vector<std::string> site_lines;    // the user's line and the via line
  std::string holder_heading;             // "kept by Python references ... at:"; or ""
  std::vector<std::string> holder_lines;  // where Python keeps them; empty when not known
};

struct PageAdvice {
  std::string refused;  // why advise cannot answer for this trace; "" when it did
  uint64_t device_memory = 0;
  bool device_memory_recorded = false;  // the recorded device's total, not --device-memory
  std::string allocator;                // the run's (report::AllocatorKindName)
  uint64_t peak = 0;                    // the run's modelled reserved peak
  bool fits = false;
  std::vector<std::string> verdict;           // the text report's device memory and run lines
  std::string heading;                        // the text report's line above the remedies
  std::vector<PageRemedy> remedies;           // ranked
  std::vector<std::string> second_recording;  // what it adds, then the commands
  std::vector<std::string> notes;             // what limits the answer
};

// Advise on the trace at `path` against `device_memory` (nullopt: the recorded device's total), as
// `gpumem advise TRACE` does. Never fails: what advise would refuse is `refused`.
PageAdvice BuildPageAdvice(const std::string& path, std::optional<uint64_t> device_memory);

}  // namespace gpumem::viewer

#endif  // GPUMEM_VIEWER_PAGE_ADVICE_H_
