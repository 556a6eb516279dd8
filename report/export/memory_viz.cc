#include "report/export/memory_viz.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/analysis/summary_table.h"
#include "report/export/pickle_writer.h"
#include "report/format/names.h"
#include "report/format/sizes.h"
#include "report/replay/memory_space.h"
#include "report/stacks/symbolizer.h"

namespace gpumem::report {
namespace {

constexpr uint64_t kSmallSegmentMax = uint64_t{1} << 20;  // PyTorch's small pool: up to 1 MiB

// One segment while it is live: a plain allocation or a VMM mapping.
struct Segment {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  uint64_t stack_id = 0;
  int32_t device = 0;
  bool cache_segment = false;  // PyTorch's caching allocator's: no block of ours inside
  bool expandable = false;     // a VMM mapping
};

// One device's list of trace entries, pickled as it grows.
struct DeviceTrace {
  std::string bytes;
  PickleWriter writer{&bytes};
  absl::flat_hash_set<uint32_t> defined;  // memo slots written into this list
  uint64_t last_time_us = 0;
  DeviceTrace() { writer.BeginList(); }
};

class MemoryVizObserver final : public MemoryEventObserver {
 public:
  MemoryVizObserver(const TraceFile& trace, Progress* progress)
      : trace_(trace), symbolizer_(&trace), holders_(HoldersOfTrace(trace)), progress_(progress) {}

  void AfterMemoryEvent(const MemoryEvent& event, const Replay& replay) override;
  void AddLaunch(const LaunchEvent&, const Replay&) override {}
  void AllocationEnded(const LiveAllocation& live) override { ended_.push_back(live.seq); }
  void Finished(const Replay&) override {}

  // The whole pickle.
  void Write(std::string* out);

 private:
  bool IsCacheSegment(const MemoryEvent& event) {
    const MemoryHolder* holder = holders_(event.stack_id());
    return !IsStreamOrdered(event) && holder != nullptr &&
           absl::string_view(holder->id) == "pytorch_caching_allocator";
  }
  DeviceTrace& TraceOf(int32_t device) {
    std::unique_ptr<DeviceTrace>& trace = devices_[device];
    if (trace == nullptr) trace = std::make_unique<DeviceTrace>();
    return *trace;
  }
  uint64_t TimeUs(uint64_t timestamp_ns) const {
    const Header& header = trace_.header();
    const uint64_t since_start =
        timestamp_ns > header.start_time_mono_ns() ? timestamp_ns - header.start_time_mono_ns() : 0;
    return (header.start_time_unix_ns() + since_start) / 1000;
  }
  const std::vector<Frame>& FramesOf(uint64_t stack_id) {
    auto it = frames_.find(stack_id);
    if (it == frames_.end()) it = frames_.emplace(stack_id, symbolizer_.Symbolize(stack_id)).first;
    return it->second;
  }
  // The stack's frames, written once into each list and then taken from the memo.
  void WriteFrames(PickleWriter& writer, absl::flat_hash_set<uint32_t>& defined, uint64_t stack_id);
  void Entry(int32_t device, const char* action, const Segment& segment, uint64_t timestamp_ns,
             uint64_t stack_id);
  void Oom(const MemoryEvent& event);
  void Opened(const Segment& segment, bool mapped, uint64_t timestamp_ns);
  void Closed(const Segment& segment, bool mapped, uint64_t timestamp_ns, uint64_t free_stack);
  void WriteSegment(PickleWriter& writer, absl::flat_hash_set<uint32_t>& defined,
                    const Segment& segment);

  const TraceFile& trace_;
  Symbolizer symbolizer_;
  CachedHolderOf holders_;
  Progress* progress_;
  absl::flat_hash_map<uint64_t, std::vector<Frame>> frames_;
  absl::flat_hash_map<uint64_t, uint32_t> memo_slot_;     // stack id -> memo index
  absl::flat_hash_map<uint64_t, Segment> plain_;          // live plain allocations by seq
  std::map<uint64_t, Segment> mappings_;                  // live mappings by address
  absl::flat_hash_map<uint64_t, int32_t> handle_device_;  // cuMemCreate handle -> device
  std::vector<uint64_t> ended_;  // seqs the replay ended while applying the current event
  std::map<int32_t, std::unique_ptr<DeviceTrace>> devices_;
};

void MemoryVizObserver::WriteFrames(PickleWriter& writer, absl::flat_hash_set<uint32_t>& defined,
                                    uint64_t stack_id) {
  const auto [slot, added] = memo_slot_.try_emplace(stack_id, memo_slot_.size());
  if (defined.contains(slot->second)) {
    writer.Get(slot->second);
    return;
  }
  (void)added;
  defined.insert(slot->second);
  writer.BeginList();
  for (const Frame& frame : FramesOf(stack_id)) {
    writer.BeginDict();
    writer.String("filename");
    if (!frame.file.empty()) {
      writer.String(frame.file);
    } else {
      writer.String(frame.module.empty() ? "??" : frame.module);
    }
    writer.String("line");
    writer.Int(frame.line);
    writer.String("name");
    writer.String(frame.function.empty() ? frame.ToString() : frame.function);
    writer.EndDict();
  }
  writer.EndList(slot->second);
}

void MemoryVizObserver::Entry(int32_t device, const char* action, const Segment& segment,
                              uint64_t timestamp_ns, uint64_t stack_id) {
  DeviceTrace& trace = TraceOf(device);
  trace.last_time_us = std::max(trace.last_time_us, TimeUs(timestamp_ns));
  PickleWriter& writer = trace.writer;
  writer.BeginDict();
  writer.Item("action", action);
  writer.Item("addr", segment.address);
  writer.Item("size", segment.size);
  writer.Item("stream", segment.stream);
  writer.Item("time_us", trace.last_time_us);
  writer.String("frames");
  WriteFrames(writer, trace.defined, stack_id);
  writer.EndDict();
}

void MemoryVizObserver::Oom(const MemoryEvent& event) {
  if (event.device() < 0 || IsPinnedHost(event)) return;
  DeviceTrace& trace = TraceOf(event.device());
  trace.last_time_us = std::max(trace.last_time_us, TimeUs(event.timestamp_ns()));
  PickleWriter& writer = trace.writer;
  writer.BeginDict();
  writer.Item("action", "oom");
  writer.Item("size", event.size());
  writer.Item("device_free", event.free_bytes());
  writer.Item("stream", event.stream());
  writer.Item("time_us", trace.last_time_us);
  writer.String("frames");
  WriteFrames(writer, trace.defined, event.stack_id());
  writer.EndDict();
}

void MemoryVizObserver::Opened(const Segment& segment, bool mapped, uint64_t timestamp_ns) {
  Entry(segment.device, mapped ? "segment_map" : "segment_alloc", segment, timestamp_ns,
        segment.stack_id);
  if (!segment.cache_segment)
    Entry(segment.device, "alloc", segment, timestamp_ns, segment.stack_id);
}

void MemoryVizObserver::Closed(const Segment& segment, bool mapped, uint64_t timestamp_ns,
                               uint64_t free_stack) {
  const uint64_t stack = free_stack != 0 ? free_stack : segment.stack_id;
  if (!segment.cache_segment) {
    Entry(segment.device, "free_requested", segment, timestamp_ns, stack);
    Entry(segment.device, "free_completed", segment, timestamp_ns, stack);
  }
  Entry(segment.device, mapped ? "segment_unmap" : "segment_free", segment, timestamp_ns, stack);
}

void MemoryVizObserver::AfterMemoryEvent(const MemoryEvent& event, const Replay&) {
  if (progress_ != nullptr) progress_->Update(trace_.bytes_read());
  // What the replay ended while applying this event: freed by it, or dropped under it.
  for (const uint64_t seq : ended_) {
    const auto it = plain_.find(seq);
    if (it == plain_.end()) continue;
    Closed(it->second, false, event.timestamp_ns(), event.action() == FREE ? event.stack_id() : 0);
    plain_.erase(it);
  }
  ended_.clear();

  const MemorySpace space = SpaceOf(event);
  if (event.action() == ALLOC_FAILED) {
    // An `oom` entry is an out-of-memory error; any other failure allocated nothing.
    if (IsOutOfMemoryResult(event.result())) Oom(event);
    return;
  }
  if (space == MemorySpace::kPhysical) {
    if (event.action() == ALLOC) handle_device_[event.handle()] = event.device();
    return;
  }
  if (space == MemorySpace::kMapping) {
    if (event.action() == ALLOC) {
      const auto device = handle_device_.find(event.handle());
      const int32_t place = device != handle_device_.end() ? device->second : event.device();
      if (place < 0) return;
      Segment segment{event.address(),       event.size(), event.stream(), event.stack_id(), place,
                      IsCacheSegment(event), true};
      // A mapping over live ones replaces them (the replay's rule for plain memory).
      for (auto it = mappings_.lower_bound(event.address());
           it != mappings_.end() && it->first < SaturatingAdd(event.address(), event.size());) {
        Closed(it->second, true, event.timestamp_ns(), 0);
        it = mappings_.erase(it);
      }
      mappings_[segment.address] = segment;
      Opened(segment, true, event.timestamp_ns());
    } else if (event.action() == FREE) {
      // cuMemUnmap(address, size) unmaps every mapping inside the range.
      const uint64_t end = SaturatingAdd(event.address(), event.size());
      auto it = mappings_.upper_bound(event.address());
      if (it != mappings_.begin() &&
          SaturatingAdd(std::prev(it)->first, std::prev(it)->second.size) > event.address()) {
        --it;
      }
      while (it != mappings_.end() && it->first < end) {
        Closed(it->second, true, event.timestamp_ns(), event.stack_id());
        it = mappings_.erase(it);
      }
    }
    return;
  }
  if (space != MemorySpace::kPlain || event.action() != ALLOC) return;
  if (IsPinnedHost(event) || event.device() < 0) return;
  Segment segment{event.address(), event.size(),          event.stream(), event.stack_id(),
                  event.device(),  IsCacheSegment(event), false};
  plain_[event.seq()] = segment;
  Opened(segment, false, event.timestamp_ns());
}

void MemoryVizObserver::WriteSegment(PickleWriter& writer, absl::flat_hash_set<uint32_t>& defined,
                                     const Segment& segment) {
  const uint64_t used = segment.cache_segment ? 0 : segment.size;
  writer.BeginDict();
  writer.String("device");
  writer.Int(segment.device);
  writer.Item("address", segment.address);
  writer.Item("total_size", segment.size);
  writer.Item("allocated_size", used);
  writer.Item("active_size", used);
  writer.Item("requested_size", used);
  writer.Item("stream", segment.stream);
  writer.Item("segment_type", segment.size <= kSmallSegmentMax ? "small" : "large");
  writer.String("segment_pool_id");
  writer.BeginTuple();
  writer.Int(0);
  writer.Int(0);
  writer.EndTuple();
  writer.String("is_expandable");
  writer.Bool(segment.expandable);
  writer.String("frames");
  WriteFrames(writer, defined, segment.stack_id);
  writer.String("blocks");
  writer.BeginList();
  writer.BeginDict();
  writer.Item("address", segment.address);
  writer.Item("size", segment.size);
  writer.Item("requested_size", used);
  writer.Item("state", segment.cache_segment ? "inactive" : "active_allocated");
  writer.String("frames");
  if (segment.cache_segment) {
    writer.BeginList();
    writer.EndList();
  } else {
    WriteFrames(writer, defined, segment.stack_id);
  }
  writer.EndDict();
  writer.EndList();
  writer.EndDict();
}

void MemoryVizObserver::Write(std::string* out) {
  PickleWriter writer(out);
  writer.Protocol();
  writer.BeginDict();

  // What is live at the end, by device and address.
  std::vector<Segment> live;
  for (const auto& [seq, segment] : plain_) live.push_back(segment);
  for (const auto& [address, segment] : mappings_) live.push_back(segment);
  std::sort(live.begin(), live.end(), [](const Segment& a, const Segment& b) {
    return std::pair(a.device, a.address) < std::pair(b.device, b.address);
  });
  absl::flat_hash_set<uint32_t> defined;
  writer.String("segments");
  writer.BeginList();
  for (const Segment& segment : live) WriteSegment(writer, defined, segment);
  writer.EndList();

  // One list per device index, from 0 to the highest the trace knows.
  int32_t devices = 0;
  for (const Device& device : trace_.devices()) devices = std::max(devices, device.ordinal() + 1);
  if (!devices_.empty()) devices = std::max(devices, devices_.rbegin()->first + 1);
  writer.String("device_traces");
  writer.BeginList();
  for (int32_t device = 0; device < devices; ++device) {
    const auto it = devices_.find(device);
    if (it == devices_.end()) {
      writer.BeginList();
      writer.EndList();
      continue;
    }
    it->second->writer.EndList();
    writer.Fragment(it->second->bytes, 1);
  }
  writer.EndList();
  writer.EndDict();
  writer.Stop();
}

}  // namespace

TraceReplay ExportMemoryViz(std::unique_ptr<TraceFile> file, Progress* progress, std::string* out) {
  MemoryVizObserver observer(*file, progress);
  TraceReplay replay = ReplayTrace(std::move(file), nullptr, &observer);
  observer.Write(out);
  return replay;
}

}  // namespace gpumem::report
