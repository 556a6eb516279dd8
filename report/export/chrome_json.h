// `gpumem export --format chrome-json` (also `perfetto-json`): the timeline (timeline.h) as
// Chrome's Trace Event Format (JSON), which ui.perfetto.dev and chrome://tracing open:
// {"traceEvents": [...], "displayTimeUnit": "ns", "metadata": {...}}. Times (`ts`, `dur`) are
// microseconds since the trace's start.
//
// One process per place (pid TimelinePid(place)), named by "M" process_name events:
// - counters ("ph":"C") "live bytes" and "pool reserved bytes" with args {"bytes": N};
// - on thread 1 ("memory"), each allocation, free and failed allocation as an instant event
//   ("ph":"i", "s":"t") named "alloc cudaMalloc" ..., args: size, address, stream, seq, kind and
//   the stack (frames as `gpumem report` prints them, innermost first);
// - kernel launches as slices ("ph":"X") on one thread per stream (tid 2, 3, ... named "stream
//   0x..."); args "time" says which times they have ("gpu" or "host launch").
// For large traces `--format perfetto` (perfetto.h) writes the same far smaller.
#ifndef GPUMEM_REPORT_EXPORT_CHROME_JSON_H_
#define GPUMEM_REPORT_EXPORT_CHROME_JSON_H_

#include <memory>
#include <string>

#include "report/export/chunked_output.h"
#include "report/replay/replay.h"
#include "report/trace/progress.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// Replays `file` (opened, not read yet) and writes the JSON to `out` event by event. `progress` may
// be null.
TraceReplay ExportChromeJson(std::unique_ptr<TraceFile> file, Progress* progress,
                             ChunkedOutput* out);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_EXPORT_CHROME_JSON_H_
