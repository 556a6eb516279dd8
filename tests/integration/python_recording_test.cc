// Python frames recorded in-process: a real python3 under the real preload library, allocating
// through the fake libcudart with ctypes (tests/integration/programs/python_allocs.py), gives
// stacks whose Python frames name the script's functions at the lines the script marks, down to
// `<module>`; a deep recursion is capped and flagged; a thread has its own frames; a process
// without Python, and GPUMEM_PYTHON_FRAMES=0, record none. Each case runs under /usr/bin/python3
// (CI's Debian interpreter), and under every interpreter GPUMEM_TEST_PYTHONS (colon-separated
// paths) adds, e.g. the other CPython versions of a developer's machine.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::RecordingEnvironment;
using testing::RunProgram;
using testing::SourcePath;
using testing::TempDir;

constexpr uint64_t kSimpleSize = 1000001;
constexpr uint64_t kRecursionSize = 1000002;
constexpr uint64_t kThreadSize = 1000003;
constexpr uint64_t kUnicodeSize = 1000004;
constexpr uint64_t kMapSize = 1000005;
constexpr size_t kMaxPythonFrames = 128;  // core/python_frames.h

std::string Script() { return SourcePath("tests/integration/programs/python_allocs.py"); }

std::map<std::string, uint32_t> Markers() { return testing::MarkedLines(Script()); }

std::vector<std::string> Interpreters() {
  std::vector<std::string> found;
  for (const char* path : {"/usr/bin/python3"}) {
    if (std::filesystem::exists(path)) found.push_back(path);
  }
  if (const char* extra = getenv("GPUMEM_TEST_PYTHONS")) {
    std::stringstream list(extra);
    for (std::string path; std::getline(list, path, ':');) {
      if (!path.empty()) found.push_back(path);
    }
  }
  if (found.empty()) found.push_back("python3");  // from PATH
  return found;
}

struct Frame {
  std::string file;
  std::string function;
  uint32_t line = 0;
  uint32_t group = 0;
  uint32_t first_line = 0;
};

struct Recorded {
  std::map<uint64_t, Stack> stacks;
  std::map<uint64_t, PythonCode> codes;
  std::map<uint64_t, uint64_t> stack_of_size;  // allocation size -> stack id
  std::vector<PythonStatus> statuses;
  std::vector<Module> modules;
  size_t stacks_with_python = 0;

  // "libffi.so.8+0x6f7a": the same in every run, whatever address space layout.
  std::string Place(uint64_t pc) const {
    for (const Module& module : modules) {
      if (pc >= module.start() && pc < module.end()) {
        std::ostringstream text;
        text << std::filesystem::path(module.path()).filename().string() << "+0x" << std::hex
             << pc - module.load_bias();
        return text.str();
      }
    }
    return "?";
  }

  std::vector<Frame> PythonFrames(uint64_t size) const {
    std::vector<Frame> frames;
    auto stack_id = stack_of_size.find(size);
    if (stack_id == stack_of_size.end()) return frames;
    auto stack = stacks.find(stack_id->second);
    if (stack == stacks.end()) return frames;
    const Stack& s = stack->second;
    for (int i = 0; i < s.python_code_size(); ++i) {
      Frame frame;
      auto code = codes.find(s.python_code(i));
      if (code != codes.end()) {
        frame.file = std::filesystem::path(code->second.filename()).filename().string();
        frame.function = code->second.function();
        frame.first_line = code->second.first_line();
      }
      frame.line = i < s.python_line_size() ? s.python_line(i) : 0;
      frame.group = i < s.python_group_size() ? s.python_group(i) : ~0u;
      frames.push_back(frame);
    }
    return frames;
  }
};

Recorded Read(const std::string& trace) {
  Recorded recorded;
  std::set<uint64_t> codes_seen;
  auto file =
      report::TraceFile::Read(trace, [&](const report::PacketPosition&, const TracePacket& packet) {
        if (packet.has_python_code())
          recorded.codes[packet.python_code().id()] = packet.python_code();
        if (packet.has_python_status()) recorded.statuses.push_back(packet.python_status());
        if (packet.has_module()) recorded.modules.push_back(packet.module());
        if (packet.has_stack()) {
          const Stack& stack = packet.stack();
          // Every code id it names was written before it.
          for (uint64_t code : stack.python_code()) {
            EXPECT_TRUE(recorded.codes.count(code)) << "stack " << stack.id() << " code " << code;
          }
          EXPECT_EQ(stack.python_line_size(), stack.python_code_size());
          EXPECT_EQ(stack.python_group_size(), stack.python_code_size());
          if (stack.python_code_size() > 0) ++recorded.stacks_with_python;
          recorded.stacks[stack.id()] = stack;
        }
        if (packet.has_memory() && packet.memory().action() == Action::ALLOC) {
          recorded.stack_of_size[packet.memory().size()] = packet.memory().stack_id();
        }
      });
  EXPECT_TRUE(file.ok()) << file.status();
  return recorded;
}

Recorded RecordPython(const std::string& python, const TempDir& dir,
                      const std::map<std::string, std::string>& extra = {}) {
  const std::string trace = dir.File("python.trace");
  auto environment = RecordingEnvironment(trace);
  for (const auto& [name, value] : extra) environment[name] = value;
  const ProgramRun run = RunProgram({python, Script(), "libcudart.so.13"}, environment);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.err.find("gpumem:"), std::string::npos) << run.err;
  return Read(trace);
}

std::string Describe(const std::vector<Frame>& frames) {
  std::string text;
  for (const Frame& f : frames) {
    text += "\n  " + f.file + ":" + std::to_string(f.line) + " in " + f.function + " (group " +
            std::to_string(f.group) + ")";
  }
  return text;
}

// The interpreter's own idea of its version, e.g. "3.11.2".
std::string VersionOf(const std::string& python) {
  const ProgramRun run =
      RunProgram({python, "-c", "import platform; print(platform.python_version())"});
  std::string version = run.out;
  while (!version.empty() && (version.back() == '\n' || version.back() == '\r')) version.pop_back();
  return version;
}

class PythonRecording : public ::testing::TestWithParam<std::string> {};

TEST_P(PythonRecording, FramesNameTheScriptsFunctionsAndLines) {
  const std::string python = GetParam();
  const std::map<std::string, uint32_t> line = Markers();
  TempDir dir;
  const Recorded recorded = RecordPython(python, dir);

  ASSERT_EQ(recorded.statuses.size(), 1u);
  EXPECT_TRUE(recorded.statuses[0].supported()) << recorded.statuses[0].detail();
  EXPECT_EQ(recorded.statuses[0].version(), VersionOf(python));

  // make_buffer() <- Model.build() <- main() <- <module>.
  const std::vector<Frame> simple = recorded.PythonFrames(kSimpleSize);
  ASSERT_EQ(simple.size(), 5u) << Describe(simple);
  const std::vector<std::pair<std::string, std::string>> expected = {{"allocate", "allocate"},
                                                                     {"make_buffer", "make_buffer"},
                                                                     {"build", "Model.build"},
                                                                     {"main", "main.build"},
                                                                     {"<module>", "module"}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(simple[i].file, "python_allocs.py") << Describe(simple);
    // co_qualname from 3.11 (Model.build), co_name before (build).
    const std::string& function = simple[i].function;
    EXPECT_TRUE(function == expected[i].first || function.ends_with("." + expected[i].first))
        << i << Describe(simple);
    EXPECT_EQ(simple[i].line, line.at(expected[i].second)) << i << Describe(simple);
    EXPECT_GT(simple[i].first_line, 0u);
    EXPECT_LE(simple[i].first_line, simple[i].line);
  }
  EXPECT_EQ(simple[0].group, 0u);
  for (size_t i = 1; i < simple.size(); ++i) EXPECT_GE(simple[i].group, simple[i - 1].group);

  // More than 200 frames deep: capped, flagged, innermost first.
  const Stack& deep = recorded.stacks.at(recorded.stack_of_size.at(kRecursionSize));
  EXPECT_TRUE(deep.python_truncated());
  EXPECT_EQ(static_cast<size_t>(deep.python_code_size()), kMaxPythonFrames);
  const std::vector<Frame> recursion = recorded.PythonFrames(kRecursionSize);
  ASSERT_GE(recursion.size(), 3u);
  EXPECT_EQ(recursion[0].line, line.at("allocate"));
  EXPECT_EQ(recursion[1].function, "recurse");
  EXPECT_EQ(recursion[1].line, line.at("recurse.bottom"));
  for (size_t i = 2; i < recursion.size(); ++i) {
    EXPECT_EQ(recursion[i].function, "recurse") << i;
    EXPECT_EQ(recursion[i].line, line.at("recurse.call")) << i;
  }

  // A threading.Thread: its own frames, ending in threading's bootstrap, not in main().
  const std::vector<Frame> thread = recorded.PythonFrames(kThreadSize);
  ASSERT_GE(thread.size(), 3u) << Describe(thread);
  EXPECT_EQ(thread[0].line, line.at("allocate"));
  EXPECT_EQ(thread[1].function, "in_thread");
  EXPECT_EQ(thread[1].line, line.at("in_thread"));
  EXPECT_EQ(thread.back().file, "threading.py") << Describe(thread);
  for (const Frame& frame : thread) EXPECT_NE(frame.function, "<module>") << Describe(thread);

  // A non-ASCII function name, decoded to UTF-8 from the str object's UCS2/UCS4 data.
  const std::vector<Frame> unicode = recorded.PythonFrames(kUnicodeSize);
  ASSERT_GE(unicode.size(), 2u);
  EXPECT_EQ(unicode[1].function, "ünïcode_函数");
  EXPECT_EQ(unicode[1].line, line.at("unicode"));

  // map() calls from_map from C: the frames older than it run in another interpreter activation.
  const std::vector<Frame> mapped = recorded.PythonFrames(kMapSize);
  ASSERT_EQ(mapped.size(), 5u) << Describe(mapped);
  EXPECT_EQ(mapped[1].line, line.at("from_map"));
  EXPECT_EQ(mapped[2].line, line.at("via_map"));
  EXPECT_GT(mapped[2].group, mapped[1].group) << Describe(mapped);
  EXPECT_EQ(mapped[3].line, line.at("main.via_map"));

  // The same native stack (ctypes into cudaMalloc, from allocate()) from different Python lines
  // is a different stack each time.
  std::set<uint64_t> ids;
  for (uint64_t size : {kSimpleSize, kRecursionSize, kThreadSize, kUnicodeSize, kMapSize}) {
    EXPECT_NE(recorded.stack_of_size.at(size), 0u);
    ids.insert(recorded.stack_of_size.at(size));
  }
  EXPECT_EQ(ids.size(), 5u);
}

TEST_P(PythonRecording, SwitchedOffRecordsNoPythonFrames) {
  TempDir dir;
  const Recorded recorded = RecordPython(GetParam(), dir, {{"GPUMEM_PYTHON_FRAMES", "0"}});
  EXPECT_EQ(recorded.stacks_with_python, 0u);
  EXPECT_TRUE(recorded.statuses.empty());
  EXPECT_TRUE(recorded.codes.empty());
  // Native stacks as before.
  EXPECT_NE(recorded.stack_of_size.at(kSimpleSize), 0u);
  EXPECT_FALSE(recorded.stacks.at(recorded.stack_of_size.at(kSimpleSize)).frame().empty());
}

// Native stacks end at the interpreter's eval loop (its frame kept, where the Python frames are
// spliced in); GPUMEM_INTERPRETER_FRAMES=1 unwinds on to the interpreter's main(). The frames
// below the cut and the Python frames are the same either way.
TEST_P(PythonRecording, NativeFramesEndAtTheEvalLoop) {
  TempDir cut_dir;
  TempDir full_dir;
  const Recorded cut = RecordPython(GetParam(), cut_dir);
  const Recorded full = RecordPython(GetParam(), full_dir, {{"GPUMEM_INTERPRETER_FRAMES", "1"}});
  for (uint64_t size : {kSimpleSize, kThreadSize, kMapSize}) {
    const Stack& short_stack = cut.stacks.at(cut.stack_of_size.at(size));
    const Stack& long_stack = full.stacks.at(full.stack_of_size.at(size));
    ASSERT_GT(short_stack.frame_size(), 0) << size;
    // Python's main thread: at least Py_RunMain, Py_BytesMain and main cut off; a thread: the
    // eval loop's callers up to start_thread.
    EXPECT_GE(long_stack.frame_size(), short_stack.frame_size() + 3) << size;
    for (int i = 0; i < short_stack.frame_size(); ++i) {
      EXPECT_EQ(cut.Place(short_stack.frame(i)), full.Place(long_stack.frame(i)))
          << size << " frame " << i;
    }
    EXPECT_EQ(Describe(cut.PythonFrames(size)), Describe(full.PythonFrames(size))) << size;
  }
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonRecording, ::testing::ValuesIn(Interpreters()),
                         [](const auto& info) {
                           std::string name;
                           for (char c : info.param) name += isalnum(c) ? c : '_';
                           return name + "_" + std::to_string(info.index);
                         });

TEST(PythonRecording, ProcessWithoutPythonHasNoPythonFramesNorStatus) {
  TempDir dir;
  const std::string trace = dir.File("native.trace");
  const ProgramRun run =
      RunProgram({BuildPath("tests/programs/launch_kernels")}, RecordingEnvironment(trace));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const Recorded recorded = Read(trace);
  EXPECT_FALSE(recorded.stacks.empty());
  EXPECT_EQ(recorded.stacks_with_python, 0u);
  EXPECT_TRUE(recorded.statuses.empty());
  EXPECT_TRUE(recorded.codes.empty());
}

}  // namespace
}  // namespace gpumem
