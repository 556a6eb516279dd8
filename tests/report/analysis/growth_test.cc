// Growth: call sites whose live bytes rise from iteration to iteration, with iterations from a
// marker or detected (the most frequent allocation call site); on synthetic events with
// hand-computed answers, and on the bundled leak_loop H100 trace (10 iterations, a 4 MiB
// activation kept each time at leak_loop.cc:26, a 16 MiB buffer freed each time at line 24).
#include "report/analysis/growth.h"

#include <cstdint>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using ::gpumem::testing::BuildPath;
using ::gpumem::testing::ProgramRun;
using ::gpumem::testing::RunProgram;

constexpr uint64_t kMiB = 1 << 20;

class Events {
 public:
  MemoryEvent& Malloc(uint64_t size, uint64_t address, uint64_t stack_id, int32_t device = 0) {
    MemoryEvent& event = Add(ALLOC, device, address, stack_id);
    event.set_api(CUDA_MALLOC);
    event.set_kind(DEVICE);
    event.set_size(size);
    return event;
  }
  MemoryEvent& Free(uint64_t address) {
    MemoryEvent& event = Add(FREE, -1, address, 0);
    event.set_api(CUDA_FREE);
    return event;
  }
  const std::vector<MemoryEvent>& events() const { return events_; }

 private:
  MemoryEvent& Add(Action action, int32_t device, uint64_t address, uint64_t stack_id) {
    MemoryEvent& event = events_.emplace_back();
    event.set_seq(events_.size());
    event.set_timestamp_ns(events_.size() * 1000);
    event.set_action(action);
    event.set_device(device);
    event.set_address(address);
    event.set_stack_id(stack_id);
    return event;
  }
  std::vector<MemoryEvent> events_;
};

uint64_t Address(uint64_t stack_id, uint64_t i) { return (stack_id << 32) + (i << 24); }

// A preamble (stack 9: 100 MiB, kept), then 6 iterations, each starting with stack 1 (16 MiB,
// freed in the iteration). Live bytes at the end of iterations 1..6:
//   stack 2: 4 MiB kept each time           4  8 12 16 20 24   rises 5/5, +4 MiB/iteration
//   stack 6: 8 MiB kept in iterations 1..5  8 16 24 32 40 40   rises 4/5, +6.4 MiB/iteration
//   stack 5: 2 MiB, alternately kept/freed  2  4  2  4  2  4   rises 3/5: not growing
//   stack 7: 1 MiB kept, all freed in 6     1  2  3  4  5  0   fell in the last iteration (as a
//            list freed at teardown): judged on iterations 1..5, rises 4/4, +1 MiB/iteration
//   stack 1, stack 9: constant
// `activation(i)`: the stack of iteration i's 4 MiB activation (null: stack 2).
Events Training(
    uint64_t (*activation)(int) = [](int) -> uint64_t { return 2; },
    std::vector<uint64_t>* marker_seqs = nullptr,
    std::vector<uint64_t>* activation_seqs = nullptr) {
  Events events;
  events.Malloc(100 * kMiB, Address(9, 0), 9);
  for (int i = 0; i < 6; ++i) {
    const uint64_t seq = events.Malloc(16 * kMiB, Address(1, i), 1).seq();
    if (marker_seqs != nullptr) marker_seqs->push_back(seq);
    const uint64_t act =
        events.Malloc(4 * kMiB, Address(2, i), activation != nullptr ? activation(i) : 2).seq();
    if (activation_seqs != nullptr) activation_seqs->push_back(act);
    if (i < 5) events.Malloc(8 * kMiB, Address(6, i), 6);
    if (i % 2 == 0) {
      if (i == 0) {
        events.Malloc(2 * kMiB, Address(5, 0), 5);
      } else {
        events.Free(Address(5, 1));
      }
    } else {
      events.Malloc(2 * kMiB, Address(5, 1), 5);
    }
    if (i < 5) {
      events.Malloc(1 * kMiB, Address(7, i), 7);
    } else {
      for (int j = 0; j < 5; ++j) events.Free(Address(7, j));
    }
    events.Free(Address(1, i));
  }
  return events;
}

TEST(GrowthTest, DetectsIterationsAndGrowingSites) {
  std::vector<uint64_t> marker_seqs;
  const Events events = Training(nullptr, &marker_seqs);
  const GrowthReport report = AnalyzeGrowth(events.events(), {});
  EXPECT_EQ(report.rule, GrowthReport::Rule::kMostFrequent);
  ASSERT_TRUE(report.found);
  // Stacks 1 and 2 allocate 6 times each; stack 1 allocated first.
  EXPECT_EQ(report.marker_stack_id, 1u);
  EXPECT_EQ(report.iteration_seqs, marker_seqs);
  ASSERT_EQ(report.iterations(), 6u);
  ASSERT_EQ(report.sites.size(), 3u);

  const GrowingSite& fastest = report.sites[0];
  EXPECT_EQ(fastest.place, 0);
  EXPECT_EQ(fastest.stack_id, 6u);
  EXPECT_EQ(fastest.live_bytes, (std::vector<uint64_t>{8 * kMiB, 16 * kMiB, 24 * kMiB, 32 * kMiB,
                                                       40 * kMiB, 40 * kMiB}));
  EXPECT_EQ(fastest.live_count, (std::vector<uint64_t>{1, 2, 3, 4, 5, 5}));
  EXPECT_EQ(fastest.rises, 4u);
  EXPECT_DOUBLE_EQ(fastest.bytes_per_iteration, 32.0 * kMiB / 5);

  const GrowingSite& activation = report.sites[1];
  EXPECT_EQ(activation.stack_id, 2u);
  EXPECT_EQ(activation.live_bytes, (std::vector<uint64_t>{4 * kMiB, 8 * kMiB, 12 * kMiB, 16 * kMiB,
                                                          20 * kMiB, 24 * kMiB}));
  EXPECT_EQ(activation.rises, 5u);
  EXPECT_EQ(activation.judged_iterations, 6u);
  EXPECT_DOUBLE_EQ(activation.bytes_per_iteration, 4.0 * kMiB);

  // Freed in the last iteration, which runs into teardown: judged on the five complete ones.
  const GrowingSite& freed_at_end = report.sites[2];
  EXPECT_EQ(freed_at_end.stack_id, 7u);
  EXPECT_EQ(freed_at_end.judged_iterations, 5u);
  EXPECT_EQ(freed_at_end.rises, 4u);
  EXPECT_DOUBLE_EQ(freed_at_end.bytes_per_iteration, 1.0 * kMiB);
  EXPECT_EQ(freed_at_end.live_bytes,
            (std::vector<uint64_t>{1 * kMiB, 2 * kMiB, 3 * kMiB, 4 * kMiB, 5 * kMiB, 0}));
}

TEST(GrowthTest, MarkerStartsIterations) {
  std::vector<uint64_t> activation_seqs;
  const Events events = Training(nullptr, nullptr, &activation_seqs);
  GrowthOptions options;
  options.is_marker = [](uint64_t stack_id) { return stack_id == 2; };
  const GrowthReport report = AnalyzeGrowth(events.events(), options);
  EXPECT_EQ(report.rule, GrowthReport::Rule::kMarker);
  ASSERT_TRUE(report.found);
  EXPECT_EQ(report.marker_stack_id, 2u);
  EXPECT_EQ(report.iteration_seqs, activation_seqs);
  // Iterations now end just before the next activation: the same sites grow at the same rates.
  ASSERT_EQ(report.sites.size(), 3u);
  EXPECT_EQ(report.sites[0].stack_id, 6u);
  EXPECT_EQ(report.sites[1].stack_id, 2u);
  EXPECT_DOUBLE_EQ(report.sites[1].bytes_per_iteration, 4.0 * kMiB);
}

TEST(GrowthTest, SeveralMatchingSitesTheFirstToAllocateMarks) {
  std::vector<uint64_t> marker_seqs;
  const Events events = Training(nullptr, &marker_seqs);
  GrowthOptions options;
  options.is_marker = [](uint64_t stack_id) { return stack_id == 1 || stack_id == 2; };
  const GrowthReport report = AnalyzeGrowth(events.events(), options);
  ASSERT_TRUE(report.found);
  EXPECT_EQ(report.marker_stack_id, 1u);
  EXPECT_EQ(report.iteration_seqs, marker_seqs);
  EXPECT_EQ(report.sites.size(), 3u);
}

TEST(GrowthTest, StacksOfOneCallSiteMerge) {
  // The activation comes from stack 2 in even iterations, stack 12 in odd ones: each alone grows
  // at half the boundaries, merged they are the one growing site. (Iterations start at stack 1:
  // detected, stacks 2 and 12, three allocations each, would suggest 3 iterations of two steps.)
  const Events events = Training([](int i) -> uint64_t { return i % 2 == 0 ? 2 : 12; });
  GrowthOptions at_stack_1;
  at_stack_1.is_marker = [](uint64_t stack_id) { return stack_id == 1; };
  const GrowthReport separate = AnalyzeGrowth(events.events(), at_stack_1);
  ASSERT_EQ(separate.sites.size(), 2u);  // 6, and 7 (judged on the complete iterations)
  EXPECT_EQ(separate.sites[0].stack_id, 6u);
  EXPECT_EQ(separate.sites[1].stack_id, 7u);

  GrowthOptions options = at_stack_1;
  options.call_site_of = [](uint64_t stack_id) { return stack_id == 12 ? uint64_t{2} : stack_id; };
  const GrowthReport merged = AnalyzeGrowth(events.events(), options);
  ASSERT_EQ(merged.sites.size(), 3u);
  EXPECT_EQ(merged.sites[1].stack_id, 2u);
  EXPECT_EQ(merged.sites[1].rises, 5u);
  EXPECT_DOUBLE_EQ(merged.sites[1].bytes_per_iteration, 4.0 * kMiB);
}

TEST(GrowthTest, GrowthOnEachDeviceApart) {
  // Stack 3 keeps 1 MiB per iteration on device 1 and frees what it has on device 0.
  Events events;
  for (int i = 0; i < 4; ++i) {
    events.Malloc(kMiB, Address(1, i), 1, 0);
    events.Malloc(kMiB, Address(3, i), 3, 1);
    if (i > 0) events.Free(Address(4, i - 1));
    events.Malloc(kMiB, Address(4, i), 3, 0);
    events.Free(Address(1, i));
  }
  // Detected, stack 3 would mark the iterations (8 allocations, over both devices): say stack 1.
  EXPECT_EQ(AnalyzeGrowth(events.events(), {}).marker_stack_id, 3u);
  GrowthOptions options;
  options.is_marker = [](uint64_t stack_id) { return stack_id == 1; };
  const GrowthReport report = AnalyzeGrowth(events.events(), options);
  ASSERT_TRUE(report.found);
  EXPECT_EQ(report.iterations(), 4u);
  ASSERT_EQ(report.sites.size(), 1u);
  EXPECT_EQ(report.sites[0].place, 1);
  EXPECT_EQ(report.sites[0].stack_id, 3u);
  EXPECT_DOUBLE_EQ(report.sites[0].bytes_per_iteration, 1.0 * kMiB);
}

TEST(GrowthTest, NoIterations) {
  Events events;
  events.Malloc(kMiB, Address(1, 0), 1);
  events.Malloc(kMiB, Address(1, 1), 1);  // twice: fewer than kMinMarkerOccurrences
  events.Malloc(kMiB, Address(2, 0), 2);
  GrowthReport report = AnalyzeGrowth(events.events(), {});
  EXPECT_FALSE(report.found);
  EXPECT_TRUE(report.sites.empty());

  GrowthOptions options;
  options.is_marker = [](uint64_t) { return false; };
  report = AnalyzeGrowth(Training().events(), options);
  EXPECT_EQ(report.rule, GrowthReport::Rule::kMarker);
  EXPECT_FALSE(report.found);
  EXPECT_TRUE(report.sites.empty());
}

TEST(GrowthTest, OneIterationNothingToCompare) {
  Events events;
  events.Malloc(kMiB, Address(1, 0), 1);
  events.Malloc(kMiB, Address(2, 0), 2);
  GrowthOptions options;
  options.is_marker = [](uint64_t stack_id) { return stack_id == 1; };
  const GrowthReport report = AnalyzeGrowth(events.events(), options);
  EXPECT_TRUE(report.found);
  EXPECT_EQ(report.iterations(), 1u);
  EXPECT_TRUE(report.sites.empty());
}

// ---- many iterations: bounded series, exact rule ----

// Address() with room for 65536 allocations per stack.
uint64_t Far(uint64_t stack_id, uint64_t i) { return (stack_id << 40) + (i << 24); }

// `iterations` iterations, each starting with stack 1 (16 MiB, freed in it); stack 2 keeps 1 MiB
// in every iteration; stack 3 keeps 2 MiB in even iterations and frees one in odd ones, so it
// rises at half the boundaries only.
Events ManyIterations(int iterations, std::vector<uint64_t>* marker_seqs) {
  Events events;
  for (int i = 0; i < iterations; ++i) {
    marker_seqs->push_back(events.Malloc(16 * kMiB, Far(1, i), 1).seq());
    events.Malloc(kMiB, Far(2, i), 2);
    if (i % 2 == 0) {
      events.Malloc(2 * kMiB, Far(3, i), 3);
    } else {
      events.Free(Far(3, i - 1));
    }
    events.Free(Far(1, i));
  }
  return events;
}

TEST(GrowthTest, ManyIterationsKeepABoundedSeriesAndAnExactRate) {
  std::vector<uint64_t> marker_seqs;
  const Events events = ManyIterations(1000, &marker_seqs);
  const GrowthReport report = AnalyzeGrowth(events.events(), {});
  ASSERT_TRUE(report.found);
  EXPECT_EQ(report.marker_stack_id, 1u);
  EXPECT_EQ(report.iterations(), 1000u);
  // 1000 iterations: the stride doubled from 1 to 2 at 256, to 4 at 512.
  EXPECT_EQ(report.sample_stride, 4u);
  // Iterations 1, 5, 9, ..., 997 (250) and the last, 1000.
  ASSERT_EQ(report.iteration_seqs.size(), 251u);
  for (size_t k = 0; k < 250; ++k) EXPECT_EQ(report.iteration_seqs[k], marker_seqs[4 * k]) << k;
  EXPECT_EQ(report.iteration_seqs.back(), marker_seqs.back());

  ASSERT_EQ(report.sites.size(), 1u);  // stack 3 rose at half the boundaries only
  const GrowingSite& site = report.sites[0];
  EXPECT_EQ(site.stack_id, 2u);
  EXPECT_EQ(site.rises, 999u);
  EXPECT_DOUBLE_EQ(site.bytes_per_iteration, 1.0 * kMiB);
  ASSERT_EQ(site.live_bytes.size(), 251u);
  ASSERT_EQ(site.live_count.size(), 251u);
  for (size_t k = 0; k < 250; ++k) {
    EXPECT_EQ(site.live_bytes[k], (4 * k + 1) * kMiB) << k;
    EXPECT_EQ(site.live_count[k], 4 * k + 1) << k;
  }
  EXPECT_EQ(site.live_bytes.back(), 1000 * kMiB);
  EXPECT_EQ(site.live_count.back(), 1000u);
}

TEST(GrowthTest, SeriesUpToTheCapIsWhole) {
  for (const int iterations : {256, 257}) {
    std::vector<uint64_t> marker_seqs;
    const GrowthReport report =
        AnalyzeGrowth(ManyIterations(iterations, &marker_seqs).events(), {});
    ASSERT_EQ(report.sites.size(), 1u) << iterations;
    if (iterations == 256) {
      // Every iteration kept: as before there was a cap.
      EXPECT_EQ(report.sample_stride, 1u);
      EXPECT_EQ(report.iteration_seqs, marker_seqs);
      ASSERT_EQ(report.sites[0].live_bytes.size(), 256u);
      for (size_t i = 0; i < 256; ++i) EXPECT_EQ(report.sites[0].live_bytes[i], (i + 1) * kMiB);
    } else {
      // 1, 3, ..., 257: the last is on the stride.
      EXPECT_EQ(report.sample_stride, 2u);
      ASSERT_EQ(report.iteration_seqs.size(), 129u);
      EXPECT_EQ(report.iteration_seqs.back(), marker_seqs.back());
      EXPECT_EQ(report.sites[0].live_bytes.size(), 129u);
      EXPECT_EQ(report.sites[0].live_bytes.back(), 257 * kMiB);
    }
  }
}

TEST(GrowthTest, SiteAppearingLateIsPaddedWithNothing) {
  // Stack 4 keeps 1 MiB from iteration 61 on: nothing in the samples before, then a rise at each
  // of the last 540 of 599 boundaries (90%): growing, from nothing after iteration 1.
  Events events;
  for (int i = 0; i < 600; ++i) {
    events.Malloc(16 * kMiB, Far(1, i), 1);
    events.Malloc(kMiB, Far(2, i), 2);
    if (i >= 60) events.Malloc(kMiB, Far(4, i), 4);
    events.Free(Far(1, i));
  }
  GrowthOptions options;
  options.is_marker = [](uint64_t stack_id) { return stack_id == 1; };
  const GrowthReport report = AnalyzeGrowth(events.events(), options);
  EXPECT_EQ(report.sample_stride, 4u);
  ASSERT_EQ(report.iteration_seqs.size(), 151u);  // 1, 5, ..., 597 and 600
  ASSERT_EQ(report.sites.size(), 2u);
  const GrowingSite& late = report.sites[1];
  EXPECT_EQ(late.stack_id, 4u);
  EXPECT_EQ(late.rises, 540u);
  EXPECT_DOUBLE_EQ(late.bytes_per_iteration, 540.0 * kMiB / 599);
  ASSERT_EQ(late.live_bytes.size(), 151u);
  for (uint64_t k = 0; k < 150; ++k) {
    EXPECT_EQ(late.live_bytes[k], 4 * k >= 60 ? (4 * k - 59) * kMiB : 0) << k;
  }
  EXPECT_EQ(late.live_bytes.back(), 540 * kMiB);
}

// What counts as live at an iteration's end is the replay's live set: an allocation made over a
// live one (its free was missed) ends it. Stack 3 allocates 2 MiB at one address in every
// iteration and never frees it: 2 MiB live throughout, not growing. Stack 5's allocation is
// dropped under stack 6's at the same address, which is then freed: nothing of either stays.
// Stack 4 keeps one more 1 MiB each time: growing.
TEST(GrowthTest, AllocationsDroppedUnderNewerOnesAreNotLive) {
  Events events;
  for (uint64_t i = 0; i < 10; ++i) {
    events.Malloc(16 * kMiB, Far(1, i), 1);
    events.Malloc(2 * kMiB, Far(3, 0), 3);
    events.Malloc(kMiB, Far(4, i), 4);
    events.Malloc(kMiB, Far(5, i), 5);
    events.Malloc(kMiB, Far(5, i), 6);
    events.Free(Far(5, i));
    events.Free(Far(1, i));
  }
  GrowthOptions options;
  options.is_marker = [](uint64_t stack_id) { return stack_id == 1; };
  const GrowthReport report = AnalyzeGrowth(events.events(), options);
  ASSERT_EQ(report.iteration_seqs.size(), 10u);
  ASSERT_EQ(report.sites.size(), 1u);
  EXPECT_EQ(report.sites[0].stack_id, 4u);
  EXPECT_EQ(report.sites[0].rises, 9u);
  EXPECT_DOUBLE_EQ(report.sites[0].bytes_per_iteration, 1.0 * kMiB);
}

// ---- the command, on the bundled leak_loop trace ----

ProgramRun Gpumem(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem")};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv);
}

const std::string kLeakLoop =
    std::string(GPUMEM_SOURCE_DIR) + "/samples/traces/leak_loop-h200.trace";

// The part of `out` from its first growing-site section on.
std::string GrowingPart(const std::string& out) {
  const size_t at = out.find("\ngrowth, device 0");
  return at == std::string::npos ? "" : out.substr(at);
}

TEST(GrowthCommandTest, LeakLoopDetected) {
  const ProgramRun run = Gpumem({"report", "--growth", kLeakLoop});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\ngrowth: 10 iterations, each starting at an allocation of the "
                         "allocation call site seen once per iteration (the number of "
                         "allocations most call sites share; else the most frequent, at least "
                         "3):\n      leak_loop.cc:24 in leak_iteration()\n"),
            std::string::npos)
      << run.out;
  const std::string growing = GrowingPart(run.out);
  EXPECT_NE(growing.find("\ngrowth, device 0 (NVIDIA H200): 1 call site grows\n"
                         "  +4.00 MiB/iteration  rose at 9 of 9 iteration boundaries; live 4.00 "
                         "MiB after iteration 1, 40.00 MiB (10 allocations) after iteration 10\n"
                         "      leak_loop.cc:26 in leak_iteration()\n"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(growing.find("leak_loop.cc:24"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("peak,"), std::string::npos) << run.out;
}

TEST(GrowthCommandTest, LeakLoopWithMarker) {
  const ProgramRun run = Gpumem({"report", "--iteration-marker", "leak_iteration", kLeakLoop});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\ngrowth: 10 iterations, each starting at an allocation of "
                         "--iteration-marker leak_iteration: the first call site with a frame "
                         "whose function contains it:\n"),
            std::string::npos)
      << run.out;
  const std::string growing = GrowingPart(run.out);
  EXPECT_NE(growing.find("+4.00 MiB/iteration"), std::string::npos) << run.out;
  EXPECT_NE(growing.find("leak_loop.cc:26"), std::string::npos) << run.out;
  EXPECT_EQ(growing.find("leak_loop.cc:24"), std::string::npos) << run.out;
}

TEST(GrowthCommandTest, LeakLoopJson) {
  const ProgramRun run = Gpumem({"report", "--growth", "--json", kLeakLoop});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find(",\"growth\":{\"rule\":\"most_frequent_call_site\",\"found\":true,"
                         "\"iterations\":10,\"iteration_seqs\":[1,4,7,10,13,16,19,22,25,28],"
                         "\"marker_frames\":[{\"text\":\"leak_iteration() "
                         "(samples/leak_loop/leak_loop.cc:24)\""),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find(",\"growing_sites\":1,\"sites\":[{\"memory\":\"device\",\"device\":0,"
                         "\"name\":\"NVIDIA H200\",\"total_memory\":"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find(",\"bytes_per_iteration\":4194304.0,\"rises\":9,\"boundaries\":9,\"judged_"
                         "iterations\":10,"
                         "\"live_bytes\":[4194304,8388608,12582912,16777216,20971520,25165824,"
                         "29360128,33554432,37748736,41943040],\"live_count\":[1,2,3,4,5,6,7,8,9,"
                         "10],\"frames\":[{\"text\":\"leak_iteration() "
                         "(samples/leak_loop/leak_loop.cc:26)\""),
            std::string::npos)
      << run.out;
  EXPECT_EQ(run.out.find("sample_stride"), std::string::npos) << run.out;  // every iteration
  EXPECT_EQ(run.out.find("\"peak\""), std::string::npos) << run.out;
}

TEST(GrowthCommandTest, MarkerNotFoundAndBadUsage) {
  ProgramRun run = Gpumem({"report", "--iteration-marker=no_such_function", kLeakLoop});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\ngrowth: no iterations found: no allocation call site is in a function "
                         "containing 'no_such_function'\n"),
            std::string::npos)
      << run.out;
  run = Gpumem({"report", kLeakLoop, "--iteration-marker"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--iteration-marker needs a function name"), std::string::npos) << run.err;
}

TEST(GrowthCommandTest, PlainReportHasNoGrowth) {
  const ProgramRun run = Gpumem({"report", kLeakLoop});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\npeak, device 0"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\nleaks, device 0"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("growth"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("\noom"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace gpumem::report

namespace gpumem::report {
namespace {

LaunchEvent LaunchAt(uint64_t seq, uint64_t kernel_id, uint64_t stack_id) {
  LaunchEvent launch;
  launch.set_seq(seq);
  launch.set_api(CU_LAUNCH_KERNEL);
  launch.set_kernel_id(kernel_id);
  launch.set_stack_id(stack_id);
  return launch;
}

// PyTorch's caching allocator: a few segments, never an allocation that repeats, so iterations
// come from the launches. Each of 6 steps launches kernel 1 once, kernel 2 three times and kernel
// 3 once (from stack 30), and the cache grows by one 2 MiB segment (stack 7) in every step: the
// launch count most launch sites share is 6, kernel 1 launches first, and each of its launches
// starts an iteration.
TEST(GrowthLaunchesTest, IterationsFromLaunchesWhenNoAllocationRepeats) {
  MarkerCounter counter;
  std::vector<std::pair<bool, size_t>> order;  // (is launch, index)
  std::vector<MemoryEvent> events;
  std::vector<LaunchEvent> launches;
  uint64_t seq = 0;
  auto malloc_at = [&](uint64_t size, uint64_t address, uint64_t stack) {
    MemoryEvent& event = events.emplace_back();
    event.set_seq(++seq);
    event.set_action(ALLOC);
    event.set_api(CUDA_MALLOC);
    event.set_kind(DEVICE);
    event.set_size(size);
    event.set_address(address);
    event.set_stack_id(stack);  // each segment from another stack: no allocation site repeats
    order.push_back({false, events.size() - 1});
  };
  auto launch_at = [&](uint64_t kernel, uint64_t stack) {
    launches.push_back(LaunchAt(++seq, kernel, stack));
    order.push_back({true, launches.size() - 1});
  };
  malloc_at(20 * kMiB, 0x1000000000, 100);  // the first large segment
  for (uint64_t step = 0; step < 6; ++step) {
    launch_at(1, 10);
    for (int i = 0; i < 3; ++i) launch_at(2, 20);
    malloc_at(2 * kMiB, 0x2000000000 + step * 0x1000000, 200 + step);
    launch_at(3, 30);
  }
  for (const auto& [is_launch, index] : order) {
    if (is_launch) {
      counter.AddLaunch(launches[index]);
    } else {
      counter.Add(events[index]);
    }
  }
  EXPECT_FALSE(counter.MostFrequent(nullptr).has_value());
  const std::optional<LaunchSite> marker = counter.LaunchMarker();
  ASSERT_TRUE(marker.has_value());
  EXPECT_EQ(*marker, (LaunchSite{1, 10}));

  // One call site for every segment: their live bytes grow by 2 MiB an iteration.
  GrowthOptions options;
  options.call_site_of = [](uint64_t stack_id) { return stack_id >= 200 ? 200 : stack_id; };
  GrowthAnalysis analysis(options, *marker);
  for (const auto& [is_launch, index] : order) {
    if (is_launch) {
      analysis.AddLaunch(launches[index]);
    } else {
      analysis.Add(events[index]);
    }
  }
  const GrowthReport report = analysis.Finish();
  EXPECT_EQ(report.rule, GrowthReport::Rule::kLaunches);
  EXPECT_EQ(report.iterations(), 6u);
  EXPECT_EQ(report.marker_kernel_id, 1u);
  ASSERT_EQ(report.sites.size(), 1u);
  EXPECT_EQ(report.sites[0].stack_id, 200u);
  EXPECT_DOUBLE_EQ(report.sites[0].bytes_per_iteration, 2.0 * kMiB);
}

TEST(GrowthLaunchesTest, NoMarkerWhenEveryLaunchSiteHasItsOwnCount) {
  MarkerCounter counter;
  uint64_t seq = 0;
  for (int i = 0; i < 5; ++i) counter.AddLaunch(LaunchAt(++seq, 1, 1));
  for (int i = 0; i < 7; ++i) counter.AddLaunch(LaunchAt(++seq, 2, 2));
  EXPECT_FALSE(counter.LaunchMarker().has_value());
}

}  // namespace
}  // namespace gpumem::report
