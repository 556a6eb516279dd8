#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "report/cli/commands.h"
#include "report/format/printable.h"

namespace gpumem::report {
namespace {

// libprotobuf's own log lines ("[libprotobuf ERROR ...]") would reach the user beside gpumem's
// one error line; what failed is reported by gpumem itself (a packet that did not parse). Only a
// fatal message, which ends the process, is kept.
void ProtobufLogHandler(google::protobuf::LogLevel level, const char* /*filename*/, int /*line*/,
                        const std::string& message) {
  if (level == google::protobuf::LOGLEVEL_FATAL) PrintError("libprotobuf: " + message);
}

int output_errno = 0;  // the first failed write to standard output
struct sigaction file_size_signal_at_start;

void NoteOutputFailure() {
  if (output_errno == 0) output_errno = errno != 0 ? errno : EIO;
}

}  // namespace

void InstallProtobufLogHandler() { google::protobuf::SetLogHandler(&ProtobufLogHandler); }

void PrintError(absl::string_view message) {
  FlushOutput();  // keep what was printed before the error ahead of it
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
