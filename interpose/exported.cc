// The exported entry points that are not CUDA hooks, each called through ctypes.
//
// gpumem_note_python_holder: gpumem's Python observer (interpose/python/sitecustomize.py) calls it
// when a CUDA tensor is appended to a list, so that the reports can name the line that keeps
// memory alive, not only the line that allocated it.
//
// gpumem_note_out_of_memory: the observer saw PyTorch's out-of-memory error (its allocator's
// out-of-memory hook, or the torch.OutOfMemoryError raised), which need not come with any failed
// driver call.
//
// gpumem_note_backward: a backward pass began or ended on the calling thread, so that the
// allocations of PyTorch's autograd threads can be credited to the line that started it.
#include "core/recorder.h"
#include "cupti/subscriber.h"
#include "interpose/hook_guard.h"

extern "C" __attribute__((visibility("default"))) void gpumem_note_python_holder(uint64_t address,
                                                                                 uint64_t size) {
  gpumem::HookScope scope;
  if (!scope.recording() || address == 0) return;
  gpumem::ErrnoKeeper keep;
  gpumem::recorder::RecordPythonHolder(address, size, "list.append",
                                       reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}

extern "C" __attribute__((visibility("default"))) void gpumem_note_out_of_memory(
    int32_t device, int32_t source, uint64_t requested, int32_t requested_from_message,
    uint64_t allocated, uint64_t reserved, uint64_t limit, uint64_t device_free,
    const char* message) {
  gpumem::HookScope scope;
  if (!scope.recording()) return;
  gpumem::ErrnoKeeper keep;
  gpumem::recorder::FrameworkOomRecord oom;
  oom.device = device;
  oom.source = source == 1   ? gpumem::proto::OomSource::kOomObserver
               : source == 2 ? gpumem::proto::OomSource::kOomException
                             : gpumem::proto::OomSource::kUnknown;
  oom.requested = requested;
  oom.requested_from_message = requested_from_message != 0;
  oom.allocated = allocated;
  oom.reserved = reserved;
  oom.limit = limit;
  oom.device_free = device_free;
  oom.message = message;
  gpumem::recorder::RecordFrameworkOom(oom,
                                       reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}

extern "C" __attribute__((visibility("default"))) void gpumem_note_backward(uint64_t pass,
                                                                            int32_t ended) {
  gpumem::HookScope scope;
  if (!scope.recording()) return;
  gpumem::ErrnoKeeper keep;
  gpumem::recorder::RecordBackwardPass(pass, ended != 0,
                                       reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}

#ifdef GPUMEM_BENCH_BUILD
// libgpumem_bench.so only (never in libgpumem.so): tests/bench/run_step_time_toggle.sh pauses and
// resumes recording between windows of a training script, in one process (through ctypes).
extern "C" __attribute__((visibility("default"))) void gpumem_bench_set_recording(int on) {
  gpumem::EnsureRecorderInitialized();
  gpumem::recorder::SetPausedForBenchmark(on == 0);
  gpumem::cupti::SetCallbacksEnabled(on != 0);
}
#endif
