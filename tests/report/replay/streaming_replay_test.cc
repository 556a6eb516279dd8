// The streaming replay (report/trace/event_stream.h, report/replay/replay.h): the reorder buffer
// restores seq order to events shuffled within its window and counts those beyond it; a trace file
// written shuffled replays exactly as the same trace written in order and as the in-memory sort; a
// packet the hand decoder declines still arrives (through libprotobuf); and the replay's table of
// plain allocations (report/replay/address_map.h, stale entries erased lazily) agrees with a plain
// reference model on random traces full of overlaps, double frees and unknown frees.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/analysis/fragmentation.h"
#include "report/analysis/growth.h"
#include "report/analysis/oom.h"
#include "report/analysis/summary_table.h"
#include "report/replay/replay.h"
#include "report/stacks/memory_holders.h"
#include "report/trace/event_stream.h"
#include "report/trace/memory_event_decoder.h"
#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using testing::FooterPacket;
using testing::Framed;
using testing::HeaderPacket;
using testing::UniqueTempPath;

// A random process: cudaMalloc / cudaFree, cudaMallocAsync / cudaFreeAsync, pinned host memory
// and VMM, with failures, double frees, frees of unknown pointers and allocations over live ones.
std::vector<MemoryEvent> RandomTrace(uint64_t n, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<MemoryEvent> events;
  std::vector<uint64_t> live;
  auto add = [&]() -> MemoryEvent& {
    MemoryEvent& event = events.emplace_back();
    event.set_seq(events.size());
    event.set_timestamp_ns(1000 * events.size());
    event.set_tid(100 + random() % 2);
    return event;
  };
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t roll = random() % 100;
    if (roll < 45 || live.empty()) {
      MemoryEvent& event = add();
      const bool pool = random() % 4 == 0;
      const bool host = !pool && random() % 10 == 0;
      event.set_api(pool ? CUDA_MALLOC_ASYNC : host ? CUDA_MALLOC_HOST : CUDA_MALLOC);
      event.set_kind(pool ? POOL : host ? PINNED_HOST : DEVICE);
      event.set_action(random() % 50 == 0 ? ALLOC_FAILED : ALLOC);
      if (event.action() == ALLOC_FAILED) event.set_result(2);  // out of memory
      event.set_device(host ? -1 : static_cast<int32_t>(random() % 2));
      event.set_size((1 + random() % 64) << 12);
      // A small address space: allocations land on and over live ones now and then.
      event.set_address(0x7f0000000000 + ((random() % 4096) << 12));
      event.set_stack_id(1 + random() % 20);
      if (event.action() == ALLOC) live.push_back(event.address());
    } else if (roll < 90) {
      MemoryEvent& event = add();
      const size_t index = random() % live.size();
      event.set_api(random() % 4 == 0 ? CUDA_FREE_ASYNC : CUDA_FREE);
      event.set_action(FREE);
      event.set_device(-1);
      event.set_address(live[index]);
      if (random() % 20 != 0) {  // sometimes freed twice
        live[index] = live.back();
        live.pop_back();
      }
    } else if (roll < 93) {
      MemoryEvent& event = add();  // a pointer never allocated
      event.set_api(CUDA_FREE);
      event.set_action(FREE);
      event.set_device(-1);
      event.set_address(0x100000 + random() % 1000);
    } else {
      // VMM: reserve, create, map, unmap, release, free the reservation.
      const uint64_t base = 0x600000000000 + ((random() % 64) << 24);
      const uint64_t handle = 1 + random() % 32;
      const Api apis[] = {CU_MEM_ADDRESS_RESERVE, CU_MEM_CREATE,  CU_MEM_MAP,
                          CU_MEM_UNMAP,           CU_MEM_RELEASE, CU_MEM_ADDRESS_FREE};
      const Action actions[] = {ALLOC, ALLOC, ALLOC, FREE, FREE, FREE};
      const MemoryKind kinds[] = {VMM_RESERVATION, VMM_PHYSICAL, VMM_MAPPING,
                                  VMM_MAPPING,     VMM_PHYSICAL, VMM_RESERVATION};
      const size_t step = random() % 6;
      MemoryEvent& event = add();
      event.set_api(apis[step]);
      event.set_kind(kinds[step]);
      event.set_action(actions[step]);
      event.set_device(step == 1 ? 0 : -1);
      event.set_size(2 << 20);
      event.set_address(step == 1 || step == 4 ? 0 : base);
      event.set_handle(step >= 1 && step <= 4 ? handle : 0);
      event.set_stack_id(step < 3 ? 21 : 0);
    }
  }
  return events;
}

// `events` written as a trace, each displaced by up to `distance` places in the file.
std::string TraceBytes(std::vector<MemoryEvent> events, size_t distance, uint64_t seed) {
  std::mt19937_64 random(seed);
  for (size_t begin = 0; distance > 1 && begin < events.size(); begin += distance) {
    const size_t end = std::min(events.size(), begin + distance);
    std::shuffle(events.begin() + static_cast<std::ptrdiff_t>(begin),
                 events.begin() + static_cast<std::ptrdiff_t>(end), random);
  }
  std::string bytes = Framed(HeaderPacket());
  for (const MemoryEvent& event : events) {
    TracePacket packet;
    *packet.mutable_memory() = event;
    bytes += Framed(packet);
  }
  return bytes + Framed(FooterPacket(events.size()));
}

class StreamingReplayTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& bytes) {
    const std::string path = UniqueTempPath("." + std::to_string(paths_.size()) + ".trace");
    std::ofstream(path, std::ios::binary) << bytes;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }

 private:
  std::vector<std::string> paths_;
};

void ExpectSameSites(const std::vector<SiteTally>& a, const std::vector<SiteTally>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].stack_id, b[i].stack_id) << i;
    EXPECT_EQ(a[i].tally.bytes, b[i].tally.bytes) << i;
    EXPECT_EQ(a[i].tally.count, b[i].tally.count) << i;
  }
}

void ExpectSamePlaces(const std::vector<PlaceUsage>& a, const std::vector<PlaceUsage>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].place);
    EXPECT_EQ(a[i].place, b[i].place);
    EXPECT_EQ(a[i].allocated.bytes, b[i].allocated.bytes);
    EXPECT_EQ(a[i].allocated.count, b[i].allocated.count);
    EXPECT_EQ(a[i].live.bytes, b[i].live.bytes);
    EXPECT_EQ(a[i].live.count, b[i].live.count);
    EXPECT_EQ(a[i].peak_bytes, b[i].peak_bytes);
    EXPECT_EQ(a[i].peak_seq, b[i].peak_seq);
    EXPECT_EQ(a[i].peak_timestamp_ns, b[i].peak_timestamp_ns);
    ExpectSameSites(a[i].peak_sites, b[i].peak_sites);
    ExpectSameSites(a[i].live_sites, b[i].live_sites);
  }
}

void ExpectSameReplay(const TraceReplay& a, const TraceReplay& b) {
  EXPECT_EQ(a.memory_events, b.memory_events);
  EXPECT_EQ(a.anomalies.unknown_frees, b.anomalies.unknown_frees);
  EXPECT_EQ(a.anomalies.double_frees, b.anomalies.double_frees);
  EXPECT_EQ(a.anomalies.overlapping_allocations, b.anomalies.overlapping_allocations);
  EXPECT_EQ(a.failed_allocations, b.failed_allocations);
  EXPECT_EQ(a.reserved_peak_bytes, b.reserved_peak_bytes);
  EXPECT_EQ(a.stream_ordered_stacks, b.stream_ordered_stacks);
  ExpectSamePlaces(a.places, b.places);
}

TEST_F(StreamingReplayTest, ShuffledWithinTheWindowReplaysAsSorted) {
  const std::vector<MemoryEvent> events = RandomTrace(30000, 1);
  absl::StatusOr<TraceReplay> sorted = ReplayTrace(Write(TraceBytes(events, 1, 0)));
  ASSERT_TRUE(sorted.ok()) << sorted.status();
  EXPECT_EQ(sorted->memory_events, events.size());
  EXPECT_EQ(sorted->out_of_order_events, 0u);
  // The trace is not trivial: every kind of anomaly happens.
  EXPECT_GT(sorted->anomalies.unknown_frees, 0u);
  EXPECT_GT(sorted->anomalies.double_frees, 0u);
  EXPECT_GT(sorted->anomalies.overlapping_allocations, 0u);
  EXPECT_GT(sorted->failed_allocations, 0u);
  EXPECT_GT(sorted->reserved_peak_bytes, 0u);
  EXPECT_FALSE(sorted->stream_ordered_stacks.empty());

  for (const size_t distance : {2u, 50u, 5000u}) {
    SCOPED_TRACE(distance);
    const std::string path = Write(TraceBytes(events, distance, distance));
    absl::StatusOr<TraceReplay> shuffled = ReplayTrace(path);
    ASSERT_TRUE(shuffled.ok()) << shuffled.status();
    EXPECT_EQ(shuffled->out_of_order_events, 0u);
    ExpectSameReplay(*shuffled, *sorted);

    // And as the in-memory sort, replayed whole.
    absl::StatusOr<SortedTrace> in_memory = ReadMemoryEventsBySeq(path);
    ASSERT_TRUE(in_memory.ok()) << in_memory.status();
    Replay replay;
    for (const MemoryEvent& event : in_memory->events) replay.Add(event);
    ExpectSamePlaces(replay.Places(), sorted->places);
    EXPECT_EQ(replay.anomalies().total(), sorted->anomalies.total());
  }
}

// What `gpumem report` does in one pass: the analyses fed by the replay's own stream
// (ReplayTrace's `also`) of a shuffled trace agree with the same analyses over the events sorted in
// memory.
TEST_F(StreamingReplayTest, AnalysesFollowingTheReplayMatchTheSortedEvents) {
  const std::vector<MemoryEvent> events = RandomTrace(30000, 3);
  absl::StatusOr<std::unique_ptr<TraceFile>> file =
      TraceFile::Open(Write(TraceBytes(events, 50, 7)));
  ASSERT_TRUE(file.ok()) << file.status();
  Frame torch;
  torch.module = "/site-packages/torch/lib/libc10_cuda.so";
  const MemoryHolder* pytorch = FindMemoryHolder({torch}, false);
  const HolderOfStack holder_of = [pytorch](uint64_t stack_id) {
    return stack_id % 5 == 0 ? pytorch : nullptr;
  };
  GrowthOptions growth_options;
  growth_options.is_marker = [](uint64_t stack_id) { return stack_id == 4; };
  SummaryAnalysis summary(holder_of);
  FragmentationAnalysis fragmentation(holder_of);
  OomAnalysis oom;
  GrowthAnalysis growth(growth_options);
  MarkerCounter marker_counter;
  uint64_t visited = 0;
  uint64_t last_seq = 0;
  const TraceReplay replay = ReplayTrace(*std::move(file), [&](const MemoryEvent& event) {
    EXPECT_GT(event.seq(), last_seq);
    last_seq = event.seq();
    ++visited;
    summary.Add(event);
    fragmentation.Add(event);
    oom.Add(event);
    growth.Add(event);
    marker_counter.Add(event);
  });
  EXPECT_EQ(visited, events.size());
  EXPECT_EQ(replay.memory_events, events.size());

  const Summary streamed_summary = summary.Finish();
  EXPECT_EQ(streamed_summary.mode, SummaryMode::kTensors);
  EXPECT_EQ(SummaryJson(streamed_summary), SummaryJson(ComputeSummary(events, holder_of)));
  EXPECT_EQ(FragmentationJson(fragmentation.Finish()),
            FragmentationJson(ComputeFragmentation(events, holder_of)));

  const OomReport streamed_oom = oom.Finish();
  const OomReport sorted_oom = AnalyzeOoms(events);
  EXPECT_EQ(streamed_oom.early_before_seq, sorted_oom.early_before_seq);
  EXPECT_EQ(streamed_oom.failures_not_analysed, sorted_oom.failures_not_analysed);
  ASSERT_EQ(streamed_oom.failures.size(), sorted_oom.failures.size());
  EXPECT_FALSE(streamed_oom.failures.empty());
  for (size_t i = 0; i < streamed_oom.failures.size(); ++i) {
    const OomFailure& a = streamed_oom.failures[i];
    const OomFailure& b = sorted_oom.failures[i];
    EXPECT_EQ(a.request.seq(), b.request.seq()) << i;
    EXPECT_EQ(a.attempt_count, b.attempt_count) << i;
    EXPECT_EQ(a.live.bytes, b.live.bytes) << i;
    EXPECT_EQ(a.early.bytes, b.early.bytes) << i;
    EXPECT_EQ(a.sites.size(), b.sites.size()) << i;
  }

  const GrowthReport streamed_growth = growth.Finish();
  const GrowthReport sorted_growth = AnalyzeGrowth(events, growth_options);
  EXPECT_TRUE(streamed_growth.found);
  EXPECT_EQ(streamed_growth.iterations(), sorted_growth.iterations());
  EXPECT_EQ(streamed_growth.iteration_seqs, sorted_growth.iteration_seqs);
  EXPECT_EQ(streamed_growth.sites.size(), sorted_growth.sites.size());
  const std::optional<uint64_t> most_frequent = marker_counter.MostFrequent({});
  ASSERT_TRUE(most_frequent.has_value());
  EXPECT_EQ(*most_frequent, AnalyzeGrowth(events, {}).marker_stack_id);
}

TEST_F(StreamingReplayTest, BeyondTheWindowIsCountedAndReplayedLate) {
  // One allocation written after more than a window's worth of later events: it cannot be put
  // back in its place, is counted and replayed late (so its free, already replayed, found
  // nothing: one unknown free, and the allocation stays live).
  std::vector<MemoryEvent> events;
  for (uint64_t seq = 1; seq <= kReorderWindow + 100; ++seq) {
    MemoryEvent& event = events.emplace_back();
    event.set_seq(seq);
    event.set_api(seq % 2 == 1 ? CUDA_MALLOC : CUDA_FREE);
    event.set_kind(seq % 2 == 1 ? DEVICE : KIND_UNKNOWN);
    event.set_action(seq % 2 == 1 ? ALLOC : FREE);
    event.set_device(seq % 2 == 1 ? 0 : -1);
    event.set_size(4096);
    event.set_address(0x10000 * ((seq + 1) / 2));  // seq 2k-1 allocates, 2k frees
  }
  std::rotate(events.begin(), events.begin() + 1, events.end());  // seq 1 written last
  std::string bytes = Framed(HeaderPacket());
  for (const MemoryEvent& event : events) {
    TracePacket packet;
    *packet.mutable_memory() = event;
    bytes += Framed(packet);
  }
  const std::string path = Write(bytes);
  absl::StatusOr<TraceReplay> replay = ReplayTrace(path);
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ(replay->memory_events, events.size());
  EXPECT_EQ(replay->out_of_order_events, 1u);
  EXPECT_EQ(replay->anomalies.unknown_frees, 1u);
  EXPECT_EQ(replay->anomalies.total(), 1u);
  ASSERT_EQ(replay->places.size(), 1u);
  EXPECT_EQ(replay->places[0].live.count, 1u);

  // A smaller window sees the same file as far more disordered.
  absl::StatusOr<StreamedTrace> streamed = ForEachMemoryEventBySeq(
      path, [](const MemoryEvent&) {}, 8);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(streamed->stats.events, events.size());
  EXPECT_EQ(streamed->stats.out_of_order, 1u);
  // A window as large as the trace puts it back.
  streamed = ForEachMemoryEventBySeq(
      path, [](const MemoryEvent&) {}, events.size());
  ASSERT_TRUE(streamed.ok());
  EXPECT_EQ(streamed->stats.out_of_order, 0u);
  EXPECT_EQ(streamed->stats.reordered, 1u);
}

TEST_F(StreamingReplayTest, PacketsTheDecoderDeclinesStillArrive) {
  // Memory packets with padding after the event (and a field from a newer schema): libprotobuf
  // parses them; the stream and the tables see the same as for plain ones.
  std::string bytes = Framed(HeaderPacket());
  TracePacket stack;
  stack.mutable_stack()->set_id(7);
  stack.mutable_stack()->add_frame(0x1234);
  bytes += Framed(stack);
  std::vector<uint64_t> expected;
  for (uint64_t seq = 1; seq <= 40; ++seq) {
    TracePacket packet;
    MemoryEvent* event = packet.mutable_memory();
    event->set_seq(seq % 2 == 0 ? seq - 1 : seq + 1);  // pairs swapped
    event->set_api(CUDA_MALLOC);
    event->set_action(ALLOC);
    event->set_size(1 << 20);
    event->set_address(seq << 24);
    event->set_stack_id(7);
    std::string framed;
    if (seq % 3 == 0) {
      packet.set_padding("pad");
    } else if (seq % 3 == 1) {
      // Field 30 of MemoryEvent (varint 5) appended inside the event: unknown to this schema.
      std::string body = event->SerializeAsString() + "\xf0\x01\x05";
      framed =
          "\x0a" + testing::Varint(body.size() + 2) + "\x3a" + testing::Varint(body.size()) + body;
    }
    bytes += framed.empty() ? Framed(packet) : framed;
    expected.push_back(seq);
  }
  const std::string path = Write(bytes + Framed(FooterPacket(40)));
  std::vector<uint64_t> seqs;
  absl::StatusOr<StreamedTrace> streamed =
      ForEachMemoryEventBySeq(path, [&](const MemoryEvent& event) {
        EXPECT_EQ(event.stack_id(), 7u);
        seqs.push_back(event.seq());
      });
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(seqs, expected);
  EXPECT_EQ(streamed->stats.reordered, 20u);
  EXPECT_EQ(streamed->file->memory_event_count(), 40u);
  EXPECT_NE(streamed->file->FindStack(7), nullptr);
  EXPECT_TRUE(streamed->file->footer().has_value());
  EXPECT_FALSE(streamed->file->end().damaged());
}

// ---- the replay's table of plain allocations against a reference ----

// The accounting rules of report/README.md for plain allocations, written plainly: an ordered map
// of live ranges, a set of freed addresses.
class ReferenceReplay {
 public:
  void Add(const MemoryEvent& event) {
    if (event.action() == ALLOC) {
      const uint64_t begin = event.address();
      const uint64_t end = begin + std::max<uint64_t>(event.size(), 1);
      bool overlapped = false;
      for (auto it = live_.begin(); it != live_.end();) {
        const uint64_t it_end = it->first + std::max<uint64_t>(it->second.first, 1);
        if (it->first < end && begin < it_end) {
          overlapped = true;
          bytes_ -= it->second.first;
          it = live_.erase(it);
        } else {
          ++it;
        }
      }
      overlapping_ += overlapped ? 1 : 0;
      live_[begin] = {event.size(), event.stack_id()};
      freed_.erase(begin);
      bytes_ += event.size();
      peak_ = std::max(peak_, bytes_);
    } else if (event.action() == FREE && event.address() != 0) {
      auto it = live_.find(event.address());
      if (it == live_.end()) {
        (freed_.count(event.address()) ? double_frees_ : unknown_frees_) += 1;
        return;
      }
      bytes_ -= it->second.first;
      live_.erase(it);
      freed_.insert(event.address());
    }
  }

  std::map<uint64_t, std::pair<uint64_t, uint64_t>> live_;  // address -> (size, stack)
  std::set<uint64_t> freed_;
  uint64_t bytes_ = 0, peak_ = 0;
  uint64_t overlapping_ = 0, double_frees_ = 0, unknown_frees_ = 0;
};

TEST(PlainAllocationTableTest, AgreesWithAPlainReferenceOnRandomTraces) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 random(seed);
    // Few addresses and sizes from one page to many: reuse, overlaps, stale entries everywhere.
    const uint64_t addresses = seed % 2 == 0 ? 64 : 4096;
    Replay replay;
    ReferenceReplay reference;
    std::vector<uint64_t> allocated;
    for (uint64_t seq = 1; seq <= 10000; ++seq) {
      MemoryEvent event;
      event.set_seq(seq);
      event.set_device(0);
      event.set_kind(DEVICE);
      event.set_stack_id(1 + random() % 5);
      if (random() % 2 == 0 || allocated.empty()) {
        event.set_api(CUDA_MALLOC);
        event.set_action(ALLOC);
        event.set_address(0x1000000 + (random() % addresses) * 4096);
        // Zero now and then (it covers one byte), up to 64 pages.
        const uint64_t pages = 1 + random() % (random() % 4 == 0 ? 64 : 2);
        event.set_size(random() % 8 == 0 ? 0 : pages * 4096 - random() % 4096);
        allocated.push_back(event.address());
      } else {
        event.set_api(CUDA_FREE);
        event.set_kind(KIND_UNKNOWN);
        event.set_action(FREE);
        event.set_device(-1);
        event.set_address(random() % 16 == 0 ? 0x1000000 + (random() % (addresses + 8)) * 4096
                                             : allocated[random() % allocated.size()]);
      }
      replay.Add(event);
      reference.Add(event);
      if (seq % 997 == 0 || seq == 10000) {
        // The live set, as ForEachLive() sees it.
        uint64_t count = 0, bytes = 0;
        replay.ForEachLive([&](const LiveAllocation& live) {
          ++count;
          bytes += live.size;
        });
        EXPECT_EQ(count, reference.live_.size()) << "seq " << seq;
        EXPECT_EQ(bytes, reference.bytes_) << "seq " << seq;
      }
    }
    const std::vector<PlaceUsage> places = replay.Places();
    ASSERT_EQ(places.size(), 1u);
    EXPECT_EQ(places[0].live.bytes, reference.bytes_);
    EXPECT_EQ(places[0].live.count, reference.live_.size());
    EXPECT_EQ(places[0].peak_bytes, reference.peak_);
    EXPECT_EQ(replay.anomalies().overlapping_allocations, reference.overlapping_);
    EXPECT_EQ(replay.anomalies().double_frees, reference.double_frees_);
    EXPECT_EQ(replay.anomalies().unknown_frees, reference.unknown_frees_);
    EXPECT_GT(reference.overlapping_, 0u);
    EXPECT_GT(reference.double_frees_, 0u);
    // Live by stack.
    std::map<uint64_t, uint64_t> by_stack;
    for (const auto& [address, entry] : reference.live_) by_stack[entry.second] += entry.first;
    std::map<uint64_t, uint64_t> replayed;
    for (const SiteTally& site : places[0].live_sites) replayed[site.stack_id] = site.tally.bytes;
    EXPECT_EQ(replayed, by_stack);
  }
}

}  // namespace
}  // namespace gpumem::report

namespace gpumem::report {
namespace {

// Memory made during a stream capture is the graph's: counted by what uses memory (a VMM handle,
// a pool allocation), not by reserved address space or the mappings of a handle already counted.
TEST_F(StreamingReplayTest, GraphMemoryCountsMemoryNotAddressSpace) {
  std::vector<MemoryEvent> events;
  auto add = [&](Api api, MemoryKind kind, uint64_t size, uint64_t capture, uint64_t stack) {
    MemoryEvent& event = events.emplace_back();
    event.set_seq(events.size());
    event.set_api(api);
    event.set_kind(kind);
    event.set_action(ALLOC);
    event.set_device(kind == VMM_RESERVATION || kind == VMM_MAPPING ? -1 : 0);
    event.set_size(size);
    event.set_address(kind == VMM_PHYSICAL ? 0 : 0x7f00'0000'0000 + (events.size() << 30));
    event.set_handle(kind == VMM_PHYSICAL || kind == VMM_MAPPING ? 0xA : 0);
    event.set_capture(capture);
    event.set_stack_id(stack);
  };
  constexpr uint64_t kMiB = 1 << 20;
  add(CU_MEM_ADDRESS_RESERVE, VMM_RESERVATION, 64ull << 30, 1, 1);  // address space only
  add(CU_MEM_CREATE, VMM_PHYSICAL, 2 * kMiB, 1, 2);
  add(CU_MEM_MAP, VMM_MAPPING, 2 * kMiB, 1, 3);  // the same 2 MiB again
  add(CU_MEM_ALLOC_ASYNC, POOL, 4 * kMiB, 2, 4);
  add(CUDA_MALLOC, DEVICE, 1 * kMiB, 0, 5);  // not during a capture
  absl::StatusOr<TraceReplay> replay = ReplayTrace(Write(TraceBytes(events, 1, 0)));
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ(replay->for_graph.count, 2u);
  EXPECT_EQ(replay->for_graph.bytes, 6 * kMiB);
  EXPECT_EQ(replay->graph_stacks, (absl::flat_hash_set<uint64_t>{2, 4}));
}

}  // namespace
}  // namespace gpumem::report
