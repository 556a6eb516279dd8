// What the trace format holds beyond core/trace.proto's numbers (core/trace_ids.h, generated):
// the format's version, the text of each reason recording stopped, and what the recorder and the
// readers of a compact_ref must compute alike.
#pragma once

#include <cstddef>
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

// compact_ref (core/trace.proto): a writer's table of recent address values, its entry for a
// value, and the last launch's pointers kept per template slot.
inline constexpr int kAddressIndexBits = 7;
inline constexpr size_t kAddressEntries = size_t{1} << kAddressIndexBits;
inline constexpr size_t kLaunchPointerEntries = 256;
inline constexpr size_t AddressIndex(uint64_t value) {
  return static_cast<size_t>(((value ^ (value >> 17)) * 0x9e3779b97f4a7c15ull) >>
                             (64 - kAddressIndexBits));
}

// Signed differences as compact_ref writes them: zigzag, so that small ones of either sign are
// short varints; differences wrap modulo 2^64 on both sides.
inline constexpr uint64_t ZigZag(uint64_t difference) {
  const auto value = static_cast<int64_t>(difference);
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}
inline constexpr int64_t FromZigZag(uint64_t value) {
  return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1);
}

}  // namespace gpumem::proto
