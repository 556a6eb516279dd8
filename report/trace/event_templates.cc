#include "report/trace/event_templates.h"

namespace gpumem::report {

EventTemplates::Writer* EventTemplates::FindWriter(uint32_t id, bool add) {
  if (last_writer_ == nullptr || last_writer_id_ != id) {
    Writer* writer;
    if (add) {
      std::unique_ptr<Writer>& added = writers_[id];
      if (added == nullptr) added = std::make_unique<Writer>();
      writer = added.get();
    } else {
      auto it = writers_.find(id);
      if (it == writers_.end()) return nullptr;
      writer = it->second.get();
    }
    last_writer_ = writer;
    last_writer_id_ = id;
  }
  return last_writer_;
}

EventTemplates::Template* EventTemplates::NoteFull(uint32_t writer_id, uint64_t seq,
                                                   uint64_t timestamp, uint32_t template_slot) {
  Writer& writer = *FindWriter(writer_id, /*add=*/true);
  writer.seq = seq;
  writer.timestamp = timestamp;
  if (template_slot == 0 || template_slot > kMaxTemplateSlots) return nullptr;
  return &writer.slots[template_slot];
}

void EventTemplates::NoteMemory(const MemoryEventFields& event) {
  Template* defined = NoteFull(event.writer, event.seq, event.timestamp_ns, event.template_slot);
  if (defined == nullptr) return;
  defined->launch = false;
  defined->launch_event.Clear();
  defined->memory = event;
  defined->memory.writer = 0;
  defined->memory.template_slot = 0;
}

void EventTemplates::NoteLaunch(const LaunchEvent& event) {
  // NoteFull leaves the writer as the one looked up last.
  Template* defined =
      NoteFull(event.writer(), event.seq(), event.timestamp_ns(), event.template_slot());
  last_writer_->correlation = event.correlation_id();
  if (defined == nullptr) return;
  defined->launch = true;
  defined->memory = MemoryEventFields{};
  defined->launch_event = event;
  defined->launch_event.clear_writer();
  defined->launch_event.clear_template_slot();
}

const EventTemplates::Template* EventTemplates::Resolve(const EventRefFields& ref, uint64_t* seq,
                                                        uint64_t* timestamp,
                                                        uint64_t* correlation) {
  // Unknown writers are not added: a damaged trace's references cannot grow the table.
  Writer* found = FindWriter(ref.writer, /*add=*/false);
  if (found == nullptr) return nullptr;
  Writer& writer = *found;
  // Unsigned arithmetic: the recorder's differences wrap the same way.
  writer.seq += 1 + static_cast<uint64_t>(ref.seq_delta);
  writer.timestamp += static_cast<uint64_t>(ref.time_delta);
  // A memory event's reference carries no correlation delta (0): the previous launch's stays.
  writer.correlation += static_cast<uint64_t>(ref.correlation_delta);
  *seq = writer.seq;
  *timestamp = writer.timestamp;
  *correlation = writer.correlation;
  auto slot = writer.slots.find(ref.slot);
  return slot == writer.slots.end() ? nullptr : &slot->second;
}

}  // namespace gpumem::report
