// The timeline of one trace, as the timeline exports show it (chrome_json.h: Chrome's Trace Event
// JSON; perfetto.h: Perfetto's protobuf trace), from one replay in seq order
// (report/replay/replay.h), told to a TimelineWriter as it goes:
// - each place's live bytes (counter "live bytes") after every event that changes them: its
//   highest value is `gpumem report`'s peak for that place. Under PyTorch's caching allocator
//   gpumem sees its segments, so this is PyTorch's reserved memory there.
// - the memory pools' reserved bytes (counter "pool reserved bytes") where the trace has them
//   (PoolUsage packets; report/trace/pool_sizes.h), at their own timestamps.
// - each allocation, free and failed allocation (not VMM reservations: address space, not memory).
// - kernel launches per (device, stream), at the end (their GPU times come later in the file): at
//   the GPU's start and end when the trace has them (GPUMEM_KERNEL_TIMES=1, CUPTI's KernelTiming
//   joined by correlation id), else at the host's launch time with at most 1 µs (less when the
//   next launch on the stream comes sooner, so slices never overlap).
// Times are nanoseconds since the trace's start (the header's start times; CUPTI's CLOCK_REALTIME
// by start_time_unix_ns, the rest CLOCK_MONOTONIC by start_time_mono_ns); earlier is 0.
#ifndef GPUMEM_REPORT_EXPORT_TIMELINE_H_
#define GPUMEM_REPORT_EXPORT_TIMELINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "report/replay/replay.h"
#include "report/trace/progress.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// A place as a process of the timeline: device + 1; these two for the others.
inline constexpr int64_t kUnknownDevicePid = 100000;
inline constexpr int64_t kPinnedHostPid = 100001;
int64_t TimelinePid(int32_t place);

inline constexpr char kLiveBytesCounter[] = "live bytes";
inline constexpr char kPoolReservedCounter[] = "pool reserved bytes";

struct TimelineLaunch {
  uint64_t ns = 0;
  uint64_t duration_ns = 0;
  bool gpu_time = false;  // the GPU's times, else the host's launch time
  uint64_t seq = 0;
  uint64_t correlation_id = 0;
  // The kernel's, demangled (report/analysis/kernels.h): one string per kernel, kept by the
  // replay for every launch of it (a trace holds millions of launches of a few hundred kernels).
  const std::string* name = nullptr;
};

// What the whole trace held, for the exports' metadata.
struct TimelineTotals {
  uint64_t memory_events = 0;
  uint64_t launches = 0;
  uint64_t launches_with_gpu_times = 0;
  bool complete = false;  // the trace was read whole (not damaged)
};

class TimelineWriter {
 public:
  virtual ~TimelineWriter() = default;
  // Counter `name` of `place` is `bytes` from `ns` on.
  virtual void Counter(int32_t place, uint64_t ns, const char* name, uint64_t bytes) = 0;
  // An allocation, free or failed allocation counted on `place` (a free: that of what it freed);
  // `frames`: its stack as `gpumem report` prints each frame, innermost first (empty: none).
  virtual void Memory(int32_t place, uint64_t ns, const MemoryEvent& event,
                      const std::vector<std::string>& frames) = 0;
  // The launches on one stream of `place`, in time order, never overlapping unless their GPU
  // times do. Comes once per (place, stream), after every Counter and Memory.
  virtual void Stream(int32_t place, uint64_t stream,
                      const std::vector<TimelineLaunch>& launches) = 0;
  // The end of the trace.
  virtual void Finish(const TimelineTotals& totals) = 0;
};

// Replays `file` (opened, not read yet) into `writer`. `progress` may be null.
TraceReplay ReplayTimeline(std::unique_ptr<TraceFile> file, Progress* progress,
                           TimelineWriter* writer);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_EXPORT_TIMELINE_H_
