// `gpumem whatif`: would a recorded run have fitted on a device of a given size, under each of
// PyTorch's allocators? The trace's tensors replayed through the allocator models
// (report/allocator/allocator_replay.h) at the limit and with none: per allocator and device, fits
// or not, where it ran out and what was live then by call site, what the allocator reserved at its
// peak, and the smallest device memory on which it fits. Written as text or as one JSON object
// (schema: report/whatif.schema.json).
#ifndef GPUMEM_REPORT_ALLOCATOR_WHATIF_H_
#define GPUMEM_REPORT_ALLOCATOR_WHATIF_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "report/allocator/allocator_replay.h"
#include "report/stacks/call_sites.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// What the limit means, in the output.
inline constexpr char kWhatifLimitNote[] =
    "the allocator's limit (what torch.cuda.set_per_process_memory_fraction x total memory caps), "
    "not counting the CUDA context or memory other libraries allocate directly";

struct WhatifRequest {
  uint64_t device_memory = 0;
  std::vector<AllocatorKind> kinds;  // empty: all that apply to the trace
  size_t top = 10;                   // call sites shown at an out-of-memory error (0: all)
};

// One allocator's answers, per device.
struct AllocatorAnswers {
  AllocatorKind kind = AllocatorKind::kNative;
  AllocatorReplayResult limited;
  AllocatorReplayResult unlimited;
  std::vector<uint64_t> smallest_fit;  // per device of `unlimited`

  bool Fits() const {
    for (const ModelledDevice& device : limited.devices) {
      if (device.oom) return false;
    }
    return true;
  }
  // The limited replay's device matching `unlimited.devices[i]` (nullptr: it never allocated).
  const ModelledDevice* LimitedOf(size_t i) const {
    for (const ModelledDevice& device : limited.devices) {
      if (device.device == unlimited.devices[i].device) return &device;
    }
    return nullptr;
  }
};

// Each allocator's answers for the trace at `path`, given its replays at the limit (`limited`,
// one per kAllAllocators, in that order), or the error line (a trace no model can replay, an
// allocator that does not apply to it, a file that cannot be read again).
absl::StatusOr<std::vector<AllocatorAnswers>> AnswerWhatif(
    const std::string& path, std::vector<AllocatorReplayResult> limited,
    const WhatifRequest& request);

std::string WhatifText(const std::string& path, const std::vector<AllocatorAnswers>& all,
                       const TraceFile& trace, CallSites& sites, const WhatifRequest& request);
std::string WhatifJson(const std::string& path, const std::vector<AllocatorAnswers>& all,
                       const TraceFile& trace, CallSites& sites, const WhatifRequest& request);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ALLOCATOR_WHATIF_H_
