// The trace must never harm the program's own files or kill it, and must say why recording
// stopped: a program that closes or reuses the trace's descriptor, a file size limit, a full disk
// (a small tmpfs); files created owner-only, never through a planted link, never over a file that
// is not a trace. Each runs tests/programs/host_files under the real preload library against the
// fake CUDA, and once without gpumem to compare.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kExitStatus = 3;
// Enough events to fill the first 16 MiB of trace (about 78 bytes a pair written in full:
// kEveryEventInFull), so that it must grow.
constexpr long kPairsPastTheFirstGrowth = 240000;
// A loop's repeats are written as references of about 10 bytes; these tests are about the file's
// growth, not its encoding.
const std::map<std::string, std::string> kEveryEventInFull = {{"GPUMEM_EVENT_REFS", "0"}};
constexpr char kStopWarning[] = "gpumem: warning: recording stopped: ";

struct HostRun {
  ProgramRun run;
  std::string own_file;  // what the program wrote to its own file
};

std::vector<std::string> HostFilesArgs(const std::string& mode, const std::string& own,
                                       long pairs) {
  return {BuildPath("tests/programs/host_files"), mode, own, std::to_string(pairs),
          std::to_string(kExitStatus)};
}

// host_files once as it is, with the fake CUDA only.
HostRun RunWithoutGpumem(const TempDir& dir, const std::string& mode, long pairs) {
  const std::string own = dir.File("own.plain");
  HostRun result{RunProgram(HostFilesArgs(mode, own, pairs),
                            {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}, {"LD_PRELOAD", ""}}),
                 ""};
  result.own_file = ReadFile(own);
  return result;
}

// host_files under gpumem, recording to `output`, with `settings` (GPUMEM_ variables) too.
HostRun RunRecorded(const TempDir& dir, const std::string& mode, long pairs,
                    const std::string& output,
                    const std::map<std::string, std::string>& settings = {}) {
  const std::string own = dir.File("own.recorded");
  std::map<std::string, std::string> environment = RecordingEnvironment(output);
  environment.insert(settings.begin(), settings.end());
  HostRun result{RunProgram(HostFilesArgs(mode, own, pairs), environment), ""};
  result.own_file = ReadFile(own);
  return result;
}

// Its file byte for byte, its output and its exit status: as without gpumem.
void ExpectUnharmed(const HostRun& recorded, const HostRun& plain) {
  ASSERT_EQ(plain.run.exit_code, kExitStatus) << plain.run.err;
  EXPECT_EQ(recorded.run.exit_code, kExitStatus) << recorded.run.err;
  EXPECT_EQ(recorded.run.out, plain.run.out);
  EXPECT_FALSE(plain.own_file.empty());
  EXPECT_EQ(recorded.own_file, plain.own_file);
}

// The trace as every report reads it: intact, its last footer written at exit.
std::unique_ptr<report::TraceFile> ReadTrace(const std::string& path, uint64_t* memory_events) {
  *memory_events = 0;
  auto file =
      report::TraceFile::Read(path, [&](const report::PacketPosition&, const TracePacket& packet) {
        *memory_events += packet.has_memory();
      });
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  EXPECT_FALSE((*file)->end().damaged()) << (*file)->end().Describe();
  EXPECT_TRUE((*file)->footer().has_value());
  if (!(*file)->footer()) return nullptr;
  EXPECT_TRUE((*file)->footer()->clean_exit());
  EXPECT_TRUE((*file)->footer()->has_exit_status());
  EXPECT_EQ((*file)->footer()->exit_status(), kExitStatus);
  return *std::move(file);
}

// Recording stopped for `reason`: said once on stderr, in the footer with every event not
// written counted as dropped, and by `gpumem report` (and `gpumem dump`, unless the trace is too
// long to print in a test) in `words`. Returns the trace read.
std::unique_ptr<report::TraceFile> ExpectStopped(const HostRun& recorded, const std::string& trace,
                                                 RecordingStop reason, const std::string& words,
                                                 bool dump_too = true) {
  EXPECT_EQ(CountLines(recorded.run.err, kStopWarning), 1) << recorded.run.err;
  EXPECT_EQ(CountLines(recorded.run.err, "gpumem:"), 1) << recorded.run.err;
  EXPECT_NE(recorded.run.err.find(words), std::string::npos) << recorded.run.err;
  EXPECT_NE(recorded.run.err.find("; the program runs on\n"), std::string::npos);
  uint64_t memory_events = 0;
  std::unique_ptr<report::TraceFile> file = ReadTrace(trace, &memory_events);
  EXPECT_NE(file, nullptr);
  if (file == nullptr) return nullptr;
  const Footer& footer = *file->footer();
  EXPECT_EQ(footer.stop_reason(), reason);
  EXPECT_GT(footer.events_dropped(), 0u);
  EXPECT_GE(memory_events + footer.events_dropped(), footer.events());
  EXPECT_LE(footer.stopped_at_seq(), memory_events + 2);
  EXPECT_GT(footer.stopped_at_seq(), 1u);

  std::vector<std::string> commands = {"report"};
  if (dump_too) commands.push_back("dump");
  for (const std::string& command : commands) {
    const ProgramRun run = RunGpumem({command, trace});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const size_t end = run.out.find("end: recording stopped at event ");
    EXPECT_NE(end, std::string::npos) << command;
    if (end == std::string::npos) continue;
    const std::string end_line = run.out.substr(end, run.out.find('\n', end) - end);
    EXPECT_NE(end_line.find(words), std::string::npos) << end_line;
    EXPECT_NE(end_line.find("; exited with status 3"), std::string::npos) << end_line;
    EXPECT_EQ(run.out.find("did not exit cleanly"), std::string::npos) << command;
  }
  return file;
}

class ClosedDescriptors : public ::testing::TestWithParam<const char*> {};

// The program closes every descriptor (or dup2()s its file over them), opens its own file, which
// takes the trace's old number, and allocates until the trace must grow.
TEST_P(ClosedDescriptors, StopRecordingAndNeverTouchTheProgramsFile) {
  TempDir dir;
  const std::string trace = dir.File("run.trace");
  const HostRun plain = RunWithoutGpumem(dir, GetParam(), kPairsPastTheFirstGrowth);
  const HostRun recorded =
      RunRecorded(dir, GetParam(), kPairsPastTheFirstGrowth, trace, kEveryEventInFull);
  ExpectUnharmed(recorded, plain);
  std::unique_ptr<report::TraceFile> file =
      ExpectStopped(recorded, trace, DESCRIPTOR_LOST,
                    "the program closed or replaced the trace's file descriptor",
                    /*dump_too=*/false);  // 420,000 lines
  ASSERT_NE(file, nullptr);
  // Trimmed at exit through its name: no preallocated zeros left.
  EXPECT_EQ(file->end().framing.kind, TraceEnd::Kind::kClean) << file->end().Describe();
}

INSTANTIATE_TEST_SUITE_P(HostFiles, ClosedDescriptors,
                         ::testing::Values("close_range", "closefrom", "dup2"));

// The descriptor is taken over and the program just exits: the trim at exit must not cut the
// program's file, and the trace, whole, needs no warning.
TEST(HostFiles, ADescriptorTakenBeforeExitIsNotTrimmed) {
  TempDir dir;
  const std::string trace = dir.File("run.trace");
  const HostRun plain = RunWithoutGpumem(dir, "dup2", 10);
  const HostRun recorded = RunRecorded(dir, "dup2", 10, trace);
  ExpectUnharmed(recorded, plain);
  EXPECT_EQ(recorded.run.err, "");
  uint64_t memory_events = 0;
  std::unique_ptr<report::TraceFile> file = ReadTrace(trace, &memory_events);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(memory_events, 22u);
  EXPECT_TRUE(file->end().complete());
  EXPECT_EQ(file->end().framing.kind, TraceEnd::Kind::kClean) << file->end().Describe();
}

// RLIMIT_FSIZE far below the trace's 16 MiB growth step: no SIGXFSZ, the trace stays under it.
TEST(HostFiles, FileSizeLimitStopsRecordingNotTheProgram) {
  TempDir dir;
  const std::string trace = dir.File("run.trace");
  constexpr uint64_t kLimit = 1000000;
  const std::string mode = "fsize=" + std::to_string(kLimit);
  const HostRun plain = RunWithoutGpumem(dir, mode, 20000);
  const HostRun recorded = RunRecorded(dir, mode, 20000, trace, kEveryEventInFull);
  ExpectUnharmed(recorded, plain);
  ExpectStopped(recorded, trace, SIZE_LIMIT, "file size limit (ulimit -f)");
  EXPECT_LE(fs::file_size(trace), kLimit);
}

// host_files with its trace on a tmpfs of 256 KiB of its own (mounted in a mount namespace by
// `unshare`, as root or as the root of a user namespace; skipped where neither can), the
// program's own file outside it. The trace is copied out before the mount goes away.
class SmallDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string probe = dir_.File("probe");
    fs::create_directory(probe);
    for (std::vector<std::string> unshare :
         {std::vector<std::string>{"unshare", "--mount"},
          std::vector<std::string>{"unshare", "--mount", "--map-root-user"}}) {
      std::vector<std::string> argv = unshare;
      argv.insert(argv.end(), {"mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe});
      if (RunProgram(argv, {{"LD_PRELOAD", ""}}).exit_code == 0) {
        unshare_ = unshare;
        return;
      }
    }
    GTEST_SKIP() << "cannot mount a tmpfs here (unshare --mount, as root or in a user namespace)";
  }

  // Runs host_files with and without gpumem: the program unharmed, the trace at trace().
  HostRun Run(long pairs) {
    const std::string mount_point = dir_.File("small_disk");
    fs::create_directory(mount_point);
    const std::string own = dir_.File("own.recorded");
    const std::string script =
        "mount -t tmpfs -o size=256k tmpfs \"$1\" || exit 99\n"
        "LD_PRELOAD=\"$2\" GPUMEM_OUTPUT=\"$1/run.trace\" \"$4\" plain \"$5\" \"$6\" \"$7\"\n"
        "status=$?\n"
        "cp \"$1/run.trace\" \"$3\"\n"
        "exit $status\n";
    std::vector<std::string> argv = unshare_;
    argv.insert(argv.end(),
                {"sh", "-c", script, "sh", mount_point, BuildPath("lib/libgpumem.so"), trace()});
    const std::vector<std::string> program = HostFilesArgs("plain", own, pairs);
    argv.insert(argv.end(), {program[0], program[2], program[3], program[4]});
    HostRun recorded{
        RunProgram(argv, {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}, {"LD_PRELOAD", ""}}), ""};
    recorded.own_file = ReadFile(own);
    EXPECT_NE(recorded.run.exit_code, 99) << "the tmpfs did not mount: " << recorded.run.err;
    ExpectUnharmed(recorded, RunWithoutGpumem(dir_, "plain", pairs));
    return recorded;
  }
  std::string trace() const { return dir_.File("copy.trace"); }

  TempDir dir_;
  std::vector<std::string> unshare_;
};

// A trace of a few KiB fits where the 16 MiB growth step does not: whole, no warning.
TEST_F(SmallDisk, ASmallTraceFitsOnANearlyFullDisk) {
  const HostRun recorded = Run(10);
  EXPECT_EQ(recorded.run.err, "");
  uint64_t memory_events = 0;
  std::unique_ptr<report::TraceFile> file = ReadTrace(trace(), &memory_events);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(memory_events, 22u);
  EXPECT_TRUE(file->end().complete());
}

TEST_F(SmallDisk, AFullDiskStopsRecordingWithOneWarning) {
  const HostRun recorded = Run(20000);
  ExpectStopped(recorded, trace(), DISK_FULL, "no space left on the file system");
}

// The footer carries the exit status, which the report shows.
TEST(HostFiles, TheReportShowsTheExitStatus) {
  TempDir dir;
  const std::string trace = dir.File("run.trace");
  const HostRun recorded = RunRecorded(dir, "plain", 10, trace);
  ASSERT_EQ(recorded.run.exit_code, kExitStatus) << recorded.run.err;
  uint64_t memory_events = 0;
  ASSERT_NE(ReadTrace(trace, &memory_events), nullptr);
  const ProgramRun report = RunGpumem({"report", trace});
  EXPECT_NE(report.out.find("\nend: clean (footer present): exited with status 3\n"),
            std::string::npos)
      << report.out;
  const ProgramRun json = RunGpumem({"report", "--json", trace});
  EXPECT_NE(json.out.find("\"clean_exit\":true,\"exit_status\":3,"), std::string::npos) << json.out;
}

// The trace holds the command line and settings: its owner's only.
TEST(HostFiles, TracesAreReadableByTheirOwnerOnly) {
  TempDir dir;
  const std::string trace = dir.File("run.trace");
  ASSERT_EQ(RunRecorded(dir, "plain", 1, trace).run.exit_code, kExitStatus);
  struct stat info;
  ASSERT_EQ(stat(trace.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

// A link planted where the trace of a process is named (GPUMEM_OUTPUT a directory): never
// followed, never truncated; the trace takes the next free name.
TEST(HostFiles, APlantedLinkIsNeverFollowed) {
  TempDir dir;
  const std::string victim = dir.File("victim");
  const std::string precious = "someone else's file\n";
  { std::ofstream(victim) << precious; }
  const std::string traces = dir.File("traces");
  fs::create_directory(traces);
  const HostRun recorded = RunRecorded(dir, "plant=" + victim, 1, traces);
  ASSERT_EQ(recorded.run.exit_code, kExitStatus) << recorded.run.err;
  EXPECT_EQ(recorded.run.err, "");
  EXPECT_EQ(ReadFile(victim), precious);
  std::vector<std::string> links;
  std::vector<std::string> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(traces)) {
    (entry.is_symlink() ? links : files).push_back(entry.path().filename().string());
  }
  ASSERT_EQ(links.size(), 1u);
  ASSERT_EQ(files.size(), 1u);
  const std::string link = links[0];
  EXPECT_EQ(files[0], link.substr(0, link.size() - 6) + "-1.trace");
  uint64_t memory_events = 0;
  ASSERT_NE(ReadTrace(traces + "/" + files[0], &memory_events), nullptr);
  EXPECT_EQ(memory_events, 4u);
}

// A file at GPUMEM_OUTPUT that is no gpumem trace is the user's: left untouched, said once, the
// trace written beside it. A stale trace there is replaced.
TEST(HostFiles, AFileThatIsNoTraceIsLeftAlone) {
  TempDir dir;
  const std::string output = dir.File("results.trace");
  const std::string precious = "results of last week's run, not a trace\n";
  { std::ofstream(output) << precious; }
  const HostRun recorded = RunRecorded(dir, "plain", 10, output);
  ASSERT_EQ(recorded.run.exit_code, kExitStatus) << recorded.run.err;
  EXPECT_EQ(ReadFile(output), precious);
  EXPECT_EQ(CountLines(recorded.run.err, "gpumem: warning: '" + output +
                                             "' is not a gpumem trace: left as it is; traces "
                                             "go to '" +
                                             dir.File("results-<pid>.trace") + "'"),
            1)
      << recorded.run.err;
  EXPECT_EQ(CountLines(recorded.run.err, "gpumem:"), 1) << recorded.run.err;
  std::vector<std::string> beside;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("results-", 0) == 0) beside.push_back(entry.path().string());
  }
  ASSERT_EQ(beside.size(), 1u);
  uint64_t memory_events = 0;
  ASSERT_NE(ReadTrace(beside[0], &memory_events), nullptr);

  // A trace there (the one just written) is an earlier run's: the next run replaces it.
  fs::rename(beside[0], output);
  const HostRun again = RunRecorded(dir, "plain", 1, output);
  ASSERT_EQ(again.run.exit_code, kExitStatus) << again.run.err;
  EXPECT_EQ(again.run.err, "");
  ASSERT_NE(ReadTrace(output, &memory_events), nullptr);
  EXPECT_EQ(memory_events, 4u);
}

}  // namespace
}  // namespace gpumem::testing
