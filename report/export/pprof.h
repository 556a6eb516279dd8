// `gpumem export --format pprof`: the memory profile in pprof's profile.proto
// (github.com/google/pprof, proto/profile.proto), gzip-compressed as pprof stores it on disk, for
// `pprof` and the continuous-profiling stores that take its format (Pyroscope, Parca).
//
// Written by hand in the wire format (proto_encoder.h). Six sample types (type, unit):
//   alloc_objects, alloc_space (count, bytes): every allocation of the run
//     (PlaceUsage::allocated_sites);
//   peak_objects, peak_space: what was live when its place stood at its peak
//     (PlaceUsage::peak_sites: `gpumem report`'s peak section), the default sample type;
//   never_freed_objects, never_freed_space: what was still live at the end (PlaceUsage::live_sites:
//     the report's never-freed section).
// One Sample per (stack, place), stacks symbolized as folded.h's TallyStacks does (Python frames
// spliced in; stacks that read the same are one), location ids innermost first; labels "place"
// (PlaceName) and, for a device, "device" (its ordinal, a number). Each distinct printed frame is
// one Location (its return address, the Mapping of its module) with one Line and its Function;
// each module one Mapping (path, GNU build id in hex, its address range, file_offset such that
// address - memory_start + file_offset is the address in the ELF file's own terms). Strings are
// valid UTF-8 (TextEscape::kUtf8), each once in string_table, whose first entry is "".
// time_nanos: the header's wall clock at the start; duration_nanos: to the footer's end time, or
// to the last memory event when there is no footer.
#ifndef GPUMEM_REPORT_EXPORT_PPROF_H_
#define GPUMEM_REPORT_EXPORT_PPROF_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "report/export/folded.h"
#include "report/replay/replay.h"
#include "report/trace/progress.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// Replays `file` (opened, not read yet) and appends the gzip-compressed profile to `*out`.
// `progress` may be null.
TraceReplay ExportPprof(std::unique_ptr<TraceFile> file, Progress* progress, std::string* out);

// The serialized Profile message (not compressed) of `stacks`, tallied from `trace`.
std::string PprofProfile(const TalliedStacks& stacks, const TraceFile& trace);

// `bytes` as one gzip member (RFC 1952), as zlib writes it.
std::string Gzip(absl::string_view bytes);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_EXPORT_PPROF_H_
