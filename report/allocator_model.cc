#include "report/allocator_model.h"

#include <algorithm>
#include <iterator>

namespace gpumem::report {

uint64_t NativeAllocatorModel::RoundSize(uint64_t size) {
  if (size < kMinBlockSize) return kMinBlockSize;
  return (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

uint64_t NativeAllocatorModel::SegmentSize(uint64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

bool NativeAllocatorModel::Allocate(uint64_t id, uint64_t size, uint64_t stream) {
  const uint64_t rounded = RoundSize(size);
  const bool small = rounded <= kSmallSize;
  if (TakeFreeBlock(id, rounded, size, stream, small)) return true;
  if (NewSegment(id, rounded, size, stream, small)) return true;
  // The driver said no: give back every wholly free segment, and ask once more.
  ++stats_.retries;
  EmptyCache();
  if (NewSegment(id, rounded, size, stream, small)) return true;
  ++stats_.ooms;
  return false;
}

bool NativeAllocatorModel::TakeFreeBlock(uint64_t id, uint64_t rounded, uint64_t requested,
                                         uint64_t stream, bool small) {
  std::set<FreeKey>& pool = Pool(small);
  // The smallest block of this stream that fits; like PyTorch, only that candidate is looked at.
  auto it = pool.lower_bound({stream, rounded, 0, 0});
  if (it == pool.end() || std::get<0>(*it) != stream) return false;
  const uint64_t block_size = std::get<1>(*it);
  if (rounded < config_.max_split_size && block_size >= config_.max_split_size) return false;
  if (rounded >= config_.max_split_size && block_size >= rounded + kLargeBuffer) return false;
  const uint64_t segment = std::get<2>(*it);
  const uint64_t offset = std::get<3>(*it);
  pool.erase(it);
  Place(id, segment, offset, rounded, requested, small);
  return true;
}

bool NativeAllocatorModel::NewSegment(uint64_t id, uint64_t rounded, uint64_t requested,
                                      uint64_t stream, bool small) {
  const uint64_t size = SegmentSize(rounded);
  if (size > config_.device_memory || stats_.reserved > config_.device_memory - size) return false;
  const uint64_t segment_id = next_segment_++;
  Segment& segment = segments_[segment_id];
  segment.size = size;
  segment.stream = stream;
  segment.small = small;
  segment.blocks[0] = Block{size, false};
  stats_.reserved += size;
  stats_.reserved_peak = std::max(stats_.reserved_peak, stats_.reserved);
  ++stats_.segments;
  ++stats_.segment_allocations;
  Place(id, segment_id, 0, rounded, requested, small);  // the new segment's block, not a search
  return true;
}

void NativeAllocatorModel::Place(uint64_t id, uint64_t segment_id, uint64_t offset,
                                 uint64_t rounded, uint64_t requested, bool small) {
  Segment& segment = segments_[segment_id];
  Block& block = segment.blocks[offset];
  const uint64_t remaining = block.size - rounded;
  const bool split = small ? remaining >= kMinBlockSize
                           : rounded < config_.max_split_size && remaining > kSmallSize;
  if (split) {
    block.size = rounded;
    segment.blocks[offset + rounded] = Block{remaining, false};
    Pool(small).insert({segment.stream, remaining, segment_id, offset + rounded});
  }
  block.allocated = true;
  ++segment.allocated_blocks;
  stats_.allocated += block.size;  // an unsplit block counts whole, as PyTorch counts it
  stats_.allocated_peak = std::max(stats_.allocated_peak, stats_.allocated);
  stats_.requested += requested;
  allocations_[id] = Allocation{segment_id, offset, requested};
}

void NativeAllocatorModel::Free(uint64_t id) {
  auto found = allocations_.find(id);
  if (found == allocations_.end()) return;
  const Allocation allocation = found->second;
  allocations_.erase(found);
  Segment& segment = segments_[allocation.segment];
  std::set<FreeKey>& pool = Pool(segment.small);
  auto it = segment.blocks.find(allocation.offset);
  it->second.allocated = false;
  --segment.allocated_blocks;
  stats_.allocated -= it->second.size;
  stats_.requested -= allocation.requested;
  // Merge with the free neighbours in the segment.
  if (auto next = std::next(it); next != segment.blocks.end() && !next->second.allocated) {
    pool.erase({segment.stream, next->second.size, allocation.segment, next->first});
    it->second.size += next->second.size;
    segment.blocks.erase(next);
  }
  if (it != segment.blocks.begin()) {
    if (auto previous = std::prev(it); !previous->second.allocated) {
      pool.erase({segment.stream, previous->second.size, allocation.segment, previous->first});
      previous->second.size += it->second.size;
      segment.blocks.erase(it);
      it = previous;
    }
  }
  pool.insert({segment.stream, it->second.size, allocation.segment, it->first});
}

void NativeAllocatorModel::EmptyCache() {
  for (auto it = segments_.begin(); it != segments_.end();) {
    const Segment& segment = it->second;
    if (segment.allocated_blocks != 0) {
      ++it;
      continue;
    }
    Pool(segment.small).erase({segment.stream, segment.size, it->first, 0});
    stats_.reserved -= segment.size;
    --stats_.segments;
    it = segments_.erase(it);
  }
}

uint64_t NativeAllocatorModel::NonReleasable() const {
  uint64_t bytes = 0;
  for (const auto& [id, segment] : segments_) {
    if (segment.allocated_blocks == 0) continue;
    for (const auto& [offset, block] : segment.blocks) bytes += block.allocated ? 0 : block.size;
  }
  return bytes;
}

uint64_t NativeAllocatorModel::LargestFreeBlock() const {
  uint64_t largest = 0;
  for (const std::set<FreeKey>* pool : {&small_free_, &large_free_}) {
    for (const FreeKey& key : *pool) largest = std::max(largest, std::get<1>(key));
  }
  return largest;
}

}  // namespace gpumem::report
