// Readable names for the enums of core/trace.proto, as the reports print them.
#ifndef GPUMEM_REPORT_FORMAT_NAMES_H_
#define GPUMEM_REPORT_FORMAT_NAMES_H_

#include <cstdint>
#include <string>

#include "core/trace.pb.h"

namespace gpumem::report {

// The C function name without version suffix: "cudaMalloc", "cuMemAllocPitch", "cuMemCreate".
// Values this build does not know print as "api<N>".
std::string ApiName(Api api);

// "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuGraphLaunch"
// ("launch<N>" for values this build does not know).
std::string LaunchApiName(LaunchApi api);

// "active", "disabled", "not_found", "other_subscriber", "failed", "unknown".
std::string CuptiStateName(CuptiState state);

// Why recording stopped: "none", "disk_full", "size_limit", "descriptor_lost", "write_failed",
// "address_space_full" ("stop<N>" for values this build does not know).
std::string RecordingStopName(RecordingStop reason);

// A C++ symbol (kernel or function name) demangled; anything else as it is.
std::string Demangle(const char* name);

// "alloc", "free", "alloc_failed", "free_failed" ("action<N>" for unknown values).
std::string ActionName(Action action);

// "device", "managed", "pinned_host", "vmm_reservation", "vmm_physical", "vmm_mapping", "pool"
// ("unknown" for KIND_UNKNOWN, "kind<N>" for values this build does not know).
std::string KindName(MemoryKind kind);

// "global", "thread_local", "relaxed" ("unknown", or "mode<N>" for values this build does not
// know).
std::string CaptureModeName(CaptureMode mode);

// Whether a failed call's result means out of memory: CUDA_ERROR_OUT_OF_MEMORY (driver) and
// cudaErrorMemoryAllocation (runtime) are both 2. Any other error (a handle type the system does
// not support, an invalid value) is a failed call, not an out-of-memory error.
inline bool IsOutOfMemoryResult(int32_t result) { return result == 2; }

// The name of a CUresult (`api` a driver call) or cudaError_t (a runtime call):
// "CUDA_ERROR_NOT_PERMITTED", "cudaErrorMemoryAllocation"; "" for codes this build does not name.
std::string ResultName(Api api, int32_t result);

// "observer", "exception" ("unknown", or "source<N>" for values this build does not know).
std::string OomSourceName(OomSource source);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_FORMAT_NAMES_H_
