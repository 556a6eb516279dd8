#include "report/cli/flags.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "report/cli/commands.h"
#include "report/format/sizes.h"

namespace gpumem::report {
namespace {

// Every command's own flag, last in the help.
const Flag& HelpFlag() {
  static const Flag* const flag = new Flag{.names = {"-h", "--help"}, .help = "print this text"};
  return *flag;
}

// "a, b or c"
std::string Alternatives(const std::vector<std::string>& words) {
  if (words.size() < 2) return absl::StrJoin(words, "");
  return absl::StrCat(absl::StrJoin(words.begin(), words.end() - 1, ", "), " or ", words.back());
}

// The flag of `line` named `name`, or nullptr.
const Flag* FindFlag(const CommandLine& line, absl::string_view name) {
  for (const Flag& flag : line.flags) {
    for (const std::string& flag_name : flag.names) {
      if (flag_name == name) return &flag;
    }
  }
  return nullptr;
}

// Walks the arguments, one at a time.
class FlagWalker {
 public:
  FlagWalker(const CommandLine& line, const std::vector<std::string>& args)
      : line_(line), args_(args) {}

  absl::StatusOr<ParsedArgs> Run() {
    while (next_ < args_.size()) {
      const std::string& arg = args_[next_++];
      if (flags_done_ || arg == "-" || !absl::StartsWith(arg, "-")) {
        parsed_.positional.push_back(arg);
        flags_done_ = flags_done_ || line_.positional_ends_flags;
      } else if (arg == "--") {
        flags_done_ = true;
      } else if (arg == "-h" || arg == "--help") {
        parsed_.help = true;
        return std::move(parsed_);
      } else if (absl::Status taken = TakeFlag(arg); !taken.ok()) {
        return taken;
      }
    }
    for (const Flag& flag : line_.flags) {
      if (flag.required && !given_.contains(&flag)) {
        return Error(absl::StrCat(flag.names.back(), " ", flag.value_name, " is required"));
      }
    }
    return std::move(parsed_);
  }

 private:
  absl::Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(line_.command, ": ", message));
  }

  // `arg`: "--name", "--name=value" or "--name" followed by its value.
  absl::Status TakeFlag(const std::string& arg) {
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    const Flag* flag = FindFlag(line_, name);
    if (flag == nullptr) return Error(absl::StrCat("unknown flag '", arg, "'"));
    if (flag->once && given_.contains(flag)) {
      return Error(absl::StrCat(name, " given more than once"));
    }
    given_.insert(flag);
    std::string value;
    if (flag->value_name.empty()) {
      if (equals != std::string::npos) return Error(absl::StrCat(name, " takes no value"));
    } else if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (next_ < args_.size()) {
      value = args_[next_++];
    }
    if (!flag->value_name.empty() && value.empty()) {
      return Error(absl::StrCat(name, " needs ", flag->needs));
    }
    if (absl::Status taken = flag->take(value); !taken.ok()) {
      return Error(absl::StrCat(name, ": ", taken.message()));
    }
    return absl::OkStatus();
  }

  const CommandLine& line_;
  const std::vector<std::string>& args_;
  size_t next_ = 0;
  bool flags_done_ = false;
  std::set<const Flag*> given_;
  ParsedArgs parsed_;
};

// "  LABEL  help", the help's further lines at `column`; a label too long for that, on a line of
// its own.
void AppendHelpRow(const std::string& label, const std::string& help, size_t column,
                   std::string* out) {
  std::string row = "  " + label;
  if (row.size() + 2 > column) {
    absl::StrAppend(out, row, "\n");
    row.clear();
  }
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    row.resize(column, ' ');
    absl::StrAppend(out, row, line, "\n");
    row.clear();
  }
}

void AppendFlagHelp(const Flag& flag, size_t column, std::string* out) {
  if (flag.names.empty()) {
    absl::StrAppend(out, flag.help, "\n");
    return;
  }
  const std::string names = absl::StrJoin(flag.names, ", ");
  if (!flag.value_help.empty()) {
    for (const auto& [value, help] : flag.value_help) {
      AppendHelpRow(absl::StrCat(names, " ", value), help, column, out);
    }
    return;
  }
  const std::string label =
      flag.value_name.empty() ? names : absl::StrCat(names, " ", flag.value_name);
  AppendHelpRow(label, flag.help, column, out);
}

}  // namespace

Flag Flag::Also(std::function<void()> also) && {
  take = [take = std::move(take), also = std::move(also)](absl::string_view value) {
    absl::Status taken = take(value);
    if (taken.ok()) also();
    return taken;
  };
  return std::move(*this);
}

Flag Flag::Once() && {
  once = true;
  return std::move(*this);
}

Flag Flag::Required() && {
  required = true;
  return std::move(*this);
}

Flag Switch(std::vector<std::string> names, std::string help, bool* on) {
  return Flag{.names = std::move(names), .help = std::move(help), .take = [on](absl::string_view) {
                *on = true;
                return absl::OkStatus();
              }};
}

Flag Text(std::vector<std::string> names, std::string value_name, std::string needs,
          std::string help, std::string* out) {
  return Flag{.names = std::move(names),
              .value_name = std::move(value_name),
              .needs = std::move(needs),
              .help = std::move(help),
              .take = [out](absl::string_view value) {
                *out = std::string(value);
                return absl::OkStatus();
              }};
}

Flag Size(std::vector<std::string> names, std::string help, std::optional<uint64_t>* out) {
  return Flag{.names = std::move(names),
              .value_name = "SIZE",
              .needs = "a size",
              .help = std::move(help),
              .take = [out](absl::string_view value) {
                absl::StatusOr<uint64_t> size = ParseSize(value);
                if (!size.ok()) return size.status();
                *out = *size;
                return absl::OkStatus();
              }};
}

Flag AdviseDeviceMemoryFlag(std::optional<uint64_t>* out) {
  return Size({"--device-memory"},
              "what the allocator may reserve on each device: 8GiB, 8G, 8589934592 (the limit\n"
              "torch.cuda.set_per_process_memory_fraction sets; default: the recorded device's\n"
              "total memory)",
              out);
}

Flag GroupByFlag(std::string help, GroupBy* out) {
  const std::vector<std::string> words = {"user", "python", "stack"};
  return ChoiceOf({"--group-by"}, words, std::move(help),
                  [words, out](size_t chosen) { ParseGroupBy(words[chosen], out); });
}

Flag StacksFlag(StackStyle* out) {
  return Choice<StackStyle>(
      {"--stacks"}, {{"short", StackStyle::kShort}, {"full", StackStyle::kFull}},
      "how a call site prints: short (default) the line of your own code it came\n"
      "from, then \"via\" the framework call, operator and library it went through;\n"
      "full every frame (the interpreter's own left out where Python frames stand for\n"
      "them, C++ template arguments and parameter lists shortened to <…> and (…))",
      out);
}

Flag OutputFlag(std::vector<std::string> names, std::string value_name, std::string help,
                std::string* out) {
  return Text(std::move(names), std::move(value_name), "a path", std::move(help), out).Once();
}

Flag Note(std::string text) { return Flag{.help = std::move(text)}; }

Flag ChoiceOf(std::vector<std::string> names, std::vector<std::string> words, std::string help,
              std::function<void(size_t chosen)> choose) {
  Flag flag{.names = std::move(names),
            .value_name = absl::StrJoin(words, "|"),
            .needs = Alternatives(words),
            .help = std::move(help)};
  flag.take = [words = std::move(words), choose = std::move(choose)](absl::string_view value) {
    for (size_t i = 0; i < words.size(); ++i) {
      if (words[i] == value) {
        choose(i);
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("not ", Alternatives(words), ": '", value, "'"));
  };
  return flag;
}

absl::StatusOr<ParsedArgs> ParseFlags(const CommandLine& line,
                                      const std::vector<std::string>& args) {
  return FlagWalker(line, args).Run();
}

std::string FlagHelp(const CommandLine& line) {
  std::string out;
  for (const Flag& flag : line.flags) AppendFlagHelp(flag, line.help_column, &out);
  AppendFlagHelp(HelpFlag(), line.help_column, &out);
  return out;
}

std::string UsageText(const CommandLine& line) {
  return absl::StrCat(line.synopsis, FlagHelp(line), line.epilogue);
}

bool ParseCommandLine(const CommandLine& line, const std::vector<std::string>& args,
                      std::vector<std::string>* positional, int* exit_code) {
  absl::StatusOr<ParsedArgs> parsed = ParseFlags(line, args);
  if (!parsed.ok()) {
    *exit_code = UsageError(parsed.status().message(), line.command);
    return false;
  }
  if (parsed->help) {
    WriteOutput(UsageText(line));
    *exit_code = kExitOk;
    return false;
  }
  *positional = std::move(parsed->positional);
  return true;
}

}  // namespace gpumem::report
