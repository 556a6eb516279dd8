// Protobuf varints read by the hand decoders of the analyzer's hot path
// (report/trace/memory_event_decoder.cc, report/trace/event_templates.cc).
#ifndef GPUMEM_REPORT_TRACE_VARINT_H_
#define GPUMEM_REPORT_TRACE_VARINT_H_

#include <bit>
#include <cstdint>
#include <cstring>

namespace gpumem::report::varint {

// The 7-bit groups of the eight bytes of `word` (little-endian), top bits cleared, packed into 56.
[[gnu::always_inline]] inline uint64_t PackSevenBitGroups(uint64_t word) {
  word &= 0x7F7F7F7F7F7F7F7Full;
  word = ((word & 0x7F007F007F007F00ull) >> 1) | (word & 0x007F007F007F007Full);
  word = ((word & 0x3FFF00003FFF0000ull) >> 2) | (word & 0x00003FFF00003FFFull);
  return ((word & 0x0FFFFFFF00000000ull) >> 4) | (word & 0x000000000FFFFFFFull);
}

// The value of a varint of `bytes` (1 to 8) bytes, loaded from its start into `word`. This and
// PackSevenBitGroups are always inlined, as Read is: left to the link-time optimizer, each became
// a call on the hot path.
[[gnu::always_inline]] inline uint64_t PackBytes(uint64_t word, int bytes) {
  if (bytes <= 4) {  // the commonest: half the packing, on 32 bits
    uint32_t low =
        static_cast<uint32_t>(word) & static_cast<uint32_t>((uint64_t{1} << (8 * bytes)) - 1);
    low &= 0x7F7F7F7Fu;
    low = ((low & 0x7F007F00u) >> 1) | (low & 0x007F007Fu);
    return ((low & 0x3FFF0000u) >> 2) | (low & 0x00003FFFu);
  }
  return PackSevenBitGroups(bytes == 8 ? word : word & ((uint64_t{1} << (8 * bytes)) - 1));
}

inline uint64_t Load64(const uint8_t* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
  return word;
}

// Byte by byte: Read's slow path.
inline const uint8_t* ReadBytewise(const uint8_t* p, const uint8_t* end, uint64_t* value) {
  uint64_t result = 0;
  for (int i = 0; i < 10; ++i, ++p) {
    if (p == end) return nullptr;
    const uint64_t byte = *p;
    result |= (byte & 0x7F) << (7 * i);
    if (byte < 0x80) {
      if (i == 9 && byte > 1) return nullptr;
      *value = result;
      return p + 1;
    }
  }
  return nullptr;
}

// Read's path for a varint of more than one byte: up to eight with eight bytes left to load at
// once take no loop.
inline const uint8_t* ReadLonger(const uint8_t* p, const uint8_t* end, uint64_t* value) {
  if (end - p >= 8) {
    const uint64_t word = Load64(p);
    const uint64_t last_bytes = ~word & 0x8080808080808080ull;
    if (last_bytes != 0) {
      const int bytes = (std::countr_zero(last_bytes) + 1) / 8;
      *value = PackBytes(word, bytes);
      return p + bytes;
    }
  }
  return ReadBytewise(p, end, value);
}

// Reads a varint at `p` (before `end`) into *value; returns the byte after it, or nullptr when it
// is cut short or longer than 10 bytes, or its tenth byte carries more than the 64th bit (declined:
// libprotobuf's handling of those bits is its own business). Always inlined: a link-time optimizer
// weighing the large functions that call it left it a call, a tenth of the analyzer's time.
[[gnu::always_inline]] inline const uint8_t* Read(const uint8_t* p, const uint8_t* end,
                                                  uint64_t* value) {
  if (p != end && *p < 0x80) {
    *value = *p;
    return p + 1;
  }
  return ReadLonger(p, end, value);
}

// Read where at least eight bytes from `p` may be loaded whatever `end` is (a packet from
// TraceReader, followed by kPacketReadSlack bytes): a varint of up to eight bytes costs no loop,
// wherever it lies in the packet. The same results as Read.
[[gnu::always_inline]] inline const uint8_t* ReadPadded(const uint8_t* p, const uint8_t* end,
                                                        uint64_t* value) {
  if (p == end) return nullptr;
  const uint64_t word = Load64(p);
  if ((word & 0x80) == 0) {
    *value = word & 0x7F;
    return p + 1;
  }
  const uint64_t last_bytes = ~word & 0x8080808080808080ull;
  if (last_bytes == 0) return ReadBytewise(p, end, value);  // nine or ten bytes
  const int bytes = (std::countr_zero(last_bytes) + 1) / 8;
  if (bytes > end - p) return nullptr;  // cut short by the packet's end
  *value = PackBytes(word, bytes);
  return p + bytes;
}

}  // namespace gpumem::report::varint

#endif  // GPUMEM_REPORT_TRACE_VARINT_H_
