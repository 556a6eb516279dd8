#include "report/trace/event_stream.h"

#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "report/format/sizes.h"
#include "report/trace/backward_credit.h"

namespace gpumem::report {
// Entry is an aggregate of integers, so calloc's zero bytes are entries as value-initialised.
SeqReorderBuffer::SeqReorderBuffer(size_t window)
    : window_(window),
      ring_(static_cast<Entry*>(std::calloc(window + 1, sizeof(Entry)))),
      ring_capacity_(window + 1) {
  static_assert(std::is_aggregate_v<Entry> && std::is_trivially_copyable_v<Entry>);
  if (ring_ == nullptr) throw std::bad_alloc();
}

void SeqReorderBuffer::InsertOutOfPlace() {
  const Entry entry = At(ring_count_);
  ++reordered_;
  // A few places before the newest: move those up by one. Farther: the heap.
  size_t position = ring_count_ - 1;  // At(position) goes after the entry
  while (position > 0 && At(position - 1).event.seq > entry.event.seq) {
    if (ring_count_ - position >= kMaxShift) {
      heap_.push_back(entry);
      std::push_heap(heap_.begin(), heap_.end(), HeapLess);
      return;
    }
    --position;
  }
  for (size_t i = ring_count_; i > position; --i) At(i) = At(i - 1);
  At(position) = entry;
  ++ring_count_;
}

namespace {

// Streams memory events (and, when asked, launch events) from TraceFile::ReadPackets() through the
// reorder buffer to the visitors. A launch enters the buffer as an entry with only its seq and a
// launch_ref into `launch_pool_`, where the LaunchEvent waits (slots are reused, so the pool
// stays as large as the window at most).
class ReorderingSink final : public MemoryEventSink {
 public:
  ReorderingSink(TraceFile* file, size_t window, MemoryFieldsVisitor visit,
                 const LaunchVisitor& launches)
      : file_(file), credit_(file), buffer_(window), release_{this, visit, &launches} {}

  MemoryEventFields* Slot() override { return buffer_.Slot(); }
  void Add(const PacketPosition&) override { buffer_.Commit(release_); }
  // Where launches are visited, they are written straight into the pool.
  LaunchEvent* LaunchSlot() override {
    if (!*release_.launches) return nullptr;
    if (free_launch_slots_.empty()) {
      free_launch_slots_.push_back(static_cast<uint32_t>(launch_pool_.size()));
      launch_pool_.emplace_back();
    }
    return &launch_pool_[free_launch_slots_.back()];
  }
  // The launch written into LaunchSlot() takes its place in the buffer.
  void AddLaunch(const PacketPosition&) override {
    const uint32_t slot = free_launch_slots_.back();
    free_launch_slots_.pop_back();
    AddEntry(launch_pool_[slot].seq(), slot + 1);
  }
  // A launch nobody visits still takes its place in seq order, as a gap filled: without it each
  // launch would hold the buffer up to its window (see NextIsHeld in event_stream.h).
  void AddSeqOnly(uint64_t seq) { AddEntry(seq, kSeqOnly); }
  void Finish() { buffer_.Flush(release_); }

  uint64_t released() const { return released_; }
  uint64_t impossible_sizes() const { return impossible_sizes_; }
  uint64_t launches_released() const { return launches_released_; }
  uint64_t out_of_order() const { return buffer_.out_of_order(); }
  uint64_t reordered() const { return buffer_.reordered(); }

 private:
  struct Release {
    ReorderingSink* sink;
    MemoryFieldsVisitor visit;
    const LaunchVisitor* launches;
    void operator()(const MemoryEventFields& fields) const {
      if (fields.launch_ref == kSeqOnly) return;
      if (fields.launch_ref != 0) {
        const uint32_t slot = fields.launch_ref - 1;
        ++sink->launches_released_;
        (*launches)(sink->launch_pool_[slot]);
        sink->free_launch_slots_.push_back(slot);
        return;
      }
      if (fields.action == ALLOC && fields.size > kMaxAllocationBytes) {
        ++sink->impossible_sizes_;
        return;
      }
      ++sink->released_;
      // Only a trace with backward passes looks anything up.
      if (sink->file_->backward_passes().empty()) return visit(fields);
      MemoryEventFields credited = fields;
      credited.stack_id = sink->credit_.StackFor(static_cast<Action>(fields.action), fields.seq,
                                                 fields.tid, fields.stack_id);
      visit(credited);
    }
  };
  static constexpr uint32_t kSeqOnly = ~uint32_t{0};

  // An entry of the buffer that stands for no memory event: a launch, or a seq only.
  void AddEntry(uint64_t seq, uint32_t launch_ref) {
    MemoryEventFields* entry = buffer_.Slot();
    *entry = MemoryEventFields{};
    entry->seq = seq;
    entry->launch_ref = launch_ref;
    buffer_.Commit(release_);
  }

  TraceFile* file_;
  BackwardCredit credit_;
  SeqReorderBuffer buffer_;
  std::vector<LaunchEvent> launch_pool_;
  std::vector<uint32_t> free_launch_slots_;
  uint64_t released_ = 0;
  uint64_t impossible_sizes_ = 0;
  uint64_t launches_released_ = 0;
  Release release_;
};

}  // namespace

MemoryStreamStats StreamMemoryEventsBySeq(TraceFile& file, const MemoryEventVisitor& visit,
                                          size_t window, const PacketVisitor& packets,
                                          const LaunchVisitor& launches) {
  MemoryEvent event;  // reused: ToProto() sets every field
  return StreamMemoryEventFieldsBySeq(
      file,
      [&](const MemoryEventFields& fields) {
        ToProto(fields, &event);
        visit(event);
      },
      window, packets, launches);
}

MemoryStreamStats StreamMemoryEventFieldsBySeq(TraceFile& file, MemoryFieldsVisitor visit,
                                               size_t window, const PacketVisitor& packets,
                                               const LaunchVisitor& launches) {
  ReorderingSink sink(&file, window, visit, launches);
  file.ReadPackets(
      [&](const PacketPosition& position, const TracePacket& packet) {
        // Visited launches went to the sink (LaunchSlot()); the others still take their place.
        if (packet.data_case() == TracePacket::kLaunch) sink.AddSeqOnly(packet.launch().seq());
        // Packets that take a seq among the memory events: their places are no gaps.
        if (packet.data_case() == TracePacket::kFrameworkOom) {
          sink.AddSeqOnly(packet.framework_oom().seq());
        } else if (packet.data_case() == TracePacket::kBackwardPass) {
          sink.AddSeqOnly(packet.backward_pass().seq());
        }
        if (packets) packets(position, packet);
      },
      sink);
  sink.Finish();
  MemoryStreamStats stats;
  stats.events = sink.released();
  stats.impossible_sizes = sink.impossible_sizes();
  stats.launches = sink.launches_released();
  stats.reordered = sink.reordered();
  stats.out_of_order = sink.out_of_order();
  return stats;
}

absl::StatusOr<StreamedTrace> ForEachMemoryEventBySeq(const std::string& path,
                                                      const MemoryEventVisitor& visit,
                                                      size_t window) {
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  if (!file.ok()) return file.status();
  StreamedTrace streamed;
  streamed.file = *std::move(file);
  streamed.stats = StreamMemoryEventsBySeq(*streamed.file, visit, window);
  return streamed;
}

}  // namespace gpumem::report
