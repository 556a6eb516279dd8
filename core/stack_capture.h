// Native call stacks through libunwind, loaded privately with dlopen(RTLD_LOCAL) (DESIGN rule 3:
// linking it would replace libgcc's _Unwind_* and glibc's backtrace for the whole process).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpumem {

// Loads libunwind (explicit path, then next to libgpumem.so, then the system's) and switches it
// to its per-thread cache. False when none could be loaded: the recorder then records no stacks.
// `fast_unwind`: stacks through core/eh_frame_unwinder.h first, libunwind only for the frames it
// does not handle.
bool InitStackCapture(const char* explicit_path, bool fast_unwind,
                      void* (*real_dlopen)(const char*, int),
                      void* (*real_dlsym)(void*, const char*));

// What the recorder identifies a stack by, computed with it (CaptureStack's `print`).
struct StackPrint {
  size_t kept = 0;              // in: how many of the frames the caller keeps
  uint64_t hash = 0;            // out: StackTable::Hash of the first min(count, kept) frames
  bool frames_written = false;  // out: false when the print comes from an earlier identical stack
};

// Room for one unwind: the deepest kept stack plus gpumem's own frames. Kept off the caller's
// stack (the recorder's per-thread state holds one), which may be small.
inline constexpr size_t kUnwindScratchFrames = 288;
struct UnwindScratch {
  void* frames[kUnwindScratchFrames];
};

// Fills `frames` with return addresses, innermost first, starting at the frame that returns to
// `caller_pc` (the hooked API's caller), so no gpumem frame is ever recorded. Returns the count.
// With `print`, also its hash; and where this thread took the same stack before (same stack
// pointer, same stack words: eh_frame_unwinder's replay) count and hash come from a note kept
// with that unwind and `frames` is not written: a replay then costs no copy and no hashing. A
// caller that needs the frames after all calls again, from the same place, without `print`.
// `anchor`: an address in the caller's stack frame, the same for each call from one place (what
// PrefetchStack was given), or 0.
size_t CaptureStack(uintptr_t caller_pc, uint64_t* frames, size_t capacity, UnwindScratch* scratch,
                    StackPrint* print = nullptr, uintptr_t anchor = 0);

bool StackCaptureAvailable();

// Starts fetching what a replay of the stack about to be taken reads, for a CaptureStack call
// from here with this `anchor`: other work before it (the Python frames) then hides those cache
// misses. A hint only.
void PrefetchStack(uintptr_t anchor);

// Stacks end at the first return address in [start, end), which is kept: the Python interpreter's
// eval loop, when the Python frames take over from there. start == end: stacks go to the end.
void SetStackEnd(uintptr_t start, uintptr_t end);

}  // namespace gpumem
