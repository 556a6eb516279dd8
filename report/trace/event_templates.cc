#include "report/trace/event_templates.h"

namespace gpumem::report {

EventTemplates::Writer& EventTemplates::WriterOf(uint32_t id) {
  if (last_writer_ == nullptr || last_writer_id_ != id) {
    std::unique_ptr<Writer>& writer = writers_[id];
    if (writer == nullptr) writer = std::make_unique<Writer>();
    last_writer_ = writer.get();
    last_writer_id_ = id;
  }
  return *last_writer_;
}

void EventTemplates::NoteMemory(const MemoryEventFields& event) {
  Writer& writer = WriterOf(event.writer);
  writer.seq = event.seq;
  writer.timestamp = event.timestamp_ns;
  if (event.template_slot == 0 || event.template_slot > kMaxTemplateSlots) return;
  Template& defined = writer.slots[event.template_slot];
  defined.launch = false;
  defined.launch_event.Clear();
  defined.memory = event;
  defined.memory.writer = 0;
  defined.memory.template_slot = 0;
}

void EventTemplates::NoteLaunch(const LaunchEvent& event) {
  Writer& writer = WriterOf(event.writer());
  writer.seq = event.seq();
  writer.timestamp = event.timestamp_ns();
  writer.correlation = event.correlation_id();
  if (event.template_slot() == 0 || event.template_slot() > kMaxTemplateSlots) return;
  Template& defined = writer.slots[event.template_slot()];
  defined.launch = true;
  defined.memory = MemoryEventFields{};
  defined.launch_event = event;
  defined.launch_event.clear_writer();
  defined.launch_event.clear_template_slot();
}

const EventTemplates::Template* EventTemplates::Resolve(const EventRefFields& ref, uint64_t* seq,
                                                        uint64_t* timestamp,
                                                        uint64_t* correlation) {
  // Unknown writers are not added: a damaged trace's references cannot grow the table.
  if (last_writer_ == nullptr || last_writer_id_ != ref.writer) {
    auto it = writers_.find(ref.writer);
    if (it == writers_.end()) return nullptr;
    last_writer_ = it->second.get();
    last_writer_id_ = ref.writer;
  }
  Writer& writer = *last_writer_;
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
