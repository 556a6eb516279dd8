// Protobuf wire format written by hand into a growing string, for the exports in other tools'
// protobuf formats (pprof's profile.proto, Perfetto's trace): field numbers are the published
// ones, written as constants next to their use, so no schema of theirs is compiled in. Unlike the
// recorder's fixed-buffer writer (core/wire_writer.h, whose varint helpers it uses), a nested
// message is built in a ProtoEncoder of its own and appended whole with Message().
#ifndef GPUMEM_REPORT_EXPORT_PROTO_ENCODER_H_
#define GPUMEM_REPORT_EXPORT_PROTO_ENCODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/wire_writer.h"

namespace gpumem::report {

class ProtoEncoder {
 public:
  // A varint field, zero included (proto2's optional fields have presence).
  void Varint(uint32_t field, uint64_t value) {
    Tag(field, wire::kVarint);
    PutVarint(value);
  }
  // int64 and int32 fields: a negative value as its 64-bit two's complement, as protobuf has it.
  void Int64(uint32_t field, int64_t value) { Varint(field, static_cast<uint64_t>(value)); }
  void Bool(uint32_t field, bool value) { Varint(field, value ? 1 : 0); }
  void Bytes(uint32_t field, absl::string_view bytes) {
    Tag(field, wire::kLengthDelimited);
    PutVarint(bytes.size());
    bytes_.append(bytes.data(), bytes.size());
  }
  void Message(uint32_t field, const ProtoEncoder& message) { Bytes(field, message.bytes_); }
  // A packed repeated varint field; nothing when empty.
  void PackedVarints(uint32_t field, const std::vector<uint64_t>& values) {
    if (values.empty()) return;
    size_t size = 0;
    for (const uint64_t value : values) size += wire::VarintSize(value);
    Tag(field, wire::kLengthDelimited);
    PutVarint(size);
    for (const uint64_t value : values) PutVarint(value);
  }

  const std::string& bytes() const { return bytes_; }
  std::string& mutable_bytes() { return bytes_; }

 private:
  void Tag(uint32_t field, uint32_t wire_type) { PutVarint(uint64_t{field} << 3 | wire_type); }
  void PutVarint(uint64_t value) {
    uint8_t buffer[wire::kMaxVarintBytes];
    const uint8_t* end = wire::PutVarint(buffer, value);
    bytes_.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(end - buffer));
  }

  std::string bytes_;
};

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_EXPORT_PROTO_ENCODER_H_
