// CUPTI activity records: GPU start/end of kernels (GPUMEM_KERNEL_TIMES=1) and memory-pool
// records, delivered in buffers that CUPTI asks for and hands back, usually on its own thread.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>

namespace gpumem::cupti {

using GetNextRecordFn = CUptiResult (*)(uint8_t* buffer, size_t valid_size,
                                        CUpti_Activity** record);

// libcupti's cuptiActivityGetNextRecord, set before the buffer callbacks are registered.
void SetGetNextRecord(GetNextRecordFn get_next_record);

// The two functions given to cuptiActivityRegisterCallbacks. Buffers are mmap'd, never freed,
// and reused: no malloc in the host's allocator from CUPTI's thread.
void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                              size_t valid_size);

// One activity record → KernelTiming / PoolUsage through the sinks (cupti/callbacks.h); other
// kinds are ignored.
void HandleActivityRecord(const CUpti_Activity& record);

inline constexpr size_t kActivityBufferBytes = size_t{4} << 20;

}  // namespace gpumem::cupti
