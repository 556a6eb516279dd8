// Memory events made up for a test, with seq 1, 2, ... and timestamps seq * 1000 ns. Tests derive
// from it to add the shorthands they need.
#pragma once

#include <cstdint>
#include <vector>

#include "core/trace.pb.h"

namespace gpumem::testing {

class SyntheticEvents {
 public:
  MemoryEvent& Add(Api api, MemoryKind kind, Action action, int32_t device, uint64_t size,
                   uint64_t address, uint64_t stack_id = 0, uint64_t handle = 0) {
    MemoryEvent& event = events_.emplace_back();
    event.set_seq(events_.size());
    event.set_timestamp_ns(events_.size() * 1000);
    event.set_api(api);
    event.set_kind(kind);
    event.set_action(action);
    event.set_device(device);
    event.set_size(size);
    event.set_address(address);
    event.set_stack_id(stack_id);
    event.set_handle(handle);
    return event;
  }
  // cudaFree as recorded: kind unknown, device -1.
  MemoryEvent& Free(uint64_t address) { return Add(CUDA_FREE, KIND_UNKNOWN, FREE, -1, 0, address); }

  const std::vector<MemoryEvent>& events() const { return events_; }
  uint64_t size() const { return events_.size(); }

 protected:
  std::vector<MemoryEvent> events_;
};

}  // namespace gpumem::testing
