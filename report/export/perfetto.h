// `gpumem export --format perfetto`: the timeline (timeline.h) as Perfetto's own protobuf trace
// (a `Trace`: TracePackets of TrackEvent data, protos/perfetto/trace/ in Perfetto's repository),
// which ui.perfetto.dev and Perfetto's trace processor load at sizes where JSON
// (chrome_json.h) fails. Written by hand in the wire format (proto_encoder.h), packet by packet.
//
// One packet sequence (trusted_packet_sequence_id 1): its first packet clears the incremental
// state (SEQ_INCREMENTAL_STATE_CLEARED), every later one needs it (SEQ_NEEDS_INCREMENTAL_STATE).
// Event names, debug annotation names and string values (a stack, a kind) are interned
// (InternedData) in the packet that first uses them, so a stack is written once however many events
// it made; each track is described (TrackDescriptor) in a packet before its first event.
// Timestamps: nanoseconds since the trace's start.
// - a process track per place (pid TimelinePid(place), named PlaceName), holding:
// - counter tracks "live bytes" and "pool reserved bytes" (CounterDescriptor, unit bytes),
//   TYPE_COUNTER events;
// - a track "memory": each allocation, free and failed allocation as a TYPE_INSTANT event named
//   "alloc cudaMalloc" ..., annotations size, address, stream, seq, kind (result, free_bytes for
//   a failure) and stack (the frames as `gpumem report` prints them, innermost first, one a line);
// - a track per stream ("stream 0x..."): each kernel launch a TYPE_SLICE_BEGIN and its
//   TYPE_SLICE_END, annotations time ("gpu" or "host launch"), seq, correlation_id.
// - a track "gpumem" with one instant at 0, "trace", whose annotations say what the JSON's
//   metadata says (host, pid, command_line, start_time_unix_ns, memory_events, launches,
//   launches_with_gpu_times, complete).
#ifndef GPUMEM_REPORT_EXPORT_PERFETTO_H_
#define GPUMEM_REPORT_EXPORT_PERFETTO_H_

#include <memory>
#include <string>

#include "report/export/chunked_output.h"
#include "report/replay/replay.h"
#include "report/trace/progress.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// Replays `file` (opened, not read yet) and writes the trace to `out` packet by packet. `progress`
// may be null.
TraceReplay ExportPerfetto(std::unique_ptr<TraceFile> file, Progress* progress, ChunkedOutput* out);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_EXPORT_PERFETTO_H_
