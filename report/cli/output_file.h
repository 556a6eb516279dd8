// The files the commands write: whole or not at all (AtomicFile), never over one of the command's
// own inputs, never over something that is not a regular file.
#ifndef GPUMEM_REPORT_CLI_OUTPUT_FILE_H_
#define GPUMEM_REPORT_CLI_OUTPUT_FILE_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpumem::report {

// The output name that means standard output.
inline constexpr char kStandardOutput[] = "-";

// Fails (one line) when `output` (a path, or "-" for standard output) is the same file as one of
// `inputs`: same device and inode, so a symbolic or hard link to an input counts too. An output
// that does not exist yet is no input.
absl::Status RefuseOutputOverInputs(const std::string& output,
                                    const std::vector<std::string>& inputs);

// "writing WHERE: REASON": the one line for a failed write.
std::string WriteError(absl::string_view where, int error);

// A new file written beside its destination: a temporary file in the same directory (O_EXCL, mode
// 0600), which Commit() writes to disk (fsync) and renames over the destination. Until then, and
// after any failure, the destination is as it was; the temporary file is removed by any failure
// and by the destructor. A destination that is a symbolic link is replaced where the link points.
class AtomicFile {
 public:
  // Fails when `path` exists and is not a regular file (a device, a FIFO, a directory), or the
  // temporary file cannot be created.
  static absl::StatusOr<std::unique_ptr<AtomicFile>> Create(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  absl::Status Write(absl::string_view bytes);
  // Appends the whole content of the regular file `source`.
  absl::Status CopyFrom(const std::string& source);
  // Gives the file `mode`, writes it to disk and renames it over the destination.
  absl::Status Commit(mode_t mode);

 private:
  AtomicFile() = default;
  // Closes and removes the temporary file.
  void Discard();
  // Discard(), and the error naming the destination.
  absl::Status Fail(int error);

  std::string path_;       // as the user named it, for messages
  std::string target_;     // what is replaced: `path_`, or where it links to
  std::string temporary_;  // empty once renamed or removed
  int fd_ = -1;
};

// The permissions a new file gets from open(): 0666 less the umask.
mode_t NewFileMode();

// A command's output written as it is produced: to standard output for "-" (its failure is
// reported by FinishOutput()), else through an AtomicFile that Finish() commits with NewFileMode()
// (until then, and after any failure, `path` is as it was).
class OutputWriter {
 public:
  static absl::StatusOr<std::unique_ptr<OutputWriter>> Open(const std::string& path);
  absl::Status Write(absl::string_view bytes);
  absl::Status Finish();

 private:
  std::unique_ptr<AtomicFile> file_;  // null: standard output
};

// `bytes` written to `path` through an OutputWriter.
absl::Status WriteWholeFile(const std::string& path, absl::string_view bytes);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_CLI_OUTPUT_FILE_H_
