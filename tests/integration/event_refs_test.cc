// Event references (format 2) under the real preload library against the fake CUDA: a loop of the
// same allocations, launches and frees comes out at no more than 16 bytes an event, and every
// report reads it as it reads the same run written in full (GPUMEM_EVENT_REFS=0).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::RecordingEnvironment;
using testing::RunGpumem;
using testing::RunProgram;
using testing::TempDir;

constexpr int kSteps = 1000;

struct Recorded {
  uint64_t bytes = 0;
  uint64_t events = 0;  // memory and launch events
  uint64_t references = 0;
  uint32_t format_version = 0;
};

Recorded RecordLoop(const std::string& trace, const std::string& event_refs,
                    const std::string& mode = "", const std::string& resync_events = "") {
  auto environment = RecordingEnvironment(trace);
  environment["GPUMEM_EVENT_REFS"] = event_refs;
  if (!resync_events.empty()) environment["GPUMEM_RESYNC_EVENTS"] = resync_events;
  std::vector<std::string> command = {BuildPath("tests/programs/training_loop"),
                                      std::to_string(kSteps)};
  if (!mode.empty()) command.push_back(mode);
  const ProgramRun run = RunProgram(command, environment);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  Recorded recorded;
  auto file = report::TraceFile::Read(trace);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return recorded;
  EXPECT_FALSE((*file)->end().damaged()) << (*file)->end().Describe();
  recorded.bytes = std::filesystem::file_size(trace);
  recorded.events = (*file)->memory_event_count() + (*file)->launch_event_count();
  recorded.references = (*file)->event_ref_count();
  recorded.format_version = (*file)->header().format_version();
  return recorded;
}

// `gpumem report` of `trace`, without what differs between two runs: the pid and the time.
std::string Report(const std::string& trace) {
  const ProgramRun run = RunGpumem({"report", "--peak", "--leaks", trace});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::string without_pid = std::regex_replace(run.out, std::regex("pid [0-9]+"), "pid");
  return std::regex_replace(without_pid, std::regex("[0-9.]+ ms after start"), "ms after start");
}

// `gpumem dump --counts` of both traces agree; only the references' own line is the compact one's.
void ExpectSameCounts(const std::string& compact, const std::string& full) {
  const ProgramRun counts_compact = RunGpumem({"dump", "--counts", compact});
  const ProgramRun counts_full = RunGpumem({"dump", "--counts", full});
  EXPECT_EQ(counts_compact.exit_code, 0) << counts_compact.err;
  EXPECT_EQ(std::regex_replace(counts_compact.out,
                               std::regex("event_refs count=[0-9]+ events=[0-9]+\n"), ""),
            counts_full.out);
}

// The same events as without references, at most 16 bytes each, nine in ten of them references.
void ExpectCompact(const Recorded& with_refs, const Recorded& without) {
  EXPECT_EQ(with_refs.events, without.events);
  EXPECT_EQ(with_refs.format_version, 3u);
  const double bytes_per_event =
      static_cast<double>(with_refs.bytes) / static_cast<double>(with_refs.events);
  EXPECT_LE(bytes_per_event, 16.0) << with_refs.bytes << " bytes, " << with_refs.events
                                   << " events, " << with_refs.references << " references; "
                                   << "in full: " << without.bytes << " bytes";
  EXPECT_GT(with_refs.references, with_refs.events * 9 / 10);
}

TEST(EventRefs, ARepeatingLoopTakesAtMost16BytesAnEventAndReportsTheSame) {
  TempDir dir;
  const std::string compact = dir.File("compact.trace");
  const std::string full = dir.File("full.trace");
  const Recorded with_refs = RecordLoop(compact, "1");
  const Recorded without = RecordLoop(full, "0");
  // Per step: 3 allocations, 3 launches, 3 frees.
  ASSERT_GE(with_refs.events, 9u * kSteps);
  EXPECT_EQ(without.references, 0u);
  EXPECT_EQ(without.format_version, 1u);
  ExpectCompact(with_refs, without);

  const std::string report = Report(compact);
  EXPECT_EQ(report, Report(full));
  EXPECT_NE(report.find("training_loop.cc:"), std::string::npos) << report;  // the leak's site
}

// A pooling allocator's loop (cudaMallocAsync): each step's addresses shift, so events repeat only
// in all but their addresses and pointer arguments, which the references code against a table.
TEST(EventRefs, ALoopWhoseAddressesShiftTakesAtMost16BytesAnEventAndReportsTheSame) {
  TempDir dir;
  const std::string compact = dir.File("compact.trace");
  const std::string full = dir.File("full.trace");
  const Recorded with_refs = RecordLoop(compact, "1", "--shifting");
  const Recorded without = RecordLoop(full, "0", "--shifting");
  // Per step: 4 allocations, 3 launches, 3 or 4 frees.
  ASSERT_GE(with_refs.events, 10u * kSteps);
  ExpectCompact(with_refs, without);
  EXPECT_EQ(Report(compact), Report(full));
  ExpectSameCounts(compact, full);
}

// Every GPUMEM_RESYNC_EVENTS events a thread writes each template in full again and starts its
// address table anew: the reports do not change, and the trace stays compact.
TEST(EventRefs, TemplatesStartingAnewChangeNoReport) {
  TempDir dir;
  const std::string compact = dir.File("compact.trace");
  const std::string full = dir.File("full.trace");
  const Recorded with_refs = RecordLoop(compact, "1", "--shifting", "1000");
  const Recorded without = RecordLoop(full, "0", "--shifting");
  ExpectCompact(with_refs, without);
  EXPECT_EQ(Report(compact), Report(full));
  ExpectSameCounts(compact, full);
}

// What a reader of `trace` makes of it after `count` bytes in its middle are overwritten.
struct ReadAfterDamage {
  uint64_t events = 0;  // memory and launch events read
  uint64_t unresolved = 0;
};

ReadAfterDamage DamageTheMiddle(const std::string& trace, size_t count) {
  std::string bytes = testing::ReadFile(trace);
  const size_t middle = bytes.size() / 2;
  for (size_t i = 0; i < count; ++i) bytes[middle + i] = static_cast<char>(0x9b + 37 * i);
  std::ofstream(trace, std::ios::binary | std::ios::trunc) << bytes;
  ReadAfterDamage read;
  auto file = report::TraceFile::Read(trace);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return read;
  EXPECT_TRUE((*file)->end().damaged());
  read.events = (*file)->memory_event_count() + (*file)->launch_event_count();
  read.unresolved = (*file)->end().unresolved_refs;
  return read;
}

// Damage in the middle of a trace costs the events up to each thread's next restart of its
// templates, not every event after it: without restarts, a reference's template or addresses may
// have been redefined in the lost bytes, so the reader trusts none of them again.
TEST(EventRefs, ATraceDamagedInTheMiddleIsReadAgainFromTheNextRestart) {
  TempDir dir;
  const std::string resyncing = dir.File("resyncing.trace");
  const std::string never = dir.File("never.trace");
  constexpr uint64_t kResyncEvents = 500;
  const Recorded recorded = RecordLoop(resyncing, "1", "--shifting", std::to_string(kResyncEvents));
  const Recorded recorded_never = RecordLoop(never, "1", "--shifting", "0");
  // Intact, its report has no note of lost events (Report() also expects exit 0).
  EXPECT_EQ(Report(resyncing).find("note: events were lost"), std::string::npos);
  const ReadAfterDamage read = DamageTheMiddle(resyncing, 40);
  const ReadAfterDamage read_never = DamageTheMiddle(never, 40);
  // The loop's thread writes nearly all events; the damage lost at most a packet's worth of them,
  // and the references up to the restart after it.
  EXPECT_GT(read.unresolved, 0u);
  EXPECT_LE(read.unresolved, kResyncEvents);
  EXPECT_GE(read.events + read.unresolved + 16, recorded.events);
  // Without restarts the second half is lost.
  EXPECT_GT(read_never.unresolved, recorded_never.events / 3);
  // Damaged, its report says what the loss means for its findings.
  const ProgramRun damaged = RunGpumem({"report", resyncing});
  EXPECT_NE(damaged.exit_code, 0);
  EXPECT_NE(damaged.out.find("note: events were lost to the damage"), std::string::npos)
      << damaged.out;
}

}  // namespace
}  // namespace gpumem
