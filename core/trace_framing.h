// How a trace file frames its packets, at the byte level: what core/trace_reader.h reads and what
// the recorder checks before it removes a stale trace (a file that does not begin like a trace is
// never removed). libc only, header only: the preload library uses it too.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpumem::framing {

// `Trace.packet` is field 1, wire type 2 (length-delimited): tag byte (1 << 3) | 2.
// `TracePacket.header` has the same field number and wire type, so it is the same byte.
inline constexpr uint8_t kPacketTag = 0x0A;
inline constexpr uint8_t kHeaderTag = 0x0A;
// `Trace.event_ref` (format 2) is field 2, wire type 2: (2 << 3) | 2.
inline constexpr uint8_t kEventRefTag = 0x12;
// `Trace.compact_ref` (format 3) is field 3, wire type 2: (3 << 3) | 2.
inline constexpr uint8_t kCompactRefTag = 0x1A;

// Whether `byte` is the tag of a top-level field of `Trace`: a packet or an event reference.
inline bool IsFrameTag(uint8_t byte) {
  return byte == kPacketTag || byte == kEventRefTag || byte == kCompactRefTag;
}
inline constexpr size_t kMaxVarintBytes = 10;

enum class VarintResult { kOk, kTruncated, kTooLong };

// Decodes a varint from data[0, size). *bytes_used is its encoded length on success.
inline VarintResult DecodeVarint(const char* data, size_t size, uint64_t* value,
                                 size_t* bytes_used) {
  uint64_t result = 0;
  for (size_t i = 0; i < kMaxVarintBytes; ++i) {
    if (i >= size) return VarintResult::kTruncated;
    const uint8_t byte = static_cast<uint8_t>(data[i]);
    result |= static_cast<uint64_t>(byte & 0x7F) << (7 * i);
    if ((byte & 0x80) == 0) {
      // The tenth byte may only carry the top bit of a 64-bit value.
      if (i == kMaxVarintBytes - 1 && byte > 1) return VarintResult::kTooLong;
      *value = result;
      *bytes_used = i + 1;
      return VarintResult::kOk;
    }
  }
  return VarintResult::kTooLong;
}

// Whether `packet` (possibly only its first bytes, when the file was cut) starts like a
// TracePacket holding a Header: the header tag, then a length that fits the declared packet.
inline bool StartsLikeHeader(const char* packet, size_t available, uint64_t declared_length) {
  if (available < 2 || static_cast<uint8_t>(packet[0]) != kHeaderTag) return false;
  uint64_t header_length = 0;
  size_t varint_bytes = 0;
  if (DecodeVarint(packet + 1, available - 1, &header_length, &varint_bytes) != VarintResult::kOk) {
    return false;
  }
  return 1 + varint_bytes + header_length <= declared_length;
}

// Whether a file whose first bytes are data[0, size) begins with a gpumem trace's first packet:
// the packet tag, its length, and a packet that starts like a Header.
inline bool BeginsWithHeaderPacket(const char* data, size_t size) {
  if (size < 2 || static_cast<uint8_t>(data[0]) != kPacketTag) return false;
  uint64_t length = 0;
  size_t varint_bytes = 0;
  if (DecodeVarint(data + 1, size - 1, &length, &varint_bytes) != VarintResult::kOk) return false;
  const size_t prefix = 1 + varint_bytes;
  return size > prefix && StartsLikeHeader(data + prefix, size - prefix, length);
}

}  // namespace gpumem::framing
