#include "report/allocator/allocator_model.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "report/format/sizes.h"

namespace gpumem::report {

namespace {

// `value + unit` stays far from 2^64: requests are at most kMaxAllocationBytes (RefuseImpossible),
// offsets inside a segment below ExpandableSegmentsModel::kAddressSpace.
uint64_t RoundUp(uint64_t value, uint64_t unit) { return (value + unit - 1) / unit * unit; }
uint64_t RoundDown(uint64_t value, uint64_t unit) { return value / unit * unit; }

}  // namespace

void SummaryStat::Increase(uint64_t amount) {
  current = SaturatingAdd(current, amount);
  allocated = SaturatingAdd(allocated, amount);
  peak = std::max(peak, current);
}

void SummaryStat::Decrease(uint64_t amount) {
  current -= std::min(current, amount);
  freed = SaturatingAdd(freed, amount);
}

void PoolStat::Increase(uint64_t amount, bool small) {
  all.Increase(amount);
  (small ? small_pool : large_pool).Increase(amount);
}

void PoolStat::Decrease(uint64_t amount, bool small) {
  all.Decrease(amount);
  (small ? small_pool : large_pool).Decrease(amount);
}

void PoolStat::Change(int64_t delta, bool small) {
  if (delta > 0) Increase(static_cast<uint64_t>(delta), small);
  if (delta < 0) Decrease(static_cast<uint64_t>(-delta), small);
}

const char* AllocatorKindName(AllocatorKind kind) {
  switch (kind) {
    case AllocatorKind::kNative:
      return "native";
    case AllocatorKind::kExpandable:
      return "expandable";
    case AllocatorKind::kAsync:
      return "async";
  }
  return "native";
}

const char* AllocatorKindDescription(AllocatorKind kind) {
  switch (kind) {
    case AllocatorKind::kNative:
      return "PyTorch's native caching allocator";
    case AllocatorKind::kExpandable:
      return "PyTorch's caching allocator with expandable_segments:True";
    case AllocatorKind::kAsync:
      return "the stream-ordered pool of backend:cudaMallocAsync";
  }
  return "";
}

bool ParseAllocatorKind(absl::string_view text, AllocatorKind* kind) {
  for (const AllocatorKind candidate : kAllAllocators) {
    if (text == AllocatorKindName(candidate)) {
      *kind = candidate;
      return true;
    }
  }
  return false;
}

std::unique_ptr<AllocatorModel> MakeAllocatorModel(AllocatorKind kind,
                                                   const NativeAllocatorConfig& config) {
  switch (kind) {
    case AllocatorKind::kNative:
      return std::make_unique<NativeAllocatorModel>(config);
    case AllocatorKind::kExpandable:
      return std::make_unique<ExpandableSegmentsModel>(config.device_memory);
    case AllocatorKind::kAsync:
      return std::make_unique<AsyncPoolModel>(config.device_memory);
  }
  return nullptr;
}

void AllocatorModel::Reserve(uint64_t size, bool small) {
  stats_.reserved += size;
  stats_.reserved_peak = std::max(stats_.reserved_peak, stats_.reserved);
  pool_stats_.reserved_bytes.Increase(size, small);
}

void AllocatorModel::Release(uint64_t size, bool small) {
  stats_.reserved -= size;
  pool_stats_.reserved_bytes.Decrease(size, small);
}

void AllocatorModel::CountAllocated(uint64_t size, uint64_t requested) {
  stats_.allocated += size;
  stats_.allocated_peak = std::max(stats_.allocated_peak, stats_.allocated);
  stats_.requested += requested;
}

uint64_t NativeAllocatorModel::RoundSize(uint64_t size) {
  if (size < kMinBlockSize) return kMinBlockSize;
  return RoundUp(size, kMinBlockSize);
}

uint64_t NativeAllocatorModel::SegmentSize(uint64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return RoundUp(rounded, kRoundLarge);
}

bool AllocatorModel::RefuseImpossible(uint64_t size) {
  if (size <= kMaxAllocationBytes) return false;
  ++stats_.ooms;
  return true;
}

bool NativeAllocatorModel::Allocate(uint64_t id, uint64_t size, uint64_t stream) {
  if (RefuseImpossible(size)) return false;
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
  if (!DeviceHasRoom(config_.device_memory, size)) return false;
  const uint64_t segment_id = next_segment_++;
  Segment& segment = segments_[segment_id];
  segment.size = size;
  segment.stream = stream;
  segment.small = small;
  segment.blocks[0] = Block{size, false};
  Reserve(size, small);
  ++stats_.segments;
  ++stats_.segment_allocations;
  pool_stats_.segment.Increase(1, small);
  if (size >= config_.max_split_size) pool_stats_.oversize_segments.Increase(1, small);
  Place(id, segment_id, 0, rounded, requested, small);  // the new segment's block, not a search
  return true;
}

void NativeAllocatorModel::Place(uint64_t id, uint64_t segment_id, uint64_t offset,
                                 uint64_t rounded, uint64_t requested, bool small) {
  Segment& segment = segments_[segment_id];
  Block& block = segment.blocks[offset];
  // A free block of a split segment was inactive split memory: PyTorch counts the net change.
  const bool was_split = segment.blocks.size() > 1;
  const uint64_t free_size = block.size;
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
  CountAllocated(block.size, requested);  // an unsplit block counts whole, as PyTorch counts it
  pool_stats_.inactive_split_bytes.Change(
      static_cast<int64_t>(split ? remaining : 0) - static_cast<int64_t>(was_split ? free_size : 0),
      small);
  pool_stats_.inactive_split.Change(int64_t{split} - int64_t{was_split}, small);
  if (block.size >= config_.max_split_size) pool_stats_.oversize_allocations.Increase(1, small);
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
  if (it->second.size >= config_.max_split_size) {
    pool_stats_.oversize_allocations.Decrease(1, segment.small);
  }
  // Merge with the free neighbours in the segment: they stop being inactive split blocks of their
  // own.
  int64_t merged_bytes = 0;
  int64_t merged_blocks = 0;
  if (auto next = std::next(it); next != segment.blocks.end() && !next->second.allocated) {
    pool.erase({segment.stream, next->second.size, allocation.segment, next->first});
    merged_bytes += static_cast<int64_t>(next->second.size);
    ++merged_blocks;
    it->second.size += next->second.size;
    segment.blocks.erase(next);
  }
  if (it != segment.blocks.begin()) {
    if (auto previous = std::prev(it); !previous->second.allocated) {
      pool.erase({segment.stream, previous->second.size, allocation.segment, previous->first});
      merged_bytes += static_cast<int64_t>(previous->second.size);
      ++merged_blocks;
      previous->second.size += it->second.size;
      segment.blocks.erase(it);
      it = previous;
    }
  }
  pool.insert({segment.stream, it->second.size, allocation.segment, it->first});
  const bool split = segment.blocks.size() > 1;
  pool_stats_.inactive_split_bytes.Change(
      (split ? static_cast<int64_t>(it->second.size) : 0) - merged_bytes, segment.small);
  pool_stats_.inactive_split.Change(int64_t{split} - merged_blocks, segment.small);
}

void NativeAllocatorModel::EmptyCache() {
  for (auto it = segments_.begin(); it != segments_.end();) {
    const Segment& segment = it->second;
    if (segment.allocated_blocks != 0) {
      ++it;
      continue;
    }
    Pool(segment.small).erase({segment.stream, segment.size, it->first, 0});
    Release(segment.size, segment.small);
    --stats_.segments;
    pool_stats_.segment.Decrease(1, segment.small);
    if (segment.size >= config_.max_split_size) {
      pool_stats_.oversize_segments.Decrease(1, segment.small);
    }
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

// ---- expandable segments ----

std::set<ExpandableSegmentsModel::SizeOffset>* ExpandableSegmentsModel::SetOf(Segment& segment,
                                                                              State state) {
  switch (state) {
    case State::kFree:
      return &segment.free;
    case State::kUnmapped:
      return &segment.unmapped;
    case State::kAllocated:
      break;
  }
  return nullptr;
}

ExpandableSegmentsModel::Segment& ExpandableSegmentsModel::SegmentFor(uint64_t stream, bool small) {
  auto [it, inserted] = segments_.try_emplace({stream, small});
  Segment& segment = it->second;
  if (inserted) {
    segment.page = small ? kSmallPage : kLargePage;
    segment.blocks[0] = Block{kAddressSpace, State::kUnmapped};
    segment.unmapped.insert({kAddressSpace, 0});
  }
  return segment;
}

bool ExpandableSegmentsModel::Allocate(uint64_t id, uint64_t size, uint64_t stream) {
  if (RefuseImpossible(size)) return false;
  const uint64_t rounded = NativeAllocatorModel::RoundSize(size);
  Segment& segment = SegmentFor(stream, rounded <= NativeAllocatorModel::kSmallSize);
  if (TakeFreeBlock(segment, id, rounded, size)) return true;
  if (MapAndPlace(segment, id, rounded, size)) return true;
  // The driver said no: unmap the free pages everywhere, and map once more.
  ++stats_.retries;
  EmptyCache();
  if (MapAndPlace(segment, id, rounded, size)) return true;
  ++stats_.ooms;
  return false;
}

bool ExpandableSegmentsModel::TakeFreeBlock(Segment& segment, uint64_t id, uint64_t rounded,
                                            uint64_t requested) {
  auto it = segment.free.lower_bound({rounded, 0});
  if (it == segment.free.end()) return false;
  Place(segment, id, it->second, rounded, requested);
  return true;
}

bool ExpandableSegmentsModel::MapAndPlace(Segment& segment, uint64_t id, uint64_t rounded,
                                          uint64_t requested) {
  // The first unmapped range (smallest first) that, with the free block before it and the free or
  // unmapped blocks after it, spans the request.
  uint64_t start = 0;
  bool found = false;
  for (const auto& [size, offset] : segment.unmapped) {
    auto it = segment.blocks.find(offset);
    if (it != segment.blocks.begin() && std::prev(it)->second.state == State::kFree) --it;
    start = it->first;
    uint64_t span = 0;
    for (; it != segment.blocks.end() && it->second.state != State::kAllocated && span < rounded;
         ++it) {
      span += it->second.size;
    }
    if (span >= rounded) {
      found = true;
      break;
    }
  }
  if (!found) return false;
  // The pages to map: of each unmapped range in the chain, what the request still lacks, in whole
  // pages, from its start.
  std::vector<SizeOffset> to_map;  // (bytes, offset)
  uint64_t pages = 0;
  uint64_t covered = 0;
  for (auto it = segment.blocks.find(start); covered < rounded; ++it) {
    if (it->second.state == State::kFree) {
      covered += it->second.size;
      continue;
    }
    const uint64_t bytes = std::min(RoundUp(rounded - covered, segment.page), it->second.size);
    to_map.push_back({bytes, it->first});
    pages += bytes;
    covered += bytes;
  }
  if (!DeviceHasRoom(device_memory_, pages)) return false;
  const bool small = segment.page == kSmallPage;
  for (const auto& [bytes, offset] : to_map) {
    Split(segment, offset, bytes);
    SetState(segment, offset, State::kFree);
    Reserve(bytes, small);
    stats_.segment_allocations += bytes / segment.page;
  }
  if (segment.mapped == 0) {
    ++stats_.segments;
    pool_stats_.segment.Increase(1, small);
  }
  segment.mapped += pages;
  Place(segment, id, start, rounded, requested);
  return true;
}

void ExpandableSegmentsModel::Split(Segment& segment, uint64_t offset, uint64_t size) {
  Block& block = segment.blocks[offset];
  if (size >= block.size) return;
  const Block rest{block.size - size, block.state};
  if (std::set<SizeOffset>* set = SetOf(segment, block.state)) {
    set->erase({block.size, offset});
    set->insert({size, offset});
    set->insert({rest.size, offset + size});
  }
  block.size = size;
  segment.blocks[offset + size] = rest;
}

uint64_t ExpandableSegmentsModel::SetState(Segment& segment, uint64_t offset, State state) {
  auto it = segment.blocks.find(offset);
  if (std::set<SizeOffset>* old = SetOf(segment, it->second.state)) {
    old->erase({it->second.size, offset});
  }
  it->second.state = state;
  std::set<SizeOffset>* set = SetOf(segment, state);
  if (set != nullptr) {
    if (auto next = std::next(it); next != segment.blocks.end() && next->second.state == state) {
      set->erase({next->second.size, next->first});
      it->second.size += next->second.size;
      segment.blocks.erase(next);
    }
    if (it != segment.blocks.begin()) {
      if (auto previous = std::prev(it); previous->second.state == state) {
        set->erase({previous->second.size, previous->first});
        previous->second.size += it->second.size;
        segment.blocks.erase(it);
        it = previous;
      }
    }
    set->insert({it->second.size, it->first});
  }
  return it->first;
}

void ExpandableSegmentsModel::Place(Segment& segment, uint64_t id, uint64_t offset,
                                    uint64_t rounded, uint64_t requested) {
  // Split whenever 512 bytes are left, in both pools.
  if (segment.blocks[offset].size - rounded >= NativeAllocatorModel::kMinBlockSize) {
    Split(segment, offset, rounded);
  }
  SetState(segment, offset, State::kAllocated);
  CountAllocated(segment.blocks[offset].size, requested);
  allocations_[id] = Allocation{&segment, offset, requested};
}

void ExpandableSegmentsModel::Free(uint64_t id) {
  auto found = allocations_.find(id);
  if (found == allocations_.end()) return;
  const Allocation allocation = found->second;
  allocations_.erase(found);
  Segment& segment = *allocation.segment;
  stats_.allocated -= segment.blocks[allocation.offset].size;
  stats_.requested -= allocation.requested;
  SetState(segment, allocation.offset, State::kFree);
}

void ExpandableSegmentsModel::EmptyCache() {
  for (auto& [key, segment] : segments_) {
    const bool small = key.second;
    const std::vector<SizeOffset> free(segment.free.begin(), segment.free.end());
    for (const auto& [size, offset] : free) {
      const uint64_t first = RoundUp(offset, segment.page);
      const uint64_t end = RoundDown(offset + size, segment.page);
      if (end <= first) continue;
      Split(segment, offset, first - offset);  // no-op when the block starts on a page
      Split(segment, first, end - first);
      SetState(segment, first, State::kUnmapped);
      Release(end - first, small);
      segment.mapped -= end - first;
    }
    if (segment.mapped == 0 && !free.empty()) {
      --stats_.segments;
      pool_stats_.segment.Decrease(1, small);
    }
  }
}

uint64_t ExpandableSegmentsModel::NonReleasable() const {
  uint64_t bytes = 0;
  for (const auto& [key, segment] : segments_) {
    for (const auto& [size, offset] : segment.free) {
      const uint64_t first = RoundUp(offset, segment.page);
      const uint64_t end = RoundDown(offset + size, segment.page);
      bytes += size - (end > first ? end - first : 0);
    }
  }
  return bytes;
}

uint64_t ExpandableSegmentsModel::LargestFreeBlock() const {
  uint64_t largest = 0;
  for (const auto& [key, segment] : segments_) {
    if (!segment.free.empty()) largest = std::max(largest, segment.free.rbegin()->first);
  }
  return largest;
}

// ---- the stream-ordered pool ----

bool AsyncPoolModel::Allocate(uint64_t id, uint64_t size, uint64_t /*stream*/) {
  if (RefuseImpossible(size)) return false;
  // The live bytes with this request, rounded up to the granularity; where that does not fit in 64
  // bits, it fits no device either.
  const uint64_t live = SaturatingAdd(stats_.allocated, size);
  if (live > std::numeric_limits<uint64_t>::max() - kGranularity ||
      RoundUp(live, kGranularity) > device_memory_) {
    ++stats_.ooms;
    return false;
  }
  const uint64_t needed = RoundUp(live, kGranularity);
  if (needed > stats_.reserved) Reserve(needed - stats_.reserved, /*small=*/false);
  stats_.segments = stats_.reserved > 0 ? 1 : 0;
  CountAllocated(size, size);
  sizes_[id] = size;
  return true;
}

void AsyncPoolModel::Free(uint64_t id) {
  auto found = sizes_.find(id);
  if (found == sizes_.end()) return;
  stats_.allocated -= found->second;
  stats_.requested -= found->second;
  sizes_.erase(found);
}

void AsyncPoolModel::EmptyCache() {
  Release(stats_.reserved - RoundUp(stats_.allocated, kGranularity), /*small=*/false);
  stats_.segments = stats_.reserved > 0 ? 1 : 0;
}

}  // namespace gpumem::report
