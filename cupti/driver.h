// What the CUPTI callbacks ask the real driver: the device of the call's context, free/total
// memory after a failed allocation, a device's name and size, and the kernel queries the recorder
// uses. Looked up by exact symbol in the libcuda already loaded (never loaded here, never through
// cuGetProcAddress); interposition has its own copy (interpose/driver_queries.cc) because cupti/
// depends on core/ only. Without a loaded libcuda (unit tests) every answer is "unknown".
#pragma once

#include <cuda.h>

#include <cstdint>

#include "core/recorder.h"

namespace gpumem::cupti::driver {

// The real loader functions (ours shadow dlsym). Until set, nothing is looked up.
void SetLoader(const LoaderFunctions& loader);

// Ordinal of the device of `context` (the current context when null); -1 when unknown.
int ContextDevice(CUcontext context);
bool DeviceMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes);
// Writes the Device packet the first time a device is seen.
void AnnounceDevice(int ordinal);
// Hands the recorder cuFuncGetName / cuFuncGetParamInfo once they can be found.
void PrepareKernelQueries();

}  // namespace gpumem::cupti::driver
