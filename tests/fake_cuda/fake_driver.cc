// Fake CUDA driver (libcuda.so.1) backed by host memory, for tests on machines without a GPU.
// Exports the real symbol names with the real signatures; see README.md for what it fakes.

#include <cuda.h>
#include <cudaTypedefs.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <vector>

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
};
struct PhysicalMemory {
  size_t size;
  int device;
};
struct Mapping {
  size_t size;
  CUmemGenericAllocationHandle handle;
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
  std::set<CUstream> streams;
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
  return AllocateOnDevice(s, device, dptr, size);
}

CUresult Free(CUdeviceptr dptr) {
  if (dptr == 0) return CUDA_SUCCESS;
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto it = s.allocations.find(dptr);
  if (it == s.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(dptr), it->second.size);
  s.used_bytes[it->second.device] -= it->second.size;
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

FAKE_CUDA_EXPORT CUresult cuMemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  return AllocateForCurrentContext(dptr, bytesize);
}

FAKE_CUDA_EXPORT CUresult cuMemAllocPitch(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,
                                          size_t Height, unsigned int ElementSizeBytes) {
  if (pPitch == nullptr || WidthInBytes == 0 || Height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  size_t pitch = RoundUp(WidthInBytes, kPitchAlignment);
  CUresult r = AllocateForCurrentContext(dptr, pitch * Height);
  if (r == CUDA_SUCCESS) *pPitch = pitch;
  return r;
}

FAKE_CUDA_EXPORT CUresult cuMemFree(CUdeviceptr dptr) { return Free(dptr); }

FAKE_CUDA_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize,
                                            unsigned int flags) {
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
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
  return AllocateForCurrentContext(dptr, bytesize);  // the device's default pool
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
  if (CUresult r = s.Charge(prop->location.id, size); r != CUDA_SUCCESS) return r;
  *handle = s.next_id++;
  s.physical[*handle] = {size, prop->location.id};
  return CUDA_SUCCESS;
}

// Real CUDA keeps the memory until the last mapping goes; the fake frees the capacity at once.
FAKE_CUDA_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  DriverState& s = State();
  std::lock_guard lock(s.mutex);
  auto it = s.physical.find(handle);
  if (it == s.physical.end()) return CUDA_ERROR_INVALID_VALUE;
  s.used_bytes[it->second.device] -= it->second.size;
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

FAKE_CUDA_EXPORT CUresult cuStreamSynchronize(CUstream /*hStream*/) { return CUDA_SUCCESS; }

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
  const char* base_name;      // what cuGetProcAddress is asked for, e.g. "cuMemAlloc"
  const char* exported_name;  // e.g. "cuMemAlloc_v2"
  int since_version;          // first cudaVersion for which base_name resolves to this entry
  void* function;
  void* per_thread_function;  // the _ptsz variant, if any
};

// clang-format off
#define FAKE_CUDA_STRINGIFY(x) #x
#define FAKE_CUDA_EXPANDED_NAME(x) FAKE_CUDA_STRINGIFY(x)
#define FAKE_CUDA_FUNCTION(pfn_type, fn) reinterpret_cast<void*>(static_cast<pfn_type>(&fn))
// `fn` goes through cuda.h's macros (cuMemAlloc -> cuMemAlloc_v2); the static_cast to the PFN type
// of cudaTypedefs.h checks the signature of every entry. OLDER_SYMBOL serves an older version
// whose PFN type the public headers do not declare but whose signature is the same.
#define SYMBOL(base, version, fn) \
  {#base, FAKE_CUDA_EXPANDED_NAME(fn), version, \
   FAKE_CUDA_FUNCTION(PFN_##base##_v##version, fn), nullptr}
#define OLDER_SYMBOL(base, since, version, fn) \
  {#base, FAKE_CUDA_EXPANDED_NAME(fn), since, \
   FAKE_CUDA_FUNCTION(PFN_##base##_v##version, fn), nullptr}
#define PTSZ_SYMBOL(base, version) \
  {#base, #base, version, FAKE_CUDA_FUNCTION(PFN_##base##_v##version, base), \
   FAKE_CUDA_FUNCTION(PFN_##base##_v##version##_ptsz, base##_ptsz)}
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
    SYMBOL(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity),
    SYMBOL(cuMemAddressReserve, 10020, cuMemAddressReserve),
    SYMBOL(cuMemAddressFree, 10020, cuMemAddressFree),
    SYMBOL(cuMemCreate, 10020, cuMemCreate),
    SYMBOL(cuMemRelease, 10020, cuMemRelease),
    SYMBOL(cuMemMap, 10020, cuMemMap),
    SYMBOL(cuMemUnmap, 10020, cuMemUnmap),
    SYMBOL(cuMemSetAccess, 10020, cuMemSetAccess),
    SYMBOL(cuStreamCreate, 2000, cuStreamCreate),
    OLDER_SYMBOL(cuStreamDestroy, 2000, 4000, cuStreamDestroy),
    SYMBOL(cuStreamDestroy, 4000, cuStreamDestroy),
    SYMBOL(cuStreamSynchronize, 2000, cuStreamSynchronize),
    SYMBOL(cuGetErrorString, 6000, cuGetErrorString),
    SYMBOL(cuGetErrorName, 6000, cuGetErrorName),
};
#undef SYMBOL
#undef OLDER_SYMBOL
#undef PTSZ_SYMBOL

CUresult LookUpSymbol(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                      CUdriverProcAddressQueryResult* status) {
  CUdriverProcAddressQueryResult unused;
  if (status == nullptr) status = &unused;
  *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const std::string_view name = symbol;
  // By base name: the newest entry the caller's CUDA version knows.
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
  if (best != nullptr) {
    *pfn = per_thread && best->per_thread_function ? best->per_thread_function : best->function;
  } else if (name_known) {
    *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  } else {
    // By exact exported name, e.g. "cuMemAlloc_v2" or "cuMemFreeAsync_ptsz".
    for (const DriverSymbol& s : kSymbols) {
      if (name == s.exported_name) *pfn = s.function;
      if (s.per_thread_function && name.starts_with(s.exported_name) &&
          name.substr(strlen(s.exported_name)) == "_ptsz") {
        *pfn = s.per_thread_function;
      }
    }
    if (*pfn == nullptr) return CUDA_ERROR_NOT_FOUND;
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
