#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>

#include "report/commands.h"

namespace gpumem::report {

void PrintError(absl::string_view message) {
  std::fflush(stdout);  // keep what was printed before the error ahead of it
  std::fprintf(stderr, "gpumem: error: %.*s\n", static_cast<int>(message.size()), message.data());
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
