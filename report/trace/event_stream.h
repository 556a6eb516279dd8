// One trace's memory events in `seq` order, streamed: memory stays bounded by a reorder window,
// not by the length of the trace.
//
// Events in a file are nearly, not exactly, in seq order: threads race for file space, and a free
// takes its seq before the call while an allocation takes it after, so an event can land in the
// file after a few events with a larger seq. A SeqReorderBuffer holds back up to `window` events
// (default kReorderWindow) and releases the smallest seq first (ties in file order) once it holds
// more than that, and everything at the end of the file. An event may therefore arrive after up to
// `window` events with a larger seq and still be replayed in its place. One arriving later still,
// with a seq below one already released, cannot be put in its place any more: it is counted
// (out_of_order) and released at once, late, never an error.
//
// An allocation of more than kMaxAllocationBytes (report/format/sizes.h) cannot have succeeded: it
// is not visited, only counted (impossible_sizes), so that no analysis sees a size that overflows
// its arithmetic (report/README.md, "Impossible sizes"). Its free, if any, then frees nothing
// known.
//
// The recorder numbers a process's events 1, 2, 3, ... with no gaps, so the event after the last
// one released (seq 1 first) is released as soon as it is the smallest held: nothing can come
// before it. The buffer then holds a handful of events, in cache, instead of a whole window; a gap
// (an event lost, a seq taken and not used) only costs holding the window once, until the events
// after it are released by the window rule. Unique seqs are assumed for this: a trace with
// duplicates still replays, but a duplicate of an event released early is counted out of order.
#ifndef GPUMEM_REPORT_TRACE_EVENT_STREAM_H_
#define GPUMEM_REPORT_TRACE_EVENT_STREAM_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "core/trace.pb.h"
#include "report/trace/memory_event_decoder.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// Events held back to restore seq order: 65536 events, 8 MiB of buffer (128 bytes an event).
inline constexpr size_t kReorderWindow = 65536;

class SeqReorderBuffer {
 public:
  explicit SeqReorderBuffer(size_t window = kReorderWindow);

  // Adds the next event in file order. Calls `release(const MemoryEventFields&)` for each event
  // that leaves the buffer (none, one, or this one at once when it is late), in seq order. The
  // reference is valid during the call only; `release` must not call back into the buffer.
  template <typename Release>
  void Push(const MemoryEventFields& event, Release&& release) {
    *Slot() = event;
    Commit(release);
  }

  // The same in two steps, without a copy: the next event is written into Slot(), then Commit()
  // adds it.
  MemoryEventFields* Slot() {
    return &At(ring_count_).event;  // after each Commit the ring holds at most the window
  }
  template <typename Release>
  void Commit(Release&& release) {
    Entry& entry = At(ring_count_);
    if (ring_count_ == 0 && heap_.empty() && entry.event.seq == last_released_seq_ + 1) {
      // Nearly always: nothing held, and this is the next seq, which leaves at once.
      ++next_order_;
      Note(entry);
      release(static_cast<const MemoryEventFields&>(entry.event));
      return;
    }
    if (released_any_ && entry.event.seq < last_released_seq_) {
      ++out_of_order_;
      release(static_cast<const MemoryEventFields&>(entry.event));
      return;
    }
    entry.order = next_order_++;
    if (ring_count_ == 0 || At(ring_count_ - 1).event.seq <= entry.event.seq) {
      ++ring_count_;  // nearly always: at or after the newest
    } else {
      InsertOutOfPlace();
    }
    while (size() > window_ || NextIsHeld()) ReleaseOne(release);
  }

  // Releases everything held, in seq order: at the end of the file.
  template <typename Release>
  void Flush(Release&& release) {
    while (size() > 0) ReleaseOne(release);
  }

  size_t window() const { return window_; }
  size_t size() const { return ring_count_ + heap_.size(); }
  // Events that arrived with a seq below one already released: released late, at arrival.
  uint64_t out_of_order() const { return out_of_order_; }
  // Events that arrived after one with a larger seq and were put back in their place.
  uint64_t reordered() const { return reordered_; }

 private:
  struct Entry {
    MemoryEventFields event;
    uint64_t order = 0;  // arrival: ties in seq keep file order
  };
  // An event more places than this before the newest goes to the heap instead of the ring.
  static constexpr size_t kMaxShift = 64;

  // Whether the smallest seq held is the one after the last released (1 before any): no event
  // can come before it.
  bool NextIsHeld() {
    if (ring_count_ == 0 && heap_.empty()) return false;
    const uint64_t next = last_released_seq_ + 1;
    if (!heap_.empty() && heap_.front().event.seq == next) return true;
    return ring_count_ != 0 && At(0).event.seq == next;
  }

  static bool Before(const Entry& a, const Entry& b) {
    return a.event.seq != b.event.seq ? a.event.seq < b.event.seq : a.order < b.order;
  }
  // std::push_heap builds a max-heap: "less" is "released later".
  static bool HeapLess(const Entry& a, const Entry& b) { return Before(b, a); }

  Entry& At(size_t i) {
    const size_t slot = ring_head_ + i;
    return ring_[slot < ring_capacity_ ? slot : slot - ring_capacity_];
  }
  // The entry just written after the newest belongs before it: moves it into place.
  void InsertOutOfPlace();

  template <typename Release>
  void ReleaseOne(Release& release) {
    if (!heap_.empty() && (ring_count_ == 0 || Before(heap_.front(), At(0)))) {
      std::pop_heap(heap_.begin(), heap_.end(), HeapLess);
      Note(heap_.back());
      release(static_cast<const MemoryEventFields&>(heap_.back().event));
      heap_.pop_back();
      return;
    }
    Entry& next = At(0);
    Note(next);
    release(static_cast<const MemoryEventFields&>(next.event));
    // Emptied, the ring starts over at its first entry: events then keep to the few entries
    // in cache, not the whole ring (8 MiB once a gap has grown it to the window).
    if (--ring_count_ == 0) {
      ring_head_ = 0;
    } else if (++ring_head_ == ring_capacity_) {
      ring_head_ = 0;
    }
  }
  void Note(const Entry& entry) {
    last_released_seq_ = entry.event.seq;
    released_any_ = true;
  }

  size_t window_;
  // Most events: a ring kept sorted by (seq, arrival), oldest first; an event lands at the back
  // or a few places before it. Room for window + 1 entries from calloc, which takes a block this
  // large from the kernel as zero pages: nothing is written until used, and a trace in order only
  // ever touches the first few entries. (A vector grown by doubling value-initialised and copied
  // it at every step, ~19 MB of writes and twice the page faults once one event came a window
  // late: a fifth of `gpumem report`'s time on such a trace of 1M events.)
  struct FreeEntries {
    void operator()(Entry* entries) const { std::free(entries); }
  };
  std::unique_ptr<Entry[], FreeEntries> ring_;
  size_t ring_capacity_;  // kept apart: At() needs it on every call
  size_t ring_head_ = 0;
  size_t ring_count_ = 0;
  // Events that arrived far out of place: a heap by (seq, arrival).
  std::vector<Entry> heap_;
  uint64_t next_order_ = 0;
  uint64_t last_released_seq_ = 0;
  bool released_any_ = false;
  uint64_t out_of_order_ = 0;
  uint64_t reordered_ = 0;
};

struct MemoryStreamStats {
  uint64_t events = 0;            // memory events visited
  uint64_t impossible_sizes = 0;  // allocations larger than kMaxAllocationBytes: not visited
  uint64_t launches = 0;          // launch events visited (when a LaunchVisitor was given)
  uint64_t reordered = 0;         // of which came in the file after a larger seq, put back in place
  uint64_t out_of_order = 0;      // of which came beyond the reorder window and were visited late
};

using MemoryEventVisitor = std::function<void(const MemoryEvent&)>;
// The same events as plain fields: what the replay takes, with no MemoryEvent built per event.
using MemoryFieldsVisitor = absl::FunctionRef<void(const MemoryEventFields&)>;
using LaunchVisitor = std::function<void(const LaunchEvent&)>;

// Reads `file`'s packets (TraceFile::ReadPackets, so once per TraceFile) and calls `visit` for
// every memory event in seq order as restored by a SeqReorderBuffer of `window` events; every
// other packet goes to `packets` (may be null) in file order, as it reaches the buffer. The tables
// of `file` are current up to the packet read last, which is ahead of the event visited. With
// `launches`, launch events take their place in the same seq order, through the same buffer
// (the window counts both), and go to `launches` instead of `packets`.
MemoryStreamStats StreamMemoryEventsBySeq(TraceFile& file, const MemoryEventVisitor& visit,
                                          size_t window = kReorderWindow,
                                          const PacketVisitor& packets = nullptr,
                                          const LaunchVisitor& launches = nullptr);
// The same, each memory event visited as plain fields (valid during the call only).
MemoryStreamStats StreamMemoryEventFieldsBySeq(TraceFile& file, MemoryFieldsVisitor visit,
                                               size_t window = kReorderWindow,
                                               const PacketVisitor& packets = nullptr,
                                               const LaunchVisitor& launches = nullptr);

// A trace read whole by ForEachMemoryEventBySeq.
struct StreamedTrace {
  std::unique_ptr<TraceFile> file;
  MemoryStreamStats stats;
};
// Opens `path` (TraceFile::Open: fails as it does) and streams it (StreamMemoryEventsBySeq). A
// damaged file streams what could be read; file->end() says what was lost.
absl::StatusOr<StreamedTrace> ForEachMemoryEventBySeq(const std::string& path,
                                                      const MemoryEventVisitor& visit,
                                                      size_t window = kReorderWindow);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_TRACE_EVENT_STREAM_H_
