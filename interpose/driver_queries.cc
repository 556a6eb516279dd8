#include "interpose/driver_queries.h"

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>

#include "core/recorder.h"
#include "interpose/loader.h"

namespace gpumem {
namespace {

// Looked up by exact symbol in the loaded libcuda, never taken from cuGetProcAddress: asked for
// "cuCtxGetDevice" at CUDA 13 the driver hands out the _v2 that takes a context argument.
struct Query {
  const char* symbol;
  std::atomic<void*> function;
  std::atomic<int> failed_lookups;
};

// A lookup costs a dlopen (~10 µs); where libcuda is not found by that name, stop asking.
constexpr int kMaxFailedLookups = 8;

enum QueryId {
  kCtxGetDevice,
  kMemGetInfo,
  kDeviceGet,
  kDeviceGetName,
  kDeviceTotalMem,
  kFuncGetName,
  kFuncGetParamInfo,
  kKernelGetName,
  kKernelGetParamInfo,
  kCount
};

Query g_queries[kCount] = {
    {"cuCtxGetDevice", {nullptr}, {0}},       {"cuMemGetInfo_v2", {nullptr}, {0}},
    {"cuDeviceGet", {nullptr}, {0}},          {"cuDeviceGetName", {nullptr}, {0}},
    {"cuDeviceTotalMem_v2", {nullptr}, {0}},  {"cuFuncGetName", {nullptr}, {0}},
    {"cuFuncGetParamInfo", {nullptr}, {0}},   {"cuKernelGetName", {nullptr}, {0}},
    {"cuKernelGetParamInfo", {nullptr}, {0}},
};

template <typename Fn>
Fn Get(QueryId id) {
  Query& query = g_queries[id];
  void* function = query.function.load(std::memory_order_acquire);
  if (function == nullptr &&
      query.failed_lookups.load(std::memory_order_relaxed) < kMaxFailedLookups) {
    if (void* driver = RealDlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
      function = RealDlsym(driver, query.symbol);
      dlclose(driver);
    }
    if (function != nullptr) {
      query.function.store(function, std::memory_order_release);
    } else {
      query.failed_lookups.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return reinterpret_cast<Fn>(function);
}

}  // namespace

int CurrentDevice() {
  auto ctx_get_device = Get<decltype(&cuCtxGetDevice)>(kCtxGetDevice);
  CUdevice device = -1;
  if (ctx_get_device == nullptr || ctx_get_device(&device) != CUDA_SUCCESS) return -1;
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

void AnnounceDevice(int ordinal) {
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

void PrepareKernelQueries() {
  static std::atomic<bool> prepared{false};
  if (prepared.load(std::memory_order_relaxed)) return;
  KernelQueries queries;
  // Same ABI as declared in core/kernel_table.h (CUresult is an int-sized enum, CUfunction a
  // pointer), so the driver's functions are handed over as they are.
  queries.func_get_name = reinterpret_cast<decltype(queries.func_get_name)>(
      Get<decltype(&cuFuncGetName)>(kFuncGetName));
  queries.func_get_param_info = reinterpret_cast<decltype(queries.func_get_param_info)>(
      Get<decltype(&cuFuncGetParamInfo)>(kFuncGetParamInfo));
  queries.kernel_get_name = reinterpret_cast<decltype(queries.kernel_get_name)>(
      Get<decltype(&cuKernelGetName)>(kKernelGetName));
  queries.kernel_get_param_info = reinterpret_cast<decltype(queries.kernel_get_param_info)>(
      Get<decltype(&cuKernelGetParamInfo)>(kKernelGetParamInfo));
  // Until libcuda can be found (it may not be loaded yet), ask again at the next launch.
  if (queries.func_get_name == nullptr && queries.func_get_param_info == nullptr) return;
  recorder::SetKernelQueries(queries);
  prepared.store(true, std::memory_order_relaxed);
}

}  // namespace gpumem
