#include "report/event_stream.h"

#include <utility>

namespace gpumem::report {
namespace {

constexpr size_t kInitialRing = 1024;

}  // namespace

void SeqReorderBuffer::GrowRing() {
  const size_t capacity = std::max(kInitialRing, std::min(2 * ring_.size(), window_ + 1));
  std::vector<Entry> grown(std::max(capacity, ring_.size() + 1));
  for (size_t i = 0; i < ring_count_; ++i) grown[i] = At(i);
  ring_ = std::move(grown);
  ring_head_ = 0;
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

// Streams memory events from TraceFile::ReadPackets() through the reorder buffer to the visitor.
class ReorderingSink final : public MemoryEventSink {
 public:
  ReorderingSink(size_t window, const MemoryEventVisitor& visit)
      : buffer_(window), release_{&visit, &event_, &released_} {}

  MemoryEventFields* Slot() override { return buffer_.Slot(); }
  void Add(const PacketPosition&) override { buffer_.Commit(release_); }
  void Finish() { buffer_.Flush(release_); }

  uint64_t released() const { return released_; }
  uint64_t out_of_order() const { return buffer_.out_of_order(); }
  uint64_t reordered() const { return buffer_.reordered(); }

 private:
  struct Release {
    const MemoryEventVisitor* visit;
    MemoryEvent* event;  // reused: ToProto() sets every field
    uint64_t* released;
    void operator()(const MemoryEventFields& fields) const {
      ToProto(fields, event);
      ++*released;
      (*visit)(*event);
    }
  };

  SeqReorderBuffer buffer_;
  MemoryEvent event_;
  uint64_t released_ = 0;
  Release release_;
};

}  // namespace

MemoryStreamStats StreamMemoryEventsBySeq(TraceFile& file, const MemoryEventVisitor& visit,
                                          size_t window, const PacketVisitor& packets) {
  ReorderingSink sink(window, visit);
  file.ReadPackets(packets, sink);
  sink.Finish();
  MemoryStreamStats stats;
  stats.events = sink.released();
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
