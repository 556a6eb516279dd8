#include "report/format/names.h"

#include <cxxabi.h>

#include <cstdlib>

namespace gpumem::report {

std::string ApiName(Api api) {
  switch (api) {
    case API_UNKNOWN:
      return "unknown";
    case CUDA_MALLOC:
      return "cudaMalloc";
    case CUDA_FREE:
      return "cudaFree";
    case CUDA_MALLOC_ASYNC:
      return "cudaMallocAsync";
    case CUDA_FREE_ASYNC:
      return "cudaFreeAsync";
    case CUDA_MALLOC_FROM_POOL_ASYNC:
      return "cudaMallocFromPoolAsync";
    case CUDA_MALLOC_MANAGED:
      return "cudaMallocManaged";
    case CUDA_MALLOC_PITCH:
      return "cudaMallocPitch";
    case CUDA_MALLOC_3D:
      return "cudaMalloc3D";
    case CUDA_MALLOC_HOST:
      return "cudaMallocHost";
    case CUDA_HOST_ALLOC:
      return "cudaHostAlloc";
    case CUDA_FREE_HOST:
      return "cudaFreeHost";
    case CU_MEM_ALLOC:
      return "cuMemAlloc";
    case CU_MEM_ALLOC_PITCH:
      return "cuMemAllocPitch";
    case CU_MEM_FREE:
      return "cuMemFree";
    case CU_MEM_ALLOC_MANAGED:
      return "cuMemAllocManaged";
    case CU_MEM_ALLOC_ASYNC:
      return "cuMemAllocAsync";
    case CU_MEM_FREE_ASYNC:
      return "cuMemFreeAsync";
    case CU_MEM_ALLOC_FROM_POOL_ASYNC:
      return "cuMemAllocFromPoolAsync";
    case CU_MEM_ADDRESS_RESERVE:
      return "cuMemAddressReserve";
    case CU_MEM_ADDRESS_FREE:
      return "cuMemAddressFree";
    case CU_MEM_CREATE:
      return "cuMemCreate";
    case CU_MEM_RELEASE:
      return "cuMemRelease";
    case CU_MEM_MAP:
      return "cuMemMap";
    case CU_MEM_UNMAP:
      return "cuMemUnmap";
    case CU_MEM_HOST_ALLOC:
      return "cuMemHostAlloc";
    case CU_MEM_FREE_HOST:
      return "cuMemFreeHost";
    case CU_MEM_ALLOC_HOST:
      return "cuMemAllocHost";
    case CU_MEM_RETAIN_ALLOCATION_HANDLE:
      return "cuMemRetainAllocationHandle";
    case CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE:
      return "cuMemImportFromShareableHandle";
    // No `default`: -Wswitch then names any value added to trace.proto but not here.
    case Api_INT_MIN_SENTINEL_DO_NOT_USE_:
    case Api_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  // A value from a newer schema.
  return "api" + std::to_string(static_cast<int>(api));
}

std::string ActionName(Action action) {
  switch (action) {
    case ACTION_UNKNOWN:
      return "unknown";
    case ALLOC:
      return "alloc";
    case FREE:
      return "free";
    case ALLOC_FAILED:
      return "alloc_failed";
    case FREE_FAILED:
      return "free_failed";
    case RETAIN:
      return "retain";
    case Action_INT_MIN_SENTINEL_DO_NOT_USE_:
    case Action_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return "action" + std::to_string(static_cast<int>(action));
}

std::string LaunchApiName(LaunchApi api) {
  switch (api) {
    case CU_LAUNCH_KERNEL:
      return "cuLaunchKernel";
    case CU_LAUNCH_KERNEL_EX:
      return "cuLaunchKernelEx";
    case CU_LAUNCH_COOPERATIVE_KERNEL:
      return "cuLaunchCooperativeKernel";
    case CU_GRAPH_LAUNCH:
      return "cuGraphLaunch";
    case LAUNCH_API_UNKNOWN:
    case LaunchApi_INT_MIN_SENTINEL_DO_NOT_USE_:
    case LaunchApi_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return "launch" + std::to_string(static_cast<int>(api));
}

std::string RecordingStopName(RecordingStop reason) {
  switch (reason) {
    case STOP_NONE:
      return "none";
    case DISK_FULL:
      return "disk_full";
    case SIZE_LIMIT:
      return "size_limit";
    case DESCRIPTOR_LOST:
      return "descriptor_lost";
    case WRITE_FAILED:
      return "write_failed";
    case ADDRESS_SPACE_FULL:
      return "address_space_full";
    case RecordingStop_INT_MIN_SENTINEL_DO_NOT_USE_:
    case RecordingStop_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return "stop" + std::to_string(static_cast<int>(reason));
}

std::string CuptiStateName(CuptiState state) {
  switch (state) {
    case CUPTI_ACTIVE:
      return "active";
    case CUPTI_DISABLED:
      return "disabled";
    case CUPTI_NOT_FOUND:
      return "not_found";
    case CUPTI_OTHER_SUBSCRIBER:
      return "other_subscriber";
    case CUPTI_FAILED:
      return "failed";
    case CUPTI_UNKNOWN:
    case CuptiState_INT_MIN_SENTINEL_DO_NOT_USE_:
    case CuptiState_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return "unknown";
}

std::string Demangle(const char* name) {
  if (name == nullptr) return "";
  if (name[0] != '_' || name[1] != 'Z') return name;  // C, or already demangled
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (demangled == nullptr) return name;
  std::string result = demangled;
  std::free(demangled);
  return result;
}

std::string KindName(MemoryKind kind) {
  switch (kind) {
    case KIND_UNKNOWN:
      return "unknown";
    case DEVICE:
      return "device";
    case MANAGED:
      return "managed";
    case PINNED_HOST:
      return "pinned_host";
    case VMM_RESERVATION:
      return "vmm_reservation";
    case VMM_PHYSICAL:
      return "vmm_physical";
    case VMM_MAPPING:
      return "vmm_mapping";
    case POOL:
      return "pool";
    case VMM_IMPORTED:
      return "vmm_imported";
    case MemoryKind_INT_MIN_SENTINEL_DO_NOT_USE_:
    case MemoryKind_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return "kind" + std::to_string(static_cast<int>(kind));
}

std::string CaptureModeName(CaptureMode mode) {
  switch (mode) {
    case CAPTURE_MODE_UNKNOWN:
      return "unknown";
    case CAPTURE_MODE_GLOBAL:
      return "global";
    case CAPTURE_MODE_THREAD_LOCAL:
      return "thread_local";
    case CAPTURE_MODE_RELAXED:
      return "relaxed";
    case CaptureMode_INT_MIN_SENTINEL_DO_NOT_USE_:
    case CaptureMode_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return "mode" + std::to_string(static_cast<int>(mode));
}

std::string OomSourceName(OomSource source) {
  switch (source) {
    case OOM_SOURCE_UNKNOWN:
      return "unknown";
    case OOM_OBSERVER:
      return "observer";
    case OOM_EXCEPTION:
      return "exception";
    case OomSource_INT_MIN_SENTINEL_DO_NOT_USE_:
    case OomSource_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return "source" + std::to_string(static_cast<int>(source));
}

namespace {

// The results an allocation call returns, as CUresult and cudaError_t name them (same numbers).
struct ResultNames {
  int32_t code;
  const char* driver;
  const char* runtime;
};
constexpr ResultNames kResultNames[] = {
    {1, "CUDA_ERROR_INVALID_VALUE", "cudaErrorInvalidValue"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "cudaErrorInitializationError"},
    {4, "CUDA_ERROR_DEINITIALIZED", "cudaErrorCudartUnloading"},
    {100, "CUDA_ERROR_NO_DEVICE", "cudaErrorNoDevice"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "cudaErrorInvalidDevice"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "cudaErrorDeviceUninitialized"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "cudaErrorIllegalAddress"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "cudaErrorNotPermitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "cudaErrorNotSupported"},
    {999, "CUDA_ERROR_UNKNOWN", "cudaErrorUnknown"},
};

}  // namespace

std::string ResultName(Api api, int32_t result) {
  const bool driver = api >= CU_MEM_ALLOC;  // the driver's calls are numbered from 32
  for (const ResultNames& names : kResultNames) {
    if (names.code == result) return driver ? names.driver : names.runtime;
  }
  return "";
}

}  // namespace gpumem::report
