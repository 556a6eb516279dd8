// What a program hands over need not be UTF-8: a byte 0xff in its argv, in the directory of a
// module it loads and of its trace (GPUMEM_OUTPUT), in an allocator setting; a thread name the
// kernel cut inside a character. Recorded by the real preload library against the fake CUDA, the
// trace keeps them, and every reading command reads it (exit 0), shows them escaped (\xff) in
// output that is valid UTF-8, and lets no libprotobuf line through.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/test_support.h"

namespace gpumem::testing {
namespace {

namespace fs = std::filesystem;

// Python says whether `text` is valid UTF-8 (and, with `json`, valid JSON): "ok", or its error.
std::string PythonCheck(const std::string& text, bool json, const std::string& expression = "") {
  TempDir dir;
  std::ofstream(dir.File("out"), std::ios::binary) << text;
  const std::string script =
      "import json,sys\n"
      "text=open(sys.argv[1],'rb').read().decode('utf-8')\n" +
      std::string(json ? "d=json.loads(text)\n" : "") +
      (expression.empty() ? "" : "assert " + expression + ", " + expression + "\n") +
      "print('ok')\n";
  const ProgramRun run = RunProgram({GPUMEM_PYTHON3, "-c", script, dir.File("out")});
  return run.exit_code == 0 ? run.out.substr(0, run.out.find('\n')) : run.err;
}

class ProgramStringsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_dir_ = dir_.File("run\xff");
    fs::create_directory(run_dir_);
    plugin_ = run_dir_ + "/libdlopen_plugin.so";
    fs::copy_file(BuildPath("tests/programs/libdlopen_plugin.so"), plugin_);
    trace_ = run_dir_ + "/strings.trace";
    std::map<std::string, std::string> environment = RecordingEnvironment(trace_);
    environment["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:False,note:\xfe";
    const ProgramRun run = RunProgram(
        {BuildPath("tests/programs/program_strings"), plugin_, "--tag=\xff"}, environment);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    ASSERT_TRUE(fs::exists(trace_));
  }

  // `gpumem args... TRACE`: exit 0, stdout valid UTF-8 without a raw 0xff, nothing from
  // libprotobuf.
  ProgramRun Read(std::vector<std::string> args) {
    args.push_back(trace_);
    ProgramRun run = RunGpumem(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.err.find("libprotobuf"), std::string::npos) << run.err;
    EXPECT_EQ(run.out.find('\xff'), std::string::npos);
    EXPECT_EQ(PythonCheck(run.out, false), "ok");
    return run;
  }

  TempDir dir_;
  std::string run_dir_;
  std::string plugin_;
  std::string trace_;
};

void ExpectShown(const std::string& out, const std::vector<std::string>& shown) {
  for (const std::string& text : shown) {
    EXPECT_NE(out.find(text), std::string::npos) << text << "\n" << out;
  }
}

TEST_F(ProgramStringsTest, DumpShowsEachByteEscaped) {
  const ProgramRun run = Read({"dump"});
  ExpectShown(run.out,
              {"\"--tag=\\xff\"]", "run\\xff/libdlopen_plugin.so\"", "name=\"ααααααα\\xce\"",
               "GPUMEM_OUTPUT=\"" + dir_.path() + "/run\\xff/strings.trace\"", "note:\\xfe\""});
}

TEST_F(ProgramStringsTest, ReportAndCheckShowThemEscaped) {
  // The plugin's frames resolve: its file was found by the path as recorded.
  ExpectShown(Read({"report"}).out, {"--tag=\\xff\n", "plugin_allocate"});

  const ProgramRun json = Read({"report", "--json"});
  EXPECT_EQ(PythonCheck(json.out, true, "d['traces'][0]['command_line'][-1]=='--tag=\\\\xff'"),
            "ok");

  const std::string markdown = dir_.File("check.md");
  Read({"check", "--max-peak", "1GiB", "--markdown", markdown});
  ExpectShown(ReadFile(markdown), {"run\\xff/strings.trace"});
}

TEST_F(ProgramStringsTest, ViewAndChromeJsonExportShowThemEscaped) {
  ExpectShown(Read({"view", "-o", "-"}).out, {"\"--tag=\\\\xff\""});

  const ProgramRun perfetto = Read({"export", "--format", "chrome-json", "-o", "-"});
  EXPECT_EQ(
      PythonCheck(perfetto.out, true, "d['metadata']['command_line'].endswith(' --tag=\\\\xff')"),
      "ok");
}

}  // namespace
}  // namespace gpumem::testing
