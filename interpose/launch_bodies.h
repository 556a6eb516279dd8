// Wrapper bodies of the driver's launch entry points (cuLaunchKernel, cuLaunchKernelEx,
// cuLaunchCooperativeKernel, cuGraphLaunch). driver_hooks.cc instantiates them for every way they
// are reached, as it does the memory bodies. Runtime launches (cudaLaunchKernel and kin, shared
// or static libcudart) arrive here too: libcudart fetches these through cuGetProcAddress.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace gpumem {

CUresult LaunchKernelBody(decltype(&cuLaunchKernel) real, uintptr_t caller, CUfunction function,
                          unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                          unsigned block_y, unsigned block_z, unsigned shared_memory_bytes,
                          CUstream stream, void** kernel_params, void** extra);
CUresult LaunchKernelExBody(decltype(&cuLaunchKernelEx) real, uintptr_t caller,
                            const CUlaunchConfig* config, CUfunction function, void** kernel_params,
                            void** extra);
CUresult LaunchCooperativeKernelBody(decltype(&cuLaunchCooperativeKernel) real, uintptr_t caller,
                                     CUfunction function, unsigned grid_x, unsigned grid_y,
                                     unsigned grid_z, unsigned block_x, unsigned block_y,
                                     unsigned block_z, unsigned shared_memory_bytes,
                                     CUstream stream, void** kernel_params);
CUresult GraphLaunchBody(decltype(&cuGraphLaunch) real, uintptr_t caller, CUgraphExec graph,
                         CUstream stream);

}  // namespace gpumem
