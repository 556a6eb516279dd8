#include "core/trace_sink.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/spin_lock.h"

namespace gpumem {
namespace {

constexpr size_t kReservedAddressSpace = size_t{1} << 38;  // 256 GiB: the largest trace
constexpr size_t kSmallestReservation = size_t{64} << 20;
constexpr uint64_t kGrowStep = uint64_t{16} << 20;

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
  file_size_.store(new_size, std::memory_order_release);
  return true;
}

bool TraceSink::Append(const uint8_t* data, size_t size) {
  if (fd_ < 0 || broken_.load(std::memory_order_relaxed)) return false;
  appends_in_flight_.fetch_add(1);
  while (finishing_.load()) {
    appends_in_flight_.fetch_sub(1);
    while (finishing_.load()) sched_yield();
    appends_in_flight_.fetch_add(1);
  }
  uint64_t offset = next_offset_.fetch_add(size, std::memory_order_relaxed);
  uint64_t end = offset + size;
  if (end > file_size_.load(std::memory_order_acquire) && !EnsureFileSize(end)) {
    broken_.store(true, std::memory_order_relaxed);
    appends_in_flight_.fetch_sub(1);
    return false;
  }
  memcpy(base_ + offset, data, size);
  appends_in_flight_.fetch_sub(1, std::memory_order_release);
  return true;
}

void TraceSink::Finish() {
  if (fd_ < 0) return;
  finishing_.store(true);
  // Threads still running at exit may be appending; give them a moment, never hang the exit.
  for (int spins = 0; appends_in_flight_.load() != 0; ++spins) {
    if (spins > 100000) {
      finishing_.store(false);
      return;  // untrimmed: readers skip the zero tail
    }
    sched_yield();
  }
  {
    SpinGuard guard(grow_lock_);
    uint64_t written = next_offset_.load();
    if (!broken_.load() && ftruncate(fd_, static_cast<off_t>(written)) == 0) {
      // Pages past the new end must not be touched until EnsureFileSize maps them again.
      uint64_t keep = (written + 4095) & ~uint64_t{4095};
      mmap(base_ + keep, reserved_ - keep, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
           0);
      file_size_.store(written);
      finished_ = true;
    }
  }
  finishing_.store(false);
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
  appends_in_flight_.store(0);
  finishing_.store(false);
  finished_ = false;
}

}  // namespace gpumem
