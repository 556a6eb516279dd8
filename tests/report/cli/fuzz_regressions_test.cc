// The traces of tests/fuzz/regressions/ (made by tests/fuzz/make_regressions.py, or found by the
// fuzzer) through every command of the built gpumem, as a user would run them: none may crash,
// each exits 0, 1 or 2 as its command says, and each writes its output. Then what each crafted
// trace is about: allocations of impossible sizes (report/format/sizes.h) left out and counted,
// sizes that the allocator models cannot round refused, stacks 50,000 frames deep cut to
// kMaxStackFrames (report/stacks/symbolizer.h) in every report, export and page.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::ProgramRun;
using testing::ReadFile;
using testing::RunGpumem;
using testing::SourcePath;
using testing::TempDir;

std::string Regression(const std::string& name) {
  return SourcePath("tests/fuzz/regressions/" + name);
}

// One command on a trace: its arguments before the trace, and whether it writes to a file (-o)
// rather than stdout.
struct Command {
  std::vector<std::string> args;
  bool to_file = false;
};

// Every command and section (as the fuzzer runs them, tests/fuzz/trace_reader_fuzz.cc).
std::vector<Command> EveryCommand() {
  std::vector<Command> commands = {
      {{"dump"}},
      {{"dump", "--counts"}},
      {{"dump", "--symbolize"}},
      {{"report", "--peak", "--leaks", "--oom", "--growth", "--summary", "--fragmentation",
        "--kernels"}},
      {{"report", "--json", "--peak", "--leaks", "--oom", "--growth", "--summary",
        "--fragmentation", "--kernels"}},
      {{"check", "--max-peak", "1MiB", "--no-leaks"}},
      {{"whatif", "--device-memory", "1GiB", "--json"}},
      {{"view"}, true},
      {{"export", "--format", "memory-viz"}, true},
      {{"export", "--format", "perfetto"}, true},
  };
  for (const char* allocator : {"native", "expandable", "async"}) {
    commands.push_back({{"whatif", "--device-memory", "64MiB", "--allocator", allocator}});
  }
  for (const char* format : {"folded", "speedscope"}) {
    for (const char* what : {"peak", "leaks"}) {
      commands.push_back({{"export", "--format", format, "--what", what}, true});
    }
  }
  return commands;
}

std::string Joined(const std::vector<std::string>& args) {
  std::string text;
  for (const std::string& arg : args) text += (text.empty() ? "" : " ") + arg;
  return text;
}

// What a command printed or wrote.
struct Output {
  ProgramRun run;
  std::string text;  // stdout, or the file written
};

Output RunCommand(const Command& command, const std::string& trace, const TempDir& dir) {
  std::vector<std::string> args = command.args;
  const std::string file = dir.File("out");
  std::filesystem::remove(file);
  if (command.to_file) args.insert(args.end(), {"-o", file});
  args.push_back(trace);
  Output output;
  output.run = RunGpumem(args);
  output.text = command.to_file ? ReadFile(file) : output.run.out;
  return output;
}

size_t ErrorLines(const std::string& err) {
  size_t lines = 0;
  for (size_t at = err.find("gpumem: error: "); at != std::string::npos;
       at = err.find("gpumem: error: ", at + 1)) {
    ++lines;
  }
  return lines;
}

// Every regression file, every command: an exit status of the command's (never a signal), its
// output written, at most one error line; exit 2 only with one.
TEST(FuzzRegressionsTest, EveryFileThroughEveryCommand) {
  std::vector<std::string> traces;
  for (const auto& entry : std::filesystem::directory_iterator(Regression(""))) {
    if (entry.path().extension() == ".trace") traces.push_back(entry.path().string());
  }
  std::sort(traces.begin(), traces.end());
  ASSERT_GE(traces.size(), 4u);
  TempDir dir;
  for (const std::string& trace : traces) {
    for (const Command& command : EveryCommand()) {
      SCOPED_TRACE(Joined(command.args) + " " + trace);
      const Output output = RunCommand(command, trace, dir);
      const int exit = output.run.exit_code;
      EXPECT_TRUE(exit == 0 || exit == 1 || exit == 2) << "exit " << exit << "\n" << output.run.err;
      EXPECT_LE(ErrorLines(output.run.err), 1u) << output.run.err;
      // Exit 2 with its error line; else a report, page or export.
      if (exit == 2) {
        EXPECT_EQ(ErrorLines(output.run.err), 1u) << output.run.err;
      } else {
        EXPECT_FALSE(output.text.empty());
      }
    }
  }
}

// The exit status of each command on `trace`: dump, report, view and export 0; check 1 (its peak
// is over 1 MiB); whatif `whatif` for each allocator that applies, 2 for the others.
void ExpectExits(const std::string& trace, int whatif, bool tensors) {
  TempDir dir;
  for (const Command& command : EveryCommand()) {
    SCOPED_TRACE(Joined(command.args));
    const Output output = RunCommand(command, trace, dir);
    int expected = 0;
    if (command.args[0] == "check") expected = 1;
    if (command.args[0] == "whatif") {
      const bool pytorch_model =
          std::find(command.args.begin(), command.args.end(), "native") != command.args.end() ||
          std::find(command.args.begin(), command.args.end(), "expandable") != command.args.end();
      expected = pytorch_model && !tensors ? 2 : whatif;
    }
    EXPECT_EQ(output.run.exit_code, expected) << output.run.err;
  }
}

// Tensors of sizes near 2^64, which PyTorch's allocator rounds to 512 bytes and 2 MiB: each
// allocation over 2^48 is left out and counted; the models refuse such sizes; the figures stay
// those of the possible tensors.
TEST(FuzzRegressionsTest, HugeSizesOfTensors) {
  const std::string trace = Regression("huge-sizes-tensors.trace");
  ExpectExits(trace, 1, /*tensors=*/true);
  const ProgramRun report = RunGpumem({"report", "--json", "--summary", trace});
  EXPECT_NE(report.out.find("\"impossible_sizes\":30}"), std::string::npos) << report.out;
  const ProgramRun counts = RunGpumem({"dump", "--counts", trace});
  EXPECT_NE(counts.out.find("impossible count=30\n"), std::string::npos) << counts.out;
  // Live at most: 2^48 bytes twice on each of two streams, and a few MiB: under 2^51.
  const ProgramRun whatif =
      RunGpumem({"whatif", "--device-memory", "2048TiB", "--allocator", "native", "--json", trace});
  EXPECT_EQ(whatif.exit_code, 0) << whatif.out << whatif.err;
  EXPECT_NE(whatif.out.find("\"allocator\":\"native\",\"fits\":true"), std::string::npos)
      << whatif.out;
  EXPECT_NE(whatif.out.find("\"allocations\":19,"), std::string::npos) << whatif.out;
}

// A plain program's allocations, VMM memory, pool sizes and a failed allocation near 2^64, and
// timestamps and seqs at the ends of their range.
TEST(FuzzRegressionsTest, HugeSizesOfAPlainProgram) {
  const std::string trace = Regression("huge-sizes-plain.trace");
  ExpectExits(trace, 1, /*tensors=*/false);
  const ProgramRun report = RunGpumem({"report", "--json", "--peak", "--fragmentation", trace});
  EXPECT_NE(report.out.find("\"impossible_sizes\":7}"), std::string::npos) << report.out;
  // The peak: the allocations of 2^48 and 2^48 - 1 bytes, 2^47 bytes of physical memory and 1 TiB.
  const uint64_t peak = (uint64_t{1} << 49) - 1 + (uint64_t{1} << 47) + (uint64_t{1} << 40);
  EXPECT_NE(report.out.find("\"peak_bytes\":" + std::to_string(peak)), std::string::npos)
      << report.out;
  // Timestamps 0 to 2^64 - 1: the last of the evenly spaced points is the last event's time.
  EXPECT_NE(report.out.find("\"time_ns\":18446744073709550615,"), std::string::npos) << report.out;
}

// Stacks 50,000 frames deep, native and Python: every report, export and page shows them cut to
// kMaxStackFrames, with a frame that says how many were left out.
TEST(FuzzRegressionsTest, DeepStacks) {
  const std::string trace = Regression("deep-stacks.trace");
  ExpectExits(trace, 0, /*tensors=*/false);
  TempDir dir;
  const Command view{{"view"}, true};
  const Output page = RunCommand(view, trace, dir);
  EXPECT_NE(page.text.find("[48977 frames left out]"), std::string::npos);
  const ProgramRun report = RunGpumem({"report", "--leaks", "--stacks", "full", trace});
  EXPECT_NE(report.out.find("[48977 frames left out]"), std::string::npos) << report.out;
  const Output folded =
      RunCommand({{"export", "--format", "folded", "--what", "leaks"}, true}, trace, dir);
  ASSERT_FALSE(folded.text.empty());
  // One line per stack: the device, then at most kMaxStackFrames (1024) frames.
  const std::string first_line = folded.text.substr(0, folded.text.find('\n'));
  EXPECT_EQ(std::count(first_line.begin(), first_line.end(), ';'), 1024) << first_line;
}

}  // namespace
}  // namespace gpumem
