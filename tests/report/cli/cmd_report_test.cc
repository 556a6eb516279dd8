// `gpumem report` and `gpumem check` run as a user would (the built binary, its exit code, stdout
// and stderr) on the bundled H100 traces and on synthetic ones; and the size syntax of budgets.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

extern char** environ;

namespace gpumem::report {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// A path of its own for each test and process: ctest may run test cases in parallel.
std::string UniqueTempPath(const std::string& suffix) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  return ::testing::TempDir() + "/" + test->test_suite_name() + "." + test->name() + "." +
         std::to_string(getpid()) + suffix;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the built gpumem with `args`; stdout and stderr go through files.
CommandResult Gpumem(const std::vector<std::string>& args) {
  const std::string out_path = UniqueTempPath(".stdout");
  const std::string err_path = UniqueTempPath(".stderr");
  std::vector<std::string> argv_strings = {GPUMEM_BUILD_DIR "/bin/gpumem"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  CommandResult run;
  pid_t pid;
  const int error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    ADD_FAILURE() << "cannot run " << argv[0] << ": " << std::strerror(error);
    return run;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return run;
}

size_t LineCount(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

// Every '{' and '[' outside strings closed in order, and one top-level value.
bool JsonBalanced(const std::string& json) {
  std::string open;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      open.push_back(c);
    } else if (c == '}' || c == ']') {
      if (open.empty() || open.back() != (c == '}' ? '{' : '[')) return false;
      open.pop_back();
      if (open.empty() && json.find_first_not_of("\n", i + 1) != std::string::npos) return false;
    }
  }
  return open.empty() && !in_string;
}

std::string Sample(const std::string& name) {
  return std::string(GPUMEM_SOURCE_DIR) + "/samples/traces/" + name;
}

// ---- synthetic traces ----

std::string Framed(const TracePacket& packet) {
  const std::string body = packet.SerializeAsString();
  std::string out = "\x0A";
  uint64_t n = body.size();
  for (; n >= 0x80; n >>= 7) out.push_back(static_cast<char>((n & 0x7F) | 0x80));
  out.push_back(static_cast<char>(n));
  return out + body;
}

class TraceBuilder {
 public:
  TraceBuilder() {
    TracePacket packet;
    Header* header = packet.mutable_header();
    header->set_format_version(1);
    header->set_host("testhost");
    header->set_pid(4242);
    header->add_command_line("./train");
    header->set_start_time_mono_ns(kStart);
    header->set_recorder_version("0.1.0");
    Add(packet);
  }
  void Device(int32_t ordinal, const std::string& name) {
    TracePacket packet;
    packet.mutable_device()->set_ordinal(ordinal);
    packet.mutable_device()->set_name(name);
    Add(packet);
  }
  void Stack(uint64_t id, uint64_t frame) {
    TracePacket packet;
    packet.mutable_stack()->set_id(id);
    packet.mutable_stack()->add_frame(frame);
    Add(packet);
  }
  void Memory(Api api, MemoryKind kind, Action action, int32_t device, uint64_t size,
              uint64_t address, uint64_t stack_id) {
    TracePacket packet;
    MemoryEvent* event = packet.mutable_memory();
    event->set_seq(++seq_);
    event->set_timestamp_ns(kStart + seq_ * 1'000'000);  // seq N at N ms
    event->set_api(api);
    event->set_kind(kind);
    event->set_action(action);
    event->set_device(device);
    event->set_size(size);
    event->set_address(address);
    event->set_stack_id(stack_id);
    Add(packet);
  }
  void Malloc(int32_t device, uint64_t size, uint64_t address, uint64_t stack_id) {
    Memory(CUDA_MALLOC, DEVICE, ALLOC, device, size, address, stack_id);
  }
  void Free(uint64_t address) { Memory(CUDA_FREE, KIND_UNKNOWN, FREE, -1, 0, address, 0); }
  void Footer() {
    TracePacket packet;
    packet.mutable_footer()->set_clean_exit(true);
    Add(packet);
  }
  // Each trace of one test needs its own `suffix`.
  std::string Write(const std::string& suffix = ".trace") {
    const std::string path = UniqueTempPath(suffix);
    WriteTo(path);
    return path;
  }
  // At `path`, less its last `cut` bytes (a packet torn by a crash).
  void WriteTo(const std::string& path, size_t cut = 0) const {
    std::ofstream(path, std::ios::binary) << bytes_.substr(0, bytes_.size() - cut);
  }

 private:
  static constexpr uint64_t kStart = 5'000'000'000;
  void Add(const TracePacket& packet) { bytes_ += Framed(packet); }
  std::string bytes_;
  uint64_t seq_ = 0;
};

// Two devices; device 1 peaks at 30 MiB at seq 3 (2 call sites), device 0 at 8 MiB; 4 MiB on
// device 1 is never freed; one double free.
std::string TwoDeviceTrace(bool clean_exit, const std::string& suffix = ".trace") {
  TraceBuilder trace;
  trace.Device(0, "GPU Zero");
  trace.Device(1, "GPU One");
  trace.Stack(1, 0x1111);
  trace.Stack(2, 0x2222);
  trace.Malloc(0, 8 * kMiB, 0xA000'0000, 1);   // 1: d0 8
  trace.Malloc(1, 26 * kMiB, 0xB000'0000, 1);  // 2: d1 26
  trace.Malloc(1, 4 * kMiB, 0xC000'0000, 2);   // 3: d1 30 <- peak
  trace.Free(0xB000'0000);                     // 4: d1 4
  trace.Free(0xA000'0000);                     // 5: d0 0
  trace.Free(0xA000'0000);                     // 6: double free
  if (clean_exit) trace.Footer();
  return trace.Write(suffix);
}

// ---- report ----

TEST(ReportCommandTest, LeakLoopText) {
  const CommandResult run = Gpumem({"report", Sample("leak_loop-h200.trace")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_NE(run.out.find("process: pid 464 on vm:"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("anomalies: none"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("peak, device 0 (NVIDIA H200): 56.00 MiB (58720256 bytes) at "
                         "seq 29, 420.578 ms after start\n"
                         "  40.00 MiB   71.4%  10 allocations\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("  16.00 MiB   28.6%  1 allocation\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("leaks, device 0 (NVIDIA H200): 10 allocations, 40.00 MiB "
                         "(41943040 bytes) never freed\n"
                         "  40.00 MiB  10 allocations\n"),
            std::string::npos)
      << run.out;
}

// Each call site is its size line, the user's line, and at most a via line.
TEST(ReportCommandTest, EachCallSiteLeadsWithTheUsersLine) {
  const CommandResult run = Gpumem({"report", "--peak", Sample("leak_loop-h200.trace")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("  40.00 MiB   71.4%  10 allocations\n"
                         "      leak_loop.cc:26 in leak_iteration()\n"
                         "  16.00 MiB   28.6%  1 allocation\n"
                         "      leak_loop.cc:24 in leak_iteration()\n"),
            std::string::npos)
      << run.out;
  for (const char* trace :
       {"leak_loop-h200.trace", "train_mlp-async-h100.trace", "train_mlp-default-h100.trace"}) {
    const CommandResult peak = Gpumem({"report", "--peak", "--leaks", "--top", "0", Sample(trace)});
    EXPECT_EQ(peak.exit_code, 0) << peak.err;
    std::istringstream lines(peak.out);
    size_t below_size_line = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("      ", 0) == 0) {
        EXPECT_LT(++below_size_line, 3u) << trace << ": " << line << "\n" << peak.out;
        EXPECT_EQ(line.find("+0x"), std::string::npos) << trace << ": " << line;
      } else {
        below_size_line = 0;
      }
    }
  }
  const CommandResult full =
      Gpumem({"report", "--peak", "--stacks", "full", Sample("leak_loop-h200.trace")});
  EXPECT_NE(full.out.find("  40.00 MiB   71.4%  10 allocations\n"
                          "      leak_iteration() (samples/leak_loop/leak_loop.cc:26)\n"
                          "      main (samples/leak_loop/leak_loop.cc:32)\n"),
            std::string::npos)
      << full.out;
}

TEST(ReportCommandTest, PeakOnlyLeaksOnlyAndTop) {
  const CommandResult peak =
      Gpumem({"report", "--peak", "--top", "1", Sample("leak_loop-h200.trace")});
  EXPECT_EQ(peak.exit_code, 0) << peak.err;
  EXPECT_NE(peak.out.find("peak, device 0"), std::string::npos);
  EXPECT_EQ(peak.out.find("leaks"), std::string::npos) << peak.out;
  EXPECT_NE(peak.out.find("  ... 1 more call site: 16.00 MiB in 1 allocation\n"), std::string::npos)
      << peak.out;
  EXPECT_EQ(peak.out.find("28.6%"), std::string::npos);

  const CommandResult leaks = Gpumem({"report", "--leaks", Sample("leak_loop-h200.trace")});
  EXPECT_EQ(leaks.exit_code, 0) << leaks.err;
  EXPECT_EQ(leaks.out.find("peak,"), std::string::npos) << leaks.out;
  EXPECT_NE(leaks.out.find("leaks, device 0"), std::string::npos) << leaks.out;
}

TEST(ReportCommandTest, ExpandableSegmentsPeakIsPhysicalMemory) {
  const CommandResult run = Gpumem({"report", "--peak", Sample("train_mlp-expandable-h100.trace")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("peak, device 0 (NVIDIA H100 80GB HBM3): 232.25 MiB (243533824 bytes) at "
                         "seq 53,"),
            std::string::npos)
      << run.out;
  // PyTorch's fabric-handle probe, refused with error 800, is a failed call, not an OOM.
  EXPECT_NE(run.out.find("failed allocations: 0; failed calls (not out of memory): 1;"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("VMM address space reserved (not memory use): at most 178.16 GiB"),
            std::string::npos)
      << run.out;
}

TEST(ReportCommandTest, LeakLoopJson) {
  const CommandResult run = Gpumem({"report", "--json", Sample("leak_loop-h200.trace")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(JsonBalanced(run.out)) << run.out;
  EXPECT_EQ(run.out.rfind("{\"gpumem_report\":1,\"traces\":[{\"path\":", 0), 0u) << run.out;
  EXPECT_EQ(LineCount(run.out), 1u);
  for (const char* expected : {
           "\"pid\":464",
           "\"clean_exit\":true",
           "\"anomalies\":{\"unknown_frees\":0,\"double_frees\":0,\"overlapping_allocations\":0,"
           "\"impossible_sizes\":0}",
           "\"peak\":[{\"memory\":\"device\",\"device\":0,\"name\":\"NVIDIA H200\","
           "\"total_memory\":150109880320,\"peak_bytes\":58720256,\"seq\":29,\"time_ns\":420577954",
           "\"allocations\":20,\"allocated_bytes\":209715200,\"call_sites\":2,",
           "\"sites\":[{\"bytes\":41943040,\"count\":10,\"share\":0.714286,\"frames\":[{"
           "\"text\":\"leak_iteration() (samples/leak_loop/leak_loop.cc:26)\"",
           "}],\"user_frame\":{\"text\":\"leak_iteration() (samples/leak_loop/leak_loop.cc:26)\",",
           "\"inlined\":false},\"via\":\"\"},{\"bytes\":16777216,",
           "{\"bytes\":16777216,\"count\":1,\"share\":0.285714,",
           "\"leaks\":{\"complete\":true,\"places\":[{\"memory\":\"device\",\"device\":0,",
           "\"bytes\":41943040,\"count\":10,\"sites\":[{\"bytes\":41943040,\"count\":10,"
           "\"frames\":",
       }) {
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << "\n" << run.out;
  }
}

TEST(ReportCommandTest, SyntheticTwoDevicesText) {
  const std::string path = TwoDeviceTrace(/*clean_exit=*/true);
  const CommandResult run = Gpumem({"report", path});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("anomalies: 1 double free\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("peak, device 0 (GPU Zero): 8.00 MiB (8388608 bytes) at seq 1, 1.000 ms "
                         "after start\n  8.00 MiB  100.0%  1 allocation\n"
                         "      (no frame of your code) at 0x1111\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(
      run.out.find("peak, device 1 (GPU One): 30.00 MiB (31457280 bytes) at seq 3, 3.000 ms "
                   "after start\n"
                   "  26.00 MiB   86.7%  1 allocation\n      (no frame of your code) at 0x1111\n"
                   "  4.00 MiB   13.3%  1 allocation\n      (no frame of your code) at 0x2222\n"),
      std::string::npos)
      << run.out;
  EXPECT_NE(
      run.out.find("leaks, device 1 (GPU One): 1 allocation, 4.00 MiB (4194304 bytes) never "
                   "freed\n  4.00 MiB  1 allocation\n      (no frame of your code) at 0x2222\n"),
      std::string::npos)
      << run.out;
  EXPECT_EQ(run.out.find("leaks, device 0"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("did not exit cleanly"), std::string::npos) << run.out;
  std::remove(path.c_str());
}

TEST(ReportCommandTest, NoFooterSaysLiveNotNecessarilyLeaked) {
  const std::string path = TwoDeviceTrace(/*clean_exit=*/false);
  const CommandResult text = Gpumem({"report", "--leaks", path});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("leaks: the process did not exit cleanly: what was live when it "
                          "stopped, not necessarily leaked\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("4.00 MiB (4194304 bytes) live when it stopped"), std::string::npos)
      << text.out;
  const CommandResult json = Gpumem({"report", "--json", "--leaks", path});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(JsonBalanced(json.out)) << json.out;
  EXPECT_NE(json.out.find("\"clean_exit\":false"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"leaks\":{\"complete\":false,\"note\":\"the process did not exit "
                          "cleanly"),
            std::string::npos)
      << json.out;
  EXPECT_EQ(json.out.find("\"peak\":"), std::string::npos) << json.out;
  std::remove(path.c_str());
}

// How the program ended (a ProcessEnd packet `gpumem record` appended): one line after the end
// line, and in the JSON where the trace's end is.
TEST(ReportCommandTest, SaysHowTheProgramEnded) {
  // A ProcessEnd packet appended to a trace, as gpumem record does.
  auto append = [](const std::string& path, int exit_status, int signal) {
    TracePacket packet;
    packet.mutable_process_end()->set_pid(4242);
    packet.mutable_process_end()->set_exit_status(exit_status);
    packet.mutable_process_end()->set_signal(signal);
    std::ofstream(path, std::ios::binary | std::ios::app) << Framed(packet);
  };
  const std::string path = TwoDeviceTrace(/*clean_exit=*/false);
  append(path, 0, 9);
  const CommandResult text = Gpumem({"report", path});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("\nend: no footer — the process did not exit cleanly\n"
                          "exit: the program was killed by signal 9 (Killed)\n"),
            std::string::npos)
      << text.out;
  const CommandResult json = Gpumem({"report", "--json", path});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"end\":\"no footer — the process did not exit cleanly\","
                          "\"process_end\":{\"pid\":4242,\"exit_status\":0,\"signal\":9,"
                          "\"core_dumped\":false,\"description\":\"the program was killed by "
                          "signal 9 (Killed)\"}"),
            std::string::npos)
      << json.out;
  std::remove(path.c_str());

  const std::string exited = TwoDeviceTrace(/*clean_exit=*/true);
  append(exited, 3, 0);
  const CommandResult run = Gpumem({"report", exited});
  EXPECT_NE(run.out.find("\nend: clean (footer present)\nexit: the program exited with status 3\n"),
            std::string::npos)
      << run.out;
  std::remove(exited.c_str());
}

TEST(ReportCommandTest, SeveralTracesInOneJsonObject) {
  const std::string path = TwoDeviceTrace(/*clean_exit=*/true);
  const CommandResult run = Gpumem({"report", "--json", path, Sample("leak_loop-h200.trace")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(JsonBalanced(run.out)) << run.out;
  EXPECT_NE(run.out.find("\"double_frees\":1"), std::string::npos);
  EXPECT_NE(run.out.find("\"peak_bytes\":31457280"), std::string::npos);
  EXPECT_NE(run.out.find("\"peak_bytes\":58720256"), std::string::npos);
  std::remove(path.c_str());
}

// ---- a directory of traces, analysed in parallel ----

// `count` traces in a new directory, rank-00.trace ...: the first ones longest (in parallel, the
// later ones finish first), each with a leak of its own size; `torn` is cut inside its last packet
// and `not_trace` holds no trace at all.
std::string RankDirectory(size_t count, size_t torn, size_t not_trace) {
  const std::string dir = UniqueTempPath(".dir");
  std::filesystem::create_directory(dir);
  for (size_t rank = 0; rank < count; ++rank) {
    char name[32];
    std::snprintf(name, sizeof(name), "/rank-%02zu.trace", rank);
    if (rank == not_trace) {
      std::ofstream(dir + name) << "not a trace\n";
      continue;
    }
    TraceBuilder trace;
    trace.Device(0, "GPU Zero");
    trace.Stack(1, 0x1111);
    const uint64_t pairs = (count - rank) * 1000;
    for (uint64_t i = 0; i < pairs; ++i) {
      trace.Malloc(0, (i % 7 + 1) * kMiB, 0x1'0000'0000 + i * 0x100'0000, 1);
      trace.Free(0x1'0000'0000 + i * 0x100'0000);
    }
    trace.Malloc(0, (rank + 1) * kMiB, 0xF'0000'0000, 1);  // never freed
    if (rank == torn) {
      trace.WriteTo(dir + name, 3);
    } else {
      trace.Footer();
      trace.WriteTo(dir + name);
    }
  }
  return dir;
}

// However many traces run at once, the output is that of one after the other: each trace under
// its header in name order, then the combined view; the damaged trace's one error line, the one
// that is not a trace likewise, the others reported all the same, and exit status 2.
TEST(ReportCommandTest, DirectoryInParallelPrintsAsOneAtATime) {
  const std::string dir = RankDirectory(16, 5, 9);
  // `gpumem report [--json] [--jobs JOBS] DIR` (no --jobs for "").
  auto report = [&dir](bool json, const std::string& jobs) {
    std::vector<std::string> args = {"report"};
    if (json) args.push_back("--json");
    if (!jobs.empty()) args.insert(args.end(), {"--jobs", jobs});
    args.push_back(dir);
    return Gpumem(args);
  };
  for (const bool json : {false, true}) {
    const CommandResult one = report(json, "1");
    EXPECT_EQ(one.exit_code, 2) << one.err;
    EXPECT_EQ(LineCount(one.err), 2u) << one.err;
    EXPECT_NE(one.err.find("rank-05.trace: torn packet"), std::string::npos) << one.err;
    EXPECT_NE(one.err.find("rank-09.trace: not a gpumem trace"), std::string::npos) << one.err;
    if (json) {
      EXPECT_TRUE(JsonBalanced(one.out)) << one.out;
      EXPECT_NE(one.out.find("\"combined\":"), std::string::npos);
    } else {
      size_t at = 0;
      for (size_t rank = 0; rank < 16; ++rank) {
        if (rank == 9) continue;
        char header[32];
        std::snprintf(header, sizeof(header), "/rank-%02zu.trace\n", rank);
        const size_t found = one.out.find(header, at);
        ASSERT_NE(found, std::string::npos) << "rank " << rank << " missing or out of order";
        at = found;
      }
      EXPECT_NE(one.out.find("combined", at), std::string::npos) << one.out;
    }
    for (const std::string jobs : {"4", "16", ""}) {
      const CommandResult many = report(json, jobs);
      EXPECT_EQ(many.exit_code, one.exit_code) << "--jobs " << jobs;
      EXPECT_EQ(many.out, one.out) << "--jobs " << jobs;
      EXPECT_EQ(many.err, one.err) << "--jobs " << jobs;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(ReportCommandTest, JobsMustBeANumber) {
  const CommandResult run = Gpumem({"report", "--jobs", "many", Sample("leak_loop-h200.trace")});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--jobs: not a number: 'many'"), std::string::npos) << run.err;
}

TEST(ReportCommandTest, BadInputIsOneLineAndExit2) {
  const std::string not_a_trace = UniqueTempPath(".txt");
  std::ofstream(not_a_trace) << "hello, this is not a trace\n";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"report", "/nonexistent/x.trace"},
           {"report", not_a_trace},
           {"check", "--no-leaks", "/nonexistent/x.trace"},
           {"check", "--max-peak", "1GiB", not_a_trace},
       }) {
    SCOPED_TRACE(args[0] + " " + args.back());
    const CommandResult run = Gpumem(args);
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(LineCount(run.err), 1u) << run.err;
    EXPECT_EQ(run.err.rfind("gpumem: error: ", 0), 0u) << run.err;
  }
  std::remove(not_a_trace.c_str());
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"report", "--bogus", Sample("leak_loop-h200.trace")},
           {"report"},
           {"report", "--top", "many", Sample("leak_loop-h200.trace")},
           {"check", Sample("leak_loop-h200.trace")},  // no budget
           {"check", "--max-peak", "12XB", Sample("leak_loop-h200.trace")},
           {"check", "--max-peak"},
       }) {
    const CommandResult run = Gpumem(args);
    EXPECT_EQ(run.exit_code, 2) << args.back();
    EXPECT_EQ(run.err.rfind("gpumem: error: ", 0), 0u) << run.err;
  }
}

TEST(ReportCommandTest, HelpMentionsTheCommands) {
  EXPECT_EQ(Gpumem({"report", "--help"}).exit_code, 0);
  EXPECT_EQ(Gpumem({"check", "--help"}).exit_code, 0);
  const CommandResult help = Gpumem({"--help"});
  EXPECT_NE(help.out.find("report [--summary] [--peak]"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("[--kernels]"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("check [--max-peak SIZE]"), std::string::npos) << help.out;
}

// ---- check ----

TEST(CheckCommandTest, MaxPeak) {
  const std::string leak_loop = Sample("leak_loop-h200.trace");
  const CommandResult pass = Gpumem({"check", "--max-peak", "56MiB", leak_loop});
  EXPECT_EQ(pass.exit_code, 0) << pass.out << pass.err;
  EXPECT_EQ(pass.out, "gpumem check: all budgets hold (1 trace)\n");

  const CommandResult fail = Gpumem({"check", "--max-peak=48MiB", leak_loop});
  EXPECT_EQ(fail.exit_code, 1) << fail.err;
  EXPECT_EQ(fail.out, leak_loop +
                          ": device 0 (NVIDIA H200) peaked at 56.00 MiB (58720256 "
                          "bytes), over --max-peak 48.00 MiB by 8.00 MiB (8388608 bytes)\n");

  // One byte under the peak breaks it, by one byte; decimal units are powers of 1000.
  EXPECT_EQ(Gpumem({"check", "--max-peak", "58720255", leak_loop}).exit_code, 1);
  EXPECT_EQ(Gpumem({"check", "--max-peak", "58720256", leak_loop}).exit_code, 0);
  EXPECT_EQ(Gpumem({"check", "--max-peak", "58MB", leak_loop}).exit_code, 1);
  EXPECT_EQ(Gpumem({"check", "--max-peak", "59MB", leak_loop}).exit_code, 0);
}

TEST(CheckCommandTest, NoLeaks) {
  const std::string leak_loop = Sample("leak_loop-h200.trace");
  const CommandResult fail = Gpumem({"check", "--no-leaks", "--max-peak", "1GiB", leak_loop});
  EXPECT_EQ(fail.exit_code, 1);
  EXPECT_EQ(fail.out, leak_loop +
                          ": 10 allocations, 40.00 MiB (41943040 bytes) never freed "
                          "(--no-leaks)\n");

  TraceBuilder trace;
  trace.Malloc(0, 100, 0x1000, 0);
  trace.Free(0x1000);
  trace.Footer();
  const std::string clean = trace.Write(".clean.trace");
  const CommandResult pass = Gpumem({"check", "--no-leaks", "--max-peak", "100", clean});
  EXPECT_EQ(pass.exit_code, 0) << pass.out << pass.err;

  // Both budgets broken on two traces: one line each, exit 1.
  const std::string two = TwoDeviceTrace(/*clean_exit=*/false);
  const CommandResult both = Gpumem({"check", "--no-leaks", "--max-peak", "16MiB", two, clean});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_EQ(both.out, two +
                          ": device 1 (GPU One) peaked at 30.00 MiB (31457280 bytes), over "
                          "--max-peak 16.00 MiB by 14.00 MiB (14680064 bytes)\n" +
                          two +
                          ": 1 allocation, 4.00 MiB (4194304 bytes) live when the trace "
                          "ended (the process did not exit cleanly) (--no-leaks)\n");
  std::remove(clean.c_str());
  std::remove(two.c_str());
}

}  // namespace
}  // namespace gpumem::report

namespace gpumem::report {
namespace {

// A trace whose CUPTI subscriber gave way to another tool says so at the top of the report and
// in its JSON; one whose CUPTI was active says nothing in the text.
TEST(ReportCommandTest, SaysWhatCuptiMissed) {
  for (const CuptiState state : {CUPTI_OTHER_SUBSCRIBER, CUPTI_ACTIVE}) {
    TracePacket cupti;
    cupti.mutable_cupti()->set_state(state);
    cupti.mutable_cupti()->set_detail("no GPU kernel times");
    const std::string path = testing::UniqueTempPath(".trace");
    std::ofstream(path, std::ios::binary)
        << testing::FramedAll({testing::HeaderPacket(), cupti, testing::FooterPacket(0)});
    const CommandResult text = Gpumem({"report", path});
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_EQ(text.out.find("CUPTI: other_subscriber: no GPU kernel times\n") != std::string::npos,
              state == CUPTI_OTHER_SUBSCRIBER)
        << text.out;
    const CommandResult json = Gpumem({"report", "--json", path});
    EXPECT_NE(json.out.find(state == CUPTI_ACTIVE ? "\"cupti\":{\"state\":\"active\""
                                                  : "\"cupti\":{\"state\":\"other_subscriber\""),
              std::string::npos)
        << json.out;
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace gpumem::report
