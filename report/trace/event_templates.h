// The templates of a format-2 trace (core/trace.proto, EventRef): per writer, what each slot holds
// (a memory event's fields, or a launch) and the writer's previous seq, timestamp and correlation
// id, so that a reference expands to the event the recorder would have written in full.
//
// Memory is bounded by writers x slots, not by the trace's length: a writer is a recording
// thread's state, reused by later threads, and slots are capped at kMaxTemplateSlots.
#ifndef GPUMEM_REPORT_TRACE_EVENT_TEMPLATES_H_
#define GPUMEM_REPORT_TRACE_EVENT_TEMPLATES_H_

#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "core/trace.pb.h"
#include "report/trace/memory_event_decoder.h"

namespace gpumem::report {

class EventTemplates {
 public:
  // The recorder's slots are 1-4096; a slot beyond this defines nothing (a damaged trace's).
  static constexpr uint32_t kMaxTemplateSlots = 1 << 16;

  struct Template {
    bool launch = false;
    MemoryEventFields memory;  // !launch; writer and template_slot 0
    LaunchEvent launch_event;  // launch; writer and template_slot cleared
  };

  // A full memory event (writer != 0): the writer's previous event, and its template when it
  // defines a slot.
  void NoteMemory(const MemoryEventFields& event);
  // The same for a full launch, which also sets the writer's previous correlation id.
  void NoteLaunch(const LaunchEvent& event);

  // The reference's template (nullptr: its slot, or its writer, is not defined: its define was
  // lost with damaged data), and its seq, timestamp and correlation id (launches) into the
  // arguments. The writer's previous event moves on to it whenever the writer is known.
  const Template* Resolve(const EventRefFields& ref, uint64_t* seq, uint64_t* timestamp,
                          uint64_t* correlation);

  // After damage, when any writer may have lost a packet: nothing is known of any writer until
  // its next full events (a lost packet may have redefined a slot or carried the previous seq).
  void Forget() {
    writers_.clear();
    last_writer_ = nullptr;
  }

 private:
  struct Writer {
    uint64_t seq = 0;
    uint64_t timestamp = 0;
    uint64_t correlation = 0;
    absl::flat_hash_map<uint32_t, Template> slots;
  };
  Writer* last_writer_ = nullptr;  // the one looked up last: most references are the same one's
  uint32_t last_writer_id_ = 0;
  // The writer `id` (added when `add`; else nullptr when unknown), kept as the last looked up.
  Writer* FindWriter(uint32_t id, bool add);
  // A full event's part common to both kinds: the writer's previous seq and timestamp, and the
  // slot it defines (nullptr: none).
  Template* NoteFull(uint32_t writer_id, uint64_t seq, uint64_t timestamp, uint32_t template_slot);

  absl::flat_hash_map<uint32_t, std::unique_ptr<Writer>> writers_;  // pointers stay valid
};

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_TRACE_EVENT_TEMPLATES_H_
