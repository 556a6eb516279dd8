// The templates of a format-2 or -3 trace (core/trace.proto, EventRef and compact_ref): per
// writer, what each slot holds (a memory event's fields, or a launch), the writer's previous seq,
// timestamp and correlation id and (format 3) the mirror of its address table, so that a
// reference expands to the event the recorder would have written in full.
//
// Memory is bounded by writers x slots, not by the trace's length: a writer is a recording
// thread's state, reused by later threads, and slots are capped at kMaxTemplateSlots.
#ifndef GPUMEM_REPORT_TRACE_EVENT_TEMPLATES_H_
#define GPUMEM_REPORT_TRACE_EVENT_TEMPLATES_H_

#include <array>
#include <bitset>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/trace.pb.h"
#include "core/trace_format.h"
#include "report/trace/memory_event_decoder.h"

namespace gpumem::report {

class EventTemplates {
 public:
  // The recorder's slots are 1-4096; a slot beyond this defines nothing (a damaged trace's).
  static constexpr uint32_t kMaxTemplateSlots = 1 << 16;
  // What a damaged or crafted trace can make the reader hold, whatever its length: writers (one a
  // recording thread alive at once: a real trace has tens) and templates over all writers (a
  // writer's are at most 4096). Beyond them a full event defines nothing, and references to it
  // are counted as unresolved, as those to templates lost with damaged data.
  static constexpr size_t kMaxWriters = 1 << 14;
  static constexpr size_t kMaxTemplates = 1 << 20;
  explicit EventTemplates(size_t max_writers = kMaxWriters, size_t max_templates = kMaxTemplates)
      : max_writers_(max_writers), max_templates_(max_templates) {}
  // A writer's address table (core/trace.proto, compact_ref).
  // A writer's address table (core/trace.proto, compact_ref; core/trace_format.h).
  static constexpr uint64_t kAddressEntries = proto::kAddressEntries;
  static constexpr uint32_t kLaunchPointerEntries = proto::kLaunchPointerEntries;

  struct Template {
    bool launch = false;
    MemoryEventFields memory;  // !launch; writer and template_slot 0
    LaunchEvent launch_event;  // launch; writer and template_slot cleared
  };

  // A full memory event (writer != 0): the writer's previous event, its template when it defines
  // a slot, and its address into the writer's table (which starts anew when `writer_started`).
  void NoteMemory(const MemoryEventFields& event, bool writer_started = false);
  // The same for a full launch, which also sets the writer's previous correlation id.
  void NoteLaunch(const LaunchEvent& event);

  // A compact_ref (format 3) resolved: its template, seq, timestamp, correlation id (launches)
  // and address values: a memory event's address, else a launch's pointers, in order.
  struct Resolved {
    const Template* found = nullptr;
    uint64_t seq = 0;
    uint64_t timestamp = 0;
    uint64_t correlation = 0;
    uint64_t address = 0;                              // a memory event's (with addresses set)
    const std::vector<uint64_t>* addresses = nullptr;  // valid until the next call
  };
  enum class CompactResult {
    kResolved,
    kUnresolved,  // its writer or slot is unknown, or an address it needs was lost with damage
    kMalformed,   // not a compact_ref: damaged data
  };
  // `body` is a TraceReader packet's: kPacketReadSlack readable bytes follow it.
  CompactResult ResolveCompact(std::string_view body, Resolved* out);

  // The reference's template (nullptr: its slot, or its writer, is not defined: its define was
  // lost with damaged data), and its seq, timestamp and correlation id (launches) into the
  // arguments. The writer's previous event moves on to it whenever the writer is known.
  const Template* Resolve(const EventRefFields& ref, uint64_t* seq, uint64_t* timestamp,
                          uint64_t* correlation);

  // After damage, when any writer may have lost a packet: nothing is known of any writer until
  // its next full events (a lost packet may have redefined a slot or carried the previous seq).
  void Forget() {
    writers_.clear();
    direct_writers_.clear();
    direct_slot_writers_ = 0;
    templates_ = 0;
    last_writer_ = nullptr;
  }

 private:
  struct Writer {
    uint64_t seq = 0;
    uint64_t timestamp = 0;
    uint64_t correlation = 0;
    // Stable pointers: `direct` points into them.
    absl::flat_hash_map<uint32_t, std::unique_ptr<Template>> slots;
    // slots by number for the recorder's (below kDirectSlots), without hashing: every reference
    // looks its slot up. Empty for the writers beyond kMaxDirectWriters.
    std::vector<Template*> direct;
    // The mirror of the recorder's address table. Unknown until the writer's writer_started event
    // (a writer first seen after damage), and again after a reference that could not be resolved
    // (it stored values this reader does not know where).
    std::array<uint64_t, kAddressEntries> addresses{};
    std::bitset<kAddressEntries> known;
    uint64_t last_address = 0;
    bool last_address_known = false;
    // By (slot - 1) % kLaunchPointerEntries: the pointers of the slot's last launch (0: none).
    struct LaunchPointers {
      uint32_t slot = 0;
      std::vector<uint64_t> pointers;
    };
    std::array<LaunchPointers, kLaunchPointerEntries> launch_pointers;

    void StartAddresses();
    void StoreAddress(uint64_t value);
    void ForgetAddresses();
    // The address a code stands for (a literal's against `base`); false when it needs what is
    // unknown.
    bool DecodeAddress(uint64_t code, uint64_t base, bool base_known, uint64_t* value) const;
  };
  Writer* last_writer_ = nullptr;  // the one looked up last: most references are the same one's
  uint32_t last_writer_id_ = 0;
  // The writer `id` (added when `add`, unless there are max_writers_; else nullptr when unknown).
  // Inline for the small ids a recorder gives its threads, which nearly every reference has.
  Writer* FindWriter(uint32_t id, bool add) {
    if (id < direct_writers_.size() && direct_writers_[id] != nullptr) return direct_writers_[id];
    return FindOtherWriter(id, add);
  }
  // FindWriter's way for the rest, kept as the last looked up.
  Writer* FindOtherWriter(uint32_t id, bool add);
  // A reference's writer moves on to it: its seq, timestamp and correlation id into the
  // arguments; returns the template of its slot (nullptr: not defined).
  static const Template* Advance(Writer& writer, const EventRefFields& ref, uint64_t* seq,
                                 uint64_t* timestamp, uint64_t* correlation);
  // A memory event's one address code, the common case: a table index or a literal, all of
  // `p` to `end`, resolved and stored. False when it is anything else (the general path then
  // decodes it).
  static bool DecodeOneAddress(Writer* writer, const uint8_t* p, const uint8_t* end,
                               uint64_t* value);
  // A full event's part common to both kinds: the writer's previous seq and timestamp, and the
  // slot it defines (nullptr: none).
  Template* NoteFull(Writer* writer, uint64_t seq, uint64_t timestamp, uint32_t template_slot);

  // A compact_ref's address codes into addresses_ (count of them, `slot`'s), then into the table;
  // false when malformed. addresses_ ends short when a code needs what is unknown.
  bool DecodeAddresses(Writer* writer, uint32_t slot, const uint8_t* p, const uint8_t* end,
                       size_t count);

  size_t max_writers_;
  size_t max_templates_;
  size_t templates_ = 0;                                            // defined, over all writers
  absl::flat_hash_map<uint32_t, std::unique_ptr<Writer>> writers_;  // pointers stay valid
  // writers_ by id for the small ids a recorder gives (its threads' states), without hashing:
  // references of several threads interleave, so the last writer alone misses often.
  static constexpr uint32_t kDirectWriters = 1024;
  // Slots looked up by index (the recorder's 1-4096), for this many writers (32 KiB each).
  static constexpr uint32_t kDirectSlots = 4097;
  static constexpr size_t kMaxDirectWriters = 256;
  size_t direct_slot_writers_ = 0;
  std::vector<Writer*> direct_writers_;
  std::vector<uint64_t> addresses_;  // the last compact_ref's address values
};

// A launch's reference expanded into `launch`, a slot reused from launch to launch: the template's
// fields with the reference's seq, timestamp, correlation id and (format 3) pointers. Field by
// field, not as a message copy (Clear() and MergeFrom() took a tenth of a launch-heavy report);
// a message with unknown fields on either side is copied whole.
void ExpandLaunchRef(const LaunchEvent& launch_template, const EventTemplates::Resolved& resolved,
                     LaunchEvent* launch);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_TRACE_EVENT_TEMPLATES_H_
