#include "report/trace/memory_event_decoder.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/trace_format.h"
#include "core/trace_ids.h"
#include "report/trace/varint.h"

namespace gpumem::report {
namespace {

constexpr uint8_t kVarintWireType = 0;
constexpr uint8_t kLengthDelimitedWireType = 2;
constexpr uint8_t kMemoryPacketTag = proto::packet_field::kMemory << 3 | kLengthDelimitedWireType;

using varint::Load64;
using varint::PackSevenBitGroups;
constexpr auto ReadVarint = varint::Read;

}  // namespace

void ToProto(const MemoryEventFields& fields, MemoryEvent* event) {
  event->set_seq(fields.seq);
  event->set_timestamp_ns(fields.timestamp_ns);
  event->set_tid(fields.tid);
  event->set_device(fields.device);
  event->set_api(static_cast<Api>(fields.api));
  event->set_kind(static_cast<MemoryKind>(fields.kind));
  event->set_action(static_cast<Action>(fields.action));
  event->set_size(fields.size);
  event->set_address(fields.address);
  event->set_stream(fields.stream);
  event->set_pool(fields.pool);
  event->set_result(fields.result);
  event->set_stack_id(fields.stack_id);
  event->set_handle(fields.handle);
  event->set_offset(fields.offset);
  event->set_free_bytes(fields.free_bytes);
  event->set_total_bytes(fields.total_bytes);
  event->set_pitch(fields.pitch);
  event->set_capture(fields.capture);
  event->set_writer(fields.writer);
  event->set_template_slot(fields.template_slot);
}

MemoryEventFields FromProto(const MemoryEvent& event) {
  MemoryEventFields fields;
  fields.seq = event.seq();
  fields.timestamp_ns = event.timestamp_ns();
  fields.tid = event.tid();
  fields.device = event.device();
  fields.api = event.api();
  fields.kind = event.kind();
  fields.action = event.action();
  fields.size = event.size();
  fields.address = event.address();
  fields.stream = event.stream();
  fields.pool = event.pool();
  fields.result = event.result();
  fields.stack_id = event.stack_id();
  fields.handle = event.handle();
  fields.offset = event.offset();
  fields.free_bytes = event.free_bytes();
  fields.total_bytes = event.total_bytes();
  fields.pitch = event.pitch();
  fields.capture = event.capture();
  fields.writer = event.writer();
  fields.template_slot = event.template_slot();
  return fields;
}

namespace {

// Where each field (by number) goes in MemoryEventFields: a decoded value is stored straight into
// the caller's struct. (Collected in an array and copied over afterwards, the copy's wide loads
// stall on the narrow stores just made: a fifth of the decoding time.)
struct FieldSlot {
  uint8_t offset = 0;
  uint8_t bytes = 0;  // 8, or 4 for int32/uint32/enum fields (libprotobuf keeps the low 32 bits)
};

constexpr auto kFieldSlots = [] {
  namespace f = proto::memory_field;
  std::array<FieldSlot, f::kTemplateSlot + 1> slots{};
  auto wide = [&](uint32_t field, size_t offset) { slots[field] = {uint8_t(offset), 8}; };
  auto narrow = [&](uint32_t field, size_t offset) { slots[field] = {uint8_t(offset), 4}; };
  wide(f::kSeq, offsetof(MemoryEventFields, seq));
  wide(f::kTimestampNs, offsetof(MemoryEventFields, timestamp_ns));
  narrow(f::kTid, offsetof(MemoryEventFields, tid));
  narrow(f::kDevice, offsetof(MemoryEventFields, device));
  narrow(f::kApi, offsetof(MemoryEventFields, api));
  narrow(f::kKind, offsetof(MemoryEventFields, kind));
  narrow(f::kAction, offsetof(MemoryEventFields, action));
  wide(f::kSize, offsetof(MemoryEventFields, size));
  wide(f::kAddress, offsetof(MemoryEventFields, address));
  wide(f::kStream, offsetof(MemoryEventFields, stream));
  wide(f::kPool, offsetof(MemoryEventFields, pool));
  narrow(f::kResult, offsetof(MemoryEventFields, result));
  wide(f::kStackId, offsetof(MemoryEventFields, stack_id));
  wide(f::kHandle, offsetof(MemoryEventFields, handle));
  wide(f::kOffset, offsetof(MemoryEventFields, offset));
  wide(f::kFreeBytes, offsetof(MemoryEventFields, free_bytes));
  wide(f::kTotalBytes, offsetof(MemoryEventFields, total_bytes));
  wide(f::kPitch, offsetof(MemoryEventFields, pitch));
  wide(f::kCapture, offsetof(MemoryEventFields, capture));
  narrow(f::kWriter, offsetof(MemoryEventFields, writer));
  narrow(f::kTemplateSlot, offsetof(MemoryEventFields, template_slot));
  return slots;
}();

// Stores field `field` (1-21, checked by FieldOf) of `*out`.
inline void Store(MemoryEventFields* out, uint32_t field, uint64_t value) {
  const FieldSlot slot = kFieldSlots[field];
  char* at = reinterpret_cast<char*>(out) + slot.offset;
  if (slot.bytes == 8) {
    std::memcpy(at, &value, 8);
  } else {
    const auto low = static_cast<uint32_t>(value);
    std::memcpy(at, &low, 4);
  }
}

// The field number of each one-byte tag that is one of MemoryEvent's varint fields (1-15), else 0.
constexpr auto kOneByteTagField = [] {
  std::array<uint8_t, 256> fields{};
  for (uint32_t field = 1; field <= 15; ++field) {
    fields[field << 3 | kVarintWireType] = static_cast<uint8_t>(field);
  }
  return fields;
}();

// The field number of a tag of `size` bytes (1 or 2) at `p`, or 0 when it is not one of
// MemoryEvent's varint fields.
inline uint32_t FieldOf(const uint8_t* p, size_t size) {
  if (size == 1) return kOneByteTagField[p[0]];
  if (size != 2) return 0;
  const uint32_t tag = (p[0] & 0x7Fu) | uint32_t{p[1]} << 7;
  const uint32_t field = tag >> 3;
  if ((tag & 7) != kVarintWireType || field > proto::memory_field::kTemplateSlot) return 0;
  return field;
}

// Any body: one varint after the other.
bool DecodeAnyLength(const uint8_t* p, const uint8_t* end, MemoryEventFields* out) {
  while (p != end) {
    // Tags: one byte for fields 1-15, two for 16-21.
    size_t tag_size = 1;
    if (*p >= 0x80) {
      if (end - p < 2 || p[1] >= 0x80) return false;
      tag_size = 2;
    }
    const uint32_t field = FieldOf(p, tag_size);
    if (field == 0) return false;  // an unknown field (a newer schema), field 0, another type
    uint64_t value;
    p = ReadVarint(p + tag_size, end, &value);
    if (p == nullptr) return false;
    Store(out, field, value);
  }
  return true;
}

// The eight bytes at `p` (before the body's end) of a body that ends at `end` and holds at least
// eight bytes in all (`last8` = end - 8), zeros past its end: loaded from the last eight bytes of
// the body and shifted where fewer than eight are left, so nothing outside the body is read.
inline uint64_t WordAt(const uint8_t* p, const uint8_t* last8) {
  if (p <= last8) return Load64(p);
  return Load64(last8) >> (8 * (p - last8));
}

// A body of at least 8 bytes (nearly all): each value is read from one eight-byte load, its
// length from the first byte with the top bit clear. (A first version found all the varints' ends
// at once from a sixteen-byte mask: more instructions, and 30 % slower on the benchmark's trace.)
bool DecodeWords(const uint8_t* p, const uint8_t* end, MemoryEventFields* out) {
  const uint8_t* const last8 = end - 8;
  while (p != end) {
    // Fields 1-15 have one-byte tags; 16-21 (failures, pitch, captures, a template's writer and
    // slot) take the general path.
    const uint32_t field = kOneByteTagField[*p];
    if (field == 0) return *p >= 0x80 && DecodeAnyLength(p, end, out);
    if (++p == end) return false;  // a tag without its value
    const uint64_t word = WordAt(p, last8);
    const uint64_t last_bytes = ~word & 0x8080808080808080ull;
    uint64_t value;
    if ((word & 0x80) == 0) {  // one byte (enums, small ids: a third of the fields)
      value = word & 0x7F;
      ++p;
    } else if (last_bytes != 0) [[likely]] {
      const int bits = std::countr_zero(last_bytes) + 1;  // eight per byte of the varint
      const uint8_t* const next = p + bits / 8;
      if (next > end) return false;  // cut short: the zeros past the end are not its bytes
      p = next;
      value = PackSevenBitGroups(bits == 64 ? word : word & ((uint64_t{1} << bits) - 1));
    } else {
      // Nine or ten bytes (a negative int32 is ten: the device -1 of every free): the ninth
      // carries bits 56-62, the tenth the 64th bit alone.
      if (end - p < 9) return false;
      value = PackSevenBitGroups(word) | uint64_t{p[8] & 0x7Fu} << 56;
      if (p[8] < 0x80) {
        p += 9;
      } else {
        if (end - p < 10 || p[9] > 1) return false;
        value |= uint64_t{p[9]} << 63;
        p += 10;
      }
    }
    Store(out, field, value);
  }
  return true;
}

// Zeroes every field with 16-byte stores, written out: `*out = MemoryEventFields{}`, a memset or a
// loop of stores all compile to `rep stos`, whose start-up costs as much as decoding a few fields.
#if defined(__SSE2__)
template <size_t... kIndex>
inline void StoreZeros(__m128i* at, std::index_sequence<kIndex...>) {
  const __m128i zero = _mm_setzero_si128();
  (_mm_storeu_si128(at + kIndex, zero), ...);
}
#endif

inline void Clear(MemoryEventFields* out) {
  static_assert(std::is_trivially_copyable_v<MemoryEventFields>);
#if defined(__SSE2__)
  static_assert(sizeof(MemoryEventFields) % 16 == 0);
  StoreZeros(reinterpret_cast<__m128i*>(out),
             std::make_index_sequence<sizeof(MemoryEventFields) / 16>{});
#else
  *out = MemoryEventFields{};
#endif
}

}  // namespace

bool DecodeMemoryEvent(std::string_view body, MemoryEventFields* out) {
  Clear(out);
  const auto* p = reinterpret_cast<const uint8_t*>(body.data());
  return body.size() >= 8 ? DecodeWords(p, p + body.size(), out)
                          : DecodeAnyLength(p, p + body.size(), out);
}

bool DecodeMemoryPacket(std::string_view packet, MemoryEventFields* out) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(packet.data());
  const uint8_t* const end = p + packet.size();
  if (p == end || *p != kMemoryPacketTag) return false;
  uint64_t length;
  const uint8_t* body = ReadVarint(p + 1, end, &length);
  // libprotobuf reads a length in at most 5 bytes. The event must be the whole packet: anything
  // after it (padding, a second event to merge) is libprotobuf's to handle.
  if (body == nullptr || body - (p + 1) > 5 || length != static_cast<uint64_t>(end - body)) {
    return false;
  }
  p = body;
  return DecodeMemoryEvent(std::string_view(reinterpret_cast<const char*>(p), length), out);
}

using proto::FromZigZag;

bool DecodeEventRef(std::string_view body, EventRefFields* out) {
  namespace f = proto::event_ref_field;
  *out = EventRefFields{};
  const auto* p = reinterpret_cast<const uint8_t*>(body.data());
  const uint8_t* const end = p + body.size();
  while (p != end) {
    const uint8_t tag = *p++;
    if ((tag & 7) != kVarintWireType || tag >= 0x80) return false;
    uint64_t value;
    p = ReadVarint(p, end, &value);
    if (p == nullptr) return false;
    switch (tag >> 3) {
      case f::kWriter:
        out->writer = static_cast<uint32_t>(value);
        break;
      case f::kSlot:
        out->slot = static_cast<uint32_t>(value);
        break;
      case f::kSeqDelta:
        out->seq_delta = FromZigZag(value);
        break;
      case f::kTimeDelta:
        out->time_delta = FromZigZag(value);
        break;
      case f::kCorrelationDelta:
        out->correlation_delta = FromZigZag(value);
        break;
      default:
        return false;  // field 0, or one of a newer schema: libprotobuf's to skip
    }
  }
  return true;
}

bool ParseEventRef(std::string_view body, EventRefFields* out) {
  EventRef ref;
  if (!ref.ParseFromArray(body.data(), static_cast<int>(body.size()))) return false;
  out->writer = ref.writer();
  out->slot = ref.slot();
  out->seq_delta = ref.seq_delta();
  out->time_delta = ref.time_delta();
  out->correlation_delta = ref.correlation_delta();
  return true;
}

}  // namespace gpumem::report
