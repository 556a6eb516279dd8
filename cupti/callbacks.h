// The CUPTI callback: where each driver call CUPTI reports is either left to interposition (it is
// recording that call: Locals().hook_depth > 0) or recorded here (it reached the driver by a path
// gpumem did not wrap). Each operation is recorded exactly once.
#pragma once

#include <cupti.h>

#include <cstdint>

#include "core/recorder.h"

namespace gpumem::cupti {

// Where the records of cupti/ go: the recorder, or a test's collector.
struct Sinks {
  void (*memory)(const MemoryRecord& record);
  void (*launch)(const LaunchRecord& record);
  void (*status)(proto::CuptiState state, const char* detail, bool kernel_timing);
  void (*kernel_timing)(uint64_t correlation_id, uint64_t start_ns, uint64_t end_ns,
                        int32_t device);
  void (*pool_usage)(uint64_t pool, int32_t device, uint64_t reserved_bytes, uint64_t used_bytes,
                     uint64_t timestamp_ns, uint64_t correlation_id);
};

Sinks RecorderSinks();
const Sinks& CurrentSinks();
// Tests only: replaces the sinks (RecorderSinks() puts the recorder's back).
void SetSinks(const Sinks& sinks);

// The function given to cuptiSubscribe. Only the driver-API domain is handled.
void CUPTIAPI OnCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* cbdata);

// Its body. `caller` is a return address inside the code that invoked the callback: the stack of
// a recorded call starts at that frame, so no gpumem frame is in it.
void HandleDriverCallback(CUpti_CallbackId cbid, const CUpti_CallbackData& data, uintptr_t caller);

}  // namespace gpumem::cupti
