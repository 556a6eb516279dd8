// What the tests share: paths into the source and build trees, temporary files and directories,
// reading a file back, running a program the way a user would (under gpumem: LD_PRELOAD of the
// built libgpumem.so, the fake CUDA on LD_LIBRARY_PATH, a chosen GPUMEM_OUTPUT; or the built
// gpumem command itself) with its exit code, stdout and stderr, and trace packets framed as the
// recorder frames them.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"

extern char** environ;

namespace gpumem::testing {

inline std::string BuildPath(const std::string& relative) {
  return std::string(GPUMEM_BUILD_DIR) + "/" + relative;
}
inline std::string SourcePath(const std::string& relative) {
  return std::string(GPUMEM_SOURCE_DIR) + "/" + relative;
}

// A path of its own for each test and process: ctest may run test cases in parallel.
inline std::string UniqueTempPath(const std::string& suffix) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  return ::testing::TempDir() + "/" + test->test_suite_name() + "." + test->name() + "." +
         std::to_string(getpid()) + suffix;
}

// A fresh empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpumem-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A test program's `# line: NAME` (Python) or `// line: NAME` (C++) markers after code: NAME ->
// line number, so that a test names the lines it expects by marker and an edit of the program
// needs no edit of the test.
inline std::map<std::string, uint32_t> MarkedLines(const std::string& path) {
  std::map<std::string, uint32_t> markers;
  std::ifstream in(path);
  uint32_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    for (const std::string marker : {"# line: ", "// line: "}) {
      const size_t at = line.find(marker);
      if (at != std::string::npos && at > 0) markers[line.substr(at + marker.size())] = number;
    }
  }
  return markers;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// How many lines of `text` begin with `prefix`.
inline int CountLines(const std::string& text, const std::string& prefix) {
  int count = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (text.compare(at, prefix.size(), prefix) == 0) ++count;
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return count;
}

struct ProgramRun {
  int exit_code = -1;  // 128 + signal when killed
  std::string out;
  std::string err;
  int spawn_error = 0;     // the posix_spawn error when the program could not be started
  bool timed_out = false;  // RunProgramWithin(): still running at the limit, and killed
};

// The environment of this test, "NAME=value" each, with `overrides` applied (an empty value
// removes the variable).
inline std::vector<std::string> CurrentEnvironment(
    const std::map<std::string, std::string>& overrides = {}) {
  std::map<std::string, std::string> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text = *entry;
    size_t equals = text.find('=');
    if (equals != std::string::npos) variables[text.substr(0, equals)] = text.substr(equals + 1);
  }
  for (const auto& [name, value] : overrides) {
    if (value.empty()) {
      variables.erase(name);
    } else {
      variables[name] = value;
    }
  }
  std::vector<std::string> result;
  for (const auto& [name, value] : variables) result.push_back(name + "=" + value);
  return result;
}

// The environment of this test, plus `overrides` (an empty value removes the variable), for a
// program that is a recording session of its own.
inline std::vector<std::string> Environment(const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> all = overrides;
  all.emplace("GPUMEM_SESSION_PID", "");  // each run is a session of its own
  return CurrentEnvironment(all);
}

// The environment that records `output` with the built preload library and the fake CUDA.
inline std::map<std::string, std::string> RecordingEnvironment(const std::string& output) {
  return {{"LD_PRELOAD", BuildPath("lib/libgpumem.so")},
          {"LD_LIBRARY_PATH", BuildPath("lib/fake")},
          {"GPUMEM_OUTPUT", output}};
}

// Where a started program's stdout and stderr go and where it starts: an empty path leaves the
// stream as this process's, an empty working_dir leaves it in this directory.
struct SpawnOptions {
  std::string out_path;
  std::string err_path;
  std::string working_dir;
};

// Starts `argv` (argv[0] searched on PATH when it has no slash) with exactly `environment`
// ("NAME=value" each). Returns its pid, or -1 with the posix_spawn error in *error (when given).
inline pid_t Spawn(const std::vector<std::string>& argv,
                   const std::vector<std::string>& environment, const SpawnOptions& options,
                   int* error = nullptr) {
  std::vector<std::string> env = environment;
  std::vector<char*> env_pointers;
  for (std::string& entry : env) env_pointers.push_back(entry.data());
  env_pointers.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> arg_pointers;
  for (std::string& arg : args) arg_pointers.push_back(arg.data());
  arg_pointers.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!options.working_dir.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, options.working_dir.c_str());
  }
  if (!options.out_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, options.out_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  if (!options.err_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 2, options.err_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  pid_t pid = -1;
  const int result = posix_spawnp(&pid, arg_pointers[0], &actions, nullptr, arg_pointers.data(),
                                  env_pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != nullptr) *error = result;
  return result == 0 ? pid : -1;
}

// Starts `argv` with this test's environment plus `overrides` (see Environment), stdout and
// stderr to the files named.
inline pid_t Spawn(const std::vector<std::string>& argv,
                   const std::map<std::string, std::string>& overrides, const std::string& out_path,
                   const std::string& err_path) {
  return Spawn(argv, Environment(overrides), SpawnOptions{out_path, err_path, ""});
}

inline int WaitExitCode(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs `argv` with exactly `environment` to its end; stdout and stderr go through files (no pipe
// deadlocks).
inline ProgramRun RunProgramWithEnvironment(const std::vector<std::string>& argv,
                                            const std::vector<std::string>& environment) {
  TempDir logs;
  ProgramRun run;
  pid_t pid = Spawn(argv, environment, SpawnOptions{logs.File("out"), logs.File("err"), ""},
                    &run.spawn_error);
  if (pid < 0) return run;
  run.exit_code = WaitExitCode(pid);
  run.out = ReadFile(logs.File("out"));
  run.err = ReadFile(logs.File("err"));
  return run;
}

// Like RunProgramWithEnvironment(), but a program still running after `limit` is killed (SIGKILL)
// and reported timed_out: a program that hangs fails its test instead of blocking the test run.
// `options` may name where stdout and stderr go (e.g. /dev/full; out or err then stays empty).
inline ProgramRun RunProgramWithin(std::chrono::milliseconds limit,
                                   const std::vector<std::string>& argv,
                                   const std::vector<std::string>& environment,
                                   SpawnOptions options = {}) {
  TempDir logs;
  const bool own_out = options.out_path.empty();
  const bool own_err = options.err_path.empty();
  if (own_out) options.out_path = logs.File("out");
  if (own_err) options.err_path = logs.File("err");
  ProgramRun run;
  const pid_t pid = Spawn(argv, environment, options, &run.spawn_error);
  if (pid < 0) return run;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      run.timed_out = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    usleep(10'000);
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (own_out) run.out = ReadFile(logs.File("out"));
  if (own_err) run.err = ReadFile(logs.File("err"));
  return run;
}

// Runs `argv` with this test's environment plus `overrides` (see Environment).
inline ProgramRun RunProgram(const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& overrides) {
  return RunProgramWithEnvironment(argv, Environment(overrides));
}

// Runs `argv` with this test's environment as it is.
inline ProgramRun RunProgram(const std::vector<std::string>& argv) {
  return RunProgramWithEnvironment(argv, CurrentEnvironment());
}

// This process's soft file-size limit, for the programs it starts, until destroyed.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    struct rlimit limited = saved_;
    limited.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() { setrlimit(RLIMIT_FSIZE, &saved_); }

 private:
  struct rlimit saved_;
};

// The built `gpumem` with `args`, symbols found only where the trace recorded them (no
// GPUMEM_SYMBOL_PATH from the environment).
inline ProgramRun RunGpumem(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem")};
  argv.insert(argv.end(), args.begin(), args.end());
  ProgramRun run = RunProgram(argv, {{"GPUMEM_SYMBOL_PATH", ""}});
  EXPECT_EQ(run.spawn_error, 0) << argv[0];
  return run;
}

// Protobuf base-128 varint.
inline std::string Varint(uint64_t value) {
  std::string out;
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>((value & 0x7F) | 0x80));
  out.push_back(static_cast<char>(value));
  return out;
}

// A packet as the recorder frames it: field 1 of `Trace`.
inline std::string Framed(const TracePacket& packet) {
  const std::string body = packet.SerializeAsString();
  return "\x0A" + Varint(body.size()) + body;
}

// `packets` framed one after another; with `offsets`, where each of them starts.
inline std::string FramedAll(const std::vector<TracePacket>& packets,
                             std::vector<uint64_t>* offsets = nullptr) {
  std::string bytes;
  for (const TracePacket& packet : packets) {
    if (offsets != nullptr) offsets->push_back(bytes.size());
    bytes += Framed(packet);
  }
  return bytes;
}

// The header the packet-level tests start from: process 4242 on "testhost", format 1 unless told.
inline TracePacket HeaderPacket(uint32_t format_version = 1) {
  TracePacket packet;
  packet.mutable_header()->set_format_version(format_version);
  packet.mutable_header()->set_host("testhost");
  packet.mutable_header()->set_pid(4242);
  return packet;
}

// The footer of a clean exit after `events` events.
inline TracePacket FooterPacket(uint64_t events) {
  TracePacket packet;
  packet.mutable_footer()->set_events(events);
  packet.mutable_footer()->set_clean_exit(true);
  return packet;
}

}  // namespace gpumem::testing
