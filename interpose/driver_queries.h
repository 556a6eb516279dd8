// Questions the hooks ask the real driver after a call: which device is current, how much memory
// is free (for a failed allocation), a device's name and size. Only driver calls: a runtime call
// could change the program's sticky cudaGetLastError state.
#pragma once

#include <cstdint>

namespace gpumem {

// Ordinal of the calling thread's current device; -1 when there is none.
int CurrentDevice();
bool DeviceMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes);
// Writes the Device packet the first time a device is seen.
void AnnounceDevice(int ordinal);
// Hands the recorder the driver's cuFuncGetName / cuFuncGetParamInfo (once they can be found).
void PrepareKernelQueries();

}  // namespace gpumem
