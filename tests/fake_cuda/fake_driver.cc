// Fake CUDA driver (libcuda.so.1) backed by host memory, for tests on machines without a GPU.
// Exports the real symbol names with the real signatures; see README.md for what it fakes.

#include <cuda.h>
#include <cudaTypedefs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fake_cuda/fake_capture.h"

#define FAKE_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

// cuda.h maps cuGetProcAddress to the 5-argument _v2 and declares the 4-argument original and
// the _ptsz variants only for NVIDIA's own build; declare them here (the symbol table below checks
// them against cudaTypedefs.h).
#undef cuGetProcAddress
FAKE_CUDA_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                           cuuint64_t flags);
FAKE_CUDA_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize,
                                               CUstream hStream);
FAKE_CUDA_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
FAKE_CUDA_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize,
                                                       CUmemoryPool pool, CUstream hStream);
FAKE_CUDA_EXPORT decltype(cuLaunchKernel) cuLaunchKernel_ptsz;
FAKE_CUDA_EXPORT decltype(cuLaunchKernelEx) cuLaunchKernelEx_ptsz;
FAKE_CUDA_EXPORT decltype(cuLaunchCooperativeKernel) cuLaunchCooperativeKernel_ptsz;
FAKE_CUDA_EXPORT decltype(cuGraphLaunch) cuGraphLaunch_ptsz;
// cuda.h maps cuGraphAddKernelNode to the CUDA 12 _v2 (CUDA_KERNEL_NODE_PARAMS_v2); the original
// takes the _v1 struct, which is shorter.
#undef cuGraphAddKernelNode
FAKE_CUDA_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                               const CUgraphNode* dependencies,
                                               size_t numDependencies,
                                               const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams);

namespace {

constexpr int kDriverVersion = 13000;
constexpr size_t kDefaultCapacity = size_t{2} << 30;
constexpr size_t kContextReserve = size_t{64} << 20;  // so that free < total, as on a real GPU
constexpr size_t kVmmGranularity = size_t{2} << 20;
constexpr size_t kPitchAlignment = 512;
constexpr size_t kMaxDevices = 64;
// Contexts, streams and pools are distinct fake addresses, never dereferenced.
constexpr uintptr_t kHandleBase = 0xfa4e'0000'0000;

size_t EnvOr(const char* name, size_t fallback) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  unsigned long long value = strtoull(text, &end, 10);
  return *end == '\0' ? value : fallback;
}

size_t RoundUp(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Anonymous, lazily backed memory: untouched pages cost nothing, so a 2 GiB "GPU" is free.
void* MapPages(size_t size, int protection) {
  void* p = mmap(nullptr, size, protection, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

struct Allocation {
  size_t size;
  int device;
  CUmemoryPool pool = nullptr;  // stream-ordered allocations: the pool that served it
};
// A memory pool's sizes. It reserves from the device in 2 MiB pieces as its use grows and keeps
// what it reserved (the release threshold of PyTorch's pools: never give back).
struct PoolSizes {
  size_t used = 0;
  size_t reserved = 0;
};
constexpr size_t kPoolGranularity = size_t{2} << 20;
struct PhysicalMemory {
  size_t size;
  int device;
  // References, as the real driver counts them: cuMemCreate and each cuMemRetainAllocationHandle
  // or import of it add one, each cuMemRelease takes one; at 0 the handle is gone.
  int references = 1;
  bool imported = false;  // another process's memory: not charged to this one's device
  unsigned long long handle_types = 0;  // CUmemAllocationProp::requestedHandleTypes
};
struct Mapping {
  size_t size;
  CUmemGenericAllocationHandle handle;
};

// Where the driver puts a kernel parameter in the launch's parameter buffer.
struct KernelParam {
  size_t offset;
  size_t size;
};
struct Kernel {
  std::string name;
  std::vector<KernelParam> params;
  CUmodule module;
  int ptx_version;  // ".version 8.0" -> 80
  int target;       // ".target sm_80" -> 80
  size_t ParamBytes() const {
    return params.empty() ? 0 : params.back().offset + params.back().size;
  }
};

struct DriverState {
  std::mutex mutex;
  std::atomic<bool> initialized = false;
  const int device_count =
      static_cast<int>(std::min<size_t>(EnvOr("GPUMEM_FAKE_DEVICE_COUNT", 1), kMaxDevices));
  const size_t capacity = EnvOr("GPUMEM_FAKE_DEVICE_MEMORY", kDefaultCapacity);
  std::vector<size_t> used_bytes = std::vector<size_t>(device_count, 0);
  std::map<CUdeviceptr, Allocation> allocations;  // device, managed and pool memory
  std::map<void*, size_t> host_allocations;       // pinned host memory: not on the device
  std::map<CUdeviceptr, size_t> reservations;     // VMM address ranges
  std::map<CUdeviceptr, Mapping> mappings;        // VMM ranges backed by a handle
  std::map<CUmemGenericAllocationHandle, PhysicalMemory> physical;
  std::map<CUmemoryPool, int> created_pools;  // pool -> device
  std::map<CUmemoryPool, PoolSizes> pool_sizes;
  std::set<CUstream> streams;
  std::map<CUmodule, std::vector<CUfunction>> modules;  // module -> its kernels
  std::map<CUfunction, Kernel> functions;
  std::map<CUgraph, std::vector<CUgraphNode>> graphs;
  std::map<CUgraphNode, CUfunction> graph_nodes;               // kernel nodes
  std::map<CUgraphExec, std::vector<CUfunction>> graph_execs;  // their kernels, as instantiated
  uint64_t next_id = 1;

  template <typename Handle>
  Handle NewHandle() {
    return reinterpret_cast<Handle>(kHandleBase + 16 * next_id++);
  }
  size_t FreeBytes(int device) const {
    size_t usable = capacity > kContextReserve ? capacity - kContextReserve : 0;
    return usable - used_bytes[device];
  }
  CUresult Charge(int device, size_t size) {
    if (size > FreeBytes(device)) return CUDA_ERROR_OUT_OF_MEMORY;
    used_bytes[device] += size;
    return CUDA_SUCCESS;
  }
};

// Leaked on purpose: hooks and atexit handlers may call the driver while the process exits.
DriverState& State() {
  static DriverState* state = new DriverState;
  return *state;
}

// Primary contexts and default pools are fixed per device, so no table is needed for them.
CUcontext PrimaryContext(int device) {
  return reinterpret_cast<CUcontext>(kHandleBase - 16 * (device + 1));
}
CUmemoryPool DefaultPool(int device) {
  return reinterpret_cast<CUmemoryPool>(kHandleBase - 0x1000 - 16 * (device + 1));
}
thread_local CUcontext current_context = nullptr;

int DeviceOfContext(DriverState& s, CUcontext context) {
  for (int device = 0; device < s.device_count; ++device) {
    if (PrimaryContext(device) == context) return device;
  }
  return -1;
}

// NOT_INITIALIZED before cuInit, INVALID_DEVICE for an ordinal out of range.
CUresult CheckDevice(const DriverState& s, int device) {
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return device >= 0 && device < s.device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

bool IsDevice(const DriverState& s, const CUmemLocation& location) {
  return location.type == CU_MEM_LOCATION_TYPE_DEVICE && location.id >= 0 &&
         location.id < s.device_count;
}

// Device of the calling thread's current context; real allocation calls need one.
CUresult CurrentDevice(DriverState& s, int* device) {
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *device = DeviceOfContext(s, current_context);
  return *device < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

CUresult AllocateOnDevice(DriverState& s, int device, CUdeviceptr* dptr, size_t size) {
  if (dptr == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = s.Charge(device, size); r != CUDA_SUCCESS) return r;
  void* memory = MapPages(size, PROT_READ | PROT_WRITE);  // page aligned, so 256/512 aligned
  if (memory == nullptr) {
    s.used_bytes[device] -= size;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *dptr = reinterpret_cast<CUdeviceptr>(memory);
  s.allocations[*dptr] = {size, device};
  return CUDA_SUCCESS;
}

// A pool allocation: on its device, counted in its pool.
CUresult AllocateInPool(DriverState& s, int device, CUmemoryPool pool, CUdeviceptr* dptr,
                        size_t size) {
  if (CUresult r = AllocateOnDevice(s, device, dptr, size); r != CUDA_SUCCESS) return r;
  s.allocations[*dptr].pool = pool;
  PoolSizes& sizes = s.pool_sizes[pool];
  sizes.used += size;
  const size_t needed = (sizes.used + kPoolGranularity - 1) / kPoolGranularity * kPoolGranularity;
  sizes.reserved = std::max(sizes.reserved, needed);
  return CUDA_SUCCESS;
}

CUresult AllocateForCurrentContext(CUdeviceptr* dptr, size_t size) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  int device;
  if (CUresult r = CurrentDevice(s, &device); r != CUDA_SUCCESS) return r;
  return AllocateOnDevice(s, device, dptr, size);
}

CUresult AllocateFromPool(CUdeviceptr* dptr, size_t size, CUmemoryPool pool) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  int device = -1;
  for (int d = 0; d < s.device_count; ++d) {
    if (DefaultPool(d) == pool) device = d;
  }
  if (auto it = s.created_pools.find(pool); it != s.created_pools.end()) device = it->second;
  if (device < 0) return CUDA_ERROR_INVALID_VALUE;
  return AllocateInPool(s, device, pool, dptr, size);
}

CUresult Free(CUdeviceptr dptr) {
  if (dptr == 0) return CUDA_SUCCESS;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto it = s.allocations.find(dptr);
  if (it == s.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(dptr), it->second.size);
  s.used_bytes[it->second.device] -= it->second.size;
  if (it->second.pool != nullptr) s.pool_sizes[it->second.pool].used -= it->second.size;
  s.allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult AllocateHost(void** pp, size_t size) {
  if (pp == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  int device;
  if (CUresult r = CurrentDevice(s, &device); r != CUDA_SUCCESS) return r;
  void* memory = MapPages(size, PROT_READ | PROT_WRITE);
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  s.host_allocations[memory] = size;
  *pp = memory;
  return CUDA_SUCCESS;
}

// The entry at or below `address` in a map keyed by start address, or end().
template <typename Map>
auto EntryAtOrBelow(Map& map, CUdeviceptr address) {
  auto it = map.upper_bound(address);
  return it == map.begin() ? map.end() : std::prev(it);
}

}  // namespace

// ---- Initialisation, devices, contexts ----

FAKE_CUDA_EXPORT CUresult cuInit(unsigned int Flags) {
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  if (s.device_count <= 0) return CUDA_ERROR_NO_DEVICE;
  s.initialized = true;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = kDriverVersion;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDeviceGetCount(int* count) {
  DriverState& s = State();
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = s.device_count;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  DriverState& s = State();
  if (CUresult r = CheckDevice(s, ordinal); r != CUDA_SUCCESS) return r;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  DriverState& s = State();
  if (CUresult r = CheckDevice(s, dev); r != CUDA_SUCCESS) return r;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, static_cast<size_t>(len), "gpumem fake device");
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  DriverState& s = State();
  if (CUresult r = CheckDevice(s, dev); r != CUDA_SUCCESS) return r;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = s.capacity;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  DriverState& s = State();
  if (CUresult r = CheckDevice(s, dev); r != CUDA_SUCCESS) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = PrimaryContext(dev);
  return CUDA_SUCCESS;
}

// The primary context lives as long as the process: releasing it frees nothing.
FAKE_CUDA_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return CheckDevice(State(), dev);
}

FAKE_CUDA_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  DriverState& s = State();
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx != nullptr && DeviceOfContext(s, ctx) < 0) return CUDA_ERROR_INVALID_CONTEXT;
  current_context = ctx;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
  if (!State().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = current_context;
  return CUDA_SUCCESS;
}

// CUDA 13 added _v2 forms taking an explicit context (null: the current one); cuGetProcAddress
// hands those out for cudaVersion >= 13000.
FAKE_CUDA_EXPORT CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  DriverState& s = State();
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int found = DeviceOfContext(s, ctx != nullptr ? ctx : current_context);
  if (found < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *device = found;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  return cuCtxGetDevice_v2(device, nullptr);
}

FAKE_CUDA_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  CUdevice device;
  if (CUresult r = fake_capture::CheckSynchronize(nullptr, true)) return r;
  return cuCtxGetDevice_v2(&device, ctx);
}

FAKE_CUDA_EXPORT CUresult cuCtxSynchronize() { return cuCtxSynchronize_v2(nullptr); }

// ---- Linear memory ----

FAKE_CUDA_EXPORT CUresult cuMemGetInfo(size_t* free, size_t* total) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  int device;
  if (CUresult r = CurrentDevice(s, &device); r != CUDA_SUCCESS) return r;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *free = s.FreeBytes(device);
  *total = s.capacity;
  return CUDA_SUCCESS;
}

// GPUMEM_FAKE_SIGNAL_IN_MEM_ALLOC=N: cuMemAlloc raises signal N before it allocates (not again
// from a cuMemAlloc made while that signal is handled), so that a test's handler runs while the
// caller's hooks are on the thread's stack.
static void RaiseRequestedSignal() {
  static thread_local bool raising = false;
  const char* text = getenv("GPUMEM_FAKE_SIGNAL_IN_MEM_ALLOC");
  if (text == nullptr || raising) return;
  raising = true;
  raise(atoi(text));
  raising = false;
}

// cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged and cuMemFree are calls stream capture forbids.
FAKE_CUDA_EXPORT CUresult cuMemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  RaiseRequestedSignal();
  if (CUresult r = fake_capture::CheckUnsafeCall()) return r;
  return AllocateForCurrentContext(dptr, bytesize);
}

FAKE_CUDA_EXPORT CUresult cuMemAllocPitch(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,
                                          size_t Height, unsigned int ElementSizeBytes) {
  if (pPitch == nullptr || WidthInBytes == 0 || Height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = fake_capture::CheckUnsafeCall()) return r;
  size_t pitch = RoundUp(WidthInBytes, kPitchAlignment);
  CUresult r = AllocateForCurrentContext(dptr, pitch * Height);
  if (r == CUDA_SUCCESS) *pPitch = pitch;
  return r;
}

FAKE_CUDA_EXPORT CUresult cuMemFree(CUdeviceptr dptr) {
  if (CUresult r = fake_capture::CheckUnsafeCall()) return r;
  return Free(dptr);
}

FAKE_CUDA_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize,
                                            unsigned int flags) {
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = fake_capture::CheckUnsafeCall()) return r;
  return AllocateForCurrentContext(dptr, bytesize);
}

FAKE_CUDA_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int /*Flags*/) {
  return AllocateHost(pp, bytesize);
}

FAKE_CUDA_EXPORT CUresult cuMemAllocHost(void** pp, size_t bytesize) {
  return AllocateHost(pp, bytesize);
}

FAKE_CUDA_EXPORT CUresult cuMemFreeHost(void* p) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto it = s.host_allocations.find(p);
  if (it == s.host_allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  munmap(p, it->second);
  s.host_allocations.erase(it);
  return CUDA_SUCCESS;
}

// All memory is host memory, so copies and sets are plain memcpy / memset.
FAKE_CUDA_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void* srcHost,
                                       size_t ByteCount) {
  memcpy(reinterpret_cast<void*>(dstDevice), srcHost, ByteCount);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemcpyDtoH(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  memcpy(dstHost, reinterpret_cast<const void*>(srcDevice), ByteCount);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  memset(reinterpret_cast<void*>(dstDevice), uc, N);
  return CUDA_SUCCESS;
}

// ---- Stream-ordered allocation and pools (streams complete at once) ----

FAKE_CUDA_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize,
                                          CUstream /*hStream*/) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  int device;
  if (CUresult r = CurrentDevice(s, &device); r != CUDA_SUCCESS) return r;
  return AllocateInPool(s, device, DefaultPool(device), dptr, bytesize);  // the current pool
}

FAKE_CUDA_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream /*hStream*/) {
  return Free(dptr);
}

FAKE_CUDA_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize,
                                                  CUmemoryPool pool, CUstream /*hStream*/) {
  return AllocateFromPool(dptr, bytesize, pool);
}

FAKE_CUDA_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize,
                                               CUstream hStream) {
  return cuMemAllocAsync(dptr, bytesize, hStream);
}

FAKE_CUDA_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return cuMemFreeAsync(dptr, hStream);
}

FAKE_CUDA_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize,
                                                       CUmemoryPool pool, CUstream hStream) {
  return cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
}

FAKE_CUDA_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (pool == nullptr || poolProps == nullptr || !IsDevice(s, poolProps->location)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pool = s.NewHandle<CUmemoryPool>();
  s.created_pools[*pool] = poolProps->location.id;
  return CUDA_SUCCESS;
}

// Live allocations stay valid and counted until freed (real CUDA frees them at destroy).
FAKE_CUDA_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  return s.created_pools.erase(pool) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_CUDA_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  DriverState& s = State();
  if (CUresult r = CheckDevice(s, dev); r != CUDA_SUCCESS) return r;
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pool_out = DefaultPool(dev);
  return CUDA_SUCCESS;
}

// The current pool is always the default one (no cuDeviceSetMemPool).
FAKE_CUDA_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  return cuDeviceGetDefaultMemPool(pool, dev);
}

// The current reserved and used sizes; other attributes are not modelled. Stream capture forbids
// it (measured: it invalidates a capture as cuMemAlloc does).
FAKE_CUDA_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                                void* value) {
  if (CUresult r = fake_capture::CheckUnsafeCall()) return r;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  bool known = s.created_pools.count(pool) != 0;
  for (int d = 0; d < s.device_count; ++d) known = known || DefaultPool(d) == pool;
  if (!known || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const PoolSizes sizes = s.pool_sizes[pool];
  switch (attr) {
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = sizes.reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = sizes.used;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// ---- Virtual memory management (what PyTorch's expandable segments use) ----

FAKE_CUDA_EXPORT CUresult
cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                              CUmemAllocationGranularity_flags /*option*/) {
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kVmmGranularity;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                              CUdeviceptr /*addr*/, unsigned long long /*flags*/) {
  if (ptr == nullptr || size == 0 || size % kVmmGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  if (alignment != 0 && (alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  // Over-reserve, then trim to the alignment.
  size_t align = std::max(alignment, kVmmGranularity);
  auto* raw = static_cast<char*>(MapPages(size + align, PROT_NONE));
  if (raw == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  char* base = reinterpret_cast<char*>(RoundUp(reinterpret_cast<uintptr_t>(raw), align));
  if (base > raw) munmap(raw, base - raw);
  if (char* end = raw + size + align; end > base + size) munmap(base + size, end - (base + size));
  *ptr = reinterpret_cast<CUdeviceptr>(base);
  s.reservations[*ptr] = size;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto it = s.reservations.find(ptr);
  if (it == s.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  s.mappings.erase(s.mappings.lower_bound(ptr), s.mappings.lower_bound(ptr + size));
  munmap(reinterpret_cast<void*>(ptr), size);
  s.reservations.erase(it);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                      const CUmemAllocationProp* prop,
                                      unsigned long long /*flags*/) {
  if (handle == nullptr || prop == nullptr || size == 0 || size % kVmmGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!IsDevice(s, prop->location)) return CUDA_ERROR_INVALID_VALUE;
  // Fabric handles need an IMEX channel, which this system, like most, does not have: the real
  // driver refuses them so, and PyTorch's expandable segments probe for them at start-up.
  if ((prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) != 0) {
    return CUDA_ERROR_NOT_PERMITTED;
  }
  if (CUresult r = s.Charge(prop->location.id, size); r != CUDA_SUCCESS) return r;
  *handle = s.next_id++;
  PhysicalMemory& physical = s.physical[*handle];
  physical = {size, prop->location.id};
  physical.handle_types = prop->requestedHandleTypes;
  return CUDA_SUCCESS;
}

// Takes one reference; the last one frees the handle (a release past it: CUDA_ERROR_INVALID_VALUE,
// as the real driver answers). Real CUDA keeps the memory until the last mapping goes; the fake
// frees the capacity at once.
FAKE_CUDA_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto it = s.physical.find(handle);
  if (it == s.physical.end()) return CUDA_ERROR_INVALID_VALUE;
  if (--it->second.references > 0) return CUDA_SUCCESS;
  if (!it->second.imported) s.used_bytes[it->second.device] -= it->second.size;
  s.physical.erase(it);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                   CUmemGenericAllocationHandle handle, unsigned long long flags) {
  if (size == 0 || size % kVmmGranularity != 0 || offset % kVmmGranularity != 0 ||
      ptr % kVmmGranularity != 0 || flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto physical = s.physical.find(handle);
  if (physical == s.physical.end() || offset + size > physical->second.size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto reservation = EntryAtOrBelow(s.reservations, ptr);
  if (reservation == s.reservations.end() ||
      ptr + size > reservation->first + reservation->second) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto before = EntryAtOrBelow(s.mappings, ptr);
  if (before != s.mappings.end() && before->first + before->second.size > ptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto after = s.mappings.lower_bound(ptr);
  if (after != s.mappings.end() && after->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  if (mprotect(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE) != 0) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s.mappings[ptr] = {size, handle};
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto it = s.mappings.find(ptr);
  if (it == s.mappings.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
  // Fresh PROT_NONE pages: drops the contents and makes later access fault, as on a GPU.
  mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  s.mappings.erase(it);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemSetAccess(CUdeviceptr /*ptr*/, size_t /*size*/,
                                         const CUmemAccessDesc* /*desc*/, size_t /*count*/) {
  return CUDA_SUCCESS;
}

// ---- Shared physical memory: references, export and import (what NCCL does) ----

namespace {

// What an exported POSIX file descriptor carries (a memfd): enough for an importer in this process
// or in a forked child to find the memory again.
struct ExportedMemory {
  pid_t exporter;
  CUmemGenericAllocationHandle handle;
  size_t size;
  int device;
};

}  // namespace

// The handle of the mapping that holds `addr`, with one more reference on it.
FAKE_CUDA_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle,
                                                      void* addr) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  const auto address = reinterpret_cast<CUdeviceptr>(addr);
  auto mapping = EntryAtOrBelow(s.mappings, address);
  if (mapping == s.mappings.end() || address >= mapping->first + mapping->second.size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto physical = s.physical.find(mapping->second.handle);
  if (physical == s.physical.end()) return CUDA_ERROR_INVALID_VALUE;
  ++physical->second.references;
  *handle = physical->first;
  return CUDA_SUCCESS;
}

// A plain allocation or a VMM mapping (NCCL asks it of the pointer it is about to unmap).
FAKE_CUDA_EXPORT CUresult cuMemGetAddressRange(CUdeviceptr* pbase, size_t* psize,
                                               CUdeviceptr dptr) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  CUdeviceptr base = 0;
  size_t size = 0;
  if (auto plain = EntryAtOrBelow(s.allocations, dptr);
      plain != s.allocations.end() && dptr < plain->first + plain->second.size) {
    base = plain->first;
    size = plain->second.size;
  } else if (auto mapping = EntryAtOrBelow(s.mappings, dptr);
             mapping != s.mappings.end() && dptr < mapping->first + mapping->second.size) {
    base = mapping->first;
    size = mapping->second.size;
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (pbase != nullptr) *pbase = base;
  if (psize != nullptr) *psize = size;
  return CUDA_SUCCESS;
}

// POSIX file descriptors only, and only for memory created to be exported that way.
FAKE_CUDA_EXPORT CUresult cuMemExportToShareableHandle(void* shareableHandle,
                                                       CUmemGenericAllocationHandle handle,
                                                       CUmemAllocationHandleType handleType,
                                                       unsigned long long flags) {
  if (shareableHandle == nullptr || flags != 0 ||
      handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto physical = s.physical.find(handle);
  if (physical == s.physical.end()) return CUDA_ERROR_INVALID_VALUE;
  if ((physical->second.handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
    return CUDA_ERROR_NOT_PERMITTED;
  }
  const ExportedMemory exported{getpid(), handle, physical->second.size, physical->second.device};
  const int fd = memfd_create("fake-cuda-exported-memory", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (pwrite(fd, &exported, sizeof(exported), 0) != static_cast<ssize_t>(sizeof(exported))) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *static_cast<int*>(shareableHandle) = fd;
  return CUDA_SUCCESS;
}

// The exporter's own handle when it imports its own memory (one more reference), else a new
// handle for memory that stays charged to the exporter.
FAKE_CUDA_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                         void* osHandle,
                                                         CUmemAllocationHandleType shHandleType) {
  if (handle == nullptr || shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  ExportedMemory exported;
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(osHandle));
  if (pread(fd, &exported, sizeof(exported), 0) != static_cast<ssize_t>(sizeof(exported))) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (exported.exporter == getpid()) {
    auto own = s.physical.find(exported.handle);
    if (own == s.physical.end()) return CUDA_ERROR_INVALID_HANDLE;
    ++own->second.references;
    *handle = own->first;
    return CUDA_SUCCESS;
  }
  *handle = s.next_id++;
  PhysicalMemory& physical = s.physical[*handle];
  physical = {exported.size, exported.device};
  physical.imported = true;
  return CUDA_SUCCESS;
}

// ---- Streams ----

FAKE_CUDA_EXPORT CUresult cuStreamCreate(CUstream* phStream, unsigned int /*Flags*/) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  int device;
  if (CUresult r = CurrentDevice(s, &device); r != CUDA_SUCCESS) return r;
  if (phStream == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *phStream = s.NewHandle<CUstream>();
  s.streams.insert(*phStream);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuStreamDestroy(CUstream hStream) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  return s.streams.erase(hStream) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FAKE_CUDA_EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
  return fake_capture::CheckSynchronize(hStream, false);
}

// ---- Modules and kernels: PTX is parsed for its entry points, kernels never run ----

namespace {

// The PTX a module image holds: the text itself, or the first uncompressed PTX entry of a fatbin
// container (what `fatbinary --compress=false --image3=kind=ptx,...` writes and nvcc embeds).
constexpr uint32_t kFatbinMagic = 0xba55ed50;
constexpr uint16_t kFatbinKindPtx = 1;
struct FatbinHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t header_size;
  uint64_t entries_size;
};
struct FatbinEntryHeader {
  uint16_t kind;
  uint16_t version;
  uint32_t header_size;
  uint64_t padded_payload_size;
  uint32_t compressed_size;  // 0 when the payload is stored as is
};

CUresult PtxOfImage(const void* image, std::string_view* ptx) {
  const auto* bytes = static_cast<const char*>(image);
  // Byte by byte: PTX text may be shorter than the magic (which holds no NUL).
  for (size_t i = 0; i < sizeof(kFatbinMagic); ++i) {
    if (static_cast<uint8_t>(bytes[i]) != ((kFatbinMagic >> (8 * i)) & 0xff)) {
      *ptx = bytes;  // PTX text, NUL-terminated
      return CUDA_SUCCESS;
    }
  }
  FatbinHeader header;
  memcpy(&header, bytes, sizeof(header));
  const char* entry = bytes + header.header_size;
  const char* end = entry + header.entries_size;
  while (entry + sizeof(FatbinEntryHeader) <= end) {
    FatbinEntryHeader e;
    memcpy(&e, entry, sizeof(e));
    if (e.header_size < sizeof(e)) return CUDA_ERROR_INVALID_IMAGE;
    const char* payload = entry + e.header_size;
    if (e.kind == kFatbinKindPtx && e.compressed_size == 0) {
      *ptx = std::string_view(payload, strnlen(payload, e.padded_payload_size));
      return CUDA_SUCCESS;
    }
    entry = payload + e.padded_payload_size;
  }
  return CUDA_ERROR_NO_BINARY_FOR_GPU;  // only cubins, or compressed PTX
}

// Splits PTX into tokens: directives (".param"), identifiers, numbers ("8.0", "24"), and single
// punctuation characters. Comments are dropped.
std::vector<std::string_view> TokenizePtx(std::string_view text) {
  auto is_word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$';
  };
  std::vector<std::string_view> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
    } else if (text.substr(i, 2) == "//") {
      i = text.find('\n', i);
      if (i == std::string_view::npos) break;
    } else if (text.substr(i, 2) == "/*") {
      i = text.find("*/", i + 2);
      if (i == std::string_view::npos) break;
      i += 2;
    } else if (c == '"') {  // strings (.pragma "nounroll";) hold no tokens of interest
      size_t close = text.find('"', i + 1);
      i = close == std::string_view::npos ? text.size() : close + 1;
    } else if (c >= '0' && c <= '9') {
      size_t start = i;
      while (i < text.size() && (is_word(text[i]) || text[i] == '.')) ++i;
      tokens.push_back(text.substr(start, i - start));
    } else if (is_word(c) || c == '%' || c == '.') {
      size_t start = i++;
      while (i < text.size() && is_word(text[i])) ++i;
      tokens.push_back(text.substr(start, i - start));
    } else {
      tokens.push_back(text.substr(i++, 1));
    }
  }
  return tokens;
}

bool IsIdentifier(std::string_view token) {
  const char c = token[0];
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
}

bool ParseNumber(std::string_view token, size_t* value) {
  if (token.empty() || token[0] < '0' || token[0] > '9') return false;
  std::string text(token);
  char* end = nullptr;
  *value = strtoull(text.c_str(), &end, 0);
  return *end == '\0';
}

// Size in bytes of a PTX fundamental type, 0 if `token` is not one.
size_t TypeSize(std::string_view token) {
  static constexpr std::pair<std::string_view, size_t> kTypes[] = {
      {".b8", 1},  {".u8", 1},    {".s8", 1},     {".b16", 2},   {".u16", 2},
      {".s16", 2}, {".f16", 2},   {".bf16", 2},   {".b32", 4},   {".u32", 4},
      {".s32", 4}, {".f32", 4},   {".b64", 8},    {".u64", 8},   {".s64", 8},
      {".f64", 8}, {".f16x2", 4}, {".bf16x2", 4}, {".b128", 16},
  };
  for (const auto& [name, size] : kTypes) {
    if (token == name) return size;
  }
  return 0;
}

struct ParsedKernel {
  std::string name;
  std::vector<KernelParam> params;
};
struct ParsedPtx {
  int version = 0;
  int target = 0;
  std::vector<ParsedKernel> kernels;
};

// One ".param [.align N] .type [.ptr [.space] [.align M]] name[[count]]" of an entry's list,
// starting at tokens[*i]; on success *i is past it. Each parameter is aligned to its own
// alignment (.align N before the type, else the element size), as the driver lays them out.
bool ParseParam(const std::vector<std::string_view>& tokens, size_t* i, size_t* cursor,
                KernelParam* param) {
  size_t at = *i;
  if (at >= tokens.size() || tokens[at++] != ".param") return false;
  size_t align = 0, element = 0, count = 1;
  bool named = false;
  while (at < tokens.size() && tokens[at] != "," && tokens[at] != ")") {
    std::string_view t = tokens[at++];
    if (t == ".align") {
      size_t n = 0;
      if (at >= tokens.size() || !ParseNumber(tokens[at++], &n) || n == 0 || (n & (n - 1)) != 0) {
        return false;
      }
      if (element == 0) align = n;  // after the type it is .ptr's alignment of the pointee
    } else if (size_t size = TypeSize(t); size != 0) {
      if (element != 0) return false;
      element = size;
    } else if (t == ".ptr" || t == ".global" || t == ".const" || t == ".local" || t == ".shared") {
      continue;
    } else if (t == "[") {
      if (!named || at + 1 >= tokens.size() || !ParseNumber(tokens[at], &count) || count == 0 ||
          tokens[at + 1] != "]") {
        return false;
      }
      at += 2;
    } else if (!named && element != 0 && IsIdentifier(t)) {
      named = true;
    } else {
      return false;
    }
  }
  if (element == 0 || !named) return false;
  if (align == 0) align = element;
  param->offset = RoundUp(*cursor, align);
  param->size = element * count;
  *cursor = param->offset + param->size;
  *i = at;
  return true;
}

// Just enough of PTX to know its kernels: ".version", ".target", and every ".entry" with its
// parameter list. Bodies are not looked at. As the driver answers: text that does not start with
// ".version" is no PTX (CUDA_ERROR_INVALID_IMAGE); PTX without a ".target" or with a parameter it
// cannot read fails to compile (CUDA_ERROR_INVALID_PTX); PTX without kernels is an empty module.
CUresult ParsePtx(std::string_view text, ParsedPtx* ptx) {
  std::vector<std::string_view> tokens = TokenizePtx(text);
  if (tokens.empty() || tokens[0] != ".version") return CUDA_ERROR_INVALID_IMAGE;
  std::set<std::string_view> names;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == ".version" && i + 1 < tokens.size()) {
      std::string version(tokens[i + 1]);  // "8.0"
      unsigned major = 0, minor = 0;
      if (sscanf(version.c_str(), "%u.%u", &major, &minor) == 2) ptx->version = major * 10 + minor;
    } else if (tokens[i] == ".target" && i + 1 < tokens.size() &&
               tokens[i + 1].starts_with("sm_")) {
      ptx->target = atoi(std::string(tokens[i + 1].substr(3)).c_str());
    } else if (tokens[i] == ".entry") {
      if (i + 1 >= tokens.size()) return CUDA_ERROR_INVALID_PTX;
      std::string_view name = tokens[++i];
      if (!IsIdentifier(name) || !names.insert(name).second) {
        return CUDA_ERROR_INVALID_PTX;
      }
      ParsedKernel kernel{std::string(name), {}};
      if (i + 1 < tokens.size() && tokens[i + 1] == "(") {
        i += 2;
        size_t cursor = 0;
        while (i < tokens.size() && tokens[i] != ")") {
          KernelParam param;
          if (!ParseParam(tokens, &i, &cursor, &param)) return CUDA_ERROR_INVALID_PTX;
          kernel.params.push_back(param);
          if (i < tokens.size() && tokens[i] == ",") ++i;
        }
        if (i >= tokens.size()) return CUDA_ERROR_INVALID_PTX;
      }
      ptx->kernels.push_back(std::move(kernel));
    }
  }
  return ptx->version == 0 || ptx->target == 0 ? CUDA_ERROR_INVALID_PTX : CUDA_SUCCESS;
}

CUresult LoadModule(CUmodule* module, const void* image) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::string_view text;
  if (CUresult r = PtxOfImage(image, &text); r != CUDA_SUCCESS) return r;
  ParsedPtx ptx;
  if (CUresult r = ParsePtx(text, &ptx); r != CUDA_SUCCESS) return r;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  int device;
  if (CUresult r = CurrentDevice(s, &device); r != CUDA_SUCCESS) return r;
  *module = s.NewHandle<CUmodule>();
  std::vector<CUfunction>& functions = s.modules[*module];
  for (ParsedKernel& k : ptx.kernels) {
    CUfunction function = s.NewHandle<CUfunction>();
    s.functions[function] = {std::move(k.name), std::move(k.params), *module, ptx.version,
                             ptx.target};
    functions.push_back(function);
  }
  return CUDA_SUCCESS;
}

// The kernel behind `function`; null if it is not a live handle. Needs the state's lock.
const Kernel* FindKernel(DriverState& s, CUfunction function) {
  auto it = s.functions.find(function);
  return it == s.functions.end() ? nullptr : &it->second;
}

// The limits of a compute capability 8.0 device; a cooperative grid must fit on it at once.
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDimZ = 64;
constexpr unsigned kMaxGridDimX = 0x7fffffff;
constexpr unsigned kMaxGridDimYZ = 65535;
constexpr unsigned kMaxDynamicSharedBytes = 48 << 10;  // without cuFuncSetAttribute
constexpr unsigned kMultiprocessors = 108;
constexpr unsigned kMaxThreadsPerMultiprocessor = 2048;
constexpr unsigned kMaxBlocksPerMultiprocessor = 32;

struct LaunchShape {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_memory_bytes;
};

CUresult CheckShape(const LaunchShape& shape, bool cooperative) {
  const auto& [grid, block, shared] = shape;
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || block[0] == 0 || block[1] == 0 ||
      block[2] == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (grid[0] > kMaxGridDimX || grid[1] > kMaxGridDimYZ || grid[2] > kMaxGridDimYZ) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint64_t threads = uint64_t{block[0]} * block[1] * block[2];
  if (block[0] > kMaxThreadsPerBlock || block[1] > kMaxThreadsPerBlock ||
      block[2] > kMaxBlockDimZ || threads > kMaxThreadsPerBlock) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (shared > kMaxDynamicSharedBytes) return CUDA_ERROR_INVALID_VALUE;
  if (cooperative) {
    const uint64_t per_multiprocessor =
        std::min<uint64_t>(kMaxBlocksPerMultiprocessor, kMaxThreadsPerMultiprocessor / threads);
    if (uint64_t{grid[0]} * grid[1] * grid[2] > per_multiprocessor * kMultiprocessors) {
      return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
  }
  return CUDA_SUCCESS;
}

// Reads the arguments as the driver does: one pointer per parameter in `kernel_params`, or one
// packed buffer through `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE,
// CU_LAUNCH_PARAM_END). Either, not both; neither only for a kernel without parameters. Like the
// real driver, a buffer larger than the parameters is CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES and a
// shorter one is taken (the rest of the parameters is left as it is).
CUresult ReadArguments(const Kernel& kernel, void** kernel_params, void** extra) {
  if (kernel_params != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  const size_t bytes = kernel.ParamBytes();
  std::vector<char> buffer(bytes);
  if (kernel_params != nullptr) {
    for (size_t i = 0; i < kernel.params.size(); ++i) {
      if (kernel_params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      memcpy(buffer.data() + kernel.params[i].offset, kernel_params[i], kernel.params[i].size);
    }
    return CUDA_SUCCESS;
  }
  if (extra == nullptr) return bytes == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  const void* arguments = nullptr;
  const size_t* size = nullptr;
  for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      arguments = extra[i + 1];
    } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
      size = static_cast<const size_t*>(extra[i + 1]);
    } else {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  const size_t given = size != nullptr ? *size : 0;
  if (given > bytes) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  if (bytes == 0) return CUDA_SUCCESS;
  if (arguments == nullptr || given == 0) return CUDA_ERROR_INVALID_VALUE;
  memcpy(buffer.data(), arguments, given);
  return CUDA_SUCCESS;
}

bool IsStream(const DriverState& s, CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD ||
         s.streams.count(stream) == 1;
}

// Everything the real driver checks before it queues a launch; the kernel does not run.
CUresult Launch(CUfunction function, const LaunchShape& shape, CUstream stream,
                void** kernel_params, void** extra, bool cooperative) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  int device;
  if (CUresult r = CurrentDevice(s, &device); r != CUDA_SUCCESS) return r;
  const Kernel* kernel = FindKernel(s, function);
  if (kernel == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (!IsStream(s, stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = CheckShape(shape, cooperative); r != CUDA_SUCCESS) return r;
  return ReadArguments(*kernel, kernel_params, extra);
}

CUresult LaunchEx(const CUlaunchConfig* config, CUfunction function, void** kernel_params,
                  void** extra) {
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  bool cooperative = false;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
      cooperative = config->attrs[i].value.cooperative != 0;
    }
  }
  LaunchShape shape{{config->gridDimX, config->gridDimY, config->gridDimZ},
                    {config->blockDimX, config->blockDimY, config->blockDimZ},
                    config->sharedMemBytes};
  return Launch(function, shape, config->hStream, kernel_params, extra, cooperative);
}

}  // namespace

FAKE_CUDA_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  return LoadModule(module, image);
}

// JIT options change nothing here.
FAKE_CUDA_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image,
                                             unsigned int numOptions, CUjit_option* options,
                                             void** optionValues) {
  if (numOptions > 0 && (options == nullptr || optionValues == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return LoadModule(module, image);
}

FAKE_CUDA_EXPORT CUresult cuModuleUnload(CUmodule hmod) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto it = s.modules.find(hmod);
  if (it == s.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  for (CUfunction function : it->second) s.functions.erase(function);
  s.modules.erase(it);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto it = s.modules.find(hmod);
  if (it == s.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  for (CUfunction function : it->second) {
    if (s.functions[function].name == name) {
      *hfunc = function;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

FAKE_CUDA_EXPORT CUresult cuFuncGetName(const char** name, CUfunction hfunc) {
  if (name == nullptr || hfunc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  const Kernel* kernel = FindKernel(s, hfunc);
  if (kernel == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *name = kernel->name.c_str();  // valid until the module is unloaded
  return CUDA_SUCCESS;
}

// CUDA_ERROR_INVALID_VALUE for an index past the last parameter: how callers find the count.
FAKE_CUDA_EXPORT CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex,
                                             size_t* paramOffset, size_t* paramSize) {
  if (paramOffset == nullptr) return CUDA_ERROR_INVALID_VALUE;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  const Kernel* kernel = FindKernel(s, func);
  if (kernel == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (paramIndex >= kernel->params.size()) return CUDA_ERROR_INVALID_VALUE;
  *paramOffset = kernel->params[paramIndex].offset;
  if (paramSize != nullptr) *paramSize = kernel->params[paramIndex].size;
  return CUDA_SUCCESS;
}

// The attributes a launch configuration is computed from; the others are not faked.
FAKE_CUDA_EXPORT CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute attrib,
                                             CUfunction hfunc) {
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  const Kernel* kernel = FindKernel(s, hfunc);
  if (kernel == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *pi = kMaxThreadsPerBlock;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
      *pi = 0;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *pi = 32;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
      *pi = kernel->ptx_version;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      *pi = kernel->target;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *pi = kMaxDynamicSharedBytes;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_CUDA_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                         unsigned int gridDimZ, unsigned int blockDimX,
                                         unsigned int blockDimY, unsigned int blockDimZ,
                                         unsigned int sharedMemBytes, CUstream hStream,
                                         void** kernelParams, void** extra) {
  LaunchShape shape{
      {gridDimX, gridDimY, gridDimZ}, {blockDimX, blockDimY, blockDimZ}, sharedMemBytes};
  return Launch(f, shape, hStream, kernelParams, extra, /*cooperative=*/false);
}

FAKE_CUDA_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                              unsigned int gridDimY, unsigned int gridDimZ,
                                              unsigned int blockDimX, unsigned int blockDimY,
                                              unsigned int blockDimZ, unsigned int sharedMemBytes,
                                              CUstream hStream, void** kernelParams, void** extra) {
  return cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                        sharedMemBytes, hStream, kernelParams, extra);
}

FAKE_CUDA_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f,
                                           void** kernelParams, void** extra) {
  return LaunchEx(config, f, kernelParams, extra);
}

FAKE_CUDA_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                                void** kernelParams, void** extra) {
  return LaunchEx(config, f, kernelParams, extra);
}

// The grid must fit on the device at once (kMultiprocessors of them).
FAKE_CUDA_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                                    unsigned int gridDimY, unsigned int gridDimZ,
                                                    unsigned int blockDimX, unsigned int blockDimY,
                                                    unsigned int blockDimZ,
                                                    unsigned int sharedMemBytes, CUstream hStream,
                                                    void** kernelParams) {
  LaunchShape shape{
      {gridDimX, gridDimY, gridDimZ}, {blockDimX, blockDimY, blockDimZ}, sharedMemBytes};
  return Launch(f, shape, hStream, kernelParams, nullptr, /*cooperative=*/true);
}

FAKE_CUDA_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
    unsigned int sharedMemBytes, CUstream hStream, void** kernelParams) {
  return cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                   sharedMemBytes, hStream, kernelParams);
}

// ---- Graphs: kernel nodes only; a launch checks its executable graph and does nothing ----

namespace {

CUresult AddKernelNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies,
                       size_t dependency_count, CUfunction function, const LaunchShape& shape,
                       void** kernel_params, void** extra) {
  if (node == nullptr || (dependency_count > 0 && dependencies == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  auto nodes = s.graphs.find(graph);
  if (nodes == s.graphs.end()) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < dependency_count; ++i) {
    auto dependency = std::find(nodes->second.begin(), nodes->second.end(), dependencies[i]);
    if (dependency == nodes->second.end()) return CUDA_ERROR_INVALID_VALUE;
  }
  // The node takes a copy of the arguments, so they are checked now.
  const Kernel* kernel = FindKernel(s, function);
  if (kernel == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = CheckShape(shape, /*cooperative=*/false); r != CUDA_SUCCESS) return r;
  if (CUresult r = ReadArguments(*kernel, kernel_params, extra); r != CUDA_SUCCESS) return r;
  *node = s.NewHandle<CUgraphNode>();
  nodes->second.push_back(*node);
  s.graph_nodes[*node] = function;
  return CUDA_SUCCESS;
}

CUresult LaunchGraph(CUgraphExec exec, CUstream stream) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (s.graph_execs.count(exec) == 0) return CUDA_ERROR_INVALID_VALUE;
  return IsStream(s, stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

}  // namespace

FAKE_CUDA_EXPORT CUresult cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  if (phGraph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *phGraph = s.NewHandle<CUgraph>();
  s.graphs[*phGraph];
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                               const CUgraphNode* dependencies,
                                               size_t numDependencies,
                                               const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_KERNEL_NODE_PARAMS_v1& p = *nodeParams;
  LaunchShape shape{{p.gridDimX, p.gridDimY, p.gridDimZ},
                    {p.blockDimX, p.blockDimY, p.blockDimZ},
                    p.sharedMemBytes};
  return AddKernelNode(phGraphNode, hGraph, dependencies, numDependencies, p.func, shape,
                       p.kernelParams, p.extra);
}

// CUDA 12 added a CUkernel alternative to `func` (not faked: the fake has no libraries).
FAKE_CUDA_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                  const CUgraphNode* dependencies,
                                                  size_t numDependencies,
                                                  const CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_KERNEL_NODE_PARAMS& p = *nodeParams;
  LaunchShape shape{{p.gridDimX, p.gridDimY, p.gridDimZ},
                    {p.blockDimX, p.blockDimY, p.blockDimZ},
                    p.sharedMemBytes};
  return AddKernelNode(phGraphNode, hGraph, dependencies, numDependencies, p.func, shape,
                       p.kernelParams, p.extra);
}

// cuda.h maps cuGraphInstantiate to this (the CUDA 12 signature).
FAKE_CUDA_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                      unsigned long long /*flags*/) {
  if (phGraphExec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  auto graph = s.graphs.find(hGraph);
  if (graph == s.graphs.end()) return CUDA_ERROR_INVALID_VALUE;
  std::vector<CUfunction> kernels;
  for (CUgraphNode node : graph->second) kernels.push_back(s.graph_nodes[node]);
  *phGraphExec = s.NewHandle<CUgraphExec>();
  s.graph_execs[*phGraphExec] = std::move(kernels);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  return LaunchGraph(hGraphExec, hStream);
}

FAKE_CUDA_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return LaunchGraph(hGraphExec, hStream);
}

FAKE_CUDA_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  return s.graph_execs.erase(hGraphExec) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Executable graphs instantiated from it stay valid.
FAKE_CUDA_EXPORT CUresult cuGraphDestroy(CUgraph hGraph) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto graph = s.graphs.find(hGraph);
  if (graph == s.graphs.end()) return CUDA_ERROR_INVALID_VALUE;
  for (CUgraphNode node : graph->second) s.graph_nodes.erase(node);
  s.graphs.erase(graph);
  return CUDA_SUCCESS;
}

// ---- Errors ----

namespace {

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
#define FAKE_CUDA_ERROR(code, text) \
  { code, #code, text }
constexpr ErrorText kErrors[] = {
    FAKE_CUDA_ERROR(CUDA_SUCCESS, "no error"),
    FAKE_CUDA_ERROR(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    FAKE_CUDA_ERROR(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    FAKE_CUDA_ERROR(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    FAKE_CUDA_ERROR(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    FAKE_CUDA_ERROR(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    FAKE_CUDA_ERROR(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NO_BINARY_FOR_GPU,
                    "no kernel image is available for execution on the device"),
    FAKE_CUDA_ERROR(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
    FAKE_CUDA_ERROR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    FAKE_CUDA_ERROR(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                    "too many blocks in cooperative launch"),
    FAKE_CUDA_ERROR(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef FAKE_CUDA_ERROR

const ErrorText* FindError(CUresult error) {
  for (const ErrorText& e : kErrors) {
    if (e.code == error) return &e;
  }
  return nullptr;
}

}  // namespace

FAKE_CUDA_EXPORT CUresult cuGetErrorString(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *pStr = e != nullptr ? e->text : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_CUDA_EXPORT CUresult cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *pStr = e != nullptr ? e->name : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- cuGetProcAddress: how libcudart reaches every driver function ----

namespace {

struct DriverSymbol {
  const char* base_name;  // what cuGetProcAddress is asked for, e.g. "cuMemAlloc"
  int since_version;      // first cudaVersion for which base_name resolves to this entry
  void* function;
  void* per_thread_function;  // the _ptsz variant, if any
  int per_thread_since;       // first cudaVersion that gets it
};

// clang-format off
#define FAKE_CUDA_FUNCTION(pfn_type, fn) reinterpret_cast<void*>(static_cast<pfn_type>(&fn))
// `fn` goes through cuda.h's macros (cuMemAlloc -> cuMemAlloc_v2); the static_cast to the PFN type
// of cudaTypedefs.h checks the signature of every entry. OLDER_SYMBOL serves an older version
// whose PFN type the public headers do not declare but whose signature is the same.
#define SYMBOL(base, version, fn) \
  {#base, version, FAKE_CUDA_FUNCTION(PFN_##base##_v##version, fn), nullptr, 0}
#define OLDER_SYMBOL(base, since, version, fn) \
  {#base, since, FAKE_CUDA_FUNCTION(PFN_##base##_v##version, fn), nullptr, 0}
#define PTSZ_SYMBOL(base, version) PTSZ_SYMBOL_SINCE(base, version, version)
// The _ptsz variant came later than the function (cuLaunchKernel: 4000, its _ptsz 7000).
#define PTSZ_SYMBOL_SINCE(base, version, ptsz_version) \
  {#base, version, FAKE_CUDA_FUNCTION(PFN_##base##_v##version, base), \
   FAKE_CUDA_FUNCTION(PFN_##base##_v##ptsz_version##_ptsz, base##_ptsz), ptsz_version}
// The same where the function's symbol is not its base name (cuStreamBeginCapture -> _v2).
#define PTSZ_SYMBOL_OF(base, version, fn) \
  {#base, version, FAKE_CUDA_FUNCTION(PFN_##base##_v##version, fn), \
   FAKE_CUDA_FUNCTION(PFN_##base##_v##version##_ptsz, fn##_ptsz), version}
// clang-format on

const DriverSymbol kSymbols[] = {
    SYMBOL(cuGetProcAddress, 11030, cuGetProcAddress),
    SYMBOL(cuGetProcAddress, 12000, cuGetProcAddress_v2),
    SYMBOL(cuInit, 2000, cuInit),
    SYMBOL(cuDriverGetVersion, 2020, cuDriverGetVersion),
    SYMBOL(cuDeviceGetCount, 2000, cuDeviceGetCount),
    SYMBOL(cuDeviceGet, 2000, cuDeviceGet),
    SYMBOL(cuDeviceGetName, 2000, cuDeviceGetName),
    SYMBOL(cuDeviceTotalMem, 3020, cuDeviceTotalMem),
    SYMBOL(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
    // The v1 of these two has the v2's signature and behaviour; libcudart asks for it at 7000.
    OLDER_SYMBOL(cuDevicePrimaryCtxRelease, 7000, 11000, cuDevicePrimaryCtxRelease),
    SYMBOL(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease),
    SYMBOL(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
    SYMBOL(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
    SYMBOL(cuCtxGetDevice, 2000, cuCtxGetDevice),
    SYMBOL(cuCtxGetDevice, 13000, cuCtxGetDevice_v2),
    SYMBOL(cuCtxSynchronize, 2000, cuCtxSynchronize),
    SYMBOL(cuCtxSynchronize, 13000, cuCtxSynchronize_v2),
    SYMBOL(cuMemGetInfo, 3020, cuMemGetInfo),
    SYMBOL(cuMemAlloc, 3020, cuMemAlloc),
    SYMBOL(cuMemAllocPitch, 3020, cuMemAllocPitch),
    SYMBOL(cuMemFree, 3020, cuMemFree),
    SYMBOL(cuMemAllocManaged, 6000, cuMemAllocManaged),
    SYMBOL(cuMemHostAlloc, 2020, cuMemHostAlloc),
    SYMBOL(cuMemAllocHost, 3020, cuMemAllocHost),
    SYMBOL(cuMemFreeHost, 2000, cuMemFreeHost),
    SYMBOL(cuMemcpyHtoD, 3020, cuMemcpyHtoD),
    SYMBOL(cuMemcpyDtoH, 3020, cuMemcpyDtoH),
    SYMBOL(cuMemsetD8, 3020, cuMemsetD8),
    PTSZ_SYMBOL(cuMemAllocAsync, 11020),
    PTSZ_SYMBOL(cuMemFreeAsync, 11020),
    PTSZ_SYMBOL(cuMemAllocFromPoolAsync, 11020),
    SYMBOL(cuMemPoolCreate, 11020, cuMemPoolCreate),
    SYMBOL(cuMemPoolDestroy, 11020, cuMemPoolDestroy),
    SYMBOL(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool),
    SYMBOL(cuDeviceGetMemPool, 11020, cuDeviceGetMemPool),
    SYMBOL(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute),
    SYMBOL(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity),
    SYMBOL(cuMemAddressReserve, 10020, cuMemAddressReserve),
    SYMBOL(cuMemAddressFree, 10020, cuMemAddressFree),
    SYMBOL(cuMemCreate, 10020, cuMemCreate),
    SYMBOL(cuMemRelease, 10020, cuMemRelease),
    SYMBOL(cuMemMap, 10020, cuMemMap),
    SYMBOL(cuMemUnmap, 10020, cuMemUnmap),
    SYMBOL(cuMemSetAccess, 10020, cuMemSetAccess),
    SYMBOL(cuMemRetainAllocationHandle, 11000, cuMemRetainAllocationHandle),
    SYMBOL(cuMemGetAddressRange, 3020, cuMemGetAddressRange),
    SYMBOL(cuMemExportToShareableHandle, 10020, cuMemExportToShareableHandle),
    SYMBOL(cuMemImportFromShareableHandle, 10020, cuMemImportFromShareableHandle),
    SYMBOL(cuStreamCreate, 2000, cuStreamCreate),
    OLDER_SYMBOL(cuStreamDestroy, 2000, 4000, cuStreamDestroy),
    SYMBOL(cuStreamDestroy, 4000, cuStreamDestroy),
    SYMBOL(cuStreamSynchronize, 2000, cuStreamSynchronize),
    PTSZ_SYMBOL_OF(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2),
    PTSZ_SYMBOL(cuStreamEndCapture, 10000),
    PTSZ_SYMBOL(cuStreamIsCapturing, 10000),
    SYMBOL(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode),
    SYMBOL(cuGetErrorString, 6000, cuGetErrorString),
    SYMBOL(cuGetErrorName, 6000, cuGetErrorName),
    SYMBOL(cuModuleLoadData, 2000, cuModuleLoadData),
    SYMBOL(cuModuleLoadDataEx, 2010, cuModuleLoadDataEx),
    SYMBOL(cuModuleUnload, 2000, cuModuleUnload),
    SYMBOL(cuModuleGetFunction, 2000, cuModuleGetFunction),
    SYMBOL(cuFuncGetName, 12030, cuFuncGetName),
    SYMBOL(cuFuncGetParamInfo, 12040, cuFuncGetParamInfo),
    SYMBOL(cuFuncGetAttribute, 2020, cuFuncGetAttribute),
    PTSZ_SYMBOL_SINCE(cuLaunchKernel, 4000, 7000),
    PTSZ_SYMBOL(cuLaunchKernelEx, 11060),
    PTSZ_SYMBOL(cuLaunchCooperativeKernel, 9000),
    SYMBOL(cuGraphCreate, 10000, cuGraphCreate),
    SYMBOL(cuGraphAddKernelNode, 10000, cuGraphAddKernelNode),
    SYMBOL(cuGraphAddKernelNode, 12000, cuGraphAddKernelNode_v2),
    SYMBOL(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags),
    PTSZ_SYMBOL(cuGraphLaunch, 10000),
    SYMBOL(cuGraphExecDestroy, 10000, cuGraphExecDestroy),
    SYMBOL(cuGraphDestroy, 10000, cuGraphDestroy),
};
#undef SYMBOL
#undef OLDER_SYMBOL
#undef PTSZ_SYMBOL
#undef PTSZ_SYMBOL_SINCE
#undef PTSZ_SYMBOL_OF

// As the real driver answers (checked against 580.159, CUDA 13.0): by base name only, the newest
// entry the caller's CUDA version knows. A miss is CUDA_SUCCESS with a null pointer, the reason in
// *status; a version newer than the driver's is CUDA_ERROR_INVALID_VALUE.
CUresult LookUpSymbol(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                      CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr || cuda_version > kDriverVersion) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUdriverProcAddressQueryResult unused;
  if (status == nullptr) status = &unused;
  *pfn = nullptr;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const std::string_view name = symbol;
  const DriverSymbol* best = nullptr;
  bool name_known = false;
  for (const DriverSymbol& s : kSymbols) {
    if (name != s.base_name) continue;
    name_known = true;
    if (s.since_version <= cuda_version &&
        (best == nullptr || s.since_version > best->since_version)) {
      best = &s;
    }
  }
  if (best == nullptr) {
    *status = name_known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                         : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
  }
  if (per_thread && best->per_thread_function != nullptr) {
    if (cuda_version < best->per_thread_since) {  // asked for a _ptsz older than it
      *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return CUDA_SUCCESS;
    }
    *pfn = best->per_thread_function;
  } else {
    *pfn = best->function;  // also where no _ptsz exists, as documented
  }
  *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace

FAKE_CUDA_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                              cuuint64_t flags,
                                              CUdriverProcAddressQueryResult* symbolStatus) {
  return LookUpSymbol(symbol, pfn, cudaVersion, flags, symbolStatus);
}

FAKE_CUDA_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                           cuuint64_t flags) {
  return LookUpSymbol(symbol, pfn, cudaVersion, flags, nullptr);
}
