// core/option_table.h, the one table of gpumem's environment variables: README.md's table lists
// exactly its GPUMEM_ variables with the same defaults, RecorderOptions starts at those defaults,
// LoadRecorderOptions parses every option from it, and the trace header records every option in
// force.
#include "core/option_table.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::ReadFile;
using testing::RecordingEnvironment;
using testing::RunProgram;
using testing::SourcePath;
using testing::TempDir;

std::string WithoutBackquotes(std::string text) {
  std::erase(text, '`');
  return std::string(absl::StripAsciiWhitespace(text));
}

// README.md's rows "| `GPUMEM_X` | default | meaning |": each variable's default, without its
// backquotes. A row of two variables ("`A`, `B` | 1, 2 |") gives each its own default.
std::map<std::string, std::string> ReadmeDefaults() {
  std::map<std::string, std::string> defaults;
  std::istringstream readme(ReadFile(SourcePath("README.md")));
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("| `GPUMEM_", 0) != 0) continue;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    EXPECT_GE(cells.size(), 4u) << line;
    if (cells.size() < 4) continue;
    std::vector<std::string> names = absl::StrSplit(cells[1], ", ");
    std::vector<std::string> values = absl::StrSplit(cells[2], ", ");
    if (values.size() != names.size()) values.assign(names.size(), cells[2]);
    for (size_t i = 0; i < names.size(); ++i) {
      defaults[WithoutBackquotes(names[i])] = WithoutBackquotes(values[i]);
    }
  }
  return defaults;
}

bool Gpumems(const OptionSpec& spec) { return std::string(spec.name).rfind("GPUMEM_", 0) == 0; }

TEST(OptionTable, ReadmeListsEveryGpumemVariableOfTheTableWithItsDefault) {
  const std::map<std::string, std::string> readme = ReadmeDefaults();
  ASSERT_FALSE(readme.empty()) << "no variable rows found in README.md";
  for (const OptionSpec& spec : kOptionTable) {
    if (!Gpumems(spec)) continue;
    auto row = readme.find(spec.name);
    if (row == readme.end()) {
      ADD_FAILURE() << spec.name << " is missing from README.md's table of variables";
      continue;
    }
    EXPECT_EQ(row->second, spec.default_text) << spec.name << "'s default";
  }
}

TEST(OptionTable, ReadmeListsNoGpumemVariableTheTableLacks) {
  for (const auto& [name, value] : ReadmeDefaults()) {
    bool known = false;
    for (const OptionSpec& spec : kOptionTable) known = known || name == spec.name;
    EXPECT_TRUE(known) << "README.md lists " << name << ", core/option_table.h does not";
  }
}

TEST(OptionTable, RecorderOptionsStartAtTheTablesDefaults) {
  const RecorderOptions defaults;
  for (const OptionSpec& spec : kOptionTable) {
    char number[32];
    const char* value = OptionValueText(spec, defaults, number, sizeof(number));
    switch (spec.kind) {
      case OptionKind::kSwitch:
      case OptionKind::kNumber:
        ASSERT_NE(value, nullptr) << spec.name;
        EXPECT_STREQ(value, spec.default_text) << spec.name;
        break;
      case OptionKind::kText:
      case OptionKind::kOther:
        EXPECT_EQ(value, nullptr) << spec.name << " has a value though unset";
        break;
    }
  }
}

// Every recorder option set to a value other than its default reads back as that value.
TEST(OptionTable, LoadRecorderOptionsParsesEveryOptionOfTheTable) {
  std::map<std::string, std::string> set;
  for (const OptionSpec& spec : kOptionTable) {
    if (spec.kind == OptionKind::kSwitch) {
      set[spec.name] = std::string(spec.default_text) == "1" ? "0" : "1";
    } else if (spec.kind == OptionKind::kNumber) {
      set[spec.name] = std::to_string(spec.min + 3);
    } else if (spec.kind == OptionKind::kText) {
      set[spec.name] = std::string("value of ") + spec.name;
    }
  }
  for (const auto& [name, value] : set) setenv(name.c_str(), value.c_str(), 1);
  RecorderOptions options;
  LoadRecorderOptions(&options);
  for (const auto& [name, value] : set) unsetenv(name.c_str());
  for (const OptionSpec& spec : kOptionTable) {
    if (!set.contains(spec.name)) continue;
    char number[32];
    const char* value = OptionValueText(spec, options, number, sizeof(number));
    ASSERT_NE(value, nullptr) << spec.name;
    EXPECT_EQ(value, set[spec.name]) << spec.name;
  }
  EXPECT_TRUE(options.cupti_pools);
  EXPECT_EQ(options.stack_depth, 3);
  EXPECT_STREQ(options.cupti_path, "value of GPUMEM_CUPTI_LIB");
}

// A recorded run's header names every switch and number of the table with its value, and every
// text that was set.
TEST(OptionTable, TheTraceHeaderRecordsEveryOptionInForce) {
  TempDir dir;
  auto environment = RecordingEnvironment(dir.File("run.trace"));
  environment["GPUMEM_CUPTI_POOLS"] = "1";
  environment["GPUMEM_SELF_TIMING"] = "1";
  environment["GPUMEM_CUPTI_LIB"] = "/nonexistent/libcupti.so";
  const ProgramRun run = RunProgram({BuildPath("bin/leak_loop")}, environment);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::map<std::string, std::string> header;
  auto file = report::TraceFile::Read(
      dir.File("run.trace"), [&](const report::PacketPosition&, const TracePacket& packet) {
        if (!packet.has_header()) return;
        for (const Option& option : packet.header().option()) {
          header[option.name()] = option.value();
        }
      });
  ASSERT_TRUE(file.ok()) << file.status();
  for (const OptionSpec& spec : kOptionTable) {
    if (spec.kind == OptionKind::kSwitch || spec.kind == OptionKind::kNumber) {
      EXPECT_TRUE(header.contains(spec.name)) << spec.name << " is not in the header";
    }
  }
  EXPECT_EQ(header["GPUMEM_CUPTI_POOLS"], "1");
  EXPECT_EQ(header["GPUMEM_SELF_TIMING"], "1");
  EXPECT_EQ(header["GPUMEM_CUPTI_LIB"], "/nonexistent/libcupti.so");
  EXPECT_EQ(header["GPUMEM_OUTPUT"], dir.File("run.trace"));
  EXPECT_EQ(header.count("GPUMEM_TENSORS"), 0u);  // a text only where set
}

}  // namespace
}  // namespace gpumem
