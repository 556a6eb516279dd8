// Runs a program the way a user would run it under gpumem: LD_PRELOAD of the built libgpumem.so,
// the fake CUDA on LD_LIBRARY_PATH, a chosen GPUMEM_OUTPUT.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace gpumem::testing {

inline std::string BuildPath(const std::string& relative) {
  return std::string(GPUMEM_BUILD_DIR) + "/" + relative;
}
inline std::string SourcePath(const std::string& relative) {
  return std::string(GPUMEM_SOURCE_DIR) + "/" + relative;
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

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct ProgramRun {
  int exit_code = -1;  // 128 + signal when killed
  std::string out;
  std::string err;
};

// The environment of this test, plus `overrides` (an empty value removes the variable).
inline std::vector<std::string> Environment(const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text = *entry;
    size_t equals = text.find('=');
    if (equals != std::string::npos) variables[text.substr(0, equals)] = text.substr(equals + 1);
  }
  variables.erase("GPUMEM_SESSION_PID");  // each run is a session of its own
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

// The environment that records `output` with the built preload library and the fake CUDA.
inline std::map<std::string, std::string> RecordingEnvironment(const std::string& output) {
  return {{"LD_PRELOAD", BuildPath("lib/libgpumem.so")},
          {"LD_LIBRARY_PATH", BuildPath("lib/fake")},
          {"GPUMEM_OUTPUT", output}};
}

inline pid_t Spawn(const std::vector<std::string>& argv,
                   const std::map<std::string, std::string>& overrides, const std::string& out_path,
                   const std::string& err_path) {
  std::vector<std::string> environment = Environment(overrides);
  std::vector<char*> env_pointers;
  for (std::string& entry : environment) env_pointers.push_back(entry.data());
  env_pointers.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> arg_pointers;
  for (std::string& arg : args) arg_pointers.push_back(arg.data());
  arg_pointers.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid = -1;
  if (posix_spawnp(&pid, arg_pointers[0], &actions, nullptr, arg_pointers.data(),
                   env_pointers.data()) != 0) {
    pid = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

inline int WaitExitCode(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline ProgramRun RunProgram(const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& overrides) {
  TempDir logs;
  ProgramRun run;
  pid_t pid = Spawn(argv, overrides, logs.File("out"), logs.File("err"));
  if (pid < 0) return run;
  run.exit_code = WaitExitCode(pid);
  run.out = ReadFile(logs.File("out"));
  run.err = ReadFile(logs.File("err"));
  return run;
}

}  // namespace gpumem::testing
