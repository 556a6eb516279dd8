// Per-thread flags shared by the two layers that see CUDA calls in the process: the interposed
// entry points (interpose/) and the CUPTI callbacks (cupti/). Initial-exec TLS, a few bytes.
#pragma once

#include <cstdint>

namespace gpumem {

// > 0 while the thread is inside an interposed call (or inside gpumem itself). Interposition
// records the outermost call only; a CUPTI callback that finds it > 0 is seeing a call that
// interposition records, and leaves it alone: each operation is recorded exactly once.
inline __thread int t_hook_depth __attribute__((tls_model("initial-exec"))) = 0;

// Set by CUPTI's launch callback when the launch is an interposed one: the wrapper that records
// it after the call takes CUPTI's correlation id from here (0: CUPTI did not see it).
inline __thread uint64_t t_launch_correlation_id __attribute__((tls_model("initial-exec"))) = 0;

}  // namespace gpumem
