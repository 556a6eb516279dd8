// The CUDA runtime's allocation functions, exported under their own names so that they shadow
// libcudart's. Each records one event at the level the program called; the driver calls libcudart
// makes underneath run inside this hook's HookScope and are not recorded again.
#include <cuda_runtime_api.h>

#include <atomic>

#include "core/hot_path.h"
#include "core/real_loader.h"
#include "interpose/events.h"
#include "interpose/hook_guard.h"

namespace gpumem {
namespace {

using proto::Api;
using Kind = proto::MemoryKind;

template <typename Fn>
Fn Next(std::atomic<void*>& slot, const char* name, uintptr_t caller) {
  void* real = slot.load(std::memory_order_acquire);
  if (real == nullptr) {
    real = NextSymbol(name, caller);
    slot.store(real, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(real);
}

uint64_t Address(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer); }

}  // namespace
}  // namespace gpumem

using gpumem::Allocation;
using gpumem::Api;
using gpumem::ErrnoKeeper;
using gpumem::HookLayer;
using gpumem::HookScope;
using gpumem::Kind;
using gpumem::PendingFree;
using gpumem::RecordAllocation;

#define GPUMEM_EXPORT extern "C" __attribute__((visibility("default"))) GPUMEM_HOT
#define GPUMEM_CALLER() reinterpret_cast<uintptr_t>(__builtin_return_address(0))
// The function shadowed by the one being defined; cudaErrorInitializationError if there is none.
#define GPUMEM_REAL(function)                                                           \
  static std::atomic<void*> real_slot{nullptr};                                         \
  auto real = gpumem::Next<decltype(&function)>(real_slot, #function, GPUMEM_CALLER()); \
  if (real == nullptr) return cudaErrorInitializationError

GPUMEM_EXPORT cudaError_t cudaMalloc(void** pointer, size_t size) {
  GPUMEM_REAL(cudaMalloc);
  HookScope scope(HookLayer::kRuntime);
  cudaError_t result = real(pointer, size);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  RecordAllocation({Api::kCudaMalloc, Kind::kDevice, size}, result,
                   result == cudaSuccess ? gpumem::Address(*pointer) : 0, GPUMEM_CALLER());
  return result;
}

GPUMEM_EXPORT cudaError_t cudaFree(void* pointer) {
  GPUMEM_REAL(cudaFree);
  HookScope scope(HookLayer::kRuntime);
  // cudaFree(nullptr) is the customary way to create the context: nothing to record.
  if (!scope.recording() || pointer == nullptr) return real(pointer);
  PendingFree pending(GPUMEM_CALLER());
  cudaError_t result = real(pointer);
  ErrnoKeeper keep;
  pending.Record(Api::kCudaFree, Kind::kUnknown, result, gpumem::Address(pointer));
  return result;
}

namespace {

GPUMEM_HOT cudaError_t MallocAsyncBody(decltype(&cudaMallocAsync) real, uintptr_t caller,
                                       void** pointer, size_t size, cudaStream_t stream) {
  HookScope scope(HookLayer::kRuntime);
  cudaError_t result = real(pointer, size, stream);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCudaMallocAsync, Kind::kPool, size};
  allocation.stream = gpumem::Address(stream);
  RecordAllocation(allocation, result, result == cudaSuccess ? gpumem::Address(*pointer) : 0,
                   caller);
  return result;
}

GPUMEM_HOT cudaError_t FreeAsyncBody(decltype(&cudaFreeAsync) real, uintptr_t caller, void* pointer,
                                     cudaStream_t stream) {
  HookScope scope(HookLayer::kRuntime);
  if (!scope.recording() || pointer == nullptr) return real(pointer, stream);
  PendingFree pending(caller);
  cudaError_t result = real(pointer, stream);
  ErrnoKeeper keep;
  pending.Record(Api::kCudaFreeAsync, Kind::kPool, result, gpumem::Address(pointer), 0, 0,
                 gpumem::Address(stream));
  return result;
}

GPUMEM_HOT cudaError_t MallocFromPoolAsyncBody(decltype(&cudaMallocFromPoolAsync) real,
                                               uintptr_t caller, void** pointer, size_t size,
                                               cudaMemPool_t pool, cudaStream_t stream) {
  HookScope scope(HookLayer::kRuntime);
  cudaError_t result = real(pointer, size, pool, stream);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCudaMallocFromPoolAsync, Kind::kPool, size};
  allocation.stream = gpumem::Address(stream);
  allocation.pool = gpumem::Address(pool);
  RecordAllocation(allocation, result, result == cudaSuccess ? gpumem::Address(*pointer) : 0,
                   caller);
  return result;
}

}  // namespace

// Stream-ordered calls also exist as _ptsz (code compiled with --default-stream per-thread).
extern "C" {
cudaError_t cudaMallocAsync_ptsz(void**, size_t, cudaStream_t);
cudaError_t cudaFreeAsync_ptsz(void*, cudaStream_t);
cudaError_t cudaMallocFromPoolAsync_ptsz(void**, size_t, cudaMemPool_t, cudaStream_t);
}

GPUMEM_EXPORT cudaError_t cudaMallocAsync(void** pointer, size_t size, cudaStream_t stream) {
  GPUMEM_REAL(cudaMallocAsync);
  return MallocAsyncBody(real, GPUMEM_CALLER(), pointer, size, stream);
}
GPUMEM_EXPORT cudaError_t cudaMallocAsync_ptsz(void** pointer, size_t size, cudaStream_t stream) {
  GPUMEM_REAL(cudaMallocAsync_ptsz);
  return MallocAsyncBody(real, GPUMEM_CALLER(), pointer, size, stream);
}
GPUMEM_EXPORT cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  GPUMEM_REAL(cudaFreeAsync);
  return FreeAsyncBody(real, GPUMEM_CALLER(), pointer, stream);
}
GPUMEM_EXPORT cudaError_t cudaFreeAsync_ptsz(void* pointer, cudaStream_t stream) {
  GPUMEM_REAL(cudaFreeAsync_ptsz);
  return FreeAsyncBody(real, GPUMEM_CALLER(), pointer, stream);
}
GPUMEM_EXPORT cudaError_t cudaMallocFromPoolAsync(void** pointer, size_t size, cudaMemPool_t pool,
                                                  cudaStream_t stream) {
  GPUMEM_REAL(cudaMallocFromPoolAsync);
  return MallocFromPoolAsyncBody(real, GPUMEM_CALLER(), pointer, size, pool, stream);
}
GPUMEM_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void** pointer, size_t size,
                                                       cudaMemPool_t pool, cudaStream_t stream) {
  GPUMEM_REAL(cudaMallocFromPoolAsync_ptsz);
  return MallocFromPoolAsyncBody(real, GPUMEM_CALLER(), pointer, size, pool, stream);
}

GPUMEM_EXPORT cudaError_t cudaMallocManaged(void** pointer, size_t size, unsigned flags) {
  GPUMEM_REAL(cudaMallocManaged);
  HookScope scope(HookLayer::kRuntime);
  cudaError_t result = real(pointer, size, flags);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  RecordAllocation({Api::kCudaMallocManaged, Kind::kManaged, size}, result,
                   result == cudaSuccess ? gpumem::Address(*pointer) : 0, GPUMEM_CALLER());
  return result;
}

GPUMEM_EXPORT cudaError_t cudaMallocPitch(void** pointer, size_t* pitch, size_t width,
                                          size_t height) {
  GPUMEM_REAL(cudaMallocPitch);
  HookScope scope(HookLayer::kRuntime);
  cudaError_t result = real(pointer, pitch, width, height);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCudaMallocPitch, Kind::kDevice, width * height};
  if (result == cudaSuccess) {
    allocation.pitch = *pitch;
    allocation.size = *pitch * height;
  }
  RecordAllocation(allocation, result, result == cudaSuccess ? gpumem::Address(*pointer) : 0,
                   GPUMEM_CALLER());
  return result;
}

GPUMEM_EXPORT cudaError_t cudaMalloc3D(cudaPitchedPtr* pitched, cudaExtent extent) {
  GPUMEM_REAL(cudaMalloc3D);
  HookScope scope(HookLayer::kRuntime);
  cudaError_t result = real(pitched, extent);
  if (!scope.recording()) return result;
  ErrnoKeeper keep;
  Allocation allocation{Api::kCudaMalloc3D, Kind::kDevice,
                        extent.width * extent.height * extent.depth};
  uint64_t address = 0;
  if (result == cudaSuccess) {
    allocation.pitch = pitched->pitch;
    allocation.size = pitched->pitch * extent.height * extent.depth;
    address = gpumem::Address(pitched->ptr);
  }
  RecordAllocation(allocation, result, address, GPUMEM_CALLER());
  return result;
}

namespace {

cudaError_t HostAllocBody(Api api, cudaError_t result, void** pointer, size_t size,
                          uintptr_t caller) {
  ErrnoKeeper keep;
  Allocation allocation{api, Kind::kPinnedHost, size};
  allocation.device = -1;
  RecordAllocation(allocation, result, result == cudaSuccess ? gpumem::Address(*pointer) : 0,
                   caller);
  return result;
}

}  // namespace

GPUMEM_EXPORT cudaError_t cudaMallocHost(void** pointer, size_t size) {
  GPUMEM_REAL(cudaMallocHost);
  HookScope scope(HookLayer::kRuntime);
  cudaError_t result = real(pointer, size);
  if (!scope.recording()) return result;
  return HostAllocBody(Api::kCudaMallocHost, result, pointer, size, GPUMEM_CALLER());
}

GPUMEM_EXPORT cudaError_t cudaHostAlloc(void** pointer, size_t size, unsigned flags) {
  GPUMEM_REAL(cudaHostAlloc);
  HookScope scope(HookLayer::kRuntime);
  cudaError_t result = real(pointer, size, flags);
  if (!scope.recording()) return result;
  return HostAllocBody(Api::kCudaHostAlloc, result, pointer, size, GPUMEM_CALLER());
}

GPUMEM_EXPORT cudaError_t cudaFreeHost(void* pointer) {
  GPUMEM_REAL(cudaFreeHost);
  HookScope scope(HookLayer::kRuntime);
  if (!scope.recording() || pointer == nullptr) return real(pointer);
  PendingFree pending(GPUMEM_CALLER());
  cudaError_t result = real(pointer);
  ErrnoKeeper keep;
  pending.Record(Api::kCudaFreeHost, Kind::kPinnedHost, result, gpumem::Address(pointer));
  return result;
}
