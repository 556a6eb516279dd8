#include "report/cli/output_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "report/cli/commands.h"

namespace gpumem::report {
namespace {

// Where `path` leads: itself, or the file a symbolic link at `path` points to (renaming over the
// link would replace the link, not the file the user meant).
std::string ResolveLink(const std::string& path) {
  struct stat link;
  if (lstat(path.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) return path;
  std::error_code error;
  const std::filesystem::path resolved = std::filesystem::canonical(path, error);
  return error ? path : resolved.string();
}

// Makes a rename in the directory of `path` durable; best effort.
void SyncDirectoryOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  fsync(fd);
  close(fd);
}

}  // namespace

absl::Status RefuseOutputOverInputs(const std::string& output,
                                    const std::vector<std::string>& inputs) {
  const bool to_stdout = output == kStandardOutput;
  struct stat out;
  if ((to_stdout ? fstat(STDOUT_FILENO, &out) : stat(output.c_str(), &out)) != 0) {
    return absl::OkStatus();  // nothing there yet
  }
  if (!S_ISREG(out.st_mode)) return absl::OkStatus();  // every input is a regular file
  for (const std::string& input : inputs) {
    struct stat in;
    if (stat(input.c_str(), &in) != 0 || in.st_dev != out.st_dev || in.st_ino != out.st_ino) {
      continue;
    }
    if (to_stdout) {
      return absl::InvalidArgumentError(
          absl::StrCat("standard output is the input trace ", input, "; nothing written"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(output, ": the output would overwrite the input trace",
                     output == input ? "" : " " + input, "; nothing written"));
  }
  return absl::OkStatus();
}

std::string WriteError(absl::string_view where, int error) {
  return absl::StrCat("writing ", where, ": ", std::strerror(error));
}

absl::StatusOr<std::unique_ptr<AtomicFile>> AtomicFile::Create(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file; nothing written there"));
  }
  std::unique_ptr<AtomicFile> file(new AtomicFile());
  file->path_ = path;
  file->target_ = ResolveLink(path);
  file->temporary_ = file->target_ + ".tmp-XXXXXX";
  file->fd_ = mkostemp(file->temporary_.data(), O_CLOEXEC);  // O_EXCL, mode 0600
  if (file->fd_ < 0) {
    const int error = errno;
    file->temporary_.clear();
    return absl::UnavailableError(WriteError(path, error));
  }
  return file;
}

AtomicFile::~AtomicFile() { Discard(); }

void AtomicFile::Discard() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (!temporary_.empty()) unlink(temporary_.c_str());
  temporary_.clear();
}

absl::Status AtomicFile::Fail(int error) {
  Discard();
  return absl::UnavailableError(WriteError(path_, error));
}

absl::Status AtomicFile::Write(absl::string_view bytes) {
  if (fd_ < 0) return absl::FailedPreconditionError(WriteError(path_, EBADF));
  while (!bytes.empty()) {
    const ssize_t written = write(fd_, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return Fail(written < 0 ? errno : EIO);
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::CopyFrom(const std::string& source) {
  const int in = open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat info;
  if (in < 0 || fstat(in, &info) != 0 || !S_ISREG(info.st_mode)) {
    const int error = in < 0 ? errno : EINVAL;
    if (in >= 0) close(in);
    Discard();
    return absl::UnavailableError(absl::StrCat(
        "reading ", source, ": ", in < 0 ? std::strerror(error) : "not a regular file"));
  }
  std::vector<char> buffer(size_t{1} << 20);
  absl::Status status;
  while (status.ok()) {
    const ssize_t got = read(in, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      Discard();
      status = absl::UnavailableError(absl::StrCat("reading ", source, ": ", std::strerror(error)));
    }
    if (got <= 0) break;
    status = Write(absl::string_view(buffer.data(), static_cast<size_t>(got)));
  }
  close(in);
  return status;
}

absl::Status AtomicFile::Commit(mode_t mode) {
  if (fd_ < 0) return absl::FailedPreconditionError(WriteError(path_, EBADF));
  if (fsync(fd_) != 0 || fchmod(fd_, mode) != 0) return Fail(errno);
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) return Fail(errno);
  if (rename(temporary_.c_str(), target_.c_str()) != 0) return Fail(errno);
  temporary_.clear();
  SyncDirectoryOf(target_);
  return absl::OkStatus();
}

mode_t NewFileMode() {
  const mode_t mask = umask(0);
  umask(mask);
  return 0666 & ~mask;
}

absl::StatusOr<std::unique_ptr<OutputWriter>> OutputWriter::Open(const std::string& path) {
  auto writer = std::unique_ptr<OutputWriter>(new OutputWriter());
  if (path != kStandardOutput) {
    absl::StatusOr<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(path);
    if (!file.ok()) return file.status();
    writer->file_ = *std::move(file);
  }
  return writer;
}

absl::Status OutputWriter::Write(absl::string_view bytes) {
  if (file_ != nullptr) return file_->Write(bytes);
  WriteOutput(bytes);
  return absl::OkStatus();
}

absl::Status OutputWriter::Finish() {
  if (file_ != nullptr) return file_->Commit(NewFileMode());
  FlushOutput();
  return absl::OkStatus();
}

absl::Status WriteWholeFile(const std::string& path, absl::string_view bytes) {
  absl::StatusOr<std::unique_ptr<OutputWriter>> writer = OutputWriter::Open(path);
  if (!writer.ok()) return writer.status();
  if (absl::Status written = (*writer)->Write(bytes); !written.ok()) return written;
  return (*writer)->Finish();
}

}  // namespace gpumem::report
