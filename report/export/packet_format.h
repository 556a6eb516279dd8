// One readable line per trace packet, for `gpumem dump`. See report/README.md for the format.
#ifndef GPUMEM_REPORT_EXPORT_PACKET_FORMAT_H_
#define GPUMEM_REPORT_EXPORT_PACKET_FORMAT_H_

#include <string>

#include "core/trace.pb.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// E.g. "#12 memory seq=5 t=1.234ms tid=77 dev=0 cudaMalloc alloc device size=1048576
// addr=0x7f3a00000000 stream=0 result=0 stack=3" (one line, no newline). Times are relative to the
// header's start time. With a symbolizer, stack frames print as "function (file:line)" joined by
// " <- " (innermost first); without, as addresses.
std::string FormatPacket(const PacketPosition& position, const TracePacket& packet,
                         const TraceFile& trace, Symbolizer* symbolizer);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_EXPORT_PACKET_FORMAT_H_
