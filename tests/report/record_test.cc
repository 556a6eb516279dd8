// `gpumem record` as a user runs it. The programs here make no CUDA call, so the recorder writes
// nothing; where a test needs a trace to appear, a shell script writes the file the recorder would
// have written, at the GPUMEM_OUTPUT it was given, to check naming and reporting.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "report/trace_file.h"
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

TEST_F(RecordTest, AProgramThatCannotBeExecutedIsAnError) {
  ProgramRun result = Record({"--", "no-such-program-gpumem-test"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err,
            "gpumem: error: cannot execute 'no-such-program-gpumem-test': No such file or "
            "directory\n");
  result = Record({"--", dir_});  // a directory
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err, "gpumem: error: cannot execute '" + dir_ + "': Permission denied\n");
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
  std::ofstream(dir_ + "/run.trace") << "an old trace";
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

}  // namespace
}  // namespace gpumem
