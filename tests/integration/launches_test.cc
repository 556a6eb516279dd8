// Kernel launches recorded under the real preload library against the fake CUDA: every launch API
// (the exported cuLaunchKernel, one fetched through cuGetProcAddress, cuLaunchKernelEx,
// cooperative, graph launches, and cudaLaunchKernel reaching the driver through libcudart's chain)
// gives exactly one launch event, with its kernel's name, shape and pointer arguments; the
// GPUMEM_LAUNCHES and GPUMEM_LAUNCH_STACKS switches do what they say.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "report/replay/event_counts.h"
#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::RecordingEnvironment;
using testing::RunProgram;
using testing::TempDir;

struct Recorded {
  std::set<std::string> launch_lines;
  std::vector<LaunchEvent> launches;
  std::map<uint64_t, std::string> names;
  uint64_t memory_events = 0;
};

Recorded Record(const std::string& trace, const std::map<std::string, std::string>& extra = {}) {
  auto environment = RecordingEnvironment(trace);
  for (const auto& [name, value] : extra) environment[name] = value;
  const ProgramRun run = RunProgram({BuildPath("tests/programs/launch_kernels")}, environment);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  Recorded recorded;
  auto counted = report::CountTraceFile(trace);
  EXPECT_TRUE(counted.ok()) << counted.status();
  if (!counted.ok()) return recorded;
  std::istringstream lines(report::FormatEventCounts(counted->counts));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("launch ", 0) == 0) recorded.launch_lines.insert(line);
  }
  auto file =
      report::TraceFile::Read(trace, [&](const report::PacketPosition&, const TracePacket& packet) {
        if (packet.has_launch()) recorded.launches.push_back(packet.launch());
        if (packet.has_kernel_name()) {
          recorded.names[packet.kernel_name().id()] = packet.kernel_name().name();
        }
        if (packet.has_memory()) ++recorded.memory_events;
      });
  EXPECT_TRUE(file.ok());
  return recorded;
}

TEST(Launches, EveryLaunchApiRecordedOnceWithNameShapeAndPointers) {
  TempDir dir;
  const Recorded recorded = Record(dir.File("launches.trace"));
  EXPECT_EQ(recorded.launch_lines,
            (std::set<std::string>{
                "launch cuGraphLaunch count=5",
                "launch cuLaunchCooperativeKernel kernel=fill count=1 grid=256,1,1 block=256,1,1",
                "launch cuLaunchKernel kernel=add count=100 grid=4096,1,1 block=256,1,1",
                "launch cuLaunchKernel kernel=fill count=3 grid=256,1,1 block=256,1,1",
                "launch cuLaunchKernel kernel=scale count=7 grid=1024,1,1 block=256,1,1",
                "launch cuLaunchKernelEx kernel=add count=10 grid=4096,1,1 block=256,1,1",
            }));
  ASSERT_EQ(recorded.launches.size(), 126u);
  // Each kernel is named once; every launch of a kernel with pointer parameters found them among
  // the three 1 MiB buffers (add: a, b and out; one add: a twice, and out), each once, and every
  // one carries a stack and succeeded.
  EXPECT_EQ(recorded.names.size(), 3u);
  std::set<uint64_t> seqs;
  int in_place_adds = 0;
  for (const LaunchEvent& launch : recorded.launches) {
    EXPECT_EQ(launch.result(), 0);
    EXPECT_NE(launch.stack_id(), 0u);
    EXPECT_FALSE(launch.from_cupti());
    EXPECT_TRUE(seqs.insert(launch.seq()).second) << "seq " << launch.seq() << " twice";
    if (launch.api() == CU_GRAPH_LAUNCH) {
      EXPECT_NE(launch.graph(), 0u);
      continue;
    }
    EXPECT_FALSE(launch.params_unknown());
    const std::string& name = recorded.names.at(launch.kernel_id());
    const std::set<uint64_t> distinct(launch.pointer_args().begin(), launch.pointer_args().end());
    EXPECT_EQ(distinct.size(), static_cast<size_t>(launch.pointer_args_size()));
    if (name == "add" && launch.pointer_args_size() == 2) {
      ++in_place_adds;  // add(a, a, out): `a` once
      continue;
    }
    EXPECT_EQ(launch.pointer_args_size(), name == "add" ? 3 : 1) << name;
  }
  EXPECT_EQ(in_place_adds, 1);
}

TEST(Launches, SwitchesTurnLaunchesAndTheirStacksOff) {
  TempDir dir;
  const Recorded off = Record(dir.File("off.trace"), {{"GPUMEM_LAUNCHES", "0"}});
  EXPECT_TRUE(off.launches.empty());
  EXPECT_GT(off.memory_events, 0u);  // memory is still recorded
  const Recorded no_stacks = Record(dir.File("nostacks.trace"), {{"GPUMEM_LAUNCH_STACKS", "0"}});
  ASSERT_EQ(no_stacks.launches.size(), 126u);
  for (const LaunchEvent& launch : no_stacks.launches) EXPECT_EQ(launch.stack_id(), 0u);
}

// GPUMEM_SELF_TIMING=1: at exit, one line per phase on stderr, with the count of what it timed.
uint64_t PhaseCount(const std::string& err, const std::string& phase) {
  const size_t at = err.find("gpumem:   " + phase + " ");
  if (at == std::string::npos) return 0;
  return std::stoull(err.substr(at + 10 + phase.size()));
}

TEST(Launches, SelfTimingCountsWhatTheHooksRecorded) {
  TempDir dir;
  auto environment = RecordingEnvironment(dir.File("timed.trace"));
  environment["GPUMEM_SELF_TIMING"] = "1";
  const ProgramRun run = RunProgram({BuildPath("tests/programs/launch_kernels")}, environment);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("gpumem: self timing (pid "), std::string::npos) << run.err;
  // Every launch went through the launch hook and wrote one launch event with a stack.
  EXPECT_EQ(PhaseCount(run.err, "launch hook"), 126u) << run.err;
  EXPECT_EQ(PhaseCount(run.err, "launch event"), 126u) << run.err;
  EXPECT_GE(PhaseCount(run.err, "native stack"), 126u) << run.err;
  EXPECT_GT(PhaseCount(run.err, "allocation hook"), 0u) << run.err;
  // Each recorded call's start, and each stack as a whole, is timed too: the parts of a hook
  // outside the events.
  const uint64_t stacked_hooks =
      PhaseCount(run.err, "launch hook") + PhaseCount(run.err, "allocation hook");
  EXPECT_GE(PhaseCount(run.err, "hook entry"), stacked_hooks) << run.err;
  EXPECT_GE(PhaseCount(run.err, "stack capture"), stacked_hooks) << run.err;
  // Off (the default), nothing is printed.
  const ProgramRun quiet = RunProgram({BuildPath("tests/programs/launch_kernels")},
                                      RecordingEnvironment(dir.File("quiet.trace")));
  EXPECT_EQ(quiet.err.find("self timing"), std::string::npos) << quiet.err;
}

}  // namespace
}  // namespace gpumem
