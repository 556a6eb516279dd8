// No command writes over one of its own inputs: an output (-o, --markdown, or standard output
// redirected to a file) that is the input trace by device and inode, under its own name, through a
// symbolic link or a hard link, is refused with one error line and exit 2, and the trace is left
// byte for byte as it was. (`gpumem view` is tested in tests/viewer/view_command_test.cc.)
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::ReadFile;
using testing::RunProgram;
using testing::SourcePath;
using testing::TempDir;

namespace fs = std::filesystem;

class OutputOverInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy_file(SourcePath("samples/traces/leak_loop-h200.trace"), trace_);
    original_ = ReadFile(trace_);
    fs::create_symlink(trace_, symlink_);
    fs::create_hard_link(trace_, hard_link_);
  }
  // The same file under each of its names.
  std::vector<std::string> Names() const { return {trace_, symlink_, hard_link_}; }
  void ExpectRefused(const ProgramRun& run, const std::string& output) {
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_EQ(run.err.rfind("gpumem: error: " + output +
                                ": the output would overwrite the input "
                                "trace",
                            0),
              0u)
        << run.err;
    EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << run.err;
    EXPECT_EQ(ReadFile(trace_), original_);
    EXPECT_TRUE(fs::is_symlink(symlink_));
    for (const auto& entry : fs::directory_iterator(dir_.path())) {
      EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
    }
  }

  TempDir dir_;
  const std::string trace_ = dir_.File("run.trace");
  const std::string symlink_ = dir_.File("link.trace");
  const std::string hard_link_ = dir_.File("hard.trace");
  std::string original_;
};

TEST_F(OutputOverInputTest, Export) {
  for (const std::string& output : Names()) {
    SCOPED_TRACE(output);
    ExpectRefused(testing::RunGpumem({"export", "--format", "folded", "-o", output, trace_}),
                  output);
  }
}

TEST_F(OutputOverInputTest, CheckMarkdown) {
  for (const std::string& output : Names()) {
    SCOPED_TRACE(output);
    ExpectRefused(testing::RunGpumem({"check", "--max-peak", "1TiB", "--markdown", output, trace_}),
                  output);
  }
}

TEST_F(OutputOverInputTest, SymbolizeCopy) {
  for (const std::string& output : Names()) {
    SCOPED_TRACE(output);
    ExpectRefused(testing::RunGpumem({"symbolize", "-o", output, trace_}), output);
  }
}

// Standard output appended to the trace the command reads (`gpumem dump T >> T`).
TEST_F(OutputOverInputTest, StandardOutputAppendedToTheInput) {
  for (const char* command :
       {"dump", "report", "report --json", "check --no-leaks", "whatif --device-memory 1GiB",
        "symbolize", "export --format folded -o -"}) {
    SCOPED_TRACE(command);
    const ProgramRun run =
        RunProgram({"/bin/sh", "-c", "exec \"$0\" " + std::string(command) + " \"$1\" >> \"$2\"",
                    BuildPath("bin/gpumem"), trace_, hard_link_},
                   {{"GPUMEM_SYMBOL_PATH", ""}});
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_EQ(run.err, "gpumem: error: standard output is the input trace " + trace_ +
                           "; nothing written\n");
    EXPECT_EQ(ReadFile(trace_), original_);
  }
}

}  // namespace
}  // namespace gpumem
