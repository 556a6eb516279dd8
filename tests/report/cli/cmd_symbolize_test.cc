// `gpumem symbolize`: a trace recorded from a copy of samples/leak_loop, symbolized, then read with
// the binary gone, must still name leak_iteration at leak_loop.cc:26 (the activation that leaks);
// several traces and directories of them (the fork sample's two processes) are each symbolized.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::ReadFile;
using testing::RecordingEnvironment;
using testing::RunProgram;
using testing::TempDir;

namespace fs = std::filesystem;

// Runs the built gpumem with `args`, with no symbol search path of the test's environment.
ProgramRun Gpumem(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem")};
  argv.insert(argv.end(), args.begin(), args.end());
  ProgramRun run = RunProgram(argv, {{"GPUMEM_SYMBOL_PATH", ""}});
  if (run.spawn_error != 0) {
    ADD_FAILURE() << "cannot run " << argv[0] << ": " << std::strerror(run.spawn_error);
  }
  return run;
}

// Records a copy of bin/leak_loop made in `dir` (so that it can be deleted afterwards) into
// dir/leak.trace; returns the copy's path.
std::string RecordCopy(const TempDir& dir) {
  const std::string binary = dir.File("leak_loop");
  fs::copy_file(BuildPath("bin/leak_loop"), binary);
  ProgramRun run = RunProgram({binary}, RecordingEnvironment(dir.File("leak.trace")));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(fs::exists(dir.File("leak.trace"))) << run.err;
  return binary;
}

// The packets of a trace, parsed as one Trace message (which the file must stay).
int PacketCount(const std::string& path) {
  Trace trace;
  EXPECT_TRUE(trace.ParseFromString(ReadFile(path))) << path << " is not one Trace message";
  return trace.packet_size();
}

// The packets `gpumem symbolize` appends: SymbolizedFrames and the Symbolization after them.
int SymbolizedCount(const std::string& path) {
  Trace trace;
  trace.ParseFromString(ReadFile(path));
  int count = 0;
  for (const TracePacket& packet : trace.packet()) {
    count += packet.has_symbolized_frame() || packet.has_symbolization();
  }
  return count;
}

// The module ids the trace's Symbolization packets name.
std::vector<uint32_t> SymbolizedModules(const std::string& path) {
  Trace trace;
  trace.ParseFromString(ReadFile(path));
  std::vector<uint32_t> ids;
  for (const TracePacket& packet : trace.packet()) {
    if (!packet.has_symbolization()) continue;
    ids.insert(ids.end(), packet.symbolization().module_id().begin(),
               packet.symbolization().module_id().end());
  }
  return ids;
}

TEST(SymbolizeTest, SymbolizedTraceReadsTheSameWithoutTheBinary) {
  TempDir dir;
  const std::string binary = RecordCopy(dir);
  const std::string trace = dir.File("leak.trace");
  const int recorded = PacketCount(trace);

  ProgramRun symbolize = Gpumem({"symbolize", trace});
  ASSERT_EQ(symbolize.exit_code, 0) << symbolize.err;
  EXPECT_EQ(symbolize.err, "");
  const int after = PacketCount(trace);
  EXPECT_GT(after, recorded);
  EXPECT_EQ(SymbolizedCount(trace), after - recorded);

  ASSERT_TRUE(fs::remove(binary));
  ProgramRun report = Gpumem({"report", trace});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("leak_iteration"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("leak_loop.cc:26"), std::string::npos) << report.out;
  // Only frames without a function print as a bare module+offset (_start has no line information,
  // so it reads "_start (leak_loop+0x...)").
  EXPECT_EQ(report.out.find(" leak_loop+0x"), std::string::npos) << report.out;

  // dump --symbolize symbolizes while it reads, before the appended packets: the same names.
  ProgramRun dump = Gpumem({"dump", "--symbolize", trace});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("leak_iteration() ("), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find("leak_loop.cc:26)"), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find(" symbolized_frame pc=0x"), std::string::npos) << dump.out;
  // The packets follow the footer, and the trace still ends clean.
  EXPECT_NE(dump.out.find("end: clean (footer present)"), std::string::npos) << dump.out;
}

TEST(SymbolizeTest, WithoutSymbolizeTheReportShowsModuleOffsets) {
  TempDir dir;
  const std::string binary = RecordCopy(dir);
  const std::string trace = dir.File("leak.trace");
  // With the binary present, the report names the function.
  ProgramRun before = Gpumem({"report", trace});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_NE(before.out.find("leak_loop.cc:26"), std::string::npos) << before.out;

  ASSERT_TRUE(fs::remove(binary));
  ProgramRun report = Gpumem({"report", trace});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find(" leak_loop+0x"), std::string::npos) << report.out;
  EXPECT_EQ(report.out.find("leak_iteration"), std::string::npos) << report.out;
  EXPECT_EQ(report.out.find("leak_loop.cc:26"), std::string::npos) << report.out;
}

// Once symbolized, a trace says the same wherever it is read: a binary that turns up at a module's
// recorded path later (another build, a different machine's file at the same path) is not opened
// for a module `gpumem symbolize` already looked for.
TEST(SymbolizeTest, ReportsNeverOpenABinaryOfASymbolizedModule) {
  TempDir dir;
  const std::string binary = RecordCopy(dir);
  const std::string trace = dir.File("leak.trace");
  const std::string away = dir.File("elsewhere");
  fs::rename(binary, away);
  ProgramRun symbolize = Gpumem({"symbolize", trace});
  ASSERT_EQ(symbolize.exit_code, 0) << symbolize.err;
  EXPECT_NE(symbolize.out.find(" unresolved"), std::string::npos) << symbolize.out;
  EXPECT_FALSE(SymbolizedModules(trace).empty());

  fs::rename(away, binary);  // the binary is back where it was recorded
  ProgramRun report = Gpumem({"report", trace});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find(" leak_loop+0x"), std::string::npos) << report.out;
  EXPECT_EQ(report.out.find("leak_iteration"), std::string::npos) << report.out;
  ProgramRun dump = Gpumem({"dump", "--symbolize", trace});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_EQ(dump.out.find("leak_iteration"), std::string::npos) << dump.out;
  EXPECT_NE(dump.out.find(" symbolization host=\""), std::string::npos) << dump.out;

  // `gpumem symbolize` itself looks again, and then the report has the names.
  symbolize = Gpumem({"symbolize", trace});
  ASSERT_EQ(symbolize.exit_code, 0) << symbolize.err;
  report = Gpumem({"report", trace});
  EXPECT_NE(report.out.find("leak_loop.cc:26"), std::string::npos) << report.out;
}

TEST(SymbolizeTest, SecondRunAddsNothing) {
  TempDir dir;
  RecordCopy(dir);
  const std::string trace = dir.File("leak.trace");
  ASSERT_EQ(Gpumem({"symbolize", trace}).exit_code, 0);
  const int once = PacketCount(trace);
  const std::string bytes = ReadFile(trace);
  ProgramRun again = Gpumem({"symbolize", trace});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find(" 0 return address(es) symbolized"), std::string::npos) << again.out;
  EXPECT_EQ(PacketCount(trace), once);
  EXPECT_EQ(ReadFile(trace), bytes);
}

TEST(SymbolizeTest, OutputCopyLeavesTheInputAlone) {
  TempDir dir;
  const std::string binary = RecordCopy(dir);
  const std::string trace = dir.File("leak.trace");
  const std::string original = ReadFile(trace);
  const std::string copy = dir.File("symbolized.trace");
  ProgramRun run = Gpumem({"symbolize", trace, "-o", copy});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(ReadFile(trace), original);
  EXPECT_GT(SymbolizedCount(copy), 0);
  EXPECT_EQ(SymbolizedCount(trace), 0);
  EXPECT_EQ(ReadFile(copy).substr(0, original.size()), original);

  ASSERT_TRUE(fs::remove(binary));
  ProgramRun report = Gpumem({"report", copy});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("leak_loop.cc:26"), std::string::npos) << report.out;
}

// Runs `gpumem symbolize TRACE` under a file-size limit of `blocks` 512-byte blocks (sh's ulimit
// -f).
ProgramRun SymbolizeUnderFileSizeLimit(const std::string& trace, size_t blocks) {
  return RunProgram(
      {"/bin/sh", "-c", "ulimit -f " + std::to_string(blocks) + " && exec \"$0\" symbolize \"$1\"",
       BuildPath("bin/gpumem"), trace},
      {{"GPUMEM_SYMBOL_PATH", ""}});
}

// The symbolized trace is written aside and renamed over the original: a write that fails (here
// at a file-size limit, which gpumem meets as EFBIG rather than dying of SIGXFSZ), whether in the
// copy of the original or in the frames after it, leaves the original byte for byte as it was and
// no temporary file; then, without the limit, the trace is symbolized through a symbolic link to
// it, keeping the link and the trace's mode.
TEST(SymbolizeTest, AFailedWriteLeavesTheTraceAsItWas) {
  TempDir dir;
  RecordCopy(dir);
  const std::string trace = dir.File("leak.trace");
  // Zeros after the packets (unused space, as the recorder leaves it) up to one byte short of a
  // whole block: a limit of the next block lets the copy through and stops the frames after it.
  std::string bytes = ReadFile(trace);
  bytes.resize((bytes.size() / 512 + 2) * 512 - 1, '\0');
  std::ofstream(trace, std::ios::binary | std::ios::trunc) << bytes;
  fs::permissions(trace, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  const std::string expected_error =
      "gpumem: error: writing " + trace + ": File too large; " + trace + " is unchanged\n";
  for (size_t blocks : {size_t{1}, (bytes.size() + 1) / 512}) {
    SCOPED_TRACE(blocks);
    const ProgramRun run = SymbolizeUnderFileSizeLimit(trace, blocks);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_EQ(run.err, expected_error);
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(ReadFile(trace), bytes);
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
    }
  }

  const std::string link = dir.File("link.trace");
  fs::create_symlink(trace, link);
  const ProgramRun run = Gpumem({"symbolize", link});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.find(link + ": 0 "), std::string::npos) << run.out;
  EXPECT_NE(Gpumem({"dump", trace}).out.find(" symbolized_frame pc="), std::string::npos);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(fs::status(trace).permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
}

TEST(SymbolizeTest, BadInputIsOneLineAndExit2) {
  TempDir dir;
  for (const std::string& content : {std::string(), std::string("not a trace at all")}) {
    const std::string path = dir.File("bad.trace");
    std::ofstream(path, std::ios::binary) << content;
    ProgramRun run = Gpumem({"symbolize", path});
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(run.err.rfind("gpumem: error: ", 0), 0u) << run.err;
    EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << run.err;
    EXPECT_EQ(ReadFile(path), content);
  }
  ProgramRun missing = Gpumem({"symbolize", dir.File("missing.trace")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err.find('\n'), missing.err.size() - 1) << missing.err;
  EXPECT_FALSE(fs::exists(dir.File("missing.trace")));

  EXPECT_EQ(Gpumem({"symbolize"}).exit_code, 2);
  EXPECT_EQ(Gpumem({"symbolize", "--bogus", dir.File("x")}).exit_code, 2);
  ProgramRun help = Gpumem({"help", "symbolize"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage: gpumem symbolize"), std::string::npos);
}

// The fork sample's two traces (parent and launcher child) recorded into `dir`; returns their
// paths.
std::vector<std::string> RecordFork(const std::string& dir) {
  ProgramRun run = RunProgram({BuildPath("bin/fork")}, RecordingEnvironment(dir + "/fork.trace"));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::string> traces;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".trace") traces.push_back(entry.path().string());
  }
  std::sort(traces.begin(), traces.end());
  EXPECT_EQ(traces.size(), 2u) << run.err;
  return traces;
}

size_t LineCount(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

TEST(SymbolizeTest, DirectoryOfTracesSymbolizesEach) {
  TempDir dir;
  const std::string traces_dir = dir.File("traces");
  fs::create_directory(traces_dir);
  const std::vector<std::string> traces = RecordFork(traces_dir);
  ASSERT_EQ(traces.size(), 2u);
  std::vector<int> recorded;
  for (const std::string& trace : traces) recorded.push_back(PacketCount(trace));

  ProgramRun run = Gpumem({"symbolize", traces_dir});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(LineCount(run.out), 2u) << run.out;
  for (size_t i = 0; i < traces.size(); ++i) {
    SCOPED_TRACE(traces[i]);
    EXPECT_NE(run.out.find(traces[i] + ": "), std::string::npos) << run.out;
    EXPECT_GT(SymbolizedCount(traces[i]), 0);
    EXPECT_EQ(PacketCount(traces[i]), recorded[i] + SymbolizedCount(traces[i]));
  }
  // Named one by one, and with the directory again: nothing more to add.
  const std::string before = ReadFile(traces[0]) + ReadFile(traces[1]);
  run = Gpumem({"symbolize", traces[0], traces[1], traces_dir});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(LineCount(run.out), 4u) << run.out;
  EXPECT_EQ(ReadFile(traces[0]) + ReadFile(traces[1]), before);
}

TEST(SymbolizeTest, SeveralTraceFilesSymbolizeEach) {
  TempDir dir;
  const std::vector<std::string> traces = RecordFork(dir.path());
  ASSERT_EQ(traces.size(), 2u);
  ProgramRun run = Gpumem({"symbolize", traces[1], traces[0]});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // In the order given.
  EXPECT_EQ(run.out.rfind(traces[1] + ": ", 0), 0u) << run.out;
  for (const std::string& trace : traces) EXPECT_GT(SymbolizedCount(trace), 0) << trace;
}

TEST(SymbolizeTest, AFailingTraceDoesNotStopTheOthers) {
  TempDir dir;
  const std::vector<std::string> traces = RecordFork(dir.path());
  ASSERT_EQ(traces.size(), 2u);
  // Sorted between the two: "fork-<pid>.trace" < "fork-z.trace" < "fork.trace".
  const std::string bad = dir.File("fork-z.trace");
  std::ofstream(bad, std::ios::binary) << "not a trace at all";
  ProgramRun run = Gpumem({"symbolize", dir.path()});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(LineCount(run.err), 1u) << run.err;
  EXPECT_EQ(run.err.rfind("gpumem: error: " + bad, 0), 0u) << run.err;
  EXPECT_EQ(LineCount(run.out), 2u) << run.out;
  for (const std::string& trace : traces) EXPECT_GT(SymbolizedCount(trace), 0) << trace;
  EXPECT_EQ(ReadFile(bad), "not a trace at all");

  // A missing file among the arguments: the same.
  run = Gpumem({"symbolize", dir.File("missing.trace"), traces[0]});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(LineCount(run.err), 1u) << run.err;
  EXPECT_EQ(LineCount(run.out), 1u) << run.out;
  EXPECT_FALSE(fs::exists(dir.File("missing.trace")));
}

TEST(SymbolizeTest, OutputNeedsASingleTraceFile) {
  TempDir dir;
  const std::string traces_dir = dir.File("traces");
  fs::create_directory(traces_dir);
  const std::vector<std::string> traces = RecordFork(traces_dir);
  ASSERT_EQ(traces.size(), 2u);
  const std::string before = ReadFile(traces[0]) + ReadFile(traces[1]);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"symbolize", "-o", dir.File("out.trace"), traces_dir},
        std::vector<std::string>{"symbolize", traces[0], traces[1], "-o", dir.File("out.trace")}}) {
    ProgramRun run = Gpumem(args);
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(run.out, "");
    const std::string first_line = run.err.substr(0, run.err.find('\n'));
    EXPECT_EQ(first_line,
              "gpumem: error: symbolize: -o takes a single trace file, not a directory or several "
              "traces")
        << run.err;
    EXPECT_FALSE(fs::exists(dir.File("out.trace")));
  }
  EXPECT_EQ(ReadFile(traces[0]) + ReadFile(traces[1]), before);

  // A directory without traces is an error naming it.
  fs::create_directory(dir.File("empty"));
  ProgramRun empty = Gpumem({"symbolize", dir.File("empty")});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find(dir.File("empty") + ": directory holds no *.trace file"),
            std::string::npos)
      << empty.err;
}

}  // namespace
}  // namespace gpumem
