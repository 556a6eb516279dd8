// gpumem: the command line. Dispatches to one subcommand per file (cmd_<name>.cc).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/version.h"
#include "report/cli/commands.h"

namespace {

constexpr char kUsage[] =
    R"usage(usage: gpumem COMMAND [ARGS...]

GPU memory profiler for CUDA programs.

Commands:
  record [-o PATH] [--] PROGRAM [ARGS...]   run PROGRAM and record its GPU memory operations
  dump [--symbolize] [--counts] TRACE...    print a trace packet by packet, or its counts
  report [--summary] [--peak] [--leaks] [--oom] [--growth] [--fragmentation] [--kernels]
         [--top N] [--group-by user|python|stack] [--stacks short|full] [--python-only]
         [--json] TRACE...
                                            what held the memory: peak, leaks, OOM, growth, ...
  check [--max-peak SIZE] [--no-leaks] [--markdown FILE] [--group-by ...] TRACE...
                                            memory budgets for CI (exit 1 when one is broken)
  symbolize [-o OUT] TRACE...               record function/file/line in the trace, so it reads
                                            the same where the binaries are absent
  export --format memory-viz|perfetto|chrome-json|pprof|folded|speedscope [--what peak|leaks]
         [-o OUT] TRACE
                                            the trace for PyTorch's memory viewer, Perfetto,
                                            pprof (Pyroscope, Parca), flame graphs (folded
                                            stacks) or speedscope
  whatif --device-memory SIZE [--allocator native|expandable|async|all] [--json] TRACE
                                            would the run fit in SIZE under PyTorch's allocators
                                            (exit 1 when one runs out), and the smallest that fits
  advise [--device-memory SIZE] [--json] TRACE [SECOND_TRACE]
                                            what change would make the run fit, ranked by the
                                            peak it leaves; the largest batch that fits
  view [-o OUT.html] TRACE                  one self-contained HTML page: timeline, flame graphs,
                                            tables (open it in a browser, no network needed)
  help [COMMAND]                            print this text, or a command's

Options:
  -h, --help     print this text
  --version      print gpumem's version

Exit status: 0 ok, 1 a check failed, 2 bad input or usage, or output that could not be written
(record: the program's own status; 127 not found, 126 not executable).
)usage";

}  // namespace

namespace gpumem::report {
namespace {

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args);
  std::string (*usage)();
};

constexpr Command kCommands[] = {
    {"record", RunRecord, RecordUsage},          {"dump", RunDump, DumpUsage},
    {"report", RunReport, ReportUsage},          {"check", RunCheck, CheckUsage},
    {"symbolize", RunSymbolize, SymbolizeUsage}, {"whatif", RunWhatif, WhatifUsage},
    {"export", RunExport, ExportUsage},          {"view", RunView, ViewUsage},
    {"advise", RunAdvise, AdviseUsage},
};

const Command* FindCommand(const std::string& name) {
  for (const Command& command : kCommands) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

// `gpumem help [COMMAND]`: gpumem's usage, or the command's.
int Help(const std::vector<std::string>& rest) {
  if (rest.empty() || rest[0].empty()) {
    WriteOutput(kUsage);
    return kExitOk;
  }
  const Command* command = FindCommand(rest[0]);
  if (command == nullptr) return UsageError("help: unknown command '" + rest[0] + "'", "");
  WriteOutput(command->usage());
  return kExitOk;
}

int Dispatch(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return kExitBadInput;
  }
  const std::string& name = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (const Command* command = FindCommand(name); command != nullptr) return command->run(rest);
  if (name == "--version" || name == "version") {
    WriteOutput(absl::StrCat("gpumem ", gpumem::kVersion, "\n"));
    return kExitOk;
  }
  if (name == "-h" || name == "--help" || name == "help") return Help(rest);
  if (!name.empty() && name[0] == '-') return UsageError("unknown option '" + name + "'", "");
  return UsageError("unknown command '" + name + "'", "");
}

}  // namespace
}  // namespace gpumem::report

int main(int argc, char** argv) {
  using namespace gpumem::report;
  InstallProtobufLogHandler();
  IgnoreFileSizeSignal();
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  return FinishOutput(Dispatch(args));
}
