// The live plain allocations of a replay by address range: found by address on every free,
// searched for overlaps on every allocation, and told a double free from a free of an address never
// allocated. Shared by the replay (report/replay/replay.h) and the summary table
// (report/analysis/summary_table.h), which keep different values per allocation and the same rules:
// - an allocation over live ranges ends them (their frees were evidently missed): they are
//   "dropped", and a later free of their address is a free of an unknown address;
// - a free of an address freed and not allocated again since is a double free.
//
// Layout, for speed on long traces: a hash map by address finds an allocation (or marks its address
// freed); an AddressMap (report/replay/address_map.h) orders them for the overlap search. A free
// leaves its entry in the ordered map, stale (one search saved per free), and the overlap search of
// a later allocation erases the stale entries it passes or reuses one for itself. Values sit in
// slots, one per entry of the ordered map: a stale entry keeps its slot and the freed size until an
// allocation over it removes the entry; an allocation next to it leaves it in place, and shortens
// it where the two would overlap. So a stale entry's range held nothing else when it was freed,
// and nothing has been allocated in it since: an allocation at a freed address, no larger than the
// range (a training loop's, nearly always), needs no search. Memory is bounded by the live set and
// the freed addresses.
#ifndef GPUMEM_REPORT_REPLAY_LIVE_RANGES_H_
#define GPUMEM_REPORT_REPLAY_LIVE_RANGES_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "report/replay/address_map.h"

namespace gpumem::report {

// The end of [address, address + size): a zero-size allocation still occupies its address, and a
// range that would wrap ends at the top.
inline uint64_t RangeEnd(uint64_t address, uint64_t size) {
  size = size == 0 ? 1 : size;
  return address > std::numeric_limits<uint64_t>::max() - size
             ? std::numeric_limits<uint64_t>::max()
             : address + size;
}

enum class FreeOutcome { kFreed, kUnknownAddress, kDoubleFree };

// `Value` has a `uint64_t size` member: the allocation's size, set by the caller.
template <typename Value>
class LiveRanges {
 public:
  // Makes [address, address + size) live and returns its value, to fill: every field, `size`
  // first (the slot is reused; what it held is unspecified).
  // Live ranges overlapping it are first passed to `dropped(const Value&)` and
  // removed; returns through *overlapped whether there were any.
  template <typename Dropped>
  Value& Allocate(uint64_t address, uint64_t size, bool* overlapped, Dropped&& dropped) {
    const uint64_t end = RangeEnd(address, size);
    *overlapped = false;
    if (Value* again = AllocateInFreedRange(address, end)) return *again;
    // From the last entry starting below `end` down. Entries in [address, end) are erased (live
    // ones dropped), but the first stale one is kept, to be reused. The walk stops at the first
    // entry below `address`: a live one ending at or before `address` (live ranges are disjoint)
    // or a stale one (a live range reaching over a stale entry would have erased it on its way),
    // which keeps its place; a stale one whose freed range reaches into [address, end) is
    // shortened to end there, so that AllocateInFreedRange() knows what was allocated in it.
    // `cursor` is the first entry at or above `end`, or the kept one.
    using Position = typename AddressMap<uint32_t>::Position;
    Position cursor = order_.LowerBound(end);
    bool reuse = false;
    for (;;) {
      Position before = cursor;
      if (!order_.Previous(&before)) break;
      const uint64_t begin = order_.KeyAt(before);
      const uint32_t slot = order_.ValueAt(before);
      Slot& record = slots_[slot];
      if (begin < address) {
        if (RangeEnd(begin, record.value.size) <= address) break;
        if (!record.in_use) {
          record.value.size = address - begin;
          break;
        }
      } else if (!record.in_use && !reuse) {
        reuse = true;
        cursor = before;
        continue;
      }
      if (record.in_use) {
        *overlapped = true;
        dropped(static_cast<const Value&>(record.value));
        by_address_.erase(begin);  // dropped, not freed: a free of it is of an unknown address
      }
      Release(slot);
      cursor = order_.EraseAt(before);  // the entry after it: `cursor`'s entry
    }
    if (reuse) Release(order_.ValueAt(cursor));
    const uint32_t slot = NewSlot(address);
    if (reuse) {
      order_.ReplaceAt(cursor, address, slot);
    } else {
      order_.InsertAt(cursor, address, slot);
    }
    by_address_[address] = slot;
    return slots_[slot].value;
  }

  // Frees the allocation at `address`: passes it to `freed(const Value&)` first.
  template <typename Freed>
  FreeOutcome Free(uint64_t address, Freed&& freed) {
    auto it = by_address_.find(address);
    if (it == by_address_.end()) return FreeOutcome::kUnknownAddress;
    if ((it->second & kFreedBit) != 0) return FreeOutcome::kDoubleFree;
    Slot& slot = slots_[it->second];
    freed(static_cast<const Value&>(slot.value));
    slot.in_use = false;  // its entry in order_ is now stale, and keeps the slot
    it->second |= kFreedBit;
    return FreeOutcome::kFreed;
  }

  // The live allocation whose range holds `address` (an interior pointer too), or nullptr.
  // Where each tensor is an allocation, the pointers kernels take are mostly allocations' starts,
  // which one probe by address finds without the search; where a caching allocator's segments are
  // the allocations, they are mostly inside one, and the probe only costs. So the probe comes first
  // while starts have been the more frequent lately (a count kept here: not for concurrent calls).
  const Value* FindContaining(uint64_t address) const {
    const bool probe = starts_lately_ >= 0;
    if (probe) {
      auto it = by_address_.find(address);
      const bool start = it != by_address_.end() && (it->second & kFreedBit) == 0;
      NoteStart(start);
      if (start) return &slots_[it->second].value;
    }
    const uint32_t slot = SlotHolding(address);
    if (!probe) NoteStart(slot != kNoSlot && slots_[slot].address == address);
    return slot == kNoSlot ? nullptr : &slots_[slot].value;
  }

  // Calls `visit(const Value&)` for every live allocation, in no particular order.
  template <typename Visit>
  void ForEach(Visit&& visit) const {
    for (const Slot& slot : slots_) {
      if (slot.in_use) visit(static_cast<const Value&>(slot.value));
    }
  }

 private:
  struct Slot {
    Value value{};
    uint64_t address = 0;  // the key of its entry in order_
    bool in_use = false;   // live; else its entry is stale, or it is on free_slots_
    bool released = true;  // on free_slots_, no entry in order_
  };
  // In by_address_: the address was freed (and its slot, while released is false, is still the
  // stale entry's).
  static constexpr uint32_t kFreedBit = uint32_t{1} << 31;

  // An allocation of [address, end) at a freed address whose stale entry is still in order_ and
  // whose range held [address, end): live again in the same slot and entry. nullptr otherwise.
  Value* AllocateInFreedRange(uint64_t address, uint64_t end) {
    auto it = by_address_.find(address);
    if (it == by_address_.end() || (it->second & kFreedBit) == 0) return nullptr;
    const uint32_t slot = it->second & ~kFreedBit;
    Slot& record = slots_[slot];
    if (record.released || record.address != address ||
        end > RangeEnd(address, record.value.size)) {
      return nullptr;
    }
    record.in_use = true;
    it->second = slot;
    return &record.value;
  }

  static constexpr uint32_t kNoSlot = ~uint32_t{0};
  static constexpr int kStartsRemembered = 16;

  // The slot of the live allocation whose range holds `address`, by the ordered map; kNoSlot.
  uint32_t SlotHolding(uint64_t address) const {
    if (address == ~uint64_t{0}) return kNoSlot;
    // The last entry at or below `address`. No stale entry lies inside a live range (an allocation
    // erases or reuses those it covers), so if a live range holds `address`, this entry is it.
    typename AddressMap<uint32_t>::Position position = order_.LowerBound(address + 1);
    if (!order_.Previous(&position)) return kNoSlot;
    const uint64_t begin = order_.KeyAt(position);
    const uint32_t slot = order_.ValueAt(position);
    if (!IsLive(begin, slot) || address >= RangeEnd(begin, slots_[slot].value.size)) return kNoSlot;
    return slot;
  }
  void NoteStart(bool start) const {
    starts_lately_ =
        std::clamp(starts_lately_ + (start ? 1 : -1), -kStartsRemembered, kStartsRemembered);
  }

  // Whether the ordered map's entry (address, slot) is a live allocation, not a stale one.
  bool IsLive(uint64_t address, uint32_t slot) const {
    return slots_[slot].in_use && slots_[slot].address == address;
  }
  uint32_t NewSlot(uint64_t address) {
    uint32_t slot;
    if (free_slots_.empty()) {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
    }
    Slot& record = slots_[slot];
    record.address = address;
    record.in_use = true;
    record.released = false;
    return slot;
  }
  // The slot's entry left order_ (or is about to be replaced).
  void Release(uint32_t slot) {
    slots_[slot].in_use = false;
    slots_[slot].released = true;
    free_slots_.push_back(slot);
  }

  // By address: the slot of each live allocation; with kFreedBit, an address freed and not
  // allocated again since.
  absl::flat_hash_map<uint64_t, uint32_t> by_address_;
  AddressMap<uint32_t> order_;  // live and stale entries, by address
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  mutable int starts_lately_ = 0;  // FindContaining(): allocations' starts minus other pointers
};

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_REPLAY_LIVE_RANGES_H_
