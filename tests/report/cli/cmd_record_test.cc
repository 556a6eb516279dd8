// `gpumem record` as a user runs it. The programs here make no CUDA call, so the recorder writes
// nothing; where a test needs a trace to appear, a shell script writes the file the recorder would
// have written, at the GPUMEM_OUTPUT it was given, to check naming and reporting.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::CurrentEnvironment;
using testing::ProgramRun;
using testing::ReadFile;
using testing::Spawn;
using testing::SpawnOptions;
using testing::UniqueTempPath;
using testing::WaitExitCode;

namespace fs = std::filesystem;

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

class RecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::absolute(UniqueTempPath(".dir")).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    fs::remove(dir_ + ".stderr");
  }

  // Starts `gpumem record ARGS` in dir_, with `extra_env` added; stderr to a file.
  pid_t Start(const std::vector<std::string>& args,
              const std::map<std::string, std::string>& extra_env) {
    std::vector<std::string> argv = {BuildPath("bin/gpumem"), "record"};
    argv.insert(argv.end(), args.begin(), args.end());
    SpawnOptions options;  // stdout stays this test's
    options.err_path = dir_ + ".stderr";
    options.working_dir = dir_;
    int error = 0;
    const pid_t pid = Spawn(argv, CurrentEnvironment(extra_env), options, &error);
    EXPECT_EQ(error, 0) << std::strerror(error);
    return pid;
  }
  ProgramRun Wait(pid_t pid) {
    ProgramRun result;
    result.exit_code = WaitExitCode(pid);
    result.err = ReadFile(dir_ + ".stderr");
    return result;
  }
  ProgramRun Record(const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& extra_env = {}) {
    return Wait(Start(args, extra_env));
  }
  // `gpumem record -o OUTPUT` of a program that would leave a file `ran`: refused with one line,
  // "gpumem: error: OUTPUT: WHY; the program was not run", and nothing run.
  void ExpectRefusedBeforeRunning(const std::string& output, const std::string& why) {
    SCOPED_TRACE(output);
    const ProgramRun result = Record({"-o", output, "--", "/bin/sh", "-c", "touch ran"});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err, "gpumem: error: " + output + ": " + why + "; the program was not run\n");
    EXPECT_FALSE(fs::exists(dir_ + "/ran"));
  }

  std::string dir_;
};

TEST_F(RecordTest, ExitsWithTheProgramsStatusAndSaysNoTraceWasWritten) {
  ProgramRun result = Record({"--", "/bin/sh", "-c", "exit 7"});
  EXPECT_EQ(result.exit_code, 7);
  EXPECT_EQ(result.err, "gpumem: no trace written: the program made no CUDA memory call\n");
  EXPECT_TRUE(fs::is_empty(dir_));

  result = Record({"/bin/sh", "-c", "exit 3"});  // without "--"
  EXPECT_EQ(result.exit_code, 3);
  result = Record({"true"});  // found on PATH
  EXPECT_EQ(result.exit_code, 0);
}

TEST_F(RecordTest, AProgramKilledByASignalExitsLikeInAShell) {
  const ProgramRun result = Record({"--", "/bin/sh", "-c", "kill -KILL $$"});
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  EXPECT_NE(result.err.find("gpumem: the program was killed by signal 9"), std::string::npos)
      << result.err;
}

// As a shell: 127 for a program not found, 126 for one found but not executable.
TEST_F(RecordTest, AProgramThatCannotBeExecutedExitsLikeInAShell) {
  ProgramRun result = Record({"--", "no-such-program-gpumem-test"});
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_EQ(result.err,
            "gpumem: error: cannot execute 'no-such-program-gpumem-test': No such file or "
            "directory\n");
  result = Record({"--", dir_ + "/missing"});
  EXPECT_EQ(result.exit_code, 127);
  result = Record({"--", dir_});  // a directory
  EXPECT_EQ(result.exit_code, 126);
  EXPECT_EQ(result.err, "gpumem: error: cannot execute '" + dir_ + "': Permission denied\n");
  std::ofstream(dir_ + "/script") << "#!/bin/sh\nexit 0\n";  // not executable
  result = Record({"--", dir_ + "/script"});
  EXPECT_EQ(result.exit_code, 126);
  EXPECT_EQ(result.err, "gpumem: error: cannot execute '" + dir_ + "/script': Permission denied\n");
}

TEST_F(RecordTest, UsageErrors) {
  ProgramRun result = Record({});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err, "gpumem: error: record: no program given\nTry 'gpumem record --help'.\n");
  result = Record({"--bogus", "true"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err,
            "gpumem: error: record: unknown flag '--bogus'\nTry 'gpumem record --help'.\n");
  result = Record({"-o"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err, "gpumem: error: record: -o needs a path\nTry 'gpumem record --help'.\n");
}

TEST_F(RecordTest, DefaultTraceIsNamedAfterHostAndProgramPid) {
  // The program is exec'd in the forked child, so its $$ is the pid in the name.
  const ProgramRun result =
      Record({"/bin/sh", "-c", "echo $$ > pid.txt; printf abc > \"$GPUMEM_OUTPUT\""});
  EXPECT_EQ(result.exit_code, 0);
  std::string pid = ReadFile(dir_ + "/pid.txt");
  pid.erase(pid.find_last_not_of('\n') + 1);
  const std::string name = "gpumem-" + HostName() + "-" + pid + ".trace";
  EXPECT_EQ(result.err, "gpumem: trace written to " + name + " (3 bytes)\n");
  EXPECT_EQ(ReadFile(dir_ + "/" + name), "abc");
}

TEST_F(RecordTest, OutputFileAndTheTracesOfChildProcesses) {
  std::ofstream(dir_ + "/run.trace") << testing::Framed(testing::HeaderPacket());  // an old trace
  std::ofstream(dir_ + "/run-1.trace") << "an old child trace, not from this run";
  ProgramRun result = Record({"-o", "run.trace", "--", "/bin/sh", "-c", "exit 0"});
  EXPECT_EQ(result.err, "gpumem: no trace written: the program made no CUDA memory call\n");
  EXPECT_FALSE(fs::exists(dir_ + "/run.trace")) << "the old trace must be gone";

  const std::string script =
      "case \"$GPUMEM_OUTPUT\" in /*) ;; *) exit 9;; esac;"  // absolute: survives a chdir
      "printf a > \"$GPUMEM_OUTPUT\";"
      "printf bb > \"${GPUMEM_OUTPUT%.trace}-4321.trace\";"
      "printf x > \"${GPUMEM_OUTPUT%.trace}-notapid.trace\"";
  result = Record({"-o", "run.trace", "/bin/sh", "-c", script});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.err,
            "gpumem: trace written to run.trace (1 byte)\n"
            "gpumem: trace written to run-4321.trace (2 bytes)\n");

  // No .trace suffix: children write PATH-<pid>.
  result = Record({"--output=" + dir_ + "/out", "/bin/sh", "-c",
                   "printf a > \"$GPUMEM_OUTPUT\"; printf bb > \"$GPUMEM_OUTPUT-77\""});
  EXPECT_EQ(result.err, "gpumem: trace written to " + dir_ + "/out (1 byte)\n" +
                            "gpumem: trace written to " + dir_ + "/out-77 (2 bytes)\n");
}

TEST_F(RecordTest, OutputDirectoryListsEveryProcessTrace) {
  fs::create_directories(dir_ + "/traces");
  const std::string script =
      "printf aaaa > \"$GPUMEM_OUTPUT/gpumem-$(uname -n)-$$.trace\";"
      "printf b > \"$GPUMEM_OUTPUT/gpumem-$(uname -n)-1.trace\"";
  const ProgramRun result = Record({"-o", "traces", "/bin/sh", "-c", script});
  EXPECT_EQ(result.exit_code, 0);
  const std::string host = HostName();
  // The program's own trace first.
  const size_t own = result.err.find("gpumem: trace written to traces/gpumem-" + host + "-");
  const size_t child =
      result.err.find("gpumem: trace written to traces/gpumem-" + host + "-1.trace (1 byte)\n");
  EXPECT_EQ(own, 0u) << result.err;
  EXPECT_NE(result.err.find(".trace (4 bytes)\n"), std::string::npos) << result.err;
  EXPECT_NE(child, std::string::npos) << result.err;
}

TEST_F(RecordTest, PreloadsTheLibraryKeepingExistingEntries) {
  const std::string library = GPUMEM_BUILD_DIR "/lib/libgpumem.so";
  const char* configured = std::getenv("GPUMEM_LIBRARY");
  const std::string expected = fs::absolute(configured != nullptr ? configured : library).string();
  // A harmless library already preloaded, for gpumem and the program alike.
  const std::string existing = "libm.so.6";
  const ProgramRun result =
      Record({"/bin/sh", "-c", "echo \"$LD_PRELOAD\" > preload.txt"}, {{"LD_PRELOAD", existing}});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(ReadFile(dir_ + "/preload.txt"), expected + ":" + existing + "\n");
}

// gpumem's Python observer goes first on PYTHONPATH, before what the user had there, and the
// sitecustomize it shadows (the user's own, here) still runs.
TEST_F(RecordTest, PutsThePythonObserverFirstOnPythonPathAndRunsTheOneItShadows) {
  const std::string observer = fs::absolute(GPUMEM_BUILD_DIR "/lib/python").string();
  const std::string user_dir = dir_ + "/user";
  fs::create_directories(user_dir);
  std::ofstream(user_dir + "/sitecustomize.py")
      << "open('shadowed.txt', 'w').write('the user sitecustomize ran')\n";
  const ProgramRun result =
      Record({"python3", "-c",
              "import os, sys; open('path.txt', 'w').write(os.environ['PYTHONPATH']); "
              "open('module.txt', 'w').write(sys.modules['sitecustomize'].__file__)"},
             {{"PYTHONPATH", user_dir}});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(ReadFile(dir_ + "/path.txt"), observer + ":" + user_dir);
  EXPECT_EQ(ReadFile(dir_ + "/module.txt"), observer + "/sitecustomize.py");
  EXPECT_EQ(ReadFile(dir_ + "/shadowed.txt"), "the user sitecustomize ran");
}

// --tensors sets each framework's per-tensor allocator for the program, says so, and the
// recorder copies what it changed into the trace header (recorded here against the fake CUDA).
TEST_F(RecordTest, TensorsSwitchesTheAllocatorsAndTheHeaderSaysWhatChanged) {
  const ProgramRun result =
      Record({"-o", "run.trace", "--tensors", "--", "/bin/sh", "-c",
              "echo \"$PYTORCH_CUDA_ALLOC_CONF|$XLA_PYTHON_CLIENT_ALLOCATOR|$TF_GPU_ALLOCATOR\" "
              "> env.txt; exec " +
                  BuildPath("bin/stream_ordered")},
             {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64"},
              {"LD_LIBRARY_PATH", BuildPath("lib/fake")}});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(ReadFile(dir_ + "/env.txt"), "backend:cudaMallocAsync|platform|cuda_malloc_async\n");
  EXPECT_NE(result.err.find("gpumem: --tensors: PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "
                            "(was 'max_split_size_mb:64')\n"),
            std::string::npos)
      << result.err;
  std::map<std::string, std::string> options;
  auto file = report::TraceFile::Read(
      dir_ + "/run.trace", [&](const report::PacketPosition&, const TracePacket& packet) {
        if (!packet.has_header()) return;
        for (const Option& option : packet.header().option()) {
          options[option.name()] = option.value();
        }
      });
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(options["GPUMEM_TENSORS"],
            "PYTORCH_CUDA_ALLOC_CONF was 'max_split_size_mb:64'; XLA_PYTHON_CLIENT_ALLOCATOR was "
            "unset; TF_GPU_ALLOCATOR was unset");
  EXPECT_EQ(options["PYTORCH_CUDA_ALLOC_CONF"], "backend:cudaMallocAsync");
  EXPECT_EQ(options["TF_GPU_ALLOCATOR"], "cuda_malloc_async");
}

TEST_F(RecordTest, MissingPreloadLibraryIsAnError) {
  const ProgramRun result = Record({"true"}, {{"GPUMEM_LIBRARY", "/nonexistent/libgpumem.so"}});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err,
            "gpumem: error: preload library not found: /nonexistent/libgpumem.so (set "
            "GPUMEM_LIBRARY to its path)\n");
}

TEST_F(RecordTest, SigtermToGpumemReachesTheProgram) {
  const auto start = std::chrono::steady_clock::now();
  const pid_t gpumem = Start({"sleep", "60"}, {});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let it fork and exec
  kill(gpumem, SIGTERM);
  const ProgramRun result = Wait(gpumem);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// -o naming a file that is not a gpumem trace (a source file, an empty file, a FIFO): refused in
// one line before anything runs, the file untouched. A trace there is replaced (see above).
TEST_F(RecordTest, AnExistingFileThatIsNotATraceIsNeverReplaced) {
  const std::string source = "int main() { return 0; }\n";
  std::ofstream(dir_ + "/somefile.c") << source;
  std::ofstream(dir_ + "/empty.trace") << "";
  ASSERT_EQ(mkfifo((dir_ + "/pipe.trace").c_str(), 0600), 0);
  for (const std::string output : {"somefile.c", "empty.trace"}) {
    ExpectRefusedBeforeRunning(output, "exists and is not a gpumem trace, so it is not replaced");
  }
  EXPECT_EQ(ReadFile(dir_ + "/somefile.c"), source);
  EXPECT_TRUE(fs::exists(dir_ + "/empty.trace"));
  ExpectRefusedBeforeRunning("pipe.trace", "not a regular file");
  EXPECT_TRUE(fs::is_fifo(dir_ + "/pipe.trace"));
}

// A trace that could not be written is refused before the program runs, never reported as "the
// program made no CUDA memory call".
TEST_F(RecordTest, AnUnwritableOutputIsRefusedBeforeTheProgramRuns) {
  std::ofstream(dir_ + "/file") << "a file, not a directory";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"missing/run.trace", "(missing: No such file or directory)"},
      {"file/run.trace", "(file: Not a directory)"},
  };
  for (const auto& [output, why] : cases) {
    ExpectRefusedBeforeRunning(output, "cannot write a trace there " + why);
  }
  if (geteuid() == 0) return;  // root writes into any directory
  fs::create_directory(dir_ + "/read-only");
  fs::permissions(dir_ + "/read-only", fs::perms::owner_read | fs::perms::owner_exec);
  for (const std::string output : {"read-only", "read-only/run.trace"}) {
    ExpectRefusedBeforeRunning(output, "cannot write a trace there (read-only: Permission denied)");
  }
}

// Waits up to 20 s for `path` to exist.
bool WaitForFile(const std::string& path) {
  for (int i = 0; i < 2000 && !fs::exists(path); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fs::exists(path);
}

// gpumem's own status: its exit code, or -1 when a signal killed it.
int ExitCodeOfGpumem(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// HUP, INT, QUIT, TERM, USR1 and USR2 sent to gpumem go to the program, and gpumem does not die
// of them: it waits for the program and exits with its status (here the program traps the signal,
// notes it and exits 3; then one that does not trap it: 128+N).
TEST_F(RecordTest, SignalsSentToGpumemArePassedOnAndItWaitsForTheProgram) {
  // posix_spawn passes this process's ignored signals on to gpumem, and gpumem to the program (as
  // a shell does); a test run in the background of a non-interactive shell ignores INT and QUIT.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGQUIT, SIG_DFL);
  const std::vector<std::pair<int, std::string>> signals = {{SIGHUP, "HUP"},   {SIGINT, "INT"},
                                                            {SIGQUIT, "QUIT"}, {SIGTERM, "TERM"},
                                                            {SIGUSR1, "USR1"}, {SIGUSR2, "USR2"}};
  for (const auto& [number, name] : signals) {
    SCOPED_TRACE(name);
    fs::remove(dir_ + "/ready");
    const pid_t gpumem = Start({"/bin/sh", "-c",
                                "trap 'echo " + name + " > got; exit 3' " + name +
                                    "; touch ready; while :; do sleep 0.05; done"},
                               {});
    ASSERT_TRUE(WaitForFile(dir_ + "/ready"));
    kill(gpumem, number);
    EXPECT_EQ(ExitCodeOfGpumem(gpumem), 3);
    EXPECT_EQ(ReadFile(dir_ + "/got"), name + "\n");
  }
  fs::remove(dir_ + "/ready");
  const pid_t gpumem = Start({"/bin/sh", "-c", "touch ready; exec sleep 60"}, {});
  ASSERT_TRUE(WaitForFile(dir_ + "/ready"));
  kill(gpumem, SIGUSR1);
  EXPECT_EQ(ExitCodeOfGpumem(gpumem), 128 + SIGUSR1);
  EXPECT_EQ(ReadFile(dir_ + ".stderr"),
            "gpumem: the program was killed by signal 10 (User defined signal 1)\n"
            "gpumem: no trace written: the program made no CUDA memory call\n");
}

// The ProcessEnd packet of `path` and the pid its header names; fails the test when either is
// missing.
std::pair<ProcessEnd, uint32_t> ReadProcessEnd(const std::string& path,
                                               std::optional<Footer>* footer) {
  auto file = report::TraceFile::Read(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return {};
  EXPECT_TRUE((*file)->process_end().has_value()) << path;
  *footer = (*file)->footer();
  return {(*file)->process_end().value_or(ProcessEnd()), (*file)->header().pid()};
}

// Once the program ended, gpumem appends how it ended to the program's own trace (a ProcessEnd
// packet; the recorder's own bytes untouched), which dump and report show: an exit status, as the
// recorder's footer says it too, and a signal, for a program that left no footer.
TEST_F(RecordTest, HowTheProgramEndedIsAppendedToItsTrace) {
  const std::map<std::string, std::string> fake_cuda = {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}};
  ProgramRun result = Record({"-o", "run.trace", BuildPath("bin/leak_loop")}, fake_cuda);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::optional<Footer> footer;
  auto [end, pid] = ReadProcessEnd(dir_ + "/run.trace", &footer);
  EXPECT_EQ(end.pid(), pid);
  EXPECT_EQ(end.exit_status(), 0);
  EXPECT_EQ(end.signal(), 0);
  ASSERT_TRUE(footer.has_value());
  EXPECT_EQ(footer->exit_status(), end.exit_status());
  ProgramRun report = testing::RunGpumem({"report", dir_ + "/run.trace"});
  EXPECT_NE(report.out.find("\nexit: the program exited with status 0\n"), std::string::npos)
      << report.out;

  // Killed through gpumem once it has made CUDA calls (its first line of output).
  const pid_t gpumem = Start({"-o", "killed.trace", "/bin/sh", "-c", "exec \"$0\" > out",
                              BuildPath("tests/programs/alloc_forever")},
                             fake_cuda);
  for (int i = 0; i < 2000 && (!fs::exists(dir_ + "/out") || fs::is_empty(dir_ + "/out")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(gpumem, SIGUSR1);
  EXPECT_EQ(ExitCodeOfGpumem(gpumem), 128 + SIGUSR1);
  std::tie(end, pid) = ReadProcessEnd(dir_ + "/killed.trace", &footer);
  EXPECT_EQ(end.pid(), pid);
  EXPECT_EQ(end.signal(), SIGUSR1);
  EXPECT_FALSE(end.core_dumped());
  EXPECT_FALSE(footer.has_value());
  const ProgramRun dump = testing::RunGpumem({"dump", dir_ + "/killed.trace"});
  EXPECT_NE(dump.out.find(" process_end pid=" + std::to_string(pid) +
                          " exit_status=0 signal=10 (User defined signal 1) core_dumped=false\n"),
            std::string::npos);
  report = testing::RunGpumem({"report", dir_ + "/killed.trace"});
  EXPECT_NE(
      report.out.find("\nexit: the program was killed by signal 10 (User defined signal 1)\n"),
      std::string::npos)
      << report.out;
}

// The packets of the trace at `path` that `gpumem symbolize` appends (SymbolizedFrame and
// Symbolization), and whether the trace reads whole (framing intact, nothing damaged).
struct SymbolizedPackets {
  int frames = 0;
  int symbolizations = 0;
  bool intact = false;
};
SymbolizedPackets CountSymbolized(const std::string& path) {
  SymbolizedPackets found;
  auto file =
      report::TraceFile::Read(path, [&](const report::PacketPosition&, const TracePacket& packet) {
        found.frames += packet.has_symbolized_frame();
        found.symbolizations += packet.has_symbolization();
      });
  found.intact = file.ok() && !(*file)->end().damaged();
  return found;
}

// Once the program ended, its trace is symbolized in place while the binary is there: a report
// then reads the same when the binary is gone. The summary on stderr gives the peak with its call
// sites, what was never freed, the growth and the failed allocations, then the commands.
TEST_F(RecordTest, TheTraceIsSymbolizedAndSummarizedWhenTheProgramEnds) {
  const std::string binary = dir_ + "/leak_loop";
  fs::copy_file(BuildPath("bin/leak_loop"), binary);
  const ProgramRun result =
      Record({"-o", "run.trace", binary}, {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const SymbolizedPackets packets = CountSymbolized(dir_ + "/run.trace");
  EXPECT_GT(packets.frames, 0);
  EXPECT_EQ(packets.symbolizations, 1);
  EXPECT_TRUE(packets.intact);

  const std::string& err = result.err;
  EXPECT_EQ(err.find("gpumem: trace written to run.trace ("), 0u) << err;
  for (const char* line : {
           "\ngpumem: summary of run.trace:\n",
           "\npeak, device 0 (gpumem fake device): 56.00 MiB (58720256 bytes) at ",
           "  40.00 MiB   71.4%  10 allocations\n      leak_loop.cc:26 in leak_iteration()\n",
           "\nnever freed, device 0 (gpumem fake device): 40.00 MiB (41943040 bytes) in 10 "
           "allocations from 1 call site\n",
           "\ngrowth, device 0 (gpumem fake device): +4.00 MiB/iteration over 10 iterations at "
           "leak_loop.cc:26 in leak_iteration()\n",
           "\nout of memory: never\n",
           "\ngpumem: to see more:\n  gpumem report run.trace\n  gpumem report --growth "
           "run.trace\n  gpumem view run.trace\n",
       }) {
    EXPECT_NE(err.find(line), std::string::npos) << line << "\nin:\n" << err;
  }
  EXPECT_EQ(err.find("warning"), std::string::npos) << err;

  // The report reads no binary now: the same without it.
  const ProgramRun before = testing::RunGpumem({"report", dir_ + "/run.trace"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  ASSERT_TRUE(fs::remove(binary));
  const ProgramRun after = testing::RunGpumem({"report", dir_ + "/run.trace"});
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(after.out, before.out);
  EXPECT_NE(after.out.find("leak_loop.cc:26"), std::string::npos) << after.out;
}

// --no-symbolize leaves the trace as the recorder wrote it (the summary still comes, from the
// binaries); --no-summary prints where the traces went and nothing else.
TEST_F(RecordTest, NoSymbolizeAndNoSummary) {
  const std::map<std::string, std::string> fake_cuda = {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}};
  ProgramRun result =
      Record({"--no-symbolize", "-o", "run.trace", BuildPath("bin/leak_loop")}, fake_cuda);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  SymbolizedPackets packets = CountSymbolized(dir_ + "/run.trace");
  EXPECT_EQ(packets.frames, 0);
  EXPECT_EQ(packets.symbolizations, 0);
  EXPECT_NE(result.err.find("\nnever freed, device 0 (gpumem fake device): 40.00 MiB"),
            std::string::npos)
      << result.err;

  result = Record({"--no-summary", "-o", "run.trace", BuildPath("bin/leak_loop")}, fake_cuda);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_GT(CountSymbolized(dir_ + "/run.trace").frames, 0);
  EXPECT_EQ(result.err.find("gpumem: trace written to run.trace ("), 0u) << result.err;
  EXPECT_EQ(result.err.find('\n'), result.err.size() - 1) << result.err;
}

// A failed allocation is in the summary, and the commands name `report --oom`.
TEST_F(RecordTest, TheSummaryTellsOfFailedAllocations) {
  const ProgramRun result = Record({"-o", "oom.trace", BuildPath("bin/oom_loop")},
                                   {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("\nout of memory: 1 failed allocation, the first a cudaMalloc of "
                            "256.00 MiB (268435456 bytes) on device 0 (gpumem fake device), at "),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("\n  gpumem report --oom oom.trace\n"), std::string::npos)
      << result.err;
  // Recorded without --tensors: how to find the change that makes it fit starts with a recording
  // that has them; with --tensors, advise reads this trace.
  EXPECT_NE(result.err.find("\n  gpumem record --tensors -o run.trace -- <the same command>, then "
                            "gpumem advise --device-memory SIZE run.trace   (what would make it "
                            "fit"),
            std::string::npos)
      << result.err;
  const ProgramRun tensors = Record({"--tensors", "-o", "oom.trace", BuildPath("bin/oom_loop")},
                                    {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}});
  ASSERT_EQ(tensors.exit_code, 0) << tensors.err;
  EXPECT_NE(tensors.err.find("\n  gpumem advise --device-memory SIZE oom.trace   (what would "),
            std::string::npos)
      << tensors.err;
}

// Several processes: a line each, the highest peak first, the combined peak, and the commands
// name the directory.
TEST_F(RecordTest, TheSummaryOfSeveralProcesses) {
  fs::create_directories(dir_ + "/traces");
  const ProgramRun result =
      Record({"-o", "traces", BuildPath("bin/fork")}, {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string& err = result.err;
  EXPECT_NE(err.find("\ngpumem: summary of traces:\n2 processes, the highest peak first:\n  pid "),
            std::string::npos)
      << err;
  const size_t first = err.find(": peak 48.00 MiB on device 0 (gpumem fake device)");
  const size_t second = err.find(": peak 6.00 MiB on device 0 (gpumem fake device)");
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_NE(second, std::string::npos) << err;
  EXPECT_LT(first, second) << err;
  EXPECT_NE(err.find("\ncombined peak, device 0 (gpumem fake device): 50.00 MiB (52428800 bytes), "
                     "2 processes holding memory then\n"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("\n  gpumem report traces\n  gpumem view traces/gpumem-"), std::string::npos)
      << err;
  for (const auto& entry : fs::directory_iterator(dir_ + "/traces")) {
    EXPECT_GT(CountSymbolized(entry.path().string()).frames, 0) << entry.path();
  }
}

// A process the program left running still writes its trace: gpumem does not rename a symbolized
// copy over it (the process would go on writing into the file it replaced), and says so.
TEST_F(RecordTest, ATraceWhoseProcessStillRunsIsNotSymbolized) {
  const ProgramRun result =
      Record({"-o", "run.trace", "/bin/sh", "-c",
              "\"$0\" > out & echo $! > child.pid; while [ ! -s out ]; do sleep 0.05; done",
              BuildPath("tests/programs/alloc_forever")},
             {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}});
  std::string child = ReadFile(dir_ + "/child.pid");
  ASSERT_FALSE(child.empty());
  const pid_t pid = std::stoi(child);
  const bool was_running = kill(pid, 0) == 0;
  kill(pid, SIGKILL);
  ASSERT_TRUE(was_running) << "the left-behind process must still run when gpumem is done";
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(testing::CountLines(result.err, "gpumem: warning: "), 1) << result.err;
  EXPECT_NE(result.err.find("gpumem: warning: run.trace is not symbolized: the process writing it "
                            "still runs (`gpumem symbolize` it once that ended)\n"),
            std::string::npos)
      << result.err;
  for (int i = 0; i < 500 && kill(pid, 0) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // until it is reaped
  }
  EXPECT_EQ(CountSymbolized(dir_ + "/run.trace").frames, 0);
}

// Symbolizing that fails (here at a file-size limit gpumem has and the program lifts for itself)
// leaves the trace as the recorder wrote it, says so in one warning, and the exit status is the
// program's.
TEST_F(RecordTest, AFailedSymbolizationLeavesTheTraceAndTheExitStatus) {
  const std::vector<std::string> program = {
      "/bin/sh", "-c", "ulimit -S -f unlimited; \"$0\"; exit 3", BuildPath("bin/leak_loop")};
  const std::map<std::string, std::string> fake_cuda = {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}};
  std::vector<std::string> args = {"--no-symbolize", "-o", "run.trace"};
  args.insert(args.end(), program.begin(), program.end());
  ProgramRun result = Record(args, fake_cuda);
  ASSERT_EQ(result.exit_code, 3) << result.err;
  const uintmax_t unsymbolized = fs::file_size(dir_ + "/run.trace");

  // Room for the trace as recorded, not for the frames after it (some hundred bytes).
  args.erase(args.begin());
  pid_t gpumem;
  {
    const testing::FileSizeLimit limit(unsymbolized + 64);
    gpumem = Start(args, fake_cuda);
  }
  result = Wait(gpumem);
  EXPECT_EQ(result.exit_code, 3) << result.err;
  EXPECT_EQ(testing::CountLines(result.err, "gpumem: warning: "), 1) << result.err;
  EXPECT_NE(result.err.find("gpumem: warning: not symbolized: writing run.trace: File too large; "
                            "run.trace is unchanged\n"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("gpumem: trace written to run.trace ("), std::string::npos)
      << result.err;
  const SymbolizedPackets packets = CountSymbolized(dir_ + "/run.trace");
  EXPECT_EQ(packets.frames + packets.symbolizations, 0);
  EXPECT_TRUE(packets.intact);
  EXPECT_LE(fs::file_size(dir_ + "/run.trace"), unsymbolized + 64);
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
  // The summary still comes, from the binaries.
  EXPECT_NE(result.err.find("\nnever freed, device 0 (gpumem fake device): 40.00 MiB"),
            std::string::npos)
      << result.err;
}

}  // namespace
}  // namespace gpumem
