// gpumem's own time per recording phase, with GPUMEM_SELF_TIMING=1: summed over the process and
// printed to stderr when the trace is finished, so the cost of recording a real program can be
// taken apart where no profiler is at hand (the GPU machines have none). Off, a Scope costs one
// predictable branch.
#pragma once

#include <cstdint>

#include "core/clock.h"
#include "core/hot_path.h"

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
  kStackCapture,  // a whole stack: the native, Python and lookup phases, and what readies them
                  // (the thread's state, the switches, the prefetch) outside them
  kHookEntry,     // a recording hook's start, before the real call: the thread's block, the
                  // recorder's and CUPTI's start checks (timed nowhere else)
  // Everything a hook does to record one call, the phases above included (not the real call):
  kAllocationHook,
  kFreeHook,
  kLaunchHook,
  kPhaseCount
};
// The phases that contain others, and a hook's own parts outside the events: printed apart, not
// added to the sum.
constexpr bool IsOuterPhase(int phase) {
  return phase == kSinkWrite || phase == kDeviceQuery || phase == kKernelLookup ||
         phase == kPointerScan || phase == kStackCapture || phase == kHookEntry ||
         phase == kAllocationHook || phase == kFreeHook || phase == kLaunchHook;
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

// Hidden: read directly, not through the address the GOT would hold for a symbol defined elsewhere.
extern bool g_enabled __attribute__((visibility("hidden")));

// What a Scope keeps per thread (in ThreadLocals), so that the phases add up: without it each
// enclosing phase also timed the bookkeeping of the phases inside it (two clock reads and three
// shared counters, each a cache miss in a framework: about half of a hook's time outside any
// phase on the H100).
struct ThreadTiming {
  uint64_t bookkeeping_ns = 0;  // the thread's Scopes' own bookkeeping so far
  uint64_t children_ns = 0;     // the open Scope's direct children's time so far
};

// `count`: whether this adds one to the phase's count (false for the first part of a phase timed
// in two parts, e.g. a free's hook before and after the real call). `exclusive_ns`: the part of
// `ns` in no phase nested in it.
void Add(Phase phase, uint64_t ns, uint64_t exclusive_ns, bool count = true);
void AddCount(Counter counter, uint64_t amount);
inline void Count(Counter counter, uint64_t amount = 1) {
  if (g_enabled) AddCount(counter, amount);
}
struct PhaseTotals {
  uint64_t count;
  uint64_t ns;
  uint64_t exclusive_ns;
};
PhaseTotals Totals(Phase phase);
uint64_t CountOf(Counter counter);
// Scopes timed so far and the time their bookkeeping took, left out of every phase's time.
PhaseTotals Bookkeeping();
// One line per phase that ran: count, mean, percentiles (quarter-octave buckets) and the mean
// outside its nested phases; then the bookkeeping and the counters. To stderr.
void Print();

// Times its own lifetime as `phase`, less the bookkeeping of the Scopes nested in it.
class Scope {
 public:
  explicit Scope(Phase phase, bool count = true) : phase_(phase), count_(count) {
    if (g_enabled) [[unlikely]]
      Begin();
  }
  ~Scope() {
    if (thread_ != nullptr) [[unlikely]]
      End();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  void Begin();
  void End();

  Phase phase_;
  bool count_;
  ThreadTiming* thread_ = nullptr;
  uint64_t start_ = 0;
  uint64_t begin_bookkeeping_ns_ = 0;
  uint64_t bookkeeping_at_start_ = 0;
  uint64_t parent_children_ns_ = 0;
};

}  // namespace gpumem::self_timing
