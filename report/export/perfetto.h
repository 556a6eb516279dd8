// `gpumem export --format perfetto`: a trace as Chrome's Trace Event Format (JSON), which
// ui.perfetto.dev and chrome://tracing open: {"traceEvents": [...], "displayTimeUnit": "ns",
// "metadata": {...}}. Times (`ts`, `dur`) are microseconds since the trace's start.
//
// One process track per place (pid = device + 1; 100000 for memory whose device is unknown,
// 100001 for pinned host memory), named by "M" process_name events:
// - a counter ("ph":"C") "live bytes" with args {"bytes": N} after every event that changes the
//   place's live memory, as `gpumem report` replays it (report/replay/replay.h): its highest value
//   is the report's peak for that place. Under PyTorch's caching allocator gpumem sees its
//   segments, so this is PyTorch's reserved memory there.
// - a counter "pool reserved bytes" where the trace has the memory pools' reserved sizes
//   (PoolUsage packets; report/trace/pool_sizes.h), at their own timestamps.
// - on thread 1 ("memory"), each allocation, free and failed allocation as an instant event
//   ("ph":"i", "s":"t") named "alloc cudaMalloc" ..., args: size, address, stream, seq and the
//   stack (frames as `gpumem report` prints them, innermost first).
// - kernel launches as slices ("ph":"X") on one thread per stream (tid 2, 3, ... named "stream
//   0x..."): at the GPU's start and end when the trace has them (GPUMEM_KERNEL_TIMES=1, CUPTI's
//   KernelTiming joined by correlation id), else at the host's launch time with at most 1 µs
//   (less when the next launch on the stream comes sooner, so slices never overlap); args "time"
//   says which ("gpu" or "host launch").
// Launches are held until the end of the trace (their GPU times come later in the file).
#ifndef GPUMEM_REPORT_EXPORT_PERFETTO_H_
#define GPUMEM_REPORT_EXPORT_PERFETTO_H_

#include <memory>
#include <string>

#include "report/replay/replay.h"
#include "report/trace/progress.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

inline constexpr int64_t kUnknownDevicePid = 100000;
inline constexpr int64_t kPinnedHostPid = 100001;

// Replays `file` (opened, not read yet) and appends the JSON to `*out`. `progress` may be null.
TraceReplay ExportPerfetto(std::unique_ptr<TraceFile> file, Progress* progress, std::string* out);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_EXPORT_PERFETTO_H_
