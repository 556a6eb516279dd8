// Turns an intercepted call into a MemoryRecord. Shared by the runtime and the driver hooks, so
// both layers record the same way: allocations take their sequence number after the call
// returned, frees before the call (replay order then never shows a free before its allocation,
// nor an address reused before it was freed), and only allocations capture a stack by default.
#pragma once

#include <cstdint>

#include "core/recorder.h"

namespace gpumem {

inline constexpr int kCurrentDevice = -2;  // ask the driver which device is current

struct Allocation {
  proto::Api api;
  proto::MemoryKind kind;
  uint64_t size = 0;
  int device = kCurrentDevice;
  uint64_t stream = 0;
  uint64_t pool = 0;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t pitch = 0;
};

// After the real call: a successful or failed allocation (failures record free/total memory).
void RecordAllocation(const Allocation& allocation, int result, uint64_t address,
                      uintptr_t caller_pc);

// Constructed before the real call, recorded after it.
class PendingFree {
 public:
  explicit PendingFree(uintptr_t caller_pc);
  void Record(proto::Api api, proto::MemoryKind kind, int result, uint64_t address,
              uint64_t size = 0, uint64_t handle = 0, uint64_t stream = 0);
  // cuMemRetainAllocationHandle: another reference to `handle`, which a later release gives
  // back. Recorded as a free is (it is taken to free: NCCL's ncclCuMemFree), action RETAIN
  // whatever the result (the replay ignores one that failed).
  void RecordRetain(int result, uint64_t address, uint64_t handle);

 private:
  void Write(proto::Api api, proto::MemoryKind kind, proto::Action action, int result,
             uint64_t address, uint64_t size, uint64_t handle, uint64_t stream);

  uint64_t seq_;
  uint64_t stack_id_;
};

}  // namespace gpumem
