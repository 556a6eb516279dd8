// A fast x86-64 unwinder for the common case: the unwind rule of each return address (where the
// caller's stack pointer, frame pointer and return address are) is read once from the module's
// .eh_frame and cached process-wide, so a stack costs two loads and one hash probe per frame.
// libunwind's unw_backtrace does the same job but measured 1.1-1.3 µs per PyTorch stack on the
// H100 machine; it stays the fallback for whatever this one does not handle (a CFA or a return
// address given by a DWARF expression, signal frames, a stack outside the thread's own).
#pragma once

#include <cstdint>

namespace gpumem::eh_frame_unwinder {

// Finds what this unwinder needs (glibc's _dl_find_object, x86-64); false if the process lacks
// it, and Backtrace then always answers -1.
bool Init(void* (*real_dlsym)(void*, const char*));

// Room, in each unwind this thread keeps for replaying, for its caller's note about the frames
// (stack_capture.cc: their hash as the recorder keeps them). Zeroed whenever the unwind is kept
// anew, so a nonzero note always describes the frames a replay would give.
struct ReplayNote {
  uint64_t word[4];
};

// Like unw_backtrace: fills `frames` with return addresses, innermost first, frames[0] being the
// return address into Backtrace's caller; returns how many. Returns -1, having written nothing
// useful, when a frame is not one this unwinder handles: the caller asks libunwind instead.
// With `note`: *note is the note of this unwind (nullptr when it is not kept), and when a replay
// finds it nonzero (word[0]), `frames` is left unwritten: the note stands for them.
// `anchor`: an address in the caller's frame (a local array), from which PrefetchReplay learns
// where the stack pointer of a Backtrace called from there will be.
int Backtrace(void** frames, int capacity, ReplayNote** note = nullptr, uintptr_t anchor = 0);

// Starts fetching the thread's kept unwinds for the stack pointer a Backtrace will have when
// called with this anchor (learnt from the last call that gave one), so that the caller's work
// meanwhile (the Python frames) hides their cache misses: a replay's first touch of its unwind
// was a tenth of gpumem's samples on a PyTorch step. Only prefetches: a wrong guess costs nothing
// but the fetches.
void PrefetchReplay(uintptr_t anchor);

// Writes to stderr the first few addresses whose frames were left to libunwind, and why
// (GPUMEM_SELF_TIMING=1 at exit).
void PrintUnsupported();

// Backtrace stops after the first return address in [start, end) (see SetStackEnd in
// core/stack_capture.h); earlier replays are forgotten.
void SetStop(uintptr_t start, uintptr_t end);

// The same cut applied to a stack another unwinder took (libunwind cannot be told where to stop):
// the count of frames up to and including the first in SetStop's range.
int CutAtStop(void** frames, int depth);

// Drops the cached rules (after a module was unloaded, its addresses may hold other code).
void ForgetRules();

}  // namespace gpumem::eh_frame_unwinder
