// gpumem's per-thread variables, one block per thread reached through a pthread key: gpumem has
// no TLS of its own. A preloaded library's TLS is static TLS, which glibc places at the top of
// every thread's stack, and where it lands decides the padding of the blocks after it: on the
// H100 machine gpumem's 112 bytes, laid out before libcudart's 4096-aligned block, grew each
// thread's static TLS from 10560 to 14656 bytes, and a program's pthread_create() with a 16 KiB
// stack failed (EINVAL) under gpumem only. The block is taken at a thread's first hook, without
// allocating (a static pool, then mmap), also inside a signal handler; given back at thread exit.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "core/self_timing.h"

namespace gpumem {

struct ThreadLocals {
  // > 0 while the thread is inside an interposed call (or inside gpumem itself). Interposition
  // records the outermost call only; a CUPTI callback that finds it > 0 is seeing a call that
  // interposition records, and leaves it alone: each operation is recorded exactly once.
  int hook_depth = 0;
  // > 0 while the thread is inside an interposed runtime call (interpose/hook_guard.h): a driver
  // hook reached then is, as a rule, libcudart's own call underneath, recorded at the runtime's
  // level.
  int runtime_hook_depth = 0;
  // Set by CUPTI's launch callback when the launch is an interposed one: the wrapper that records
  // it after the call takes CUPTI's correlation id from here (0: CUPTI did not see it).
  uint64_t launch_correlation_id = 0;
  // cupti/callbacks.cc: the memory call whose callback is pending, and its seq.
  uint64_t pending_call = 0;
  uint64_t pending_seq = 0;
  // core/eh_frame_unwinder.cc: the thread's stack [low, high) (high 0: not asked, 1: unknown), and
  // its memo table.
  uintptr_t stack_low = 0;
  uintptr_t stack_high = 0;
  void* memos = nullptr;
  // core/own_stack.cc: gpumem's own stack of this thread.
  uintptr_t own_low = 0;
  uintptr_t own_high = 0;
  // core/recorder.cc: the thread's recording state.
  void* thread_state = nullptr;
  // core/stream_capture.cc: the capture this thread began and has not ended.
  uint64_t capture = 0;
  // core/driver_queries.cc: allocations counted for the pool queries' sampling.
  uint32_t pool_uses = 0;
  uint32_t pool_allocations = 0;
  // core/self_timing.h (GPUMEM_SELF_TIMING=1): the open Scopes' sums.
  self_timing::ThreadTiming timing;
};

namespace thread_locals_internal {
enum KeyState : int { kNoKey = 0, kCreating = 1, kReady = 2, kFailed = 3 };
// Hidden: read directly, not through the address the GOT would hold for a symbol defined elsewhere.
extern pthread_key_t g_key __attribute__((visibility("hidden")));
extern std::atomic<int> g_key_state __attribute__((visibility("hidden")));
ThreadLocals& Take();  // the first call of a thread, or of the process
}  // namespace thread_locals_internal

// The calling thread's block (taken at its first call). Inline: every event asks a few times.
inline ThreadLocals& Locals() {
  using namespace thread_locals_internal;
  if (g_key_state.load(std::memory_order_acquire) == kReady) [[likely]] {
    if (void* block = pthread_getspecific(g_key); block != nullptr) [[likely]]
      return *static_cast<ThreadLocals*>(block);
  }
  return Take();
}

}  // namespace gpumem
