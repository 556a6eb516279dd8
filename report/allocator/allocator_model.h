// Models of the allocators PyTorch can run on, behind one interface (AllocatorModel), so that the
// replay (report/allocator/allocator_replay.h) and `gpumem whatif` serve all of them with one code
// path.
//
// NativeAllocatorModel: PyTorch's native CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
// the rules of PyTorch 2.x): fed the tensor allocations and frees a `--tensors` trace recorded, it
// says what the native allocator would have reserved from the driver, how much of that it could not
// give back, and whether a device of a given size would have run out. The rules it keeps:
//
// - requests round up to 512 bytes; up to 1 MiB they come from the small pool, above from the large
//   one; pools are per stream;
// - a new segment is 2 MiB for the small pool, 20 MiB for requests below 10 MiB, else the request
//   rounded up to 2 MiB;
// - a request takes the smallest free block of its pool and stream that fits (best fit), split
//   when what is left is at least 512 bytes (small pool) or more than 1 MiB (large pool);
// - with max_split_size, a block that large is never split: it serves no smaller request, and a
//   request that large takes it only when it wastes less than 20 MiB;
// - a freed block merges with free neighbours of its segment;
// - when the device cannot take a new segment, the cache is emptied (every wholly free segment
//   released) and the segment asked for again: only then is it an out-of-memory error.
//
// ExpandableSegmentsModel: the same allocator with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
// (rules below, at the class).
//
// AsyncPoolModel: PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, the driver's stream-ordered
// pool (rules below, at the class).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "absl/strings/string_view.h"

namespace gpumem::report {

// One statistic, as PyTorch keeps it: now, highest, total increase, total decrease (saturating at
// 2^64 - 1: report/format/sizes.h).
struct SummaryStat {
  uint64_t current = 0;
  uint64_t peak = 0;
  uint64_t allocated = 0;
  uint64_t freed = 0;

  void Increase(uint64_t amount);
  void Decrease(uint64_t amount);
};

// A statistic for all of a device and split by pool.
struct PoolStat {
  SummaryStat all;
  SummaryStat large_pool;
  SummaryStat small_pool;

  void Increase(uint64_t amount, bool small);
  void Decrease(uint64_t amount, bool small);
  // Increase(delta) or Decrease(-delta): PyTorch applies each operation's net change once.
  void Change(int64_t delta, bool small);
};

inline constexpr uint64_t kUnlimitedDeviceMemory = std::numeric_limits<uint64_t>::max();

struct NativeAllocatorConfig {
  // What the driver can give before cudaMalloc fails (total device memory, or a what-if size).
  uint64_t device_memory = kUnlimitedDeviceMemory;
  // PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb, in bytes; unlimited by default.
  uint64_t max_split_size = std::numeric_limits<uint64_t>::max();
};

// The figures of torch.cuda.memory_stats() a model keeps (all pools together).
struct AllocatorModelStats {
  uint64_t allocated = 0;  // bytes in blocks handed out (rounded and unsplit sizes included)
  uint64_t allocated_peak = 0;
  uint64_t requested = 0;  // what the program asked for
  uint64_t reserved = 0;   // bytes of segments held from the driver
  uint64_t reserved_peak = 0;
  uint64_t segments = 0;
  uint64_t segment_allocations = 0;  // cudaMalloc calls (expandable segments: pages mapped)
  uint64_t retries = 0;              // times the cache was emptied to make room (num_alloc_retries)
  uint64_t ooms = 0;
};

// The statistics of torch.cuda.memory_stats() that the summary table shows from a model, kept the
// way CUDACachingAllocator.cpp keeps them (so Tot Alloc and Tot Freed are its too). Each segment
// counts in the pool it serves (small: the 2 MiB segments or pages of requests of at most 1 MiB).
// The async pool is not split: it counts as the large pool.
struct AllocatorPoolStats {
  PoolStat reserved_bytes;  // segments (expandable: pages) held from the driver
  PoolStat segment;
  // PyTorch's "non-releasable": free blocks of segments that are split (that also hold allocated
  // blocks), in bytes and in blocks. PyTorch leaves expandable segments out: 0 there.
  PoolStat inactive_split_bytes;
  PoolStat inactive_split;
  // Blocks and segments of at least max_split_size (0 while it is not set); large pool only.
  PoolStat oversize_allocations;
  PoolStat oversize_segments;
};

// An allocator fed one process's allocations and frees on one device, in order.
class AllocatorModel {
 public:
  virtual ~AllocatorModel() = default;
  // An allocation `id` of `size` bytes on `stream`. False: out of memory, even after emptying the
  // cache (nothing is allocated then); also for a size over kMaxAllocationBytes
  // (report/format/sizes.h), which no device can hold.
  virtual bool Allocate(uint64_t id, uint64_t size, uint64_t stream) = 0;
  // Frees allocation `id`; an unknown id is ignored.
  virtual void Free(uint64_t id) = 0;
  // torch.cuda.empty_cache(): gives back to the driver what the allocator holds and does not use,
  // as far as its rules allow.
  virtual void EmptyCache() = 0;
  // Free bytes held from the driver that EmptyCache() could not give back (PyTorch's
  // "non-releasable memory").
  virtual uint64_t NonReleasable() const = 0;
  // The largest free block inside what the allocator holds.
  virtual uint64_t LargestFreeBlock() const = 0;
  // Whether the model knows its blocks (segments, non-releasable memory, largest free block): the
  // driver's pool keeps its own, which no trace shows.
  virtual bool KnowsBlocks() const { return true; }

  const AllocatorModelStats& stats() const { return stats_; }
  const AllocatorPoolStats& pool_stats() const { return pool_stats_; }
  // All free bytes inside what the allocator holds.
  uint64_t FreeInSegments() const { return stats_.reserved - stats_.allocated; }

 protected:
  // Counts `size` bytes newly held from the driver for the pool (peak included), and given back.
  void Reserve(uint64_t size, bool small);
  void Release(uint64_t size, bool small);
  // Counts a block of `size` bytes handed out for a request of `requested` bytes.
  void CountAllocated(uint64_t size, uint64_t requested);
  // True, with the OOM counted, for a request over kMaxAllocationBytes: every size a model rounds
  // stays far from 2^64 that way.
  bool RefuseImpossible(uint64_t size);
  // Whether the driver could give `size` more bytes within the device memory.
  bool DeviceHasRoom(uint64_t device_memory, uint64_t size) const {
    return size <= device_memory && stats_.reserved <= device_memory - size;
  }

  AllocatorModelStats stats_;
  AllocatorPoolStats pool_stats_;
};

class NativeAllocatorModel final : public AllocatorModel {
 public:
  static constexpr uint64_t kMinBlockSize = 512;
  static constexpr uint64_t kSmallSize = uint64_t{1} << 20;
  static constexpr uint64_t kSmallBuffer = uint64_t{2} << 20;
  static constexpr uint64_t kLargeBuffer = uint64_t{20} << 20;
  static constexpr uint64_t kMinLargeAlloc = uint64_t{10} << 20;
  static constexpr uint64_t kRoundLarge = uint64_t{2} << 20;

  explicit NativeAllocatorModel(NativeAllocatorConfig config = {}) : config_(config) {}

  bool Allocate(uint64_t id, uint64_t size, uint64_t stream) override;
  void Free(uint64_t id) override;
  // Releases every segment with nothing allocated in it.
  void EmptyCache() override;
  // Free bytes inside segments that hold allocated blocks too.
  uint64_t NonReleasable() const override;
  uint64_t LargestFreeBlock() const override;

  static uint64_t RoundSize(uint64_t size);
  static uint64_t SegmentSize(uint64_t rounded);

 private:
  struct Block {
    uint64_t size = 0;
    bool allocated = false;
  };
  struct Segment {
    uint64_t size = 0;
    uint64_t stream = 0;
    bool small = false;
    uint64_t allocated_blocks = 0;
    std::map<uint64_t, Block> blocks;  // by offset
  };
  // A free block in a pool, ordered the way PyTorch searches: stream, size, then address.
  using FreeKey =
      std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>;  // stream, size, segment, offset
  struct Allocation {
    uint64_t segment = 0;
    uint64_t offset = 0;
    uint64_t requested = 0;
  };

  std::set<FreeKey>& Pool(bool small) { return small ? small_free_ : large_free_; }
  // The best-fitting free block of the pool, if PyTorch would take it.
  bool TakeFreeBlock(uint64_t id, uint64_t rounded, uint64_t requested, uint64_t stream,
                     bool small);
  // A new segment from the driver, if the device has room, and the allocation placed in it.
  bool NewSegment(uint64_t id, uint64_t rounded, uint64_t requested, uint64_t stream, bool small);
  // Marks the free block at (segment, offset) allocated, split off what is left if the rule says.
  void Place(uint64_t id, uint64_t segment_id, uint64_t offset, uint64_t rounded,
             uint64_t requested, bool small);

  NativeAllocatorConfig config_;
  std::unordered_map<uint64_t, Segment> segments_;
  uint64_t next_segment_ = 1;
  std::set<FreeKey> small_free_;
  std::set<FreeKey> large_free_;
  std::unordered_map<uint64_t, Allocation> allocations_;
};

// PyTorch's caching allocator with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True. The rules it
// keeps (PyTorch 2.x, CUDACachingAllocator.cpp's ExpandableSegment and its callers):
//
// - requests round to 512 bytes and go to the small (at most 1 MiB) or large pool, as natively;
// - each stream has one segment per pool: a range of virtual addresses larger than the device,
//   backed by physical pages mapped on demand, 2 MiB pages in the small pool and 20 MiB pages in
//   the large one;
// - a request takes the smallest free mapped block of its pool and stream that fits (best fit),
//   split whenever at least 512 bytes are left, in both pools (no 1 MiB rule: the pages are not
//   cudaMalloc'd segments);
// - else the allocator looks for contiguous room: unmapped ranges by size (smallest first), each
//   taken together with a free block just before it, and maps pages there, as few as cover the
//   request: a free block at the end of the mapped part grows into the new pages, so a request
//   maps only what that block lacks;
// - a freed block merges with free neighbours; pages stay mapped (reserved) until empty_cache, or
//   the retry before an out-of-memory error, unmaps every whole page inside the free blocks;
// - reserved is the bytes of the pages mapped; a segment counts while it has any page mapped;
//   segment_allocations counts the pages mapped (one cuMemCreate each).
class ExpandableSegmentsModel final : public AllocatorModel {
 public:
  static constexpr uint64_t kSmallPage = NativeAllocatorModel::kSmallBuffer;
  static constexpr uint64_t kLargePage = NativeAllocatorModel::kLargeBuffer;
  // The virtual range of a segment: larger than any device, so room is found in it while the
  // device has memory.
  static constexpr uint64_t kAddressSpace = uint64_t{1} << 48;

  explicit ExpandableSegmentsModel(uint64_t device_memory = std::numeric_limits<uint64_t>::max())
      : device_memory_(device_memory) {}

  bool Allocate(uint64_t id, uint64_t size, uint64_t stream) override;
  void Free(uint64_t id) override;
  // Unmaps every whole page inside a free block.
  void EmptyCache() override;
  // Free mapped bytes that are not whole pages of a free block (EmptyCache() cannot unmap them).
  uint64_t NonReleasable() const override;
  uint64_t LargestFreeBlock() const override;

 private:
  enum class State : uint8_t { kFree, kAllocated, kUnmapped };
  struct Block {
    uint64_t size = 0;
    State state = State::kUnmapped;
  };
  using SizeOffset = std::pair<uint64_t, uint64_t>;
  struct Segment {
    uint64_t page = 0;
    uint64_t mapped = 0;               // bytes of the pages mapped
    std::map<uint64_t, Block> blocks;  // by offset, covering [0, kAddressSpace)
    std::set<SizeOffset> free;         // free mapped blocks, smallest first
    std::set<SizeOffset> unmapped;     // unmapped ranges, smallest first
  };
  struct Allocation {
    Segment* segment = nullptr;
    uint64_t offset = 0;
    uint64_t requested = 0;
  };

  Segment& SegmentFor(uint64_t stream, bool small);
  bool TakeFreeBlock(Segment& segment, uint64_t id, uint64_t rounded, uint64_t requested);
  // Maps the pages that give a free block of `rounded` bytes, if the device has room, and places
  // the allocation there.
  bool MapAndPlace(Segment& segment, uint64_t id, uint64_t rounded, uint64_t requested);
  void Place(Segment& segment, uint64_t id, uint64_t offset, uint64_t rounded, uint64_t requested);
  // Sets the block at `offset` to `state` (kept in the right set) and merges it with neighbours in
  // the same state (free with free, unmapped with unmapped); returns the merged block's offset.
  uint64_t SetState(Segment& segment, uint64_t offset, State state);
  // Cuts the block at `offset` in two at `offset + size`; the second part keeps its state.
  void Split(Segment& segment, uint64_t offset, uint64_t size);
  static std::set<SizeOffset>* SetOf(Segment& segment, State state);

  uint64_t device_memory_;
  std::map<std::pair<uint64_t, bool>, Segment> segments_;  // by (stream, small pool)
  std::unordered_map<uint64_t, Allocation> allocations_;
};

// PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync: every tensor is a cudaMallocAsync of exactly the
// bytes requested, from the device's default stream-ordered pool, which PyTorch lets keep what it
// takes (release threshold: unlimited) until empty_cache trims it. How the driver packs
// allocations inside the pool is not documented; the model assumes the pool holds the live bytes
// rounded up to its 2 MiB granularity at their highest since the last trim: reserved never falls
// by itself, and a request fails when the live bytes with it, so rounded, exceed the device (a trim
// cannot help then: it keeps the live bytes). No retries. This is a lower bound of what the real
// pool holds, which packs with gaps: on train_mlp.py (H100) the pool's own attribute peaked at
// 96 MiB where this rule gives 84 MiB (report/README.md). Blocks are the driver's: not known.
class AsyncPoolModel final : public AllocatorModel {
 public:
  static constexpr uint64_t kGranularity = uint64_t{2} << 20;

  explicit AsyncPoolModel(uint64_t device_memory = std::numeric_limits<uint64_t>::max())
      : device_memory_(device_memory) {}

  bool Allocate(uint64_t id, uint64_t size, uint64_t stream) override;
  void Free(uint64_t id) override;
  // Trims the pool to the live bytes (rounded up to the granularity).
  void EmptyCache() override;
  uint64_t NonReleasable() const override { return 0; }
  uint64_t LargestFreeBlock() const override { return 0; }
  bool KnowsBlocks() const override { return false; }

 private:
  uint64_t device_memory_;
  std::unordered_map<uint64_t, uint64_t> sizes_;  // by allocation id
};

enum class AllocatorKind { kNative, kExpandable, kAsync };
inline constexpr AllocatorKind kAllAllocators[] = {
    AllocatorKind::kNative, AllocatorKind::kExpandable, AllocatorKind::kAsync};
// "native", "expandable", "async": as --allocator names them.
const char* AllocatorKindName(AllocatorKind kind);
// "PyTorch's native caching allocator", ...: for people.
const char* AllocatorKindDescription(AllocatorKind kind);
bool ParseAllocatorKind(absl::string_view text, AllocatorKind* kind);
// The model of `kind` on a device of `config.device_memory`; max_split_size is the native
// allocator's alone.
std::unique_ptr<AllocatorModel> MakeAllocatorModel(AllocatorKind kind,
                                                   const NativeAllocatorConfig& config);

}  // namespace gpumem::report
