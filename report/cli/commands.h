// The `gpumem` subcommands, one file each (cmd_<name>.cc), and what they share: exit codes and the
// one-line error format. main.cc only dispatches.
#ifndef GPUMEM_REPORT_CLI_COMMANDS_H_
#define GPUMEM_REPORT_CLI_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpumem::report {

// docs/DESIGN: 0 ok, 1 a check failed, 2 bad input or usage.
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitBadInput = 2;

// Each takes the arguments after its own name and returns the process exit code.
int RunAdvise(const std::vector<std::string>& args);
int RunCheck(const std::vector<std::string>& args);
int RunDump(const std::vector<std::string>& args);
int RunExport(const std::vector<std::string>& args);
int RunRecord(const std::vector<std::string>& args);
int RunReport(const std::vector<std::string>& args);
int RunSymbolize(const std::vector<std::string>& args);
int RunWhatif(const std::vector<std::string>& args);
int RunView(const std::vector<std::string>& args);  // report/cli/cmd_view.cc, in the gpumem binary

// Each command's --help text.
std::string AdviseUsage();
std::string CheckUsage();
std::string DumpUsage();
std::string ExportUsage();
std::string RecordUsage();
std::string ReportUsage();
std::string SymbolizeUsage();
std::string WhatifUsage();
std::string ViewUsage();

// This machine's name ("localhost" if it has none).
std::string HostName();

// Keeps libprotobuf's log lines from the user: called first thing by main().
void InstallProtobufLogHandler();

// Prints "gpumem: error: <message>" to stderr, the message escaped (report/format/printable.h).
void PrintError(absl::string_view message);

// Standard output, for every command: what a command prints goes through WriteOutput(), and main()
// ends with FinishOutput(), so that output cut short (a full disk, a closed descriptor) is never an
// exit 0. The first failure's errno is kept; later writes are dropped.
void WriteOutput(absl::string_view text);
// Flushes standard output, keeping the first failure as WriteOutput() does.
void FlushOutput();
// `exit_code`, or kExitBadInput after printing "writing standard output: REASON" if any write to
// standard output failed.
int FinishOutput(int exit_code);

// gpumem ignores SIGXFSZ, so that writing past a file-size limit (ulimit -f) fails with EFBIG and
// one error line instead of killing it half-way. The program `gpumem record` runs gets back the
// disposition gpumem started with.
void IgnoreFileSizeSignal();
void RestoreFileSizeSignal();
// Prints the error and "Try 'gpumem <command> --help'." to stderr; returns kExitBadInput.
int UsageError(absl::string_view message, absl::string_view command);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_CLI_COMMANDS_H_
