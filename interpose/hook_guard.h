// Every hook starts with a HookScope. It makes hooks re-entrancy safe (a hook reached from inside
// gpumem, or from inside another hook, only forwards the call) and it is what makes a runtime call
// one record: the driver calls libcudart makes underneath run inside the runtime hook's scope.
// It does not touch errno: each hook body declares an ErrnoKeeper (core/thread_flags.h) after the
// real call, so errno comes back as the real call left it, whatever recording does afterwards.
//
// A hook reached inside another one that is not such a driver call underneath a runtime call is
// an operation of the program that gpumem cannot record: made by a signal handler that interrupted
// gpumem's work on this thread (recording then would touch the thread's half-updated state, or
// wait for a lock this thread holds), or from within gpumem. It is forwarded and counted
// (recorder::CountReentrantEvent). A driver call from a signal handler that interrupted a runtime
// call cannot be told from libcudart's own: neither recorded nor counted.
#pragma once

#include <errno.h>

#include "core/recorder.h"
#include "core/self_timing.h"
#include "core/thread_flags.h"
#include "cupti/subscriber.h"

namespace gpumem {

void EnsureRecorderInitialized();

enum class HookLayer { kDriver, kRuntime };

class HookScope {
 public:
  explicit HookScope(HookLayer layer = HookLayer::kDriver)
      : locals_(Locals()),
        runtime_(layer == HookLayer::kRuntime),
        outermost_(locals_.hook_depth++ == 0) {
    locals_.runtime_hook_depth += runtime_;
    if (!outermost_) [[unlikely]] {
      if (runtime_ || locals_.runtime_hook_depth == 0) recorder::CountReentrantEvent();
      return;
    }
    self_timing::Scope timing(self_timing::kHookEntry);
    EnsureRecorderInitialized();
    recording_ = recorder::Enabled();
    if (recording_) cupti::StartOnce();  // the first CUDA call starts the CUPTI subscriber
  }
  ~HookScope() {
    locals_.runtime_hook_depth -= runtime_;
    --locals_.hook_depth;
  }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

  // False: forward the call and record nothing.
  bool recording() const { return recording_; }
  // The calling thread's block, as the scope found it (each look-up is a call into libc).
  ThreadLocals& locals() const { return locals_; }

 private:
  ThreadLocals& locals_;
  bool runtime_;
  bool outermost_;
  bool recording_ = false;
};

}  // namespace gpumem
