// Wrappers of the driver's memory and launch entry points (launch bodies: launch_bodies.cc). Each
// body is written once and instantiated for every way it is reached: through cuGetProcAddress
// (default or per-thread-stream variant, each with the real pointer the driver handed out) and as
// an exported symbol for programs that link libcuda.
#include <cuda.h>
#include <string.h>

#include <atomic>

#include "core/hot_path.h"
#include "core/real_loader.h"
#include "interpose/capture_bodies.h"
#include "interpose/driver_table.h"
#include "interpose/events.h"
#include "interpose/hook_guard.h"
#include "interpose/launch_bodies.h"

namespace gpumem {
namespace {

using proto::Api;
using Kind = proto::MemoryKind;

#define GPUMEM_CALLER() reinterpret_cast<uintptr_t>(__builtin_return_address(0))

// ---- Bodies: forward, then record. `real` is never null here. ----

GPUMEM_HOT CUresult MemAllocBody(decltype(&cuMemAlloc_v2) real, uintptr_t caller, CUdeviceptr* dptr,
                                 size_t size) {
  HookScope scope;
  CUresult result = real(dptr, size);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  RecordAllocation({Api::kCuMemAlloc, Kind::kDevice, size}, result, result == 0 ? *dptr : 0,
                   caller);
  return result;
}

CUresult MemAllocPitchBody(decltype(&cuMemAllocPitch_v2) real, uintptr_t caller, CUdeviceptr* dptr,
                           size_t* pitch, size_t width, size_t height, unsigned element_size) {
  HookScope scope;
  CUresult result = real(dptr, pitch, width, height, element_size);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCuMemAllocPitch, Kind::kDevice, width * height};
  if (result == 0) {
    allocation.pitch = *pitch;
    allocation.size = *pitch * height;
  }
  RecordAllocation(allocation, result, result == 0 ? *dptr : 0, caller);
  return result;
}

GPUMEM_HOT CUresult MemFreeBody(decltype(&cuMemFree_v2) real, uintptr_t caller, CUdeviceptr dptr) {
  HookScope scope;
  if (!scope.recording() || dptr == 0) return real(dptr);
  PendingFree pending(caller);
  CUresult result = real(dptr);
  ErrnoKeeper keep;
  pending.Record(Api::kCuMemFree, Kind::kUnknown, result, dptr);
  return result;
}

CUresult MemAllocManagedBody(decltype(&cuMemAllocManaged) real, uintptr_t caller, CUdeviceptr* dptr,
                             size_t size, unsigned flags) {
  HookScope scope;
  CUresult result = real(dptr, size, flags);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  RecordAllocation({Api::kCuMemAllocManaged, Kind::kManaged, size}, result, result == 0 ? *dptr : 0,
                   caller);
  return result;
}

CUresult MemAllocHostBody(decltype(&cuMemAllocHost_v2) real, uintptr_t caller, void** pointer,
                          size_t size) {
  HookScope scope;
  CUresult result = real(pointer, size);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCuMemAllocHost, Kind::kPinnedHost, size};
  allocation.device = -1;
  RecordAllocation(allocation, result, result == 0 ? reinterpret_cast<uintptr_t>(*pointer) : 0,
                   caller);
  return result;
}

CUresult MemHostAllocBody(decltype(&cuMemHostAlloc) real, uintptr_t caller, void** pointer,
                          size_t size, unsigned flags) {
  HookScope scope;
  CUresult result = real(pointer, size, flags);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCuMemHostAlloc, Kind::kPinnedHost, size};
  allocation.device = -1;
  RecordAllocation(allocation, result, result == 0 ? reinterpret_cast<uintptr_t>(*pointer) : 0,
                   caller);
  return result;
}

CUresult MemFreeHostBody(decltype(&cuMemFreeHost) real, uintptr_t caller, void* pointer) {
  HookScope scope;
  if (!scope.recording() || pointer == nullptr) return real(pointer);
  PendingFree pending(caller);
  CUresult result = real(pointer);
  ErrnoKeeper keep;
  pending.Record(Api::kCuMemFreeHost, Kind::kPinnedHost, result,
                 reinterpret_cast<uintptr_t>(pointer));
  return result;
}

GPUMEM_HOT CUresult MemAllocAsyncBody(decltype(&cuMemAllocAsync) real, uintptr_t caller,
                                      CUdeviceptr* dptr, size_t size, CUstream stream) {
  HookScope scope;
  CUresult result = real(dptr, size, stream);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCuMemAllocAsync, Kind::kPool, size};
  allocation.stream = reinterpret_cast<uintptr_t>(stream);
  RecordAllocation(allocation, result, result == 0 ? *dptr : 0, caller);
  return result;
}

GPUMEM_HOT CUresult MemFreeAsyncBody(decltype(&cuMemFreeAsync) real, uintptr_t caller,
                                     CUdeviceptr dptr, CUstream stream) {
  HookScope scope;
  if (!scope.recording() || dptr == 0) return real(dptr, stream);
  PendingFree pending(caller);
  CUresult result = real(dptr, stream);
  ErrnoKeeper keep;
  pending.Record(Api::kCuMemFreeAsync, Kind::kPool, result, dptr, 0, 0,
                 reinterpret_cast<uintptr_t>(stream));
  return result;
}

GPUMEM_HOT CUresult MemAllocFromPoolAsyncBody(decltype(&cuMemAllocFromPoolAsync) real,
                                              uintptr_t caller, CUdeviceptr* dptr, size_t size,
                                              CUmemoryPool pool, CUstream stream) {
  HookScope scope;
  CUresult result = real(dptr, size, pool, stream);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCuMemAllocFromPoolAsync, Kind::kPool, size};
  allocation.stream = reinterpret_cast<uintptr_t>(stream);
  allocation.pool = reinterpret_cast<uintptr_t>(pool);
  RecordAllocation(allocation, result, result == 0 ? *dptr : 0, caller);
  return result;
}

CUresult MemAddressReserveBody(decltype(&cuMemAddressReserve) real, uintptr_t caller,
                               CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                               unsigned long long flags) {
  HookScope scope;
  CUresult result = real(ptr, size, alignment, addr, flags);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCuMemAddressReserve, Kind::kVmmReservation, size};
  allocation.device = -1;  // address space is not any one device's
  RecordAllocation(allocation, result, result == 0 ? *ptr : 0, caller);
  return result;
}

CUresult MemAddressFreeBody(decltype(&cuMemAddressFree) real, uintptr_t caller, CUdeviceptr ptr,
                            size_t size) {
  HookScope scope;
  if (!scope.recording()) return real(ptr, size);
  PendingFree pending(caller);
  CUresult result = real(ptr, size);
  ErrnoKeeper keep;
  pending.Record(Api::kCuMemAddressFree, Kind::kVmmReservation, result, ptr, size);
  return result;
}

CUresult MemCreateBody(decltype(&cuMemCreate) real, uintptr_t caller,
                       CUmemGenericAllocationHandle* handle, size_t size,
                       const CUmemAllocationProp* prop, unsigned long long flags) {
  HookScope scope;
  CUresult result = real(handle, size, prop, flags);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCuMemCreate, Kind::kVmmPhysical, size};
  if (prop != nullptr && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    allocation.device = prop->location.id;
  }
  if (result == 0) allocation.handle = *handle;
  RecordAllocation(allocation, result, 0, caller);
  return result;
}

CUresult MemReleaseBody(decltype(&cuMemRelease) real, uintptr_t caller,
                        CUmemGenericAllocationHandle handle) {
  HookScope scope;
  if (!scope.recording()) return real(handle);
  PendingFree pending(caller);
  CUresult result = real(handle);
  ErrnoKeeper keep;
  pending.Record(Api::kCuMemRelease, Kind::kVmmPhysical, result, 0, 0, handle);
  return result;
}

CUresult MemMapBody(decltype(&cuMemMap) real, uintptr_t caller, CUdeviceptr ptr, size_t size,
                    size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags) {
  HookScope scope;
  CUresult result = real(ptr, size, offset, handle, flags);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCuMemMap, Kind::kVmmMapping, size};
  allocation.device = -1;
  allocation.handle = handle;
  allocation.offset = offset;
  RecordAllocation(allocation, result, ptr, caller);
  return result;
}

CUresult MemUnmapBody(decltype(&cuMemUnmap) real, uintptr_t caller, CUdeviceptr ptr, size_t size) {
  HookScope scope;
  if (!scope.recording()) return real(ptr, size);
  PendingFree pending(caller);
  CUresult result = real(ptr, size);
  ErrnoKeeper keep;
  pending.Record(Api::kCuMemUnmap, Kind::kVmmMapping, result, ptr, size);
  return result;
}

// ---- Shared physical memory (NCCL): references to handles, and handles from other processes ----

CUresult MemRetainAllocationHandleBody(decltype(&cuMemRetainAllocationHandle) real,
                                       uintptr_t caller, CUmemGenericAllocationHandle* handle,
                                       void* address) {
  HookScope scope;
  if (!scope.recording()) return real(handle, address);
  PendingFree pending(caller);
  CUresult result = real(handle, address);
  ErrnoKeeper keep;
  pending.RecordRetain(result, reinterpret_cast<uintptr_t>(address),
                       result == 0 && handle != nullptr ? *handle : 0);
  return result;
}

// A failed import is not recorded: it made no handle, and a failed allocation means "out of
// memory" to every report.
CUresult MemImportFromShareableHandleBody(decltype(&cuMemImportFromShareableHandle) real,
                                          uintptr_t caller, CUmemGenericAllocationHandle* handle,
                                          void* os_handle, CUmemAllocationHandleType type) {
  HookScope scope;
  CUresult result = real(handle, os_handle, type);
  if (!scope.recording() || result != 0 || handle == nullptr) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCuMemImportFromShareableHandle, Kind::kVmmImported, 0};
  allocation.device = -1;  // the exporter's device: known to its own trace
  allocation.handle = *handle;
  RecordAllocation(allocation, result, 0, caller);
  return result;
}

// ---- Slots: one real pointer per way a function is reached. ----

// X(id, name asked through cuGetProcAddress, exported symbol, first CUDA version with this ABI)
#define GPUMEM_MEMORY_FUNCTIONS(X)                                        \
  X(MemAlloc, "cuMemAlloc", cuMemAlloc_v2, 3020)                          \
  X(MemAllocPitch, "cuMemAllocPitch", cuMemAllocPitch_v2, 3020)           \
  X(MemFree, "cuMemFree", cuMemFree_v2, 3020)                             \
  X(MemAllocManaged, "cuMemAllocManaged", cuMemAllocManaged, 6000)        \
  X(MemAllocHost, "cuMemAllocHost", cuMemAllocHost_v2, 3020)              \
  X(MemHostAlloc, "cuMemHostAlloc", cuMemHostAlloc, 2020)                 \
  X(MemFreeHost, "cuMemFreeHost", cuMemFreeHost, 2000)                    \
  X(MemAddressReserve, "cuMemAddressReserve", cuMemAddressReserve, 10020) \
  X(MemAddressFree, "cuMemAddressFree", cuMemAddressFree, 10020)          \
  X(MemCreate, "cuMemCreate", cuMemCreate, 10020)                         \
  X(MemRelease, "cuMemRelease", cuMemRelease, 10020)                      \
  X(MemMap, "cuMemMap", cuMemMap, 10020)                                  \
  X(MemUnmap, "cuMemUnmap", cuMemUnmap, 10020)                            \
  GPUMEM_SHARED_MEMORY_FUNCTIONS(X)
// Physical memory shared between references and processes (NCCL's buffers).
#define GPUMEM_SHARED_MEMORY_FUNCTIONS(X)                                                         \
  X(MemRetainAllocationHandle, "cuMemRetainAllocationHandle", cuMemRetainAllocationHandle, 11000) \
  X(MemImportFromShareableHandle, "cuMemImportFromShareableHandle",                               \
    cuMemImportFromShareableHandle, 10020)
// Stream-ordered functions also have a per-thread-default-stream (_ptsz) variant.
#define GPUMEM_STREAM_MEMORY_FUNCTIONS(X)                     \
  X(MemAllocAsync, "cuMemAllocAsync", cuMemAllocAsync, 11020) \
  X(MemFreeAsync, "cuMemFreeAsync", cuMemFreeAsync, 11020)    \
  X(MemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync, 11020)
#define GPUMEM_STREAM_LAUNCH_FUNCTIONS(X)                                                  \
  X(LaunchKernel, "cuLaunchKernel", cuLaunchKernel, 4000)                                  \
  X(LaunchKernelEx, "cuLaunchKernelEx", cuLaunchKernelEx, 11060)                           \
  X(LaunchCooperativeKernel, "cuLaunchCooperativeKernel", cuLaunchCooperativeKernel, 9000) \
  X(GraphLaunch, "cuGraphLaunch", cuGraphLaunch, 10000)
// Stream capture: not recorded as memory, but recording must know when a capture is in progress.
#define GPUMEM_STREAM_CAPTURE_FUNCTIONS(X)                                                        \
  X(StreamBeginCapture, "cuStreamBeginCapture", cuStreamBeginCapture_v2, 10010)                   \
  X(StreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", cuStreamBeginCaptureToGraph, 12030) \
  X(StreamEndCapture, "cuStreamEndCapture", cuStreamEndCapture, 10000)

enum Slot : size_t {
#define GPUMEM_SLOT(id, name, symbol, version) k##id,
  GPUMEM_MEMORY_FUNCTIONS(GPUMEM_SLOT) GPUMEM_STREAM_MEMORY_FUNCTIONS(GPUMEM_SLOT)
      GPUMEM_STREAM_LAUNCH_FUNCTIONS(GPUMEM_SLOT) GPUMEM_STREAM_CAPTURE_FUNCTIONS(GPUMEM_SLOT)
#define GPUMEM_PTSZ_SLOT(id, name, symbol, version) k##id##Ptsz,
          GPUMEM_STREAM_MEMORY_FUNCTIONS(GPUMEM_PTSZ_SLOT)
              GPUMEM_STREAM_LAUNCH_FUNCTIONS(GPUMEM_PTSZ_SLOT)
                  GPUMEM_STREAM_CAPTURE_FUNCTIONS(GPUMEM_PTSZ_SLOT) kSlotCount
};

std::atomic<void*> g_chain_real[kSlotCount];     // handed out by cuGetProcAddress / dlsym
std::atomic<void*> g_exported_real[kSlotCount];  // behind our exported symbols (RTLD_NEXT)

template <auto Body, typename Fn, size_t kSlot>
struct ChainWrapper;
template <auto Body, typename R, typename... Args, size_t kSlot>
struct ChainWrapper<Body, R (*)(Args...), kSlot> {
  GPUMEM_HOT static R Call(Args... args) {
    auto real =
        reinterpret_cast<R (*)(Args...)>(g_chain_real[kSlot].load(std::memory_order_acquire));
    return Body(real, GPUMEM_CALLER(), args...);
  }
};

template <typename Fn>
Fn ExportedReal(size_t slot, const char* symbol, uintptr_t caller) {
  void* real = g_exported_real[slot].load(std::memory_order_acquire);
  if (real == nullptr) {
    real = NextSymbol(symbol, caller);
    g_exported_real[slot].store(real, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(real);
}

struct DriverHook {
  const char* name;
  const char* symbol;
  const char* ptsz_symbol;
  int min_version;
  size_t slot;
  size_t ptsz_slot;
  void* wrapper;
  void* ptsz_wrapper;
  void* exported;
  void* ptsz_exported;
};

}  // namespace
}  // namespace gpumem

// ---- Exported symbols (programs linked against libcuda call these directly). ----
extern "C" {
CUresult cuMemAllocAsync_ptsz(CUdeviceptr*, size_t, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig*, CUfunction, void**, void**);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, unsigned, CUstream, void**);
CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream, CUstreamCaptureMode);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream, CUgraph, const CUgraphNode*,
                                          const CUgraphEdgeData*, size_t, CUstreamCaptureMode);
CUresult cuStreamEndCapture_ptsz(CUstream, CUgraph*);
}

#define GPUMEM_EXPORT extern "C" __attribute__((visibility("default"))) GPUMEM_HOT

#define GPUMEM_DEFINE_EXPORT(id, slot, symbol, params, args)                                     \
  GPUMEM_EXPORT CUresult symbol params {                                                         \
    auto real = gpumem::ExportedReal<decltype(&symbol)>(gpumem::slot, #symbol, GPUMEM_CALLER()); \
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;                                      \
    return gpumem::id##Body(real, GPUMEM_CALLER(), GPUMEM_UNPAREN args);                         \
  }
#define GPUMEM_UNPAREN(...) __VA_ARGS__

GPUMEM_DEFINE_EXPORT(MemAlloc, kMemAlloc, cuMemAlloc_v2, (CUdeviceptr * d, size_t n), (d, n))
GPUMEM_DEFINE_EXPORT(MemAllocPitch, kMemAllocPitch, cuMemAllocPitch_v2,
                     (CUdeviceptr * d, size_t* p, size_t w, size_t h, unsigned e), (d, p, w, h, e))
GPUMEM_DEFINE_EXPORT(MemFree, kMemFree, cuMemFree_v2, (CUdeviceptr d), (d))
GPUMEM_DEFINE_EXPORT(MemAllocManaged, kMemAllocManaged, cuMemAllocManaged,
                     (CUdeviceptr * d, size_t n, unsigned f), (d, n, f))
GPUMEM_DEFINE_EXPORT(MemAllocHost, kMemAllocHost, cuMemAllocHost_v2, (void** p, size_t n), (p, n))
GPUMEM_DEFINE_EXPORT(MemHostAlloc, kMemHostAlloc, cuMemHostAlloc, (void** p, size_t n, unsigned f),
                     (p, n, f))
GPUMEM_DEFINE_EXPORT(MemFreeHost, kMemFreeHost, cuMemFreeHost, (void* p), (p))
GPUMEM_DEFINE_EXPORT(MemAddressReserve, kMemAddressReserve, cuMemAddressReserve,
                     (CUdeviceptr * p, size_t n, size_t a, CUdeviceptr addr, unsigned long long f),
                     (p, n, a, addr, f))
GPUMEM_DEFINE_EXPORT(MemAddressFree, kMemAddressFree, cuMemAddressFree, (CUdeviceptr p, size_t n),
                     (p, n))
GPUMEM_DEFINE_EXPORT(MemCreate, kMemCreate, cuMemCreate,
                     (CUmemGenericAllocationHandle * h, size_t n, const CUmemAllocationProp* p,
                      unsigned long long f),
                     (h, n, p, f))
GPUMEM_DEFINE_EXPORT(MemRelease, kMemRelease, cuMemRelease, (CUmemGenericAllocationHandle h), (h))
GPUMEM_DEFINE_EXPORT(MemMap, kMemMap, cuMemMap,
                     (CUdeviceptr p, size_t n, size_t o, CUmemGenericAllocationHandle h,
                      unsigned long long f),
                     (p, n, o, h, f))
GPUMEM_DEFINE_EXPORT(MemUnmap, kMemUnmap, cuMemUnmap, (CUdeviceptr p, size_t n), (p, n))
GPUMEM_DEFINE_EXPORT(MemRetainAllocationHandle, kMemRetainAllocationHandle,
                     cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle * h, void* a),
                     (h, a))
GPUMEM_DEFINE_EXPORT(MemImportFromShareableHandle, kMemImportFromShareableHandle,
                     cuMemImportFromShareableHandle,
                     (CUmemGenericAllocationHandle * h, void* os, CUmemAllocationHandleType t),
                     (h, os, t))
GPUMEM_DEFINE_EXPORT(MemAllocAsync, kMemAllocAsync, cuMemAllocAsync,
                     (CUdeviceptr * d, size_t n, CUstream s), (d, n, s))
GPUMEM_DEFINE_EXPORT(MemAllocAsync, kMemAllocAsyncPtsz, cuMemAllocAsync_ptsz,
                     (CUdeviceptr * d, size_t n, CUstream s), (d, n, s))
GPUMEM_DEFINE_EXPORT(MemFreeAsync, kMemFreeAsync, cuMemFreeAsync, (CUdeviceptr d, CUstream s),
                     (d, s))
GPUMEM_DEFINE_EXPORT(MemFreeAsync, kMemFreeAsyncPtsz, cuMemFreeAsync_ptsz,
                     (CUdeviceptr d, CUstream s), (d, s))
GPUMEM_DEFINE_EXPORT(MemAllocFromPoolAsync, kMemAllocFromPoolAsync, cuMemAllocFromPoolAsync,
                     (CUdeviceptr * d, size_t n, CUmemoryPool p, CUstream s), (d, n, p, s))
GPUMEM_DEFINE_EXPORT(MemAllocFromPoolAsync, kMemAllocFromPoolAsyncPtsz,
                     cuMemAllocFromPoolAsync_ptsz,
                     (CUdeviceptr * d, size_t n, CUmemoryPool p, CUstream s), (d, n, p, s))

#define GPUMEM_LAUNCH_PARAMS                                                                   \
  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
   unsigned shm, CUstream s, void** p, void** e)
#define GPUMEM_COOPERATIVE_PARAMS                                                              \
  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
   unsigned shm, CUstream s, void** p)
GPUMEM_DEFINE_EXPORT(LaunchKernel, kLaunchKernel, cuLaunchKernel, GPUMEM_LAUNCH_PARAMS,
                     (f, gx, gy, gz, bx, by, bz, shm, s, p, e))
GPUMEM_DEFINE_EXPORT(LaunchKernel, kLaunchKernelPtsz, cuLaunchKernel_ptsz, GPUMEM_LAUNCH_PARAMS,
                     (f, gx, gy, gz, bx, by, bz, shm, s, p, e))
GPUMEM_DEFINE_EXPORT(LaunchKernelEx, kLaunchKernelEx, cuLaunchKernelEx,
                     (const CUlaunchConfig* c, CUfunction f, void** p, void** e), (c, f, p, e))
GPUMEM_DEFINE_EXPORT(LaunchKernelEx, kLaunchKernelExPtsz, cuLaunchKernelEx_ptsz,
                     (const CUlaunchConfig* c, CUfunction f, void** p, void** e), (c, f, p, e))
GPUMEM_DEFINE_EXPORT(LaunchCooperativeKernel, kLaunchCooperativeKernel, cuLaunchCooperativeKernel,
                     GPUMEM_COOPERATIVE_PARAMS, (f, gx, gy, gz, bx, by, bz, shm, s, p))
GPUMEM_DEFINE_EXPORT(LaunchCooperativeKernel, kLaunchCooperativeKernelPtsz,
                     cuLaunchCooperativeKernel_ptsz, GPUMEM_COOPERATIVE_PARAMS,
                     (f, gx, gy, gz, bx, by, bz, shm, s, p))
GPUMEM_DEFINE_EXPORT(GraphLaunch, kGraphLaunch, cuGraphLaunch, (CUgraphExec g, CUstream s), (g, s))
GPUMEM_DEFINE_EXPORT(GraphLaunch, kGraphLaunchPtsz, cuGraphLaunch_ptsz, (CUgraphExec g, CUstream s),
                     (g, s))

#define GPUMEM_BEGIN_CAPTURE_TO_GRAPH_PARAMS                                                  \
  (CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData* data, size_t count, \
   CUstreamCaptureMode mode)
GPUMEM_DEFINE_EXPORT(StreamBeginCapture, kStreamBeginCapture, cuStreamBeginCapture_v2,
                     (CUstream s, CUstreamCaptureMode mode), (s, mode))
GPUMEM_DEFINE_EXPORT(StreamBeginCapture, kStreamBeginCapturePtsz, cuStreamBeginCapture_v2_ptsz,
                     (CUstream s, CUstreamCaptureMode mode), (s, mode))
GPUMEM_DEFINE_EXPORT(StreamBeginCaptureToGraph, kStreamBeginCaptureToGraph,
                     cuStreamBeginCaptureToGraph, GPUMEM_BEGIN_CAPTURE_TO_GRAPH_PARAMS,
                     (s, g, deps, data, count, mode))
GPUMEM_DEFINE_EXPORT(StreamBeginCaptureToGraph, kStreamBeginCaptureToGraphPtsz,
                     cuStreamBeginCaptureToGraph_ptsz, GPUMEM_BEGIN_CAPTURE_TO_GRAPH_PARAMS,
                     (s, g, deps, data, count, mode))
GPUMEM_DEFINE_EXPORT(StreamEndCapture, kStreamEndCapture, cuStreamEndCapture,
                     (CUstream s, CUgraph* g), (s, g))
GPUMEM_DEFINE_EXPORT(StreamEndCapture, kStreamEndCapturePtsz, cuStreamEndCapture_ptsz,
                     (CUstream s, CUgraph* g), (s, g))

namespace gpumem {
namespace {

#define GPUMEM_HOOK(id, name, symbol, version)                                        \
  {name,                                                                              \
   #symbol,                                                                           \
   nullptr,                                                                           \
   version,                                                                           \
   k##id,                                                                             \
   k##id,                                                                             \
   reinterpret_cast<void*>(&ChainWrapper<&id##Body, decltype(&symbol), k##id>::Call), \
   nullptr,                                                                           \
   reinterpret_cast<void*>(&::symbol),                                                \
   nullptr},
#define GPUMEM_STREAM_HOOK(id, name, symbol, version)                                       \
  {name,                                                                                    \
   #symbol,                                                                                 \
   #symbol "_ptsz",                                                                         \
   version,                                                                                 \
   k##id,                                                                                   \
   k##id##Ptsz,                                                                             \
   reinterpret_cast<void*>(&ChainWrapper<&id##Body, decltype(&symbol), k##id>::Call),       \
   reinterpret_cast<void*>(&ChainWrapper<&id##Body, decltype(&symbol), k##id##Ptsz>::Call), \
   reinterpret_cast<void*>(&::symbol),                                                      \
   reinterpret_cast<void*>(&::symbol##_ptsz)},

const DriverHook kDriverHooks[] = {GPUMEM_MEMORY_FUNCTIONS(GPUMEM_HOOK)
                                       GPUMEM_STREAM_MEMORY_FUNCTIONS(GPUMEM_STREAM_HOOK)
                                           GPUMEM_STREAM_LAUNCH_FUNCTIONS(GPUMEM_STREAM_HOOK)
                                               GPUMEM_STREAM_CAPTURE_FUNCTIONS(GPUMEM_STREAM_HOOK)};

// Records the real pointer for a slot; false if the slot already wraps a different one (then
// the caller hands out the real pointer unwrapped rather than call the wrong function).
bool Install(size_t slot, void* real) {
  void* expected = nullptr;
  if (g_chain_real[slot].compare_exchange_strong(expected, real)) return true;
  if (expected == real) return true;
  recorder::CountHookConflict();
  return false;
}

}  // namespace

void* WrapDriverFunction(const char* name_or_symbol, void* real, int cuda_version,
                         bool per_thread_stream, bool by_symbol) {
  for (const DriverHook& hook : kDriverHooks) {
    bool ptsz = false;
    if (by_symbol) {
      if (hook.ptsz_symbol != nullptr && strcmp(name_or_symbol, hook.ptsz_symbol) == 0) {
        ptsz = true;
      } else if (strcmp(name_or_symbol, hook.symbol) != 0) {
        continue;
      }
    } else {
      if (strcmp(name_or_symbol, hook.name) != 0) continue;
      // An older ABI of the same name (e.g. 32-bit cuMemAlloc before 3.2): not ours to wrap.
      if (cuda_version < hook.min_version) return real;
      ptsz = per_thread_stream && hook.ptsz_symbol != nullptr;
    }
    // A lookup that found one of our own functions is already hooked.
    if (real == hook.exported || real == hook.ptsz_exported || real == hook.wrapper ||
        real == hook.ptsz_wrapper) {
      return real;
    }
    size_t slot = ptsz ? hook.ptsz_slot : hook.slot;
    if (!Install(slot, real)) return real;
    return ptsz ? hook.ptsz_wrapper : hook.wrapper;
  }
  return real;
}

}  // namespace gpumem
