// What the preload library must never do to its host: fail it over an unwritable trace path,
// export more than its hooks, or pull in libraries that clash with the host's.
#include <gtest/gtest.h>
#include <stdio.h>

#include <string>

#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"
#include "tests/integration/expected_answer.h"
#include "tests/support/test_support.h"

namespace gpumem::testing {
namespace {

std::string CommandOutput(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  pclose(pipe);
  return output;
}

TEST(Robustness, UnwritableTracePathWarnsOnceAndTheProgramRunsUnharmed) {
  std::map<std::string, std::string> plain = {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}};
  ProgramRun without = RunProgram({BuildPath("bin/threads")}, plain);
  ProgramRun with =
      RunProgram({BuildPath("bin/threads")}, RecordingEnvironment("/proc/no/such/dir/run.trace"));
  ASSERT_EQ(without.exit_code, 0);
  EXPECT_EQ(with.exit_code, 0);
  EXPECT_EQ(with.out, without.out);
  EXPECT_EQ(CountLines(with.err, "gpumem: warning: cannot write the trace"), 1) << with.err;
  EXPECT_EQ(CountLines(with.err, "gpumem:"), 1) << with.err;
}

// Clusters often cap address space (`ulimit -v`); the trace file's reservation must adapt.
TEST(Robustness, RecordsUnderAnAddressSpaceLimit) {
  TempDir dir;
  std::string trace = dir.File("limited.trace");
  ProgramRun run =
      RunProgram({"/bin/sh", "-c", "ulimit -v 4000000 && exec \"$0\"", BuildPath("bin/leak_loop")},
                 RecordingEnvironment(trace));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("gpumem:"), std::string::npos) << run.err;
  ExpectedAnswer answer = ReadExpectedAnswer(SourcePath("samples/leak_loop/expected.txt"));
  std::vector<std::string> problems = CheckAgainstAnswer({trace}, answer, false);
  EXPECT_TRUE(problems.empty()) << problems.front();
}

TEST(Robustness, DisabledRecorderWritesNothing) {
  TempDir dir;
  auto environment = RecordingEnvironment(dir.File("off.trace"));
  environment["GPUMEM_ENABLE"] = "0";
  ProgramRun run = RunProgram({BuildPath("bin/leak_loop")}, environment);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(dir.File("off.trace")));
}

TEST(Robustness, ExportsOnlyHooksAndNeedsOnlyLibc) {
  std::string library = BuildPath("lib/libgpumem.so");
  std::string exported = CommandOutput("nm -D --defined-only " + library + " | awk '{print $3}'");
  ASSERT_FALSE(exported.empty());
  std::istringstream names(exported);
  for (std::string name; std::getline(names, name);) {
    // cu*/cuda* hooks (cuptiSubscribe too: gpumem hands CUPTI over to a tool that asks for it),
    // dlsym, CUPTI's injection entry point (CUDA_INJECTION64_PATH), and the entry points of
    // gpumem's Python observer, called through ctypes (a gpumem_note_ name replaces nothing in
    // the host). The benchmarks' pause exists only in libgpumem_bench.so.
    bool hook = name == "dlsym" || name == "InitializeInjection" || name.rfind("cu", 0) == 0 ||
                name == "gpumem_note_python_holder" || name == "gpumem_note_out_of_memory" ||
                name == "gpumem_note_backward";
    EXPECT_TRUE(hook) << "exported non-hook symbol: " << name;
  }
  std::string bench_exports =
      CommandOutput("nm -D --defined-only " + BuildPath("lib/libgpumem_bench.so"));
  EXPECT_NE(bench_exports.find(" gpumem_bench_set_recording\n"), std::string::npos);
  EXPECT_EQ(exported.find("gpumem_bench_set_recording"), std::string::npos) << exported;
  std::string needed = CommandOutput("readelf -d " + library + " | grep NEEDED");
  EXPECT_EQ(CountLines(needed, " 0x"), 1) << needed;
  EXPECT_NE(needed.find("libc.so.6"), std::string::npos) << needed;
}

// libcudart loaded RTLD_LOCAL (by a plugin that needs it): out of RTLD_NEXT's reach, the hook
// finds the real cudaMalloc in the caller's scope, and the allocation succeeds and is recorded.
TEST(Robustness, ReachesALibcudartLoadedLocally) {
  TempDir dir;
  std::string trace = dir.File("local.trace");
  ProgramRun plain = RunProgram({BuildPath("tests/programs/local_cudart_main"),
                                 BuildPath("tests/programs/libdlopen_plugin.so")},
                                {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ProgramRun run = RunProgram({BuildPath("tests/programs/local_cudart_main"),
                               BuildPath("tests/programs/libdlopen_plugin.so")},
                              RecordingEnvironment(trace));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto sorted = report::ReadMemoryEventsBySeq(trace);
  ASSERT_TRUE(sorted.ok()) << sorted.status();
  size_t allocations = 0;
  for (const auto& event : sorted->events) {
    if (event.action() == ALLOC && event.size() == (1u << 20)) ++allocations;
  }
  EXPECT_EQ(allocations, 1u);
}

// A library dlopen'd, used and dlclose'd during the run: its frames symbolize against the module
// that was loaded then, and the trace says when it went away.
TEST(Robustness, ModuleMapFollowsDlopenAndDlclose) {
  TempDir dir;
  std::string trace = dir.File("dlopen.trace");
  ProgramRun run = RunProgram(
      {BuildPath("tests/programs/dlopen_main"), BuildPath("tests/programs/libdlopen_plugin.so")},
      RecordingEnvironment(trace));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  uint32_t plugin_id = 0;
  bool plugin_unloaded = false;
  auto file =
      report::TraceFile::Read(trace, [&](const report::PacketPosition&, const TracePacket& packet) {
        if (packet.has_module() &&
            packet.module().path().find("libdlopen_plugin.so") != std::string::npos) {
          plugin_id = packet.module().id();
        }
        if (packet.has_module_unload() && packet.module_unload().id() == plugin_id)
          plugin_unloaded = true;
      });
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_NE(plugin_id, 0u);
  EXPECT_TRUE(plugin_unloaded);
  auto sorted = report::ReadMemoryEventsBySeq(trace);
  ASSERT_TRUE(sorted.ok());
  report::Symbolizer symbolizer(sorted->file.get());
  std::vector<std::string> innermost;
  for (const MemoryEvent& event : sorted->events) {
    if (event.action() != ALLOC) continue;
    auto frames = symbolizer.Symbolize(event.stack_id());
    innermost.push_back(frames.empty() ? "" : frames[0].function);
  }
  ASSERT_EQ(innermost.size(), 2u);
  EXPECT_EQ(innermost[0], "plugin_allocate");
  EXPECT_EQ(innermost[1], "allocate_after_unload()");
}

// The wrapper: records, returns the program's own exit code, says where the trace is.
TEST(Robustness, RecordCommandEndToEnd) {
  TempDir dir;
  std::string trace = dir.File("wrapped.trace");
  ProgramRun run = RunProgram(
      {BuildPath("bin/gpumem"), "record", "-o", trace, "--", BuildPath("bin/leak_loop")},
      {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}, {"GPUMEM_OUTPUT", ""}, {"LD_PRELOAD", ""}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("gpumem: trace written to " + trace), std::string::npos) << run.err;
  ExpectedAnswer answer = ReadExpectedAnswer(SourcePath("samples/leak_loop/expected.txt"));
  std::vector<std::string> problems = CheckAgainstAnswer({trace}, answer, false);
  EXPECT_TRUE(problems.empty()) << problems.front();
}

}  // namespace
}  // namespace gpumem::testing
