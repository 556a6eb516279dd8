// Questions gpumem asks the real driver while recording: which device is current (or owns a
// context), how much memory is free (for a failed allocation), a device's name and size, and the
// kernel queries the recorder's kernel table uses. While a stream capture is in progress, only
// queries that capture allows are asked (measured on the H100: cuCtxGetDevice, cuMemGetInfo,
// cuDeviceGet*, cuDeviceGetMemPool, cuStreamIsCapturing are allowed; cuMemPoolGetAttribute is
// forbidden like cuMemAlloc, and invalidates the program's capture). One place for both layers that
// record (interpose/ and cupti/). Only driver calls — a runtime call could change the program's
// sticky cudaGetLastError state — looked up by exact symbol in the libcuda already loaded (never
// loaded here, never through cuGetProcAddress: asked for "cuCtxGetDevice" at CUDA 13 the driver
// hands out the _v2 that takes a context). Without a loaded libcuda every answer is "unknown".
#pragma once

#include <atomic>
#include <cstdint>

#include "core/recorder.h"

namespace gpumem::driver {

// The real loader functions (the preload library shadows dlsym). recorder::Init() sets them;
// until then nothing is looked up.
void SetLoader(const LoaderFunctions& loader);

// Ordinal of the calling thread's current device; -1 when there is none.
int CurrentDevice();
// Ordinal of the device of `context` (a CUcontext; the current one when null); -1 when unknown.
int ContextDevice(void* context);
bool DeviceMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes);
// Whether `stream` (a CUstream) is being captured into a graph (cuStreamIsCapturing, which
// capture allows); false when unknown.
bool StreamIsCapturing(uint64_t stream);
// Writes the Device packet the first time a device is seen.
void AnnounceDevice(int ordinal);
// After a stream-ordered allocation of [address, address + size): records the reserved size of
// `pool` (a CUmemoryPool; 0: the current pool of `device`, or of the current device when it is
// < 0) when it changed since the last time. The pool's own size, from its attributes: CUPTI's
// memory-pool records say the same and cost every kernel launch ~0.8 µs (measured on the H100), so
// they are opt-in. Asked at each allocation beyond the addresses the pool served so far, within
// them at every 32nd allocation of the thread (a pool grows by mapping memory where it had none).
void NotePoolUsage(uint64_t pool, int device, uint64_t address, uint64_t size);

// The addresses a pool's allocations took so far, [low, high).
struct PoolSpan {
  std::atomic<uint64_t> low{~uint64_t{0}};
  std::atomic<uint64_t> high{0};
};
// Whether NotePoolUsage asks the pool's size after it served [address, address + size): always
// beyond `span` (which is widened to take it in), within it at every kPoolRecheck-th time
// (`allocations_within` counts them; one per thread). Within the span a pool grows only when
// fragmentation leaves no room, and it gives memory back only at a synchronisation: such a change
// is recorded that much later. Asking at every allocation cost each ~150 ns on the H100 machine,
// 0.2 % of a PyTorch training step.
inline constexpr uint32_t kPoolRecheck = 32;
bool PoolMayHaveGrown(PoolSpan& span, uint64_t address, uint64_t size,
                      uint32_t& allocations_within);
// Hands the recorder the driver's kernel queries (recorder::SetKernelQueries) once they can be
// found. The recorder asks at a kernel it has not seen, not at every launch.
void PrepareKernelQueries();

}  // namespace gpumem::driver
