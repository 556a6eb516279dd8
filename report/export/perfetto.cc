#include "report/export/perfetto.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "report/export/proto_encoder.h"
#include "report/export/timeline.h"
#include "report/format/names.h"
#include "report/format/printable.h"

namespace gpumem::report {
namespace {

// Field numbers and enum values of Perfetto's protos (protos/perfetto/trace/: trace.proto,
// trace_packet.proto, interned_data/interned_data.proto, track_event/*.proto).
namespace trace {
constexpr uint32_t kPacket = 1;
}
namespace packet {
constexpr uint32_t kTimestamp = 8, kTrustedPacketSequenceId = 10, kTrackEvent = 11,
                   kInternedData = 12, kSequenceFlags = 13, kTrackDescriptor = 60;
constexpr uint64_t kSeqIncrementalStateCleared = 1, kSeqNeedsIncrementalState = 2;
}  // namespace packet
namespace track_descriptor {
constexpr uint32_t kUuid = 1, kName = 2, kProcess = 3, kParentUuid = 5, kCounter = 8;
}
namespace process_descriptor {
constexpr uint32_t kPid = 1, kProcessName = 6;
}
namespace counter_descriptor {
constexpr uint32_t kUnit = 3;
constexpr uint64_t kUnitSizeBytes = 3;
}  // namespace counter_descriptor
namespace track_event {
constexpr uint32_t kDebugAnnotations = 4, kType = 9, kNameIid = 10, kTrackUuid = 11,
                   kCounterValue = 30;
constexpr uint64_t kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4;
}  // namespace track_event
namespace interned_data {
constexpr uint32_t kEventNames = 2, kDebugAnnotationNames = 3, kDebugAnnotationStringValues = 29;
}
namespace interned_name {  // EventName, DebugAnnotationName and InternedString alike
constexpr uint32_t kIid = 1, kName = 2;
}
namespace debug_annotation {
constexpr uint32_t kNameIid = 1, kBoolValue = 2, kUintValue = 3, kIntValue = 4, kPointerValue = 7,
                   kStringValueIid = 17;
}

constexpr uint64_t kSequenceId = 1;

// Interned strings of one kind (event names, annotation names, annotation values): an iid each,
// from 1.
class Interned {
 public:
  explicit Interned(uint32_t field) : field_(field) {}
  // The iid of `text`; a new one goes into `interned` (the packet's InternedData).
  uint64_t Of(absl::string_view text, ProtoEncoder* interned) {
    const auto [it, added] = iids_.try_emplace(text, 0);
    if (added) it->second = Add(text, interned);
    return it->second;
  }
  // A new iid for `text`, which the caller remembers itself (a stack, by its id).
  uint64_t Add(absl::string_view text, ProtoEncoder* interned) {
    ProtoEncoder entry;
    entry.Varint(interned_name::kIid, ++last_iid_);
    std::string utf8;
    AppendEscaped(text, TextEscape::kUtf8, &utf8);  // protobuf strings are UTF-8
    entry.Bytes(interned_name::kName, utf8);
    interned->Message(field_, entry);
    return last_iid_;
  }

 private:
  uint32_t field_;
  uint64_t last_iid_ = 0;
  absl::flat_hash_map<std::string, uint64_t> iids_;
};

// One TrackEvent being written, with the InternedData its packet needs.
class EventBuilder {
 public:
  EventBuilder(Interned* annotation_names, Interned* values, uint64_t track_uuid, uint64_t type)
      : annotation_names_(annotation_names), values_(values) {
    event_.Varint(track_event::kType, type);
    event_.Varint(track_event::kTrackUuid, track_uuid);
  }
  EventBuilder& Name(Interned* names, absl::string_view name) {
    event_.Varint(track_event::kNameIid, names->Of(name, &interned_));
    return *this;
  }
  EventBuilder& Counter(uint64_t value) {
    event_.Int64(track_event::kCounterValue, static_cast<int64_t>(value));
    return *this;
  }
  EventBuilder& Uint(absl::string_view name, uint64_t value) {
    return Annotate(name, debug_annotation::kUintValue, value);
  }
  EventBuilder& Int(absl::string_view name, int64_t value) {
    return Annotate(name, debug_annotation::kIntValue, static_cast<uint64_t>(value));
  }
  EventBuilder& Pointer(absl::string_view name, uint64_t value) {
    return Annotate(name, debug_annotation::kPointerValue, value);
  }
  EventBuilder& Bool(absl::string_view name, bool value) {
    return Annotate(name, debug_annotation::kBoolValue, value ? 1 : 0);
  }
  // Strings are interned: a stack comes with nearly every event.
  EventBuilder& String(absl::string_view name, absl::string_view value) {
    return InternedString(name, values_->Of(value, &interned_));
  }
  EventBuilder& InternedString(absl::string_view name, uint64_t iid) {
    return Annotate(name, debug_annotation::kStringValueIid, iid);
  }
  const ProtoEncoder& event() const { return event_; }
  const ProtoEncoder& interned() const { return interned_; }
  ProtoEncoder* mutable_interned() { return &interned_; }

 private:
  ProtoEncoder Named(absl::string_view name) {
    ProtoEncoder annotation;
    annotation.Varint(debug_annotation::kNameIid, annotation_names_->Of(name, &interned_));
    return annotation;
  }
  EventBuilder& Annotate(absl::string_view name, uint32_t field, uint64_t value) {
    ProtoEncoder annotation = Named(name);
    annotation.Varint(field, value);
    event_.Message(track_event::kDebugAnnotations, annotation);
    return *this;
  }

  Interned* annotation_names_;
  Interned* values_;
  ProtoEncoder event_;
  ProtoEncoder interned_;
};

class PerfettoWriter final : public TimelineWriter {
 public:
  PerfettoWriter(const TraceFile& trace, ChunkedOutput* out) : trace_(trace), out_(out) {}

  void Counter(int32_t place, uint64_t ns, const char* name, uint64_t bytes) override {
    const uint64_t track = CounterTrack(place, name);
    EventBuilder event(&annotation_names_, &values_, track, track_event::kCounter);
    Write(ns, event.Counter(bytes));
  }
  void Memory(int32_t place, uint64_t ns, const MemoryEvent& event,
              const std::vector<std::string>& frames) override;
  void Stream(int32_t place, uint64_t stream, const std::vector<TimelineLaunch>& launches) override;
  void Finish(const TimelineTotals& totals) override;

 private:
  // The packet's common fields: the sequence, and whether it starts it.
  ProtoEncoder Packet() {
    ProtoEncoder packet;
    packet.Varint(packet::kTrustedPacketSequenceId, kSequenceId);
    packet.Varint(packet::kSequenceFlags, packets_++ == 0 ? packet::kSeqIncrementalStateCleared
                                                          : packet::kSeqNeedsIncrementalState);
    return packet;
  }
  void Append(const ProtoEncoder& packet) {
    ProtoEncoder framed;
    framed.Message(trace::kPacket, packet);
    out_->text()->append(framed.bytes());
    out_->EndOfEvent();
  }
  void Write(uint64_t ns, const EventBuilder& event) {
    ProtoEncoder packet = Packet();
    packet.Varint(packet::kTimestamp, ns);
    packet.Message(packet::kTrackEvent, event.event());
    if (!event.interned().bytes().empty()) {
      packet.Message(packet::kInternedData, event.interned());
    }
    Append(packet);
  }
  // A new track's uuid, described in a packet of its own.
  uint64_t Describe(absl::string_view name, uint64_t parent, const ProtoEncoder* process,
                    bool counter);
  uint64_t ProcessTrack(int32_t place);
  uint64_t CounterTrack(int32_t place, const char* name);
  uint64_t MemoryTrack(int32_t place);

  const TraceFile& trace_;
  ChunkedOutput* out_;
  uint64_t packets_ = 0;
  uint64_t next_uuid_ = 1;
  Interned names_{interned_data::kEventNames};
  Interned annotation_names_{interned_data::kDebugAnnotationNames};
  Interned values_{interned_data::kDebugAnnotationStringValues};
  std::map<int32_t, uint64_t> processes_;                         // place -> track
  std::map<int32_t, uint64_t> memory_tracks_;                     // place -> track
  std::map<std::pair<int32_t, std::string>, uint64_t> counters_;  // (place, name) -> track
  absl::flat_hash_map<uint64_t, uint64_t> stacks_;  // stack id -> its frames' iid in values_
};

uint64_t PerfettoWriter::Describe(absl::string_view name, uint64_t parent,
                                  const ProtoEncoder* process, bool counter) {
  const uint64_t uuid = next_uuid_++;
  ProtoEncoder descriptor;
  descriptor.Varint(track_descriptor::kUuid, uuid);
  if (parent != 0) descriptor.Varint(track_descriptor::kParentUuid, parent);
  if (!name.empty()) descriptor.Bytes(track_descriptor::kName, name);
  if (process != nullptr) descriptor.Message(track_descriptor::kProcess, *process);
  if (counter) {
    ProtoEncoder counter_fields;
    counter_fields.Varint(counter_descriptor::kUnit, counter_descriptor::kUnitSizeBytes);
    descriptor.Message(track_descriptor::kCounter, counter_fields);
  }
  ProtoEncoder packet = Packet();
  packet.Message(packet::kTrackDescriptor, descriptor);
  Append(packet);
  return uuid;
}

uint64_t PerfettoWriter::ProcessTrack(int32_t place) {
  auto it = processes_.find(place);
  if (it != processes_.end()) return it->second;
  ProtoEncoder process;
  process.Int64(process_descriptor::kPid, TimelinePid(place));
  std::string name;
  AppendEscaped(PlaceName(place, trace_), TextEscape::kUtf8, &name);
  process.Bytes(process_descriptor::kProcessName, name);
  return processes_.emplace(place, Describe("", 0, &process, false)).first->second;
}

uint64_t PerfettoWriter::CounterTrack(int32_t place, const char* name) {
  auto it = counters_.find({place, name});
  if (it != counters_.end()) return it->second;
  const uint64_t uuid = Describe(name, ProcessTrack(place), nullptr, true);
  return counters_.emplace(std::make_pair(place, std::string(name)), uuid).first->second;
}

uint64_t PerfettoWriter::MemoryTrack(int32_t place) {
  auto it = memory_tracks_.find(place);
  if (it != memory_tracks_.end()) return it->second;
  const uint64_t uuid = Describe("memory", ProcessTrack(place), nullptr, false);
  return memory_tracks_.emplace(place, uuid).first->second;
}

void PerfettoWriter::Memory(int32_t place, uint64_t ns, const MemoryEvent& event,
                            const std::vector<std::string>& frames) {
  EventBuilder builder(&annotation_names_, &values_, MemoryTrack(place), track_event::kInstant);
  builder.Name(&names_, absl::StrCat(ActionName(event.action()), " ", ApiName(event.api())))
      .Uint("size", event.size())
      .Pointer("address", event.address())
      .Pointer("stream", event.stream())
      .Uint("seq", event.seq())
      .String("kind", KindName(event.kind()));
  if (event.action() == ALLOC_FAILED) {
    builder.Int("result", event.result()).Uint("free_bytes", event.free_bytes());
  }
  if (event.stack_id() != 0) {
    auto it = stacks_.find(event.stack_id());
    if (it == stacks_.end()) {
      const uint64_t iid = values_.Add(absl::StrJoin(frames, "\n"), builder.mutable_interned());
      it = stacks_.emplace(event.stack_id(), iid).first;
    }
    builder.InternedString("stack", it->second);
  }
  Write(ns, builder);
}

void PerfettoWriter::Stream(int32_t place, uint64_t stream,
                            const std::vector<TimelineLaunch>& launches) {
  const uint64_t track =
      Describe(absl::StrCat("stream 0x", absl::Hex(stream)), ProcessTrack(place), nullptr, false);
  for (const TimelineLaunch& launch : launches) {
    EventBuilder begin(&annotation_names_, &values_, track, track_event::kSliceBegin);
    begin.Name(&names_, *launch.name)
        .String("time", launch.gpu_time ? "gpu" : "host launch")
        .Uint("seq", launch.seq)
        .Uint("correlation_id", launch.correlation_id);
    Write(launch.ns, begin);
    Write(launch.ns + launch.duration_ns,
          EventBuilder(&annotation_names_, &values_, track, track_event::kSliceEnd));
  }
}

void PerfettoWriter::Finish(const TimelineTotals& totals) {
  const Header& header = trace_.header();
  const uint64_t track = Describe("gpumem", 0, nullptr, false);
  EventBuilder event(&annotation_names_, &values_, track, track_event::kInstant);
  event.Name(&names_, "trace")
      .String("host", header.host())
      .Uint("pid", header.pid())
      .String("command_line", absl::StrJoin(header.command_line(), " "))
      .Uint("start_time_unix_ns", header.start_time_unix_ns())
      .Uint("memory_events", totals.memory_events)
      .Uint("launches", totals.launches)
      .Uint("launches_with_gpu_times", totals.launches_with_gpu_times)
      .Bool("complete", totals.complete);
  Write(0, event);
}

}  // namespace

TraceReplay ExportPerfetto(std::unique_ptr<TraceFile> file, Progress* progress,
                           ChunkedOutput* out) {
  PerfettoWriter writer(*file, out);
  return ReplayTimeline(std::move(file), progress, &writer);
}

}  // namespace gpumem::report
