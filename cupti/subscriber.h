// The CUPTI subscriber: loads libcupti (dlopen, never linked), subscribes to the driver callbacks
// of launches and memory calls, enables the activity records gpumem uses, and says in the trace
// what became of it (CuptiStatus). Starting never fails the host: every error is recorded as a
// status and the program carries on, recorded by interposition alone.
#pragma once

#include "core/recorder.h"

namespace gpumem::cupti {

// The first call starts the subscriber; later calls return at once (one atomic load). Called by
// the preload library at each recorded call (so a process that never calls CUDA never loads
// libcupti) and by InitializeInjection (CUDA_INJECTION64_PATH). Never waits: a call made while
// another thread is starting returns without CUPTI.
void StartOnce();

// Delivers the activity records CUPTI still holds (forced flush), once, in the process that
// started the subscriber. Called at exit before the footer (and earlier from an atexit handler,
// while libcupti is certainly still loaded). Idempotent.
void Stop();

// Another CUPTI client (torch.profiler/Kineto, Nsight) asks to subscribe while gpumem holds the
// only subscription: gpumem hands it over rather than make that tool fail. Its activity records
// are flushed, its activity kinds disabled, it unsubscribes, and a CuptiStatus OTHER_SUBSCRIBER
// saying so is recorded; interposition records on alone. `callback` and `name` (either may be
// null) identify the newcomer in that status. Called by the exported cuptiSubscribe /
// cuptiSubscribe_v2 (cupti/entry.cc) before they forward the call. No-op when gpumem holds nothing.
void YieldSubscription(const void* callback, const char* name);

#ifdef GPUMEM_BENCH_BUILD
// The benchmarks' build only: turns the driver callbacks gpumem enabled off and on again (a paused
// recorder, recorder::SetPausedForBenchmark, leaves CUPTI's cost out too). No-op without a
// subscription.
void SetCallbacksEnabled(bool enabled);
#endif

// The memory callbacks are a catch-all for memory calls that reach the driver by a path
// interposition does not wrap, and CUPTI's callback on each costs the call ~0.4 µs (H100, 2.5 % of
// a PyTorch training step). The callbacks tell which calls interposition recorded already
// (NoteMemoryCallback, at each memory call's API_EXIT); once 1000 were and none was missed, the
// next hook turns the memory callbacks off (RetireMemoryCallbacksIfRedundant, one relaxed load
// until then) and restates the CuptiStatus saying so. One missed call keeps them for good, as
// does GPUMEM_CUPTI_CATCH_ALL=1.
void NoteMemoryCallback(bool wrapped);
void RetireMemoryCallbacksIfRedundant();
// Where nothing else is asked of CUPTI (no launch callbacks, no activity kinds), retiring the
// memory callbacks detaches CUPTI altogether instead (cuptiFinalize), at the exit callback of the
// next memory call, as NVIDIA's documentation asks; the status is restated then. Called by the
// callback at every API_EXIT: one relaxed load until a detach is pending.
void DetachAtExitIfPending();
// Starts the probation again (tests: a process whose earlier calls must not count).
void RestartMemoryProbation();

struct StartConfig {
  bool cupti = true;          // GPUMEM_CUPTI
  bool kernel_times = false;  // GPUMEM_KERNEL_TIMES
  bool pools = false;         // GPUMEM_CUPTI_POOLS: memory-pool activity records
  // GPUMEM_CUPTI_LAUNCHES (implied by kernel_times, whose records join launches by correlation
  // id): callbacks on the launch APIs too. Off by default: interposition sees every launch, and a
  // CUPTI callback on each adds its cost to the program's hottest driver call.
  bool launches = false;
  bool keep_memory_callbacks = false;  // GPUMEM_CUPTI_CATCH_ALL
  const char* library_path = nullptr;  // GPUMEM_CUPTI_LIB
  LoaderFunctions loader{};            // the real dlopen / dlsym
};

// The work of StartOnce with its inputs spelled out (tests). Records the CuptiStatus through the
// sinks (cupti/callbacks.h) and returns its state. Not thread-safe: StartOnce serializes it.
proto::CuptiState Start(const StartConfig& config);

}  // namespace gpumem::cupti
