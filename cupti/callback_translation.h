// CUPTI driver-API callback data → the recorder's LaunchRecord / MemoryRecord. Pure functions of
// the callback id and the structs CUPTI hands over (CUpti_CallbackData and the cu*_params of
// generated_cuda_meta.h): no libcupti, no recorder state, so tests feed them synthetic data.
// What they leave to the caller: sequence numbers, the device of the call's context, stacks and
// free/total memory of a failed allocation (cupti/callbacks.cc).
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>

#include "core/recorder.h"

namespace gpumem::cupti {

enum class CallbackClass : uint8_t { kIgnored, kLaunch, kAllocation, kFree };

struct CallbackInfo {
  CallbackClass kind = CallbackClass::kIgnored;
  proto::LaunchApi launch_api = proto::LaunchApi::kUnknown;
  proto::Api api = proto::Api::kUnknown;
  proto::MemoryKind memory_kind = proto::MemoryKind::kUnknown;
};

// What gpumem does with a driver callback id; kIgnored for every id not listed below.
CallbackInfo Classify(CUpti_CallbackId cbid);

// The driver callbacks the subscriber enables: the launches and every memory API that
// interposition records (interpose/driver_hooks.cc), each with its _ptsz variant where it has one.
inline constexpr CUpti_CallbackId kDriverCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
    CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle,
    CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle,
};
// The launch APIs among them: enabled only with StartConfig::launches.
inline constexpr bool IsLaunchCallback(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
      return true;
    default:
      return false;
  }
}
inline constexpr size_t kDriverCallbackCount =
    sizeof(kDriverCallbacks) / sizeof(kDriverCallbacks[0]);

// MemoryRecord::device of an allocation whose device is the calling context's (asked of the
// driver by the caller); host memory, reservations and mappings carry -1 as in interposition.
inline constexpr int32_t kDeviceOfContext = -2;

// The call's CUresult (CUPTI_API_EXIT only; 0 when CUPTI gave none).
int32_t CallResult(const CUpti_CallbackData& data);

// Whether a launch is recorded at all (at API_ENTER, where its sequence number is taken): not a
// cuLaunchKernelEx without config, which interposition does not record either.
bool LaunchIsRecorded(CUpti_CallbackId cbid, const CUpti_CallbackData& data);

// A launch at CUPTI_API_EXIT: api, function, name hint (CUPTI's symbolName, valid during the
// callback only), grid, block, shared memory, stream, parameters, graph, correlation id, result,
// from_cupti. Leaves seq, device and stack_id. False: not a launch, or not recorded.
bool TranslateLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData& data, LaunchRecord* record);

// An allocation at CUPTI_API_EXIT: api, kind, action (ALLOC or ALLOC_FAILED), result, size,
// address, stream, pool, handle, offset, pitch, device (or kDeviceOfContext). Leaves seq, stack_id
// and free/total bytes. False: not an allocation.
bool TranslateAllocation(CUpti_CallbackId cbid, const CUpti_CallbackData& data,
                         MemoryRecord* record);

// Whether a free is recorded at all (at API_ENTER, where its sequence number is taken): not for a
// null pointer, as in interposition.
bool FreeIsRecorded(CUpti_CallbackId cbid, const CUpti_CallbackData& data);

// A free at CUPTI_API_EXIT: api, kind, action (FREE or FREE_FAILED), result, address, size, handle,
// stream. Leaves seq and stack_id. False: not a free, or not recorded (FreeIsRecorded).
bool TranslateFree(CUpti_CallbackId cbid, const CUpti_CallbackData& data, MemoryRecord* record);

// A failed allocation of device memory also records the device's free and total memory.
bool WantsMemoryInfo(const MemoryRecord& record);

}  // namespace gpumem::cupti
