// `gpumem record`: runs a program with the preload library (LD_PRELOAD) and tells where its traces
// went. The recording itself happens inside the program (interpose/, core/); this only sets up the
// environment, stands between the program and the signals meant for it, and passes on its exit
// status. Once the program ended, it symbolizes the traces while the binaries are certainly there
// (report/cli/symbolize_file.h) and prints a short summary (report/analysis/run_summary.h).
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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/trace.pb.h"
#include "core/trace_reader.h"
#include "report/allocator/tensor_mode.h"
#include "report/analysis/process_report.h"
#include "report/analysis/run_summary.h"
#include "report/cli/commands.h"
#include "report/cli/flags.h"
#include "report/cli/output_file.h"
#include "report/cli/symbolize_file.h"
#include "report/format/printable.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

namespace {

constexpr char kSynopsis[] =
    R"usage(usage: gpumem record [-o PATH] [--tensors] [--no-symbolize] [--no-summary] [--]
                     PROGRAM [ARGS...]

Runs PROGRAM under gpumem and records its GPU memory operations. Once it ended, each trace it
wrote is symbolized in place (as `gpumem symbolize` does), so that reports read no binary, and a
short summary goes to stderr: per device the peak and its largest call sites, what was never
freed, what grows every iteration, failed allocations, and the commands to see more.

)usage";

constexpr char kEpilogue[] = R"usage(
HUP, INT, QUIT, TERM, USR1 and USR2 sent to gpumem are passed on to PROGRAM (one from the
terminal already reached it), and gpumem waits for PROGRAM to end. How it ended (exit status,
or the signal that killed it) is appended to its trace.

The preload library is <gpumem's dir>/../lib/libgpumem.so, or GPUMEM_LIBRARY if set.
No trace is written if the program makes no CUDA call.

A trace that cannot be symbolized (a full disk, a file-size limit) is left as it was, with one
warning line; a trace of a process still running is not symbolized. Neither changes the exit
status.

Exit status: PROGRAM's (128+N if signal N killed it); 127 PROGRAM not found, 126 not executable;
2 bad usage, or an output PATH refused.
)usage";

struct Options {
  std::string output;  // empty: gpumem-<host>-<pid>.trace here
  bool tensors = false;
  bool no_symbolize = false;
  bool no_summary = false;
};

// The first argument that is not a flag starts the program's own command line.
CommandLine RecordCommandLine(Options* options) {
  return CommandLine{
      .command = "record",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 21,
      .flags =
          {
              OutputFlag({"-o", "--output"}, "PATH",
                         "where the trace goes (default: gpumem-<host>-<pid>.trace here).\n"
                         "A process PROGRAM starts writes PATH's name with -<pid> added before\n"
                         ".trace; if PATH is a directory, every process writes\n"
                         "PATH/gpumem-<host>-<pid>.trace. The directory must exist and be\n"
                         "writable, and an existing file at PATH is replaced only if it is a\n"
                         "gpumem trace; else nothing runs (exit 2).",
                         &options->output),
              Switch({"--tensors"},
                     "make the framework's allocator ask the driver for every tensor, so\n"
                     "the trace sees tensors instead of cached segments (what\n"
                     "`gpumem whatif` replays): PyTorch backend:cudaMallocAsync merged\n"
                     "into PYTORCH_CUDA_ALLOC_CONF, JAX XLA_PYTHON_CLIENT_ALLOCATOR=platform,\n"
                     "TensorFlow TF_GPU_ALLOCATOR=cuda_malloc_async. The trace header\n"
                     "records what was changed (GPUMEM_TENSORS).",
                     &options->tensors),
              Switch({"--no-symbolize"},
                     "leave the traces unsymbolized: reports then resolve the frames with\n"
                     "the binaries found where they read the trace (`gpumem symbolize`\n"
                     "does it later); the summary still comes, resolved the same way",
                     &options->no_symbolize),
              Switch({"--no-summary"}, "print no summary, only where the traces went",
                     &options->no_summary),
          },
      .positional_ends_flags = true,
  };
}

namespace fs = std::filesystem;

// The signals gpumem passes on to the program; while it runs they do not end gpumem, which waits
// for the program and exits with its status.
constexpr int kForwardedSignals[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};

// The running program, for the signal handler; 0 while there is none.
std::atomic<pid_t> running_child{0};

// A terminal's SIGINT, SIGQUIT and SIGHUP (si_code SI_KERNEL) already went to the program too (same
// process group): pass on only signals sent to gpumem alone (kill, a job scheduler), or the program
// would see them twice.
void ForwardSignal(int signal, siginfo_t* info, void*) {
  const int saved_errno = errno;  // the interrupted code may be about to read it
  const pid_t child = running_child.load();
  if (child > 0 && info->si_code != SI_KERNEL) kill(child, signal);
  errno = saved_errno;
}

// Signals gpumem and the program share: forwarded by gpumem, and in the program as gpumem found
// them (a signal ignored when gpumem started, as under nohup, stays ignored in both).
class SignalForwarding {
 public:
  // Blocks the forwarded signals (until Start()) and installs the handler.
  SignalForwarding() {
    sigemptyset(&handled_);
    sigset_t forwarded;
    sigemptyset(&forwarded);
    for (int signal : kForwardedSignals) sigaddset(&forwarded, signal);
    sigprocmask(SIG_BLOCK, &forwarded, &mask_at_start_);
    struct sigaction action = {};
    action.sa_sigaction = ForwardSignal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (int signal : kForwardedSignals) {
      struct sigaction before;
      sigaction(signal, nullptr, &before);
      if (before.sa_handler == SIG_IGN) continue;
      sigaction(signal, &action, nullptr);
      sigaddset(&handled_, signal);
    }
  }
  // Once the program has ended, gpumem's own dispositions and mask are as they were at its start:
  // a Ctrl-C during the symbolization and summary that follow stops gpumem (the trace is replaced
  // only by a rename, so it is left whole).
  ~SignalForwarding() {
    running_child.store(0);
    for (int number : kForwardedSignals) {
      if (sigismember(&handled_, number)) ::signal(number, SIG_DFL);
    }
    sigprocmask(SIG_SETMASK, &mask_at_start_, nullptr);
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;
  // In the parent, once running_child is set: signals that came meanwhile are forwarded now.
  void Start() const { sigprocmask(SIG_SETMASK, &mask_at_start_, nullptr); }
  // In the child, before exec: the program's dispositions and mask as gpumem's were at its start.
  void RestoreForProgram() const {
    for (int number : kForwardedSignals) {
      if (sigismember(&handled_, number)) ::signal(number, SIG_DFL);
    }
    RestoreFileSizeSignal();
    sigprocmask(SIG_SETMASK, &mask_at_start_, nullptr);
  }

 private:
  sigset_t mask_at_start_;
  sigset_t handled_;
};

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

// 0 if this process can create files in `dir`, else the errno that says why not.
int DirectoryNotWritable(const std::string& dir) {
  struct stat info;
  if (stat(dir.c_str(), &info) != 0) return errno;
  if (!S_ISDIR(info.st_mode)) return ENOTDIR;
  return access(dir.c_str(), W_OK | X_OK) == 0 ? 0 : errno;
}

absl::Status Refuse(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(why, "; the program was not run"));
}

// Where the traces go (-o `output`; the current directory when empty), checked before anything
// runs: the directory must be writable, and a file at `output` is replaced only if it is a gpumem
// trace (an earlier run's, which must never pass for the new one).
absl::StatusOr<OutputPlan> PlanOutput(const std::string& output, const std::string& host) {
  OutputPlan plan;
  std::error_code error;
  if (output.empty()) {
    plan.pid_in_name = true;  // completed once the program's pid is known
    plan.dir = fs::current_path(error);
    if (const int why = DirectoryNotWritable(plan.dir.string()); why != 0) {
      return Refuse(
          absl::StrCat("cannot write a trace in the current directory: ", std::strerror(why)));
    }
    return plan;
  }
  plan.shown = output;
  plan.env_value = fs::absolute(output, error).string();
  struct stat info;
  const bool exists = stat(output.c_str(), &info) == 0;
  const std::string dir =
      exists && S_ISDIR(info.st_mode) ? output : fs::path(output).parent_path().string();
  if (const int why = DirectoryNotWritable(dir.empty() ? "." : dir); why != 0) {
    return Refuse(absl::StrCat(output, ": cannot write a trace there (", dir.empty() ? "." : dir,
                               ": ", std::strerror(why), ")"));
  }
  if (exists && S_ISDIR(info.st_mode)) {
    plan.directory = true;
    plan.dir = plan.env_value;
    plan.prefix = absl::StrCat("gpumem-", host, "-");
    plan.suffix = ".trace";
    return plan;
  }
  NameChildren(&plan);
  if (!exists) return plan;
  if (!S_ISREG(info.st_mode)) return Refuse(absl::StrCat(output, ": not a regular file"));
  if (!IsGpumemTrace(output)) {
    return Refuse(
        absl::StrCat(output, ": exists and is not a gpumem trace, so it is not replaced"));
  }
  if (unlink(output.c_str()) != 0) {
    return Refuse(absl::StrCat(output, ": cannot delete the old trace: ", std::strerror(errno)));
  }
  return plan;
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

// Waits for `pid` to end and returns its wait status. running_child is cleared before the process
// is reaped, so that a forwarded signal never reaches another process given the same pid.
int WaitForExit(pid_t pid) {
  siginfo_t info;
  while (waitid(P_PID, pid, &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  running_child.store(0);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// How the program ran.
struct ProgramRun {
  pid_t pid = 0;
  int status = 0;      // waitpid's
  int exec_errno = 0;  // not 0: it could not be executed, and never ran
};

// Runs the program to its end, passing on the signals sent to gpumem meanwhile.
absl::StatusOr<ProgramRun> RunProgram(const std::vector<std::string>& program,
                                      const std::string& library, const OutputPlan& plan,
                                      const std::string& host,
                                      const std::vector<EnvironmentChange>& changes) {
  int exec_report[2];
  // Closed by a successful exec; an errno written into it means exec failed.
  if (pipe2(exec_report, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("record: pipe: ", std::strerror(errno)));
  }
  const SignalForwarding signals;
  ProgramRun run;
  run.pid = fork();
  if (run.pid < 0) {
    const int error = errno;
    signals.Start();
    close(exec_report[0]);
    close(exec_report[1]);
    return absl::InternalError(absl::StrCat("record: fork: ", std::strerror(error)));
  }
  if (run.pid == 0) {
    signals.RestoreForProgram();
    close(exec_report[0]);
    ExecProgram(program, library, plan, host, changes, exec_report[1]);
  }
  running_child.store(run.pid);
  signals.Start();
  close(exec_report[1]);
  ssize_t got;
  do {
    got = read(exec_report[0], &run.exec_errno, sizeof(run.exec_errno));
  } while (got < 0 && errno == EINTR);
  close(exec_report[0]);
  if (got != static_cast<ssize_t>(sizeof(run.exec_errno))) run.exec_errno = 0;
  run.status = WaitForExit(run.pid);
  return run;
}

ProcessEnd EndOf(const ProgramRun& run) {
  ProcessEnd end;
  end.set_pid(static_cast<uint32_t>(run.pid));
  if (WIFSIGNALED(run.status)) {
    end.set_signal(WTERMSIG(run.status));
    end.set_core_dumped(WCOREDUMP(run.status));
  } else {
    end.set_exit_status(WEXITSTATUS(run.status));
  }
  return end;
}

// The pid the Header of the trace open in `reader` names (its first packet); nullopt when the
// first packet is no Header.
std::optional<uint32_t> HeaderPid(TraceReader& reader) {
  Packet packet;
  TracePacket first;
  if (!reader.Next(&packet) ||
      !first.ParseFromArray(packet.bytes.data(), static_cast<int>(packet.bytes.size())) ||
      !first.has_header()) {
    return std::nullopt;
  }
  return first.header().pid();
}

// Whether `path` is a trace the program `pid` wrote (its header names that pid) and its framing is
// intact: a packet appended after a torn one would not be found.
bool IsIntactTraceOf(const std::string& path, pid_t pid) {
  TraceReader reader;
  if (!reader.Open(path, nullptr) || HeaderPid(reader) != static_cast<uint32_t>(pid)) return false;
  Packet packet;
  while (reader.Next(&packet)) {
  }
  return reader.end().ok();
}

// Whether the process that wrote the trace at `path` (its header's pid) is not the program, which
// has ended, and still runs: one the program started and left behind, still writing through its
// mapping of the file, which a trace renamed over it would lose.
bool WriterStillRuns(const std::string& path, pid_t program) {
  TraceReader reader;
  if (!reader.Open(path, nullptr)) return false;
  const std::optional<uint32_t> pid = HeaderPid(reader);
  if (!pid || *pid == 0 || *pid == static_cast<uint32_t>(program)) return false;
  return kill(static_cast<pid_t>(*pid), 0) == 0 || errno == EPERM;
}

// Appends a ProcessEnd packet to the program's own trace at `path` when it is one (see
// IsIntactTraceOf). Only appends: never truncates or rewrites what the recorder wrote.
void AppendProcessEnd(const std::string& path, const ProgramRun& run) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || !IsIntactTraceOf(path, run.pid)) {
    return;
  }
  Trace trace;
  *trace.add_packet()->mutable_process_end() = EndOf(run);
  const std::string bytes = trace.SerializeAsString();  // framed as the recorder frames packets
  int error = 0;
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
  struct stat opened;
  if (fd < 0 || fstat(fd, &opened) != 0) {
    error = errno;
  } else if (opened.st_dev != info.st_dev || opened.st_ino != info.st_ino) {
    error = ESTALE;  // replaced since it was read
  }
  for (size_t written = 0; error == 0 && written < bytes.size();) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) error = n < 0 ? errno : EIO;
    if (n > 0) written += static_cast<size_t>(n);
  }
  if (fd >= 0 && close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    PrintError(absl::StrCat(WriteError(path, error), " (how the program ended is not recorded)"));
  }
}

// The program's own trace first, then those of the processes it started, by name: (as shown,
// actual path).
std::vector<std::pair<std::string, fs::path>> WrittenTraces(
    const OutputPlan& plan, const std::map<std::string, fs::file_time_type>& before,
    const std::string& own) {
  std::vector<std::pair<std::string, fs::path>> traces;
  std::error_code error;
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
    std::stable_partition(traces.begin(), traces.end(),
                          [&](const auto& trace) { return trace.second.filename() == own; });
  }
  return traces;
}

// The environment changes of --tensors, told on stderr.
std::vector<EnvironmentChange> TensorChanges() {
  std::vector<EnvironmentChange> changes =
      TensorLevelEnvironment([](const std::string& name) -> std::optional<std::string> {
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
  return changes;
}

// A trace written by this run: as the user named it (also a path from gpumem's working directory,
// which it never leaves) and as the program was told it.
struct WrittenTrace {
  std::string shown;
  fs::path actual;
};

void Warn(absl::string_view message) {
  std::fprintf(stderr, "gpumem: warning: %s\n", Printable(message).c_str());
}

// Symbolizes each trace in place while the binaries are certainly there; a failure is one warning
// and leaves the trace as it was. A trace of a process other than the program (`pid`, ended) that
// still runs is left alone.
void SymbolizeTraces(const std::vector<WrittenTrace>& traces, pid_t program) {
  for (const WrittenTrace& trace : traces) {
    if (!IsGpumemTrace(trace.shown)) continue;  // not the recorder's: nothing to resolve
    if (WriterStillRuns(trace.shown, program)) {
      Warn(absl::StrCat(trace.shown,
                        " is not symbolized: the process writing it still runs "
                        "(`gpumem symbolize` it once that ended)"));
      continue;
    }
    if (absl::StatusOr<SymbolizeCounts> counts = SymbolizeTraceFile(trace.shown, trace.shown);
        !counts.ok()) {
      Warn(absl::StrCat("not symbolized: ", counts.status().message()));
    }
  }
}

// What the commands after the summary point at.
struct SummaryHints {
  bool failed_allocations = false;
  bool growing = false;
  std::string view;  // the trace of the process with the highest peak
};

// The summary of the traces at `paths` (one process or several), and the hints for the commands;
// nullopt (after a warning) where a trace cannot be read.
std::optional<std::string> Summarize(const std::vector<std::string>& paths, SummaryHints* hints) {
  const bool several = paths.size() > 1;
  std::vector<ProcessBrief> briefs;
  std::vector<ProcessTimeline> timelines;
  std::string text;
  uint64_t highest = 0;
  for (const std::string& path : paths) {
    absl::StatusOr<ProcessReport> report = AnalyzeProcess(path, RunSummaryRequest(several));
    if (!report.ok()) {
      Warn(absl::StrCat("no summary: ", report.status().message()));
      return std::nullopt;
    }
    const ProcessBrief brief = BriefOf(*report);
    hints->failed_allocations =
        hints->failed_allocations || brief.failed_allocations > 0 || brief.framework_ooms > 0;
    hints->growing = hints->growing || brief.growth_per_iteration > 0;
    if (hints->view.empty() || brief.peak_bytes > highest) {
      hints->view = path;
      highest = brief.peak_bytes;
    }
    if (!several) text = ProcessSummaryText(*report);
    briefs.push_back(brief);
    if (report->timeline) timelines.push_back(*std::move(report->timeline));
  }
  return several ? ProcessesSummaryText(std::move(briefs), timelines) : text;
}

// The summary on stderr, then the commands that show more: of the traces the recorder wrote, or
// nothing when there are none.
void PrintSummary(const std::vector<WrittenTrace>& traces, const OutputPlan& plan) {
  std::vector<std::string> paths;
  for (const WrittenTrace& trace : traces) {
    if (IsGpumemTrace(trace.shown)) paths.push_back(trace.shown);
  }
  if (paths.empty()) return;
  SummaryHints hints;
  const std::optional<std::string> summary = Summarize(paths, &hints);
  if (!summary) return;
  std::string inputs;
  if (plan.directory && paths.size() > 1) {
    inputs = ShellWord(plan.shown);
  } else {
    for (const std::string& path : paths) absl::StrAppend(&inputs, " ", ShellWord(path));
    inputs.erase(0, 1);
  }
  inputs = Printable(inputs);  // the summary's own names are escaped already
  std::string text = absl::StrCat("gpumem: summary of ", inputs, ":\n", *summary,
                                  "gpumem: to see more:\n  gpumem report ", inputs, "\n");
  if (hints.failed_allocations) absl::StrAppend(&text, "  gpumem report --oom ", inputs, "\n");
  if (hints.growing) absl::StrAppend(&text, "  gpumem report --growth ", inputs, "\n");
  absl::StrAppend(&text, "  gpumem view ", Printable(ShellWord(hints.view)), "\n");
  std::fputs(text.c_str(), stderr);
}

// After the program ended: how it ended into its trace, the traces symbolized, and which traces it
// wrote with their summary, on stderr. Returns gpumem's exit status: the program's, as a shell
// gives it (128+N for signal N).
int FinishRecording(OutputPlan plan, const std::map<std::string, fs::file_time_type>& before,
                    const std::string& host, const ProgramRun& run, const Options& options) {
  const std::string own = DefaultName(host, run.pid);
  if (plan.pid_in_name) {
    plan.shown = own;
    plan.env_value = (plan.dir / own).string();
    NameChildren(&plan);
  }
  std::vector<WrittenTrace> traces;
  for (auto& [shown, actual] : WrittenTraces(plan, before, own)) traces.push_back({shown, actual});
  const fs::path own_path = plan.directory ? plan.dir / own : fs::path(plan.env_value);
  if (!traces.empty() && traces.front().actual == own_path) {
    AppendProcessEnd(own_path.string(), run);
  }
  if (WIFSIGNALED(run.status)) {
    std::fprintf(stderr, "gpumem: %s\n", DescribeProcessEnd(EndOf(run)).c_str());
  }
  if (traces.empty()) {
    std::fprintf(stderr, "gpumem: no trace written: the program made no CUDA memory call\n");
  }
  if (!options.no_symbolize) SymbolizeTraces(traces, run.pid);
  std::error_code error;
  for (const WrittenTrace& trace : traces) {
    std::fprintf(stderr, "gpumem: trace written to %s (%s)\n", Printable(trace.shown).c_str(),
                 HumanSize(fs::file_size(trace.actual, error)).c_str());
  }
  if (!options.no_summary) PrintSummary(traces, plan);
  if (WIFSIGNALED(run.status)) return 128 + WTERMSIG(run.status);
  return WIFEXITED(run.status) ? WEXITSTATUS(run.status) : kExitBadInput;
}

}  // namespace

std::string RecordUsage() { return UsageOf(RecordCommandLine); }

int RunRecord(const std::vector<std::string>& args) {
  Options options;
  std::vector<std::string> program;  // and its arguments
  if (int done = kExitOk; !ParseCommandLine(RecordCommandLine(&options), args, &program, &done)) {
    return done;
  }
  if (program.empty()) return UsageError("record: no program given", "record");

  const std::string library = PreloadLibrary();
  if (library.empty() || access(library.c_str(), R_OK) != 0) {
    PrintError(absl::StrCat("preload library not found: ", library.empty() ? "?" : library,
                            " (set GPUMEM_LIBRARY to its path)"));
    return kExitBadInput;
  }
  const std::string host = HostName();
  absl::StatusOr<OutputPlan> plan = PlanOutput(options.output, host);
  if (!plan.ok()) {
    PrintError(plan.status().message());
    return kExitBadInput;
  }
  // With the default name, every name this run can produce contains a pid not yet running.
  const std::map<std::string, fs::file_time_type> before =
      plan->pid_in_name ? std::map<std::string, fs::file_time_type>{} : ListTraces(*plan);
  const std::vector<EnvironmentChange> changes =
      options.tensors ? TensorChanges() : std::vector<EnvironmentChange>{};
  std::error_code error;
  const absl::StatusOr<ProgramRun> run =
      RunProgram(program, fs::absolute(library, error).string(), *plan, host, changes);
  if (!run.ok()) {
    PrintError(run.status().message());
    return kExitBadInput;
  }
  if (run->exec_errno != 0) {
    PrintError(absl::StrCat("cannot execute '", program[0], "': ", std::strerror(run->exec_errno)));
    // As a shell: 127 for a program not found, 126 for one found but not executable.
    return run->exec_errno == ENOENT ? 127 : 126;
  }
  return FinishRecording(*std::move(plan), before, host, *run, options);
}

}  // namespace gpumem::report
