// The one entry point that is not a CUDA hook: gpumem's Python observer (interpose/python/
// sitecustomize.py) calls it through ctypes when a CUDA tensor is appended to a list, so that the
// reports can name the line that keeps memory alive, not only the line that allocated it.
#include "core/recorder.h"
#include "interpose/hook_guard.h"

extern "C" __attribute__((visibility("default"))) void gpumem_note_python_holder(uint64_t address,
                                                                                 uint64_t size) {
  gpumem::HookScope scope;
  if (!scope.recording() || address == 0) return;
  gpumem::ErrnoKeeper keep;
  gpumem::recorder::RecordPythonHolder(address, size, "list.append",
                                       reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}
