// `gpumem report` streams: its memory is bounded by the live set and the interned tables, not by
// the length of the trace. The real binary, with every analysis that used to hold all events in
// memory (--summary --oom --growth --fragmentation, and peak and leaks), on two generated traces
// of the same process shape, one four times as long: the longer may not need more memory than the
// reorder window's worth (holding every event, as before, cost about 200 bytes each: 150 MiB more).
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using ::gpumem::testing::BuildPath;
using ::gpumem::testing::CurrentEnvironment;
using ::gpumem::testing::FooterPacket;
using ::gpumem::testing::Framed;
using ::gpumem::testing::HeaderPacket;
using ::gpumem::testing::ReadFile;
using ::gpumem::testing::Spawn;
using ::gpumem::testing::SpawnOptions;
using ::gpumem::testing::TempDir;

constexpr uint64_t kMiB = 1 << 20;

// A training loop of `iterations` iterations: an allocation at the marker site (stack 1), freed
// in the iteration, and a buffer (stack 2) reallocated 4 KiB larger each time (live bytes grow,
// the live set does not); every 1000th iteration a request that fails. Written straight to `path`.
void WriteTrainingLoop(const std::string& path, uint64_t iterations) {
  std::ofstream out(path, std::ios::binary);
  out << Framed(HeaderPacket());
  TracePacket device;
  device.mutable_device()->set_ordinal(0);
  device.mutable_device()->set_name("test device");
  device.mutable_device()->set_total_memory(80 * 1024 * kMiB);
  out << Framed(device);
  for (uint64_t id = 1; id <= 3; ++id) {
    TracePacket stack;
    stack.mutable_stack()->set_id(id);
    stack.mutable_stack()->add_frame(0x1000 * id);
    out << Framed(stack);
  }
  uint64_t seq = 0;
  auto event = [&](Api api, Action action, int32_t device_id, uint64_t size, uint64_t address,
                   uint64_t stack_id) {
    TracePacket packet;
    MemoryEvent* memory = packet.mutable_memory();
    memory->set_seq(++seq);
    memory->set_timestamp_ns(seq * 1000);
    memory->set_api(api);
    memory->set_kind(api == CUDA_FREE ? KIND_UNKNOWN : DEVICE);
    memory->set_action(action);
    memory->set_device(device_id);
    memory->set_size(size);
    memory->set_address(address);
    memory->set_stack_id(stack_id);
    if (action == ALLOC_FAILED) memory->set_result(2);
    out << Framed(packet);
  };
  constexpr uint64_t kMarker = 0x7000'0000'0000;
  constexpr uint64_t kBuffer = 0x7100'0000'0000;
  for (uint64_t i = 0; i < iterations; ++i) {
    event(CUDA_MALLOC, ALLOC, 0, 16 * kMiB, kMarker, 1);
    if (i > 0) event(CUDA_FREE, FREE, -1, 0, kBuffer, 0);
    event(CUDA_MALLOC, ALLOC, 0, (i + 1) * 4096, kBuffer, 2);
    if (i % 1000 == 0) event(CUDA_MALLOC, ALLOC_FAILED, 0, 64 * 1024 * kMiB, 0, 3);
    event(CUDA_FREE, FREE, -1, 0, kMarker, 0);
  }
  out << Framed(FooterPacket(seq));
}

// The peak resident set of `gpumem report` with every analysis on `trace`, in KiB; its stdout in
// *out.
long ReportPeakRssKiB(const std::string& trace, const TempDir& dir, std::string* out) {
  const std::vector<std::string> argv = {
      BuildPath("bin/gpumem"), "report", "--summary", "--peak", "--leaks", "--oom", "--growth",
      "--fragmentation",       trace};
  const pid_t pid =
      Spawn(argv, CurrentEnvironment(), SpawnOptions{dir.File("out"), dir.File("err"), ""});
  EXPECT_GT(pid, 0);
  if (pid <= 0) return 0;
  int status = 0;
  struct rusage usage = {};
  EXPECT_EQ(wait4(pid, &status, 0, &usage), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(dir.File("err"));
  *out = ReadFile(dir.File("out"));
  return usage.ru_maxrss;
}

TEST(BoundedMemoryTest, ReportMemoryDoesNotGrowWithTraceLength) {
  TempDir dir;
  WriteTrainingLoop(dir.File("short.trace"), 60'000);  // 240 thousand events
  WriteTrainingLoop(dir.File("long.trace"), 240'000);  // 960 thousand events
  std::string short_out;
  std::string long_out;
  const long short_rss = ReportPeakRssKiB(dir.File("short.trace"), dir, &short_out);
  const long long_rss = ReportPeakRssKiB(dir.File("long.trace"), dir, &long_out);
  // Every analysis ran and saw the whole trace.
  EXPECT_NE(long_out.find("memory events: 960239;"), std::string::npos) << long_out;
  EXPECT_NE(long_out.find("GPU reserved memory"), std::string::npos) << long_out;
  EXPECT_NE(long_out.find("growth: 240000 iterations"), std::string::npos) << long_out;
  EXPECT_NE(long_out.find("+4.00 KiB/iteration  rose at 239999 of 239999 iteration boundaries"),
            std::string::npos)
      << long_out;
  EXPECT_NE(long_out.find("oom: 176 more failed requests after these"), std::string::npos)
      << long_out;
  EXPECT_NE(long_out.find("fragmentation, device 0 (test device)"), std::string::npos) << long_out;
  // The growth series in JSON are sampled: 60000 iterations, every 256th and the last.
  const testing::ProgramRun json = testing::RunProgram(
      {BuildPath("bin/gpumem"), "report", "--growth", "--json", dir.File("short.trace")});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"iterations\":60000,"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find(",\"sample_stride\":256}"), std::string::npos) << json.out;
  EXPECT_GT(short_rss, 0);
  EXPECT_LT(long_rss, short_rss + 24 * 1024)
      << "peak RSS " << short_rss << " KiB for 240 thousand events, " << long_rss
      << " KiB for 960 thousand";
}

}  // namespace
}  // namespace gpumem::report
