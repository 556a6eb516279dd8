// `gpumem record`: runs a program with the preload library (LD_PRELOAD) and tells where its traces
// went. The recording itself happens inside the program (interpose/, core/); this only sets up the
// environment, stands between the program and the signals meant for it, and passes on its exit
// status.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/commands.h"
#include "report/printable.h"
#include "report/tensor_mode.h"

namespace gpumem::report {

const char kRecordUsage[] =
    R"usage(usage: gpumem record [-o PATH] [--tensors] [--] PROGRAM [ARGS...]

Runs PROGRAM under gpumem and records its GPU memory operations. Exits with PROGRAM's exit
status (128+N if a signal N killed it); SIGINT and SIGTERM sent to gpumem are passed on.

  -o, --output PATH  where the trace goes (default: gpumem-<host>-<pid>.trace here).
                     A process PROGRAM starts writes PATH's name with -<pid> added before
                     .trace; if PATH is a directory, every process writes
                     PATH/gpumem-<host>-<pid>.trace. An old file at PATH is deleted first.
  --tensors          make the framework's allocator ask the driver for every tensor, so
                     the trace sees tensors instead of cached segments (what
                     `gpumem whatif` replays): PyTorch backend:cudaMallocAsync merged
                     into PYTORCH_CUDA_ALLOC_CONF, JAX XLA_PYTHON_CLIENT_ALLOCATOR=platform,
                     TensorFlow TF_GPU_ALLOCATOR=cuda_malloc_async. The trace header
                     records what was changed (GPUMEM_TENSORS).
  -h, --help         print this text

The preload library is <gpumem's dir>/../lib/libgpumem.so, or GPUMEM_LIBRARY if set.
No trace is written if the program makes no CUDA call.
)usage";

namespace {

namespace fs = std::filesystem;

// The running program, for the signal handler; 0 while there is none.
std::atomic<pid_t> running_child{0};

// SIGINT from a terminal already went to the program too (same process group): pass on only
// signals sent to gpumem alone (kill, a job scheduler), or the program would see them twice.
void ForwardSignal(int signal, siginfo_t* info, void*) {
  const pid_t child = running_child.load();
  if (child > 0 && info->si_code != SI_KERNEL) kill(child, signal);
}

void InstallForwarding() {
  struct sigaction action = {};
  action.sa_sigaction = ForwardSignal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

std::string HumanSize(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, bytes == 1 ? " byte" : " bytes");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, units[unit]);
}

// The preload library: GPUMEM_LIBRARY, else lib/libgpumem.so beside gpumem's bin/ directory.
std::string PreloadLibrary() {
  if (const char* path = std::getenv("GPUMEM_LIBRARY"); path != nullptr && *path != '\0') {
    return path;
  }
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error) return "";
  return (self.parent_path() / ".." / "lib" / "libgpumem.so").lexically_normal().string();
}

// Where the traces of one run go, and how to find them afterwards.
struct OutputPlan {
  std::string env_value;  // GPUMEM_OUTPUT for the program, absolute
  bool directory = false;
  bool pid_in_name = false;  // default name: the program's pid is only known after fork()
  std::string shown;         // the path as the user gave it, for messages
  // Files of processes the program starts: in `dir`, named prefix + digits + suffix.
  fs::path dir;
  std::string prefix;
  std::string suffix;
};

std::string DefaultName(const std::string& host, pid_t pid) {
  return absl::StrCat("gpumem-", host, "-", pid, ".trace");
}

// For a trace file X.trace, processes the program starts write X-<pid>.trace beside it; for a
// PATH without that suffix, PATH-<pid> (the recorder's naming rule).
void NameChildren(OutputPlan* plan) {
  const fs::path path(plan->env_value);
  const std::string name = path.filename().string();
  plan->dir = path.parent_path();
  plan->suffix = absl::EndsWith(name, ".trace") ? ".trace" : "";
  plan->prefix = name.substr(0, name.size() - plan->suffix.size()) + "-";
}

// Whether `name` is prefix + pid + suffix.
bool MatchesChildName(const std::string& name, const OutputPlan& plan) {
  if (name.size() <= plan.prefix.size() + plan.suffix.size() ||
      !absl::StartsWith(name, plan.prefix) || !absl::EndsWith(name, plan.suffix)) {
    return false;
  }
  const std::string digits =
      name.substr(plan.prefix.size(), name.size() - plan.prefix.size() - plan.suffix.size());
  return std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit);
}

// Matching files now, with their modification time, to tell new traces from old ones.
std::map<std::string, fs::file_time_type> ListTraces(const OutputPlan& plan) {
  std::map<std::string, fs::file_time_type> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(plan.dir, error)) {
    const std::string name = entry.path().filename().string();
    if (MatchesChildName(name, plan)) found[name] = entry.last_write_time(error);
  }
  return found;
}

// The child side of fork(): never returns. Reports an exec failure's errno through `report_fd`.
[[noreturn]] void ExecProgram(const std::vector<std::string>& program, const std::string& library,
                              const OutputPlan& plan, const std::string& host,
                              const std::vector<EnvironmentChange>& changes, int report_fd) {
  for (const EnvironmentChange& change : changes) {
    setenv(change.name.c_str(), change.after.c_str(), 1);
  }
  if (!changes.empty()) setenv("GPUMEM_TENSORS", DescribeChanges(changes).c_str(), 1);
  std::string preload = library;
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old != '\0') {
    preload = absl::StrCat(library, ":", old);
  }
  setenv("LD_PRELOAD", preload.c_str(), 1);
  // gpumem's Python observer (interpose/python/sitecustomize.py), which finds the line that keeps
  // a tensor alive, lies next to the library; it runs the sitecustomize it shadows itself.
  const fs::path observer = fs::path(library).parent_path() / "python";
  std::error_code missing;
  if (fs::exists(observer / "sitecustomize.py", missing)) {
    std::string python_path = observer.string();
    if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0') {
      python_path = absl::StrCat(python_path, ":", old);
    }
    setenv("PYTHONPATH", python_path.c_str(), 1);
  }
  std::string output = plan.env_value;
  if (plan.pid_in_name) output = (plan.dir / DefaultName(host, getpid())).string();
  setenv("GPUMEM_OUTPUT", output.c_str(), 1);

  std::vector<char*> argv;
  for (const std::string& arg : program) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  const int error = errno;
  ssize_t ignored = write(report_fd, &error, sizeof(error));
  (void)ignored;
  _exit(127);
}

// Runs the program and returns its wait status; nullopt (error printed) if it could not start.
std::optional<int> RunProgram(const std::vector<std::string>& program, const std::string& library,
                              const OutputPlan& plan, const std::string& host,
                              const std::vector<EnvironmentChange>& changes, pid_t* pid_out) {
  int exec_report[2];
  // Closed by a successful exec; an errno written into it means exec failed.
  if (pipe2(exec_report, O_CLOEXEC) != 0) {
    PrintError(absl::StrCat("record: pipe: ", std::strerror(errno)));
    return std::nullopt;
  }
  InstallForwarding();
  const pid_t pid = fork();
  if (pid < 0) {
    PrintError(absl::StrCat("record: fork: ", std::strerror(errno)));
    return std::nullopt;
  }
  if (pid == 0) {
    close(exec_report[0]);
    ExecProgram(program, library, plan, host, changes, exec_report[1]);
  }
  running_child.store(pid);
  *pid_out = pid;
  close(exec_report[1]);
  int exec_errno = 0;
  ssize_t got;
  do {
    got = read(exec_report[0], &exec_errno, sizeof(exec_errno));
  } while (got < 0 && errno == EINTR);
  close(exec_report[0]);

  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  running_child.store(0);
  if (got == static_cast<ssize_t>(sizeof(exec_errno))) {
    PrintError(absl::StrCat("cannot execute '", program[0], "': ", std::strerror(exec_errno)));
    return std::nullopt;
  }
  return status;
}

}  // namespace

int RunRecord(const std::vector<std::string>& args) {
  std::string output;
  bool tensors = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-o" || arg == "--output") {
      if (i + 1 == args.size()) {
        return UsageError(absl::StrCat("record: ", arg, " needs a path"), "record");
      }
      output = args[++i];
    } else if (absl::StartsWith(arg, "--output=")) {
      output = arg.substr(std::strlen("--output="));
    } else if (arg == "--tensors") {
      tensors = true;
    } else if (arg == "-h" || arg == "--help") {
      std::fputs(kRecordUsage, stdout);
      return kExitOk;
    } else if (absl::StartsWith(arg, "-")) {
      return UsageError(absl::StrCat("record: unknown flag '", arg, "'"), "record");
    } else {
      break;  // the program: everything from here on is its command line
    }
  }
  const std::vector<std::string> program(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (program.empty()) return UsageError("record: no program given", "record");

  std::error_code error;
  const std::string library = PreloadLibrary();
  if (library.empty() || access(library.c_str(), R_OK) != 0) {
    PrintError(absl::StrCat("preload library not found: ", library.empty() ? "?" : library,
                            " (set GPUMEM_LIBRARY to its path)"));
    return kExitBadInput;
  }
  const std::string host = HostName();
  OutputPlan plan;
  if (output.empty()) {
    plan.pid_in_name = true;  // completed by NameAfterPid() once the program's pid is known
    plan.dir = fs::current_path(error);
  } else if (fs::is_directory(output, error)) {
    plan.directory = true;
    plan.shown = output;
    plan.env_value = fs::absolute(output, error).string();
    plan.dir = plan.env_value;
    plan.prefix = absl::StrCat("gpumem-", host, "-");
    plan.suffix = ".trace";
  } else {
    // An old trace at PATH must never pass for the new one.
    if (unlink(output.c_str()) != 0 && errno != ENOENT) {
      PrintError(absl::StrCat(output, ": cannot delete the old trace: ", std::strerror(errno)));
      return kExitBadInput;
    }
    plan.shown = output;
    plan.env_value = fs::absolute(output, error).string();
    NameChildren(&plan);
  }
  // With the default name, every name this run can produce contains a pid not yet running.
  const std::map<std::string, fs::file_time_type> before =
      plan.pid_in_name ? std::map<std::string, fs::file_time_type>{} : ListTraces(plan);

  std::vector<EnvironmentChange> changes;
  if (tensors) {
    changes = TensorLevelEnvironment([](const std::string& name) -> std::optional<std::string> {
      const char* value = std::getenv(name.c_str());
      if (value == nullptr) return std::nullopt;
      return std::string(value);
    });
    for (const EnvironmentChange& change : changes) {
      std::fprintf(
          stderr, "gpumem: --tensors: %s=%s (was %s)\n", change.name.c_str(),
          Printable(change.after).c_str(),
          change.before ? absl::StrCat("'", Printable(*change.before), "'").c_str() : "unset");
    }
  }
  pid_t pid = 0;
  const std::optional<int> status =
      RunProgram(program, fs::absolute(library, error).string(), plan, host, changes, &pid);
  if (!status) return kExitBadInput;
  if (plan.pid_in_name) {
    plan.shown = DefaultName(host, pid);
    plan.env_value = (plan.dir / plan.shown).string();
    NameChildren(&plan);
  }

  // The program's own trace first, then those of the processes it started, by name.
  std::vector<std::pair<std::string, fs::path>> traces;  // (as shown, actual path)
  if (!plan.directory && fs::is_regular_file(plan.env_value, error)) {
    traces.emplace_back(plan.shown, plan.env_value);
  }
  const fs::path shown_dir =
      plan.directory ? fs::path(plan.shown) : fs::path(plan.shown).parent_path();
  for (const auto& [name, modified] : ListTraces(plan)) {
    auto old = before.find(name);
    if (old != before.end() && old->second == modified) continue;  // not from this run
    traces.emplace_back((shown_dir / name).string(), plan.dir / name);
  }
  if (plan.directory) {  // the program's own trace first here too
    const std::string own = DefaultName(host, pid);
    std::stable_partition(traces.begin(), traces.end(),
                          [&](const auto& trace) { return trace.second.filename() == own; });
  }

  if (WIFSIGNALED(*status)) {
    std::fprintf(stderr, "gpumem: the program was killed by signal %d (%s)\n", WTERMSIG(*status),
                 strsignal(WTERMSIG(*status)));
  }
  if (traces.empty()) {
    std::fprintf(stderr, "gpumem: no trace written: the program made no CUDA memory call\n");
  }
  for (const auto& [shown, actual] : traces) {
    std::fprintf(stderr, "gpumem: trace written to %s (%s)\n", Printable(shown).c_str(),
                 HumanSize(fs::file_size(actual, error)).c_str());
  }
  // Like a shell: the program's own status, 128+N for a signal.
  if (WIFSIGNALED(*status)) return 128 + WTERMSIG(*status);
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : kExitBadInput;
}

}  // namespace gpumem::report
