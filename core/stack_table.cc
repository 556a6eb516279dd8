#include "core/stack_table.h"

#include <string.h>
#include <sys/mman.h>

#include "core/hot_path.h"
#include "core/spin_lock.h"
#include "core/trace_ids.h"
#include "core/wire_writer.h"

namespace gpumem {

bool StackTable::Init() {
  if (slots_ != nullptr) return true;
  void* memory = mmap(nullptr, kSlots * sizeof(Slot), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) return false;
  slots_ = static_cast<Slot*>(memory);  // zero pages: every slot empty
  return true;
}

void StackTable::Reset() {
  insert_lock_.clear();
  next_id_.store(1);
  if (slots_ != nullptr) {
    // Give the pages back rather than writing zeros over 32 MiB.
    madvise(slots_, kSlots * sizeof(Slot), MADV_DONTNEED);
  }
}

namespace {

uint64_t MixIn(uint64_t hash, uint64_t value) {
  hash ^= value;
  hash *= 0xff51afd7ed558ccdull;
  return hash ^ (hash >> 32);
}

}  // namespace

GPUMEM_HOT uint64_t StackTable::Hash(const uint64_t* frames, size_t count) {
  // Two lanes, even and odd frames, so that two multiplications are in flight rather than one
  // chain of them as long as the stack.
  uint64_t even = 0x9e3779b97f4a7c15ull ^ count;
  uint64_t odd = 0xc2b2ae3d27d4eb4full;
  size_t i = 0;
  for (; i + 1 < count; i += 2) {
    even = MixIn(even, frames[i]);
    odd = MixIn(odd, frames[i + 1]);
  }
  if (i < count) even = MixIn(even, frames[i]);
  const uint64_t hash = MixIn(even, odd);
  return hash == 0 ? 1 : hash;  // 0 marks an empty slot
}

GPUMEM_HOT uint64_t StackTable::Find(uint64_t hash) const {
  if (slots_ == nullptr) return 0;
  for (size_t i = hash & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    uint64_t slot_hash = slots_[i].hash.load(std::memory_order_acquire);
    if (slot_hash == hash) return slots_[i].id.load(std::memory_order_relaxed);
    if (slot_hash == 0) return 0;
  }
}

uint64_t StackTable::Intern(uint64_t hash, const uint64_t* frames, size_t count, bool truncated,
                            const PythonStackFrames& python, PacketSink& sink, ModuleMap& modules) {
  if (slots_ == nullptr) return 0;
  SpinGuard guard(insert_lock_);
  if (uint64_t id = Find(hash); id != 0) return id;  // another thread won the race
  uint64_t id = next_id_.load(std::memory_order_relaxed);
  if (id > kMaxEntries) return 0;

  // Modules first: the reader must know every object a frame can point into.
  modules.RefreshIfChanged(sink);

  // Native frames (at most 256, 10 bytes each), then the Python lists (128 entries of at most
  // 10 + 5 + 5 bytes), with their tags and lengths.
  uint8_t buffer[64 + 11 * 257 + 21 * 129 + 64];
  wire::Writer writer(buffer, sizeof(buffer));
  size_t packet = writer.BeginNested(proto::trace_field::kPacket);
  size_t stack = writer.BeginNested(proto::packet_field::kStack);
  writer.Varint(proto::stack_field::kId, id);
  writer.PackedVarints(proto::stack_field::kFrame, frames, count);
  writer.Bool(proto::stack_field::kTruncated, truncated);
  if (python.count > 0) {
    writer.PackedVarints(proto::stack_field::kPythonCode, python.codes, python.count);
    writer.PackedVarints(proto::stack_field::kPythonLine, python.lines, python.count);
    writer.PackedVarints(proto::stack_field::kPythonGroup, python.groups, python.count);
    writer.Bool(proto::stack_field::kPythonTruncated, python.truncated);
  }
  writer.EndNested(stack);
  writer.EndNested(packet);
  if (writer.overflowed() || !sink.AppendPacket(writer.data(), writer.size())) return 0;

  size_t i = hash & (kSlots - 1);
  while (slots_[i].hash.load(std::memory_order_relaxed) != 0) i = (i + 1) & (kSlots - 1);
  slots_[i].id.store(id, std::memory_order_relaxed);
  slots_[i].hash.store(hash, std::memory_order_release);  // publish after the packet is written
  next_id_.store(id + 1, std::memory_order_relaxed);
  return id;
}

}  // namespace gpumem
