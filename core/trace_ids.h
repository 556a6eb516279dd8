// Field numbers and enum values of core/trace.proto, for the hand-written encoder. The recorder
// cannot include the generated header (no protobuf in the target process), so these mirror it;
// tests/core/wire_format_test.cc checks every value against the generated descriptors.
#pragma once

#include <cstdint>

namespace gpumem::proto {

namespace trace_field {
inline constexpr uint32_t kPacket = 1;
}

namespace packet_field {
inline constexpr uint32_t kHeader = 1;
inline constexpr uint32_t kDevice = 2;
inline constexpr uint32_t kModule = 3;
inline constexpr uint32_t kModuleUnload = 4;
inline constexpr uint32_t kThread = 5;
inline constexpr uint32_t kStack = 6;
inline constexpr uint32_t kMemory = 7;
inline constexpr uint32_t kFooter = 8;
inline constexpr uint32_t kKernelName = 10;
inline constexpr uint32_t kLaunch = 11;
inline constexpr uint32_t kCupti = 12;
inline constexpr uint32_t kKernelTiming = 13;
inline constexpr uint32_t kPoolUsage = 14;
inline constexpr uint32_t kPythonCode = 16;
inline constexpr uint32_t kPythonStatus = 17;
inline constexpr uint32_t kPythonHolder = 18;
inline constexpr uint32_t kStreamCapture = 21;
}  // namespace packet_field

namespace header_field {
enum class LaunchApi : uint32_t {
  kUnknown = 0,
  kCuLaunchKernel = 1,
  kCuLaunchKernelEx = 2,
  kCuLaunchCooperativeKernel = 3,
  kCuGraphLaunch = 4,
};

enum class CuptiState : uint32_t {
  kUnknown = 0,
  kActive = 1,
  kDisabled = 2,
  kNotFound = 3,
  kOtherSubscriber = 4,
  kFailed = 5,
};

inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint32_t kHost = 2;
inline constexpr uint32_t kPid = 3;
inline constexpr uint32_t kParentPid = 4;
inline constexpr uint32_t kCommandLine = 5;
inline constexpr uint32_t kStartTimeUnixNs = 6;
inline constexpr uint32_t kStartTimeMonoNs = 7;
inline constexpr uint32_t kOption = 8;
inline constexpr uint32_t kRecorderVersion = 9;
inline constexpr uint32_t kStacksUnavailable = 10;
inline constexpr uint32_t kRank = 11;
inline constexpr uint32_t kLocalRank = 12;
inline constexpr uint32_t kWorldSize = 13;
}  // namespace header_field

namespace option_field {
inline constexpr uint32_t kName = 1;
inline constexpr uint32_t kValue = 2;
}  // namespace option_field

namespace device_field {
inline constexpr uint32_t kOrdinal = 1;
inline constexpr uint32_t kName = 2;
inline constexpr uint32_t kTotalMemory = 3;
}  // namespace device_field

namespace module_field {
inline constexpr uint32_t kId = 1;
inline constexpr uint32_t kPath = 2;
inline constexpr uint32_t kBuildId = 3;
inline constexpr uint32_t kLoadBias = 4;
inline constexpr uint32_t kStart = 5;
inline constexpr uint32_t kEnd = 6;
}  // namespace module_field

namespace module_unload_field {
inline constexpr uint32_t kId = 1;
}

namespace thread_field {
inline constexpr uint32_t kTid = 1;
inline constexpr uint32_t kName = 2;
}  // namespace thread_field

namespace stack_field {
inline constexpr uint32_t kId = 1;
inline constexpr uint32_t kFrame = 2;
inline constexpr uint32_t kTruncated = 3;
inline constexpr uint32_t kPythonCode = 4;
inline constexpr uint32_t kPythonLine = 5;
inline constexpr uint32_t kPythonGroup = 6;
inline constexpr uint32_t kPythonTruncated = 7;
}  // namespace stack_field

namespace python_code_field {
inline constexpr uint32_t kId = 1;
inline constexpr uint32_t kFilename = 2;
inline constexpr uint32_t kFunction = 3;
inline constexpr uint32_t kFirstLine = 4;
}  // namespace python_code_field

namespace python_status_field {
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kSupported = 2;
inline constexpr uint32_t kDetail = 3;
}  // namespace python_status_field

namespace python_holder_field {
inline constexpr uint32_t kSeq = 1;
inline constexpr uint32_t kTimestampNs = 2;
inline constexpr uint32_t kTid = 3;
inline constexpr uint32_t kAddress = 4;
inline constexpr uint32_t kSize = 5;
inline constexpr uint32_t kStackId = 6;
inline constexpr uint32_t kHow = 7;
}  // namespace python_holder_field

namespace memory_field {
inline constexpr uint32_t kSeq = 1;
inline constexpr uint32_t kTimestampNs = 2;
inline constexpr uint32_t kTid = 3;
inline constexpr uint32_t kDevice = 4;
inline constexpr uint32_t kApi = 5;
inline constexpr uint32_t kKind = 6;
inline constexpr uint32_t kAction = 7;
inline constexpr uint32_t kSize = 8;
inline constexpr uint32_t kAddress = 9;
inline constexpr uint32_t kStream = 10;
inline constexpr uint32_t kPool = 11;
inline constexpr uint32_t kResult = 12;
inline constexpr uint32_t kStackId = 13;
inline constexpr uint32_t kHandle = 14;
inline constexpr uint32_t kOffset = 15;
inline constexpr uint32_t kFreeBytes = 16;
inline constexpr uint32_t kTotalBytes = 17;
inline constexpr uint32_t kPitch = 18;
inline constexpr uint32_t kCapture = 19;
}  // namespace memory_field

namespace stream_capture_field {
inline constexpr uint32_t kSeq = 1;
inline constexpr uint32_t kTimestampNs = 2;
inline constexpr uint32_t kTid = 3;
inline constexpr uint32_t kCapture = 4;
inline constexpr uint32_t kStream = 5;
inline constexpr uint32_t kMode = 6;
inline constexpr uint32_t kEnded = 7;
inline constexpr uint32_t kResult = 8;
}  // namespace stream_capture_field

namespace footer_field {
inline constexpr uint32_t kEvents = 1;
inline constexpr uint32_t kEventsDropped = 2;
inline constexpr uint32_t kStacks = 3;
inline constexpr uint32_t kStacksFailed = 4;
inline constexpr uint32_t kBytesWritten = 5;
inline constexpr uint32_t kCleanExit = 6;
inline constexpr uint32_t kEndTimeMonoNs = 7;
inline constexpr uint32_t kExitStatus = 8;
inline constexpr uint32_t kHookConflicts = 9;
inline constexpr uint32_t kStopReason = 10;
inline constexpr uint32_t kStoppedAtSeq = 11;
inline constexpr uint32_t kEventsReentrant = 12;
}  // namespace footer_field

namespace kernel_name_field {
inline constexpr uint32_t kId = 1;
inline constexpr uint32_t kName = 2;
}  // namespace kernel_name_field

namespace launch_field {
inline constexpr uint32_t kSeq = 1;
inline constexpr uint32_t kTimestampNs = 2;
inline constexpr uint32_t kTid = 3;
inline constexpr uint32_t kDevice = 4;
inline constexpr uint32_t kApi = 5;
inline constexpr uint32_t kKernelId = 6;
inline constexpr uint32_t kGridX = 7;
inline constexpr uint32_t kGridY = 8;
inline constexpr uint32_t kGridZ = 9;
inline constexpr uint32_t kBlockX = 10;
inline constexpr uint32_t kBlockY = 11;
inline constexpr uint32_t kBlockZ = 12;
inline constexpr uint32_t kSharedMemoryBytes = 13;
inline constexpr uint32_t kStream = 14;
inline constexpr uint32_t kCorrelationId = 15;
inline constexpr uint32_t kStackId = 16;
inline constexpr uint32_t kResult = 17;
inline constexpr uint32_t kGraph = 18;
inline constexpr uint32_t kPointerArgs = 19;
inline constexpr uint32_t kFromCupti = 20;
inline constexpr uint32_t kParamsUnknown = 21;
}  // namespace launch_field

namespace cupti_field {
inline constexpr uint32_t kState = 1;
inline constexpr uint32_t kDetail = 2;
inline constexpr uint32_t kKernelTiming = 3;
}  // namespace cupti_field

namespace kernel_timing_field {
inline constexpr uint32_t kCorrelationId = 1;
inline constexpr uint32_t kStartNs = 2;
inline constexpr uint32_t kEndNs = 3;
inline constexpr uint32_t kDevice = 4;
}  // namespace kernel_timing_field

namespace pool_usage_field {
inline constexpr uint32_t kPool = 1;
inline constexpr uint32_t kDevice = 2;
inline constexpr uint32_t kReservedBytes = 3;
inline constexpr uint32_t kUsedBytes = 4;
inline constexpr uint32_t kTimestampNs = 5;
inline constexpr uint32_t kCorrelationId = 6;
}  // namespace pool_usage_field

enum class Api : uint32_t {
  kUnknown = 0,
  kCudaMalloc = 1,
  kCudaFree = 2,
  kCudaMallocAsync = 3,
  kCudaFreeAsync = 4,
  kCudaMallocFromPoolAsync = 5,
  kCudaMallocManaged = 6,
  kCudaMallocPitch = 7,
  kCudaMalloc3D = 8,
  kCudaMallocHost = 9,
  kCudaHostAlloc = 10,
  kCudaFreeHost = 11,
  kCuMemAlloc = 32,
  kCuMemAllocPitch = 33,
  kCuMemFree = 34,
  kCuMemAllocManaged = 35,
  kCuMemAllocAsync = 36,
  kCuMemFreeAsync = 37,
  kCuMemAllocFromPoolAsync = 38,
  kCuMemAddressReserve = 39,
  kCuMemAddressFree = 40,
  kCuMemCreate = 41,
  kCuMemRelease = 42,
  kCuMemMap = 43,
  kCuMemUnmap = 44,
  kCuMemHostAlloc = 45,
  kCuMemFreeHost = 46,
  kCuMemAllocHost = 47,
  kCuMemRetainAllocationHandle = 48,
  kCuMemImportFromShareableHandle = 49,
};

enum class MemoryKind : uint32_t {
  kUnknown = 0,
  kDevice = 1,
  kManaged = 2,
  kPinnedHost = 3,
  kVmmReservation = 4,
  kVmmPhysical = 5,
  kVmmMapping = 6,
  kPool = 7,
  kVmmImported = 8,
};

enum class Action : uint32_t {
  kUnknown = 0,
  kAlloc = 1,
  kFree = 2,
  kAllocFailed = 3,
  kFreeFailed = 4,
  kRetain = 5,
};

enum class LaunchApi : uint32_t {
  kUnknown = 0,
  kCuLaunchKernel = 1,
  kCuLaunchKernelEx = 2,
  kCuLaunchCooperativeKernel = 3,
  kCuGraphLaunch = 4,
};

enum class CuptiState : uint32_t {
  kUnknown = 0,
  kActive = 1,
  kDisabled = 2,
  kNotFound = 3,
  kOtherSubscriber = 4,
  kFailed = 5,
};

// CUstreamCaptureMode + 1 (0: not known).
enum class CaptureMode : uint32_t {
  kUnknown = 0,
  kGlobal = 1,
  kThreadLocal = 2,
  kRelaxed = 3,
};

enum class RecordingStop : uint32_t {
  kNone = 0,
  kDiskFull = 1,
  kSizeLimit = 2,
  kDescriptorLost = 3,
  kWriteFailed = 4,
  kAddressSpaceFull = 5,
};

// Why recording stopped, for the user: the recorder's warning and the reports say the same.
inline const char* RecordingStopText(RecordingStop reason) {
  switch (reason) {
    case RecordingStop::kNone:
      return "it did not stop";
    case RecordingStop::kDiskFull:
      return "no space left on the file system";
    case RecordingStop::kSizeLimit:
      return "the trace reached the file size limit (ulimit -f)";
    case RecordingStop::kDescriptorLost:
      return "the program closed or replaced the trace's file descriptor";
    case RecordingStop::kWriteFailed:
      return "the trace file could not grow";
    case RecordingStop::kAddressSpaceFull:
      return "the trace filled the address space reserved for it";
  }
  return "a reason this gpumem does not know";
}

inline constexpr uint32_t kFormatVersion = 1;

}  // namespace gpumem::proto
