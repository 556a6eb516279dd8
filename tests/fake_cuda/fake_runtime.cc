// Fake CUDA runtime (libcudart.so.13) for tests on machines without a GPU. It reaches the driver
// only the way the real libcudart does -- dlopen("libcuda.so.1"), dlsym "cuGetProcAddress_v2", ask
// that for "cuGetProcAddress", then ask the returned pointer for every driver function -- so the
// profiler's dlsym / cuGetProcAddress hooks are exercised exactly as on a GPU. See README.md.

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fatbinary_section.h>

#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#define FAKE_CUDART_EXPORT extern "C" __attribute__((visibility("default")))

#if defined(__x86_64__)
// Bind the same dlopen / dlsym versions as the real libcudart (built against an older glibc), so
// that the profiler's dlsym hook is reached exactly as on a GPU machine.
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
#endif

// Per-thread-default-stream forms (CUDA_API_PER_THREAD_DEFAULT_STREAM / nvcc --default-stream
// per-thread); they use the driver's _ptsz variants.
FAKE_CUDART_EXPORT decltype(cudaMallocAsync) cudaMallocAsync_ptsz;
FAKE_CUDART_EXPORT decltype(cudaFreeAsync) cudaFreeAsync_ptsz;
FAKE_CUDART_EXPORT decltype(cudaMallocFromPoolAsync) cudaMallocFromPoolAsync_ptsz;
FAKE_CUDART_EXPORT decltype(cudaLaunchKernel) cudaLaunchKernel_ptsz;
FAKE_CUDART_EXPORT decltype(cudaLaunchKernelExC) cudaLaunchKernelExC_ptsz;
FAKE_CUDART_EXPORT decltype(cudaLaunchCooperativeKernel) cudaLaunchCooperativeKernel_ptsz;

// What nvcc-generated host code calls to register its kernels, with the signatures of
// crt/host_runtime.h (an internal header that cannot be included here).
FAKE_CUDART_EXPORT void** __cudaRegisterFatBinary(void* fatCubin);
FAKE_CUDART_EXPORT void __cudaRegisterFatBinaryEnd(void** fatCubinHandle);
FAKE_CUDART_EXPORT void __cudaUnregisterFatBinary(void** fatCubinHandle);
FAKE_CUDART_EXPORT void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun,
                                               char* deviceFun, const char* deviceName,
                                               int thread_limit, uint3* tid, uint3* bid, dim3* bDim,
                                               dim3* gDim, int* wSize);

namespace {

constexpr int kRuntimeVersion = CUDART_VERSION;  // 13000

// The driver functions, as fetched through cuGetProcAddress.
struct DriverApi {
  PFN_cuGetProcAddress_v12000 get_proc_address;
  PFN_cuInit_v2000 init;
  PFN_cuDriverGetVersion_v2020 driver_get_version;
  PFN_cuDeviceGetCount_v2000 device_get_count;
  PFN_cuDevicePrimaryCtxRetain_v7000 primary_ctx_retain;
  PFN_cuCtxSetCurrent_v4000 ctx_set_current;
  PFN_cuCtxSynchronize_v13000 ctx_synchronize;
  PFN_cuMemGetInfo_v3020 mem_get_info;
  PFN_cuMemAlloc_v3020 mem_alloc;
  PFN_cuMemAllocPitch_v3020 mem_alloc_pitch;
  PFN_cuMemFree_v3020 mem_free;
  PFN_cuMemAllocManaged_v6000 mem_alloc_managed;
  PFN_cuMemAllocHost_v3020 mem_alloc_host;
  PFN_cuMemHostAlloc_v2020 mem_host_alloc;
  PFN_cuMemFreeHost_v2000 mem_free_host;
  PFN_cuMemAllocAsync_v11020 mem_alloc_async;
  PFN_cuMemFreeAsync_v11020 mem_free_async;
  PFN_cuMemAllocFromPoolAsync_v11020 mem_alloc_from_pool_async;
  PFN_cuMemAllocAsync_v11020_ptsz mem_alloc_async_ptsz;
  PFN_cuMemFreeAsync_v11020_ptsz mem_free_async_ptsz;
  PFN_cuMemAllocFromPoolAsync_v11020_ptsz mem_alloc_from_pool_async_ptsz;
  PFN_cuMemPoolCreate_v11020 mem_pool_create;
  PFN_cuMemPoolDestroy_v11020 mem_pool_destroy;
  PFN_cuDeviceGetDefaultMemPool_v11020 device_get_default_mem_pool;
  PFN_cuStreamCreate_v2000 stream_create;
  PFN_cuStreamDestroy_v4000 stream_destroy;
  PFN_cuStreamSynchronize_v2000 stream_synchronize;
  PFN_cuModuleLoadData_v2000 module_load_data;
  PFN_cuModuleUnload_v2000 module_unload;
  PFN_cuModuleGetFunction_v2000 module_get_function;
  PFN_cuLaunchKernel_v4000 launch_kernel;
  PFN_cuLaunchKernelEx_v11060 launch_kernel_ex;
  PFN_cuLaunchCooperativeKernel_v9000 launch_cooperative_kernel;
  PFN_cuLaunchKernel_v7000_ptsz launch_kernel_ptsz;
  PFN_cuLaunchKernelEx_v11060_ptsz launch_kernel_ex_ptsz;
  PFN_cuLaunchCooperativeKernel_v9000_ptsz launch_cooperative_kernel_ptsz;
  PFN_cuStreamBeginCapture_v10010 stream_begin_capture;
  PFN_cuStreamEndCapture_v10000 stream_end_capture;
  PFN_cuStreamIsCapturing_v10000 stream_is_capturing;
  PFN_cuThreadExchangeStreamCaptureMode_v10010 thread_exchange_stream_capture_mode;
  PFN_cuGraphInstantiateWithFlags_v11040 graph_instantiate;
  PFN_cuGraphLaunch_v10000 graph_launch;
  PFN_cuGraphExecDestroy_v10000 graph_exec_destroy;
  PFN_cuGraphDestroy_v10000 graph_destroy;
};

struct Runtime {
  cudaError_t init_error = cudaSuccess;
  bool driver_loaded = false;
  DriverApi cu{};
  int device_count = 0;
  std::mutex mutex;
  std::vector<CUcontext> primary_contexts;  // retained on first use of each device
};

cudaError_t ToRuntimeError(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS:
      return cudaSuccess;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return cudaErrorMemoryAllocation;
    case CUDA_ERROR_INVALID_VALUE:
      return cudaErrorInvalidValue;
    case CUDA_ERROR_NOT_INITIALIZED:
      return cudaErrorInitializationError;
    case CUDA_ERROR_NO_DEVICE:
      return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE:
      return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_HANDLE:
      return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_INVALID_IMAGE:
      return cudaErrorInvalidKernelImage;
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      return cudaErrorNoKernelImageForDevice;
    case CUDA_ERROR_INVALID_PTX:
      return cudaErrorInvalidPtx;
    case CUDA_ERROR_NOT_FOUND:
      return cudaErrorSymbolNotFound;
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
      return cudaErrorCooperativeLaunchTooLarge;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      return cudaErrorLaunchOutOfResources;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
      return cudaErrorStreamCaptureUnsupported;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
      return cudaErrorStreamCaptureInvalidated;
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
      return cudaErrorStreamCaptureWrongThread;
    case CUDA_ERROR_ILLEGAL_STATE:
      return cudaErrorIllegalState;
    default:
      return cudaErrorUnknown;
  }
}

// Asks for `name` at the version its PFN type was introduced with, and with the flags the real
// libcudart uses (it asks for cuMemAlloc at 3020, cuMemAllocAsync at 11020, and so on).
template <typename Pfn>
bool Fetch(PFN_cuGetProcAddress_v12000 get_proc_address, const char* name, int version, Pfn* out,
           cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT) {
  void* function = nullptr;
  CUdriverProcAddressQueryResult status;
  if (get_proc_address(name, &function, version, flags, &status) != CUDA_SUCCESS) return false;
  *out = reinterpret_cast<Pfn>(function);
  return function != nullptr;
}

bool FetchDriverApi(void* libcuda, DriverApi& cu) {
  // The one dlsym, then one call to fetch "cuGetProcAddress" itself: as libcudart does.
  auto bootstrap =
      reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(libcuda, "cuGetProcAddress_v2"));
  if (bootstrap == nullptr || !Fetch(bootstrap, "cuGetProcAddress", 12000, &cu.get_proc_address)) {
    return false;
  }
  PFN_cuGetProcAddress_v12000 get = cu.get_proc_address;
  constexpr cuuint64_t kPerThread = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
#define FETCH(name, version, member, ...) \
  Fetch<PFN_##name##_v##version>(get, #name, version, &cu.member __VA_OPT__(, ) __VA_ARGS__)
#define FETCH_PTSZ(name, version, member) \
  Fetch<PFN_##name##_v##version##_ptsz>(get, #name, version, &cu.member, kPerThread)
  return FETCH(cuInit, 2000, init) && FETCH(cuDriverGetVersion, 2020, driver_get_version) &&
         FETCH(cuDeviceGetCount, 2000, device_get_count) &&
         FETCH(cuDevicePrimaryCtxRetain, 7000, primary_ctx_retain) &&
         FETCH(cuCtxSetCurrent, 4000, ctx_set_current) &&
         FETCH(cuCtxSynchronize, 13000, ctx_synchronize) &&
         FETCH(cuMemGetInfo, 3020, mem_get_info) && FETCH(cuMemAlloc, 3020, mem_alloc) &&
         FETCH(cuMemAllocPitch, 3020, mem_alloc_pitch) && FETCH(cuMemFree, 3020, mem_free) &&
         FETCH(cuMemAllocManaged, 6000, mem_alloc_managed) &&
         FETCH(cuMemAllocHost, 3020, mem_alloc_host) &&
         FETCH(cuMemHostAlloc, 2020, mem_host_alloc) && FETCH(cuMemFreeHost, 2000, mem_free_host) &&
         FETCH(cuMemAllocAsync, 11020, mem_alloc_async) &&
         FETCH(cuMemFreeAsync, 11020, mem_free_async) &&
         FETCH(cuMemAllocFromPoolAsync, 11020, mem_alloc_from_pool_async) &&
         FETCH(cuMemAllocAsync, 11020, mem_alloc_async_ptsz, kPerThread) &&
         FETCH(cuMemFreeAsync, 11020, mem_free_async_ptsz, kPerThread) &&
         FETCH(cuMemAllocFromPoolAsync, 11020, mem_alloc_from_pool_async_ptsz, kPerThread) &&
         FETCH(cuMemPoolCreate, 11020, mem_pool_create) &&
         FETCH(cuMemPoolDestroy, 11020, mem_pool_destroy) &&
         FETCH(cuDeviceGetDefaultMemPool, 11020, device_get_default_mem_pool) &&
         FETCH(cuStreamCreate, 2000, stream_create) &&
         FETCH(cuStreamDestroy, 4000, stream_destroy) &&
         FETCH(cuStreamSynchronize, 2000, stream_synchronize) &&
         FETCH(cuModuleLoadData, 2000, module_load_data) &&
         FETCH(cuModuleUnload, 2000, module_unload) &&
         FETCH(cuModuleGetFunction, 2000, module_get_function) &&
         FETCH(cuLaunchKernel, 4000, launch_kernel) &&
         FETCH(cuLaunchKernelEx, 11060, launch_kernel_ex) &&
         FETCH(cuLaunchCooperativeKernel, 9000, launch_cooperative_kernel) &&
         FETCH_PTSZ(cuLaunchKernel, 7000, launch_kernel_ptsz) &&
         FETCH_PTSZ(cuLaunchKernelEx, 11060, launch_kernel_ex_ptsz) &&
         FETCH_PTSZ(cuLaunchCooperativeKernel, 9000, launch_cooperative_kernel_ptsz) &&
         FETCH(cuStreamBeginCapture, 10010, stream_begin_capture) &&
         FETCH(cuStreamEndCapture, 10000, stream_end_capture) &&
         FETCH(cuStreamIsCapturing, 10000, stream_is_capturing) &&
         FETCH(cuThreadExchangeStreamCaptureMode, 10010, thread_exchange_stream_capture_mode) &&
         FETCH(cuGraphInstantiateWithFlags, 11040, graph_instantiate) &&
         FETCH(cuGraphLaunch, 10000, graph_launch) &&
         FETCH(cuGraphExecDestroy, 10000, graph_exec_destroy) &&
         FETCH(cuGraphDestroy, 10000, graph_destroy);
#undef FETCH
#undef FETCH_PTSZ
}

Runtime* LoadRuntime() {
  auto* runtime = new Runtime;  // leaked on purpose: usable while the process exits
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (libcuda == nullptr || !FetchDriverApi(libcuda, runtime->cu)) {
    runtime->init_error = cudaErrorInsufficientDriver;
    return runtime;
  }
  runtime->driver_loaded = true;
  CUresult result = runtime->cu.init(0);
  if (result == CUDA_SUCCESS) result = runtime->cu.device_get_count(&runtime->device_count);
  runtime->init_error = ToRuntimeError(result);
  runtime->primary_contexts.resize(runtime->device_count, nullptr);
  return runtime;
}

Runtime& TheRuntime() {
  static Runtime* runtime = LoadRuntime();
  return *runtime;
}

thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;
thread_local CUcontext current_context = nullptr;

cudaError_t Record(cudaError_t error) {
  if (error != cudaSuccess) last_error = error;
  return error;
}

// Makes the primary context of this thread's device current, retaining it on first use.
cudaError_t MakeContextCurrent(Runtime& rt) {
  std::lock_guard lock(rt.mutex);
  CUcontext& primary = rt.primary_contexts[current_device];
  if (primary == nullptr) {
    if (CUresult r = rt.cu.primary_ctx_retain(&primary, current_device); r != CUDA_SUCCESS) {
      return ToRuntimeError(r);
    }
  }
  if (current_context != primary) {
    if (CUresult r = rt.cu.ctx_set_current(primary); r != CUDA_SUCCESS) return ToRuntimeError(r);
    current_context = primary;
  }
  return cudaSuccess;
}

// Runs `call` against the driver once the runtime and this thread's context are ready; records
// a failure as this thread's last error, as the real runtime does.
template <typename Call>
cudaError_t WithDriver(Call call) {
  Runtime& rt = TheRuntime();
  if (rt.init_error != cudaSuccess) return Record(rt.init_error);
  if (cudaError_t e = MakeContextCurrent(rt); e != cudaSuccess) return Record(e);
  return Record(ToRuntimeError(call(rt.cu)));
}

void* AsHostPointer(CUdeviceptr p) { return reinterpret_cast<void*>(p); }
CUdeviceptr AsDevicePointer(void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// Shared by cudaMalloc-like calls: out-parameter checks and the conversion of the pointer.
template <typename Alloc>
cudaError_t AllocateDevice(void** devPtr, size_t size, Alloc alloc) {
  return WithDriver([&](const DriverApi& cu) {
    if (devPtr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (size == 0) {  // the real runtime returns a null pointer without asking the driver
      *devPtr = nullptr;
      return CUDA_SUCCESS;
    }
    CUdeviceptr p = 0;
    CUresult r = alloc(cu, &p);
    if (r == CUDA_SUCCESS) *devPtr = AsHostPointer(p);
    return r;
  });
}

}  // namespace

// ---- Device memory ----

FAKE_CUDART_EXPORT cudaError_t cudaMalloc(void** devPtr, size_t size) {
  return AllocateDevice(devPtr, size,
                        [&](const DriverApi& cu, CUdeviceptr* p) { return cu.mem_alloc(p, size); });
}

FAKE_CUDART_EXPORT cudaError_t cudaFree(void* devPtr) {
  return WithDriver([&](const DriverApi& cu) { return cu.mem_free(AsDevicePointer(devPtr)); });
}

FAKE_CUDART_EXPORT cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  return AllocateDevice(devPtr, size, [&](const DriverApi& cu, CUdeviceptr* p) {
    return cu.mem_alloc_managed(p, size, flags);
  });
}

FAKE_CUDART_EXPORT cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width,
                                               size_t height) {
  if (pitch == nullptr) return Record(cudaErrorInvalidValue);
  return AllocateDevice(devPtr, width * height, [&](const DriverApi& cu, CUdeviceptr* p) {
    return cu.mem_alloc_pitch(p, pitch, width, height, sizeof(float));
  });
}

FAKE_CUDART_EXPORT cudaError_t cudaMalloc3D(cudaPitchedPtr* pitchedDevPtr, cudaExtent extent) {
  if (pitchedDevPtr == nullptr) return Record(cudaErrorInvalidValue);
  size_t pitch = 0;
  void* p = nullptr;
  cudaError_t e = cudaMallocPitch(&p, &pitch, extent.width, extent.height * extent.depth);
  if (e == cudaSuccess) *pitchedDevPtr = {p, pitch, extent.width, extent.height};
  return e;
}

FAKE_CUDART_EXPORT cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  return WithDriver([&](const DriverApi& cu) { return cu.mem_get_info(free, total); });
}

// ---- Pinned host memory ----

FAKE_CUDART_EXPORT cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return WithDriver([&](const DriverApi& cu) { return cu.mem_alloc_host(ptr, size); });
}

FAKE_CUDART_EXPORT cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  return WithDriver([&](const DriverApi& cu) { return cu.mem_host_alloc(pHost, size, flags); });
}

FAKE_CUDART_EXPORT cudaError_t cudaFreeHost(void* ptr) {
  return WithDriver([&](const DriverApi& cu) { return cu.mem_free_host(ptr); });
}

// ---- Stream-ordered allocation and pools ----

FAKE_CUDART_EXPORT cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  return AllocateDevice(devPtr, size, [&](const DriverApi& cu, CUdeviceptr* p) {
    return cu.mem_alloc_async(p, size, hStream);
  });
}

FAKE_CUDART_EXPORT cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  return WithDriver(
      [&](const DriverApi& cu) { return cu.mem_free_async(AsDevicePointer(devPtr), hStream); });
}

FAKE_CUDART_EXPORT cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size,
                                                       cudaMemPool_t memPool, cudaStream_t stream) {
  return AllocateDevice(ptr, size, [&](const DriverApi& cu, CUdeviceptr* p) {
    return cu.mem_alloc_from_pool_async(p, size, memPool, stream);
  });
}

FAKE_CUDART_EXPORT cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size,
                                                    cudaStream_t hStream) {
  return AllocateDevice(devPtr, size, [&](const DriverApi& cu, CUdeviceptr* p) {
    return cu.mem_alloc_async_ptsz(p, size, hStream);
  });
}

FAKE_CUDART_EXPORT cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream) {
  return WithDriver([&](const DriverApi& cu) {
    return cu.mem_free_async_ptsz(AsDevicePointer(devPtr), hStream);
  });
}

FAKE_CUDART_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size,
                                                            cudaMemPool_t memPool,
                                                            cudaStream_t stream) {
  return AllocateDevice(ptr, size, [&](const DriverApi& cu, CUdeviceptr* p) {
    return cu.mem_alloc_from_pool_async_ptsz(p, size, memPool, stream);
  });
}

// cudaMemPoolProps and CUmemPoolProps share one layout, as the real runtime relies on.
static_assert(sizeof(cudaMemPoolProps) == sizeof(CUmemPoolProps));

FAKE_CUDART_EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t* memPool,
                                                 const cudaMemPoolProps* poolProps) {
  return WithDriver([&](const DriverApi& cu) {
    return cu.mem_pool_create(memPool, reinterpret_cast<const CUmemPoolProps*>(poolProps));
  });
}

FAKE_CUDART_EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) {
  return WithDriver([&](const DriverApi& cu) { return cu.mem_pool_destroy(memPool); });
}

FAKE_CUDART_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
  return WithDriver(
      [&](const DriverApi& cu) { return cu.device_get_default_mem_pool(memPool, device); });
}

// ---- Copies and sets: all memory is host memory ----

FAKE_CUDART_EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t count,
                                          cudaMemcpyKind /*kind*/) {
  memcpy(dst, src, count);
  return cudaSuccess;
}

FAKE_CUDART_EXPORT cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                               cudaMemcpyKind kind, cudaStream_t /*stream*/) {
  return cudaMemcpy(dst, src, count, kind);
}

FAKE_CUDART_EXPORT cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  memset(devPtr, value, count);
  return cudaSuccess;
}

FAKE_CUDART_EXPORT cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count,
                                               cudaStream_t /*stream*/) {
  return cudaMemset(devPtr, value, count);
}

// ---- Devices, streams, versions ----

FAKE_CUDART_EXPORT cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return Record(cudaErrorInvalidValue);
  Runtime& rt = TheRuntime();
  *count = rt.device_count;
  return Record(rt.init_error);
}

FAKE_CUDART_EXPORT cudaError_t cudaSetDevice(int device) {
  Runtime& rt = TheRuntime();
  if (rt.init_error != cudaSuccess) return Record(rt.init_error);
  if (device < 0 || device >= rt.device_count) return Record(cudaErrorInvalidDevice);
  current_device = device;
  return Record(MakeContextCurrent(rt));
}

FAKE_CUDART_EXPORT cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return Record(cudaErrorInvalidValue);
  Runtime& rt = TheRuntime();
  *device = current_device;
  return Record(rt.init_error);
}

FAKE_CUDART_EXPORT cudaError_t cudaDeviceSynchronize() {
  return WithDriver([](const DriverApi& cu) { return cu.ctx_synchronize(nullptr); });
}

FAKE_CUDART_EXPORT cudaError_t cudaDeviceReset() { return cudaSuccess; }

FAKE_CUDART_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream,
                                                         unsigned int flags) {
  return WithDriver([&](const DriverApi& cu) { return cu.stream_create(pStream, flags); });
}

FAKE_CUDART_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

FAKE_CUDART_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return WithDriver([&](const DriverApi& cu) { return cu.stream_destroy(stream); });
}

FAKE_CUDART_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return WithDriver([&](const DriverApi& cu) { return cu.stream_synchronize(stream); });
}

// ---- Stream capture and graphs ----

FAKE_CUDART_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
                                                      cudaStreamCaptureMode mode) {
  return WithDriver([&](const DriverApi& cu) {
    return cu.stream_begin_capture(stream, static_cast<CUstreamCaptureMode>(mode));
  });
}

FAKE_CUDART_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
  return WithDriver([&](const DriverApi& cu) { return cu.stream_end_capture(stream, pGraph); });
}

FAKE_CUDART_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                                     cudaStreamCaptureStatus* pCaptureStatus) {
  return WithDriver([&](const DriverApi& cu) {
    return cu.stream_is_capturing(stream, reinterpret_cast<CUstreamCaptureStatus*>(pCaptureStatus));
  });
}

FAKE_CUDART_EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  return WithDriver([&](const DriverApi& cu) {
    return cu.thread_exchange_stream_capture_mode(reinterpret_cast<CUstreamCaptureMode*>(mode));
  });
}

FAKE_CUDART_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                    unsigned long long flags) {
  return WithDriver(
      [&](const DriverApi& cu) { return cu.graph_instantiate(pGraphExec, graph, flags); });
}

FAKE_CUDART_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return WithDriver([&](const DriverApi& cu) { return cu.graph_launch(graphExec, stream); });
}

FAKE_CUDART_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  return WithDriver([&](const DriverApi& cu) { return cu.graph_exec_destroy(graphExec); });
}

FAKE_CUDART_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  return WithDriver([&](const DriverApi& cu) { return cu.graph_destroy(graph); });
}

FAKE_CUDART_EXPORT cudaError_t cudaDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return Record(cudaErrorInvalidValue);
  Runtime& rt = TheRuntime();
  *driverVersion = 0;  // no driver: 0, and still success, as documented
  return rt.driver_loaded ? Record(ToRuntimeError(rt.cu.driver_get_version(driverVersion)))
                          : cudaSuccess;
}

FAKE_CUDART_EXPORT cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (runtimeVersion == nullptr) return Record(cudaErrorInvalidValue);
  *runtimeVersion = kRuntimeVersion;
  return cudaSuccess;
}

// Driver entry points go through the same cuGetProcAddress pointer (the flag and status enums
// share their values with the driver's).
FAKE_CUDART_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(
    const char* symbol, void** funcPtr, unsigned int cudaVersion, unsigned long long flags,
    cudaDriverEntryPointQueryResult* driverStatus) {
  return WithDriver([&](const DriverApi& cu) {
    CUdriverProcAddressQueryResult status;
    CUresult r =
        cu.get_proc_address(symbol, funcPtr, static_cast<int>(cudaVersion), flags, &status);
    if (driverStatus != nullptr)
      *driverStatus = static_cast<cudaDriverEntryPointQueryResult>(status);
    return r;
  });
}

FAKE_CUDART_EXPORT cudaError_t
cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                        cudaDriverEntryPointQueryResult* driverStatus) {
  return cudaGetDriverEntryPointByVersion(symbol, funcPtr, kRuntimeVersion, flags, driverStatus);
}

// ---- Kernels: registration as nvcc-generated code does it, launches through the driver ----

namespace {

// One registered "fat binary". The fake's convention (README.md): a __fatBinC_Wrapper_t whose
// `data` is a fatbin container holding uncompressed PTX, or the PTX text itself; either is handed
// to cuModuleLoadData as it is, at the first launch of one of its kernels (as CUDA's lazy
// loading does), in the context current then.
struct FatBinary {
  void* handle;  // first: __cudaRegisterFatBinary returns its address, nvcc code stores it
  const void* image;
  CUmodule module = nullptr;
};

struct RegisteredKernel {
  FatBinary* binary;
  std::string device_name;
  CUfunction function = nullptr;
};

// Not part of Runtime: registration runs in static constructors, before anything may call the
// driver.
struct KernelRegistry {
  std::mutex mutex;
  std::vector<FatBinary*> binaries;
  std::map<const void*, RegisteredKernel> kernels;  // by host stub (`func` of cudaLaunchKernel)

  bool Live(FatBinary* binary) const {
    for (FatBinary* b : binaries) {
      if (b == binary) return true;
    }
    return false;
  }
};

KernelRegistry& Registry() {
  static auto* registry = new KernelRegistry;  // leaked: atexit handlers unregister
  return *registry;
}

FatBinary* BinaryOf(void** handle) { return reinterpret_cast<FatBinary*>(handle); }

// The CUfunction of a registered host stub, loading its module on first use; `unknown` if `func`
// is none. Needs the context current.
cudaError_t ResolveKernel(const DriverApi& cu, const void* func, cudaError_t unknown,
                          CUfunction* function) {
  KernelRegistry& registry = Registry();
  std::lock_guard lock(registry.mutex);
  auto it = registry.kernels.find(func);
  if (it == registry.kernels.end()) return unknown;
  RegisteredKernel& kernel = it->second;
  if (kernel.function == nullptr) {
    FatBinary& binary = *kernel.binary;
    if (binary.image == nullptr) return cudaErrorInvalidKernelImage;
    if (binary.module == nullptr) {
      if (CUresult r = cu.module_load_data(&binary.module, binary.image); r != CUDA_SUCCESS) {
        binary.module = nullptr;
        return ToRuntimeError(r);
      }
    }
    CUresult r =
        cu.module_get_function(&kernel.function, binary.module, kernel.device_name.c_str());
    if (r != CUDA_SUCCESS) return ToRuntimeError(r);  // not in the module: cudaErrorSymbolNotFound
  }
  *function = kernel.function;
  return cudaSuccess;
}

// Resolves `func` and runs `launch(driver, function)`, recording a failure as the last error. The
// real runtime (13.0) leaves the launch configuration to the driver (a 2048-thread block is
// cudaErrorInvalidValue, not cudaErrorInvalidConfiguration) and answers a host function it does
// not know with cudaErrorInvalidResourceHandle, as it would a bad cudaKernel_t.
template <typename Launch>
cudaError_t LaunchRegistered(const void* func, cudaError_t unknown, Launch launch) {
  Runtime& rt = TheRuntime();
  if (rt.init_error != cudaSuccess) return Record(rt.init_error);
  if (cudaError_t e = MakeContextCurrent(rt); e != cudaSuccess) return Record(e);
  CUfunction function = nullptr;
  if (cudaError_t e = ResolveKernel(rt.cu, func, unknown, &function); e != cudaSuccess) {
    return Record(e);
  }
  return Record(ToRuntimeError(launch(rt.cu, function)));
}

template <typename Launch>
cudaError_t LaunchKernel(const void* func, dim3 grid, dim3 block, void** args,
                         size_t shared_memory_bytes, cudaStream_t stream, Launch launch) {
  if (shared_memory_bytes > UINT_MAX) return Record(cudaErrorInvalidValue);
  return LaunchRegistered(
      func, cudaErrorInvalidResourceHandle, [&](const DriverApi& cu, CUfunction function) {
        return launch(cu, function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                      static_cast<unsigned>(shared_memory_bytes), stream, args);
      });
}

// cudaLaunchConfig_t becomes the driver's CUlaunchConfig; the attribute structs share a layout.
static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute));

template <typename Pfn>
cudaError_t LaunchKernelEx(const cudaLaunchConfig_t* config, const void* func, void** args,
                           Pfn DriverApi::*launch) {
  // (The real runtime crashes on a null config.)
  if (config == nullptr || config->dynamicSmemBytes > UINT_MAX) {
    return Record(cudaErrorInvalidValue);
  }
  CUlaunchConfig driver_config{};
  driver_config.gridDimX = config->gridDim.x;
  driver_config.gridDimY = config->gridDim.y;
  driver_config.gridDimZ = config->gridDim.z;
  driver_config.blockDimX = config->blockDim.x;
  driver_config.blockDimY = config->blockDim.y;
  driver_config.blockDimZ = config->blockDim.z;
  driver_config.sharedMemBytes = static_cast<unsigned>(config->dynamicSmemBytes);
  driver_config.hStream = config->stream;
  driver_config.attrs = reinterpret_cast<CUlaunchAttribute*>(config->attrs);
  driver_config.numAttrs = config->numAttrs;
  return LaunchRegistered(func, cudaErrorInvalidResourceHandle,
                          [&](const DriverApi& cu, CUfunction function) {
                            return (cu.*launch)(&driver_config, function, args, nullptr);
                          });
}

}  // namespace

FAKE_CUDART_EXPORT void** __cudaRegisterFatBinary(void* fatCubin) {
  const auto* wrapper = static_cast<const __fatBinC_Wrapper_t*>(fatCubin);
  auto* binary = new FatBinary{nullptr, nullptr};
  if (wrapper != nullptr && wrapper->magic == FATBINC_MAGIC &&
      wrapper->version == FATBINC_VERSION) {
    binary->image = wrapper->data;  // else its kernels fail with cudaErrorInvalidKernelImage
  }
  KernelRegistry& registry = Registry();
  std::lock_guard lock(registry.mutex);
  registry.binaries.push_back(binary);
  return &binary->handle;
}

FAKE_CUDART_EXPORT void __cudaRegisterFatBinaryEnd(void** /*fatCubinHandle*/) {}

FAKE_CUDART_EXPORT void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun,
                                               char* deviceFun, const char* deviceName,
                                               int /*thread_limit*/, uint3* /*tid*/, uint3* /*bid*/,
                                               dim3* /*bDim*/, dim3* /*gDim*/, int* /*wSize*/) {
  const char* name = deviceName != nullptr ? deviceName : deviceFun;
  KernelRegistry& registry = Registry();
  std::lock_guard lock(registry.mutex);
  FatBinary* binary = BinaryOf(fatCubinHandle);
  if (hostFun == nullptr || name == nullptr || !registry.Live(binary)) return;
  registry.kernels[hostFun] = {binary, name};
}

// Runs from the atexit handler nvcc code registers: forgets the kernels, unloads the module.
FAKE_CUDART_EXPORT void __cudaUnregisterFatBinary(void** fatCubinHandle) {
  FatBinary* binary = BinaryOf(fatCubinHandle);
  CUmodule module = nullptr;
  {
    KernelRegistry& registry = Registry();
    std::lock_guard lock(registry.mutex);
    if (!registry.Live(binary)) return;
    std::erase(registry.binaries, binary);
    std::erase_if(registry.kernels, [&](const auto& k) { return k.second.binary == binary; });
    module = binary->module;
    delete binary;
  }
  if (module != nullptr) TheRuntime().cu.module_unload(module);
}

FAKE_CUDART_EXPORT cudaError_t cudaGetFuncBySymbol(cudaFunction_t* functionPtr,
                                                   const void* symbolPtr) {
  if (functionPtr == nullptr) return Record(cudaErrorInvalidValue);
  return LaunchRegistered(symbolPtr, cudaErrorInvalidDeviceFunction,
                          [&](const DriverApi&, CUfunction function) {
                            *functionPtr = function;
                            return CUDA_SUCCESS;
                          });
}

FAKE_CUDART_EXPORT cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim,
                                                void** args, size_t sharedMem,
                                                cudaStream_t stream) {
  return LaunchKernel(
      func, gridDim, blockDim, args, sharedMem, stream,
      [](const DriverApi& cu, auto... a) { return cu.launch_kernel(a..., nullptr); });
}

FAKE_CUDART_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim,
                                                     void** args, size_t sharedMem,
                                                     cudaStream_t stream) {
  return LaunchKernel(
      func, gridDim, blockDim, args, sharedMem, stream,
      [](const DriverApi& cu, auto... a) { return cu.launch_kernel_ptsz(a..., nullptr); });
}

FAKE_CUDART_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 gridDim,
                                                           dim3 blockDim, void** args,
                                                           size_t sharedMem, cudaStream_t stream) {
  return LaunchKernel(
      func, gridDim, blockDim, args, sharedMem, stream,
      [](const DriverApi& cu, auto... a) { return cu.launch_cooperative_kernel(a...); });
}

FAKE_CUDART_EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 gridDim,
                                                                dim3 blockDim, void** args,
                                                                size_t sharedMem,
                                                                cudaStream_t stream) {
  return LaunchKernel(
      func, gridDim, blockDim, args, sharedMem, stream,
      [](const DriverApi& cu, auto... a) { return cu.launch_cooperative_kernel_ptsz(a...); });
}

FAKE_CUDART_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config,
                                                   const void* func, void** args) {
  return LaunchKernelEx(config, func, args, &DriverApi::launch_kernel_ex);
}

FAKE_CUDART_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config,
                                                        const void* func, void** args) {
  return LaunchKernelEx(config, func, args, &DriverApi::launch_kernel_ex_ptsz);
}

// ---- Errors ----

FAKE_CUDART_EXPORT cudaError_t cudaGetLastError() {
  cudaError_t error = last_error;
  last_error = cudaSuccess;
  return error;
}

FAKE_CUDART_EXPORT cudaError_t cudaPeekAtLastError() { return last_error; }

namespace {

struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};
#define FAKE_CUDART_ERROR(code, text) \
  { code, #code, text }
constexpr ErrorText kErrors[] = {
    FAKE_CUDART_ERROR(cudaSuccess, "no error"),
    FAKE_CUDART_ERROR(cudaErrorInvalidValue, "invalid argument"),
    FAKE_CUDART_ERROR(cudaErrorMemoryAllocation, "out of memory"),
    FAKE_CUDART_ERROR(cudaErrorInitializationError, "initialization error"),
    FAKE_CUDART_ERROR(cudaErrorInsufficientDriver,
                      "CUDA driver version is insufficient for CUDA runtime version"),
    FAKE_CUDART_ERROR(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    FAKE_CUDART_ERROR(cudaErrorInvalidDevice, "invalid device ordinal"),
    FAKE_CUDART_ERROR(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    FAKE_CUDART_ERROR(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    FAKE_CUDART_ERROR(cudaErrorInvalidDeviceFunction, "invalid device function"),
    FAKE_CUDART_ERROR(cudaErrorInvalidKernelImage, "device kernel image is invalid"),
    FAKE_CUDART_ERROR(cudaErrorNoKernelImageForDevice,
                      "no kernel image is available for execution on the device"),
    FAKE_CUDART_ERROR(cudaErrorInvalidPtx, "a PTX JIT compilation failed"),
    FAKE_CUDART_ERROR(cudaErrorSymbolNotFound, "named symbol not found"),
    FAKE_CUDART_ERROR(cudaErrorCooperativeLaunchTooLarge, "too many blocks in cooperative launch"),
    FAKE_CUDART_ERROR(cudaErrorUnknown, "unknown error"),
};
#undef FAKE_CUDART_ERROR

const ErrorText* FindError(cudaError_t error) {
  for (const ErrorText& e : kErrors) {
    if (e.code == error) return &e;
  }
  return nullptr;
}

}  // namespace

FAKE_CUDART_EXPORT const char* cudaGetErrorString(cudaError_t error) {
  const ErrorText* e = FindError(error);
  return e != nullptr ? e->text : "unrecognized error code";
}

FAKE_CUDART_EXPORT const char* cudaGetErrorName(cudaError_t error) {
  const ErrorText* e = FindError(error);
  return e != nullptr ? e->name : "unrecognized error code";
}
