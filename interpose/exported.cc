// The exported entry points that are not CUDA hooks, each called through ctypes.
//
// gpumem_note_python_holder: gpumem's Python observer (interpose/python/sitecustomize.py) calls it
// when a CUDA tensor is appended to a list, so that the reports can name the line that keeps
// memory alive, not only the line that allocated it.
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

// Benchmarks only: tests/bench/run_step_time_toggle.sh alternates windows of a training script
// with and without recording in one process (samples/pytorch/train_mlp.py calls this through
// ctypes). Refused (returns 0) unless GPUMEM_BENCH_TOGGLE=1 was set at start.
extern "C" __attribute__((visibility("default"))) int gpumem_bench_set_recording(int on) {
  gpumem::EnsureRecorderInitialized();
  if (!gpumem::recorder::SetPausedForBenchmark(on == 0)) return 0;
  gpumem::cupti::SetCallbacksEnabled(on != 0);
  return 1;
}
