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

#ifdef GPUMEM_BENCH_BUILD
// libgpumem_bench.so only (never in libgpumem.so): tests/bench/run_step_time_toggle.sh pauses and
// resumes recording between windows of a training script, in one process (through ctypes).
extern "C" __attribute__((visibility("default"))) void gpumem_bench_set_recording(int on) {
  gpumem::EnsureRecorderInitialized();
  gpumem::recorder::SetPausedForBenchmark(on == 0);
  gpumem::cupti::SetCallbacksEnabled(on != 0);
}
#endif
