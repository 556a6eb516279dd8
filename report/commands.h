// The `gpumem` subcommands, one file each (cmd_<name>.cc), and what they share: exit codes and the
// one-line error format. main.cc only dispatches.
#ifndef GPUMEM_REPORT_COMMANDS_H_
#define GPUMEM_REPORT_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpumem::report {

// docs/DESIGN: 0 ok, 1 a check failed, 2 bad input or usage.
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitBadInput = 2;

// Each takes the arguments after its own name and returns the process exit code.
int RunCheck(const std::vector<std::string>& args);
int RunDump(const std::vector<std::string>& args);
int RunExport(const std::vector<std::string>& args);
int RunRecord(const std::vector<std::string>& args);
int RunReport(const std::vector<std::string>& args);
int RunSymbolize(const std::vector<std::string>& args);
int RunWhatif(const std::vector<std::string>& args);
int RunView(const std::vector<std::string>& args);  // report/cmd_view.cc, in the gpumem binary

extern const char kCheckUsage[];
extern const char kDumpUsage[];
extern const char kExportUsage[];
extern const char kRecordUsage[];
extern const char kReportUsage[];
extern const char kSymbolizeUsage[];
extern const char kWhatifUsage[];
extern const char kViewUsage[];

// This machine's name ("localhost" if it has none).
std::string HostName();

// Keeps libprotobuf's log lines from the user: called first thing by main().
void InstallProtobufLogHandler();

// Prints "gpumem: error: <message>" to stderr, the message escaped (report/printable.h).
void PrintError(absl::string_view message);
// Prints the error and "Try 'gpumem <command> --help'." to stderr; returns kExitBadInput.
int UsageError(absl::string_view message, absl::string_view command);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_COMMANDS_H_
