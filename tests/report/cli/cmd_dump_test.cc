// `gpumem dump` and the command line's shared behaviour, run as a user would: the built binary,
// its exit code, stdout and stderr.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::Framed;
using testing::FramedAll;
using testing::ProgramRun;
using testing::RunProgram;
using testing::UniqueTempPath;

namespace fs = std::filesystem;

// Runs the built gpumem with `args`.
ProgramRun Gpumem(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem")};
  argv.insert(argv.end(), args.begin(), args.end());
  ProgramRun run = RunProgram(argv);
  if (run.spawn_error != 0) {
    ADD_FAILURE() << "cannot run " << argv[0] << ": " << std::strerror(run.spawn_error);
  }
  return run;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TracePacket HeaderPacket() {
  TracePacket packet = testing::HeaderPacket();
  Header* header = packet.mutable_header();
  header->add_command_line("python");
  header->add_command_line("train loop.py");
  header->set_start_time_unix_ns(1700000000123456789);
  header->set_start_time_mono_ns(5'000'000'000);
  Option* option = header->add_option();
  option->set_name("GPUMEM_OUTPUT");
  option->set_value("x.trace");
  header->set_recorder_version("0.1.0");
  return packet;
}

TracePacket MemoryPacket(uint64_t seq, Api api, Action action, uint64_t size, uint64_t address) {
  TracePacket packet;
  MemoryEvent* event = packet.mutable_memory();
  event->set_seq(seq);
  event->set_timestamp_ns(5'000'000'000 + seq * 1'234'000);
  event->set_tid(77);
  event->set_api(api);
  event->set_kind(DEVICE);
  event->set_action(action);
  event->set_size(size);
  event->set_address(address);
  event->set_stack_id(action == ALLOC ? 3 : 0);
  return packet;
}

std::vector<TracePacket> SamplePackets() {
  std::vector<TracePacket> packets = {HeaderPacket()};
  TracePacket device;
  device.mutable_device()->set_ordinal(0);
  device.mutable_device()->set_name("NVIDIA H100 80GB HBM3");
  device.mutable_device()->set_total_memory(85520809984);
  packets.push_back(device);
  TracePacket thread;
  thread.mutable_thread()->set_tid(77);
  thread.mutable_thread()->set_name("python");
  packets.push_back(thread);
  TracePacket stack;
  stack.mutable_stack()->set_id(3);
  stack.mutable_stack()->add_frame(0x401234);
  stack.mutable_stack()->add_frame(0x401000);
  packets.push_back(stack);
  packets.push_back(MemoryPacket(1, CUDA_MALLOC, ALLOC, 1 << 20, 0x7f0000000000));
  packets.push_back(MemoryPacket(2, CUDA_MALLOC, ALLOC, 4096, 0x7f0000100000));
  packets.push_back(MemoryPacket(3, CUDA_FREE, FREE, 0, 0x7f0000000000));
  TracePacket footer;
  footer.mutable_footer()->set_events(3);
  footer.mutable_footer()->set_clean_exit(true);
  footer.mutable_footer()->set_end_time_mono_ns(5'010'000'000);
  packets.push_back(footer);
  return packets;
}

class DumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = UniqueTempPath(".dir");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string CleanTrace(const std::string& name = "clean.trace") {
    return Write(name, FramedAll(SamplePackets()));
  }
  std::string dir_;
};

TEST_F(DumpTest, PrintsEveryPacketOnItsLineThenTheEnd) {
  const ProgramRun run = Gpumem({"dump", CleanTrace()});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), SamplePackets().size() + 1) << run.out;
  EXPECT_EQ(lines[0],
            "#0 header format_version=1 host=\"testhost\" pid=4242 parent_pid=0 "
            "command_line=[\"python\" \"train loop.py\"] start_time_unix_ns=1700000000123456789 "
            "(2023-11-14T22:13:20.123Z) start_time_mono_ns=5000000000 "
            "options=[GPUMEM_OUTPUT=\"x.trace\"] recorder_version=\"0.1.0\" "
            "stacks_unavailable=false");
  EXPECT_EQ(lines[1],
            "#1 device ordinal=0 name=\"NVIDIA H100 80GB HBM3\" total_memory=85520809984");
  EXPECT_EQ(lines[2], "#2 thread tid=77 name=\"python\"");
  EXPECT_EQ(lines[3], "#3 stack id=3 frames=[0x401234 0x401000]");
  EXPECT_EQ(lines[4],
            "#4 memory seq=1 t=1.234ms tid=77 dev=0 cudaMalloc alloc device size=1048576 "
            "addr=0x7f0000000000 stream=0 result=0 stack=3");
  EXPECT_EQ(lines[6],
            "#6 memory seq=3 t=3.702ms tid=77 dev=0 cudaFree free device size=0 "
            "addr=0x7f0000000000 stream=0 result=0 stack=0");
  EXPECT_EQ(lines[7],
            "#7 footer events=3 events_dropped=0 stacks=0 stacks_failed=0 bytes_written=0 "
            "clean_exit=true t=10.000ms hook_conflicts=0");
  EXPECT_EQ(lines[8], "end: clean (footer present)");
}

// Recording stopped on a full disk: a footer then, another at exit with the exit status; the end
// line says why, from the last one.
TEST_F(DumpTest, FootersOfAStoppedRecordingSayWhyAndTheExitStatus) {
  std::vector<TracePacket> packets = SamplePackets();
  TracePacket at_exit = packets.back();
  packets.pop_back();
  TracePacket at_stop = at_exit;
  Footer* stop = at_stop.mutable_footer();
  stop->set_clean_exit(false);
  stop->set_events(3);
  stop->set_events_dropped(1);
  stop->set_stop_reason(DISK_FULL);
  stop->set_stopped_at_seq(3);
  packets.push_back(at_stop);
  Footer* exit = at_exit.mutable_footer();
  exit->set_events(9);
  exit->set_events_dropped(7);
  exit->set_exit_status(0);
  exit->set_stop_reason(DISK_FULL);
  exit->set_stopped_at_seq(3);
  packets.push_back(at_exit);
  const ProgramRun run = Gpumem({"dump", Write("stopped.trace", FramedAll(packets))});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), packets.size() + 2) << run.out;
  EXPECT_EQ(lines[7],
            "#7 footer events=3 events_dropped=1 stacks=0 stacks_failed=0 bytes_written=0 "
            "clean_exit=false t=10.000ms hook_conflicts=0 stop_reason=disk_full "
            "stopped_at_seq=3");
  EXPECT_EQ(lines[8],
            "#8 footer events=9 events_dropped=7 stacks=0 stacks_failed=0 bytes_written=0 "
            "clean_exit=true t=10.000ms exit_status=0 hook_conflicts=0 stop_reason=disk_full "
            "stopped_at_seq=3");
  EXPECT_EQ(
      lines[9],
      "end: recording stopped at event 3 of 9: no space left on the file system (7 events not "
      "recorded); exited with status 0");
  EXPECT_EQ(lines[10],
            "note: 7 events could not be recorded (not written: the trace could not take them); "
            "totals are lower bounds");
}

// Operations made while gpumem was busy on their thread (a signal handler that interrupted it):
// the footer line counts them, a note after the end line says the totals are lower bounds, in
// the full dump and with --counts.
TEST_F(DumpTest, EventsNotRecordedAreNoted) {
  std::vector<TracePacket> packets = SamplePackets();
  Footer* footer = packets.back().mutable_footer();
  footer->set_events_reentrant(4);
  footer->set_events_dropped(1);
  const std::string trace = Write("reentrant.trace", FramedAll(packets));
  const ProgramRun run = Gpumem({"dump", trace});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), packets.size() + 2) << run.out;
  EXPECT_EQ(lines[7],
            "#7 footer events=3 events_dropped=1 stacks=0 stacks_failed=0 bytes_written=0 "
            "clean_exit=true t=10.000ms hook_conflicts=0 events_reentrant=4");
  const std::string note =
      "5 events could not be recorded (4 made inside a signal handler that interrupted gpumem, or "
      "from within gpumem; 1 not written: the trace could not take them); totals are lower bounds";
  EXPECT_EQ(lines[9], "note: " + note);
  const ProgramRun counts = Gpumem({"dump", "--counts", trace});
  EXPECT_EQ(counts.exit_code, 0) << counts.err;
  EXPECT_NE(counts.out.find("note: " + trace + ": " + note + "\n"), std::string::npos)
      << counts.out;
}

// `gpumem record` appends how the program ended: after the footer, or without one when a signal
// killed the program.
TEST_F(DumpTest, HowTheProgramEndedIsPrinted) {
  std::vector<TracePacket> packets = SamplePackets();
  TracePacket exited;
  exited.mutable_process_end()->set_pid(4242);
  exited.mutable_process_end()->set_exit_status(3);
  packets.push_back(exited);
  ProgramRun run = Gpumem({"dump", Write("exited.trace", FramedAll(packets))});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), packets.size() + 1) << run.out;
  EXPECT_EQ(lines[packets.size() - 1],
            "#8 process_end pid=4242 exit_status=3 signal=0 core_dumped=false");
  EXPECT_EQ(lines.back(), "end: clean (footer present)");

  packets.pop_back();  // the process end
  packets.pop_back();  // the footer
  TracePacket killed;
  killed.mutable_process_end()->set_pid(4242);
  killed.mutable_process_end()->set_signal(9);
  killed.mutable_process_end()->set_core_dumped(true);
  packets.push_back(killed);
  run = Gpumem({"dump", Write("killed.trace", FramedAll(packets))});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  lines = Lines(run.out);
  ASSERT_EQ(lines.size(), packets.size() + 1) << run.out;
  EXPECT_EQ(lines[packets.size() - 1],
            "#7 process_end pid=4242 exit_status=0 signal=9 (Killed) core_dumped=true");
  EXPECT_EQ(lines.back(), "end: no footer — the process did not exit cleanly");
}

TEST_F(DumpTest, TornTracePrintsWhatItCanThenOneErrorLineAndExits2) {
  std::string intact;
  const std::vector<TracePacket> packets = SamplePackets();
  for (size_t i = 0; i + 1 < packets.size(); ++i) intact += Framed(packets[i]);
  const std::string footer = Framed(packets.back());
  const std::string path = Write("torn.trace", intact + footer.substr(0, 4));

  const ProgramRun run = Gpumem({"dump", path});
  EXPECT_EQ(run.exit_code, 2);
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), packets.size()) << run.out;  // every complete packet, then end:
  EXPECT_EQ(lines.back(),
            "end: no footer — the process did not exit cleanly; torn packet at byte " +
                std::to_string(intact.size()) + " (last 4 bytes unreadable)");
  EXPECT_EQ(run.err, "gpumem: error: " + path + ": torn packet at byte " +
                         std::to_string(intact.size()) + ": its length (" +
                         std::to_string(footer.size() - 2) +
                         " bytes) runs past the end of the file (last 4 bytes unreadable)\n");
}

TEST_F(DumpTest, CrashedTraceWithoutFooterButIntactIsNoError) {
  std::string bytes;
  const std::vector<TracePacket> packets = SamplePackets();
  for (size_t i = 0; i + 1 < packets.size(); ++i) bytes += Framed(packets[i]);
  const ProgramRun run = Gpumem({"dump", Write("crashed.trace", bytes + std::string(100, '\0'))});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Lines(run.out).back(),
            "end: no footer — the process did not exit cleanly; 100 bytes of unused zero space at "
            "the end");
}

TEST_F(DumpTest, UnparseablePacketIsShownAndNamed) {
  const std::vector<TracePacket> packets = SamplePackets();
  std::string bytes = Framed(packets[0]);
  const uint64_t cut_at = bytes.size();
  std::string cut = Framed(packets[4]);
  std::fill(cut.begin() + 6, cut.end(), '\0');
  bytes += cut + Framed(packets[5]);
  const std::string path = Write("cut.trace", bytes);
  const ProgramRun run = Gpumem({"dump", path});
  EXPECT_EQ(run.exit_code, 2);
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), 4u) << run.out;
  EXPECT_EQ(lines[1].rfind("#1 unparseable at byte " + std::to_string(cut_at), 0), 0u) << lines[1];
  EXPECT_EQ(run.err, "gpumem: error: " + path + ": 1 packet(s) did not parse (first at byte " +
                         std::to_string(cut_at) + ")\n");
}

TEST_F(DumpTest, InputErrorsAreOneLineAndExit2) {
  struct Case {
    std::string path;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {dir_ + "/missing.trace", "No such file or directory"},
      {Write("notes.txt", "hello\n"), "not a gpumem trace (no header packet at byte 0)"},
      {Write("empty.trace", ""), "empty trace: the recorded process wrote nothing"},
      {GPUMEM_BUILD_DIR "/bin/gpumem", "not a gpumem trace (no header packet at byte 0)"},
  };
  for (const Case& c : cases) {
    const ProgramRun run = Gpumem({"dump", c.path});
    EXPECT_EQ(run.exit_code, 2) << c.path;
    EXPECT_EQ(run.out, "") << c.path;
    EXPECT_EQ(run.err, "gpumem: error: " + c.path + ": " + c.reason + "\n");
  }
}

TEST_F(DumpTest, UsageErrorsSayWhatAndWhereToLook) {
  ProgramRun run = Gpumem({"dump", "--bogus", CleanTrace()});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "gpumem: error: dump: unknown flag '--bogus'\nTry 'gpumem dump --help'.\n");
  EXPECT_EQ(run.out, "");

  run = Gpumem({"dump"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "gpumem: error: dump: no trace file given\nTry 'gpumem dump --help'.\n");

  run = Gpumem({"frobnicate"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "gpumem: error: unknown command 'frobnicate'\nTry 'gpumem --help'.\n");

  run = Gpumem({});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err.rfind("usage: gpumem", 0), 0u) << run.err;
}

TEST_F(DumpTest, HelpAndVersion) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"help"}, {"-h"}}) {
    const ProgramRun run = Gpumem(args);
    EXPECT_EQ(run.exit_code, 0);
    EXPECT_EQ(run.out.rfind("usage: gpumem COMMAND", 0), 0u) << run.out;
  }
  ProgramRun run = Gpumem({"help", "dump"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out.rfind("usage: gpumem dump", 0), 0u) << run.out;
  run = Gpumem({"dump", "--help"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out.rfind("usage: gpumem dump", 0), 0u) << run.out;
  run = Gpumem({"--version"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out.rfind("gpumem 0.", 0), 0u) << run.out;
  EXPECT_EQ(Lines(run.out).size(), 1u);
}

TEST_F(DumpTest, CountsOverFilesAndDirectories) {
  const std::string sub = dir_ + "/many";
  fs::create_directories(sub);
  const std::string bytes = FramedAll(SamplePackets());
  std::ofstream(sub + "/a.trace", std::ios::binary) << bytes;
  std::ofstream(sub + "/b.trace", std::ios::binary) << bytes;
  std::ofstream(sub + "/ignored.txt") << "not a trace";

  // Each file: 1 MiB and 4 KiB allocated, the 1 MiB freed.
  ProgramRun run = Gpumem({"dump", "--counts", sub});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "alloc cudaMalloc count=4 bytes=2105344\n"
            "free cudaFree count=2 bytes=2097152\n"
            "live count=2 bytes=8192\n");
  run = Gpumem({"dump", "--counts", CleanTrace("one.trace"), sub});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "alloc cudaMalloc count=6 bytes=3158016\n"
            "free cudaFree count=3 bytes=3145728\n"
            "live count=3 bytes=12288\n");

  // A damaged file still counts what it has, and is named on stderr.
  const std::string torn = Write("torn.trace", bytes.substr(0, bytes.size() - 2));
  run = Gpumem({"dump", "--counts", torn});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out,
            "alloc cudaMalloc count=2 bytes=1052672\n"
            "free cudaFree count=1 bytes=1048576\n"
            "live count=1 bytes=4096\n");
  EXPECT_EQ(run.err.rfind("gpumem: error: " + torn + ": torn packet at byte ", 0), 0u) << run.err;
}

TEST_F(DumpTest, SeveralFilesAreHeadedByTheirPath) {
  const std::string a = CleanTrace("a.trace");
  const std::string b = CleanTrace("b.trace");
  const ProgramRun run = Gpumem({"dump", a, b});
  EXPECT_EQ(run.exit_code, 0);
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), 2 * (SamplePackets().size() + 2));
  EXPECT_EQ(lines[0], "== " + a);
  EXPECT_EQ(lines[SamplePackets().size() + 2], "== " + b);
}

TEST_F(DumpTest, AnEmptyDirectoryIsAnError) {
  const ProgramRun run = Gpumem({"dump", dir_});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "gpumem: error: " + dir_ + ": directory holds no *.trace file\n");
}

}  // namespace
}  // namespace gpumem
