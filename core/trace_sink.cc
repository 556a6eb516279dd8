#include "core/trace_sink.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/hot_path.h"
#include "core/self_timing.h"
#include "core/spin_lock.h"

namespace gpumem {
namespace {

constexpr size_t kReservedAddressSpace = size_t{1} << 38;  // 256 GiB: the largest trace
constexpr size_t kSmallestReservation = size_t{64} << 20;
constexpr uint64_t kGrowStep = uint64_t{16} << 20;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

}  // namespace

bool TraceSink::Open(const char* path, bool exclusive) {
  int flags = O_RDWR | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC);
  int fd = open(path, flags, 0644);
  if (fd < 0) return false;
  // Address space only, but `ulimit -v` (common on clusters) counts it: halve until it fits.
  size_t reserve = kReservedAddressSpace;
  void* base = MAP_FAILED;
  for (; reserve >= kSmallestReservation; reserve /= 2) {
    base = mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base != MAP_FAILED) break;
  }
  if (base == MAP_FAILED) {
    int saved = errno;
    close(fd);
    errno = saved;
    return false;
  }
  fd_ = fd;
  base_ = static_cast<uint8_t*>(base);
  reserved_ = reserve;
  next_offset_.store(0);
  file_size_.store(0);
  broken_.store(false);
  finished_ = false;
  return true;
}

// Makes [0, end) of the file allocated and mapped. Serialised; called rarely.
bool TraceSink::EnsureFileSize(uint64_t end) {
  SpinGuard guard(grow_lock_);
  uint64_t size = file_size_.load(std::memory_order_acquire);
  if (end <= size) return true;
  if (end > reserved_) return false;
  // After Finish() the file is trimmed and only grows by what teardown events need.
  uint64_t new_size = finished_ ? end : ((end + kGrowStep - 1) / kGrowStep) * kGrowStep;
  if (new_size > reserved_) new_size = reserved_;
  int err = posix_fallocate(fd_, static_cast<off_t>(size), static_cast<off_t>(new_size - size));
  if (err == EOPNOTSUPP || err == EINVAL) {
    err = ftruncate(fd_, static_cast<off_t>(new_size)) == 0 ? 0 : errno;
  }
  if (err != 0) return false;
  // Page-aligned windows: map from the page holding `size` to the end.
  uint64_t map_from = size & ~uint64_t{4095};
  void* mapped = mmap(base_ + map_from, new_size - map_from, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_FIXED, fd_, static_cast<off_t>(map_from));
  if (mapped == MAP_FAILED) return false;
  // The new pages' faults taken here, in one call (~2 ms per 16 MiB), rather than one by one in
  // the hooks that first write each page: on the H100 machine that took memory events from
  // 427-460 to 298-318 ns, launch events from 1554-1638 to 1215-1320 ns. Kernels before 5.14
  // refuse the advice; their hooks take the faults as before.
  if (!finished_) madvise(mapped, new_size - map_from, MADV_POPULATE_WRITE);
  file_size_.store(new_size, std::memory_order_release);
  return true;
}

GPUMEM_HOT bool TraceSink::Append(const uint8_t* data, size_t size) {
  if (fd_ < 0 || broken_.load(std::memory_order_relaxed)) return false;
  self_timing::Scope timing(self_timing::kSinkWrite);
  uint64_t offset = next_offset_.fetch_add(size, std::memory_order_relaxed);
  uint64_t end = offset + size;
  if (end > file_size_.load(std::memory_order_acquire) && !EnsureFileSize(end)) {
    broken_.store(true, std::memory_order_relaxed);
    return false;
  }
  memcpy(base_ + offset, data, size);
  return true;
}

void TraceSink::Finish() {
  if (fd_ < 0) return;
  SpinGuard guard(grow_lock_);
  // Claim [written, file size) the way writers claim space: once the offset has moved past the
  // file's end, every later packet lands beyond it and grows the file again, and every earlier
  // one lies below `written`, so cutting the file at `written` touches nobody's bytes.
  uint64_t file_size = file_size_.load();
  uint64_t written = next_offset_.load();
  while (written <= file_size && !next_offset_.compare_exchange_weak(written, file_size)) {
  }
  if (written > file_size || broken_.load()) return;  // a writer is already growing the file
  if (ftruncate(fd_, static_cast<off_t>(written)) != 0) return;
  file_size_.store(written);
  finished_ = true;
  // Give the claimed tail back unless a teardown packet reserved space after it meanwhile (that
  // writer waits for our lock to grow the file; then a zero gap precedes it, which readers skip).
  uint64_t claimed_end = file_size;
  next_offset_.compare_exchange_strong(claimed_end, written);
}

void TraceSink::AbandonAfterFork() {
  if (base_ != nullptr) munmap(base_, reserved_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  base_ = nullptr;
  reserved_ = 0;
  next_offset_.store(0);
  file_size_.store(0);
  broken_.store(false);
  grow_lock_.clear();
  finished_ = false;
}

}  // namespace gpumem
