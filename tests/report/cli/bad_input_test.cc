// Bad input to the reading commands, run as a user would (the built gpumem, its exit code, stdout
// and stderr): `dump`, `report` and `check --no-leaks` on an empty file, a real trace cut in the
// middle of a packet, one with bytes flipped, files of other formats, a missing file, a directory
// without traces, and an unknown flag. Each must exit 2 (never crash) with exactly one line on
// stderr, "gpumem: error: ..." (usage errors add "Try 'gpumem X --help'."). A damaged trace is
// still printed as far as it could be read (report/README.md). tests/fuzz/ fuzzes the same path.
// FIFOs, as a trace, in a directory of traces or named as a module in one, block no command.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "core/trace_reader.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "report/cli/commands.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::ReadFile;
using testing::SourcePath;
using testing::TempDir;

// The reading commands, each with the arguments before the trace path.
struct Command {
  std::string name;
  std::vector<std::string> args;
};
const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {"dump", {"dump"}},
      {"report", {"report"}},
      {"check", {"check", "--no-leaks"}},
  };
  return commands;
}

ProgramRun Gpumem(const Command& command, const std::vector<std::string>& more) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem")};
  argv.insert(argv.end(), command.args.begin(), command.args.end());
  argv.insert(argv.end(), more.begin(), more.end());
  ProgramRun run = testing::RunProgram(argv, {{"GPUMEM_SYMBOL_PATH", ""}});
  EXPECT_EQ(run.spawn_error, 0) << "cannot run " << argv[0];
  return run;
}

size_t LineCount(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

// Exit 2, not a signal, and stderr exactly one line: "gpumem: error: <path>: <reason...>".
void ExpectOneErrorLine(const ProgramRun& run, const std::string& path,
                        const std::string& reason_prefix) {
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_EQ(LineCount(run.err), 1u) << run.err;
  EXPECT_EQ(run.err.back(), '\n') << run.err;
  const std::string prefix = "gpumem: error: " + path + ": " + reason_prefix;
  EXPECT_EQ(run.err.rfind(prefix, 0), 0u) << "stderr: " << run.err << "expected: " << prefix;
}

// The bundled H100 recording of samples/leak_loop: 20 cudaMalloc, 10 never freed.
std::string RealTrace() { return ReadFile(SourcePath("samples/traces/leak_loop-h200.trace")); }

// Byte offsets of the packets of `path`, as the reader frames them.
std::vector<uint64_t> PacketOffsets(const std::string& path) {
  TraceReader reader;
  std::string error;
  std::vector<uint64_t> offsets;
  if (!reader.Open(path, &error)) {
    ADD_FAILURE() << error;
    return offsets;
  }
  for (Packet packet; reader.Next(&packet);) offsets.push_back(packet.offset);
  return offsets;
}

class BadInputTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_.File(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  TempDir dir_;
};

TEST_F(BadInputTest, ZeroLengthFile) {
  const std::string path = Write("empty.trace", "");
  for (const Command& command : Commands()) {
    SCOPED_TRACE(command.name);
    const ProgramRun run = Gpumem(command, {path});
    ExpectOneErrorLine(run, path, "empty trace: the recorded process wrote nothing");
    EXPECT_EQ(run.out, "");
  }
}

TEST_F(BadInputTest, OtherFormatsAreNotATrace) {
  const std::string png("\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0", 29);
  // gzip of nothing: magic, deflate, no flags, no mtime, an empty final block, crc 0, size 0.
  const std::string gzip("\x1f\x8b\x08\0\0\0\0\0\0\x03\x03\0\0\0\0\0\0\0\0\0", 20);
  const std::vector<std::string> paths = {
      Write("image.trace", png),
      Write("archive.trace.gz", gzip),
      "/bin/true",  // an ELF binary
      Write("report.json", "{\"gpumem_report\": 1, \"traces\": []}\n"),
  };
  for (const std::string& path : paths) {
    for (const Command& command : Commands()) {
      SCOPED_TRACE(command.name + " " + path);
      const ProgramRun run = Gpumem(command, {path});
      ExpectOneErrorLine(run, path, "not a gpumem trace (no header packet at byte 0)");
      EXPECT_EQ(run.out, "");
    }
  }
}

TEST_F(BadInputTest, MissingFile) {
  const std::string path = dir_.File("missing.trace");
  for (const Command& command : Commands()) {
    SCOPED_TRACE(command.name);
    const ProgramRun run = Gpumem(command, {path});
    ExpectOneErrorLine(run, path, "No such file or directory");
    EXPECT_EQ(run.out, "");
  }
}

TEST_F(BadInputTest, DirectoryWithoutTraces) {
  Write("notes.txt", "not a trace\n");
  for (const Command& command : Commands()) {
    SCOPED_TRACE(command.name);
    const ProgramRun run = Gpumem(command, {dir_.path()});
    ExpectOneErrorLine(run, dir_.path(), "directory holds no *.trace file");
    EXPECT_EQ(run.out, "");
  }
}

TEST_F(BadInputTest, UnknownFlag) {
  const std::string trace = SourcePath("samples/traces/leak_loop-h200.trace");
  for (const Command& command : Commands()) {
    SCOPED_TRACE(command.name);
    const ProgramRun run = Gpumem(command, {"--frobnicate", trace});
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(run.err, "gpumem: error: " + command.name +
                           ": unknown flag '--frobnicate'\nTry 'gpumem " + command.name +
                           " --help'.\n");
    EXPECT_EQ(run.out, "");
  }
}

TEST_F(BadInputTest, TruncatedInThePacketPrintsWhatItCanAndExits2) {
  const std::string whole = RealTrace();
  const std::vector<uint64_t> offsets = PacketOffsets(Write("whole.trace", whole));
  ASSERT_GT(offsets.size(), 10u);
  const uint64_t torn_at = offsets[offsets.size() / 2];
  const std::string path = Write("torn.trace", whole.substr(0, torn_at + 5));  // 5 bytes of it
  const std::string torn = "torn packet at byte " + std::to_string(torn_at);

  ProgramRun run = Gpumem(Commands()[0], {path});  // dump: every packet before the cut
  ExpectOneErrorLine(run, path, torn + ": ");
  EXPECT_EQ(LineCount(run.out), offsets.size() / 2 + 1) << run.out;
  EXPECT_NE(run.out.find("\nend: no footer — the process did not exit cleanly; " + torn +
                         " (last 5 bytes unreadable)\n"),
            std::string::npos)
      << run.out;

  run = Gpumem(Commands()[1], {path});  // report: what it could read, said to be incomplete
  ExpectOneErrorLine(run, path, torn + ": ");
  EXPECT_EQ(run.out.rfind("process: pid ", 0), 0u) << run.out;
  EXPECT_NE(run.out.find("end: no footer — the process did not exit cleanly; " + torn),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("leaks: the process did not exit cleanly"), std::string::npos) << run.out;

  run = Gpumem(Commands()[2], {path});  // check: no verdict on a damaged trace
  ExpectOneErrorLine(run, path, torn + ": ");
  EXPECT_EQ(run.out, "");
}

TEST_F(BadInputTest, CorruptInTheMiddleSkipsToTheNextPacketAndExits2) {
  std::string bytes = RealTrace();
  const std::vector<uint64_t> offsets = PacketOffsets(Write("whole.trace", bytes));
  ASSERT_GT(offsets.size(), 10u);
  const uint64_t corrupt_at = offsets[offsets.size() / 2];
  for (uint64_t i = corrupt_at; i < corrupt_at + 8; ++i) bytes[i] = static_cast<char>(~bytes[i]);
  const std::string path = Write("corrupt.trace", bytes);
  const std::string corrupt = "corrupt data at byte " + std::to_string(corrupt_at) + ": skipped ";

  ProgramRun run = Gpumem(Commands()[0], {path});  // dump: the packets before and after
  ExpectOneErrorLine(run, path, corrupt);
  EXPECT_NE(run.out.find("footer events="), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\nend: clean (footer present); corrupt data at byte " +
                         std::to_string(corrupt_at) + " (skipped "),
            std::string::npos)
      << run.out;

  run = Gpumem(Commands()[1], {path});
  ExpectOneErrorLine(run, path, corrupt);
  EXPECT_EQ(run.out.rfind("process: pid ", 0), 0u) << run.out;

  run = Gpumem(Commands()[2], {path});
  ExpectOneErrorLine(run, path, corrupt);
  EXPECT_EQ(run.out, "");
}

// Bytes flipped anywhere: inside a packet's contents protobuf may still parse them (a trace has no
// checksums), so the outcome is either a normal run (exit 0, or 1 for check's broken budget) with
// nothing on stderr, or exit 2 with one error line; never a crash, never a second line.
TEST_F(BadInputTest, BytesFlippedAnywhereNeverCrash) {
  const std::string whole = RealTrace();
  size_t damaged = 0;
  for (size_t at = 1; at < whole.size(); at += whole.size() / 23) {
    std::string bytes = whole;
    for (size_t i = at; i < std::min(at + 4, bytes.size()); ++i) {
      bytes[i] = static_cast<char>(bytes[i] ^ 0x5A);
    }
    const std::string path = Write("flipped-" + std::to_string(at) + ".trace", bytes);
    for (const Command& command : Commands()) {
      SCOPED_TRACE(command.name + " " + path);
      const ProgramRun run = Gpumem(command, {path});
      if (run.exit_code == 2) {
        ++damaged;
        ExpectOneErrorLine(run, path, "");
      } else {
        EXPECT_TRUE(run.exit_code == 0 || (command.name == "check" && run.exit_code == 1))
            << run.exit_code << " " << run.err;
        EXPECT_EQ(run.err, "");
      }
    }
  }
  EXPECT_GT(damaged, 0u);  // some flips hit the framing or break a packet
}

// seq 1: a 1 MiB cudaMalloc on thread `tid` whose stack is stack 3.
TracePacket MebibyteAllocation(uint32_t tid) {
  TracePacket allocation;
  MemoryEvent* event = allocation.mutable_memory();
  event->set_seq(1);
  event->set_tid(tid);
  event->set_api(CUDA_MALLOC);
  event->set_kind(DEVICE);
  event->set_action(ALLOC);
  event->set_size(1 << 20);
  event->set_address(0x7f0000000000);
  event->set_stack_id(3);
  return allocation;
}

// A trace of a program whose names are not UTF-8 (argv, the host, an allocator setting, a device,
// a module directory, a thread name the kernel cut inside a character, a kernel, a Python file)
// and hold control characters: every command reads it, shows each byte that is not UTF-8 as \xNN
// and each control character escaped (no forged line), and libprotobuf prints nothing.
std::vector<TracePacket> PacketsWithNamesThatAreNotUtf8() {
  std::vector<TracePacket> packets = {testing::HeaderPacket()};
  Header* header = packets[0].mutable_header();
  header->set_host("node\xff");
  header->add_command_line("train\xc3");  // cut inside "é"
  header->add_command_line("--tag=\x1b[31mred\nfake line");
  Option* option = header->add_option();
  option->set_name("PYTORCH_CUDA_ALLOC_CONF");
  option->set_value("expandable_segments:False,x:\xfe");
  TracePacket device;
  device.mutable_device()->set_ordinal(0);
  device.mutable_device()->set_name("GPU \xfe");
  packets.push_back(device);
  TracePacket module;
  module.mutable_module()->set_id(1);
  module.mutable_module()->set_path("/opt/\xff/libtrain.so");
  module.mutable_module()->set_start(0x400000);
  module.mutable_module()->set_end(0x500000);
  packets.push_back(module);
  TracePacket thread;
  thread.mutable_thread()->set_tid(77);
  thread.mutable_thread()->set_name("ααααααα\xce");  // "αααααααα" cut at 15 bytes
  packets.push_back(thread);
  TracePacket code;
  code.mutable_python_code()->set_id(5);
  code.mutable_python_code()->set_filename("/srv/\xff/train.py");
  code.mutable_python_code()->set_function("step");
  packets.push_back(code);
  TracePacket stack;
  stack.mutable_stack()->set_id(3);
  stack.mutable_stack()->add_frame(0x401234);
  stack.mutable_stack()->add_python_code(5);
  stack.mutable_stack()->add_python_line(12);
  stack.mutable_stack()->add_python_group(0);
  packets.push_back(stack);
  TracePacket kernel;
  kernel.mutable_kernel_name()->set_id(9);
  kernel.mutable_kernel_name()->set_name("fill\xff");
  packets.push_back(kernel);
  packets.push_back(MebibyteAllocation(/*tid=*/77));
  TracePacket launch;
  launch.mutable_launch()->set_seq(2);
  launch.mutable_launch()->set_tid(77);
  launch.mutable_launch()->set_api(CU_LAUNCH_KERNEL);
  launch.mutable_launch()->set_kernel_id(9);
  launch.mutable_launch()->set_stack_id(3);
  packets.push_back(launch);
  packets.push_back(testing::FooterPacket(2));
  return packets;
}

void ExpectReadAndEscaped(const ProgramRun& run) {
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  for (const char raw : {'\xff', '\xfe', '\x1b'}) {
    EXPECT_EQ(run.out.find(raw), std::string::npos) << run.out;
  }
  EXPECT_EQ(run.out.find("\nfake line"), std::string::npos) << run.out;
}

TEST_F(BadInputTest, NamesThatAreNotUtf8AreReadAndShownEscaped) {
  const std::string path =
      Write("names.trace", testing::FramedAll(PacketsWithNamesThatAreNotUtf8()));
  const std::string process =
      "process: pid 4242 on node\\xff: train\\xc3 --tag=\\x1b[31mred\\nfake line\n";

  ProgramRun run = Gpumem({"dump", {"dump"}}, {path});
  ExpectReadAndEscaped(run);
  for (const char* shown :
       {"host=\"node\\xff\"", "command_line=[\"train\\xc3\" \"--tag=\\x1b[31mred\\nfake line\"]",
        "PYTORCH_CUDA_ALLOC_CONF=\"expandable_segments:False,x:\\xfe\"", "name=\"GPU \\xfe\"",
        "path=\"/opt/\\xff/libtrain.so\"", "name=\"ααααααα\\xce\"",
        "filename=\"/srv/\\xff/train.py\"", "\"fill\\xff\""}) {
    EXPECT_NE(run.out.find(shown), std::string::npos) << shown << "\n" << run.out;
  }

  run = Gpumem({"report", {"report", "--peak", "--kernels", "--stacks", "full"}}, {path});
  ExpectReadAndEscaped(run);
  for (const std::string& shown :
       {process, std::string("device 0 (GPU \\xfe)"), std::string("/srv/\\xff/train.py:12 in step"),
        std::string("fill\\xff"), std::string("libtrain.so+0x401234")}) {
    EXPECT_NE(run.out.find(shown), std::string::npos) << shown << "\n" << run.out;
  }

  run = Gpumem({"check", {"check", "--max-peak", "1GiB"}}, {path});
  ExpectReadAndEscaped(run);
}

// An error line naming a path that is not UTF-8 and holds a newline: still one line, escaped.
TEST_F(BadInputTest, AnErrorLineNamesAPathEscaped) {
  const std::string path = dir_.File("gone\xff\n.trace");
  for (const Command& command : Commands()) {
    SCOPED_TRACE(command.name);
    const ProgramRun run = Gpumem(command, {path});
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_EQ(run.err, "gpumem: error: " + dir_.File("gone\\xff\\n.trace") +
                           ": No such file or directory\n");
  }
}

// Whatever libprotobuf logs (a string field that is not UTF-8, in a build of the schema where text
// was `string`) never reaches the user: gpumem says what failed in its own one line.
TEST(ProtobufLogs, NeverReachTheUser) {
  report::InstallProtobufLogHandler();
  ::testing::internal::CaptureStderr();
  GOOGLE_LOG(ERROR) << "String field 'gpumem.Header.command_line' contains invalid UTF-8 data";
  GOOGLE_LOG(WARNING) << "a warning";
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

// Every command, with the arguments before the trace path; outputs go into `dir`.
std::vector<Command> EveryCommand(const std::string& dir) {
  return {
      {"dump", {"dump"}},
      {"dump --counts", {"dump", "--counts"}},
      {"dump --symbolize", {"dump", "--symbolize"}},
      {"report", {"report"}},
      {"report --json", {"report", "--json"}},
      {"check", {"check", "--max-peak", "1TiB"}},
      {"symbolize", {"symbolize"}},
      {"whatif", {"whatif", "--device-memory", "1GiB"}},
      {"export", {"export", "--format", "folded", "-o", dir + "/out.folded"}},
      {"view", {"view", "-o", dir + "/out.html"}},
  };
}

// The command run with `more` (and `overrides` of the environment), killed if it is still running
// after 20 s: a command that blocks fails the test instead of hanging it.
ProgramRun GpumemWithin(const Command& command, const std::vector<std::string>& more,
                        const std::map<std::string, std::string>& overrides = {}) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem")};
  argv.insert(argv.end(), command.args.begin(), command.args.end());
  argv.insert(argv.end(), more.begin(), more.end());
  std::map<std::string, std::string> environment = {{"GPUMEM_SYMBOL_PATH", ""}};
  for (const auto& [name, value] : overrides) environment[name] = value;
  ProgramRun run =
      testing::RunProgramWithin(std::chrono::seconds(20), argv, testing::Environment(environment));
  EXPECT_EQ(run.spawn_error, 0) << "cannot run " << argv[0];
  EXPECT_FALSE(run.timed_out) << command.name << " blocked";
  return run;
}

std::string MakeFifo(const std::string& path) {
  EXPECT_EQ(mkfifo(path.c_str(), 0600), 0) << path << ": " << std::strerror(errno);
  return path;
}

// A FIFO is no trace: opening it for reading would wait for a writer. Every command says so in
// one line, at once.
TEST_F(BadInputTest, AFifoGivenAsATraceIsRefusedWithoutBlocking) {
  const std::string fifo = MakeFifo(dir_.File("pipe.trace"));
  for (const Command& command : EveryCommand(dir_.path())) {
    SCOPED_TRACE(command.name);
    const ProgramRun run = GpumemWithin(command, {fifo});
    ExpectOneErrorLine(run, fifo, "not a regular file");
  }
}

// A FIFO named *.trace in a directory of traces is refused the same way (one line naming it); the
// traces beside it are still read.
TEST_F(BadInputTest, AFifoInADirectoryOfTracesIsRefusedAndTheOthersRead) {
  Write("good.trace", RealTrace());
  const std::string fifo = MakeFifo(dir_.File("pipe.trace"));
  for (const Command& command : Commands()) {
    SCOPED_TRACE(command.name);
    const ProgramRun run = GpumemWithin(command, {dir_.path()});
    ExpectOneErrorLine(run, fifo, "not a regular file");
    if (command.name != "check") {  // check: no verdict with bad input
      EXPECT_NE(run.out, "");
    }
  }
}

// A trace of one allocation whose stack's frame lies in `module`.
std::string TraceWithModule(const Module& module) {
  TracePacket header = testing::HeaderPacket();
  TracePacket with_module;
  *with_module.mutable_module() = module;
  TracePacket stack;
  stack.mutable_stack()->set_id(3);
  stack.mutable_stack()->add_frame(module.start() + 0x1234);
  return testing::FramedAll(
      {header, with_module, stack, MebibyteAllocation(/*tid=*/0), testing::FooterPacket(1)});
}

Module ModuleAt(const std::string& path) {
  Module module;
  module.set_id(1);
  module.set_path(path);
  module.set_start(0x400000);
  module.set_end(0x500000);
  module.set_load_bias(0x400000);
  return module;
}

// A module path recorded in a trace names a file on this machine, whatever it is there: a FIFO is
// skipped like a missing binary (its frames stay module+offset), and no command blocks on it.
TEST_F(BadInputTest, AFifoNamedAsAModuleIsSkipped) {
  const std::string fifo = MakeFifo(dir_.File("libpipe.so"));
  const std::string trace = Write("module.trace", TraceWithModule(ModuleAt(fifo)));
  for (const Command& command : EveryCommand(dir_.path())) {
    SCOPED_TRACE(command.name);
    const ProgramRun run = GpumemWithin(command, {trace});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.err.find("error"), std::string::npos) << run.err;
  }
  const ProgramRun report = GpumemWithin(Commands()[1], {trace});
  EXPECT_NE(report.out.find("libpipe.so+0x1234"), std::string::npos) << report.out;
}

// The same for a FIFO found in GPUMEM_SYMBOL_PATH under the name of a module missing here.
TEST_F(BadInputTest, AFifoInTheSymbolPathIsSkipped) {
  const std::string symbols = dir_.File("symbols");
  std::filesystem::create_directory(symbols);
  MakeFifo(symbols + "/libgone.so");
  Module module = ModuleAt("/nonexistent-gpumem-test/libgone.so");
  module.set_build_id(std::string("\x12\x34\x56\x78", 4));
  const std::string trace = Write("gone.trace", TraceWithModule(module));
  for (const Command& command : EveryCommand(dir_.path())) {
    SCOPED_TRACE(command.name);
    const ProgramRun run = GpumemWithin(command, {trace}, {{"GPUMEM_SYMBOL_PATH", symbols}});
    EXPECT_EQ(run.exit_code, 0) << run.err;
  }
}

}  // namespace
}  // namespace gpumem
