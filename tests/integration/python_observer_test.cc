// gpumem's Python observer and PyTorch (interpose/python/sitecustomize.py): a training script on
// the fake torch (tests/integration/programs/torch_oom.py, fake_torch/) runs under the real
// preload library and the fake CUDA, with the observer on PYTHONPATH as `gpumem record` puts it,
// on every CPython 3.10-3.13 of this machine (those whose Python frames gpumem reads). `gpumem
// dump` must show a framework_oom for each way PyTorch's out-of-memory error was seen (the
// allocator's observer hook: every version; the error raised: caught or not from 3.12 on,
// uncaught before), with the request, the limit and the script's line in its stack, and each
// backward pass begun at the script's line and ended. The program's output and exit status are
// those of a run without gpumem.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/python_interpreters.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::RecordingEnvironment;
using testing::RunProgram;
using testing::SourcePath;
using testing::TempDir;

constexpr uint64_t kDeviceMemory = uint64_t{2} << 30;  // the fake device's
constexpr uint64_t kCap = kDeviceMemory / 4;           // torch_oom.py's memory fraction

std::string Script() { return SourcePath("tests/integration/programs/torch_oom.py"); }

std::string MarkedLine(const std::string& name) {
  const std::map<std::string, uint32_t> markers = testing::MarkedLines(Script());
  auto it = markers.find(name);
  if (it == markers.end()) ADD_FAILURE() << "no marker " << name;
  return "torch_oom.py:" + std::to_string(it == markers.end() ? 0 : it->second) + " ";
}

std::map<std::string, std::string> ScriptEnvironment() {
  return {{"LD_LIBRARY_PATH", BuildPath("lib/fake")},
          {"PYTHONPATH", BuildPath("lib/python") + ":" +  // what `gpumem record` adds
                             SourcePath("tests/integration/programs/fake_torch")},
          {"FAKE_TORCH_ENGINE",
           BuildPath("tests/programs/site-packages/torch/lib/libfake_autograd_engine.so")},
          {"PYTHONDONTWRITEBYTECODE", "1"}};
}

struct OomRecord {
  std::string source;
  uint64_t requested = 0;
  bool from_message = false;
  uint64_t allocated = 0;
  uint64_t limit = 0;
  std::string stack;  // symbolized, innermost first
  std::string message;
};

struct PassRecord {
  uint64_t pass = 0;
  bool ended = false;
  std::string stack;
};

struct Recorded {
  ProgramRun run;
  std::vector<OomRecord> ooms;
  std::vector<PassRecord> passes;

  std::vector<OomRecord> From(const std::string& source) const {
    std::vector<OomRecord> found;
    for (const OomRecord& oom : ooms) {
      if (oom.source == source) found.push_back(oom);
    }
    return found;
  }
};

// The value of `key=` in a dump line, up to the next space.
std::string Value(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 2;
  return line.substr(start, line.find(' ', start) - start);
}

uint64_t Number(const std::string& line, const std::string& key) {
  const std::string value = Value(line, key);
  return value.empty() ? 0 : std::stoull(value);
}

Recorded ParseDump(const std::string& dump) {
  Recorded recorded;
  std::map<std::string, std::string> stacks;  // id -> its frames
  std::stringstream lines(dump);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" stack id=") != std::string::npos) {
      stacks[Value(line, "id")] = line.substr(line.find("frames=["));
    } else if (line.find(" framework_oom ") != std::string::npos) {
      OomRecord oom;
      oom.source = Value(line, "source");
      oom.requested = Number(line, "requested");
      oom.from_message = line.find("(from message)") != std::string::npos;
      oom.allocated = Number(line, "allocated");
      oom.limit = Number(line, "limit");
      oom.stack = stacks[Value(line, "stack")];
      const size_t message = line.find(" message=\"");
      if (message != std::string::npos) oom.message = line.substr(message + 10);
      recorded.ooms.push_back(oom);
    } else if (line.find(" backward_pass ") != std::string::npos) {
      recorded.passes.push_back({Number(line, "pass"), line.find(" ended ") != std::string::npos,
                                 stacks[Value(line, "stack")]});
    }
  }
  return recorded;
}

// torch_oom.py in `mode`, with `extra` in its environment, under gpumem recording `trace` (none:
// without gpumem).
ProgramRun RunScript(const std::string& python, const std::string& mode,
                     const std::map<std::string, std::string>& extra, const std::string& trace) {
  std::map<std::string, std::string> environment = ScriptEnvironment();
  // (merge keeps ScriptEnvironment's LD_LIBRARY_PATH.)
  if (!trace.empty()) environment.merge(RecordingEnvironment(trace));
  for (const auto& [name, value] : extra) environment[name] = value;
  return RunProgram({python, Script(), mode}, environment);
}

// torch_oom.py in `mode` under gpumem, and what `gpumem dump` shows of it.
Recorded RunUnderGpumem(const std::string& python, const std::string& mode,
                        const std::map<std::string, std::string>& extra = {}) {
  TempDir dir;
  const std::string trace = dir.File("observer.trace");
  const ProgramRun run = RunScript(python, mode, extra, trace);
  const ProgramRun dump = RunProgram({BuildPath("bin/gpumem"), "dump", "--symbolize", trace});
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  Recorded recorded = ParseDump(dump.out);
  recorded.run = run;
  return recorded;
}

// Lines of `text` but gpumem's own ("gpumem: ...").
std::string WithoutGpumemLines(const std::string& text) {
  std::stringstream lines(text);
  std::string kept;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("gpumem:", 0) != 0) kept += line + "\n";
  }
  return kept;
}

// The program behaves under gpumem as without it: exit status, output, error output.
void ExpectSameAsWithoutGpumem(const std::string& python, const std::string& mode,
                               const ProgramRun& under_gpumem, int exit_code) {
  const ProgramRun plain = RunScript(python, mode, {}, "");
  EXPECT_EQ(plain.exit_code, exit_code) << plain.out << plain.err;
  EXPECT_EQ(under_gpumem.exit_code, plain.exit_code) << under_gpumem.err;
  EXPECT_EQ(under_gpumem.out, plain.out);
  EXPECT_EQ(WithoutGpumemLines(under_gpumem.err), plain.err);
  EXPECT_NE(plain.out.find("CUDA initialised by import: False\n"), std::string::npos) << plain.out;
}

// The size of the program's last "allocating N bytes": the request that failed.
uint64_t LastRequest(const ProgramRun& run) {
  const size_t at = run.out.rfind("allocating ");
  return at == std::string::npos ? 0 : std::stoull(run.out.substr(at + 11));
}

// One error, as the observer hook or the exception saw it: where the script grew its batch.
void ExpectOom(const OomRecord& oom, uint64_t requested, uint64_t limit) {
  EXPECT_EQ(oom.requested, requested);
  EXPECT_EQ(oom.limit, limit);
  EXPECT_GT(oom.allocated, 0u);
  EXPECT_EQ(oom.from_message, oom.source == "exception");
  EXPECT_NE(oom.stack.find(MarkedLine("grow") + "in grow"), std::string::npos) << oom.stack;
  // The observer's own frame is left out: the innermost is the fake torch's allocator.
  EXPECT_EQ(oom.stack.rfind(
                "frames=[" + SourcePath("tests/integration/programs/fake_torch/torch/_C.py:"), 0),
            0u)
      << oom.stack;
  if (oom.source == "exception") {
    EXPECT_EQ(oom.message.rfind("CUDA out of memory. Tried to allocate ", 0), 0u) << oom.message;
  }
}

const std::vector<std::string>& Interpreters() {
  static const std::vector<std::string> found = testing::PythonInterpreters(10, 13);
  return found;
}

TEST(PythonObserver, ACaughtOutOfMemoryErrorIsSeenByTheAllocatorHookAndWhereRaised) {
  for (const std::string& python : Interpreters()) {
    SCOPED_TRACE(python);
    const Recorded recorded = RunUnderGpumem(python, "caught");
    ExpectSameAsWithoutGpumem(python, "caught", recorded.run, 0);
    const uint64_t requested = LastRequest(recorded.run);
    EXPECT_EQ(requested, kCap);  // the first batch over the cap
    const std::vector<OomRecord> hook = recorded.From("observer");
    ASSERT_EQ(hook.size(), 1u) << recorded.run.out;
    ExpectOom(hook[0], requested, kCap);
    // A caught error is seen where raised from 3.12 on (sys.monitoring), once however many frames
    // it passes through before it is caught.
    const std::vector<OomRecord> raised = recorded.From("exception");
    ASSERT_EQ(raised.size(), testing::PythonAtLeast(python, 12) ? 1u : 0u);
    if (!raised.empty()) ExpectOom(raised[0], requested, kCap);
  }
}

TEST(PythonObserver, AnUncaughtOutOfMemoryErrorIsSeenWhereRaisedOnEveryVersion) {
  for (const std::string& python : Interpreters()) {
    // "thread": the error ends a thread (threading.excepthook before 3.12), the program goes on.
    for (const std::string mode : {"uncaught", "thread"}) {
      SCOPED_TRACE(python + " " + mode);
      const Recorded recorded = RunUnderGpumem(python, mode);
      ExpectSameAsWithoutGpumem(python, mode, recorded.run, mode == "uncaught" ? 1 : 0);
      EXPECT_NE(recorded.run.err.find("OutOfMemoryError: CUDA out of memory"), std::string::npos)
          << recorded.run.err;
      ASSERT_EQ(recorded.ooms.size(), 2u) << recorded.run.out;
      for (const OomRecord& oom : recorded.ooms) ExpectOom(oom, LastRequest(recorded.run), kCap);
      EXPECT_EQ(recorded.From("exception").size(), 1u);
    }
  }
}

TEST(PythonObserver, AnUncappedOutOfMemoryErrorHasTheDeviceAsItsLimit) {
  for (const std::string& python : Interpreters()) {
    SCOPED_TRACE(python);
    const Recorded recorded = RunUnderGpumem(python, "uncapped");
    ExpectSameAsWithoutGpumem(python, "uncapped", recorded.run, 0);
    const uint64_t requested = LastRequest(recorded.run);
    EXPECT_EQ(requested, uint64_t{1} << 30);  // the first batch the device cannot hold
    ASSERT_EQ(recorded.From("observer").size(), 1u);
    ExpectOom(recorded.From("observer")[0], requested, kDeviceMemory);
    for (const OomRecord& oom : recorded.From("exception")) {
      ExpectOom(oom, requested, kDeviceMemory);
    }
  }
}

TEST(PythonObserver, EachBackwardPassBeginsAtTheScriptsLineAndEnds) {
  for (const std::string& python : Interpreters()) {
    SCOPED_TRACE(python);
    const Recorded recorded = RunUnderGpumem(python, "caught");
    EXPECT_EQ(recorded.run.exit_code, 0) << recorded.run.err;
    // Three steps of loss.backward(), then one torch.autograd.grad(): begin and end each.
    ASSERT_EQ(recorded.passes.size(), 8u) << recorded.run.out;
    for (size_t i = 0; i < recorded.passes.size(); ++i) {
      const PassRecord& pass = recorded.passes[i];
      EXPECT_EQ(pass.pass, i / 2 + 1);
      EXPECT_EQ(pass.ended, i % 2 == 1);
      if (pass.ended) continue;
      const std::string line = MarkedLine(i < 6 ? "backward" : "grad");
      EXPECT_NE(pass.stack.find(line + "in train"), std::string::npos) << pass.stack;
      EXPECT_EQ(pass.stack.find("sitecustomize.py"), std::string::npos) << pass.stack;
    }
  }
}

TEST(PythonObserver, ManyOrdinaryExceptionsAddNothing) {
  for (const std::string& python : Interpreters()) {
    SCOPED_TRACE(python);
    // 100000 ValueErrors raised and caught, then one out-of-memory error, caught.
    const Recorded recorded = RunUnderGpumem(python, "exceptions");
    ExpectSameAsWithoutGpumem(python, "exceptions", recorded.run, 0);
    EXPECT_EQ(recorded.From("observer").size(), 1u);
    EXPECT_EQ(recorded.From("exception").size(), testing::PythonAtLeast(python, 12) ? 1u : 0u);
    EXPECT_EQ(recorded.ooms.size(),
              recorded.From("observer").size() + recorded.From("exception").size());
  }
}

TEST(PythonObserver, AFailedImportOfTorchEndsTheProgramAsWithoutGpumem) {
  for (const std::string& python : Interpreters()) {
    SCOPED_TRACE(python);
    // The observer's frame in the import is cut from the traceback with importlib's own.
    const std::map<std::string, std::string> broken = {{"FAKE_TORCH_BROKEN", "1"}};
    TempDir dir;
    const ProgramRun under_gpumem = RunScript(python, "caught", broken, dir.File("broken.trace"));
    const ProgramRun plain = RunScript(python, "caught", broken, "");
    EXPECT_EQ(plain.exit_code, 1);
    EXPECT_NE(plain.err.find("_not_installed"), std::string::npos) << plain.err;
    EXPECT_EQ(under_gpumem.exit_code, plain.exit_code);
    EXPECT_EQ(WithoutGpumemLines(under_gpumem.err), plain.err);
  }
}

TEST(PythonObserver, GpumemPythonTorchLeavesPyTorchAlone) {
  const Recorded holders_off =
      RunUnderGpumem("python3", "uncaught", {{"GPUMEM_PYTHON_HOLDERS", "0"}});
  EXPECT_EQ(holders_off.ooms.size(), 2u);  // that switch is the list.append observer's only
  EXPECT_EQ(holders_off.passes.size(), 8u);
  const Recorded torch_off = RunUnderGpumem("python3", "uncaught", {{"GPUMEM_PYTHON_TORCH", "0"}});
  ExpectSameAsWithoutGpumem("python3", "uncaught", torch_off.run, 1);
  EXPECT_TRUE(torch_off.ooms.empty());
  EXPECT_TRUE(torch_off.passes.empty());
}

}  // namespace
}  // namespace gpumem
