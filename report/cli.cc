#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "report/commands.h"
#include "report/printable.h"

namespace gpumem::report {
namespace {

// libprotobuf's own log lines ("[libprotobuf ERROR ...]") would reach the user beside gpumem's
// one error line; what failed is reported by gpumem itself (a packet that did not parse). Only a
// fatal message, which ends the process, is kept.
void ProtobufLogHandler(google::protobuf::LogLevel level, const char* /*filename*/, int /*line*/,
                        const std::string& message) {
  if (level == google::protobuf::LOGLEVEL_FATAL) PrintError("libprotobuf: " + message);
}

}  // namespace

void InstallProtobufLogHandler() { google::protobuf::SetLogHandler(&ProtobufLogHandler); }

void PrintError(absl::string_view message) {
  std::fflush(stdout);  // keep what was printed before the error ahead of it
  // Messages name paths and traced names: one line, whatever bytes they hold.
  const std::string line = Printable(message);
  std::fprintf(stderr, "gpumem: error: %s\n", line.c_str());
}

int UsageError(absl::string_view message, absl::string_view command) {
  PrintError(message);
  const std::string help =
      command.empty() ? "gpumem --help" : "gpumem " + std::string(command) + " --help";
  std::fprintf(stderr, "Try '%s'.\n", help.c_str());
  return kExitBadInput;
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace gpumem::report
