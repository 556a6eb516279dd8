// OOM post-mortem: each failed allocation with the live set at that moment by call site, what was
// allocated early and is still held, which call sites would have made room, retries grouped; on
// synthetic events with hand-computed answers, and on oom_loop recorded here under the preload
// against the fake CUDA (7 chunks of 256 MiB fit in 2 GiB, the 8th fails).
#include "report/analysis/oom.h"

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/replay/replay.h"
#include "tests/support/synthetic_events.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using ::gpumem::testing::BuildPath;
using ::gpumem::testing::ProgramRun;
using ::gpumem::testing::RecordingEnvironment;
using ::gpumem::testing::RunProgram;
using ::gpumem::testing::TempDir;

constexpr uint64_t kMiB = 1 << 20;

// Events with seq 1, 2, ... and timestamps seq * 1000 ns.
class Events : public testing::SyntheticEvents {
 public:
  using SyntheticEvents::Free;
  MemoryEvent& Malloc(int32_t device, uint64_t size, uint64_t address, uint64_t stack_id) {
    return Add(CUDA_MALLOC, DEVICE, ALLOC, device, size, address, stack_id);
  }
  MemoryEvent& Failed(int32_t device, uint64_t size, uint64_t stack_id, uint64_t free_bytes,
                      uint64_t total_bytes) {
    MemoryEvent& event = Add(CUDA_MALLOC, DEVICE, ALLOC_FAILED, device, size, 0, stack_id);
    event.set_result(2);
    event.set_free_bytes(free_bytes);
    event.set_total_bytes(total_bytes);
    return event;
  }
};

// Seq 1..20, so the first 10% is seq 1 and 2 (early_before_seq 3). Device 0 at the failure (seq
// 7): stack 1 100 MiB (seq 1, early), stack 3 30 + 20 MiB (seq 3 and 6); stack 2's 10 MiB (seq 2)
// was freed at seq 5; device 1 holds 50 MiB of stack 3, which is not device 0's.
Events OneFailure() {
  Events events;
  events.Malloc(0, 100 * kMiB, 0x1000'0000, 1);           // 1
  events.Malloc(0, 10 * kMiB, 0x2000'0000, 2);            // 2
  events.Malloc(0, 30 * kMiB, 0x3000'0000, 3);            // 3
  events.Malloc(1, 50 * kMiB, 0x4000'0000, 3);            // 4
  events.Free(0x2000'0000);                               // 5
  events.Malloc(0, 20 * kMiB, 0x5000'0000, 3);            // 6
  events.Failed(0, 64 * kMiB, 4, 16 * kMiB, 256 * kMiB);  // 7
  for (uint64_t i = 0; i < 6; ++i) {                      // 8..19
    events.Malloc(1, kMiB, 0x9000'0000 + i * 0x100'0000, 5);
    events.Free(0x9000'0000 + i * 0x100'0000);
  }
  events.Free(0x1000'0000);  // 20
  return events;
}

TEST(OomTest, LiveSetAtTheFailureByCallSite) {
  const OomReport report = AnalyzeOoms(OneFailure().events());
  EXPECT_EQ(report.first_seq, 1u);
  EXPECT_EQ(report.last_seq, 20u);
  EXPECT_EQ(report.early_before_seq, 3u);
  ASSERT_EQ(report.failures.size(), 1u);
  const OomFailure& failure = report.failures[0];
  EXPECT_EQ(failure.place, 0);
  EXPECT_EQ(failure.request.seq(), 7u);
  EXPECT_EQ(failure.request.size(), 64 * kMiB);
  EXPECT_EQ(failure.request.api(), CUDA_MALLOC);
  EXPECT_EQ(failure.request.stack_id(), 4u);
  ASSERT_EQ(failure.attempts.size(), 1u);
  EXPECT_EQ(failure.attempts[0].free_bytes, 16 * kMiB);
  EXPECT_EQ(failure.attempts[0].total_bytes, 256 * kMiB);
  EXPECT_EQ(failure.live.bytes, 150 * kMiB);
  EXPECT_EQ(failure.live.count, 3u);
  EXPECT_EQ(failure.early.bytes, 100 * kMiB);
  EXPECT_EQ(failure.early.count, 1u);
  ASSERT_EQ(failure.sites.size(), 2u);
  EXPECT_EQ(failure.sites[0].stack_id, 1u);
  EXPECT_EQ(failure.sites[0].live.bytes, 100 * kMiB);
  EXPECT_EQ(failure.sites[0].live.count, 1u);
  EXPECT_EQ(failure.sites[0].early.bytes, 100 * kMiB);
  EXPECT_EQ(failure.sites[1].stack_id, 3u);
  EXPECT_EQ(failure.sites[1].live.bytes, 50 * kMiB);
  EXPECT_EQ(failure.sites[1].live.count, 2u);
  EXPECT_EQ(failure.sites[1].early.bytes, 0u);
}

// As `gpumem report` runs it: the live sets read from the caller's replay, which adds each event
// right after the analysis saw it, instead of a replay of the analysis' own.
TEST(OomTest, AReplaySharedWithTheCallerGivesTheSameLiveSets) {
  const Events events = OneFailure();
  Replay shared;
  OomAnalysis analysis({}, nullptr, &shared);
  for (const MemoryEvent& event : events.events()) {
    analysis.Add(event);
    shared.Add(event);
  }
  const OomReport report = analysis.Finish();
  const OomReport own = AnalyzeOoms(events.events());
  ASSERT_EQ(report.failures.size(), 1u);
  ASSERT_EQ(own.failures.size(), 1u);
  EXPECT_EQ(report.failures[0].live.bytes, 150 * kMiB);
  EXPECT_EQ(report.failures[0].live.count, 3u);
  EXPECT_EQ(report.failures[0].early.bytes, own.failures[0].early.bytes);
  ASSERT_EQ(report.failures[0].sites.size(), own.failures[0].sites.size());
  for (size_t i = 0; i < own.failures[0].sites.size(); ++i) {
    EXPECT_EQ(report.failures[0].sites[i].stack_id, own.failures[0].sites[i].stack_id);
    EXPECT_EQ(report.failures[0].sites[i].live.bytes, own.failures[0].sites[i].live.bytes);
    EXPECT_EQ(report.failures[0].sites[i].early.bytes, own.failures[0].sites[i].early.bytes);
  }
}

TEST(OomTest, CallSitesMergeThroughTheMapping) {
  // Stack 3 stands for stack 1 too: one call site of 150 MiB, 100 MiB of it early.
  const OomReport report = AnalyzeOoms(OneFailure().events(), [](uint64_t stack_id) {
    return stack_id == 1 ? uint64_t{3} : stack_id;
  });
  ASSERT_EQ(report.failures.size(), 1u);
  ASSERT_EQ(report.failures[0].sites.size(), 1u);
  EXPECT_EQ(report.failures[0].sites[0].stack_id, 3u);
  EXPECT_EQ(report.failures[0].sites[0].live.bytes, 150 * kMiB);
  EXPECT_EQ(report.failures[0].sites[0].live.count, 3u);
  EXPECT_EQ(report.failures[0].sites[0].early.bytes, 100 * kMiB);
}

TEST(OomTest, SitesThatWouldHaveMadeRoom) {
  OomFailure failure = AnalyzeOoms(OneFailure().events()).failures.at(0);
  bool enough = false;
  // 64 MiB asked, 16 MiB free: 48 MiB short; the largest site (100 MiB) covers it.
  EXPECT_EQ(SitesThatWouldHaveMadeRoom(failure, &enough), 1u);
  EXPECT_TRUE(enough);
  failure.request.set_size(136 * kMiB);  // 120 MiB short: 100 + 50
  EXPECT_EQ(SitesThatWouldHaveMadeRoom(failure, &enough), 2u);
  EXPECT_TRUE(enough);
  failure.request.set_size(200 * kMiB);  // 184 MiB short: more than the 150 MiB live
  EXPECT_EQ(SitesThatWouldHaveMadeRoom(failure, &enough), 0u);
  EXPECT_FALSE(enough);
  failure.request.set_size(16 * kMiB);  // fits the free memory: not a lack of memory
  EXPECT_EQ(SitesThatWouldHaveMadeRoom(failure, &enough), 0u);
  EXPECT_FALSE(enough);
  failure.request.set_size(200 * kMiB);
  failure.request.set_total_bytes(0);  // free/total not recorded
  EXPECT_EQ(SitesThatWouldHaveMadeRoom(failure, &enough), 0u);
  EXPECT_FALSE(enough);
}

TEST(OomTest, RetriesOfOneRequestAreGroupedAsOfTheLastAttempt) {
  Events events;
  events.Malloc(0, 40 * kMiB, 0xA000'0000, 1);            // 1
  events.Malloc(0, 30 * kMiB, 0xB000'0000, 2);            // 2 (the cache)
  events.Failed(0, 64 * kMiB, 7, 10 * kMiB, 100 * kMiB);  // 3: first attempt
  events.Failed(1, 64 * kMiB, 7, 0, 100 * kMiB);          // 4: another device: its own failure
  events.Free(0xB000'0000);                               // 5: the cache emptied
  events.Failed(0, 64 * kMiB, 8, 40 * kMiB, 100 * kMiB);  // 6: the retry, from another line
  events.Failed(0, 32 * kMiB, 8, 40 * kMiB, 100 * kMiB);  // 7: a different size: a new request
  events.Malloc(0, 1 * kMiB, 0xC000'0000, 1);             // 8: success on device 0
  events.Failed(0, 32 * kMiB, 8, 39 * kMiB, 100 * kMiB);  // 9: so this is a new request too
  const OomReport report = AnalyzeOoms(events.events());
  ASSERT_EQ(report.failures.size(), 4u);

  const OomFailure& grouped = report.failures[0];
  EXPECT_EQ(grouped.place, 0);
  ASSERT_EQ(grouped.attempts.size(), 2u);
  EXPECT_EQ(grouped.attempts[0].seq, 3u);
  EXPECT_EQ(grouped.attempts[0].free_bytes, 10 * kMiB);
  EXPECT_EQ(grouped.attempts[1].seq, 6u);
  EXPECT_EQ(grouped.attempts[1].free_bytes, 40 * kMiB);
  EXPECT_EQ(grouped.request.seq(), 6u);  // as of the last attempt
  EXPECT_EQ(grouped.request.stack_id(), 8u);
  EXPECT_EQ(grouped.live.bytes, 40 * kMiB);  // the cache's 30 MiB was freed in between
  ASSERT_EQ(grouped.sites.size(), 1u);
  EXPECT_EQ(grouped.sites[0].stack_id, 1u);

  EXPECT_EQ(report.failures[1].place, 1);
  EXPECT_EQ(report.failures[1].request.seq(), 4u);
  EXPECT_EQ(report.failures[1].live.bytes, 0u);
  EXPECT_TRUE(report.failures[1].sites.empty());

  EXPECT_EQ(report.failures[2].request.seq(), 7u);
  EXPECT_EQ(report.failures[2].attempts.size(), 1u);
  EXPECT_EQ(report.failures[3].request.seq(), 9u);
  EXPECT_EQ(report.failures[3].attempts.size(), 1u);
  EXPECT_EQ(report.failures[3].live.bytes, 41 * kMiB);
  EXPECT_EQ(report.failures[3].live.count, 2u);
}

TEST(OomTest, PinnedHostFailureSeesPinnedHostMemoryOnly) {
  Events events;
  events.Malloc(0, 8 * kMiB, 0xA000'0000, 1);
  events.Add(CUDA_MALLOC_HOST, PINNED_HOST, ALLOC, -1, 2 * kMiB, 0x7000'0000, 2);
  events.Add(CUDA_MALLOC_HOST, PINNED_HOST, ALLOC_FAILED, -1, 4 * kMiB, 0, 3).set_result(2);
  const OomReport report = AnalyzeOoms(events.events());
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_EQ(report.failures[0].place, kPinnedHost);
  EXPECT_EQ(report.failures[0].live.bytes, 2 * kMiB);
  ASSERT_EQ(report.failures[0].sites.size(), 1u);
  EXPECT_EQ(report.failures[0].sites[0].stack_id, 2u);
}

TEST(OomTest, NoFailures) {
  Events events;
  events.Malloc(0, kMiB, 0xA000'0000, 1);
  events.Free(0xA000'0000);
  EXPECT_TRUE(AnalyzeOoms(events.events()).failures.empty());
  EXPECT_TRUE(AnalyzeOoms({}).failures.empty());
}

TEST(OomTest, OnlyTheFirstRequestsAreKeptInFull) {
  // 100 requests of different sizes, each after an allocation of its own (all kept live), then
  // one request retried 100 times. Early is decided over the whole trace: seq 1..301, early
  // before seq 32.
  Events events;
  for (uint64_t i = 0; i < 100; ++i) {
    events.Malloc(0, kMiB, 0x1000'0000 + i * 0x10'0000, 1);
    events.Failed(0, (100 + i) * kMiB, 2, 0, 4096 * kMiB);
  }
  for (int i = 0; i < 100; ++i) events.Failed(0, 7 * kMiB, 3, 0, 4096 * kMiB);
  events.Free(0x1000'0000);
  const OomReport report = AnalyzeOoms(events.events());
  EXPECT_EQ(report.last_seq, 301u);
  EXPECT_EQ(report.early_before_seq, 32u);
  ASSERT_EQ(report.failures.size(), kMaxOomFailures);
  EXPECT_EQ(report.failures_not_analysed, 37u);  // 36 more sizes and the retried request
  const OomFailure& last_kept = report.failures.back();
  EXPECT_EQ(last_kept.request.size(), 163 * kMiB);
  EXPECT_EQ(last_kept.live.count, 64u);
  EXPECT_EQ(last_kept.early.count, 16u);  // the allocations at seq 1, 3, ..., 31
  EXPECT_EQ(last_kept.attempt_count, 1u);
}

TEST(OomTest, ManyAttemptsOfOneRequestAreCountedNotAllListed) {
  Events events;
  events.Malloc(0, kMiB, 0x1000'0000, 1);
  for (int i = 0; i < 100; ++i) events.Failed(0, 7 * kMiB, 3, 0, 64 * kMiB);
  const OomReport report = AnalyzeOoms(events.events());
  ASSERT_EQ(report.failures.size(), 1u);
  const OomFailure& failure = report.failures[0];
  EXPECT_EQ(failure.attempt_count, 100u);
  ASSERT_EQ(failure.attempts.size(), kMaxOomAttempts);
  EXPECT_EQ(failure.attempts.back().seq, 1u + kMaxOomAttempts);
  EXPECT_EQ(failure.request.seq(), 101u);  // as of the last attempt
  EXPECT_EQ(failure.live.bytes, kMiB);
  EXPECT_EQ(report.failures_not_analysed, 0u);
}

// ---- the command, on oom_loop recorded here ----

ProgramRun Gpumem(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem")};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv);
}

// Records oom_loop against the fake's 2 GiB device into `dir`; returns the trace's path.
std::string RecordOomLoop(const TempDir& dir) {
  const std::string trace = dir.File("oom_loop.trace");
  auto environment = RecordingEnvironment(trace);
  environment["GPUMEM_FAKE_DEVICE_MEMORY"] = "2147483648";
  const ProgramRun run = RunProgram({BuildPath("bin/oom_loop")}, environment);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  return trace;
}

TEST(OomCommandTest, OomLoopText) {
  TempDir dir;
  const std::string trace = RecordOomLoop(dir);
  const ProgramRun run = Gpumem({"report", "--oom", trace});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string& out = run.out;
  EXPECT_NE(out.find("\noom, device 0 (gpumem fake device): cudaMalloc of 256.00 MiB (268435456 "
                     "bytes) failed (error 2) at seq 8, "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  call site:\n      oom_loop.cc:21 in allocate_until_oom(…)\n  free then"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  free then: 192.00 MiB (201326592 bytes) of 2.00 GiB (2147483648 bytes)\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  live then: 1.75 GiB (1879048192 bytes) in 7 allocations; in use but not in "
                     "the trace (context, other processes): 64.00 MiB\n"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find(
          "  1.75 GiB  100.0%  7 allocations\n      oom_loop.cc:21 in allocate_until_oom(…)\n"),
      std::string::npos)
      << out;
  // Seq 1..15: the first 10% is seq 1 and 2, two chunks still held at the failure.
  EXPECT_NE(out.find("  what would have helped: this call site held 512.00 MiB (2 allocations) "
                     "made before seq 3 (the first 10% of the trace) and still held it then: "
                     "oom_loop.cc:21 in allocate_until_oom(…) 512.00 MiB\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  what would have helped: the request was 64.00 MiB more than was free: "
                     "freeing what the largest call site held (1.75 GiB) would have made room\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("peak,"), std::string::npos) << out;  // --oom alone: no peak, no leaks
  EXPECT_EQ(out.find("leaks"), std::string::npos) << out;
}

// PyTorch's error takes its place among the memory events by seq: what was live then is what
// the events before it left, not the free right after it (the report's replay adds each event
// only after the analyses saw it).
TEST(OomCommandTest, WhatWasLiveAtPyTorchsErrorLeavesOutTheFreeAfterIt) {
  TempDir dir;
  std::vector<TracePacket> packets = {::gpumem::testing::HeaderPacket()};
  auto memory = [&](uint64_t seq, Action action, uint64_t size, uint64_t address, uint64_t stack) {
    MemoryEvent& event = *packets.emplace_back().mutable_memory();
    event.set_seq(seq);
    event.set_timestamp_ns(seq * 1000);
    event.set_api(action == ALLOC ? CUDA_MALLOC : CUDA_FREE);
    event.set_kind(DEVICE);
    event.set_action(action);
    event.set_device(0);
    event.set_size(size);
    event.set_address(address);
    event.set_stack_id(stack);
  };
  memory(1, ALLOC, 64 * kMiB, 0x1000'0000, 0);
  memory(2, ALLOC, 32 * kMiB, 0x2000'0000, 0);
  FrameworkOom& oom = *packets.emplace_back().mutable_framework_oom();
  oom.set_seq(3);
  oom.set_timestamp_ns(3000);
  oom.set_device(0);
  oom.set_source(OOM_EXCEPTION);
  oom.set_requested(512 * kMiB);
  memory(4, FREE, 0, 0x1000'0000, 0);
  packets.push_back(::gpumem::testing::FooterPacket(3));
  const std::string trace = dir.File("oom_then_free.trace");
  std::ofstream(trace, std::ios::binary) << ::gpumem::testing::FramedAll(packets);
  const ProgramRun run = Gpumem({"report", "--oom", trace});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find(": PyTorch ran out of memory at seq 3"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("  live then: 96.00 MiB (100663296 bytes) in 2 allocations\n"),
            std::string::npos)
      << run.out;
}

TEST(OomCommandTest, OomLoopJson) {
  TempDir dir;
  const std::string trace = RecordOomLoop(dir);
  const ProgramRun run = Gpumem({"report", "--oom", "--json", trace});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string& out = run.out;
  EXPECT_NE(out.find(",\"oom\":{\"early_before_seq\":3,\"framework_ooms\":[],"
                     "\"failures\":[{\"memory\":\"device\","
                     "\"device\":0,\"name\":\"gpumem fake device\",\"total_memory\":2147483648,"
                     "\"api\":\"cudaMalloc\",\"result\":2,\"size\":268435456,\"seq\":8,"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find("\"free_bytes\":201326592,\"total_bytes\":2147483648,\"attempts\":[{\"seq\":8,"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find(",\"live_bytes\":1879048192,\"live_count\":7,\"early_bytes\":536870912,"
                     "\"early_count\":2,\"untracked_bytes\":67108864,\"call_sites\":1,"
                     "\"sites\":[{\"bytes\":1879048192,\"count\":7,\"share\":1.000000,"
                     "\"early_bytes\":536870912,\"early_count\":2,\"frames\":[{\"text\":"
                     "\"allocate_until_oom(unsigned long) ("),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"room_sites\":1,\"helped\":[\"this call site held 512.00 MiB"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("\"peak\""), std::string::npos) << out;
}

TEST(OomCommandTest, SaysSoWhenNothingFailed) {
  const std::string leak_loop =
      std::string(GPUMEM_SOURCE_DIR) + "/samples/traces/leak_loop-h200.trace";
  ProgramRun run = Gpumem({"report", "--oom", leak_loop});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\noom: no failed allocations\n"), std::string::npos) << run.out;
  run = Gpumem({"report", "--oom", "--json", leak_loop});
  EXPECT_NE(run.out.find(",\"oom\":{\"early_before_seq\":4,\"framework_ooms\":[],\"failures\":[],"
                         "\"failed_calls\":[]}"),
            std::string::npos)
      << run.out;
}

TEST(OomCommandTest, PlainReportIsPeakAndLeaksOnly) {
  TempDir dir;
  const std::string trace = RecordOomLoop(dir);
  ProgramRun run = Gpumem({"report", trace});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\npeak, device 0"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\nleaks: none"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("oom"), run.out.find("oom_loop")) << run.out;  // only the program's name
  EXPECT_EQ(run.out.find("\noom"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("growth"), std::string::npos) << run.out;
  run = Gpumem({"report", "--json", trace});
  EXPECT_EQ(run.out.find("\"oom\""), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("\"growth\""), std::string::npos) << run.out;
}

// PyTorch's records: an exception after an observer record (no other exception between) is one
// error; either alone is one too.
TEST(OomTest, ObserverAndExceptionRecordsPairIntoErrors) {
  std::vector<FrameworkOom> records(6);
  const OomSource sources[] = {OOM_OBSERVER,  OOM_EXCEPTION,  // one error
                               OOM_EXCEPTION,                 // an exception alone
                               OOM_OBSERVER,  OOM_OBSERVER,   // an observer alone, then...
                               OOM_EXCEPTION};                // ...the next one's exception
  std::vector<const FrameworkOom*> pointers;
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].set_seq(i + 1);
    records[i].set_source(sources[i]);
    pointers.push_back(&records[i]);
  }
  EXPECT_EQ(PairOomRecords(pointers),
            (std::vector<std::pair<int, int>>{{0, 1}, {-1, 2}, {3, -1}, {4, 5}}));
  EXPECT_EQ(PairOomRecords({pointers[0]}), (std::vector<std::pair<int, int>>{{0, -1}}));
  EXPECT_TRUE(PairOomRecords({}).empty());
}

// A failure that is not out of memory (error 800: a fabric handle refused) is a failed call: no
// OOM, no retry group, no "what would have helped".
TEST(OomTest, AFailureThatIsNotOutOfMemoryIsAFailedCall) {
  Events events;
  events.Malloc(0, 100 * kMiB, 0x1000'0000, 1);
  MemoryEvent& probe = events.Failed(0, 20 * kMiB, 2, 1024 * kMiB, 2048 * kMiB);
  probe.set_api(CU_MEM_CREATE);
  probe.set_kind(VMM_PHYSICAL);
  probe.set_result(800);
  events.Failed(0, 4096 * kMiB, 3, 1024 * kMiB, 2048 * kMiB);  // out of memory
  const OomReport report = AnalyzeOoms(events.events());
  ASSERT_EQ(report.failed_calls.size(), 1u);
  EXPECT_EQ(report.failed_calls[0].call.result(), 800);
  EXPECT_EQ(report.failed_calls[0].place, 0);
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_EQ(report.failures[0].request.result(), 2);
  EXPECT_EQ(report.failures[0].request.size(), 4096 * kMiB);
  Replay replay;
  for (const MemoryEvent& event : events.events()) replay.Add(event);
  EXPECT_EQ(replay.failed_allocations(), 1u);
  EXPECT_EQ(replay.failed_calls(), 1u);
}

}  // namespace
}  // namespace gpumem::report
