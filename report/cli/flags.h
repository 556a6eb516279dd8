// The flags of every `gpumem` command, parsed and explained the same way. A command declares its
// flags once, in a table (CommandLine): each flag's names, whether and what value it takes, where
// that value goes in the command's options, and its help. From the table come both the parsing
// and the flag list of the command's --help.
//
// Parsing: flags may stand before, among or after the positional arguments; "--" ends the flags;
// "-" is a positional argument, not a flag; a flag's value follows as the next argument or after
// '=' ("--top 5", "--top=5"). A flag given twice: the last value counts, unless the flag is
// `once`. -h and --help are every command's. Errors are one line, named after the command:
// "report: unknown flag '--x'", "report: --top needs a number", "report: --top: not a number: 'x'",
// "report: --json takes no value", "export: --format FORMAT is required", "export: -o given more
// than once".
#ifndef GPUMEM_REPORT_CLI_FLAGS_H_
#define GPUMEM_REPORT_CLI_FLAGS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "report/stacks/python_stacks.h"
#include "report/stacks/user_frames.h"

namespace gpumem::report {

// One row of a command's flag table.
struct Flag {
  std::vector<std::string> names = {};  // "-o", "--output"; none: a note in the help only
  std::string value_name = {};          // "N", "PATH", "user|python|stack"; empty: a switch
  std::string needs = {};  // what a missing value lacks: "a number" ("--top needs a number")
  std::string help = {};   // lines separated by '\n'
  // Rows of their own for the values of a flag whose values each need explaining
  // ("--format perfetto   ..."): (value, help).
  std::vector<std::pair<std::string, std::string>> value_help = {};
  bool once = false;      // given twice: an error, where two values would contradict each other
  bool required = false;  // absent: "<command>: <flag> <VALUE> is required"
  // Takes the value ("" for a switch) into the command's options, or says why it is not one
  // (an InvalidArgument status whose message is "not a number: 'x'").
  std::function<absl::Status(absl::string_view value)> take = {};

  // The same flag, doing `also` too each time it is given (e.g. a flag that implies another).
  Flag Also(std::function<void()> also) &&;
  Flag Once() &&;
  Flag Required() &&;
};

// A switch: sets `*on`.
Flag Switch(std::vector<std::string> names, std::string help, bool* on);
// A value that may not be empty, stored in `*out`. `needs` says what it is ("a path").
Flag Text(std::vector<std::string> names, std::string value_name, std::string needs,
          std::string help, std::string* out);
// A size (report/format/sizes.h ParseSize: "8GiB", "1.5GB", bytes).
Flag Size(std::vector<std::string> names, std::string help, std::optional<uint64_t>* out);
// Help text standing among the flags, printed as it is (its lines indented by itself).
Flag Note(std::string text);

// A number ("N"): "--top needs a number", "--top: not a number: 'x'".
template <typename Integer>
Flag Number(std::vector<std::string> names, std::string help, Integer* out) {
  Flag flag{
      .names = std::move(names), .value_name = "N", .needs = "a number", .help = std::move(help)};
  flag.take = [out](absl::string_view value) {
    if (absl::SimpleAtoi(value, out)) return absl::OkStatus();
    return absl::InvalidArgumentError(std::string("not a number: '") + std::string(value) + "'");
  };
  return flag;
}

// One of a few words, each standing for a value; "native|expandable|none" in the help, unless
// `value_help` explains each word on a row of its own (then `value_name`, e.g. "FORMAT").
// Errors: "--allocator needs native, expandable or none",
// "--allocator: not native, expandable or none: 'x'".
Flag ChoiceOf(std::vector<std::string> names, std::vector<std::string> words, std::string help,
              std::function<void(size_t chosen)> choose);
template <typename Value>
Flag Choice(std::vector<std::string> names, std::vector<std::pair<std::string, Value>> choices,
            std::string help, Value* out) {
  std::vector<std::string> words;
  for (const auto& choice : choices) words.push_back(choice.first);
  return ChoiceOf(
      std::move(names), std::move(words), std::move(help),
      [choices = std::move(choices), out](size_t chosen) { *out = choices[chosen].second; });
}

// --device-memory SIZE as advise and view take it: the allocator's limit their advice is modelled
// against (unset: the recorded device's total memory).
Flag AdviseDeviceMemoryFlag(std::optional<uint64_t>* out);
// --group-by user|python|stack (report/stacks/python_stacks.h), as report, check and view take it.
Flag GroupByFlag(std::string help, GroupBy* out);
// --stacks short|full (report/stacks/user_frames.h StackStyle), as report and whatif take it.
Flag StacksFlag(StackStyle* out);
// -o (and --output where `names` has it): where the command writes; given once.
Flag OutputFlag(std::vector<std::string> names, std::string value_name, std::string help,
                std::string* out);

// A command's whole command line: its flags and the text of its --help around their list.
struct CommandLine {
  std::string command;   // "report": errors read "report: ...", hints "Try 'gpumem report --help'."
  const char* synopsis;  // the usage line and what the command does, up to the flag list
  const char* epilogue;  // after the flag list (exit status, ...)
  size_t help_column;    // where flags' help starts; a longer flag has its help on the next line
  std::vector<Flag> flags;
  // The first positional argument and everything after it are positional, flags or not (record:
  // the program's own command line).
  bool positional_ends_flags = false;
};

struct ParsedArgs {
  bool help = false;  // -h or --help was given (parsing stopped there)
  std::vector<std::string> positional;
};

// Parses `args` against `line`'s flags, calling each flag's `take`. An error is InvalidArgument
// with the one line to print ("report: unknown flag '--x'").
absl::StatusOr<ParsedArgs> ParseFlags(const CommandLine& line,
                                      const std::vector<std::string>& args);

// The flag list of --help: "  --top N      call sites shown ..." (-h, --help last).
std::string FlagHelp(const CommandLine& line);
// The whole --help text: synopsis, flag list, epilogue.
std::string UsageText(const CommandLine& line);

// The --help text of a command whose table `command_line` binds to an Options struct.
template <typename Options>
std::string UsageOf(CommandLine (*command_line)(Options*)) {
  Options unused;
  return UsageText(command_line(&unused));
}

// ParseFlags for a command: true and the positional arguments to go on; false when the command is
// done (`*exit_code`): --help printed its usage (0), or a usage error printed (2).
bool ParseCommandLine(const CommandLine& line, const std::vector<std::string>& args,
                      std::vector<std::string>* positional, int* exit_code);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_CLI_FLAGS_H_
