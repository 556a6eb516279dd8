// The combined view of several processes: each process replayed on its own (equal device pointers
// in two processes never match each other), their live bytes merged by timestamp per device, per
// host when the traces come from different hosts; on synthetic trace files with hand-computed
// answers, and through `gpumem report`.
#include "report/analysis/combined.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/replay/replay.h"
#include "report/trace/event_stream.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using gpumem::testing::FooterPacket;
using gpumem::testing::FramedAll;
using gpumem::testing::RunProgram;
using gpumem::testing::TempDir;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kStart = 1'000'000;

// One process's trace file: header (host, pid, argv), memory events with given timestamps.
class TraceWriter {
 public:
  TraceWriter(const std::string& host, uint32_t pid, const std::string& argv0) {
    TracePacket& packet = packets_.emplace_back();
    Header* header = packet.mutable_header();
    header->set_format_version(1);
    header->set_host(host);
    header->set_pid(pid);
    header->add_command_line(argv0);
    header->set_start_time_mono_ns(kStart);
  }
  void Malloc(uint64_t time, int32_t device, uint64_t size, uint64_t address) {
    MemoryEvent& event = Add(time);
    event.set_api(CUDA_MALLOC);
    event.set_kind(DEVICE);
    event.set_action(ALLOC);
    event.set_device(device);
    event.set_size(size);
    event.set_address(address);
  }
  void Free(uint64_t time, uint64_t address) {
    MemoryEvent& event = Add(time);
    event.set_api(CUDA_FREE);
    event.set_kind(KIND_UNKNOWN);
    event.set_action(FREE);
    event.set_device(-1);
    event.set_address(address);
  }
  void Write(const std::string& path) {
    packets_.push_back(FooterPacket(seq_));
    std::ofstream(path, std::ios::binary) << FramedAll(packets_);
  }

 private:
  MemoryEvent& Add(uint64_t time) {
    MemoryEvent& event = *packets_.emplace_back().mutable_memory();
    event.set_seq(++seq_);
    event.set_timestamp_ns(kStart + time);
    return event;
  }
  std::vector<TracePacket> packets_;
  uint64_t seq_ = 0;
};

std::vector<ProcessTimeline> Read(const std::vector<std::string>& paths) {
  std::vector<ProcessTimeline> timelines;
  for (const std::string& path : paths) {
    absl::StatusOr<ProcessTimeline> timeline = ReadProcessTimeline(path);
    EXPECT_TRUE(timeline.ok()) << timeline.status();
    if (timeline.ok()) timelines.push_back(std::move(*timeline));
  }
  return timelines;
}

// A: 10 MiB at t100, +20 MiB at t300 (30), frees at t500 (20) and t700 (0).
// B: 40 MiB at t200 at A's first pointer, freed at t400, 5 MiB at t600 at the same pointer.
// Combined: t100 10, t200 50, t300 70 (A 30 + B 40: the peak), t400 30, t500 20, t600 25, t700 5.
void WriteOverlapping(const TempDir& dir, const std::string& host_b) {
  TraceWriter a("node1", 101, "proc_a");
  a.Malloc(100, 0, 10 * kMiB, 0x7000'0000);
  a.Malloc(300, 0, 20 * kMiB, 0x7100'0000);
  a.Free(500, 0x7000'0000);
  a.Free(700, 0x7100'0000);
  a.Write(dir.File("a.trace"));
  TraceWriter b(host_b, 202, "proc_b");
  b.Malloc(200, 0, 40 * kMiB, 0x7000'0000);
  b.Free(400, 0x7000'0000);
  b.Malloc(600, 0, 5 * kMiB, 0x7000'0000);
  b.Write(dir.File("b.trace"));
}

TEST(CombinedTest, OverlappingLiveSetsPeakTogether) {
  TempDir dir;
  WriteOverlapping(dir, "node1");
  const std::vector<ProcessTimeline> timelines = Read({dir.File("a.trace"), dir.File("b.trace")});
  ASSERT_EQ(timelines.size(), 2u);
  // Same pointers in both processes are kept apart: B's free does not end A's allocation.
  const std::vector<TimelinePoint> a = timelines[0].places.at(0).ReadAll();
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[1].live_bytes, 30 * kMiB);
  EXPECT_EQ(timelines[1].places.at(0).ReadAll().back().live_bytes, 5 * kMiB);
  const Combined combined = CombineTimelines(timelines);
  EXPECT_EQ(combined.processes, 2u);
  EXPECT_FALSE(combined.per_host);
  ASSERT_EQ(combined.hosts.size(), 1u);
  ASSERT_EQ(combined.hosts[0].places.size(), 1u);
  const CombinedPlace& place = combined.hosts[0].places[0];
  EXPECT_EQ(place.place, 0);
  EXPECT_EQ(place.peak_bytes, 70 * kMiB);
  EXPECT_EQ(place.timestamp_ns, kStart + 300);
  ASSERT_EQ(place.shares.size(), 2u);
  EXPECT_EQ(place.shares[0].process, 1u);  // B, largest first
  EXPECT_EQ(place.shares[0].bytes, 40 * kMiB);
  EXPECT_EQ(place.shares[1].process, 0u);
  EXPECT_EQ(place.shares[1].bytes, 30 * kMiB);
}

TEST(CombinedTest, LiveSetsApartInTimeDoNotAdd) {
  // A: 30 MiB from t100 to t200; B: 25 MiB at the same pointer from t300 to t400, then 8 MiB on
  // device 1 at t500. Device 0: the peak is A's alone (30 at t100, B 0); device 1: B's 8.
  TempDir dir;
  TraceWriter a("node1", 101, "proc_a");
  a.Malloc(100, 0, 30 * kMiB, 0x7000'0000);
  a.Free(200, 0x7000'0000);
  a.Write(dir.File("a.trace"));
  TraceWriter b("node1", 202, "proc_b");
  b.Malloc(300, 0, 25 * kMiB, 0x7000'0000);
  b.Free(400, 0x7000'0000);
  b.Malloc(500, 1, 8 * kMiB, 0x7000'0000);
  b.Write(dir.File("b.trace"));
  const std::vector<ProcessTimeline> timelines = Read({dir.File("a.trace"), dir.File("b.trace")});
  const Combined combined = CombineTimelines(timelines);
  ASSERT_EQ(combined.hosts.size(), 1u);
  ASSERT_EQ(combined.hosts[0].places.size(), 2u);
  const CombinedPlace& device0 = combined.hosts[0].places[0];
  EXPECT_EQ(device0.peak_bytes, 30 * kMiB);
  EXPECT_EQ(device0.timestamp_ns, kStart + 100);
  ASSERT_EQ(device0.shares.size(), 2u);
  EXPECT_EQ(device0.shares[0].process, 0u);
  EXPECT_EQ(device0.shares[0].bytes, 30 * kMiB);
  EXPECT_EQ(device0.shares[1].bytes, 0u);
  const CombinedPlace& device1 = combined.hosts[0].places[1];
  EXPECT_EQ(device1.place, 1);
  EXPECT_EQ(device1.peak_bytes, 8 * kMiB);
  EXPECT_EQ(device1.timestamp_ns, kStart + 500);
}

TEST(CombinedTest, DifferentHostsAreCombinedPerHost) {
  TempDir dir;
  WriteOverlapping(dir, "node2");
  const std::vector<ProcessTimeline> timelines = Read({dir.File("a.trace"), dir.File("b.trace")});
  const Combined combined = CombineTimelines(timelines);
  EXPECT_TRUE(combined.per_host);
  ASSERT_EQ(combined.hosts.size(), 2u);
  EXPECT_EQ(combined.hosts[0].host, "node1");
  EXPECT_EQ(combined.hosts[0].places.at(0).peak_bytes, 30 * kMiB);
  EXPECT_EQ(combined.hosts[0].places.at(0).timestamp_ns, kStart + 300);
  EXPECT_EQ(combined.hosts[1].host, "node2");
  EXPECT_EQ(combined.hosts[1].places.at(0).peak_bytes, 40 * kMiB);
  const std::string text = CombinedText(combined, timelines);
  EXPECT_NE(text.find("combined view is per host"), std::string::npos) << text;
  EXPECT_NE(text.find("host node2: 1 process"), std::string::npos) << text;
}

TEST(CombinedTest, SpoolReadsBackWhatWasAppended) {
  TimelineSpool spool(7, 10);  // blocks of 10 points, each to the file once encoded
  std::vector<TimelinePoint> appended;
  for (uint64_t i = 0; i < 1000; ++i) {
    appended.push_back({i * 3, i * i});
    spool.Append(appended.back());
  }
  EXPECT_EQ(spool.size(), 1000u);
  // Two readers at once, each at its own pace.
  TimelineSpool::Reader a = spool.Read();
  TimelineSpool::Reader b = spool.Read();
  TimelinePoint point;
  for (uint64_t i = 0; i < 500; ++i) {
    ASSERT_TRUE(a.Next(&point));
    EXPECT_EQ(point.timestamp_ns, i * 3);
  }
  for (uint64_t i = 0; i < 1000; ++i) {
    ASSERT_TRUE(b.Next(&point));
    EXPECT_EQ(point.live_bytes, i * i);
  }
  EXPECT_FALSE(b.Next(&point));
  for (uint64_t i = 500; i < 1000; ++i) {
    ASSERT_TRUE(a.Next(&point));
    EXPECT_EQ(point.timestamp_ns, i * 3);
  }
  EXPECT_FALSE(a.Next(&point));
  // From the middle of a block, across blocks.
  TimelineSpool::Reader c = spool.Read(405);
  for (uint64_t i = 405; i < 1000; ++i) {
    ASSERT_TRUE(c.Next(&point));
    EXPECT_EQ(point.live_bytes, i * i);
  }
  EXPECT_FALSE(c.Next(&point));
  const std::vector<TimelinePoint> all = spool.ReadAll();
  ASSERT_EQ(all.size(), appended.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].timestamp_ns, appended[i].timestamp_ns);
    EXPECT_EQ(all[i].live_bytes, appended[i].live_bytes);
  }
}

// Points are kept as changes: a few bytes each where time and bytes move by little, and exact
// where they move by anything (live bytes falling, jumps to the top of the range). Blocks spilled
// to the file, blocks held in memory and the last, open block read back alike.
TEST(CombinedTest, SpoolKeepsPointsAsExactChanges) {
  TimelineSpool spool(1000, 16);
  std::vector<TimelinePoint> appended;
  uint64_t time = 1'700'000'000'000'000'000;  // CLOCK_MONOTONIC-sized
  uint64_t live = 0;
  for (uint64_t i = 0; i < 3000; ++i) {
    time += 200 + i % 1000;
    const uint64_t size = (i % 64 + 1) * 512;
    live = i % 3 == 2 ? live - std::min(live, size) : live + size;
    appended.push_back({time, live});
  }
  appended.push_back({time, ~uint64_t{0}});
  appended.push_back({time + 1, 0});
  appended.push_back({~uint64_t{0}, uint64_t{1} << 63});
  for (const TimelinePoint& point : appended) spool.Append(point);
  EXPECT_LT(spool.encoded_bytes(), 6 * spool.size()) << "not compact";
  const std::vector<TimelinePoint> all = spool.ReadAll();
  ASSERT_EQ(all.size(), appended.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].timestamp_ns, appended[i].timestamp_ns) << i;
    EXPECT_EQ(all[i].live_bytes, appended[i].live_bytes) << i;
  }
}

// The first read maps the file as it is then; blocks spilled after that are read all the same.
TEST(CombinedTest, SpoolReadsPointsSpilledAfterItsFirstRead) {
  TimelineSpool spool(16, 8);  // each block to the file once full
  for (uint64_t i = 0; i < 40; ++i) spool.Append({i * 10, i + 1});
  std::vector<TimelinePoint> points;
  ASSERT_TRUE(spool.ReadBlock(1, &points));
  EXPECT_EQ(points.front().live_bytes, 9u);
  for (uint64_t i = 40; i < 100; ++i) spool.Append({i * 10, i + 1});
  const std::vector<TimelinePoint> all = spool.ReadAll();
  ASSERT_EQ(all.size(), 100u);
  for (uint64_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].timestamp_ns, i * 10) << i;
    EXPECT_EQ(all[i].live_bytes, i + 1) << i;
  }
}

// A spool handed over with damaged bytes (a value longer than 8 bytes, bytes cut short) reads as
// unreadable from the damaged block on, never as other points.
TEST(CombinedTest, SpoolWithDamagedBytesDoesNotReadThem) {
  TimelineSpool spool(1 << 20, 4);  // everything in memory
  for (uint64_t i = 1; i <= 10; ++i) spool.Append({i * 1000, i << 20});
  std::vector<TimelinePoint> points;
  ASSERT_TRUE(spool.ReadBlock(2, &points));
  EXPECT_EQ(points.size(), 2u);  // the last block, 2 of its 4 points

  TimelineSpool::State too_long = spool.state();
  too_long.file = -1;
  too_long.pending[too_long.blocks[1].offset] = static_cast<char>(0x9a);  // lengths 10 and 9
  std::optional<TimelineSpool> damaged = TimelineSpool::FromState(too_long);
  ASSERT_TRUE(damaged.has_value());
  EXPECT_TRUE(damaged->ReadBlock(0, &points));
  EXPECT_FALSE(damaged->ReadBlock(1, &points));
  EXPECT_TRUE(damaged->ReadBlock(2, &points));
  EXPECT_EQ(damaged->ReadAll().size(), 4u) << "points read past the damaged block";

  TimelineSpool::State cut = spool.state();
  cut.file = -1;
  cut.pending.pop_back();
  std::optional<TimelineSpool> short_spool = TimelineSpool::FromState(cut);
  ASSERT_TRUE(short_spool.has_value());
  EXPECT_TRUE(short_spool->ReadBlock(1, &points));
  EXPECT_FALSE(short_spool->ReadBlock(2, &points));
}

// The report's timeline takes the live bytes from the report's own replay (AddReplayed): the
// same points as a timeline that replays the events itself (Add), frees and two devices included.
TEST(CombinedTest, TimelineFromTheReportsReplayIsTheSame) {
  TempDir dir;
  TraceWriter writer("node1", 101, "proc");
  writer.Malloc(100, 0, 10 * kMiB, 0x7000'0000);
  writer.Malloc(200, 1, 20 * kMiB, 0x7100'0000);
  writer.Malloc(300, 0, 5 * kMiB, 0x7200'0000);
  writer.Free(400, 0x7100'0000);
  writer.Free(500, 0x7000'0000);
  writer.Write(dir.File("p.trace"));
  TimelineBuilder own;
  TimelineBuilder replayed;
  Replay replay;
  absl::StatusOr<StreamedTrace> streamed =
      ForEachMemoryEventBySeq(dir.File("p.trace"), [&](const MemoryEvent& event) {
        own.Add(event);
        replay.Add(event);
        replayed.AddReplayed(FromProto(event), replay);
      });
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  const ProcessTimeline a = own.Finish("p.trace", *streamed->file);
  const ProcessTimeline b = replayed.Finish("p.trace", *streamed->file);
  ASSERT_EQ(a.places.size(), 2u);
  ASSERT_EQ(b.places.size(), 2u);
  for (const auto& [place, spool] : a.places) {
    const std::vector<TimelinePoint> expected = spool.ReadAll();
    const std::vector<TimelinePoint> actual = b.places.at(place).ReadAll();
    ASSERT_EQ(actual.size(), expected.size()) << "place " << place;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(actual[i].timestamp_ns, expected[i].timestamp_ns);
      EXPECT_EQ(actual[i].live_bytes, expected[i].live_bytes);
    }
  }
  EXPECT_EQ(a.places.at(0).size(), 3u);  // 10, 15 and 5 MiB: at t100, t300 and t500
}

// A place first seen allocating before the replay holds anything there (an address reservation,
// which holds no memory) is followed from its first bytes on: the timeline looks its live bytes up
// again until the replay has the place.
TEST(CombinedTest, TimelineFollowsAPlaceTheReplayHadNotYetAtItsFirstAllocation) {
  auto event = [](uint64_t time, int32_t api, int32_t kind, uint64_t size, uint64_t address) {
    MemoryEventFields fields;
    fields.seq = time;
    fields.timestamp_ns = time;
    fields.api = api;
    fields.kind = kind;
    fields.action = ALLOC;
    fields.device = 3;
    fields.size = size;
    fields.address = address;
    return fields;
  };
  const std::vector<MemoryEventFields> events = {
      event(100, CU_MEM_ADDRESS_RESERVE, VMM_RESERVATION, 64 * kMiB, 0x9000'0000),
      event(200, CUDA_MALLOC, DEVICE, 2 * kMiB, 0x7000'0000),
      event(300, CUDA_MALLOC, DEVICE, 3 * kMiB, 0x7100'0000),
  };
  TimelineBuilder timeline;
  Replay replay;
  for (const MemoryEventFields& fields : events) {
    replay.Add(fields);
    if (fields.api == CU_MEM_ADDRESS_RESERVE) {
      ASSERT_EQ(replay.LiveBytesCounter(3), nullptr) << "the test needs a place not yet replayed";
    }
    timeline.AddReplayed(fields, replay);
  }
  TempDir dir;
  TraceWriter writer("node1", 101, "proc");
  writer.Write(dir.File("p.trace"));
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Read(dir.File("p.trace"));
  ASSERT_TRUE(file.ok()) << file.status();
  const ProcessTimeline built = timeline.Finish("p.trace", **file);
  ASSERT_EQ(built.places.count(3), 1u);
  const std::vector<TimelinePoint> points = built.places.at(3).ReadAll();
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].timestamp_ns, 200u);
  EXPECT_EQ(points[0].live_bytes, 2 * kMiB);
  EXPECT_EQ(points[1].timestamp_ns, 300u);
  EXPECT_EQ(points[1].live_bytes, 5 * kMiB);
}

// Three processes of `events` allocations and frees each on two devices, interleaved in time, each
// event `step` ns or less after the one before (0 too: equal timestamps); their trace paths. Each
// process allocates more than it frees in its first half and frees more in its second.
std::vector<std::string> WriteRandomProcesses(const TempDir& dir, uint64_t events, uint64_t step) {
  std::vector<std::string> paths;
  uint64_t state = 12345;
  auto random = [&state](uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  };
  for (uint32_t process = 0; process < 3; ++process) {
    TraceWriter writer("node1", 100 + process, "proc");
    std::vector<uint64_t> live;
    uint64_t time = random(50);
    for (uint64_t i = 0; i < events; ++i) {
      time += random(step + 1);
      const bool rising = i < events / 2;
      if (!live.empty() && (random(3) == 0) == rising) {
        const size_t which = random(live.size());
        writer.Free(time, live[which]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(which));
      } else {
        const uint64_t address = 0x7000'0000 + i * 64 * kMiB;
        writer.Malloc(time, static_cast<int32_t>(random(2)), (1 + random(64)) * kMiB, address);
        live.push_back(address);
      }
    }
    paths.push_back(dir.File("p" + std::to_string(process) + ".trace"));
    writer.Write(paths.back());
  }
  return paths;
}

// Both combined views name the same peaks, at the same times, held by the same processes.
void ExpectSameCombined(const Combined& a, const std::vector<ProcessTimeline>& a_timelines,
                        const Combined& b, const std::vector<ProcessTimeline>& b_timelines) {
  ASSERT_EQ(a.hosts.size(), 1u);
  ASSERT_EQ(a.hosts[0].places.size(), 2u);
  ASSERT_EQ(b.hosts[0].places.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const CombinedPlace& x = a.hosts[0].places[i];
    const CombinedPlace& y = b.hosts[0].places[i];
    EXPECT_GT(x.peak_bytes, 0u);
    EXPECT_EQ(x.peak_bytes, y.peak_bytes);
    EXPECT_EQ(x.timestamp_ns, y.timestamp_ns);
    ASSERT_EQ(x.shares.size(), y.shares.size());
    for (size_t j = 0; j < x.shares.size(); ++j) {
      EXPECT_EQ(x.shares[j].process, y.shares[j].process);
      EXPECT_EQ(x.shares[j].bytes, y.shares[j].bytes);
    }
  }
  EXPECT_EQ(CombinedJson(a, a_timelines), CombinedJson(b, b_timelines));
}

TEST(CombinedTest, SpilledTimelinesCombineAsInMemory) {
  // Timelines spilled to files every 5 points combine exactly as timelines held whole.
  TempDir dir;
  const std::vector<std::string> paths = WriteRandomProcesses(dir, 3000, 40);
  std::vector<ProcessTimeline> spilled;
  std::vector<ProcessTimeline> whole;
  for (const std::string& path : paths) {
    absl::StatusOr<ProcessTimeline> a = ReadProcessTimeline(path, 5);
    absl::StatusOr<ProcessTimeline> b = ReadProcessTimeline(path, size_t{1} << 30);
    ASSERT_TRUE(a.ok() && b.ok());
    spilled.push_back(std::move(*a));
    whole.push_back(std::move(*b));
  }
  ExpectSameCombined(CombineTimelines(spilled), spilled, CombineTimelines(whole), whole);
}

TEST(CombinedTest, MergeCutInTimeIsTheSameAsOneMerge) {
  // Cut into slices of time merged on several threads (down to 50 points a slice), each process
  // entering a slice with what it held before it; many equal timestamps, at the cuts too. Enough
  // points for the spools' index to cut at tens of places.
  TempDir dir;
  std::vector<ProcessTimeline> timelines = Read(WriteRandomProcesses(dir, 30000, 3));
  ASSERT_EQ(timelines.size(), 3u);
  const Combined whole = CombineTimelines(timelines, 1);
  for (const size_t threads : {2, 7, 64}) {
    SCOPED_TRACE(threads);
    ExpectSameCombined(CombineTimelines(timelines, threads, 50), timelines, whole, timelines);
  }
}

TEST(CombinedTest, MergeCutInTimeKeepsWhatEarlierSlicesHeldAndTheFirstPeak) {
  // A holds 1 GiB from t100 to the end, without another event. B climbs to 1000 MiB, down to 0 and
  // up to 1000 MiB again, 1 MiB a step: its 4000 points cut into slices, A's bytes known only from
  // before the first slice; the peak of 1 GiB + 1000 MiB is reached twice, the first time counts.
  TempDir dir;
  TraceWriter a("node1", 101, "proc_a");
  a.Malloc(100, 0, 1024 * kMiB, 0x1'0000'0000);
  a.Free(100'000, 0x1'0000'0000);
  a.Write(dir.File("a.trace"));
  TraceWriter b("node1", 202, "proc_b");
  uint64_t time = 1000;
  const auto address = [](uint64_t i) { return 0x7000'0000 + i * kMiB; };
  for (int climb = 0; climb < 2; ++climb) {
    for (uint64_t i = 0; i < 1000; ++i) b.Malloc(time++, 0, kMiB, address(i));
    for (uint64_t i = 0; i < 1000; ++i) b.Free(time++, address(i));
  }
  b.Write(dir.File("b.trace"));
  const std::vector<ProcessTimeline> timelines = Read({dir.File("a.trace"), dir.File("b.trace")});
  ASSERT_EQ(timelines.size(), 2u);
  for (const size_t threads : {1, 4, 16}) {
    SCOPED_TRACE(threads);
    const Combined combined = CombineTimelines(timelines, threads, 50);
    ASSERT_EQ(combined.hosts.size(), 1u);
    ASSERT_EQ(combined.hosts[0].places.size(), 1u);
    const CombinedPlace& place = combined.hosts[0].places[0];
    EXPECT_EQ(place.peak_bytes, 2024 * kMiB);
    EXPECT_EQ(place.timestamp_ns, kStart + 1000 + 999);
    ASSERT_EQ(place.shares.size(), 2u);
    EXPECT_EQ(place.shares[0].bytes, 1024 * kMiB);
    EXPECT_EQ(place.shares[1].bytes, 1000 * kMiB);
  }
}

TEST(CombinedTest, SpoolSumsUpItsBlocks) {
  // Every 2 ns, live bytes rising and falling; spilled every 100 points, beyond several blocks.
  TimelineSpool spool(100);
  const uint64_t count = 3 * TimelineSpool::kBlockPoints + TimelineSpool::kBlockPoints / 2;
  const auto live = [](uint64_t i) { return i % 700 < 350 ? i % 700 : 700 - i % 700; };
  for (uint64_t i = 0; i < count; ++i) spool.Append({10 + 2 * i, live(i)});
  ASSERT_EQ(spool.blocks().size(), 4u);
  for (size_t b = 0; b < spool.blocks().size(); ++b) {
    const TimelineSpool::Block& block = spool.blocks()[b];
    const uint64_t first = b * TimelineSpool::kBlockPoints;
    const uint64_t last = std::min(first + TimelineSpool::kBlockPoints, count) - 1;
    EXPECT_EQ(block.first_ns, 10 + 2 * first);
    EXPECT_EQ(block.last_ns, 10 + 2 * last);
    uint64_t highest = 0;
    for (uint64_t i = first; i <= last; ++i) highest = std::max(highest, live(i));
    EXPECT_EQ(block.highest, highest);
    EXPECT_EQ(block.entering, first == 0 ? 0 : live(first - 1));
  }
  EXPECT_EQ(spool.last_live_bytes(), live(count - 1));
}

TEST(CombinedTest, SpoolTimestampsNeverGoBack) {
  // A point stamped before the one before it (another thread's event, later in seq) takes that
  // one's time: the merge needs each process in time order.
  TimelineSpool spool(2);
  for (const uint64_t time : {100, 300, 200, 250, 400}) spool.Append({time, time});
  const std::vector<TimelinePoint> points = spool.ReadAll();
  ASSERT_EQ(points.size(), 5u);
  const uint64_t times[] = {100, 300, 300, 300, 400};
  const uint64_t bytes[] = {100, 300, 200, 250, 400};
  for (size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(points[i].timestamp_ns, times[i]);
    EXPECT_EQ(points[i].live_bytes, bytes[i]);
  }
  // Blocks of 2 points: their times are the clamped ones.
  TimelineSpool blocks(2, 2);
  for (const uint64_t time : {100, 300, 200, 250, 400}) blocks.Append({time, time});
  ASSERT_EQ(blocks.blocks().size(), 3u);
  EXPECT_EQ(blocks.blocks()[1].first_ns, 300u);
  EXPECT_EQ(blocks.blocks()[1].last_ns, 300u);
  EXPECT_EQ(blocks.blocks()[1].highest, 250u);
  EXPECT_EQ(blocks.blocks()[1].entering, 300u);
}

TEST(CombinedTest, ReportCommandPrintsCombinedSection) {
  TempDir dir;
  WriteOverlapping(dir, "node1");
  const std::string gpumem = gpumem::testing::BuildPath("bin/gpumem");
  const auto text = RunProgram({gpumem, "report", dir.path()});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("== combined, 2 processes"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("combined peak, device 0: 70.00 MiB (73400320 bytes)"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("pid 202  proc_b"), std::string::npos) << text.out;
  const auto json = RunProgram({gpumem, "report", "--json", dir.path()});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"combined\":{\"processes\":2,\"per_host\":false"), std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"peak_bytes\":73400320,\"timestamp_ns\":1000300,\"time_ns\":300"),
            std::string::npos)
      << json.out;
  // One trace: no combined view.
  const auto one = RunProgram({gpumem, "report", dir.File("a.trace")});
  EXPECT_EQ(one.out.find("combined"), std::string::npos) << one.out;
}

}  // namespace
}  // namespace gpumem::report
