// The crash-safe trace file. Packets are copied into a MAP_SHARED mapping of the file, so what was
// appended is in the page cache the moment Append returns and survives kill -9, a segfault or an
// OOM kill of the process. Space is reserved with one atomic add per packet, so packets never
// interleave; a packet whose writer died half-way leaves zeros, which readers skip.
//
// The file grows in chunks allocated with fallocate (a full disk then stops the recording instead
// of raising SIGBUS in the host). Finish() trims the unused tail so a cleanly closed trace is one
// valid protobuf message: it first claims that tail with the same atomic add, so no writer can be
// copying into what it cuts off.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gpumem {

class TraceSink {
 public:
  // Creates `path` (exclusive when `exclusive`; errno kept for the caller). False on failure.
  bool Open(const char* path, bool exclusive);
  // Copies one already framed packet into the file. False when the trace is full or broken.
  bool Append(const uint8_t* data, size_t size);
  // Trims the file to what was written. Later appends still work (process teardown events).
  void Finish();
  // In a child after fork(): forgets the parent's file without touching it.
  void AbandonAfterFork();

  bool is_open() const { return fd_ >= 0; }
  uint64_t bytes_written() const { return next_offset_.load(std::memory_order_relaxed); }

 private:
  bool EnsureFileSize(uint64_t end);

  int fd_ = -1;
  uint8_t* base_ = nullptr;  // start of the reserved address range
  size_t reserved_ = 0;      // size of that range: the largest possible trace
  std::atomic<uint64_t> next_offset_{0};
  std::atomic<uint64_t> file_size_{0};  // bytes of the file that are allocated and mapped
  std::atomic<bool> broken_{false};
  std::atomic_flag grow_lock_ = ATOMIC_FLAG_INIT;
  bool finished_ = false;
};

}  // namespace gpumem
