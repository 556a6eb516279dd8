// report/export/perfetto.h: Perfetto's protobuf trace of the bundled traces and of a synthetic
// one, read back with libprotobuf through our own declaration of Perfetto's published fields
// (published_formats.proto): the sequence's incremental state, tracks described before use, names
// interned before use, slices that end where they began, and each place's "live bytes" counter
// at its maximum equal to the peak the report's replay computes.
#include "report/export/perfetto.h"

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "published_formats.pb.h"
#include "report/export/timeline.h"
#include "report/replay/replay.h"
#include "tests/support/export_traces.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using published::TracePacket;
using published::TrackEvent;

constexpr int kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4;

published::Trace Exported(const std::string& path, TraceReplay* replay) {
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  ChunkedOutput bytes;
  *replay = ExportPerfetto(*std::move(file), nullptr, &bytes);
  published::Trace trace;
  EXPECT_TRUE(trace.ParseFromString(*bytes.text()));
  return trace;
}

// What reading the trace in order found.
struct ReadBack {
  std::map<uint64_t, published::TrackDescriptor> tracks;  // uuid -> descriptor
  std::map<uint64_t, std::string> names;                  // event name iid -> name
  std::map<uint64_t, std::string> annotation_names;
  std::map<uint64_t, std::string> values;                  // interned annotation string values
  std::map<uint64_t, int64_t> counter_max;                 // counter track -> highest value
  std::vector<std::pair<std::string, TrackEvent>> events;  // with the event's name
  std::vector<uint64_t> slice_begins;                      // their timestamps
  std::vector<uint64_t> slice_ends;
};

void Intern(const published::InternedData& data, ReadBack* read) {
  for (const published::InternedName& name : data.event_names()) {
    EXPECT_TRUE(read->names.emplace(name.iid(), name.name()).second) << "iid again: " << name.iid();
  }
  for (const published::InternedName& name : data.debug_annotation_names()) {
    EXPECT_TRUE(read->annotation_names.emplace(name.iid(), name.name()).second);
  }
  for (const published::InternedName& value : data.debug_annotation_string_values()) {
    EXPECT_TRUE(read->values.emplace(value.iid(), value.name()).second);
  }
}

// Reads `trace` packet by packet, checking what holds in order; open slices per track too.
ReadBack Read(const published::Trace& trace) {
  ReadBack read;
  std::map<uint64_t, std::vector<uint64_t>> open;  // track -> begin timestamps
  for (int i = 0; i < trace.packet_size(); ++i) {
    const TracePacket& packet = trace.packet(i);
    EXPECT_EQ(packet.trusted_packet_sequence_id(), 1u);
    EXPECT_EQ(packet.sequence_flags(), i == 0 ? 1u : 2u) << "packet " << i;
    if (packet.has_track_descriptor()) {
      const published::TrackDescriptor& track = packet.track_descriptor();
      EXPECT_NE(track.uuid(), 0u);
      EXPECT_TRUE(read.tracks.emplace(track.uuid(), track).second) << "described twice";
      if (track.has_parent_uuid()) {
        EXPECT_TRUE(read.tracks.count(track.parent_uuid()));
      }
    }
    if (packet.has_interned_data()) Intern(packet.interned_data(), &read);
    if (!packet.has_track_event()) continue;
    const TrackEvent& event = packet.track_event();
    EXPECT_TRUE(read.tracks.count(event.track_uuid())) << "track not described yet, packet " << i;
    for (const published::DebugAnnotation& annotation : event.debug_annotations()) {
      EXPECT_TRUE(read.annotation_names.count(annotation.name_iid())) << "packet " << i;
      if (annotation.has_string_value_iid()) {
        EXPECT_TRUE(read.values.count(annotation.string_value_iid())) << "packet " << i;
      }
    }
    std::string name;
    if (event.has_name_iid()) {
      EXPECT_TRUE(read.names.count(event.name_iid())) << "name not interned yet, packet " << i;
      name = read.names[event.name_iid()];
    }
    switch (event.type()) {
      case kCounter: {
        EXPECT_TRUE(read.tracks[event.track_uuid()].has_counter());
        int64_t& max = read.counter_max[event.track_uuid()];
        max = std::max(max, event.counter_value());
        break;
      }
      case kSliceBegin:
        open[event.track_uuid()].push_back(packet.timestamp());
        read.slice_begins.push_back(packet.timestamp());
        break;
      case kSliceEnd:
        EXPECT_FALSE(open[event.track_uuid()].empty()) << "an end without its begin, packet " << i;
        if (!open[event.track_uuid()].empty()) {
          EXPECT_GE(packet.timestamp(), open[event.track_uuid()].back());
          open[event.track_uuid()].pop_back();
        }
        read.slice_ends.push_back(packet.timestamp());
        break;
      case kInstant:
        EXPECT_FALSE(name.empty());
        break;
      default:
        ADD_FAILURE() << "event type " << event.type();
    }
    read.events.emplace_back(name, event);
  }
  for (const auto& [track, begins] : open) EXPECT_TRUE(begins.empty()) << "slice left open";
  return read;
}

// The "live bytes" counter track of the process track of `pid`.
int64_t LiveBytesMax(const ReadBack& read, int64_t pid) {
  for (const auto& [uuid, track] : read.tracks) {
    if (!track.has_counter() || track.name() != kLiveBytesCounter) continue;
    const published::TrackDescriptor& process = read.tracks.at(track.parent_uuid());
    if (process.process().pid() != pid) continue;
    EXPECT_EQ(track.counter().unit(), 3);  // UNIT_SIZE_BYTES
    return read.counter_max.count(uuid) ? read.counter_max.at(uuid) : 0;
  }
  ADD_FAILURE() << "no live bytes counter for pid " << pid;
  return -1;
}

class BundledTraceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BundledTraceTest, ReadsBackWithEveryPeak) {
  TraceReplay replay;
  const published::Trace trace =
      Exported(testing::SourcePath("samples/traces/" + GetParam()), &replay);
  ASSERT_GT(trace.packet_size(), 0);
  const ReadBack read = Read(trace);
  ASSERT_FALSE(replay.places.empty());
  for (const PlaceUsage& place : replay.places) {
    EXPECT_EQ(LiveBytesMax(read, TimelinePid(place.place)), static_cast<int64_t>(place.peak_bytes))
        << PlaceName(place.place, *replay.file);
  }
  size_t instants = 0;
  for (const auto& [name, event] : read.events) instants += event.type() == kInstant;
  EXPECT_GT(instants, replay.memory_events / 2);  // allocations and frees, and the "trace" one
  EXPECT_EQ(read.slice_begins.size(), read.slice_ends.size());
  EXPECT_EQ(read.slice_begins.size(), replay.file->launch_event_count());
}

INSTANTIATE_TEST_SUITE_P(Bundled, BundledTraceTest, testing::BundledTraces(),
                         testing::BundledTraceName);

// The export reaches its consumer in chunks as it is produced, never all at the end: each chunk at
// least the chunk size (but the last) and about that; together the same bytes.
TEST(PerfettoTest, HandsTheOutputOnInChunks) {
  const std::string path = testing::SourcePath("samples/traces/train_mlp-async-h100.trace");
  TraceReplay whole_replay;
  const std::string whole = Exported(path, &whole_replay).SerializeAsString();
  constexpr size_t kChunk = 4096;
  std::vector<std::string> chunks;
  ChunkedOutput chunked(
      [&chunks](absl::string_view chunk) {
        chunks.emplace_back(chunk);
        return absl::OkStatus();
      },
      kChunk);
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ExportPerfetto(*std::move(file), nullptr, &chunked);
  const size_t before_finish = chunks.size();
  ASSERT_TRUE(chunked.Finish().ok());
  ASSERT_GT(before_finish, 10u);  // handed on while the trace was read
  EXPECT_EQ(chunks.size(), before_finish + 1);
  std::string joined;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i + 1 < chunks.size()) {
      EXPECT_GE(chunks[i].size(), kChunk) << i;
    }
    EXPECT_LT(chunks[i].size(), 4 * kChunk)
        << i;  // one packet past it (one with a new stack: KiBs)
    joined += chunks[i];
  }
  EXPECT_EQ(joined.size(), chunked.size());
  published::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(joined));
  EXPECT_EQ(trace.SerializeAsString(), whole);
}

// A consumer's first error is what Finish() returns; nothing is handed on after it.
TEST(PerfettoTest, StopsHandingOnAfterAnError) {
  int calls = 0;
  ChunkedOutput chunked(
      [&calls](absl::string_view) {
        ++calls;
        return absl::ResourceExhaustedError("writing out.pftrace: No space left on device");
      },
      16);
  absl::StatusOr<std::unique_ptr<TraceFile>> file =
      TraceFile::Open(testing::SourcePath("samples/traces/leak_loop-h200.trace"));
  ASSERT_TRUE(file.ok()) << file.status();
  ExportPerfetto(*std::move(file), nullptr, &chunked);
  const absl::Status status = chunked.Finish();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(status.message(), "writing out.pftrace: No space left on device");
  EXPECT_GT(chunked.size(), 16u);
}

// A launch with GPU times (CUPTI's CLOCK_REALTIME) and one without; two allocations, one stack.
TEST(PerfettoTest, KernelSlicesAndAnnotations) {
  testing::TempDir dir;
  const std::string path = dir.File("synthetic.trace");
  testing::WriteSyntheticExportTrace(path);

  TraceReplay replay;
  const ReadBack read = Read(Exported(path, &replay));
  // In host launch order: the GPU-timed one from 20 us for 3.5 us (CLOCK_REALTIME turned into the
  // trace's time), the other at its host launch time, 11 us, for 1 us.
  EXPECT_EQ(read.slice_begins, (std::vector<uint64_t>{20000, 11000}));
  EXPECT_EQ(read.slice_ends, (std::vector<uint64_t>{23500, 12000}));
  std::set<std::string> names;
  std::map<std::string, std::string> allocation;  // annotation name -> value as text
  for (const auto& [event_name, event] : read.events) {
    names.insert(event_name);
    if (event_name != "alloc cudaMalloc") continue;
    for (const published::DebugAnnotation& annotation : event.debug_annotations()) {
      const std::string key = read.annotation_names.at(annotation.name_iid());
      allocation[key] =
          annotation.has_string_value_iid() ? read.values.at(annotation.string_value_iid())
          : annotation.has_pointer_value()  ? std::to_string(annotation.pointer_value())
                                            : std::to_string(annotation.uint_value());
    }
  }
  EXPECT_TRUE(names.count("kernel(int*)"));
  EXPECT_TRUE(names.count("trace"));
  EXPECT_EQ(allocation["size"], "1048576");
  EXPECT_EQ(allocation["address"], std::to_string(0x7f0000100000));
  EXPECT_EQ(allocation["seq"], "2");  // the last one
  EXPECT_EQ(allocation["kind"], "device");
  EXPECT_EQ(allocation["stack"], "/home/me/train.py:12 in step;inner\\nline");
  size_t stacks_written = 0;  // interned once, used by both allocations
  for (const auto& [iid, value] : read.values) stacks_written += value == allocation["stack"];
  EXPECT_EQ(stacks_written, 1u);
  EXPECT_EQ(LiveBytesMax(read, 1), 2 << 20);
}

}  // namespace
}  // namespace gpumem::report
