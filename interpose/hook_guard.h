// Every hook starts with a HookScope. It makes hooks re-entrancy safe (a hook reached from inside
// gpumem, or from inside another hook, only forwards the call) and it is what makes a runtime call
// one record: the driver calls libcudart makes underneath run inside the runtime hook's scope.
// It also keeps errno as the real call left it, whatever recording does afterwards.
#pragma once

#include <errno.h>

#include "core/recorder.h"
#include "core/thread_flags.h"
#include "cupti/subscriber.h"

namespace gpumem {

void EnsureRecorderInitialized();

class HookScope {
 public:
  HookScope() : outermost_(t_hook_depth++ == 0) {
    if (outermost_) EnsureRecorderInitialized();
    recording_ = outermost_ && recorder::Enabled();
    if (recording_) cupti::StartOnce();  // the first CUDA call starts the CUPTI subscriber
  }
  ~HookScope() { --t_hook_depth; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

  // False: forward the call and record nothing.
  bool recording() const { return recording_; }

 private:
  bool outermost_;
  bool recording_ = false;
};

}  // namespace gpumem
