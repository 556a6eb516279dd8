// A model of PyTorch's native CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, the rules
// of PyTorch 2.x): fed the tensor allocations and frees a `--tensors` trace recorded, it says what
// the native allocator would have reserved from the driver, how much of that it could not give
// back, and whether a device of a given size would have run out. The rules it keeps:
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
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

namespace gpumem::report {

struct NativeAllocatorConfig {
  // What the driver can give before cudaMalloc fails (total device memory, or a what-if size).
  uint64_t device_memory = std::numeric_limits<uint64_t>::max();
  // PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb, in bytes; unlimited by default.
  uint64_t max_split_size = std::numeric_limits<uint64_t>::max();
};

// The figures of torch.cuda.memory_stats() the model keeps (all pools together).
struct NativeAllocatorStats {
  uint64_t allocated = 0;  // bytes in blocks handed out (rounded and unsplit sizes included)
  uint64_t allocated_peak = 0;
  uint64_t requested = 0;  // what the program asked for
  uint64_t reserved = 0;   // bytes of segments held from the driver
  uint64_t reserved_peak = 0;
  uint64_t segments = 0;
  uint64_t segment_allocations = 0;  // cudaMalloc calls
  uint64_t retries = 0;              // times the cache was emptied to make room (num_alloc_retries)
  uint64_t ooms = 0;
};

class NativeAllocatorModel {
 public:
  static constexpr uint64_t kMinBlockSize = 512;
  static constexpr uint64_t kSmallSize = uint64_t{1} << 20;
  static constexpr uint64_t kSmallBuffer = uint64_t{2} << 20;
  static constexpr uint64_t kLargeBuffer = uint64_t{20} << 20;
  static constexpr uint64_t kMinLargeAlloc = uint64_t{10} << 20;
  static constexpr uint64_t kRoundLarge = uint64_t{2} << 20;

  explicit NativeAllocatorModel(NativeAllocatorConfig config = {}) : config_(config) {}

  // A tensor allocation `id` of `size` bytes on `stream`. False: out of memory, even after
  // emptying the cache (nothing is allocated then).
  bool Allocate(uint64_t id, uint64_t size, uint64_t stream);
  // Frees allocation `id`; an unknown id is ignored.
  void Free(uint64_t id);
  // torch.cuda.empty_cache(): releases every segment with nothing allocated in it.
  void EmptyCache();

  const NativeAllocatorStats& stats() const { return stats_; }
  // Free bytes inside segments that hold allocated blocks too: what the allocator cannot give
  // back to the driver (PyTorch's "non-releasable memory").
  uint64_t NonReleasable() const;
  // The largest free block inside the segments, and all free bytes inside them.
  uint64_t LargestFreeBlock() const;
  uint64_t FreeInSegments() const { return stats_.reserved - stats_.allocated; }

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
  NativeAllocatorStats stats_;
  std::unordered_map<uint64_t, Segment> segments_;
  uint64_t next_segment_ = 1;
  std::set<FreeKey> small_free_;
  std::set<FreeKey> large_free_;
  std::unordered_map<uint64_t, Allocation> allocations_;
};

}  // namespace gpumem::report
