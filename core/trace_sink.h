// The crash-safe trace file. Packets are copied into a MAP_SHARED mapping of the file, so what was
// appended is in the page cache the moment Append returns and survives kill -9, a segfault or an
// OOM kill of the process. Space is reserved with one atomic add per packet, so packets never
// interleave; a packet whose writer died half-way leaves zeros, which readers skip.
//
// The file grows in chunks allocated with fallocate (a full disk then stops the recording instead
// of raising SIGBUS in the host); never past RLIMIT_FSIZE (no SIGXFSZ); on a full disk in smaller
// and smaller chunks, down to what the packet needs. Every growth keeps a small room past the
// writers' end, so that when a later growth fails a last record (the footer saying why) still
// fits. Finish() trims the unused tail so a cleanly closed trace is one valid protobuf message: it
// first claims that tail with the same atomic add, so no writer can be copying into what it cuts.
//
// The descriptor is the program's to close or reuse: it is moved to a high number at open, and
// before every operation on it (grow, map, trim) the sink checks that it is still the file it
// opened (device and inode). If not, the sink never touches it again, not even to close it; the
// mapping stays valid (it holds the file), so packets still go into space already allocated; the
// file is trimmed at exit by reopening its path, if that is still the same file.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/trace_ids.h"

namespace gpumem {

class TraceSink {
 public:
  // Creates `path` exclusively (never through a symbolic link, never over an existing file),
  // readable by its owner only. False on failure, errno kept for the caller (EEXIST: the name is
  // taken). `path` must outlive the sink: the file is reopened by it to be trimmed when the
  // program took the descriptor.
  bool Open(const char* path);
  // Copies one already framed packet into the file. False when recording stopped or the sink is
  // not open.
  bool Append(const uint8_t* data, size_t size);
  // Once recording stopped: copies a last packet (a footer) into the room kept for it. False when
  // it does not fit or recording goes on.
  bool AppendLastRecord(const uint8_t* data, size_t size);
  // Trims the file to what was written. Later appends still work (process teardown events).
  void Finish();
  // In a child after fork(): forgets the parent's file without touching it.
  void AbandonAfterFork();

  bool is_open() const { return fd_ >= 0; }
  uint64_t bytes_written() const { return next_offset_.load(std::memory_order_relaxed); }
  // Why recording stopped; kNone while it goes on.
  proto::RecordingStop stop_reason() const {
    return static_cast<proto::RecordingStop>(stop_reason_.load(std::memory_order_acquire));
  }
  // True for exactly one caller once recording stopped before Finish(): the one to tell the user.
  bool ClaimStopNotice() {
    return stop_reason() != proto::RecordingStop::kNone &&
           !stop_noticed_.load(std::memory_order_relaxed) && !stop_noticed_.exchange(true);
  }

 private:
  bool EnsureFileSize(uint64_t end);
  // Allocates and maps the file up to at least `needed` (more when the disk allows); kNone on
  // success, else why not. Called under grow_lock_.
  proto::RecordingStop Grow(uint64_t needed);
  int Allocate(uint64_t new_size);  // an errno value, 0 on success
  bool DescriptorIsOurs();
  void Stop(proto::RecordingStop reason);
  bool TrimTo(uint64_t size);

  // What every Append reads and writes first, in one cache line: in a framework each line gpumem
  // touches is a likely miss at every event.
  alignas(64) int fd_ = -1;
  std::atomic<bool> broken_{false};
  uint8_t* base_ = nullptr;  // start of the reserved address range
  std::atomic<uint64_t> next_offset_{0};
  // Bytes of the file that writers may fill: allocated and mapped, less the last record's room.
  std::atomic<uint64_t> file_size_{0};
  dev_t device_ = 0;  // of the file opened, to recognise it behind fd_
  ino_t inode_ = 0;
  const char* path_ = nullptr;
  size_t reserved_ = 0;  // size of that range: the largest possible trace
  std::atomic<uint32_t> stop_reason_{0};
  std::atomic<bool> stop_noticed_{false};
  std::atomic_flag grow_lock_ = ATOMIC_FLAG_INIT;
  // Under grow_lock_:
  uint64_t allocated_ = 0;        // bytes of the file allocated and mapped
  uint64_t last_record_end_ = 0;  // once stopped: where the next last record goes
  uint64_t grow_step_ = 0;        // halved while the disk is full, doubled back after
  bool descriptor_lost_ = false;  // fd_ is no longer our file: never used again
  bool finished_ = false;
};

}  // namespace gpumem
