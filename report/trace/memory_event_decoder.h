// A hand decoder for the packet that makes up nearly all of a trace: a TracePacket holding one
// MemoryEvent (core/trace.proto), as core/recorder.cc writes it. libprotobuf builds and fills a
// TracePacket per packet, which alone takes much of the budget of 10 million events per second;
// this reads the varints straight into plain fields.
//
// It decodes only what it can decode exactly as libprotobuf would: a packet whose one field is
// `memory` (field 7), holding only MemoryEvent's varint fields 1-21, in any order, repeated (the
// last wins), with non-minimal varints. Anything else (another packet type, an unknown field, a
// wrong wire type, a malformed varint, trailing bytes) is declined, and the caller parses the
// packet with libprotobuf. tests/report/trace/memory_event_decoder_test.cc checks that the two
// agree on random events and on random damage to them.
#ifndef GPUMEM_REPORT_TRACE_MEMORY_EVENT_DECODER_H_
#define GPUMEM_REPORT_TRACE_MEMORY_EVENT_DECODER_H_

#include <cstdint>
#include <string_view>

#include "core/trace.pb.h"

namespace gpumem::report {

// MemoryEvent's fields as plain values: cheap to copy and to keep by the ten thousand (the reorder
// buffer of report/trace/event_stream.h). Enums are kept as their numbers (proto3 enums are open).
struct alignas(16) MemoryEventFields {  // 16-aligned: cleared in 16-byte stores
  uint64_t seq = 0;
  uint64_t timestamp_ns = 0;
  uint64_t size = 0;
  uint64_t address = 0;
  uint64_t stream = 0;
  uint64_t pool = 0;
  uint64_t stack_id = 0;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t pitch = 0;
  uint64_t capture = 0;
  uint32_t tid = 0;
  int32_t device = 0;
  int32_t result = 0;
  int32_t api = 0;
  int32_t kind = 0;
  int32_t action = 0;
  // Format 2 (core/trace.proto, EventRef): the writer and the template slot this event defines.
  // report/trace/trace_file.h takes them and hands events on without them (0).
  uint32_t writer = 0;
  uint32_t template_slot = 0;
  // Not a MemoryEvent field: 0 here; report/trace/event_stream.h sets it (1-based) on an entry of
  // its reorder buffer that stands for a LaunchEvent kept beside the buffer, so that launches are
  // put in seq order together with memory events. It sits in what would be padding.
  uint32_t launch_ref = 0;

  bool operator==(const MemoryEventFields&) const = default;
};

// Sets every field of `*event` (clearing nothing else: MemoryEvent has only these fields).
void ToProto(const MemoryEventFields& fields, MemoryEvent* event);
MemoryEventFields FromProto(const MemoryEvent& event);

// `packet` is a TracePacket message (core/trace_reader.h's Packet::bytes). True when it is a
// memory event in the shape above, with its fields in *out; false otherwise (*out is then
// unspecified): parse it with libprotobuf.
bool DecodeMemoryPacket(std::string_view packet, MemoryEventFields* out);

// `body` is a MemoryEvent message. Same contract as DecodeMemoryPacket().
bool DecodeMemoryEvent(std::string_view body, MemoryEventFields* out);

// An EventRef's fields (core/trace.proto), the deltas decoded from zigzag.
struct EventRefFields {
  uint32_t writer = 0;
  uint32_t slot = 0;
  int64_t seq_delta = 0;
  int64_t time_delta = 0;
  int64_t correlation_delta = 0;

  bool operator==(const EventRefFields&) const = default;
};

// `body` is an EventRef message (a Packet with event_ref set). True when it holds only EventRef's
// fields, as varints; false otherwise (*out unspecified): parse it with libprotobuf, e.g. by
// ParseEventRef().
bool DecodeEventRef(std::string_view body, EventRefFields* out);
// The same through libprotobuf (fields of a newer schema skipped); false when it does not parse.
bool ParseEventRef(std::string_view body, EventRefFields* out);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_TRACE_MEMORY_EVENT_DECODER_H_
