#include "core/driver_queries.h"

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>

#include "core/clock.h"
#include "core/hot_path.h"
#include "core/self_timing.h"
#include "core/stream_capture.h"
#include "core/thread_locals.h"

namespace gpumem::driver {
namespace {

std::atomic<void* (*)(const char*, int)> g_dlopen{nullptr};
std::atomic<void* (*)(void*, const char*)> g_dlsym{nullptr};

// A lookup costs a dlopen (~10 µs); where libcuda is not found by that name, stop asking.
constexpr int kMaxFailedLookups = 8;

enum QueryId {
  kCtxGetDevice,
  kCtxGetDeviceV2,  // CUDA 13: takes the context, so no dependence on the current one
  kMemGetInfo,
  kDeviceGet,
  kDeviceGetName,
  kDeviceTotalMem,
  kFuncGetName,
  kFuncGetParamInfo,
  kKernelGetName,
  kKernelGetParamInfo,
  kDeviceGetMemPool,
  kMemPoolGetAttribute,
  kStreamIsCapturing,
  kThreadExchangeStreamCaptureMode,
  kCount
};

constexpr const char* kSymbols[kCount] = {
    "cuCtxGetDevice",      "cuCtxGetDevice_v2",
    "cuMemGetInfo_v2",     "cuDeviceGet",
    "cuDeviceGetName",     "cuDeviceTotalMem_v2",
    "cuFuncGetName",       "cuFuncGetParamInfo",
    "cuKernelGetName",     "cuKernelGetParamInfo",
    "cuDeviceGetMemPool",  "cuMemPoolGetAttribute",
    "cuStreamIsCapturing", "cuThreadExchangeStreamCaptureMode",
};
// The functions found, apart from what finding them needs: two lines that events read.
GPUMEM_HOT_DATA std::atomic<void*> g_functions[kCount];
std::atomic<int> g_failed_lookups[kCount];

// The reserved size last recorded per pool (NotePoolUsage): a handful of pools in a process.
struct PoolSeen {
  std::atomic<uint64_t> pool{0};                 // 0: a free slot
  std::atomic<uint64_t> reserved{~uint64_t{0}};  // none recorded yet
  PoolSpan span;  // the addresses of the allocations it served so far
};
constexpr int kPoolsTracked = 16;
PoolSeen g_pools_seen[kPoolsTracked];

// The slot of `pool`, taken on first sight; nullptr when all are taken by other pools.
PoolSeen* SeenOf(uint64_t pool) {
  for (PoolSeen& slot : g_pools_seen) {
    uint64_t holder = slot.pool.load(std::memory_order_acquire);
    if (holder == 0 && slot.pool.compare_exchange_strong(holder, pool)) return &slot;
    if (holder == pool) return &slot;  // found, or another thread took this slot for it
  }
  return nullptr;
}

// The driver's function, looked up in libcuda at the first question (and again after a failed
// look, a few times: libcuda may be loaded later).
GPUMEM_COLD void* LookUp(QueryId id) {
  auto real_dlopen = g_dlopen.load(std::memory_order_acquire);
  auto real_dlsym = g_dlsym.load(std::memory_order_acquire);
  if (real_dlopen == nullptr || real_dlsym == nullptr ||
      g_failed_lookups[id].load(std::memory_order_relaxed) >= kMaxFailedLookups) {
    return nullptr;
  }
  void* function = nullptr;
  if (void* library = real_dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
    function = real_dlsym(library, kSymbols[id]);
    dlclose(library);
  }
  if (function != nullptr) {
    g_functions[id].store(function, std::memory_order_release);
  } else {
    g_failed_lookups[id].fetch_add(1, std::memory_order_relaxed);
  }
  return function;
}

template <typename Fn>
Fn Get(QueryId id) {
  void* function = g_functions[id].load(std::memory_order_acquire);
  if (function == nullptr) [[unlikely]]
    function = LookUp(id);
  return reinterpret_cast<Fn>(function);
}

}  // namespace

void SetLoader(const LoaderFunctions& loader) {
  g_dlsym.store(loader.dlsym, std::memory_order_release);
  g_dlopen.store(loader.dlopen, std::memory_order_release);
}

GPUMEM_HOT int CurrentDevice() {
  self_timing::Scope timing(self_timing::kDeviceQuery);
  return ContextDevice(nullptr);
}

GPUMEM_HOT int ContextDevice(void* context) {
  CUdevice device = -1;
  if (context != nullptr) {
    auto get_device_v2 = Get<decltype(&cuCtxGetDevice_v2)>(kCtxGetDeviceV2);
    if (get_device_v2 != nullptr &&
        get_device_v2(&device, static_cast<CUcontext>(context)) == CUDA_SUCCESS) {
      return device;
    }
  }
  auto get_device = Get<decltype(&cuCtxGetDevice)>(kCtxGetDevice);
  if (get_device == nullptr || get_device(&device) != CUDA_SUCCESS) return -1;
  return device;  // a CUdevice is the device ordinal
}

bool DeviceMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes) {
  auto mem_get_info = Get<decltype(&cuMemGetInfo_v2)>(kMemGetInfo);
  size_t free_now = 0;
  size_t total = 0;
  if (mem_get_info == nullptr || mem_get_info(&free_now, &total) != CUDA_SUCCESS) return false;
  *free_bytes = free_now;
  *total_bytes = total;
  return true;
}

bool StreamIsCapturing(uint64_t stream) {
  auto is_capturing = Get<decltype(&cuStreamIsCapturing)>(kStreamIsCapturing);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return is_capturing != nullptr &&
         is_capturing(reinterpret_cast<CUstream>(stream), &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

GPUMEM_HOT void AnnounceDevice(int ordinal) {
  if (recorder::DeviceKnown(ordinal)) return;
  auto device_get = Get<decltype(&cuDeviceGet)>(kDeviceGet);
  auto get_name = Get<decltype(&cuDeviceGetName)>(kDeviceGetName);
  auto total_mem = Get<decltype(&cuDeviceTotalMem_v2)>(kDeviceTotalMem);
  CUdevice device = 0;
  char name[256] = "";
  size_t total = 0;
  if (device_get != nullptr && device_get(&device, ordinal) == CUDA_SUCCESS) {
    if (get_name != nullptr) get_name(name, sizeof(name), device);
    if (total_mem != nullptr) total_mem(&total, device);
  }
  recorder::RecordDevice(ordinal, name, total);
}

namespace {

// The current pool of each device, asked again every kCurrentPoolRefresh allocations of a thread: a
// program may switch pools (cuDeviceSetMemPool), rarely, and each question is a driver call on the
// allocation's path (~150 ns on the H100 machine).
constexpr int kDevicesCached = 64;
constexpr uint32_t kCurrentPoolRefresh = 256;
std::atomic<uint64_t> g_current_pools[kDevicesCached];
// Counted per thread: a shared counter's line moved between the threads that allocate (PyTorch's
// main and autograd threads) at every allocation.

GPUMEM_HOT uint64_t CurrentPool(int device) {
  std::atomic<uint64_t>* cache =
      device >= 0 && device < kDevicesCached ? &g_current_pools[device] : nullptr;
  if (cache != nullptr && Locals().pool_uses++ % kCurrentPoolRefresh != 0) {
    const uint64_t pool = cache->load(std::memory_order_relaxed);
    if (pool != 0) return pool;
  }
  auto get_pool = Get<decltype(&cuDeviceGetMemPool)>(kDeviceGetMemPool);
  CUmemoryPool current = nullptr;
  if (get_pool == nullptr || device < 0 || get_pool(&current, device) != CUDA_SUCCESS) return 0;
  const auto pool = reinterpret_cast<uint64_t>(current);
  if (cache != nullptr) cache->store(pool, std::memory_order_relaxed);
  return pool;
}

}  // namespace

GPUMEM_HOT bool PoolMayHaveGrown(PoolSpan& span, uint64_t address, uint64_t size,
                                 uint32_t& allocations_within) {
  const uint64_t end = address + size;
  const uint64_t low = span.low.load(std::memory_order_relaxed);
  const uint64_t high = span.high.load(std::memory_order_relaxed);
  if (address >= low && end <= high) return allocations_within++ % kPoolRecheck == 0;
  // Two threads widening at once may lose one widening: a later allocation there asks again,
  // which costs a query, not a change.
  if (address < low) span.low.store(address, std::memory_order_relaxed);
  if (end > high) span.high.store(end, std::memory_order_relaxed);
  return true;
}

namespace {

// Runs a query capture forbids with the calling thread in relaxed capture mode, in which the
// driver lets the thread make such calls whatever captures are in progress: a capture begun on
// another thread between the caller's AnyInProgress() and the query is not invalidated by it.
template <typename Query>
void InRelaxedCaptureMode(Query&& query) {
  auto exchange =
      Get<decltype(&cuThreadExchangeStreamCaptureMode)>(kThreadExchangeStreamCaptureMode);
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  const bool exchanged = exchange != nullptr && exchange(&mode) == CUDA_SUCCESS;
  query();
  if (exchanged) exchange(&mode);
}

}  // namespace

GPUMEM_HOT void NotePoolUsage(uint64_t pool, int device, uint64_t address, uint64_t size) {
  // The pool's attributes are among the calls capture forbids; an allocation captured into a graph
  // takes nothing from the pool anyway (the graph's memory is allocated when it is launched).
  if (capture::AnyInProgress()) return;
  self_timing::Scope timing(self_timing::kPoolQuery);
  auto get_attribute = Get<decltype(&cuMemPoolGetAttribute)>(kMemPoolGetAttribute);
  if (get_attribute == nullptr) return;
  if (device < 0) device = CurrentDevice();
  if (pool == 0) {
    pool = CurrentPool(device);
    if (pool == 0) return;
  }
  PoolSeen* seen = SeenOf(pool);  // (beyond kPoolsTracked pools: asked and recorded every time)
  if (seen != nullptr && !PoolMayHaveGrown(seen->span, address, size, Locals().pool_allocations))
    return;
  const auto handle = reinterpret_cast<CUmemoryPool>(pool);
  cuuint64_t reserved = 0;
  CUresult result = CUDA_ERROR_UNKNOWN;
  InRelaxedCaptureMode(
      [&] { result = get_attribute(handle, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved); });
  if (result != CUDA_SUCCESS) return;
  // Only changes are recorded: the size moves when the pool grows or gives memory back, not with
  // every allocation it serves.
  if (seen != nullptr && seen->reserved.exchange(reserved, std::memory_order_relaxed) == reserved) {
    return;
  }
  cuuint64_t used = 0;
  InRelaxedCaptureMode([&] { get_attribute(handle, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used); });
  recorder::RecordPoolUsage(pool, device, reserved, used, MonotonicNs(), 0);
}

GPUMEM_COLD void PrepareKernelQueries() {
  static std::atomic<bool> prepared{false};
  if (prepared.load(std::memory_order_relaxed)) return;
  KernelQueries queries;
  // Same ABI as core/kernel_table.h declares (CUresult is an int-sized enum, CUfunction and
  // CUkernel are pointers), so the driver's functions are handed over as they are.
  queries.func_get_name =
      reinterpret_cast<KernelQueries::GetName>(Get<decltype(&cuFuncGetName)>(kFuncGetName));
  queries.func_get_param_info = reinterpret_cast<KernelQueries::GetParamInfo>(
      Get<decltype(&cuFuncGetParamInfo)>(kFuncGetParamInfo));
  queries.kernel_get_name =
      reinterpret_cast<KernelQueries::GetName>(Get<decltype(&cuKernelGetName)>(kKernelGetName));
  queries.kernel_get_param_info = reinterpret_cast<KernelQueries::GetParamInfo>(
      Get<decltype(&cuKernelGetParamInfo)>(kKernelGetParamInfo));
  // Until libcuda can be found (it may not be loaded yet), ask again at the next launch.
  if (queries.func_get_name == nullptr && queries.func_get_param_info == nullptr) return;
  recorder::SetKernelQueries(queries);  // the first caller's is kept
  prepared.store(true, std::memory_order_relaxed);
}

}  // namespace gpumem::driver
