// `gpumem advise` end to end: a training loop in plain CUDA (programs/advise_program.cc) recorded
// under the real preload library against the fake CUDA at several batch sizes, then advised. Every
// expectation comes from the program's own sizes (programs/advise_program.h) and the async model's
// rule (a plain CUDA program is modelled as the async pool: reserved = the live bytes rounded up
// to 2 MiB), never from advise's output; the largest batch that fits is checked against recordings
// made at that batch and the next.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/integration/programs/advise_program.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using advise_program::kGrowingBytes;
using advise_program::kIdleBytes;
using advise_program::kMiB;
using advise_program::PeakLiveBytes;
using google::protobuf::Struct;
using google::protobuf::Value;
using testing::BuildPath;
using testing::ProgramRun;
using testing::RecordingEnvironment;
using testing::RunGpumem;
using testing::RunProgram;
using testing::SourcePath;
using testing::TempDir;

constexpr int kSteps = advise_program::kDefaultSteps;

std::string Program() { return BuildPath("tests/programs/advise_program"); }

uint32_t MarkedLine(const std::string& name) {
  const std::map<std::string, uint32_t> markers =
      testing::MarkedLines(SourcePath("tests/integration/programs/advise_program.cc"));
  auto it = markers.find(name);
  if (it == markers.end()) ADD_FAILURE() << "no marker " << name;
  return it == markers.end() ? 0 : it->second;
}

// The async model's reserved bytes for `live` bytes: rounded up to the pool's 2 MiB granularity.
uint64_t AsyncReserved(uint64_t live) {
  constexpr uint64_t kGranularity = 2 * kMiB;
  return (live + kGranularity - 1) / kGranularity * kGranularity;
}

uint64_t ReservedPeak(int64_t batch) { return AsyncReserved(PeakLiveBytes(batch, kSteps)); }

// The largest batch whose reserved peak fits `limit`, by trying every batch.
int64_t LargestFittingBatch(uint64_t limit) {
  int64_t batch = 0;
  while (ReservedPeak(batch + 1) <= limit) ++batch;
  return batch;
}

// The program run at `batch` under the preload library into DIR/NAME; returns the trace's path.
std::string Record(const TempDir& dir, const std::string& name, int64_t batch) {
  const std::string trace = dir.File(name);
  const ProgramRun run =
      RunProgram({Program(), "--batch", std::to_string(batch), "--steps", std::to_string(kSteps)},
                 RecordingEnvironment(trace));
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  return trace;
}

ProgramRun Advise(std::vector<std::string> args) {
  args.insert(args.begin(), "advise");
  return RunGpumem(args);
}

// `gpumem advise --json` on `args`, parsed (an empty object, with a failure, when it is not JSON).
Struct AdviseJson(std::vector<std::string> args, int expected_exit) {
  args.insert(args.begin(), "--json");
  const ProgramRun run = Advise(args);
  EXPECT_EQ(run.exit_code, expected_exit) << run.err;
  Struct parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(run.out, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << run.out;
  return parsed;
}

const Value& Field(const Struct& object, const std::string& name) {
  static const Value kMissing;
  auto it = object.fields().find(name);
  if (it == object.fields().end()) ADD_FAILURE() << "no field " << name;
  return it == object.fields().end() ? kMissing : it->second;
}
uint64_t Number(const Struct& object, const std::string& name) {
  return static_cast<uint64_t>(Field(object, name).number_value());
}

// The remedy of `kind` whose user frame is advise_program.cc at `line` (nullptr when none).
const Struct* RemedyAt(const Struct& advice, const std::string& kind, uint32_t line) {
  for (const Value& each : Field(advice, "remedies").list_value().values()) {
    const Struct& remedy = each.struct_value();
    if (Field(remedy, "kind").string_value() != kind) continue;
    const Value& frame = Field(remedy, "user_frame");
    if (!frame.has_struct_value()) continue;
    const std::string file = Field(frame.struct_value(), "file").string_value();
    if (file.ends_with("advise_program.cc") && Number(frame.struct_value(), "line") == line) {
      return &remedy;
    }
  }
  return nullptr;
}

TEST(Advise, ExitStatusSaysWhetherTheRunFitsAtItsReservedPeak) {
  TempDir dir;
  const std::string trace = Record(dir, "b4.trace", 4);
  const uint64_t peak = ReservedPeak(4);
  // The fake device's 2 GiB by default; the reserved peak exactly; 2 MiB (one granule) less.
  EXPECT_EQ(Advise({trace}).exit_code, 0);
  EXPECT_EQ(Advise({"--device-memory", std::to_string(peak), trace}).exit_code, 0);
  const ProgramRun small = Advise({"--device-memory", std::to_string(peak - 2 * kMiB), trace});
  EXPECT_EQ(small.exit_code, 1) << small.err;
  EXPECT_NE(small.out.find("DOES NOT FIT"), std::string::npos) << small.out;
  const Struct advice = AdviseJson({"--device-memory", "1GiB", trace}, 0);
  EXPECT_EQ(Number(advice, "peak"), peak);
  EXPECT_EQ(Field(advice, "allocator").string_value(), "async");  // a plain CUDA program
  EXPECT_TRUE(Field(advice, "fits").bool_value());
}

TEST(Advise, BadInputIsExitTwoWithOneErrorLine) {
  TempDir dir;
  const std::string b4 = Record(dir, "b4.trace", 4);
  const std::string b4_again = Record(dir, "b4-again.trace", 4);
  const std::string b8 = Record(dir, "b8.trace", 8);
  const std::string not_a_trace = dir.File("notes.txt");
  std::ofstream(not_a_trace) << "not a trace\n";
  const struct {
    const char* what;
    std::vector<std::string> args;
  } kCases[] = {
      {"a missing file", {dir.File("missing.trace")}},
      {"a file that is not a trace", {not_a_trace}},
      {"three traces", {b4, b8, b4_again}},
      {"--batch-sizes with one trace", {"--batch-sizes", "4,8", b4}},
      {"--batch-sizes of one size twice", {"--batch-sizes", "4,4", b4, b8}},
      {"command lines that differ in no number", {b4, b4_again}},
  };
  for (const auto& [what, args] : kCases) {
    const ProgramRun run = Advise(args);
    EXPECT_EQ(run.exit_code, 2) << what << "\n" << run.out << run.err;
    EXPECT_EQ(testing::CountLines(run.err, "gpumem: error: "), 1) << what << "\n" << run.err;
  }
  // The same two traces are fine once the batch sizes are given.
  EXPECT_EQ(Advise({"--batch-sizes", "4,8", b4, b4_again}).exit_code, 0);
}

TEST(Advise, BatchSizesComeFromTheCommandLines) {
  TempDir dir;
  const std::string b4 = Record(dir, "b4.trace", 4);
  const std::string b8 = Record(dir, "b8.trace", 8);
  const Struct advice = AdviseJson({b8, b4}, 0);
  const Struct& batch = Field(advice, "batch").struct_value();
  const auto& sizes = Field(batch, "sizes").list_value().values();
  ASSERT_EQ(sizes.size(), 2);
  EXPECT_EQ(sizes[0].number_value(), 8);
  EXPECT_EQ(sizes[1].number_value(), 4);
  // Every allocation matched its counterpart in the other run.
  EXPECT_EQ(Number(batch, "tensors"), advise_program::Allocations(kSteps));
  EXPECT_EQ(Number(batch, "matched"), advise_program::Allocations(kSteps));
  EXPECT_TRUE(Field(advice, "second_trace").has_null_value());
}

// The largest batch that fits, extrapolated from batches 16 and 8, is the one whose own recording
// fits while the next one's does not; and batch 16 is kept with gradient accumulation.
TEST(Advise, LargestBatchThatFitsAgreesWithRecordingsAtThatBatch) {
  // 81 MiB: the live bytes of a batch of 14 fit, but not once rounded to the pool's granule.
  const uint64_t limit = 81 * kMiB;
  const int64_t largest = LargestFittingBatch(limit);
  ASSERT_EQ(largest, 13);  // the program's sizes as this test expects them
  ASSERT_LE(PeakLiveBytes(largest + 1, kSteps), limit);
  TempDir dir;
  const std::string b16 = Record(dir, "b16.trace", 16);
  const std::string b8 = Record(dir, "b8.trace", 8);
  const Struct advice = AdviseJson({"--device-memory", std::to_string(limit), b16, b8}, 1);
  const Struct& batch = Field(advice, "batch").struct_value();
  const auto& per_allocator = Field(batch, "largest").list_value().values();
  ASSERT_EQ(per_allocator.size(), 1);  // a plain CUDA program: the async pool alone
  const Struct& async = per_allocator[0].struct_value();
  EXPECT_EQ(Field(async, "allocator").string_value(), "async");
  EXPECT_EQ(Number(async, "batch"), static_cast<uint64_t>(largest));
  EXPECT_EQ(Number(async, "peak"), ReservedPeak(largest));

  const std::string at_largest = Record(dir, "largest.trace", largest);
  const std::string above = Record(dir, "above.trace", largest + 1);
  EXPECT_EQ(Advise({"--device-memory", std::to_string(limit), at_largest}).exit_code, 0);
  EXPECT_EQ(Advise({"--device-memory", std::to_string(limit), above}).exit_code, 1);

  // 16 = 2 x 8, the fewest micro-batches of at most 13.
  const Struct& accumulation = Field(batch, "accumulation").struct_value();
  EXPECT_EQ(Number(accumulation, "effective_batch"), 16u);
  EXPECT_EQ(Number(accumulation, "steps"), 2u);
  EXPECT_EQ(Number(accumulation, "micro_batch"), 8u);
  const Struct* remedy = nullptr;
  for (const Value& each : Field(advice, "remedies").list_value().values()) {
    if (Field(each.struct_value(), "kind").string_value() == "batch") remedy = &each.struct_value();
  }
  ASSERT_NE(remedy, nullptr);
  EXPECT_EQ(Number(*remedy, "micro_batch"), 8u);
  EXPECT_EQ(Number(*remedy, "accumulation_steps"), 2u);
  EXPECT_EQ(Number(*remedy, "peak"), ReservedPeak(8));
  EXPECT_EQ(Field(*remedy, "source").string_value(), "extrapolated");
  EXPECT_TRUE(Field(*remedy, "fits").bool_value());
}

// The growing list and the idle buffer, each at its marked line with its bytes, and the peak each
// change would leave: releasing the list each step leaves two growing buffers live at the peak
// (the step's and the previous one, freed once its successor exists); freeing the idle buffer
// after its one use takes it out of the peak.
TEST(Advise, RemediesNameTheGrowingAndIdleLinesWithTheirBytesAndSavings) {
  TempDir dir;
  const std::string trace = Record(dir, "b4.trace", 4);
  const Struct advice = AdviseJson({"--device-memory", "1GiB", trace}, 0);
  const uint64_t peak = Number(advice, "peak");
  ASSERT_EQ(peak, ReservedPeak(4));
  const uint64_t live = PeakLiveBytes(4, kSteps);

  const Struct* release = RemedyAt(advice, "release_growing", MarkedLine("growing"));
  ASSERT_NE(release, nullptr);
  EXPECT_EQ(Number(*release, "bytes"), kGrowingBytes);
  EXPECT_EQ(Number(*release, "peak"), AsyncReserved(live - (kSteps - 2) * kGrowingBytes));

  const Struct* idle = RemedyAt(advice, "free_after_last_use", MarkedLine("idle"));
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(Number(*idle, "bytes"), kIdleBytes);
  EXPECT_EQ(Number(*idle, "peak"), peak - kIdleBytes);
  EXPECT_EQ(Number(*idle, "saving"), kIdleBytes);

  // The growing buffers of the steps before the last are idle at the peak too.
  const Struct* stale = RemedyAt(advice, "free_after_last_use", MarkedLine("growing"));
  ASSERT_NE(stale, nullptr);
  EXPECT_EQ(Number(*stale, "bytes"), (kSteps - 1) * kGrowingBytes);
  EXPECT_EQ(Number(*stale, "peak"), AsyncReserved(live - (kSteps - 1) * kGrowingBytes));

  // Ranked by saving, the largest first, and numbered so.
  const auto& remedies = Field(advice, "remedies").list_value().values();
  ASSERT_EQ(remedies.size(), 3);
  EXPECT_EQ(&remedies[0].struct_value(), idle);
  EXPECT_EQ(&remedies[1].struct_value(), stale);
  EXPECT_EQ(&remedies[2].struct_value(), release);
  for (int i = 0; i < remedies.size(); ++i) {
    EXPECT_EQ(Number(remedies[i].struct_value(), "rank"), static_cast<uint64_t>(i + 1));
  }
}

// The text of remedy `rank` ("N. " at a line's start up to the next remedy or the end).
std::string RemedyText(const std::string& out, int rank) {
  const size_t start = out.find("\n" + std::to_string(rank) + ". ");
  if (start == std::string::npos) return "";
  return out.substr(start, out.find("\n\n", start + 1) - start);
}

TEST(Advise, TextNamesTheLinesLargestSavingFirstAndTheSecondRecording) {
  TempDir dir;
  const std::string trace = Record(dir, "b4.trace", 4);
  const ProgramRun run = Advise({"--device-memory", "1GiB", trace});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string& out = run.out;
  const std::string idle_line = "advise_program.cc:" + std::to_string(MarkedLine("idle"));
  const std::string growing_line = "advise_program.cc:" + std::to_string(MarkedLine("growing"));
  // Savings 32, 20 and 16 MiB (the JSON test's figures), in that order.
  const std::string first = RemedyText(out, 1);
  const std::string second = RemedyText(out, 2);
  const std::string third = RemedyText(out, 3);
  EXPECT_NE(first.find("32.00 MiB held at the peak that no later kernel used"), std::string::npos)
      << out;
  EXPECT_NE(first.find(idle_line), std::string::npos) << out;
  EXPECT_NE(first.find(", 32.00 MiB less: fits"), std::string::npos) << out;
  EXPECT_NE(second.find("20.00 MiB held at the peak that no later kernel used"), std::string::npos)
      << out;
  EXPECT_NE(second.find(growing_line), std::string::npos) << out;
  EXPECT_NE(third.find("4.00 MiB more each iteration"), std::string::npos) << out;
  EXPECT_NE(third.find(growing_line), std::string::npos) << out;
  EXPECT_NE(third.find(", 16.00 MiB less: fits"), std::string::npos) << out;
  EXPECT_EQ(RemedyText(out, 4), "") << out;
  // One trace: the command that records the same program at half the batch.
  EXPECT_NE(out.find("gpumem record --tensors -o second.trace -- " + Program() +
                     " --batch 2 --steps " + std::to_string(kSteps) + "\n"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace gpumem
