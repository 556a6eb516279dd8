// gpumem's own time per recording phase, with GPUMEM_SELF_TIMING=1: summed over the process and
// printed to stderr when the trace is finished, so the cost of recording a real program can be
// taken apart where no profiler is at hand (the GPU machines have none). Off, a Scope costs one
// predictable branch.
#pragma once

#include <cstdint>

#include "core/clock.h"

namespace gpumem::self_timing {

enum Phase : int {
  kNativeStack,   // unwinding the native stack
  kPythonFrames,  // reading the Python frames
  kStackLookup,   // hashing, the per-thread cache, interning a new stack
  kMemoryEvent,   // encoding and writing a memory event
  kLaunchEvent,   // a launch: kernel lookup, parameter scan, encoding and writing
  kKernelLookup,  // part of a launch event: the kernel's name and parameter layout
  kPointerScan,   // part of a launch event: its parameters searched for device pointers
  kPoolQuery,     // asking a memory pool its size
  kDeviceQuery,   // asking the driver the current device (part of a hook, outside the events)
  kSinkWrite,     // copying a packet into the trace file's mapping (page faults included); part
                  // of the event phases' time
  // Everything a hook does to record one call, the phases above included (not the real call):
  kAllocationHook,
  kFreeHook,
  kLaunchHook,
  kPhaseCount
};
// The phases that contain others: printed apart, not added to the sum.
constexpr bool IsOuterPhase(int phase) {
  return phase == kSinkWrite || phase == kDeviceQuery || phase == kKernelLookup ||
         phase == kPointerScan || phase == kAllocationHook || phase == kFreeHook ||
         phase == kLaunchHook;
}

// Events counted without a time.
enum Counter : int {
  kUnwindFallback,         // stacks the fast unwinder left to libunwind
  kUnwindReplayed,         // stacks the fast unwinder replayed from an earlier one of the thread
  kUnwindMemoAbsent,       // unwound: no earlier unwind from this stack pointer was kept
  kUnwindMemoChanged,      // unwound: there was one, but the stack it read has changed
  kUnwindTooDeepToReplay,  // stacks it unwound too deep (frames or reads) to keep for a replay
  kFramesUnwound,          // native frames captured (unwound or replayed), gpumem's own included
  kParamBytesScanned,      // bytes of kernel parameters searched for device pointers
  kCounterCount
};

inline bool g_enabled = false;

// `count`: whether this adds one to the phase's count (false for the first part of a phase timed
// in two parts, e.g. a free's hook before and after the real call).
void Add(Phase phase, uint64_t ns, bool count = true);
void AddCount(Counter counter, uint64_t amount);
inline void Count(Counter counter, uint64_t amount = 1) {
  if (g_enabled) AddCount(counter, amount);
}
// One line per phase that ran: count, total, mean and percentiles (quarter-octave buckets); to
// stderr.
void Print();

class Scope {
 public:
  explicit Scope(Phase phase, bool count = true)
      : phase_(phase), count_(count), start_(g_enabled ? MonotonicNs() : 0) {}
  ~Scope() {
    if (start_ != 0) Add(phase_, MonotonicNs() - start_, count_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Phase phase_;
  bool count_;
  uint64_t start_;
};

}  // namespace gpumem::self_timing
