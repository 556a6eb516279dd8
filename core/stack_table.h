// Stack interning: each distinct stack is written once, as a Stack packet, before the first event
// that refers to it; events carry only its id.
//
// Identity is a 64-bit hash of the frames (and their count), native and Python (the caller folds
// the Python frames in with HashPythonFrames, core/python_frames.h). The table keeps no frames, so
// a lookup is a few loads; two different stacks with the same hash would share an id, which for a
// million distinct stacks happens with a probability of about 3e-8 (accepted, see DESIGN).
// Lookups are lock-free; inserting takes a lock, writes the packet, then publishes the id, so
// another thread can never use an id whose packet is not yet in the file.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/module_map.h"
#include "core/packet_sink.h"

namespace gpumem {

// The Python part of a stack, innermost first: three parallel lists (Stack.python_*).
struct PythonStackFrames {
  const uint64_t* codes = nullptr;  // PythonCode ids
  const uint64_t* lines = nullptr;  // uint32 in the schema; 64-bit for the packed writer
  const uint64_t* groups = nullptr;
  size_t count = 0;
  bool truncated = false;
};

class StackTable {
 public:
  // Maps the table (address space only; pages are touched as stacks arrive).
  bool Init();
  // Empties the table for a new trace file (child after fork).
  void Reset();

  static uint64_t Hash(const uint64_t* frames, size_t count);
  // Hash(anything, 0), without running it on every event.
  static constexpr uint64_t kEmptyHash = 0xbe27d6cefa81bddcull;

  // Lock-free; 0 when unknown.
  uint64_t Find(uint64_t hash) const;
  // Returns the id of these frames, writing the Stack packet (and any modules not yet written)
  // first if they are new. 0 when the table is full or the packet could not be written. The
  // PythonCode packets of `python` must be in the file already.
  uint64_t Intern(uint64_t hash, const uint64_t* frames, size_t count, bool truncated,
                  const PythonStackFrames& python, PacketSink& sink, ModuleMap& modules);

  uint64_t stacks_written() const { return next_id_.load(std::memory_order_relaxed) - 1; }

 private:
  struct Slot {
    std::atomic<uint64_t> hash;
    std::atomic<uint64_t> id;
  };
  static constexpr size_t kSlots = size_t{1} << 21;
  static constexpr size_t kMaxEntries = kSlots / 4 * 3;

  Slot* slots_ = nullptr;
  std::atomic<uint64_t> next_id_{1};
  std::atomic_flag insert_lock_ = ATOMIC_FLAG_INIT;
};

}  // namespace gpumem
