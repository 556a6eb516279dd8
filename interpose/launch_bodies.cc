#include "interpose/launch_bodies.h"

#include "core/driver_queries.h"
#include "core/hot_path.h"
#include "core/recorder.h"
#include "core/self_timing.h"
#include "core/thread_flags.h"
#include "interpose/hook_guard.h"

namespace gpumem {
namespace {

using proto::LaunchApi;

// Forwards the launch (`call`), then records `record` with what only the call can tell: the
// result, the device, CUPTI's correlation id if its callback saw the launch inside the call.
template <typename Call>
GPUMEM_HOT CUresult RecordedLaunch(uintptr_t caller, LaunchRecord& record, Call&& call) {
  HookScope scope;
  if (!scope.recording() || !recorder::LaunchesEnabled()) return call();
  record.seq = recorder::NextSeq();
  scope.locals().launch_correlation_id = 0;
  CUresult result = call();
  ErrnoKeeper keep;
  self_timing::Scope timing(self_timing::kLaunchHook);
  record.result = result;
  record.correlation_id = scope.locals().launch_correlation_id;
  record.device = driver::CurrentDevice();
  if (record.device >= 0) driver::AnnounceDevice(record.device);
  record.stack_id = recorder::CaptureLaunchStack(caller);
  recorder::RecordLaunch(record);
  return result;
}

GPUMEM_HOT LaunchRecord KernelLaunch(LaunchApi api, CUfunction function, unsigned grid_x,
                                     unsigned grid_y, unsigned grid_z, unsigned block_x,
                                     unsigned block_y, unsigned block_z,
                                     unsigned shared_memory_bytes, CUstream stream,
                                     void** kernel_params, void** extra) {
  LaunchRecord record;
  record.api = api;
  record.function = function;
  record.grid[0] = grid_x;
  record.grid[1] = grid_y;
  record.grid[2] = grid_z;
  record.block[0] = block_x;
  record.block[1] = block_y;
  record.block[2] = block_z;
  record.shared_memory_bytes = shared_memory_bytes;
  record.stream = reinterpret_cast<uintptr_t>(stream);
  record.kernel_params = kernel_params;
  record.extra = extra;
  return record;
}

}  // namespace

GPUMEM_HOT CUresult LaunchKernelBody(decltype(&cuLaunchKernel) real, uintptr_t caller,
                                     CUfunction function, unsigned grid_x, unsigned grid_y,
                                     unsigned grid_z, unsigned block_x, unsigned block_y,
                                     unsigned block_z, unsigned shared_memory_bytes,
                                     CUstream stream, void** kernel_params, void** extra) {
  LaunchRecord record =
      KernelLaunch(LaunchApi::kCuLaunchKernel, function, grid_x, grid_y, grid_z, block_x, block_y,
                   block_z, shared_memory_bytes, stream, kernel_params, extra);
  return RecordedLaunch(caller, record, [&] {
    return real(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_memory_bytes,
                stream, kernel_params, extra);
  });
}

GPUMEM_HOT CUresult LaunchKernelExBody(decltype(&cuLaunchKernelEx) real, uintptr_t caller,
                                       const CUlaunchConfig* config, CUfunction function,
                                       void** kernel_params, void** extra) {
  if (config == nullptr) return real(config, function, kernel_params, extra);
  LaunchRecord record =
      KernelLaunch(LaunchApi::kCuLaunchKernelEx, function, config->gridDimX, config->gridDimY,
                   config->gridDimZ, config->blockDimX, config->blockDimY, config->blockDimZ,
                   config->sharedMemBytes, config->hStream, kernel_params, extra);
  return RecordedLaunch(caller, record,
                        [&] { return real(config, function, kernel_params, extra); });
}

GPUMEM_HOT CUresult LaunchCooperativeKernelBody(decltype(&cuLaunchCooperativeKernel) real,
                                                uintptr_t caller, CUfunction function,
                                                unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                                unsigned block_x, unsigned block_y,
                                                unsigned block_z, unsigned shared_memory_bytes,
                                                CUstream stream, void** kernel_params) {
  LaunchRecord record =
      KernelLaunch(LaunchApi::kCuLaunchCooperativeKernel, function, grid_x, grid_y, grid_z, block_x,
                   block_y, block_z, shared_memory_bytes, stream, kernel_params, nullptr);
  return RecordedLaunch(caller, record, [&] {
    return real(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_memory_bytes,
                stream, kernel_params);
  });
}

GPUMEM_HOT CUresult GraphLaunchBody(decltype(&cuGraphLaunch) real, uintptr_t caller,
                                    CUgraphExec graph, CUstream stream) {
  LaunchRecord record;
  record.api = LaunchApi::kCuGraphLaunch;
  record.graph = reinterpret_cast<uintptr_t>(graph);
  record.stream = reinterpret_cast<uintptr_t>(stream);
  return RecordedLaunch(caller, record, [&] { return real(graph, stream); });
}

}  // namespace gpumem
