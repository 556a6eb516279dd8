// The line that keeps memory alive: a Python script that appends each iteration's buffer to a
// list is recorded under the real preload library (fake CUDA), and `gpumem report --growth` names,
// under the growing call site, the script's line where the references were taken. "note" runs on
// any CPython (the script reports its appends itself, as the observer would); "observer" runs
// gpumem's Python observer (interpose/python/sitecustomize.py) under every CPython 3.12+ found
// (skipped where there is none, e.g. Debian's 3.11 alone).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
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

std::string Script() { return SourcePath("tests/integration/programs/python_holders.py"); }

uint32_t MarkedLine(const std::string& name) {
  const std::map<std::string, uint32_t> markers = testing::MarkedLines(Script());
  auto it = markers.find(name);
  if (it == markers.end()) ADD_FAILURE() << "no marker " << name;
  return it == markers.end() ? 0 : it->second;
}

// CPython 3.12+ (sys.monitoring) interpreters of this machine.
std::vector<std::string> ObserverInterpreters() { return testing::PythonInterpreters(12, 99); }

// The growth report of the script run in `mode`.
std::string GrowthOf(const std::string& python, const std::string& mode, const TempDir& dir,
                     const std::map<std::string, std::string>& extra = {}) {
  const std::string trace = dir.File("holders.trace");
  std::map<std::string, std::string> environment = RecordingEnvironment(trace);
  environment["PYTHONPATH"] = BuildPath("lib/python");  // what `gpumem record` adds
  environment.insert(extra.begin(), extra.end());
  const ProgramRun run = RunProgram({python, Script(), mode, "libcudart.so.13"}, environment);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const ProgramRun report = RunProgram({BuildPath("bin/gpumem"), "report", "--growth", trace});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  return report.out;
}

TEST(PythonHolders, GrowthNamesTheLineThatKeepsTheMemory) {
  TempDir dir;
  const std::string growth = GrowthOf("python3", "note", dir);
  const std::string script = "python_holders.py:";
  // The growing site is the allocating line (the innermost of the user's: cudaMalloc's call in
  // allocate()); under it, the line where references were taken.
  const size_t site = growth.find(script + std::to_string(MarkedLine("allocate")));
  ASSERT_NE(site, std::string::npos) << growth;
  const size_t kept = growth.find("kept by Python references (list.append) to 12 of its", site);
  ASSERT_NE(kept, std::string::npos) << growth;
  const size_t line = growth.find(script + std::to_string(MarkedLine("note")), kept);
  EXPECT_NE(line, std::string::npos) << growth;
  // The stand-in's own frame (the observer's, in real use) is not part of that stack, nor are the
  // native frames under it (ctypes, the interpreter): Python frames only.
  EXPECT_EQ(growth.find("observer_stand_in", kept), std::string::npos) << growth;
  EXPECT_EQ(growth.find(".so", kept), std::string::npos) << growth;
}

TEST(PythonHolders, TheObserverSeesListAppend) {
  const std::vector<std::string> pythons = ObserverInterpreters();
  if (pythons.empty())
    GTEST_SKIP() << "no CPython 3.12+ here (sys.monitoring); see GPUMEM_TEST_PYTHONS";
  for (const std::string& python : pythons) {
    SCOPED_TRACE(python);
    TempDir dir;
    const std::string growth = GrowthOf(python, "observer", dir);
    const size_t kept = growth.find("kept by Python references (list.append) to 12 of its");
    ASSERT_NE(kept, std::string::npos) << growth;
    EXPECT_NE(growth.find("python_holders.py:" + std::to_string(MarkedLine("append")), kept),
              std::string::npos)
        << growth;
    EXPECT_EQ(growth.find("sitecustomize.py", kept), std::string::npos) << growth;
    EXPECT_EQ(growth.find("fake_library"), std::string::npos) << growth;  // not the program's
  }
}

TEST(PythonHolders, WithoutTheObserverTheReportSaysWhatWouldNameTheLine) {
  TempDir dir;
  const std::string growth = GrowthOf("python3", "observer", dir, {{"GPUMEM_PYTHON_HOLDERS", "0"}});
  ASSERT_NE(growth.find("python_holders.py:" + std::to_string(MarkedLine("allocate"))),
            std::string::npos)
      << growth;
  EXPECT_EQ(growth.find("kept by"), std::string::npos) << growth;
  EXPECT_NE(growth.find("no list.append of these allocations was recorded"), std::string::npos)
      << growth;
}

}  // namespace
}  // namespace gpumem
