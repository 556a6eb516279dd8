// Python frames: synthetic traces whose native frames are named by SymbolizedFrame
// packets (a python3.12 binary with _PyEval_EvalFrameDefault frames, an allocator library), with
// Python frames in 3.11 style (several per eval frame) and 3.10 style (one each), spliced into one
// stack; more Python groups than eval frames; --python-only; --group-by user/python/stack; dump;
// JSON against the schema. And a trace without Python frames reads the same under every flag.
#include "report/stacks/python_stacks.h"

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using ::gpumem::testing::BuildPath;
using ::gpumem::testing::FooterPacket;
using ::gpumem::testing::FramedAll;
using ::gpumem::testing::HeaderPacket;
using ::gpumem::testing::ProgramRun;
using ::gpumem::testing::RunProgram;
using ::gpumem::testing::SourcePath;
using ::gpumem::testing::TempDir;

constexpr uint64_t kMiB = 1 << 20;

// Native return addresses: an allocator library (module 2) and the interpreter (module 1).
constexpr uint64_t kAllocA = 0x7f0000001000;  // alloc_a (alloc.cc:10)
constexpr uint64_t kAllocB = 0x7f0000002000;  // alloc_b (alloc.cc:20)
constexpr uint64_t kEval1 = 0x401000;         // _PyEval_EvalFrameDefault
constexpr uint64_t kEval2 = 0x402000;         // _PyEval_EvalFrameDefault
constexpr uint64_t kEval3 = 0x403000;         // _PyEval_EvalFrameDefault.cold
constexpr uint64_t kCall = 0x405000;          // _PyFunction_Vectorcall
constexpr uint64_t kMain = 0x406000;          // main

// Python code objects.
enum Code : uint64_t {
  kTrainModule = 1,  // /home/u/train.py <module>
  kTrainStep = 2,    // /home/u/train.py train_step
  kLinear = 3,       // .../site-packages/torch/nn/modules/linear.py Linear.forward
  kCallImpl = 4,     // .../site-packages/torch/nn/modules/module.py Module._call_impl
  kNetForward = 5,   // /home/u/model.py Net.forward
};

constexpr char kTorch[] = "/usr/lib/python3.12/site-packages/torch/nn/modules/";

struct PyFrame {
  uint64_t code;
  uint32_t line;
  uint32_t group;
};

class PythonTrace {
 public:
  PythonTrace() {
    TracePacket header = HeaderPacket();
    header.mutable_header()->add_command_line("python3");
    header.mutable_header()->add_command_line("train.py");
    packets_.push_back(header);
    AddModule(1, "/usr/bin/python3.12", 0x400000, 0x800000);
    AddModule(2, "/usr/lib/liballoc.so", 0x7f0000000000, 0x7f0000100000);
    TracePacket status;
    status.mutable_python_status()->set_version("3.12.3");
    status.mutable_python_status()->set_supported(true);
    packets_.push_back(status);
    AddCode(kTrainModule, "/home/u/train.py", "<module>", 1);
    AddCode(kTrainStep, "/home/u/train.py", "train_step", 30);
    AddCode(kLinear, std::string(kTorch) + "linear.py", "Linear.forward", 124);
    AddCode(kCallImpl, std::string(kTorch) + "module.py", "Module._call_impl", 1500);
    AddCode(kNetForward, "/home/u/model.py", "Net.forward", 20);
    Symbolized(kAllocA, 2, "alloc_a", "alloc.cc", 10);
    Symbolized(kAllocB, 2, "alloc_b", "alloc.cc", 20);
    Symbolized(kEval1, 1, "_PyEval_EvalFrameDefault", "", 0);
    Symbolized(kEval2, 1, "_PyEval_EvalFrameDefault", "", 0);
    Symbolized(kEval3, 1, "_PyEval_EvalFrameDefault.cold", "", 0);
    Symbolized(kCall, 1, "_PyFunction_Vectorcall", "", 0);
    Symbolized(kMain, 1, "main", "", 0);
  }

  void Stack(uint64_t id, const std::vector<uint64_t>& native,
             const std::vector<PyFrame>& python = {}) {
    TracePacket packet;
    ::gpumem::Stack* stack = packet.mutable_stack();
    stack->set_id(id);
    for (uint64_t pc : native) stack->add_frame(pc);
    for (const PyFrame& frame : python) {
      stack->add_python_code(frame.code);
      stack->add_python_line(frame.line);
      stack->add_python_group(frame.group);
    }
    packets_.push_back(packet);
  }
  void Malloc(uint64_t stack_id, uint64_t size) {
    TracePacket packet;
    MemoryEvent* event = packet.mutable_memory();
    ++events_;
    event->set_seq(events_);
    event->set_timestamp_ns(events_ * 1000);
    event->set_api(CUDA_MALLOC);
    event->set_kind(DEVICE);
    event->set_action(ALLOC);
    event->set_device(0);
    event->set_size(size);
    event->set_address(0x7e0000000000 + events_ * 0x10000000);
    event->set_stack_id(stack_id);
    packets_.push_back(packet);
  }
  // Writes the trace (footer, then the SymbolizedFrame packets, as `gpumem symbolize` appends
  // them) to `path`.
  void Write(const std::string& path) const {
    std::vector<TracePacket> all = packets_;
    all.push_back(FooterPacket(events_));
    all.insert(all.end(), symbolized_.begin(), symbolized_.end());
    std::ofstream(path, std::ios::binary) << FramedAll(all);
  }

 private:
  void AddModule(uint32_t id, const std::string& path, uint64_t start, uint64_t end) {
    TracePacket packet;
    Module* module = packet.mutable_module();
    module->set_id(id);
    module->set_path(path);
    module->set_load_bias(start);
    module->set_start(start);
    module->set_end(end);
    packets_.push_back(packet);
  }
  void AddCode(uint64_t id, const std::string& file, const std::string& function, uint32_t first) {
    TracePacket packet;
    PythonCode* code = packet.mutable_python_code();
    code->set_id(id);
    code->set_filename(file);
    code->set_function(function);
    code->set_first_line(first);
    packets_.push_back(packet);
  }
  void Symbolized(uint64_t pc, uint32_t module, const std::string& function,
                  const std::string& file, uint32_t line) {
    TracePacket packet;
    SymbolizedFrame* frame = packet.mutable_symbolized_frame();
    frame->set_pc(pc);
    frame->set_module_id(module);
    ResolvedFrame* resolved = frame->add_frame();
    resolved->set_function(function);
    resolved->set_file(file);
    resolved->set_line(line);
    symbolized_.push_back(packet);
  }

  std::vector<TracePacket> packets_;
  std::vector<TracePacket> symbolized_;
  uint64_t events_ = 0;
};

// 3.11 style: linear.py, module.py and model.py run by the innermost eval frame, train.py's two
// frames by the next one.
std::vector<PyFrame> Training(uint32_t model_line) {
  return {{kLinear, 125, 0},
          {kCallImpl, 1520, 0},
          {kNetForward, model_line, 0},
          {kTrainStep, 42, 1},
          {kTrainModule, 60, 1}};
}

std::vector<std::string> Texts(const std::vector<Frame>& frames) {
  std::vector<std::string> texts;
  for (const Frame& frame : frames) texts.push_back(frame.ToString());
  return texts;
}

ProgramRun Gpumem(const std::vector<std::string>& args) { return testing::RunGpumem(args); }

const std::vector<std::string> kTraining311 = {
    "alloc_a (alloc.cc:10)",
    "torch/nn/modules/linear.py:125 in Linear.forward",
    "torch/nn/modules/module.py:1520 in Module._call_impl",
    "/home/u/model.py:30 in Net.forward",
    "_PyFunction_Vectorcall (python3.12+0x5000)",
    "/home/u/train.py:42 in train_step",
    "/home/u/train.py:60 in <module>",
    "main (python3.12+0x6000)",
};

TEST(PythonFramesTest, SplicesGroupsIntoTheEvalFrames) {
  TempDir dir;
  PythonTrace trace;
  trace.Stack(1, {kAllocA, kEval1, kCall, kEval2, kMain}, Training(30));
  // 3.10 style: one Python frame per eval frame (the third a .cold part of the eval loop).
  trace.Stack(2, {kAllocA, kEval1, kCall, kEval2, kCall, kEval3, kMain},
              {{kNetForward, 30, 0}, {kTrainStep, 42, 1}, {kTrainModule, 60, 2}});
  // The native stack cut after the first eval frame: groups 1 and 2 follow it, in order.
  trace.Stack(3, {kAllocA, kEval1},
              {{kNetForward, 30, 0}, {kTrainStep, 42, 1}, {kTrainModule, 60, 2}});
  // An eval frame without a group stays native; no Python frames: native only.
  trace.Stack(4, {kAllocB, kEval1, kMain}, {});
  trace.Stack(5, {kAllocB, kEval1, kCall, kEval2}, {{kNetForward, 30, 1}});
  trace.Write(dir.File("t.trace"));

  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Read(dir.File("t.trace"));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_NE((*file)->FindPythonCode(kLinear), nullptr);
  EXPECT_EQ((*file)->FindPythonCode(kLinear)->function(), "Linear.forward");
  EXPECT_EQ((*file)->FindPythonCode(99), nullptr);
  ASSERT_TRUE((*file)->python_status().has_value());
  EXPECT_EQ((*file)->python_status()->version(), "3.12.3");

  Symbolizer symbolizer(file->get());
  EXPECT_EQ(Texts(symbolizer.Symbolize(1)), kTraining311);
  EXPECT_EQ(Texts(symbolizer.Symbolize(2)),
            (std::vector<std::string>{
                "alloc_a (alloc.cc:10)", "/home/u/model.py:30 in Net.forward",
                "_PyFunction_Vectorcall (python3.12+0x5000)", "/home/u/train.py:42 in train_step",
                "_PyFunction_Vectorcall (python3.12+0x5000)", "/home/u/train.py:60 in <module>",
                "main (python3.12+0x6000)"}));
  EXPECT_EQ(Texts(symbolizer.Symbolize(3)),
            (std::vector<std::string>{"alloc_a (alloc.cc:10)", "/home/u/model.py:30 in Net.forward",
                                      "/home/u/train.py:42 in train_step",
                                      "/home/u/train.py:60 in <module>"}));
  EXPECT_EQ(Texts(symbolizer.Symbolize(4)),
            (std::vector<std::string>{"alloc_b (alloc.cc:20)",
                                      "_PyEval_EvalFrameDefault (python3.12+0x1000)",
                                      "main (python3.12+0x6000)"}));
  EXPECT_EQ(Texts(symbolizer.Symbolize(4)), Texts(symbolizer.SymbolizeNative(4)));
  EXPECT_EQ(
      Texts(symbolizer.Symbolize(5)),
      (std::vector<std::string>{
          "alloc_b (alloc.cc:20)", "_PyEval_EvalFrameDefault (python3.12+0x1000)",
          "_PyFunction_Vectorcall (python3.12+0x5000)", "/home/u/model.py:30 in Net.forward"}));
  const std::vector<Frame> mixed = symbolizer.Symbolize(1);
  ASSERT_TRUE(mixed[1].python);
  EXPECT_EQ(mixed[1].file, std::string(kTorch) + "linear.py");
  EXPECT_EQ(mixed[1].line, 125);
  EXPECT_EQ(mixed[1].module, "");
  EXPECT_EQ(Texts(PythonOnly(mixed)),
            (std::vector<std::string>{kTraining311[1], kTraining311[2], kTraining311[3],
                                      kTraining311[5], kTraining311[6]}));
  EXPECT_EQ(Texts(PythonOnly(symbolizer.Symbolize(4))), Texts(symbolizer.Symbolize(4)));
}

TEST(PythonFramesTest, Rules) {
  EXPECT_TRUE(IsEvalFrameFunction("_PyEval_EvalFrameDefault"));
  EXPECT_TRUE(IsEvalFrameFunction("_PyEval_EvalFrameDefault.cold"));
  EXPECT_FALSE(IsEvalFrameFunction("_PyEval_EvalFrameDefaultX"));
  EXPECT_FALSE(IsEvalFrameFunction("PyEval_EvalCode"));
  EXPECT_FALSE(IsEvalFrameFunction("_PyEval_Vector"));
  EXPECT_TRUE(IsLibraryPythonFile("/venv/lib/python3.11/site-packages/torch/nn/functional.py"));
  EXPECT_TRUE(IsLibraryPythonFile("/usr/lib/python3/dist-packages/numpy/core/numeric.py"));
  EXPECT_TRUE(IsLibraryPythonFile("/usr/lib/python3.12/threading.py"));
  EXPECT_TRUE(IsLibraryPythonFile("<frozen runpy>"));
  EXPECT_TRUE(IsLibraryPythonFile("<string>"));
  EXPECT_FALSE(IsLibraryPythonFile("/home/u/train.py"));
  EXPECT_FALSE(IsLibraryPythonFile("train.py"));
  EXPECT_FALSE(IsLibraryPythonFile("<stdin>"));
  EXPECT_EQ(ShortPythonPath("/venv/lib/python3.11/site-packages/torch/nn/functional.py"),
            "torch/nn/functional.py");
  EXPECT_EQ(ShortPythonPath("/usr/lib/python3.12/threading.py"), "python3.12/threading.py");
  EXPECT_EQ(ShortPythonPath("/home/u/train.py"), "/home/u/train.py");
  GroupBy group_by = GroupBy::kStack;
  EXPECT_TRUE(ParseGroupBy("user", &group_by));
  EXPECT_EQ(group_by, GroupBy::kUser);
  EXPECT_FALSE(ParseGroupBy("function", &group_by));

  Frame native;
  native.function = "f";
  native.module = "/lib/libx.so";
  Frame library;
  library.python = true;
  library.file = "/venv/lib/python3.11/site-packages/torch/nn/functional.py";
  library.line = 7;
  library.function = "linear";
  Frame user = library;
  user.file = "/home/u/train.py";
  user.function = "step";
  // user: the innermost user frame; only library frames: the innermost Python frame.
  EXPECT_EQ(CallSiteFrame({native, library, user}, GroupBy::kUser)->file, "/home/u/train.py");
  EXPECT_EQ(CallSiteFrame({native, library}, GroupBy::kUser)->function, "linear");
  EXPECT_EQ(CallSiteFrame({native, library, user}, GroupBy::kPython)->function, "linear");
  EXPECT_EQ(CallSiteFrame({native, library, user}, GroupBy::kStack)->function, "f");
  // Without Python frames python is the whole stack; without a user frame either, every rule
  // names the innermost frame.
  EXPECT_EQ(CallSiteKey({native}, GroupBy::kPython), CallSiteKey({native}, GroupBy::kStack));
  for (GroupBy rule : {GroupBy::kUser, GroupBy::kPython}) {
    EXPECT_EQ(CallSiteFrame({native}, rule)->function, "f");
  }
  Frame other_native = native;
  other_native.function = "g";
  EXPECT_EQ(CallSiteKey({native, library, user}, GroupBy::kUser),
            CallSiteKey({other_native, user}, GroupBy::kUser));
  EXPECT_NE(CallSiteKey({native, library, user}, GroupBy::kPython),
            CallSiteKey({other_native, user}, GroupBy::kPython));
  EXPECT_EQ(CallSiteKey({native, library, user}, GroupBy::kPython),
            CallSiteKey({other_native, library, user}, GroupBy::kPython));
}

// Stack 1 and 2: the same Python stack (user line model.py:30) under different native frames;
// stack 3: the native frames of stack 1, another user line (model.py:31).
std::string GroupingTrace(const TempDir& dir) {
  PythonTrace trace;
  trace.Stack(1, {kAllocA, kEval1, kCall, kEval2, kMain}, Training(30));
  trace.Stack(2, {kAllocB, kEval1, kCall, kEval2, kMain}, Training(30));
  trace.Stack(3, {kAllocA, kEval1, kCall, kEval2, kMain}, Training(31));
  trace.Malloc(1, 4 * kMiB);
  trace.Malloc(2, 2 * kMiB);
  trace.Malloc(3, 1 * kMiB);
  const std::string path = dir.File("grouping.trace");
  trace.Write(path);
  return path;
}

TEST(PythonFramesTest, ReportGroupsByTheUsersLine) {
  TempDir dir;
  const std::string trace = GroupingTrace(dir);
  const ProgramRun user = Gpumem({"report", "--peak", trace});
  ASSERT_EQ(user.exit_code, 0) << user.err;
  EXPECT_NE(user.out.find("  6.00 MiB   85.7%  2 allocations\n"
                          "      model.py:30 in Net.forward\n"
                          "      via torch.nn.Linear.forward → liballoc.so\n"),
            std::string::npos)
      << user.out;
  EXPECT_NE(user.out.find("  1.00 MiB   14.3%  1 allocation\n      model.py:31 in Net.forward\n"),
            std::string::npos)
      << user.out;
  // --stacks full: every frame, the interpreter's own left out.
  const ProgramRun full = Gpumem({"report", "--peak", "--stacks", "full", trace});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  std::string expected = "  6.00 MiB   85.7%  2 allocations\n";
  for (const std::string& frame : kTraining311) {
    if (frame.find("python3.12") == std::string::npos) expected += "      " + frame + "\n";
  }
  EXPECT_NE(full.out.find(expected), std::string::npos) << full.out;
  EXPECT_EQ(full.out.find("python3.12"), std::string::npos) << full.out;
  EXPECT_EQ(user.out.find("alloc_b"), std::string::npos) << user.out;  // not the largest member
  // The default is user.
  const ProgramRun explicit_user = Gpumem({"report", "--peak", "--group-by", "user", trace});
  EXPECT_EQ(explicit_user.out, user.out);

  const ProgramRun python = Gpumem({"report", "--peak", "--group-by", "python", trace});
  ASSERT_EQ(python.exit_code, 0) << python.err;
  EXPECT_NE(python.out.find("  6.00 MiB   85.7%  2 allocations\n"), std::string::npos)
      << python.out;

  const ProgramRun stack =
      Gpumem({"report", "--peak", "--group-by", "stack", "--stacks", "full", trace});
  ASSERT_EQ(stack.exit_code, 0) << stack.err;
  EXPECT_NE(stack.out.find("  4.00 MiB   57.1%  1 allocation\n"), std::string::npos) << stack.out;
  EXPECT_NE(stack.out.find("  2.00 MiB   28.6%  1 allocation\n      alloc_b (alloc.cc:20)\n"),
            std::string::npos)
      << stack.out;

  const ProgramRun only = Gpumem({"report", "--peak", "--python-only", "--stacks", "full", trace});
  ASSERT_EQ(only.exit_code, 0) << only.err;
  EXPECT_NE(only.out.find("  6.00 MiB   85.7%  2 allocations\n"
                          "      torch/nn/modules/linear.py:125 in Linear.forward\n"
                          "      torch/nn/modules/module.py:1520 in Module._call_impl\n"
                          "      /home/u/model.py:30 in Net.forward\n"
                          "      /home/u/train.py:42 in train_step\n"
                          "      /home/u/train.py:60 in <module>\n"
                          "  1.00 MiB"),
            std::string::npos)
      << only.out;
  EXPECT_EQ(only.out.find("alloc_a"), std::string::npos) << only.out;

  const ProgramRun bad = Gpumem({"report", "--group-by", "line", trace});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--group-by"), std::string::npos) << bad.err;
}

TEST(PythonFramesTest, CheckNamesTheLargestUserCallSite) {
  TempDir dir;
  const std::string trace = GroupingTrace(dir);
  const ProgramRun user =
      Gpumem({"check", "--max-peak", "1MiB", "--markdown", dir.File("user.md"), trace});
  EXPECT_EQ(user.exit_code, 1) << user.err;
  const std::string markdown = ::gpumem::testing::ReadFile(dir.File("user.md"));
  EXPECT_NE(markdown.find("largest call site 6.00 MiB: `model.py:30 in Net.forward`"),
            std::string::npos)
      << markdown;
  const ProgramRun stack = Gpumem({"check", "--max-peak", "1MiB", "--markdown",
                                   dir.File("stack.md"), "--group-by", "stack", trace});
  EXPECT_EQ(stack.exit_code, 1) << stack.err;
  const std::string by_stack = ::gpumem::testing::ReadFile(dir.File("stack.md"));
  EXPECT_NE(by_stack.find("largest call site 4.00 MiB: `model.py:30 in Net.forward`"),
            std::string::npos)
      << by_stack;
}

TEST(PythonFramesTest, GrowthAndOomUseTheSameGrouping) {
  TempDir dir;
  PythonTrace trace;
  trace.Stack(1, {kAllocA, kEval1, kCall, kEval2, kMain}, Training(30));
  trace.Stack(2, {kAllocB, kEval1, kCall, kEval2, kMain}, Training(30));
  trace.Stack(9, {kAllocA, kEval1, kCall, kEval2, kMain}, Training(50));
  // Iterations start at stack 9; each keeps 1 MiB from stack 1 or 2 alternately: apart, neither
  // rises at 80% of the boundaries; as one user call site, it grows by 1 MiB per iteration. (Seven
  // iterations: with six, stacks 1 and 2 would allocate 3 times each and be taken for the loop.)
  for (int i = 0; i < 7; ++i) {
    trace.Malloc(9, 16 * kMiB);
    trace.Malloc(i % 2 == 0 ? 1 : 2, 1 * kMiB);
  }
  trace.Write(dir.File("growth.trace"));
  const ProgramRun user = Gpumem({"report", "--growth", dir.File("growth.trace")});
  ASSERT_EQ(user.exit_code, 0) << user.err;
  EXPECT_NE(user.out.find("+1.00 MiB/iteration  rose at 6 of 6"), std::string::npos) << user.out;
  const ProgramRun stack =
      Gpumem({"report", "--growth", "--group-by", "stack", dir.File("growth.trace")});
  ASSERT_EQ(stack.exit_code, 0) << stack.err;
  EXPECT_EQ(stack.out.find("+1.00 MiB/iteration"), std::string::npos) << stack.out;
}

TEST(PythonFramesTest, DumpPrintsPythonFrames) {
  TempDir dir;
  const std::string trace = GroupingTrace(dir);
  const ProgramRun raw = Gpumem({"dump", trace});
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_NE(raw.out.find(" python_code id=3 filename=\"" + std::string(kTorch) +
                         "linear.py\" function=\"Linear.forward\" first_line=124\n"),
            std::string::npos)
      << raw.out;
  EXPECT_NE(raw.out.find(" python_status version=\"3.12.3\" supported=true detail=\"\"\n"),
            std::string::npos)
      << raw.out;
  EXPECT_NE(raw.out.find(" stack id=1 frames=[0x7f0000001000 0x401000 0x405000 0x402000 0x406000] "
                         "python=[3:125:0 4:1520:0 5:30:0 2:42:1 1:60:1]\n"),
            std::string::npos)
      << raw.out;
  const ProgramRun symbolized = Gpumem({"dump", "--symbolize", trace});
  ASSERT_EQ(symbolized.exit_code, 0) << symbolized.err;
  std::string joined;
  for (const std::string& frame : kTraining311) joined += (joined.empty() ? "" : " <- ") + frame;
  EXPECT_NE(symbolized.out.find(" stack id=1 frames=[" + joined + "]\n"), std::string::npos)
      << symbolized.out;
}

TEST(PythonFramesTest, WithoutPythonFramesEveryFlagReadsTheSame) {
  const std::string trace = SourcePath("samples/traces/leak_loop-h200.trace");
  const ProgramRun plain = Gpumem({"report", "--peak", "--leaks", "--growth", "--kernels", trace});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {"--group-by", "stack"}, {"--group-by", "python"}, {"--python-only"}}) {
    std::vector<std::string> args = {"report", "--peak", "--leaks", "--growth", "--kernels"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back(trace);
    const ProgramRun run = Gpumem(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.out, plain.out) << flags[0];
  }
}

// The JSON of a trace with Python frames validates against report/report.schema.json.
TEST(PythonFramesTest, JsonWithPythonFramesValidates) {
  TempDir dir;
  const std::string trace = GroupingTrace(dir);
  const ProgramRun report = Gpumem({"report", "--json", "--peak", "--leaks", "--growth", "--oom",
                                    "--kernels", "--summary", "--fragmentation", trace});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string python_frame =
      "{\"text\":\"/home/u/model.py:30 in Net.forward\",\"function\":\"Net.forward\","
      "\"file\":\"/home/u/model.py\",\"line\":30,\"module\":\"\",\"module_offset\":0,\"pc\":0,"
      "\"inlined\":false,\"python\":true}";
  EXPECT_NE(report.out.find(python_frame), std::string::npos) << report.out;
  const std::string document = dir.File("report.json");
  std::ofstream(document, std::ios::binary) << report.out;
  const char* check = R"py(
import json, sys
try:
    import jsonschema
except ImportError:
    sys.exit(77)
schema = json.load(open(sys.argv[1]))
errors = list(jsonschema.validators.validator_for(schema)(schema).iter_errors(json.load(open(sys.argv[2]))))
for error in errors[:10]:
    print("/".join(str(p) for p in error.absolute_path), error.message[:300])
sys.exit(1 if errors else 0)
)py";
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    const ProgramRun run =
        RunProgram({python, "-c", check, SourcePath("report/report.schema.json"), document});
    if (run.spawn_error != 0 || run.exit_code == 77) continue;
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    return;
  }
  GTEST_SKIP() << "python3 with jsonschema not found (tests/install_deps.sh installs it)";
}

}  // namespace
}  // namespace gpumem::report
