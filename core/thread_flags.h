// Per-thread flags shared by the two layers that see CUDA calls in the process: the interposed
// entry points (interpose/) and the CUPTI callbacks (cupti/), kept in the thread's
// ThreadLocals (core/thread_locals.h): hook_depth, runtime_hook_depth, launch_correlation_id.
#pragma once

#include <errno.h>

#include <cstdint>

#include "core/thread_locals.h"

namespace gpumem {

// Keeps the errno the real call produced across the recording work done after it.
class ErrnoKeeper {
 public:
  ErrnoKeeper() : saved_(errno) {}
  ~ErrnoKeeper() { errno = saved_; }
  ErrnoKeeper(const ErrnoKeeper&) = delete;
  ErrnoKeeper& operator=(const ErrnoKeeper&) = delete;

 private:
  int saved_;
};

// gpumem's own work done from a callback or a hook's aftermath (CUPTI's callbacks, starting or
// giving up the subscription): the CUDA calls it makes are neither recorded nor seen again by
// CUPTI's callbacks, and the program's errno comes out as it went in.
class OwnWorkScope {
 public:
  OwnWorkScope() { ++Locals().hook_depth; }
  ~OwnWorkScope() { --Locals().hook_depth; }
  OwnWorkScope(const OwnWorkScope&) = delete;
  OwnWorkScope& operator=(const OwnWorkScope&) = delete;

 private:
  ErrnoKeeper errno_;  // restored after the depth (members are destroyed after the body)
};

}  // namespace gpumem
