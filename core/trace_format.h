// What the trace format holds beyond core/trace.proto's numbers (core/trace_ids.h, generated):
// the format's version and the text of each reason recording stopped.
#pragma once

#include <cstdint>

#include "core/trace_ids.h"

namespace gpumem::proto {

// Why recording stopped, for the user: the recorder's warning and the reports say the same.
inline const char* RecordingStopText(RecordingStop reason) {
  switch (reason) {
    case RecordingStop::kNone:
      return "it did not stop";
    case RecordingStop::kDiskFull:
      return "no space left on the file system";
    case RecordingStop::kSizeLimit:
      return "the trace reached the file size limit (ulimit -f)";
    case RecordingStop::kDescriptorLost:
      return "the program closed or replaced the trace's file descriptor";
    case RecordingStop::kWriteFailed:
      return "the trace file could not grow";
    case RecordingStop::kAddressSpaceFull:
      return "the trace filled the address space reserved for it";
  }
  return "a reason this gpumem does not know";
}

// Header.format_version (2: EventRef; 3: compact_ref, addresses out of the templates)
inline constexpr uint32_t kFormatVersion = 3;
// What a recorder writing every event in full (GPUMEM_EVENT_REFS=0) writes: such a trace is
// exactly a format-1 trace, which older readers read.
inline constexpr uint32_t kFormatVersionWithoutRefs = 1;

}  // namespace gpumem::proto
