// Per-thread flags shared by the two layers that see CUDA calls in the process: the interposed
// entry points (interpose/) and the CUPTI callbacks (cupti/). Initial-exec TLS, a few bytes.
#pragma once

#include <errno.h>

#include <cstdint>

namespace gpumem {

// > 0 while the thread is inside an interposed call (or inside gpumem itself). Interposition
// records the outermost call only; a CUPTI callback that finds it > 0 is seeing a call that
// interposition records, and leaves it alone: each operation is recorded exactly once.
inline __thread int t_hook_depth __attribute__((tls_model("initial-exec"))) = 0;

// > 0 while the thread is inside an interposed runtime call (interpose/hook_guard.h): a driver hook
// reached then is, as a rule, libcudart's own call underneath, recorded at the runtime's level.
inline __thread int t_runtime_hook_depth __attribute__((tls_model("initial-exec"))) = 0;

// Set by CUPTI's launch callback when the launch is an interposed one: the wrapper that records
// it after the call takes CUPTI's correlation id from here (0: CUPTI did not see it).
inline __thread uint64_t t_launch_correlation_id __attribute__((tls_model("initial-exec"))) = 0;

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
  OwnWorkScope() { ++t_hook_depth; }
  ~OwnWorkScope() { --t_hook_depth; }
  OwnWorkScope(const OwnWorkScope&) = delete;
  OwnWorkScope& operator=(const OwnWorkScope&) = delete;

 private:
  ErrnoKeeper errno_;  // restored after the depth (members are destroyed after the body)
};

}  // namespace gpumem
