#include "core/trace_sink.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/hot_path.h"
#include "core/self_timing.h"
#include "core/spin_lock.h"

namespace gpumem {
namespace {

using proto::RecordingStop;

constexpr size_t kReservedAddressSpace = size_t{1} << 38;  // 256 GiB: the largest trace
constexpr size_t kSmallestReservation = size_t{64} << 20;
constexpr uint64_t kPageSize = 4096;
constexpr uint64_t kGrowStep = uint64_t{16} << 20;
// Kept allocated past the writers' end by every growth: two footers (the one written when
// recording stops, the one at exit) take about 300 bytes.
constexpr uint64_t kLastRecordRoom = kPageSize;
// Where the trace's descriptor is moved (see MoveAboveProgramDescriptors).
constexpr int kHighDescriptor = 900;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

uint64_t RoundUp(uint64_t value, uint64_t step) { return (value + step - 1) / step * step; }

// The program's descriptors are handed out lowest first. Among them, the trace's would be hit by a
// program that dup2()s over low numbers, and once the program closed it, its number would be the
// next one the program opens, which a sink checking only its number would take for its own file.
// High up neither happens by chance, and the program numbers its own files as it would without
// gpumem. Below 1024, the usual soft limit, which also keeps the kernel's descriptor table small.
int MoveAboveProgramDescriptors(int fd) {
  rlim_t floor = kHighDescriptor;
  rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur <= floor) floor = files.rlim_cur / 2;
  if (floor <= static_cast<rlim_t>(fd)) return fd;
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(floor));
  if (high < 0) return fd;
  close(fd);
  return high;
}

// RLIMIT_FSIZE: writing past it raises SIGXFSZ, which kills the program. Read at every growth
// (rare): the program may change it.
uint64_t FileSizeLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  return limit.rlim_cur;
}

// Address space only, but `ulimit -v` (common on clusters) counts it: halved until it fits.
uint8_t* ReserveAddressSpace(size_t* size) {
  for (size_t reserve = kReservedAddressSpace; reserve >= kSmallestReservation; reserve /= 2) {
    void* base =
        mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base != MAP_FAILED) {
      *size = reserve;
      return static_cast<uint8_t*>(base);
    }
  }
  return nullptr;
}

}  // namespace

bool TraceSink::Open(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  fd = MoveAboveProgramDescriptors(fd);
  struct stat info;
  size_t reserve = 0;
  uint8_t* base = fstat(fd, &info) == 0 ? ReserveAddressSpace(&reserve) : nullptr;
  if (base == nullptr) {
    int saved = errno;
    close(fd);
    errno = saved;
    return false;
  }
  fd_ = fd;
  device_ = info.st_dev;
  inode_ = info.st_ino;
  path_ = path;
  base_ = base;
  reserved_ = reserve;
  next_offset_.store(0);
  file_size_.store(0);
  broken_.store(false);
  stop_reason_.store(0);
  stop_noticed_.store(false);
  allocated_ = 0;
  last_record_end_ = 0;
  grow_step_ = kGrowStep;
  descriptor_lost_ = false;
  finished_ = false;
  return true;
}

// Whether fd_ still refers to the file Open() created. Once it does not, it belongs to the
// program and is never used again.
bool TraceSink::DescriptorIsOurs() {
  if (descriptor_lost_) return false;
  struct stat info;
  if (fstat(fd_, &info) == 0 && info.st_dev == device_ && info.st_ino == inode_) return true;
  descriptor_lost_ = true;
  return false;
}

int TraceSink::Allocate(uint64_t new_size) {
  int error = posix_fallocate(fd_, static_cast<off_t>(allocated_),
                              static_cast<off_t>(new_size - allocated_));
  if (error == EOPNOTSUPP || error == EINVAL) {
    error = ftruncate(fd_, static_cast<off_t>(new_size)) == 0 ? 0 : errno;
  }
  return error;
}

RecordingStop TraceSink::Grow(uint64_t needed) {
  if (needed > reserved_) return RecordingStop::kAddressSpaceFull;
  if (!DescriptorIsOurs()) return RecordingStop::kDescriptorLost;
  const uint64_t limit = std::min<uint64_t>(reserved_, FileSizeLimit());
  if (needed > limit) return RecordingStop::kSizeLimit;
  // After Finish() the file is trimmed and only grows by what teardown events need.
  uint64_t new_size = needed;
  for (;;) {
    if (!finished_) new_size = std::min(RoundUp(needed, grow_step_), limit);
    const int error = Allocate(new_size);
    if (error == 0) break;
    if (error == EFBIG) return RecordingStop::kSizeLimit;
    if (error != ENOSPC && error != EDQUOT) return RecordingStop::kWriteFailed;
    if (finished_ || grow_step_ <= kPageSize) return RecordingStop::kDiskFull;
    grow_step_ /= 2;  // a full disk: what is left may still hold the rest of a small trace
  }
  if (grow_step_ < kGrowStep) grow_step_ *= 2;
  if (!DescriptorIsOurs()) return RecordingStop::kDescriptorLost;
  // Page-aligned windows: map from the page holding the old end to the new one.
  const uint64_t map_from = allocated_ & ~(kPageSize - 1);
  void* mapped = mmap(base_ + map_from, new_size - map_from, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_FIXED, fd_, static_cast<off_t>(map_from));
  if (mapped == MAP_FAILED) return RecordingStop::kWriteFailed;
  // The new pages' faults taken here, in one call (~2 ms per 16 MiB), rather than one by one in
  // the hooks that first write each page: on the H100 machine that took memory events from
  // 427-460 to 298-318 ns, launch events from 1554-1638 to 1215-1320 ns. Kernels before 5.14
  // refuse the advice; their hooks take the faults as before.
  if (!finished_) madvise(mapped, new_size - map_from, MADV_POPULATE_WRITE);
  allocated_ = new_size;
  return RecordingStop::kNone;
}

void TraceSink::Stop(RecordingStop reason) {
  // After Finish() the footer is written: teardown packets that do not fit are just dropped.
  if (!finished_) {
    last_record_end_ = file_size_.load(std::memory_order_relaxed);  // the room starts there
    stop_reason_.store(static_cast<uint32_t>(reason), std::memory_order_release);
  }
  broken_.store(true, std::memory_order_relaxed);
}

// Makes [0, end) of the file allocated and mapped for writers. Serialised; called rarely.
bool TraceSink::EnsureFileSize(uint64_t end) {
  SpinGuard guard(grow_lock_);
  if (end <= file_size_.load(std::memory_order_acquire)) return true;
  if (broken_.load(std::memory_order_relaxed)) return false;  // stopped while this writer waited
  const uint64_t room = finished_ ? 0 : kLastRecordRoom;
  const RecordingStop stop = Grow(end + room);
  if (stop != RecordingStop::kNone) {
    Stop(stop);
    return false;
  }
  file_size_.store(allocated_ - room, std::memory_order_release);
  return true;
}

GPUMEM_HOT bool TraceSink::Append(const uint8_t* data, size_t size) {
  if (fd_ < 0 || broken_.load(std::memory_order_relaxed)) return false;
  self_timing::Scope timing(self_timing::kSinkWrite);
  uint64_t offset = next_offset_.fetch_add(size, std::memory_order_relaxed);
  uint64_t end = offset + size;
  if (end > file_size_.load(std::memory_order_acquire) && !EnsureFileSize(end)) return false;
  memcpy(base_ + offset, data, size);
  return true;
}

bool TraceSink::AppendLastRecord(const uint8_t* data, size_t size) {
  SpinGuard guard(grow_lock_);
  // Writers that reserved space past the writers' end failed to grow it: the room is ours.
  if (stop_reason() == RecordingStop::kNone || last_record_end_ + size > allocated_) return false;
  memcpy(base_ + last_record_end_, data, size);
  last_record_end_ += size;
  return true;
}

bool TraceSink::TrimTo(uint64_t size) {
  if (DescriptorIsOurs()) return ftruncate(fd_, static_cast<off_t>(size)) == 0;
  // The program has the descriptor: the file is reached by its name, if that is still the file.
  // Never through a link, never blocking on a FIFO put there.
  const int fd = open(path_, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  struct stat info;
  const bool same = fstat(fd, &info) == 0 && info.st_dev == device_ && info.st_ino == inode_;
  const bool trimmed = same && ftruncate(fd, static_cast<off_t>(size)) == 0;
  close(fd);
  return trimmed;
}

void TraceSink::Finish() {
  if (fd_ < 0) return;
  SpinGuard guard(grow_lock_);
  if (finished_) return;
  if (stop_reason() != RecordingStop::kNone) {
    // Every writer fails now: the file ends after the last record.
    if (TrimTo(last_record_end_)) allocated_ = last_record_end_;
    finished_ = true;
    return;
  }
  // Claim [written, file size) the way writers claim space: once the offset has moved past the
  // file's end, every later packet lands beyond it and grows the file again, and every earlier
  // one lies below `written`, so cutting the file at `written` touches nobody's bytes.
  uint64_t file_size = file_size_.load();
  uint64_t written = next_offset_.load();
  while (written <= file_size && !next_offset_.compare_exchange_weak(written, file_size)) {
  }
  if (written > file_size || broken_.load()) return;  // a writer is already growing the file
  if (!TrimTo(written)) return;
  allocated_ = written;
  file_size_.store(written);
  finished_ = true;
  // Give the claimed tail back unless a teardown packet reserved space after it meanwhile (that
  // writer waits for our lock to grow the file; then a zero gap precedes it, which readers skip).
  uint64_t claimed_end = file_size;
  next_offset_.compare_exchange_strong(claimed_end, written);
}

void TraceSink::AbandonAfterFork() {
  if (base_ != nullptr) munmap(base_, reserved_);
  // The parent's descriptor, unless the program reused its number: then it is the program's.
  if (fd_ >= 0 && DescriptorIsOurs()) close(fd_);
  fd_ = -1;
  path_ = nullptr;
  base_ = nullptr;
  reserved_ = 0;
  next_offset_.store(0);
  file_size_.store(0);
  broken_.store(false);
  stop_reason_.store(0);
  stop_noticed_.store(false);
  grow_lock_.clear();
  allocated_ = 0;
  last_record_end_ = 0;
  descriptor_lost_ = false;
  finished_ = false;
}

}  // namespace gpumem
