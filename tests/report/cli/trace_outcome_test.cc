// EncodeOutcome / DecodeOutcome (report/cli/trace_outcome.h): a trace's outcome, its timeline's
// spools included (points in their files, in memory, and the blocks that sum them up), comes back
// whole from bytes and descriptors, as the parent of a `gpumem report` worker takes it.
#include "report/cli/trace_outcome.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

bool IsOpen(int descriptor) { return fcntl(descriptor, F_GETFD) != -1; }

// A spool of `points` points in blocks of 3, each written to its file once encoded.
TimelineSpool SpoolOf(uint64_t points, uint64_t start_ns) {
  TimelineSpool spool(4, 3);
  for (uint64_t i = 0; i < points; ++i) spool.Append({start_ns + 10 * i, (i * 7919) % 1000});
  return spool;
}

TraceOutcome Outcome() {
  TraceOutcome outcome;
  outcome.pieces.push_back({false, "== rank-\xff.trace\nreport text\n"});
  outcome.Error("rank-\xff.trace: torn packet at byte 12");
  outcome.json = "{\"path\":\"rank\"}";
  ProcessTimeline timeline;
  timeline.path = "rank-\xff.trace";  // not UTF-8
  timeline.host = "node7";
  timeline.pid = 4242;
  timeline.rank = 3;
  timeline.world_size = 8;
  timeline.rows.push_back({0,
                           5000,
                           77,
                           {{"torch", "PyTorch's caching allocator", 4000}},
                           100,
                           {{"other", "not held by an allocator or library", 100}}});
  timeline.command_line = {"python3", "train.py"};
  timeline.start_time_mono_ns = 123456;
  timeline.places.emplace(0, SpoolOf(23, 1000));
  timeline.places.emplace(-2, SpoolOf(2, 5000));  // all in memory, no file
  timeline.place_names = {{0, "device 0 (GPU Zero)"}, {-2, "pinned host"}};
  outcome.timeline = std::move(timeline);
  return outcome;
}

void ExpectSameSpool(const TimelineSpool& got, const TimelineSpool& want) {
  ASSERT_EQ(got.size(), want.size());
  const std::vector<TimelinePoint> got_points = got.ReadAll();
  const std::vector<TimelinePoint> want_points = want.ReadAll();
  for (size_t i = 0; i < want_points.size(); ++i) {
    EXPECT_EQ(got_points[i].timestamp_ns, want_points[i].timestamp_ns) << i;
    EXPECT_EQ(got_points[i].live_bytes, want_points[i].live_bytes) << i;
  }
  ASSERT_EQ(got.blocks().size(), want.blocks().size());
  for (size_t i = 0; i < want.blocks().size(); ++i) {
    EXPECT_EQ(got.blocks()[i].first_ns, want.blocks()[i].first_ns);
    EXPECT_EQ(got.blocks()[i].last_ns, want.blocks()[i].last_ns);
    EXPECT_EQ(got.blocks()[i].highest, want.blocks()[i].highest);
    EXPECT_EQ(got.blocks()[i].entering, want.blocks()[i].entering);
  }
  EXPECT_EQ(got.block_points(), want.block_points());
  EXPECT_EQ(got.last_live_bytes(), want.last_live_bytes());
}

TEST(TraceOutcomeTest, ComesBackWhole) {
  TraceOutcome sent = Outcome();
  WorkerResult result = EncodeOutcome(sent);
  ASSERT_EQ(result.descriptors.size(), 1u) << "only place 0's points went to a file";
  absl::StatusOr<TraceOutcome> got = DecodeOutcome(std::move(result));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->pieces.size(), 2u);
  EXPECT_FALSE(got->pieces[0].error);
  EXPECT_EQ(got->pieces[0].text, sent.pieces[0].text);
  EXPECT_TRUE(got->pieces[1].error);
  EXPECT_EQ(got->pieces[1].text, sent.pieces[1].text);
  EXPECT_FALSE(got->ok);
  EXPECT_EQ(got->json, sent.json);
  ASSERT_TRUE(got->timeline.has_value());
  const ProcessTimeline& timeline = *got->timeline;
  EXPECT_EQ(timeline.path, "rank-\xff.trace");
  EXPECT_EQ(timeline.host, "node7");
  EXPECT_EQ(timeline.pid, 4242u);
  EXPECT_EQ(timeline.rank, 3);
  EXPECT_FALSE(timeline.local_rank.has_value());
  EXPECT_EQ(timeline.world_size, 8);
  ASSERT_EQ(timeline.rows.size(), 1u);
  EXPECT_EQ(timeline.rows[0].peak_bytes, 5000u);
  EXPECT_EQ(timeline.rows[0].peak_time_ns, 77u);
  ASSERT_EQ(timeline.rows[0].at_peak.size(), 1u);
  EXPECT_EQ(timeline.rows[0].at_peak[0].name, "PyTorch's caching allocator");
  EXPECT_EQ(timeline.rows[0].at_peak[0].bytes, 4000u);
  EXPECT_EQ(timeline.rows[0].exit_bytes, 100u);
  ASSERT_EQ(timeline.rows[0].at_exit.size(), 1u);
  EXPECT_EQ(timeline.rows[0].at_exit[0].id, "other");
  EXPECT_EQ(timeline.command_line, sent.timeline->command_line);
  EXPECT_EQ(timeline.start_time_mono_ns, 123456u);
  EXPECT_EQ(timeline.place_names, sent.timeline->place_names);
  ASSERT_EQ(timeline.places.size(), 2u);
  for (const auto& [place, spool] : sent.timeline->places) {
    ASSERT_TRUE(timeline.places.count(place)) << place;
    ExpectSameSpool(timeline.places.at(place), spool);
  }
  // The sender's spools are untouched: the receiver reads a copy of the descriptor, not its own.
  ExpectSameSpool(sent.timeline->places.at(0), SpoolOf(23, 1000));
}

// A decoded spool goes on as the sender's would have: more points, to its file and past it.
TEST(TraceOutcomeTest, ADecodedSpoolTakesMorePoints) {
  TraceOutcome sent;
  sent.timeline.emplace();
  sent.timeline->places.emplace(0, SpoolOf(9, 0));
  absl::StatusOr<TraceOutcome> got = DecodeOutcome(EncodeOutcome(sent));
  ASSERT_TRUE(got.ok()) << got.status();
  TimelineSpool& spool = got->timeline->places.at(0);
  TimelineSpool& original = sent.timeline->places.at(0);
  for (uint64_t i = 9; i < 20; ++i) {
    spool.Append({10 * i, i});
    original.Append({10 * i, i});
  }
  ExpectSameSpool(spool, original);
}

TEST(TraceOutcomeTest, RefusesWhatDoesNotAddUpAndClosesTheDescriptors) {
  WorkerResult result = EncodeOutcome(Outcome());
  const int descriptor = result.descriptors.at(0);
  result.descriptors.clear();  // the file is not handed over
  absl::StatusOr<TraceOutcome> got = DecodeOutcome(std::move(result));
  EXPECT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "a timeline names a file it was not handed");
  close(descriptor);

  WorkerResult garbage = EncodeOutcome(Outcome());
  const int handed = garbage.descriptors.at(0);
  garbage.bytes = "\xff\xff\xff";
  got = DecodeOutcome(std::move(garbage));
  EXPECT_FALSE(got.ok());
  EXPECT_FALSE(IsOpen(handed)) << "a descriptor no spool took over was left open";
}

}  // namespace
}  // namespace gpumem::report
