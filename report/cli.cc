#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "report/commands.h"

namespace gpumem::report {
namespace {

int output_errno = 0;  // the first failed write to standard output
struct sigaction file_size_signal_at_start;

void NoteOutputFailure() {
  if (output_errno == 0) output_errno = errno != 0 ? errno : EIO;
}

}  // namespace

void PrintError(absl::string_view message) {
  FlushOutput();  // keep what was printed before the error ahead of it
  std::fprintf(stderr, "gpumem: error: %.*s\n", static_cast<int>(message.size()), message.data());
}

int UsageError(absl::string_view message, absl::string_view command) {
  PrintError(message);
  const std::string help =
      command.empty() ? "gpumem --help" : "gpumem " + std::string(command) + " --help";
  std::fprintf(stderr, "Try '%s'.\n", help.c_str());
  return kExitBadInput;
}

void WriteOutput(absl::string_view text) {
  if (output_errno != 0) return;
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) NoteOutputFailure();
}

void FlushOutput() {
  if (output_errno != 0) return;
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) NoteOutputFailure();
}

int FinishOutput(int exit_code) {
  FlushOutput();
  if (output_errno == 0) return exit_code;
  const int error = output_errno;
  output_errno = -1;  // PrintError() flushes again: nothing more to note
  PrintError(absl::StrCat("writing standard output: ", std::strerror(error)));
  return kExitBadInput;
}

void IgnoreFileSizeSignal() {
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGXFSZ, &ignore, &file_size_signal_at_start);
}

void RestoreFileSizeSignal() { sigaction(SIGXFSZ, &file_size_signal_at_start, nullptr); }

}  // namespace gpumem::report
