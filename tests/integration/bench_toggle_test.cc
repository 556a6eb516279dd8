// gpumem_bench_set_recording (interpose/exported.cc), which tests/bench/run_step_time_toggle.sh
// uses to pause recording inside one process: a real python3 under the real preload library and
// the fake CUDA, allocating through ctypes between switches. Paused, nothing is recorded; without
// GPUMEM_BENCH_TOGGLE=1 the switch is refused and every allocation is recorded.
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

// Allocates 1001, 1002 (paused) and 1003 bytes; prints what each switch call returned.
constexpr char kScript[] = R"py(
import ctypes
cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
switch = ctypes.CDLL(None).gpumem_bench_set_recording
switch.argtypes = [ctypes.c_int]
def allocate(size):
    pointer = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(pointer), size) == 0
allocate(1001)
answers = [switch(0)]
allocate(1002)
answers.append(switch(1))
allocate(1003)
print(answers)
)py";

struct ScriptRun {
  std::string printed;
  std::vector<uint64_t> sizes_recorded;
  std::map<std::string, std::string> options;
};

ScriptRun RunScript(const std::map<std::string, std::string>& extra) {
  TempDir dir;
  auto environment = RecordingEnvironment(dir.File("run.trace"));
  for (const auto& [name, value] : extra) environment[name] = value;
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

TEST(BenchToggle, APausedRecorderRecordsNothingAndTheHeaderSaysPausesWereAllowed) {
  const ScriptRun run = RunScript({{"GPUMEM_BENCH_TOGGLE", "1"}});
  EXPECT_EQ(run.printed, "[1, 1]\n");
  EXPECT_EQ(run.sizes_recorded, (std::vector<uint64_t>{1001, 1003}));
  EXPECT_EQ(run.options.at("GPUMEM_BENCH_TOGGLE"), "1");
}

TEST(BenchToggle, WithoutTheSettingTheSwitchIsRefusedAndEverythingRecorded) {
  const ScriptRun run = RunScript({});
  EXPECT_EQ(run.printed, "[0, 0]\n");
  EXPECT_EQ(run.sizes_recorded, (std::vector<uint64_t>{1001, 1002, 1003}));
  EXPECT_EQ(run.options.count("GPUMEM_BENCH_TOGGLE"), 0u);
}

}  // namespace
}  // namespace gpumem
