// An ordered map from 64-bit addresses to small values, for the replay's table of live
// allocations: found by address on every free, searched by position on every allocation (what
// starts before it, to find overlaps), and changed on both. Keys live in sorted chunks of at most
// kMaxChunk entries, found through the sorted first keys of the chunks: two short searches, and an
// insert or erase moves at most one chunk's entries. With ten thousand live allocations this costs
// a fraction of a balanced tree's (std::map, absl::btree_map), whose rebalancing dominates the
// replay of a long trace. Memory is proportional to the entries: chunks that run low are merged.
#ifndef GPUMEM_REPORT_REPLAY_ADDRESS_MAP_H_
#define GPUMEM_REPORT_REPLAY_ADDRESS_MAP_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumem::report {

template <typename Value>
class AddressMap {
 public:
  // An entry's place: chunk and index in it. end() is {chunk count, 0}. Any insert or erase
  // invalidates positions.
  struct Position {
    size_t chunk = 0;
    size_t index = 0;
    bool operator==(const Position&) const = default;
  };

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Position end() const { return {chunks_.size(), 0}; }

  // The first entry whose key is >= `key`, or end().
  Position LowerBound(uint64_t key) const {
    if (chunks_.empty()) return end();
    // The last chunk whose first key is <= key (or the first chunk).
    const size_t above = FirstAbove(firsts_.data(), firsts_.size(), key);
    const size_t chunk = above == 0 ? 0 : above - 1;
    const std::vector<uint64_t>& keys = chunks_[chunk].keys;
    const size_t index = FirstAtLeast(keys.data(), keys.size(), key);
    if (index < keys.size()) return {chunk, index};
    return {chunk + 1, 0};  // chunk + 1 starts above key (or is end())
  }

  // The entry before `position` (which may be end()); false when there is none.
  bool Previous(Position* position) const {
    if (position->index > 0) {
      --position->index;
      return true;
    }
    if (position->chunk == 0) return false;
    --position->chunk;
    position->index = chunks_[position->chunk].keys.size() - 1;
    return true;
  }

  uint64_t KeyAt(Position position) const { return chunks_[position.chunk].keys[position.index]; }
  Value& ValueAt(Position position) { return chunks_[position.chunk].values[position.index]; }
  const Value& ValueAt(Position position) const {
    return chunks_[position.chunk].values[position.index];
  }

  // The value of `key`, or nullptr.
  Value* Find(uint64_t key) {
    const Position position = LowerBound(key);
    if (position == end() || KeyAt(position) != key) return nullptr;
    return &ValueAt(position);
  }

  // Gives the entry at `position` a new key and value. The key must keep the order: above the
  // entry before, below the entry after.
  void ReplaceAt(Position position, uint64_t key, const Value& value) {
    Chunk& chunk = chunks_[position.chunk];
    chunk.keys[position.index] = key;
    chunk.values[position.index] = value;
    if (position.index == 0) firsts_[position.chunk] = key;
  }

  // Inserts `key`, which must not be present, at `position` = LowerBound(key).
  void InsertAt(Position position, uint64_t key, const Value& value) {
    ++size_;
    if (chunks_.empty()) {
      chunks_.emplace_back();
      firsts_.push_back(key);
      position = {0, 0};
    } else if (position.chunk == chunks_.size()) {
      position = {chunks_.size() - 1, chunks_.back().keys.size()};  // after the last entry
    }
    Chunk& chunk = chunks_[position.chunk];
    chunk.keys.insert(chunk.keys.begin() + static_cast<ptrdiff_t>(position.index), key);
    chunk.values.insert(chunk.values.begin() + static_cast<ptrdiff_t>(position.index), value);
    if (position.index == 0) firsts_[position.chunk] = key;
    if (chunk.keys.size() > kMaxChunk) Split(position.chunk);
  }

  // Inserts `key` (must not be present).
  void Insert(uint64_t key, const Value& value) { InsertAt(LowerBound(key), key, value); }

  // Erases the entry at `position`; returns the position of the entry that followed it (or end()).
  Position EraseAt(Position position) {
    --size_;
    Chunk& chunk = chunks_[position.chunk];
    chunk.keys.erase(chunk.keys.begin() + static_cast<ptrdiff_t>(position.index));
    chunk.values.erase(chunk.values.begin() + static_cast<ptrdiff_t>(position.index));
    if (chunk.keys.empty()) {
      chunks_.erase(chunks_.begin() + static_cast<ptrdiff_t>(position.chunk));
      firsts_.erase(firsts_.begin() + static_cast<ptrdiff_t>(position.chunk));
      return {position.chunk, 0};  // the next chunk's first entry, or end()
    }
    if (position.index == 0) firsts_[position.chunk] = chunk.keys.front();
    Position next = position;
    if (next.index == chunk.keys.size()) next = {position.chunk + 1, 0};
    if (chunk.keys.size() < kMaxChunk / 4) next = MergeSmall(position.chunk, next);
    return next;
  }

  // Erases `key` if present; returns whether it was.
  bool Erase(uint64_t key) {
    const Position position = LowerBound(key);
    if (position == end() || KeyAt(position) != key) return false;
    EraseAt(position);
    return true;
  }

  // Calls visit(key, value) for every entry, in key order.
  template <typename Visit>
  void ForEach(Visit&& visit) const {
    for (const Chunk& chunk : chunks_) {
      for (size_t i = 0; i < chunk.keys.size(); ++i) visit(chunk.keys[i], chunk.values[i]);
    }
  }

 private:
  static constexpr size_t kMaxChunk = 128;

  // How many of the `n` sorted keys come before `key`: those < `key` (FirstAtLeast: the index of
  // the first >= `key`) or <= `key` (FirstAbove). Compared sixteen at a time, from every sixteenth
  // key first: the loads do not wait on one another, where each step of a binary search waits on
  // the load of the step before (the two searches of an allocation were most of its time). Binary
  // steps, without branches on the data, narrow a long run down first.
  template <typename Before>
  static size_t CountBefore(const uint64_t* keys, size_t n, Before before) {
    constexpr size_t kGroup = 16;
    const uint64_t* const first = keys;
    while (n > kGroup * kGroup) {
      const size_t half = n / 2;
      keys += half & (size_t{0} - static_cast<size_t>(before(keys[half - 1])));
      n -= half;
    }
    size_t groups = 0;  // whole groups before `key`
    for (size_t last = kGroup - 1; last < n; last += kGroup) groups += before(keys[last]);
    keys += groups * kGroup;
    const size_t rest = std::min(kGroup, n - groups * kGroup);
    size_t count = 0;
    for (size_t i = 0; i < rest; ++i) count += before(keys[i]);
    return static_cast<size_t>(keys - first) + count;
  }
  static size_t FirstAtLeast(const uint64_t* keys, size_t n, uint64_t key) {
    return CountBefore(keys, n, [key](uint64_t k) { return k < key; });
  }
  static size_t FirstAbove(const uint64_t* keys, size_t n, uint64_t key) {
    return CountBefore(keys, n, [key](uint64_t k) { return k <= key; });
  }

  struct Chunk {
    std::vector<uint64_t> keys;
    std::vector<Value> values;
  };

  void Split(size_t index) {
    Chunk upper;
    Chunk& lower = chunks_[index];
    const auto half = static_cast<ptrdiff_t>(lower.keys.size() / 2);
    upper.keys.assign(lower.keys.begin() + half, lower.keys.end());
    upper.values.assign(lower.values.begin() + half, lower.values.end());
    lower.keys.resize(static_cast<size_t>(half));
    lower.values.resize(static_cast<size_t>(half));
    firsts_.insert(firsts_.begin() + static_cast<ptrdiff_t>(index) + 1, upper.keys.front());
    chunks_.insert(chunks_.begin() + static_cast<ptrdiff_t>(index) + 1, std::move(upper));
  }

  // Merges chunk `index` into a neighbour when the two fit in half a chunk; returns where the
  // entry at `position` is then.
  Position MergeSmall(size_t index, Position position) {
    size_t lower = index;
    if (index + 1 < chunks_.size() &&
        chunks_[index].keys.size() + chunks_[index + 1].keys.size() <= kMaxChunk / 2) {
      lower = index;
    } else if (index > 0 &&
               chunks_[index - 1].keys.size() + chunks_[index].keys.size() <= kMaxChunk / 2) {
      lower = index - 1;
    } else {
      return position;
    }
    Chunk& into = chunks_[lower];
    Chunk& from = chunks_[lower + 1];
    const size_t offset = into.keys.size();
    into.keys.insert(into.keys.end(), from.keys.begin(), from.keys.end());
    into.values.insert(into.values.end(), from.values.begin(), from.values.end());
    chunks_.erase(chunks_.begin() + static_cast<ptrdiff_t>(lower) + 1);
    firsts_.erase(firsts_.begin() + static_cast<ptrdiff_t>(lower) + 1);
    if (position.chunk == lower + 1) return {lower, offset + position.index};
    if (position.chunk > lower + 1) return {position.chunk - 1, position.index};
    return position;
  }

  std::vector<uint64_t> firsts_;  // first key of each chunk, ascending
  std::vector<Chunk> chunks_;
  size_t size_ = 0;
};

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_REPLAY_ADDRESS_MAP_H_
