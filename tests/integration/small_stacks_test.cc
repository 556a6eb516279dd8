// Hooks on small stacks and in signal handlers: tests/programs/small_stacks under the real preload
// library against the fake CUDA. The program checks its own results (return codes, memory
// contents) and exits 0; here the trace must read, hold every operation or count it as not
// recorded, and the hooks must leave the caller's stack alone below 4 KiB.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem::testing {
namespace {

constexpr uint64_t kMaxHookStackBytes = 4096;
constexpr char kUnrecordedNote[] = "events could not be recorded (made inside a signal handler";

std::string Program() { return BuildPath("tests/programs/small_stacks"); }

// What a trace holds: its memory events by action, its launches, its last footer.
struct TraceCounts {
  std::map<int, uint64_t> actions;
  uint64_t launches = 0;
  Footer footer;
};

TraceCounts ReadCounts(const std::string& path) {
  TraceCounts counts;
  auto file =
      report::TraceFile::Read(path, [&](const report::PacketPosition&, const TracePacket& packet) {
        if (packet.has_memory()) ++counts.actions[packet.memory().action()];
        counts.launches += packet.has_launch();
      });
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return counts;
  EXPECT_FALSE((*file)->end().damaged()) << (*file)->end().Describe();
  EXPECT_TRUE((*file)->footer().has_value());
  if ((*file)->footer()) counts.footer = *(*file)->footer();
  EXPECT_TRUE(counts.footer.clean_exit());
  return counts;
}

ProgramRun Record(const std::vector<std::string>& args, const std::string& trace,
                  std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> environment = RecordingEnvironment(trace);
  environment.merge(extra);
  std::vector<std::string> argv = {Program()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, environment);
}

// `threads` runs of the program's CudaWork: per run 2 allocations, 1 failed, 2 frees, 1 launch.
void ExpectWorkRecorded(const TraceCounts& counts, uint64_t threads) {
  EXPECT_EQ(counts.actions.at(ALLOC), 2 * threads);
  EXPECT_EQ(counts.actions.at(ALLOC_FAILED), threads);
  EXPECT_EQ(counts.actions.at(FREE), 2 * threads);
  EXPECT_EQ(counts.launches, threads);
  EXPECT_EQ(counts.footer.events_reentrant(), 0u);
  EXPECT_EQ(counts.footer.events_dropped(), 0u);
}

struct SmallStackCase {
  const char* mode;
  bool deep;
  const char* python_frames;
  uint64_t threads;  // runs of CudaWork
};

class SmallStackTest : public ::testing::TestWithParam<SmallStackCase> {};

// The process's first CUDA call (the recorder opens the trace, maps the thread's state, loads
// CUPTI) or a thread's first, on a thread with a 16 KiB stack, deep in recursion or not.
TEST_P(SmallStackTest, RunsAndRecordsEverything) {
  const SmallStackCase& c = GetParam();
  TempDir dir;
  const std::string trace = dir.File("small.trace");
  std::vector<std::string> args = {c.mode};
  if (c.deep) args.push_back("deep");
  const ProgramRun run = Record(args, trace, {{"GPUMEM_PYTHON_FRAMES", c.python_frames}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("gpumem:"), std::string::npos) << run.err;
  ExpectWorkRecorded(ReadCounts(trace), c.threads);
}

INSTANTIATE_TEST_SUITE_P(SmallStacks, SmallStackTest,
                         ::testing::Values(SmallStackCase{"first-on-small-stack", false, "1", 2},
                                           SmallStackCase{"first-on-small-stack", true, "1", 2},
                                           SmallStackCase{"first-on-small-stack", true, "0", 2},
                                           SmallStackCase{"later-on-small-stack", false, "0", 2},
                                           SmallStackCase{"later-on-small-stack", true, "1", 2}),
                         [](const ::testing::TestParamInfo<SmallStackCase>& info) {
                           return std::string(info.param.mode[0] == 'f' ? "First" : "Later") +
                                  (info.param.deep ? "Deep" : "Shallow") + "Python" +
                                  info.param.python_frames;
                         });

// The program measures how much of its pre-filled stack each call overwrote below the call point:
// the process's first call and warm ones (new stacks, seen stacks, deep ones, launches, frees,
// failures). Bound early (LD_BIND_NOW): the dynamic linker's lazy binding of a first call is not
// the hooks'. What is measured includes the fake CUDA's own frames (a few hundred bytes).
TEST(SmallStacks, HooksUseAtMost4KiBOfTheCallersStack) {
  for (const char* python_frames : {"1", "0"}) {
    TempDir dir;
    const ProgramRun run = Record({"measure"}, dir.File("measure.trace"),
                                  {{"LD_BIND_NOW", "1"}, {"GPUMEM_PYTHON_FRAMES", python_frames}});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const std::regex line(R"(stack (\S+) (\d+))");
    int measured = 0;
    for (std::sregex_iterator it(run.out.begin(), run.out.end(), line), end; it != end; ++it) {
      ++measured;
      EXPECT_LE(std::stoull((*it)[2]), kMaxHookStackBytes) << (*it)[0] << "\n" << run.out;
    }
    EXPECT_EQ(measured, 16) << run.out;
    EXPECT_NE(run.out.find("stack first-call "), std::string::npos) << run.out;
  }
}

// cudaMalloc/cudaFree from a SIGUSR1 handler on an 8 KiB sigaltstack: recorded when the thread
// was idle, forwarded and counted when the handler interrupted gpumem's hook (the fake driver
// raises the signal inside cuMemAlloc). Every operation is recorded or counted.
TEST(SignalHandlers, OperationsAreRecordedOrCounted) {
  TempDir dir;
  const std::string trace = dir.File("signals.trace");
  const ProgramRun run = Record({"signals"}, trace);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::smatch made;
  ASSERT_TRUE(
      std::regex_search(run.out, made, std::regex(R"(made (\d+) allocations, (\d+) frees)")))
      << run.out;
  const uint64_t operations = std::stoull(made[1]) + std::stoull(made[2]);
  const TraceCounts counts = ReadCounts(trace);
  const uint64_t recorded = counts.actions.at(ALLOC) + counts.actions.at(FREE);
  EXPECT_GT(counts.footer.events_reentrant(), 0u);
  EXPECT_EQ(counts.footer.events_dropped(), 0u);
  EXPECT_EQ(recorded + counts.footer.events_reentrant(), operations);
  // The idle rounds' handler calls are recorded: more than the program's own 6 pairs.
  EXPECT_GT(counts.actions.at(ALLOC), 6u);

  const std::string note = std::to_string(counts.footer.events_reentrant()) + " " + kUnrecordedNote;
  const ProgramRun report = RunGpumem({"report", trace});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("\nnote: " + note), std::string::npos) << report.out;
  const ProgramRun dump = RunGpumem({"dump", "--counts", trace});
  EXPECT_NE(dump.out.find(note), std::string::npos) << dump.out;
  const ProgramRun check = RunGpumem({"check", "--no-leaks", trace});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find(note), std::string::npos) << check.out;
}

}  // namespace
}  // namespace gpumem::testing
