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
         [--top N] [--group-by user|python|stack] [--python-only] [--json] TRACE...
                                            what held the memory: peak, leaks, OOM, growth, ...
  check [--max-peak SIZE] [--no-leaks] [--markdown FILE] [--group-by ...] TRACE...
                                            memory budgets for CI (exit 1 when one is broken)
  symbolize [-o OUT] TRACE...               record function/file/line in the trace, so it reads
                                            the same where the binaries are absent
  export --format memory-viz|perfetto|folded|speedscope [--what peak|leaks] [-o OUT] TRACE
                                            the trace for PyTorch's memory viewer, Perfetto,
                                            flame graphs (folded stacks) or speedscope
  whatif --device-memory SIZE [--allocator native|expandable|async|all] [--json] TRACE
                                            would the run fit in SIZE under PyTorch's allocators
                                            (exit 1 when one runs out), and the smallest that fits
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

int Dispatch(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return kExitBadInput;
  }
  const std::string& command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "record") return RunRecord(rest);
  if (command == "dump") return RunDump(rest);
  if (command == "report") return RunReport(rest);
  if (command == "check") return RunCheck(rest);
  if (command == "symbolize") return RunSymbolize(rest);
  if (command == "whatif") return RunWhatif(rest);
  if (command == "export") return RunExport(rest);
  if (command == "view") return RunView(rest);
  if (command == "--version" || command == "version") {
    WriteOutput(absl::StrCat("gpumem ", gpumem::kVersion, "\n"));
    return kExitOk;
  }
  if (command == "-h" || command == "--help" || command == "help") {
    const std::string topic = rest.empty() ? "" : rest[0];
    if (topic == "record") {
      WriteOutput(kRecordUsage);
    } else if (topic == "dump") {
      WriteOutput(kDumpUsage);
    } else if (topic == "report") {
      WriteOutput(kReportUsage);
    } else if (topic == "check") {
      WriteOutput(kCheckUsage);
    } else if (topic == "symbolize") {
      WriteOutput(kSymbolizeUsage);
    } else if (topic == "export") {
      WriteOutput(kExportUsage);
    } else if (topic == "whatif") {
      WriteOutput(kWhatifUsage);
    } else if (topic == "view") {
      WriteOutput(kViewUsage);
    } else if (topic.empty()) {
      WriteOutput(kUsage);
    } else {
      return UsageError("help: unknown command '" + topic + "'", "");
    }
    return kExitOk;
  }
  if (!command.empty() && command[0] == '-') {
    return UsageError("unknown option '" + command + "'", "");
  }
  return UsageError("unknown command '" + command + "'", "");
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
