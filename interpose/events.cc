#include "interpose/events.h"

#include "core/driver_queries.h"
#include "core/hot_path.h"
#include "core/self_timing.h"
#include "core/stream_capture.h"

namespace gpumem {
namespace {

// The stream capture an operation is part of, while any is in progress (else 0 at once): a
// stream-ordered one belongs to the capture of its stream, when that stream is capturing (a stream
// can join a capture begun elsewhere through an event: then the thread's capture); any other to
// the capture its thread is making.
uint64_t CaptureOf(proto::MemoryKind kind, uint64_t stream) {
  if (!capture::AnyInProgress()) return 0;
  if (kind != proto::MemoryKind::kPool) return capture::OfThread();
  if (const uint64_t begun_there = capture::OfStream(stream); begun_there != 0) return begun_there;
  return driver::StreamIsCapturing(stream) ? capture::OfThread() : 0;
}

}  // namespace

GPUMEM_HOT void RecordAllocation(const Allocation& allocation, int result, uint64_t address,
                                 uintptr_t caller_pc) {
  self_timing::Scope timing(self_timing::kAllocationHook);
  MemoryRecord record;
  record.seq = recorder::NextSeq();
  record.api = allocation.api;
  record.kind = allocation.kind;
  record.action = result == 0 ? proto::Action::kAlloc : proto::Action::kAllocFailed;
  record.device = allocation.device == kCurrentDevice ? driver::CurrentDevice() : allocation.device;
  record.result = result;
  record.size = allocation.size;
  record.address = result == 0 ? address : 0;
  record.stream = allocation.stream;
  record.pool = allocation.pool;
  record.handle = allocation.handle;
  record.offset = allocation.offset;
  record.pitch = allocation.pitch;
  bool device_memory = allocation.kind != proto::MemoryKind::kPinnedHost &&
                       allocation.kind != proto::MemoryKind::kVmmReservation &&
                       allocation.kind != proto::MemoryKind::kVmmImported;
  if (result != 0 && device_memory)
    driver::DeviceMemoryInfo(&record.free_bytes, &record.total_bytes);
  record.stack_id = recorder::CaptureStack(caller_pc);
  record.capture = CaptureOf(allocation.kind, allocation.stream);
  if (record.device >= 0) driver::AnnounceDevice(record.device);
  recorder::RecordMemory(record);
  if (record.kind == proto::MemoryKind::kPool && result == 0) {
    driver::NotePoolUsage(record.pool, record.device, record.address, record.size);
  }
}

GPUMEM_HOT PendingFree::PendingFree(uintptr_t caller_pc) {
  self_timing::Scope timing(self_timing::kFreeHook, /*count=*/false);  // Record() counts the free
  seq_ = recorder::NextSeq();
  stack_id_ = recorder::FreeStacks() ? recorder::CaptureStack(caller_pc) : 0;
}

GPUMEM_HOT void PendingFree::Record(proto::Api api, proto::MemoryKind kind, int result,
                                    uint64_t address, uint64_t size, uint64_t handle,
                                    uint64_t stream) {
  Write(api, kind, result == 0 ? proto::Action::kFree : proto::Action::kFreeFailed, result, address,
        size, handle, stream);
}

void PendingFree::RecordRetain(int result, uint64_t address, uint64_t handle) {
  Write(proto::Api::kCuMemRetainAllocationHandle, proto::MemoryKind::kVmmPhysical,
        proto::Action::kRetain, result, address, 0, handle, 0);
}

GPUMEM_HOT void PendingFree::Write(proto::Api api, proto::MemoryKind kind, proto::Action action,
                                   int result, uint64_t address, uint64_t size, uint64_t handle,
                                   uint64_t stream) {
  self_timing::Scope timing(self_timing::kFreeHook);
  MemoryRecord record;
  record.seq = seq_;
  record.api = api;
  record.kind = kind;
  record.action = action;
  record.result = result;
  record.address = address;
  record.size = size;
  record.handle = handle;
  record.stream = stream;
  record.stack_id = stack_id_;
  record.capture = CaptureOf(kind, stream);
  recorder::RecordMemory(record);
}

}  // namespace gpumem
