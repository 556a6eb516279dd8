#include "report/trace/trace_file.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/trace_format.h"
#include "report/trace/backward_credit.h"

namespace gpumem::report {
namespace {

// The newest Header.format_version this reader understands (3: compact_ref).
constexpr uint32_t kFormatVersion = 3;

}  // namespace

RecordingEnd RecordingEnd::FromFooter(const std::optional<Footer>& footer) {
  RecordingEnd end;
  if (!footer) return end;
  end.footer_present = true;
  end.exited = footer->clean_exit();
  if (footer->has_exit_status()) end.exit_status = footer->exit_status();
  end.stop_reason = footer->stop_reason();
  end.stopped_at_seq = footer->stopped_at_seq();
  end.events = footer->events();
  end.events_dropped = footer->events_dropped();
  end.events_reentrant = footer->events_reentrant();
  return end;
}

std::string RecordingEnd::UnrecordedNote() const {
  const uint64_t total = events_not_recorded();
  if (total == 0) return "";
  std::vector<std::string> reasons;
  if (events_reentrant > 0) {
    reasons.push_back(absl::StrCat(
        events_dropped > 0 ? absl::StrCat(events_reentrant, " ") : "",
        "made inside a signal handler that interrupted gpumem, or from within gpumem"));
  }
  if (events_dropped > 0) {
    reasons.push_back(absl::StrCat(events_reentrant > 0 ? absl::StrCat(events_dropped, " ") : "",
                                   "not written: the trace could not take them"));
  }
  return absl::StrCat(total, total == 1 ? " event" : " events", " could not be recorded (",
                      absl::StrJoin(reasons, "; "), "); totals are lower bounds");
}

std::string RecordingEnd::Describe() const {
  const std::string exit_text =
      exit_status ? absl::StrCat("exited with status ", *exit_status) : "exited";
  if (!footer_present) return "the process did not exit cleanly";
  if (stop_reason == STOP_NONE) return exited ? exit_text : "the process did not exit cleanly";
  std::string text = absl::StrCat("recording stopped at event ", stopped_at_seq);
  if (exited) absl::StrAppend(&text, " of ", events);
  absl::StrAppend(&text, ": ",
                  proto::RecordingStopText(static_cast<proto::RecordingStop>(stop_reason)));
  if (events_dropped > 0) {
    absl::StrAppend(&text, " (", events_dropped, " event", events_dropped == 1 ? "" : "s",
                    " not recorded)");
  }
  absl::StrAppend(&text, "; ", exited ? exit_text : "the process did not exit cleanly");
  return text;
}

std::string TraceEndStatus::Describe() const {
  std::string text;
  if (!recording.footer_present) {
    text = "no footer — " + recording.Describe();
  } else if (recording.complete()) {
    text = "clean (footer present)";
    if (recording.exit_status) absl::StrAppend(&text, ": ", recording.Describe());
  } else {
    text = recording.Describe();
  }
  switch (framing.kind) {
    case TraceEnd::Kind::kClean:
      break;
    case TraceEnd::Kind::kZeroTail:
      absl::StrAppend(&text, "; ", framing.zero_tail_bytes,
                      " bytes of unused zero space at the end");
      break;
    case TraceEnd::Kind::kTorn:
      absl::StrAppend(&text, "; torn packet at byte ", framing.offset, " (last ",
                      framing.unread_bytes, " bytes unreadable)");
      break;
    case TraceEnd::Kind::kCorrupt:
      absl::StrAppend(&text, "; corrupt data at byte ", framing.offset, " (last ",
                      framing.unread_bytes, " bytes not read)");
      break;
    case TraceEnd::Kind::kIoError:
      absl::StrAppend(&text, "; read error at byte ", framing.offset, " (last ",
                      framing.unread_bytes, " bytes not read)");
      break;
    case TraceEnd::Kind::kNotATrace:
    case TraceEnd::Kind::kEmpty:
      break;  // TraceFile::Open() fails on these: no TraceFile has them
  }
  if (framing.skipped_regions > 0) {
    absl::StrAppend(&text, "; corrupt data at byte ", framing.first_skipped_offset, " (skipped ",
                    framing.skipped_bytes, " damaged bytes in ", framing.skipped_regions,
                    " place(s))");
  }
  if (unparseable_packets > 0) {
    absl::StrAppend(&text, "; ", unparseable_packets, " packet(s) did not parse (first at byte ",
                    first_unparseable_offset, ")");
  }
  if (unresolved_refs > 0) absl::StrAppend(&text, "; ", UnresolvedText());
  return text;
}

std::string TraceEndStatus::UnresolvedText() const {
  return absl::StrCat(unresolved_refs,
                      " event reference(s) to a template lost with damaged data "
                      "(first at byte ",
                      first_unresolved_offset, ")");
}

std::string TraceEndStatus::ErrorLine(const std::string& path) const {
  std::string line;
  if (!framing.ok()) line = framing.message;
  if (unparseable_packets > 0) {
    absl::StrAppend(&line, line.empty() ? path + ": " : "; also ", unparseable_packets,
                    " packet(s) did not parse (first at byte ", first_unparseable_offset, ")");
  }
  if (unresolved_refs > 0) {
    absl::StrAppend(&line, line.empty() ? path + ": " : "; also ", UnresolvedText());
  }
  return line;
}

absl::StatusOr<std::unique_ptr<TraceFile>> TraceFile::Open(const std::string& path) {
  std::unique_ptr<TraceFile> file(new TraceFile());
  file->path_ = path;
  std::string error;
  if (!file->reader_.Open(path, &error)) return absl::InvalidArgumentError(error);
  if (!file->reader_.Next(&file->first_packet_)) {
    // The header itself was cut short: there is nothing to report on.
    return absl::DataLossError(file->reader_.end().message);
  }
  TracePacket packet;
  if (!packet.ParseFromArray(file->first_packet_.bytes.data(),
                             static_cast<int>(file->first_packet_.bytes.size())) ||
      !packet.has_header()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a gpumem trace (the first packet is not a header)"));
  }
  if (packet.header().format_version() > kFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": trace format version ", packet.header().format_version(),
        " is newer than this gpumem reads (", kFormatVersion, "); use a newer gpumem"));
  }
  file->header_ = packet.header();
  return file;
}

absl::StatusOr<std::unique_ptr<TraceFile>> TraceFile::Read(const std::string& path,
                                                           const PacketVisitor& visit) {
  absl::StatusOr<std::unique_ptr<TraceFile>> file = Open(path);
  if (file.ok()) (*file)->ReadPackets(visit);
  return file;
}

void TraceFile::ReadPackets(const PacketVisitor& visit) { ReadAll(visit, nullptr); }

void TraceFile::ReadPackets(const PacketVisitor& visit, MemoryEventSink& memory) {
  ReadAll(visit, &memory);
}

void TraceFile::ReadAll(const PacketVisitor& visit, MemoryEventSink* memory) {
  if (reading_ || read_) return;
  reading_ = true;
  TracePacket packet;
  Packet framed = first_packet_;
  bool have_packet = true;  // Open() already framed the header
  for (; have_packet; have_packet = reader_.Next(&framed)) {
    if (reader_.end().skipped_regions != skipped_regions_seen_) ForgetTemplatesAfterDamage();
    PacketPosition position;
    position.index = packet_count_++;
    position.offset = framed.offset;
    position.size = framed.bytes.size();
    bytes_read_ = position.offset + position.size;
    position.event_ref = framed.event_ref;
    if (framed.event_ref) {
      ReadEventRef(position, framed.compact_ref, framed.bytes, visit, memory);
      continue;
    }
    if (memory != nullptr && DecodeMemoryPacket(framed.bytes, memory->Slot())) {
      // The hot path: no TracePacket is built (Record() has nothing to keep of a memory event).
      ++memory_event_count_;
      TakeTemplate(memory->Slot());
      memory->Add(position);
      continue;
    }
    position.parsed = packet.ParseFromArray(framed.bytes.data(), static_cast<int>(position.size));
    if (position.parsed) {
      TakeTemplate(&packet);
      Record(position, packet);
    } else {
      // Typically a packet whose writer died half-way: the rest of its reserved space is zeros.
      packet.Clear();
      if (end_.unparseable_packets++ == 0) end_.first_unparseable_offset = position.offset;
      ForgetTemplatesAfterDamage();
    }
    LaunchEvent* launch_slot = nullptr;
    if (memory != nullptr && packet.has_memory()) {
      *memory->Slot() = FromProto(packet.memory());
      memory->Add(position);
    } else if (memory != nullptr && packet.has_launch() &&
               (launch_slot = memory->LaunchSlot()) != nullptr) {
      launch_slot->Swap(packet.mutable_launch());  // the packet is parsed anew next time
      memory->AddLaunch(position);
    } else if (visit) {
      visit(position, packet);
    }
  }
  end_.framing = reader_.end();
  end_.recording = RecordingEnd::FromFooter(footer_);
  // Only now: while the visitor runs, the tables do not hold the packets still to come (the
  // symbolizer then looks for SymbolizedFrame packets in a pass of its own).
  read_ = true;
}

void TraceFile::TakeTemplate(MemoryEventFields* memory) {
  if (memory->writer == 0) return;
  templates_.NoteMemory(*memory);
  memory->writer = 0;
  memory->template_slot = 0;
}

void TraceFile::TakeTemplate(TracePacket* packet) {
  if (packet->has_memory() && packet->memory().writer() != 0) {
    MemoryEventFields fields = FromProto(packet->memory());
    templates_.NoteMemory(fields, packet->memory().writer_started());
    packet->mutable_memory()->clear_writer();
    packet->mutable_memory()->clear_template_slot();
    packet->mutable_memory()->clear_writer_started();
  } else if (packet->has_launch() && packet->launch().writer() != 0) {
    templates_.NoteLaunch(packet->launch());
    packet->mutable_launch()->clear_writer();
    packet->mutable_launch()->clear_template_slot();
    packet->mutable_launch()->clear_writer_started();
  }
}

namespace {

// A memory event's reference expanded: its template with the reference's seq, timestamp and (a
// format-3 one's) address; a format-2 reference repeats the template's address.
void ExpandMemoryRef(const MemoryEventFields& memory_template,
                     const EventTemplates::Resolved& resolved, bool compact,
                     MemoryEventFields* event) {
  *event = memory_template;
  event->seq = resolved.seq;
  event->timestamp_ns = resolved.timestamp;
  if (compact) event->address = resolved.address;
}

}  // namespace

void TraceFile::ReadEventRef(const PacketPosition& position, bool compact, std::string_view bytes,
                             const PacketVisitor& visit, MemoryEventSink* memory) {
  EventTemplates::Resolved resolved;
  if (!ResolveEventRef(compact, bytes, &resolved)) {
    if (end_.unparseable_packets++ == 0) end_.first_unparseable_offset = position.offset;
    ForgetTemplatesAfterDamage();
    return;
  }
  const EventTemplates::Template* found = resolved.found;
  if (found == nullptr) {
    if (end_.unresolved_refs++ == 0) end_.first_unresolved_offset = position.offset;
    return;
  }
  ++event_ref_count_;
  if (!found->launch && memory != nullptr) {
    // The fast path of memory events: straight into the sink's memory.
    ExpandMemoryRef(found->memory, resolved, compact, memory->Slot());
    ++memory_event_count_;
    memory->Add(position);
    return;
  }
  if (found->launch && memory != nullptr) {
    if (LaunchEvent* launch = memory->LaunchSlot()) {  // the same for launches, where it takes them
      ExpandLaunchRef(found->launch_event, resolved, launch);
      ++launch_event_count_;
      memory->AddLaunch(position);
      return;
    }
  }
  if (!found->launch) {
    MemoryEventFields event;
    ExpandMemoryRef(found->memory, resolved, compact, &event);
    ToProto(event, ref_packet_.mutable_memory());
  } else {
    ExpandLaunchRef(found->launch_event, resolved, ref_packet_.mutable_launch());
  }
  Record(position, ref_packet_);
  if (visit) visit(position, ref_packet_);
}

bool TraceFile::ResolveEventRef(bool compact, std::string_view bytes,
                                EventTemplates::Resolved* resolved) {
  if (compact) {
    return templates_.ResolveCompact(bytes, resolved) != EventTemplates::CompactResult::kMalformed;
  }
  EventRefFields ref;
  if (!DecodeEventRef(bytes, &ref) && !ParseEventRef(bytes, &ref)) return false;
  resolved->found =
      templates_.Resolve(ref, &resolved->seq, &resolved->timestamp, &resolved->correlation);
  return true;
}

void TraceFile::ForgetTemplatesAfterDamage() {
  skipped_regions_seen_ = reader_.end().skipped_regions;
  templates_.Forget();
}

void TraceFile::Record(const PacketPosition& position, const TracePacket& packet) {
  switch (packet.data_case()) {
    case TracePacket::kMemory:
      ++memory_event_count_;
      break;
    case TracePacket::kStack: {
      StackRecord& record = stacks_[packet.stack().id()];
      record.stack = packet.stack();
      record.written_at = position.index;
      break;
    }
    case TracePacket::kHeader:
      // Only the first packet is the trace's header; Open() kept it.
      break;
    case TracePacket::kDevice: {
      auto same_ordinal = [&](const Device& d) { return d.ordinal() == packet.device().ordinal(); };
      auto it = std::find_if(devices_.begin(), devices_.end(), same_ordinal);
      if (it != devices_.end()) {
        *it = packet.device();
      } else {
        devices_.push_back(packet.device());
      }
      break;
    }
    case TracePacket::kModule:
      module_by_id_[packet.module().id()] = modules_.size();
      modules_.push_back(ModuleRecord{packet.module(), position.index, std::nullopt});
      break;
    case TracePacket::kModuleUnload: {
      auto it = module_by_id_.find(packet.module_unload().id());
      if (it != module_by_id_.end()) modules_[it->second].unloaded_at = position.index;
      break;
    }
    case TracePacket::kThread:
      threads_[packet.thread().tid()] = packet.thread();  // a renamed thread: the newest name wins
      break;
    case TracePacket::kFooter:
      footer_ = packet.footer();
      break;
    case TracePacket::kSymbolizedFrame:
      AddSymbolizedFrame(packet.symbolized_frame());
      break;
    case TracePacket::kSymbolization:
      AddSymbolization(packet.symbolization());
      break;
    case TracePacket::kKernelName:
      kernel_names_[packet.kernel_name().id()] = packet.kernel_name().name();
      break;
    case TracePacket::kStreamCapture:
      stream_captures_.push_back(packet.stream_capture());
      break;
    case TracePacket::kFrameworkOom:
      framework_ooms_.push_back(packet.framework_oom());
      break;
    case TracePacket::kBackwardPass:
      backward_passes_.push_back(packet.backward_pass());
      break;
    case TracePacket::kLaunch:
      ++launch_event_count_;
      break;
    case TracePacket::kCupti:
      cupti_ = packet.cupti();
      break;
    case TracePacket::kPythonCode:
      python_codes_[packet.python_code().id()] = packet.python_code();
      break;
    case TracePacket::kPythonStatus:
      python_status_ = packet.python_status();
      break;
    case TracePacket::kPythonHolder:
      break;  // an event: the growth analysis takes holders from the packet visitor
    case TracePacket::kPoolUsage:
      AddPoolUsage(packet.pool_usage());
      break;
    case TracePacket::kKernelTiming:
      break;
    case TracePacket::kProcessEnd:
      process_end_ = packet.process_end();
      break;
    case TracePacket::DATA_NOT_SET:  // padding, or a packet type from a newer schema
      break;
  }
}

void TraceFile::AddPoolUsage(const PoolUsage& usage) {
  pool_sizes_.Set(usage.pool(), usage.device(), usage.reserved_bytes());
}

const TraceFile::PoolReserved* TraceFile::FindPoolReserved(int32_t device) const {
  return pool_sizes_.Find(device);
}

void TraceFile::AddSymbolizedFrame(const SymbolizedFrame& frame) {
  symbolized_[{frame.module_id(), frame.pc()}] = frame;
}

void TraceFile::AddSymbolization(const Symbolization& symbolization) {
  symbolized_modules_.insert(symbolization.module_id().begin(), symbolization.module_id().end());
}

const SymbolizedFrame* TraceFile::FindSymbolizedFrame(uint32_t module_id, uint64_t pc) const {
  auto it = symbolized_.find({module_id, pc});
  return it == symbolized_.end() ? nullptr : &it->second;
}

const std::string* TraceFile::FindKernelName(uint64_t id) const {
  auto it = kernel_names_.find(id);
  return it == kernel_names_.end() ? nullptr : &it->second;
}

const PythonCode* TraceFile::FindPythonCode(uint64_t id) const {
  auto it = python_codes_.find(id);
  return it == python_codes_.end() ? nullptr : &it->second;
}

const Thread* TraceFile::FindThread(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? nullptr : &it->second;
}

const StackRecord* TraceFile::FindStack(uint64_t id) const {
  auto it = stacks_.find(id);
  return it == stacks_.end() ? nullptr : &it->second;
}

uint64_t TraceFile::AddDerivedStack(uint64_t preferred_id, Stack stack, uint64_t written_at) {
  uint64_t id = preferred_id;
  while (id == 0 || stacks_.contains(id)) ++id;
  stack.set_id(id);
  StackRecord& record = stacks_[id];
  record.stack = std::move(stack);
  record.written_at = written_at;
  return id;
}

std::string DescribeProcessEnd(const ProcessEnd& end) {
  if (end.signal() == 0) return absl::StrCat("the program exited with status ", end.exit_status());
  const char* name = strsignal(end.signal());
  return absl::StrCat("the program was killed by signal ", end.signal(), " (",
                      name != nullptr ? name : "unknown", ")",
                      end.core_dumped() ? ", core dumped" : "");
}

bool IsGpumemTrace(const std::string& path) {
  TraceReader reader;
  Packet first;
  TracePacket packet;
  return reader.Open(path, nullptr) && reader.Next(&first) &&
         packet.ParseFromArray(first.bytes.data(), static_cast<int>(first.bytes.size())) &&
         packet.has_header();
}

absl::StatusOr<SortedTrace> ReadMemoryEventsBySeq(const std::string& path) {
  SortedTrace sorted;
  absl::StatusOr<std::unique_ptr<TraceFile>> file =
      TraceFile::Read(path, [&](const PacketPosition&, const TracePacket& packet) {
        if (packet.has_memory()) sorted.events.push_back(packet.memory());
      });
  if (!file.ok()) return file.status();
  sorted.file = *std::move(file);
  std::stable_sort(sorted.events.begin(), sorted.events.end(),
                   [](const MemoryEvent& a, const MemoryEvent& b) { return a.seq() < b.seq(); });
  if (!sorted.file->backward_passes().empty()) {
    BackwardCredit credit(sorted.file.get());
    for (MemoryEvent& event : sorted.events) {
      event.set_stack_id(
          credit.StackFor(event.action(), event.seq(), event.tid(), event.stack_id()));
    }
  }
  return sorted;
}

}  // namespace gpumem::report
