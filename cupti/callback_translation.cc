#include "cupti/callback_translation.h"

#include <type_traits>

namespace gpumem::cupti {
namespace {

using proto::Api;
using proto::LaunchApi;
using Kind = proto::MemoryKind;

CallbackInfo Launch(LaunchApi api) {
  CallbackInfo info;
  info.kind = CallbackClass::kLaunch;
  info.launch_api = api;
  return info;
}

CallbackInfo Memory(CallbackClass kind, Api api, Kind memory_kind) {
  CallbackInfo info;
  info.kind = kind;
  info.api = api;
  info.memory_kind = memory_kind;
  return info;
}

template <typename Params>
const Params& ParamsOf(const CUpti_CallbackData& data) {
  return *static_cast<const Params*>(data.functionParams);
}

uint64_t Handle(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer); }

// The launch fields shared by cuLaunchKernel and cuLaunchCooperativeKernel (and their _ptsz).
template <typename Params>
void FillKernelLaunch(const Params& params, LaunchRecord* record) {
  record->function = params.f;
  record->grid[0] = params.gridDimX;
  record->grid[1] = params.gridDimY;
  record->grid[2] = params.gridDimZ;
  record->block[0] = params.blockDimX;
  record->block[1] = params.blockDimY;
  record->block[2] = params.blockDimZ;
  record->shared_memory_bytes = params.sharedMemBytes;
  record->stream = Handle(params.hStream);
  record->kernel_params = params.kernelParams;
}

bool FillLaunchEx(const CUlaunchConfig* config, CUfunction function, void** kernel_params,
                  void** extra, LaunchRecord* record) {
  if (config == nullptr) return false;
  record->function = function;
  record->grid[0] = config->gridDimX;
  record->grid[1] = config->gridDimY;
  record->grid[2] = config->gridDimZ;
  record->block[0] = config->blockDimX;
  record->block[1] = config->blockDimY;
  record->block[2] = config->blockDimZ;
  record->shared_memory_bytes = config->sharedMemBytes;
  record->stream = Handle(config->hStream);
  record->kernel_params = kernel_params;
  record->extra = extra;
  return true;
}

// *pointer after a successful call; 0 when the call failed or the caller passed no pointer.
template <typename T>
uint64_t Out(const T* pointer, int32_t result) {
  if (result != 0 || pointer == nullptr) return 0;
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<uintptr_t>(*pointer);
  } else {
    return static_cast<uint64_t>(*pointer);
  }
}

// An allocation's size and address from cuMemAlloc's parameters and its kin (bytesize, dptr or
// pp); the stream and pool where the call has them.
template <typename Params>
void FillAllocation(const Params& params, int32_t result, MemoryRecord* record) {
  record->size = params.bytesize;
  if constexpr (requires { params.pp; }) {
    record->address = Out(params.pp, result);
    record->device = -1;  // pinned host memory
  } else {
    record->address = Out(params.dptr, result);
  }
  if constexpr (requires { params.hStream; }) record->stream = Handle(params.hStream);
  if constexpr (requires { params.pool; }) record->pool = Handle(params.pool);
}

// The allocations of device, managed, pinned host and pool memory; false for another callback.
bool TranslateMemoryAllocation(CUpti_CallbackId cbid, const CUpti_CallbackData& data,
                               int32_t result, MemoryRecord* record) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
      FillAllocation(ParamsOf<cuMemAlloc_v2_params>(data), result, record);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      const auto& params = ParamsOf<cuMemAllocPitch_v2_params>(data);
      record->size = params.WidthInBytes * params.Height;
      record->address = Out(params.dptr, result);
      record->pitch = Out(params.pPitch, result);
      if (record->pitch != 0) record->size = record->pitch * params.Height;
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
      FillAllocation(ParamsOf<cuMemAllocManaged_params>(data), result, record);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2:
      FillAllocation(ParamsOf<cuMemAllocHost_v2_params>(data), result, record);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc:
      FillAllocation(ParamsOf<cuMemHostAlloc_params>(data), result, record);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
      FillAllocation(ParamsOf<cuMemAllocAsync_params>(data), result, record);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
      FillAllocation(ParamsOf<cuMemAllocAsync_ptsz_params>(data), result, record);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
      FillAllocation(ParamsOf<cuMemAllocFromPoolAsync_params>(data), result, record);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
      FillAllocation(ParamsOf<cuMemAllocFromPoolAsync_ptsz_params>(data), result, record);
      return true;
    default:
      return false;
  }
}

// The virtual memory management calls that make an address range, a physical allocation, a
// mapping or an imported handle; false for another callback.
bool TranslateVmmAllocation(CUpti_CallbackId cbid, const CUpti_CallbackData& data, int32_t result,
                            MemoryRecord* record) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle:
      // As interposition: a failed import made no handle and is not recorded.
      if (result != 0) return false;
      record->handle = Out(ParamsOf<cuMemImportFromShareableHandle_params>(data).handle, result);
      record->device = -1;  // the exporter's device
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      const auto& params = ParamsOf<cuMemAddressReserve_params>(data);
      record->size = params.size;
      record->address = Out(params.ptr, result);
      record->device = -1;  // address space is not any one device's
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      const auto& params = ParamsOf<cuMemCreate_params>(data);
      record->size = params.size;
      record->handle = Out(params.handle, result);
      if (params.prop != nullptr && params.prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        record->device = params.prop->location.id;
      }
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      const auto& params = ParamsOf<cuMemMap_params>(data);
      record->size = params.size;
      record->address = result == 0 ? params.ptr : 0;
      record->handle = params.handle;
      record->offset = params.offset;
      record->device = -1;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

CallbackInfo Classify(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      return Launch(LaunchApi::kCuLaunchKernel);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return Launch(LaunchApi::kCuLaunchKernelEx);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return Launch(LaunchApi::kCuLaunchCooperativeKernel);
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
      return Launch(LaunchApi::kCuGraphLaunch);
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
      return Memory(CallbackClass::kAllocation, Api::kCuMemAlloc, Kind::kDevice);
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2:
      return Memory(CallbackClass::kAllocation, Api::kCuMemAllocPitch, Kind::kDevice);
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      return Memory(CallbackClass::kFree, Api::kCuMemFree, Kind::kUnknown);
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
      return Memory(CallbackClass::kAllocation, Api::kCuMemAllocManaged, Kind::kManaged);
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2:
      return Memory(CallbackClass::kAllocation, Api::kCuMemAllocHost, Kind::kPinnedHost);
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc:
      return Memory(CallbackClass::kAllocation, Api::kCuMemHostAlloc, Kind::kPinnedHost);
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      return Memory(CallbackClass::kFree, Api::kCuMemFreeHost, Kind::kPinnedHost);
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
      return Memory(CallbackClass::kAllocation, Api::kCuMemAllocAsync, Kind::kPool);
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
      return Memory(CallbackClass::kFree, Api::kCuMemFreeAsync, Kind::kPool);
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
      return Memory(CallbackClass::kAllocation, Api::kCuMemAllocFromPoolAsync, Kind::kPool);
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve:
      return Memory(CallbackClass::kAllocation, Api::kCuMemAddressReserve, Kind::kVmmReservation);
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree:
      return Memory(CallbackClass::kFree, Api::kCuMemAddressFree, Kind::kVmmReservation);
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate:
      return Memory(CallbackClass::kAllocation, Api::kCuMemCreate, Kind::kVmmPhysical);
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
      return Memory(CallbackClass::kFree, Api::kCuMemRelease, Kind::kVmmPhysical);
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap:
      return Memory(CallbackClass::kAllocation, Api::kCuMemMap, Kind::kVmmMapping);
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap:
      return Memory(CallbackClass::kFree, Api::kCuMemUnmap, Kind::kVmmMapping);
    // A retain is recorded as a free is (sequence number before the call): it is taken to free.
    case CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle:
      return Memory(CallbackClass::kFree, Api::kCuMemRetainAllocationHandle, Kind::kVmmPhysical);
    case CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle:
      return Memory(CallbackClass::kAllocation, Api::kCuMemImportFromShareableHandle,
                    Kind::kVmmImported);
    default:
      return CallbackInfo{};
  }
}

int32_t CallResult(const CUpti_CallbackData& data) {
  if (data.functionReturnValue == nullptr) return 0;
  return static_cast<int32_t>(*static_cast<const CUresult*>(data.functionReturnValue));
}

bool LaunchIsRecorded(CUpti_CallbackId cbid, const CUpti_CallbackData& data) {
  if (Classify(cbid).kind != CallbackClass::kLaunch || data.functionParams == nullptr) return false;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      return ParamsOf<cuLaunchKernelEx_params>(data).config != nullptr;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return ParamsOf<cuLaunchKernelEx_ptsz_params>(data).config != nullptr;
    default:
      return true;
  }
}

bool TranslateLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData& data, LaunchRecord* record) {
  CallbackInfo info = Classify(cbid);
  if (info.kind != CallbackClass::kLaunch || data.functionParams == nullptr) return false;
  *record = LaunchRecord{};
  record->api = info.launch_api;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
      const auto& params = ParamsOf<cuLaunchKernel_params>(data);
      FillKernelLaunch(params, record);
      record->extra = params.extra;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      const auto& params = ParamsOf<cuLaunchKernel_ptsz_params>(data);
      FillKernelLaunch(params, record);
      record->extra = params.extra;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
      const auto& params = ParamsOf<cuLaunchKernelEx_params>(data);
      if (!FillLaunchEx(params.config, params.f, params.kernelParams, params.extra, record)) {
        return false;
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const auto& params = ParamsOf<cuLaunchKernelEx_ptsz_params>(data);
      if (!FillLaunchEx(params.config, params.f, params.kernelParams, params.extra, record)) {
        return false;
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      FillKernelLaunch(ParamsOf<cuLaunchCooperativeKernel_params>(data), record);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      FillKernelLaunch(ParamsOf<cuLaunchCooperativeKernel_ptsz_params>(data), record);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch: {
      const auto& params = ParamsOf<cuGraphLaunch_params>(data);
      record->graph = Handle(params.hGraph);
      record->stream = Handle(params.hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: {
      const auto& params = ParamsOf<cuGraphLaunch_ptsz_params>(data);
      record->graph = Handle(params.hGraphExec);
      record->stream = Handle(params.hStream);
      break;
    }
    default:
      return false;
  }
  // A graph launch runs many kernels: CUPTI's symbolName names none of them.
  if (record->function != nullptr) record->name_hint = data.symbolName;
  record->correlation_id = data.correlationId;
  record->result = CallResult(data);
  record->from_cupti = true;
  return true;
}

bool TranslateAllocation(CUpti_CallbackId cbid, const CUpti_CallbackData& data,
                         MemoryRecord* record) {
  CallbackInfo info = Classify(cbid);
  if (info.kind != CallbackClass::kAllocation || data.functionParams == nullptr) return false;
  *record = MemoryRecord{};
  record->api = info.api;
  record->kind = info.memory_kind;
  record->result = CallResult(data);
  record->action = record->result == 0 ? proto::Action::kAlloc : proto::Action::kAllocFailed;
  record->device = kDeviceOfContext;
  return TranslateMemoryAllocation(cbid, data, record->result, record) ||
         TranslateVmmAllocation(cbid, data, record->result, record);
}

bool FreeIsRecorded(CUpti_CallbackId cbid, const CUpti_CallbackData& data) {
  if (Classify(cbid).kind != CallbackClass::kFree || data.functionParams == nullptr) return false;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      return ParamsOf<cuMemFree_v2_params>(data).dptr != 0;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      return ParamsOf<cuMemFreeHost_params>(data).p != nullptr;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
      return ParamsOf<cuMemFreeAsync_params>(data).dptr != 0;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
      return ParamsOf<cuMemFreeAsync_ptsz_params>(data).dptr != 0;
    default:
      return true;  // the VMM calls are recorded whatever their arguments
  }
}

bool TranslateFree(CUpti_CallbackId cbid, const CUpti_CallbackData& data, MemoryRecord* record) {
  if (!FreeIsRecorded(cbid, data)) return false;
  CallbackInfo info = Classify(cbid);
  *record = MemoryRecord{};
  record->api = info.api;
  record->kind = info.memory_kind;
  record->result = CallResult(data);
  record->action = record->result == 0 ? proto::Action::kFree : proto::Action::kFreeFailed;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      record->address = ParamsOf<cuMemFree_v2_params>(data).dptr;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      record->address = Handle(ParamsOf<cuMemFreeHost_params>(data).p);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync: {
      const auto& params = ParamsOf<cuMemFreeAsync_params>(data);
      record->address = params.dptr;
      record->stream = Handle(params.hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      const auto& params = ParamsOf<cuMemFreeAsync_ptsz_params>(data);
      record->address = params.dptr;
      record->stream = Handle(params.hStream);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
      const auto& params = ParamsOf<cuMemAddressFree_params>(data);
      record->address = params.ptr;
      record->size = params.size;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
      record->handle = ParamsOf<cuMemRelease_params>(data).handle;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      const auto& params = ParamsOf<cuMemUnmap_params>(data);
      record->address = params.ptr;
      record->size = params.size;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle: {
      const auto& params = ParamsOf<cuMemRetainAllocationHandle_params>(data);
      record->action = proto::Action::kRetain;  // whatever the result, as interposition
      record->address = Handle(params.addr);
      record->handle = Out(params.handle, record->result);
      break;
    }
    default:
      return false;
  }
  return true;
}

bool WantsMemoryInfo(const MemoryRecord& record) {
  return record.action == proto::Action::kAllocFailed &&
         record.kind != proto::MemoryKind::kPinnedHost &&
         record.kind != proto::MemoryKind::kVmmReservation;
}

}  // namespace gpumem::cupti
