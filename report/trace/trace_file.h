// One decoded trace file: frames it with core/trace_reader.h, parses each packet with libprotobuf,
// streams the packets to a visitor in file order, and keeps the interned tables (header, devices,
// modules, threads, stacks, Python code objects) and how the file ended.
//
// Events in a file are nearly, not exactly, in `seq` order (threads race for file space). Reports
// that replay memory want them by seq: report/trace/event_stream.h streams them so, in bounded
// memory, through a reorder window; ReadMemoryEventsBySeq() sorts them all in memory.
#ifndef GPUMEM_REPORT_TRACE_TRACE_FILE_H_
#define GPUMEM_REPORT_TRACE_TRACE_FILE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/trace.pb.h"
#include "core/trace_reader.h"
#include "report/trace/event_templates.h"
#include "report/trace/memory_event_decoder.h"
#include "report/trace/pool_sizes.h"

namespace gpumem::report {

// Where a packet sits in its file.
struct PacketPosition {
  uint64_t index = 0;   // 0-based, in file order
  uint64_t offset = 0;  // byte offset of the packet's tag
  uint64_t size = 0;    // bytes of the TracePacket message
  bool parsed = true;   // false: complete by framing but libprotobuf rejected it (packet is empty)
  // The event was read from an EventRef (format 2, core/trace.proto) and is visited as the
  // recorder would have written it in full.
  bool event_ref = false;
};

struct ModuleRecord {
  Module module;
  uint64_t loaded_at = 0;               // index of the Module packet
  std::optional<uint64_t> unloaded_at;  // index of its ModuleUnload packet, if one came

  // Whether the module was mapped when the packet at `packet_index` was written.
  bool LoadedAt(uint64_t packet_index) const {
    return loaded_at <= packet_index && (!unloaded_at || packet_index < *unloaded_at);
  }
};

struct StackRecord {
  Stack stack;
  uint64_t written_at = 0;  // index of the Stack packet: modules are looked up as of then
};

// How recording ended, from the trace's last footer: the one account of it every report gives.
struct RecordingEnd {
  bool footer_present = false;
  bool exited = false;  // the footer was written at the process's exit (Footer.clean_exit)
  std::optional<int32_t> exit_status;
  RecordingStop stop_reason = STOP_NONE;
  uint64_t stopped_at_seq = 0;
  uint64_t events = 0;
  uint64_t events_dropped = 0;    // packets not written (Footer.events_dropped)
  uint64_t events_reentrant = 0;  // operations made while gpumem was busy on the thread

  static RecordingEnd FromFooter(const std::optional<Footer>& footer);
  uint64_t events_not_recorded() const { return events_dropped + events_reentrant; }
  // One line when events could not be recorded, e.g. "12 events could not be recorded (made inside
  // a signal handler that interrupted gpumem, or from within gpumem); totals are lower bounds";
  // "" when every event was.
  std::string UnrecordedNote() const;
  // The trace holds the whole run: what was live at its end was live at the process's exit.
  bool complete() const { return exited && stop_reason == STOP_NONE; }
  // e.g. "exited with status 3", "the process did not exit cleanly", "recording stopped at event
  // 1234 of 5000: no space left on the file system (3767 events not recorded); exited with status
  // 0".
  std::string Describe() const;
};

// How a trace file ended: the framing (core reader) and the content (footer, parse failures).
struct TraceEndStatus {
  TraceEnd framing;
  RecordingEnd recording;
  uint64_t unparseable_packets = 0;
  uint64_t first_unparseable_offset = 0;
  // Event references whose template was not in the trace (its full event lost with damaged data,
  // or in a damaged trace's place): not visited.
  uint64_t unresolved_refs = 0;
  uint64_t first_unresolved_offset = 0;

  // Some recorded data could not be read: torn, corrupt, read error, packets that do not parse, or
  // event references that cannot be resolved. A missing footer alone is not damage: every packet
  // written is there.
  bool damaged() const { return !framing.ok() || unparseable_packets > 0 || unresolved_refs > 0; }
  // Events were lost before the end (damage skipped over, packets or references not read), not
  // only a torn tail: what the lost ones allocated or freed is missing from every analysis.
  bool lost_events_midway() const {
    return framing.skipped_regions > 0 || unparseable_packets > 0 || unresolved_refs > 0;
  }
  // The trace holds the whole run (RecordingEnd::complete).
  bool complete() const { return recording.complete(); }
  // One phrase for `gpumem dump`'s last line, e.g. "clean (footer present)" or
  // "no footer — the process did not exit cleanly; torn packet at byte 8123 (last 37 bytes
  // unreadable)".
  std::string Describe() const;
  // One line naming the path and byte offset of the damage; empty when !damaged().
  std::string ErrorLine(const std::string& path) const;
  // e.g. "3 event reference(s) to a template lost with damaged data (first at byte 812)".
  std::string UnresolvedText() const;
};

// Called for every packet in file order, after the tables were updated with it (so a Stack
// packet's frames can already be symbolized against the modules loaded before it).
using PacketVisitor = std::function<void(const PacketPosition&, const TracePacket&)>;
// Takes memory events in file order, in place of the PacketVisitor (see ReadPackets), decoded
// straight into memory of its own: no copy per event.
class MemoryEventSink {
 public:
  virtual ~MemoryEventSink() = default;
  // Where the next memory event is to be written.
  virtual MemoryEventFields* Slot() = 0;
  // The event written into Slot(), read at `position`.
  virtual void Add(const PacketPosition& position) = 0;
  // Where the next launch is to be written, for a sink that takes launches too (the visitor then
  // does not see them); nullptr: launches go to the visitor.
  virtual LaunchEvent* LaunchSlot() { return nullptr; }
  // The launch written into LaunchSlot(), read at `position`.
  virtual void AddLaunch(const PacketPosition& /*position*/) {}
};

class TraceFile {
 public:
  // Opens `path` and reads its header. Fails when the file cannot be read, is empty, is not a
  // gpumem trace, or was written by a newer format version; the message is one line naming the
  // path.
  static absl::StatusOr<std::unique_ptr<TraceFile>> Open(const std::string& path);

  // Open() and ReadPackets() together.
  static absl::StatusOr<std::unique_ptr<TraceFile>> Read(const std::string& path,
                                                         const PacketVisitor& visit = nullptr);

  // Reads every packet (the header included) to the end of the file, once. A damaged file is not
  // an error: everything readable is visited, and end() says what was lost.
  void ReadPackets(const PacketVisitor& visit = nullptr);
  // The same, except that memory events go to `memory` (not to `visit`, which may be null), as
  // plain fields: decoded by the hand decoder (report/trace/memory_event_decoder.h) where they have
  // the recorder's layout, which is several times faster than libprotobuf, else by libprotobuf.
  void ReadPackets(const PacketVisitor& visit, MemoryEventSink& memory);

  const std::string& path() const { return path_; }
  const Header& header() const { return header_; }
  // The value of the header's option `name` (the last one given), nullopt when absent.
  std::optional<std::string> HeaderOption(const std::string& name) const {
    std::optional<std::string> value;
    for (const Option& option : header_.option()) {
      if (option.name() == name) value = option.value();
    }
    return value;
  }
  const std::vector<Device>& devices() const { return devices_; }
  // Every stream capture's begin and end, in trace order (CUDA graphs the program captured).
  const std::vector<StreamCapture>& stream_captures() const { return stream_captures_; }
  // The framework's out-of-memory errors (FrameworkOom packets), in trace order.
  const std::vector<FrameworkOom>& framework_ooms() const { return framework_ooms_; }
  // Every backward pass's begin and end (BackwardPass packets), in trace order.
  const std::vector<BackwardPass>& backward_passes() const { return backward_passes_; }
  const std::vector<ModuleRecord>& modules() const { return modules_; }  // in load order
  const Thread* FindThread(uint32_t tid) const;
  const StackRecord* FindStack(uint64_t id) const;
  // Adds a stack the analyzer derived from recorded ones (report/trace/backward_credit.h) under
  // `preferred_id`, or the next id after it that no stack has (never 0); returns the id. Its
  // frames are looked up as of the packet with index `written_at`.
  uint64_t AddDerivedStack(uint64_t preferred_id, Stack stack, uint64_t written_at);
  // Whether a native stack runs PyTorch's autograd engine, where the caller can tell (a symbolizer
  // of a later stage): backward passes credit such a thread's allocations like those of a thread
  // named pt_autograd (report/trace/backward_credit.h). Null: by thread names alone.
  using StackTest = std::function<bool(uint64_t stack_id)>;
  void set_autograd_stack_test(StackTest test) { autograd_stack_test_ = std::move(test); }
  const StackTest& autograd_stack_test() const { return autograd_stack_test_; }
  // The kernel name of a LaunchEvent's kernel_id, or nullptr (0, or not yet read).
  const std::string* FindKernelName(uint64_t id) const;
  // The Python code object `id` (PythonCode packet: file, function, first line), or nullptr (not
  // in the trace, or not yet read: it is written before the first Stack that refers to it).
  const PythonCode* FindPythonCode(uint64_t id) const;
  size_t python_code_count() const { return python_codes_.size(); }
  // What the recorder found of the Python interpreter (the last PythonStatus packet): none in a
  // process without Python.
  const std::optional<PythonStatus>& python_status() const { return python_status_; }
  // What the trace says about the CUPTI subscriber (the last CuptiStatus packet), if anything.
  const std::optional<CuptiStatus>& cupti() const { return cupti_; }
  uint64_t launch_event_count() const { return launch_event_count_; }
  // The memory pools' reserved sizes on a device (report/trace/pool_sizes.h); nullptr when the
  // trace has none for `device`. Complete once the packets were read.
  using PoolReserved = PoolSizes::Device;
  const PoolReserved* FindPoolReserved(int32_t device) const;
  const std::optional<Footer>& footer() const { return footer_; }
  // How the program ended, as `gpumem record` appended it (the last ProcessEnd packet), if it did.
  const std::optional<ProcessEnd>& process_end() const { return process_end_; }
  const TraceEndStatus& end() const { return end_; }
  uint64_t packet_count() const { return packet_count_; }
  // Memory events read, those from references included (not those that could not be resolved).
  uint64_t memory_event_count() const { return memory_event_count_; }
  // Memory and launch events read from EventRefs (format 2).
  uint64_t event_ref_count() const { return event_ref_count_; }
  // Bytes of the file read so far (the end of the packet read last), and the file's size: for
  // progress (report/trace/progress.h).
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t file_size() const { return reader_.file_size(); }
  // Whether ReadPackets() ran to the end: the tables then hold the whole file (not yet while its
  // visitor runs).
  bool packets_read() const { return read_; }

  // The frames `gpumem symbolize` recorded for return address `pc` in module `module_id`, or
  // nullptr. Complete only once the packets were read (they usually come last).
  const SymbolizedFrame* FindSymbolizedFrame(uint32_t module_id, uint64_t pc) const;
  size_t symbolized_frame_count() const { return symbolized_.size(); }
  // Adds a SymbolizedFrame packet to the table (a later one for the same module and pc wins).
  void AddSymbolizedFrame(const SymbolizedFrame& frame);
  // Whether `gpumem symbolize` looked for module `module_id`'s binary (a Symbolization packet
  // names it): its frames are then resolved from the trace alone. Complete once the packets
  // were read.
  bool ModuleSymbolized(uint32_t module_id) const {
    return symbolized_modules_.contains(module_id);
  }
  void AddSymbolization(const Symbolization& symbolization);
  void AddPoolUsage(const PoolUsage& usage);

 private:
  TraceFile() = default;
  void Record(const PacketPosition& position, const TracePacket& packet);
  void ReadAll(const PacketVisitor& visit, MemoryEventSink* memory);
  // A full memory or launch event with a writer (format 2): notes its template, and hands it on
  // without the writer's fields.
  void TakeTemplate(MemoryEventFields* memory);
  void TakeTemplate(TracePacket* packet);
  // An EventRef (`position` says so), expanded and visited as the event it stands for. By
  // reference: a copy of the position just stored field by field stalls on store forwarding.
  void ReadEventRef(const PacketPosition& position, bool compact, std::string_view bytes,
                    const PacketVisitor& visit, MemoryEventSink* memory);
  // An EventRef (format 2) or compact_ref (3) against the templates; false when malformed.
  bool ResolveEventRef(bool compact, std::string_view bytes, EventTemplates::Resolved* resolved);
  // Damage was met (a packet that does not parse, a region skipped): any writer may have lost one.
  void ForgetTemplatesAfterDamage();

  std::string path_;
  TraceReader reader_;
  Packet first_packet_;   // the header, already framed by Open()
  bool reading_ = false;  // ReadPackets() started
  bool read_ = false;     // ReadPackets() finished
  Header header_;
  std::vector<Device> devices_;
  std::vector<ModuleRecord> modules_;
  absl::flat_hash_map<uint32_t, size_t> module_by_id_;  // index into modules_
  absl::flat_hash_map<uint32_t, Thread> threads_;
  absl::flat_hash_map<uint64_t, StackRecord> stacks_;
  absl::flat_hash_map<uint64_t, std::string> kernel_names_;
  std::vector<StreamCapture> stream_captures_;
  std::vector<FrameworkOom> framework_ooms_;
  std::vector<BackwardPass> backward_passes_;
  StackTest autograd_stack_test_;
  std::optional<CuptiStatus> cupti_;
  absl::flat_hash_map<uint64_t, PythonCode> python_codes_;
  std::optional<PythonStatus> python_status_;
  uint64_t launch_event_count_ = 0;
  PoolSizes pool_sizes_;
  EventTemplates templates_;
  TracePacket ref_packet_;  // an expanded reference, reused
  uint64_t skipped_regions_seen_ = 0;
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, SymbolizedFrame> symbolized_;
  absl::flat_hash_set<uint32_t> symbolized_modules_;
  std::optional<Footer> footer_;
  std::optional<ProcessEnd> process_end_;
  TraceEndStatus end_;
  uint64_t packet_count_ = 0;
  uint64_t memory_event_count_ = 0;
  uint64_t event_ref_count_ = 0;
  uint64_t bytes_read_ = 0;
};

// "the program exited with status 3", "the program was killed by signal 9 (Killed)" (", core
// dumped"): one phrase for `gpumem record`'s message and the report.
std::string DescribeProcessEnd(const ProcessEnd& end);

// Whether `path` is a gpumem trace: a regular file whose first packet is a Header. Never blocks (a
// FIFO is no trace).
bool IsGpumemTrace(const std::string& path);

// A whole trace with its memory events in `seq` order (ties keep file order). Holds every event in
// memory (about 200 bytes each): for traces of up to some millions of events.
// ForEachMemoryEventBySeq (report/trace/event_stream.h) streams them instead, in memory bounded by
// its reorder window.
struct SortedTrace {
  std::unique_ptr<TraceFile> file;
  std::vector<MemoryEvent> events;
};
absl::StatusOr<SortedTrace> ReadMemoryEventsBySeq(const std::string& path);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_TRACE_TRACE_FILE_H_
