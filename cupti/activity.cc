#include "cupti/activity.h"

#include <errno.h>
#include <sys/mman.h>

#include <atomic>

#include "core/spin_lock.h"
#include "core/thread_flags.h"
#include "cupti/callbacks.h"

namespace gpumem::cupti {
namespace {

std::atomic<GetNextRecordFn> g_get_next_record{nullptr};

// Returned buffers, linked through their first bytes.
struct FreeBuffer {
  FreeBuffer* next;
};
std::atomic_flag g_free_lock = ATOMIC_FLAG_INIT;
FreeBuffer* g_free_buffers = nullptr;

uint8_t* TakeBuffer() {
  {
    SpinGuard guard(g_free_lock);
    if (FreeBuffer* buffer = g_free_buffers) {
      g_free_buffers = buffer->next;
      return reinterpret_cast<uint8_t*>(buffer);
    }
  }
  void* memory = mmap(nullptr, kActivityBufferBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return memory == MAP_FAILED ? nullptr : static_cast<uint8_t*>(memory);
}

void GiveBack(uint8_t* buffer) {
  auto* free_buffer = reinterpret_cast<FreeBuffer*>(buffer);
  SpinGuard guard(g_free_lock);
  free_buffer->next = g_free_buffers;
  g_free_buffers = free_buffer;
}

}  // namespace

void SetGetNextRecord(GetNextRecordFn get_next_record) {
  g_get_next_record.store(get_next_record, std::memory_order_release);
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  ErrnoKeeper keep;
  uint8_t* memory = TakeBuffer();
  *buffer = memory;  // null: CUPTI drops the records (it counts them) rather than fail anything
  *size = memory != nullptr ? kActivityBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext /*context*/, uint32_t /*stream_id*/, uint8_t* buffer,
                              size_t /*size*/, size_t valid_size) {
  if (buffer == nullptr) return;
  OwnWorkScope own_work;
  GetNextRecordFn get_next_record = g_get_next_record.load(std::memory_order_acquire);
  CUpti_Activity* record = nullptr;
  while (get_next_record != nullptr && valid_size > 0 &&
         get_next_record(buffer, valid_size, &record) == CUPTI_SUCCESS && record != nullptr) {
    HandleActivityRecord(*record);
  }
  GiveBack(buffer);
}

void HandleActivityRecord(const CUpti_Activity& record) {
  const Sinks& sinks = CurrentSinks();
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      // start, end, deviceId and correlationId sit at the same offsets in every kernel record
      // version CUPTI 12 and 13 deliver (CUpti_ActivityKernel9 / 10); later fields are not read.
      const auto& kernel = reinterpret_cast<const CUpti_ActivityKernel10&>(record);
      sinks.kernel_timing(kernel.correlationId, kernel.start, kernel.end,
                          static_cast<int32_t>(kernel.deviceId));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL: {
      // CUpti_ActivityMemoryPool3 (CUDA 13) extends MemoryPool2 (CUDA 12) at its end only.
      const auto& pool = reinterpret_cast<const CUpti_ActivityMemoryPool3&>(record);
      // A destroyed pool holds nothing any more, whatever sizes the record repeats.
      const bool destroyed =
          pool.memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED;
      sinks.pool_usage(pool.address, static_cast<int32_t>(pool.deviceId), destroyed ? 0 : pool.size,
                       destroyed ? 0 : pool.utilizedSize, pool.timestamp, pool.correlationId);
      break;
    }
    default:
      break;
  }
}

}  // namespace gpumem::cupti
