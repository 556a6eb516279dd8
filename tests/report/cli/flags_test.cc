// The flag parser every gpumem command uses (report/cli/flags.h): each form of a flag and its
// value, "--", positional arguments, repeats, every error line, and the --help flag list made
// from the table.
#include "report/cli/flags.h"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "report/cli/commands.h"

namespace gpumem::report {
namespace {

enum class Color { kRed, kGreen, kBlue };

struct Options {
  bool json = false;
  size_t top = 10;
  int offset = 0;
  std::string output;
  std::string marker;
  std::optional<uint64_t> limit;
  Color color = Color::kRed;
  bool marker_implied = false;
};

constexpr char kSynopsis[] = "usage: gpumem demo [FLAGS] TRACE...\n\n";
constexpr char kEpilogue[] = "\nExit status: 0 ok.\n";

CommandLine DemoCommandLine(Options* options) {
  return CommandLine{
      .command = "demo",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 15,
      .flags = {
          Switch({"--json"}, "one JSON object", &options->json),
          Number({"--top"}, "call sites shown\n(default 10)", &options->top),
          Number({"--offset"}, "may be negative", &options->offset),
          OutputFlag({"-o", "--output"}, "OUT", "where to write", &options->output),
          Text({"--marker"}, "FUNCTION", "a function name", "where iterations start",
               &options->marker)
              .Also([options] { options->marker_implied = true; }),
          Size({"--limit"}, "the budget", &options->limit),
          Note("  (a note among the flags)"),
          Choice<Color>({"--color"},
                        {{"red", Color::kRed}, {"green", Color::kGreen}, {"blue", Color::kBlue}},
                        "what color", &options->color),
      }};
}

// The demo command with --color required.
CommandLine RequiredColor(Options* options) {
  CommandLine line = DemoCommandLine(options);
  line.flags.back() = std::move(line.flags.back()).Required();
  line.flags.back().value_name = "COLOR";
  return line;
}

struct Parsed {
  Options options;
  absl::StatusOr<ParsedArgs> args;
};

Parsed Parse(const std::vector<std::string>& args,
             CommandLine (*command_line)(Options*) = DemoCommandLine) {
  Parsed parsed;
  parsed.args = ParseFlags(command_line(&parsed.options), args);
  return parsed;
}

// The error line of `args`, or "" if they parse.
std::string ErrorOf(const std::vector<std::string>& args,
                    CommandLine (*command_line)(Options*) = DemoCommandLine) {
  const Parsed parsed = Parse(args, command_line);
  EXPECT_FALSE(parsed.args.ok()) << "parsed";
  if (parsed.args.ok()) return "";
  EXPECT_EQ(parsed.args.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(parsed.args.status().message());
}

using Args = std::vector<std::string>;

TEST(FlagsTest, ValueAsNextArgumentOrAfterEquals) {
  Parsed parsed = Parse({"--top", "5", "--output=out.json", "--marker=a=b"});
  ASSERT_TRUE(parsed.args.ok()) << parsed.args.status();
  EXPECT_EQ(parsed.options.top, 5u);
  EXPECT_EQ(parsed.options.output, "out.json");
  EXPECT_EQ(parsed.options.marker, "a=b");  // only the first '=' separates
  EXPECT_TRUE(parsed.options.marker_implied);
  parsed = Parse({"-o=x.json", "--top=7", "--offset", "-3", "--limit=2KiB", "--color", "blue"});
  ASSERT_TRUE(parsed.args.ok()) << parsed.args.status();
  EXPECT_EQ(parsed.options.top, 7u);
  EXPECT_EQ(parsed.options.output, "x.json");
  EXPECT_EQ(parsed.options.offset, -3);  // a value may start with '-'
  EXPECT_EQ(parsed.options.limit, 2048u);
  EXPECT_EQ(parsed.options.color, Color::kBlue);
  EXPECT_TRUE(parsed.args->positional.empty());
}

TEST(FlagsTest, FlagsStandAnywhereAmongPositionalArguments) {
  const Parsed parsed = Parse({"a.trace", "--json", "-", "--top", "3", "b.trace"});
  ASSERT_TRUE(parsed.args.ok()) << parsed.args.status();
  EXPECT_TRUE(parsed.options.json);
  EXPECT_EQ(parsed.options.top, 3u);
  EXPECT_EQ(parsed.args->positional, (Args{"a.trace", "-", "b.trace"}));
  EXPECT_FALSE(parsed.args->help);
}

TEST(FlagsTest, DoubleDashEndsTheFlags) {
  const Parsed parsed = Parse({"--json", "--", "--top", "x", "--", "-h"});
  ASSERT_TRUE(parsed.args.ok()) << parsed.args.status();
  EXPECT_TRUE(parsed.options.json);
  EXPECT_EQ(parsed.options.top, 10u);
  EXPECT_EQ(parsed.args->positional, (Args{"--top", "x", "--", "-h"}));
  EXPECT_FALSE(parsed.args->help);
}

TEST(FlagsTest, PositionalEndsFlagsWhenTheCommandSaysSo) {
  auto program_follows = [](Options* options) {
    CommandLine line = DemoCommandLine(options);
    line.positional_ends_flags = true;
    return line;
  };
  const Parsed parsed =
      Parse({"-o", "x.trace", "python", "--json", "-o", "y", "--help"}, +program_follows);
  ASSERT_TRUE(parsed.args.ok()) << parsed.args.status();
  EXPECT_EQ(parsed.options.output, "x.trace");
  EXPECT_FALSE(parsed.options.json);
  EXPECT_EQ(parsed.args->positional, (Args{"python", "--json", "-o", "y", "--help"}));
  EXPECT_FALSE(parsed.args->help);
}

TEST(FlagsTest, RepeatedFlagTheLastCountsUnlessOnce) {
  Parsed parsed =
      Parse({"--top", "1", "--top=2", "--json", "--json", "--color=green", "--color", "red"});
  ASSERT_TRUE(parsed.args.ok()) << parsed.args.status();
  EXPECT_EQ(parsed.options.top, 2u);
  EXPECT_EQ(parsed.options.color, Color::kRed);
  EXPECT_EQ(ErrorOf({"-o", "a", "--output", "b"}), "demo: --output given more than once");
  EXPECT_EQ(ErrorOf({"-o=a", "-o=b"}), "demo: -o given more than once");
}

TEST(FlagsTest, HelpStopsParsing) {
  for (const Args& args : {Args{"-h"}, Args{"x", "--top", "3", "--help", "--bogus"}}) {
    const Parsed parsed = Parse(args);
    ASSERT_TRUE(parsed.args.ok()) << parsed.args.status();
    EXPECT_TRUE(parsed.args->help);
  }
}

TEST(FlagsTest, EveryErrorIsOneLineNamedAfterTheCommand) {
  EXPECT_EQ(ErrorOf({"x", "--bogus"}), "demo: unknown flag '--bogus'");
  EXPECT_EQ(ErrorOf({"--bogus=1"}), "demo: unknown flag '--bogus=1'");
  EXPECT_EQ(ErrorOf({"-t"}), "demo: unknown flag '-t'");
  EXPECT_EQ(ErrorOf({"x", "--top"}), "demo: --top needs a number");
  EXPECT_EQ(ErrorOf({"--top="}), "demo: --top needs a number");
  EXPECT_EQ(ErrorOf({"--top", "many"}), "demo: --top: not a number: 'many'");
  EXPECT_EQ(ErrorOf({"--top=-1"}), "demo: --top: not a number: '-1'");
  EXPECT_EQ(ErrorOf({"-o"}), "demo: -o needs a path");
  EXPECT_EQ(ErrorOf({"--output="}), "demo: --output needs a path");
  EXPECT_EQ(ErrorOf({"--marker", ""}), "demo: --marker needs a function name");
  EXPECT_EQ(ErrorOf({"--json=yes"}), "demo: --json takes no value");
  EXPECT_EQ(ErrorOf({"--json="}), "demo: --json takes no value");
  EXPECT_EQ(ErrorOf({"--color"}), "demo: --color needs red, green or blue");
  EXPECT_EQ(ErrorOf({"--color=pink"}), "demo: --color: not red, green or blue: 'pink'");
  EXPECT_EQ(ErrorOf({"--limit", "lots"}).rfind("demo: --limit: invalid size 'lots'", 0), 0u);
  EXPECT_EQ(ErrorOf({"x"}, RequiredColor), "demo: --color COLOR is required");
}

TEST(FlagsTest, ParsingStopsAtTheFirstError) {
  const Parsed bad = Parse({"--color=pink", "--top", "3"});
  EXPECT_FALSE(bad.args.ok());
  EXPECT_EQ(bad.options.color, Color::kRed);
  EXPECT_EQ(bad.options.top, 10u);  // parsing stopped at the error
}

TEST(FlagsTest, RequiredFlagGiven) {
  const Parsed parsed = Parse({"x", "--color", "green"}, RequiredColor);
  ASSERT_TRUE(parsed.args.ok()) << parsed.args.status();
  EXPECT_EQ(parsed.options.color, Color::kGreen);
}

TEST(FlagsTest, HelpListsTheTableInOrderWithHelpLast) {
  Options options;
  const CommandLine line = DemoCommandLine(&options);
  const std::string flags =
      "  --json       one JSON object\n"
      "  --top N      call sites shown\n"
      "               (default 10)\n"
      "  --offset N   may be negative\n"
      "  -o, --output OUT\n"
      "               where to write\n"
      "  --marker FUNCTION\n"
      "               where iterations start\n"
      "  --limit SIZE\n"
      "               the budget\n"
      "  (a note among the flags)\n"
      "  --color red|green|blue\n"
      "               what color\n"
      "  -h, --help   print this text\n";
  EXPECT_EQ(FlagHelp(line), flags);
  EXPECT_EQ(UsageText(line), std::string(kSynopsis) + flags + kEpilogue);
  EXPECT_EQ(UsageOf(DemoCommandLine), UsageText(line));
}

TEST(FlagsTest, HelpRowPerValueWhereEachValueIsExplained) {
  Options options;
  CommandLine line = RequiredColor(&options);
  line.flags.erase(line.flags.begin(), line.flags.end() - 1);
  line.help_column = 18;
  line.flags.back().value_help = {{"red", "warm"}, {"green", "grass,\nleaves"}};
  EXPECT_EQ(FlagHelp(line),
            "  --color red     warm\n"
            "  --color green   grass,\n"
            "                  leaves\n"
            "  -h, --help      print this text\n");
}

TEST(FlagsTest, ParseCommandLineGivesTheExitCode) {
  Options options;
  std::vector<std::string> positional;
  int exit_code = -1;
  EXPECT_TRUE(
      ParseCommandLine(DemoCommandLine(&options), {"a", "--json"}, &positional, &exit_code));
  EXPECT_EQ(positional, (Args{"a"}));
  EXPECT_FALSE(ParseCommandLine(DemoCommandLine(&options), {"--bogus"}, &positional, &exit_code));
  EXPECT_EQ(exit_code, kExitBadInput);
  testing::internal::CaptureStdout();
  EXPECT_FALSE(ParseCommandLine(DemoCommandLine(&options), {"--help"}, &positional, &exit_code));
  FlushOutput();
  EXPECT_EQ(testing::internal::GetCapturedStdout(), UsageOf(DemoCommandLine));
  EXPECT_EQ(exit_code, kExitOk);
}

}  // namespace
}  // namespace gpumem::report
