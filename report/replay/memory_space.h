// Which table of live allocations a memory event belongs to: shared by every replay of a trace
// (event_counts.h, replay.h) so they match frees to allocations the same way.
#ifndef GPUMEM_REPORT_REPLAY_MEMORY_SPACE_H_
#define GPUMEM_REPORT_REPLAY_MEMORY_SPACE_H_

#include "core/trace.pb.h"
#include "report/trace/memory_event_decoder.h"

namespace gpumem::report {

// Each kind of allocation lives in its own space, keyed the way its free names it: plain
// allocations (device, managed, pool, pinned host; their frees, often KIND_UNKNOWN, by address),
// VMM reservations (by address), VMM physical memory (by handle: cuMemCreate's, or one imported
// from another process) and VMM mappings (by address, freed by range). A mapping at the same
// address as its reservation is a different entry.
enum class MemorySpace { kPlain, kReservation, kPhysical, kMapping };

// By API where it is known, else by the event's kind (a newer recorder, or CUPTI). Each function
// takes an event's api and kind, or the event itself, as a MemoryEvent or as plain fields.
[[gnu::always_inline]] inline MemorySpace SpaceOf(int32_t api, int32_t kind) {
  switch (api) {
    case CU_MEM_ADDRESS_RESERVE:
    case CU_MEM_ADDRESS_FREE:
      return MemorySpace::kReservation;
    case CU_MEM_CREATE:
    case CU_MEM_RELEASE:
    case CU_MEM_RETAIN_ALLOCATION_HANDLE:
    case CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE:
      return MemorySpace::kPhysical;
    case CU_MEM_MAP:
    case CU_MEM_UNMAP:
      return MemorySpace::kMapping;
    default:
      break;
  }
  switch (kind) {
    case VMM_RESERVATION:
      return MemorySpace::kReservation;
    case VMM_PHYSICAL:
    case VMM_IMPORTED:
      return MemorySpace::kPhysical;
    case VMM_MAPPING:
      return MemorySpace::kMapping;
    default:
      return MemorySpace::kPlain;
  }
}

// A handle to physical memory that a process exported (cuMemImportFromShareableHandle): the
// exporter's memory, or this process's own handle once more.
inline bool IsImported(int32_t api, int32_t kind) {
  return kind == VMM_IMPORTED || api == CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE;
}

// Page-locked host memory: by kind, or by the API where an older trace left the kind out.
inline bool IsPinnedHost(int32_t api, int32_t kind) {
  if (kind == PINNED_HOST) return true;
  switch (api) {
    case CUDA_MALLOC_HOST:
    case CUDA_HOST_ALLOC:
    case CU_MEM_HOST_ALLOC:
    case CU_MEM_ALLOC_HOST:
      return true;
    default:
      return false;
  }
}

// A stream-ordered allocation from a memory pool (cudaMallocAsync and kin).
inline bool IsStreamOrdered(int32_t api, int32_t kind) {
  if (kind == POOL) return true;
  switch (api) {
    case CUDA_MALLOC_ASYNC:
    case CUDA_MALLOC_FROM_POOL_ASYNC:
    case CU_MEM_ALLOC_ASYNC:
    case CU_MEM_ALLOC_FROM_POOL_ASYNC:
      return true;
    default:
      return false;
  }
}

inline MemorySpace SpaceOf(const MemoryEvent& event) { return SpaceOf(event.api(), event.kind()); }
inline MemorySpace SpaceOf(const MemoryEventFields& event) {
  return SpaceOf(event.api, event.kind);
}
inline bool IsImported(const MemoryEvent& event) { return IsImported(event.api(), event.kind()); }
inline bool IsImported(const MemoryEventFields& event) { return IsImported(event.api, event.kind); }
inline bool IsPinnedHost(const MemoryEvent& event) {
  return IsPinnedHost(event.api(), event.kind());
}
inline bool IsPinnedHost(const MemoryEventFields& event) {
  return IsPinnedHost(event.api, event.kind);
}
inline bool IsStreamOrdered(const MemoryEvent& event) {
  return IsStreamOrdered(event.api(), event.kind());
}
inline bool IsStreamOrdered(const MemoryEventFields& event) {
  return IsStreamOrdered(event.api, event.kind);
}

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_REPLAY_MEMORY_SPACE_H_
