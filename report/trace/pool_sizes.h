// The memory pools' reserved sizes on each device, from PoolUsage packets (the pools' own
// attributes, core/driver_queries.h): each pool's latest size, summed over the device's pools, and
// the largest such sum. One table for every reader of those packets (the trace's tables, the
// fragmentation timeline). Memory is bounded by the number of pools.
#ifndef GPUMEM_REPORT_TRACE_POOL_SIZES_H_
#define GPUMEM_REPORT_TRACE_POOL_SIZES_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "report/format/sizes.h"

namespace gpumem::report {

class PoolSizes {
 public:
  struct Device {
    uint64_t current = 0;  // the sum of the device's pools' latest sizes
    uint64_t peak = 0;     // the largest such sum so far
  };

  // Pool `pool` (of `device`) now holds `reserved` bytes.
  void Set(uint64_t pool, int32_t device, uint64_t reserved) {
    auto [it, added] = pools_.try_emplace(pool, device, 0);
    Device& before = devices_[it->second.first];
    before.current -= std::min(before.current, it->second.second);  // the pool's previous size
    it->second = {device, reserved};
    Device& now = devices_[device];
    now.current = SaturatingAdd(now.current, reserved);
    now.peak = std::max(now.peak, now.current);
  }

  // `device`'s sizes, or nullptr when no pool of it was seen.
  const Device* Find(int32_t device) const {
    const auto it = devices_.find(device);
    return it == devices_.end() ? nullptr : &it->second;
  }
  uint64_t Current(int32_t device) const {
    const Device* sizes = Find(device);
    return sizes == nullptr ? 0 : sizes->current;
  }
  bool empty() const { return pools_.empty(); }

 private:
  absl::flat_hash_map<uint64_t, std::pair<int32_t, uint64_t>> pools_;  // device, reserved
  std::map<int32_t, Device> devices_;
};

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_TRACE_POOL_SIZES_H_
