// Protobuf wire format written by hand, into a caller-owned buffer, without the protobuf runtime
// (rule 2 of DESIGN: no libprotobuf in the target process). Same idea as Perfetto's protozero:
// fields are appended in order; a nested message reserves room for its length and is closed with
// EndNested(), which moves the body down so the length is a minimal varint.
//
// The writer never allocates and never writes past its buffer: on overflow it stops and
// overflowed() turns true, and the caller drops the packet (and counts it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gpumem::wire {

inline constexpr uint32_t kVarint = 0;
inline constexpr uint32_t kLengthDelimited = 2;
inline constexpr size_t kMaxVarintBytes = 10;

// Without a loop: how many 7-bit groups the value's highest set bit needs (zero takes one byte).
inline size_t VarintSize(uint64_t value) {
  return static_cast<size_t>(70 - __builtin_clzll(value | 1)) / 7;
}

inline uint8_t* PutVarint(uint8_t* out, uint64_t value) {
  while (value >= 0x80) {
    *out++ = static_cast<uint8_t>(value) | 0x80;
    value >>= 7;
  }
  *out++ = static_cast<uint8_t>(value);
  return out;
}

// Unchecked helpers for the hot path (one memory event per CUDA call), where the caller's buffer
// is sized for the largest packet: no bounds checks, no moving bodies around.

// A varint field with a one-byte tag (field numbers below 16); zero is omitted.
inline uint8_t* PutVarintField(uint8_t* out, uint32_t field, uint64_t value) {
  if (value == 0) return out;
  *out++ = static_cast<uint8_t>(field << 3 | kVarint);
  return PutVarint(out, value);
}

// The same for any field number: from field 16 the tag takes two bytes.
inline uint8_t* PutVarintFieldAnyTag(uint8_t* out, uint32_t field, uint64_t value) {
  if (value == 0) return out;
  out = PutVarint(out, uint64_t{field} << 3 | kVarint);
  return PutVarint(out, value);
}

// Varint fields numbered first_field, first_field + 1, ... from `values`, zeros omitted: one loop
// for all of an event's fields. A copy of the varint loop per field made an event's code span
// many cache lines, and inside a framework, whose own work evicts gpumem's code between two events,
// each line of it is a miss: code lines, more than instructions, are what an event costs there.
inline uint8_t* PutVarintFields(uint8_t* out, uint32_t first_field, const uint64_t* values,
                                size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (values[i] == 0) continue;
    out = PutVarint(out, uint64_t{first_field + static_cast<uint32_t>(i)} << 3 | kVarint);
    out = PutVarint(out, values[i]);
  }
  return out;
}

// A packed repeated varint field (nothing when `count` is 0).
inline uint8_t* PutPackedVarints(uint8_t* out, uint32_t field, const uint64_t* values,
                                 size_t count) {
  if (count == 0) return out;
  size_t length = 0;
  for (size_t i = 0; i < count; ++i) length += VarintSize(values[i]);
  out = PutVarint(out, uint64_t{field} << 3 | kLengthDelimited);
  out = PutVarint(out, length);
  for (size_t i = 0; i < count; ++i) out = PutVarint(out, values[i]);
  return out;
}

// Writes a length-delimited header (one-byte tag, length) immediately before `body`, which must
// have room for it in front; returns where the message now starts.
inline uint8_t* PrependHeader(uint8_t* body, uint32_t field, size_t body_size) {
  uint8_t length[kMaxVarintBytes];
  size_t length_size = static_cast<size_t>(PutVarint(length, body_size) - length);
  body -= length_size;
  memcpy(body, length, length_size);
  *--body = static_cast<uint8_t>(field << 3 | kLengthDelimited);
  return body;
}

class Writer {
 public:
  Writer(uint8_t* buffer, size_t capacity)
      : begin_(buffer), pos_(buffer), end_(buffer + capacity) {}

  // Zero is proto3's default and is omitted, as libprotobuf does.
  void Varint(uint32_t field, uint64_t value) {
    if (value == 0) return;
    if (!Reserve(2 * kMaxVarintBytes)) return;
    pos_ = PutVarint(pos_, (uint64_t{field} << 3) | kVarint);
    pos_ = PutVarint(pos_, value);
  }
  // int32 fields: negative values are sign-extended to 64 bits, as protobuf requires.
  void Int32(uint32_t field, int32_t value) {
    Varint(field, static_cast<uint64_t>(static_cast<int64_t>(value)));
  }
  void Bool(uint32_t field, bool value) { Varint(field, value ? 1 : 0); }
  // A field with presence (proto3 `optional`): written even when zero.
  void Int32Present(uint32_t field, int32_t value) {
    if (!Reserve(2 * kMaxVarintBytes)) return;
    pos_ = PutVarint(pos_, (uint64_t{field} << 3) | kVarint);
    pos_ = PutVarint(pos_, static_cast<uint64_t>(static_cast<int64_t>(value)));
  }

  void Bytes(uint32_t field, const void* data, size_t size) {
    if (size != 0) RepeatedBytes(field, data, size);
  }
  // An element of a repeated string or bytes field: written even when empty, since it counts.
  void RepeatedBytes(uint32_t field, const void* data, size_t size) {
    if (!Reserve(2 * kMaxVarintBytes + size)) return;
    pos_ = PutVarint(pos_, (uint64_t{field} << 3) | kLengthDelimited);
    pos_ = PutVarint(pos_, size);
    memcpy(pos_, data, size);
    pos_ += size;
  }
  void String(uint32_t field, const char* text) {
    if (text != nullptr) Bytes(field, text, strlen(text));
  }

  // Opens a nested message (or packed field); returns a token for EndNested.
  size_t BeginNested(uint32_t field) {
    if (!Reserve(kMaxVarintBytes + kLengthSlot)) return kNoToken;
    pos_ = PutVarint(pos_, (uint64_t{field} << 3) | kLengthDelimited);
    size_t token = static_cast<size_t>(pos_ - begin_);
    pos_ += kLengthSlot;
    return token;
  }
  void EndNested(size_t token) {
    if (token == kNoToken || overflowed_) return;
    uint8_t* slot = begin_ + token;
    uint8_t* body = slot + kLengthSlot;
    size_t body_size = static_cast<size_t>(pos_ - body);
    uint8_t* after_length = PutVarint(slot, body_size);
    memmove(after_length, body, body_size);
    pos_ = after_length + body_size;
  }

  // A packed repeated varint field.
  void PackedVarints(uint32_t field, const uint64_t* values, size_t count) {
    if (count == 0) return;
    size_t token = BeginNested(field);
    for (size_t i = 0; i < count && !overflowed_; ++i) {
      if (!Reserve(kMaxVarintBytes)) return;
      pos_ = PutVarint(pos_, values[i]);
    }
    EndNested(token);
  }

  bool overflowed() const { return overflowed_; }
  size_t size() const { return static_cast<size_t>(pos_ - begin_); }
  const uint8_t* data() const { return begin_; }

 private:
  static constexpr size_t kLengthSlot = 5;  // enough for any length below 2^35
  static constexpr size_t kNoToken = ~size_t{0};

  bool Reserve(size_t bytes) {
    if (overflowed_ || static_cast<size_t>(end_ - pos_) < bytes) {
      overflowed_ = true;
      return false;
    }
    return true;
  }

  uint8_t* begin_;
  uint8_t* pos_;
  uint8_t* end_;
  bool overflowed_ = false;
};

}  // namespace gpumem::wire
