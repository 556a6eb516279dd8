// gpumem_bench_set_recording (interpose/exported.cc), which tests/bench/run_step_time_toggle.sh
// uses to pause recording inside one process: a real python3 under the real preload library and
// the fake CUDA, allocating through ctypes between switches. Under the benchmarks' build
// (libgpumem_bench.so), paused, nothing is recorded; the shipped libgpumem.so has no switch at all
// and records every allocation.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::RecordingEnvironment;
using testing::RunProgram;
using testing::TempDir;

// Allocates 1001, 1002 (paused, where the switch exists) and 1003 bytes; prints whether the
// preloaded library has the switch.
constexpr char kScript[] = R"py(
import ctypes
cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
switch = getattr(ctypes.CDLL(None), "gpumem_bench_set_recording", None)
if switch is None:
    switch = lambda on: None
else:
    switch.argtypes = [ctypes.c_int]
    switch.restype = None
def allocate(size):
    pointer = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(pointer), size) == 0
allocate(1001)
switch(0)
allocate(1002)
switch(1)
allocate(1003)
print(hasattr(ctypes.CDLL(None), "gpumem_bench_set_recording"))
)py";

struct ScriptRun {
  std::string printed;
  std::vector<uint64_t> sizes_recorded;
  std::map<std::string, std::string> options;
};

ScriptRun RunScript(const std::string& library) {
  TempDir dir;
  auto environment = RecordingEnvironment(dir.File("run.trace"));
  environment["LD_PRELOAD"] = BuildPath(library);
  const ProgramRun run = RunProgram({"python3", "-c", kScript}, environment);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  ScriptRun result;
  result.printed = run.out;
  auto file = report::TraceFile::Read(
      dir.File("run.trace"), [&](const report::PacketPosition&, const TracePacket& packet) {
        if (packet.has_memory() && packet.memory().action() == ALLOC) {
          result.sizes_recorded.push_back(packet.memory().size());
        }
        if (packet.has_header()) {
          for (const Option& option : packet.header().option()) {
            result.options[option.name()] = option.value();
          }
        }
      });
  EXPECT_TRUE(file.ok()) << file.status();
  return result;
}

TEST(BenchToggle, TheBenchBuildsPausedRecorderRecordsNothingAndTheHeaderSaysPausesWereAllowed) {
  ScriptRun run = RunScript("lib/libgpumem_bench.so");
  EXPECT_EQ(run.printed, "True\n");
  EXPECT_EQ(run.sizes_recorded, (std::vector<uint64_t>{1001, 1003}));
  EXPECT_EQ(run.options["libgpumem"], "bench build: recording may be paused");
}

TEST(BenchToggle, TheShippedLibraryHasNoSwitchAndRecordsEverything) {
  const ScriptRun run = RunScript("lib/libgpumem.so");
  EXPECT_EQ(run.printed, "False\n");
  EXPECT_EQ(run.sizes_recorded, (std::vector<uint64_t>{1001, 1002, 1003}));
  EXPECT_EQ(run.options.count("libgpumem"), 0u);
}

}  // namespace
}  // namespace gpumem
