#include "cupti/subscriber.h"

#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>

#include "core/driver_queries.h"
#include "core/hot_path.h"
#include "core/spin_lock.h"
#include "core/thread_flags.h"
#include "cupti/activity.h"
#include "cupti/callback_translation.h"
#include "cupti/callbacks.h"
#include "cupti/fixed_text.h"
#include "cupti/library_search.h"

namespace gpumem::cupti {
namespace {

using proto::CuptiState;

// The CUPTI functions used, resolved with dlsym from the libcupti loaded.
struct CuptiFunctions {
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) subscribe_v2 = nullptr;  // CUDA 12.6+: names the holder on failure
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityDisable) activity_disable = nullptr;
  decltype(&cuptiActivityGetNextRecord) get_next_record = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiFinalize) finalize = nullptr;
};

CuptiFunctions g_cupti;

constexpr char kPoolsFromAttributes[] =
    "; memory pools from their attributes (GPUMEM_CUPTI_POOLS=1: CUPTI's records)";
// The subscription and the activity kinds gpumem holds; changed under g_subscription_lock (Start
// and YieldSubscription may run on different threads).
std::atomic_flag g_subscription_lock = ATOMIC_FLAG_INIT;
CUpti_SubscriberHandle g_subscriber = nullptr;
bool g_pool_records = false;
bool g_launch_callbacks = false;  // whether the launch APIs' callbacks were enabled too
bool g_kernel_records = false;
std::atomic<bool> g_activity_registered{false};
std::atomic<bool> g_stopped{false};
pid_t g_started_pid = 0;

// Large (40 KiB): kept out of the stack of whichever thread starts the subscriber.
LoadedCudaLibraries g_loaded;
CandidatePaths g_candidates;

template <typename Fn>
void Resolve(const LoaderFunctions& loader, void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(loader.dlsym(handle, name));
}

void ResolveAll(const LoaderFunctions& loader, void* handle, CuptiFunctions* f) {
  Resolve(loader, handle, "cuptiSubscribe", &f->subscribe);
  Resolve(loader, handle, "cuptiSubscribe_v2", &f->subscribe_v2);
  Resolve(loader, handle, "cuptiUnsubscribe", &f->unsubscribe);
  Resolve(loader, handle, "cuptiEnableCallback", &f->enable_callback);
  Resolve(loader, handle, "cuptiGetResultString", &f->result_string);
  Resolve(loader, handle, "cuptiActivityRegisterCallbacks", &f->register_callbacks);
  Resolve(loader, handle, "cuptiActivityEnable", &f->activity_enable);
  Resolve(loader, handle, "cuptiActivityDisable", &f->activity_disable);
  Resolve(loader, handle, "cuptiActivityGetNextRecord", &f->get_next_record);
  Resolve(loader, handle, "cuptiActivityFlushAll", &f->flush_all);
  Resolve(loader, handle, "cuptiFinalize", &f->finalize);
}

void AppendResult(FixedText& text, const CuptiFunctions& f, CUptiResult result) {
  const char* name = nullptr;
  if (f.result_string != nullptr && f.result_string(result, &name) == CUPTI_SUCCESS &&
      name != nullptr) {
    text.Append(name);
  } else {
    text.Append("CUptiResult ").Append(static_cast<uint64_t>(result));
  }
}

// The last status reported, so that a later change (the memory callbacks retired) restates it.
char g_last_detail[1024];
bool g_last_kernel_timing = false;

CuptiState Report(CuptiState state, const char* detail, bool kernel_timing) {
  CurrentSinks().status(state, detail, kernel_timing);
  if (detail != g_last_detail) snprintf(g_last_detail, sizeof(g_last_detail), "%s", detail);
  g_last_kernel_timing = kernel_timing;
  return state;
}

// The memory callbacks' probation (RetireMemoryCallbacksIfRedundant).
constexpr uint32_t kMemoryProbationCalls = 1000;
std::atomic<uint32_t> g_wrapped_memory_calls{0};
std::atomic<bool> g_unwrapped_memory_call{false};
GPUMEM_HOT_DATA std::atomic<bool> g_memory_callbacks_retired{false};  // read by every hook
std::atomic<bool> g_detach_pending{false};  // retired, CUPTI to be detached at an exit callback
bool g_keep_memory_callbacks = false;       // GPUMEM_CUPTI_CATCH_ALL=1

void StopAtExit() { Stop(); }

// Start's steps. Each failing one says why in `text` and sets *failure to the state to report.

// 1. Finds and loads libcupti and resolves the functions used: the path loaded, or null.
const char* LoadCupti(const StartConfig& config, FixedText& text, CuptiFunctions* f,
                      CuptiState* failure) {
  g_loaded.cupti[0] = g_loaded.runtime[0] = g_loaded.driver[0] = '\0';
  FindLoadedCudaLibraries(&g_loaded);
  g_candidates.Clear();
  BuildCandidates(config.library_path, g_loaded, &g_candidates);
  char searched[900];
  size_t index = 0;
  void* handle = OpenFirst(g_candidates, config.loader.dlopen, &index, searched, sizeof(searched));
  if (handle == nullptr) {
    if (config.library_path != nullptr && config.library_path[0] != '\0') {
      text.Append("GPUMEM_CUPTI_LIB=").Append(config.library_path).Append(": ");
    }
    text.Append(searched);
    *failure = CuptiState::kNotFound;
    return nullptr;
  }
  const char* path = g_candidates[index];
  ResolveAll(config.loader, handle, f);
  if ((f->subscribe == nullptr && f->subscribe_v2 == nullptr) || f->enable_callback == nullptr) {
    text.Append(path).Append(": not a usable libcupti (no cuptiSubscribe / cuptiEnableCallback)");
    dlclose(handle);  // nothing of it ran
    *failure = CuptiState::kFailed;
    return nullptr;
  }
  return path;
}

// 2. Subscribes (CUPTI allows one subscriber per process): the subscriber, or null.
CUpti_SubscriberHandle Subscribe(const CuptiFunctions& f, const char* path, FixedText& text,
                                 CuptiState* failure) {
  CUpti_SubscriberHandle subscriber = nullptr;
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
  CUptiResult result;
  if (f.subscribe_v2 != nullptr) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "gpumem";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN;
    result = f.subscribe_v2(&subscriber, &OnCallback, nullptr, &params);
  } else {
    result = f.subscribe(&subscriber, &OnCallback, nullptr);
  }
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    holder[sizeof(holder) - 1] = '\0';
    text.Append("another CUPTI client holds the only subscription (");
    if (holder[0] != '\0') text.Append(holder).Append("; ");
    text.Append(
        "e.g. torch.profiler/Kineto, Nsight, a debugger): no GPU kernel times, no CUPTI "
        "memory-pool records, no CUPTI kernel names or correlation ids, no catch-all for driver "
        "calls gpumem does not wrap; memory (pool sizes included) and launches are still recorded "
        "by interposition. Loaded ");
    text.Append(path);
    *failure = CuptiState::kOtherSubscriber;
    return nullptr;
  }
  if (result != CUPTI_SUCCESS || subscriber == nullptr) {
    text.Append(path).Append(": cuptiSubscribe failed: ");
    AppendResult(text, f, result);
    *failure = CuptiState::kFailed;
    return nullptr;
  }
  return subscriber;
}

// 3. The driver callbacks: launches (unless `launches` is off) and every memory API gpumem
// records. How many were enabled, of *wanted.
size_t EnableDriverCallbacks(const CuptiFunctions& f, CUpti_SubscriberHandle subscriber,
                             bool launches, size_t* wanted) {
  size_t enabled = 0;
  *wanted = 0;
  for (CUpti_CallbackId cbid : kDriverCallbacks) {
    if (IsLaunchCallback(cbid) && !launches) continue;
    ++*wanted;
    if (f.enable_callback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid) == CUPTI_SUCCESS) {
      ++enabled;
    }
  }
  return enabled;
}

// The activity records asked for that will not come.
void AppendNoRecords(const StartConfig& config, FixedText& text) {
  if (config.pools) text.Append(": no CUPTI memory-pool records");
  if (config.kernel_times) text.Append(config.pools ? ", no kernel times" : ": no kernel times");
}

// 4b. Turns on the activity kinds asked for, once the buffer callbacks are registered: whether
// kernel times will come.
bool EnableActivityKinds(const StartConfig& config, const CuptiFunctions& f, FixedText& text) {
  if (config.pools) {
    const CUptiResult result = f.activity_enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    g_pool_records = result == CUPTI_SUCCESS;
    if (result != CUPTI_SUCCESS) {
      text.Append("; no memory-pool records (");
      AppendResult(text, f, result);
      text.Append(")");
    }
  } else {
    text.Append(kPoolsFromAttributes);
  }
  bool kernel_timing = false;
  if (config.kernel_times) {
    const CUptiResult result = f.activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    kernel_timing = result == CUPTI_SUCCESS;
    g_kernel_records = kernel_timing;
    if (!kernel_timing) {
      text.Append("; no kernel times (");
      AppendResult(text, f, result);
      text.Append(")");
    }
  }
  return kernel_timing;
}

// 4. Activity records: memory pools always, kernel execution times when asked for. Whether kernel
// times will come; `text` says what will not.
bool EnableActivityRecords(const StartConfig& config, const CuptiFunctions& f, FixedText& text) {
  if (f.register_callbacks == nullptr || f.activity_enable == nullptr ||
      f.get_next_record == nullptr || f.flush_all == nullptr) {
    text.Append("; no activity API");
    AppendNoRecords(config, text);
    return false;
  }
  if (!config.pools && !config.kernel_times) {
    // Registering buffers with no activity kind on still costs every driver call a detour
    // through libcupti.
    text.Append(kPoolsFromAttributes);
    return false;
  }
  SetGetNextRecord(f.get_next_record);
  const CUptiResult result = f.register_callbacks(&BufferRequested, &BufferCompleted);
  if (result != CUPTI_SUCCESS) {
    text.Append("; cuptiActivityRegisterCallbacks failed (");
    AppendResult(text, f, result);
    text.Append(")");
    AppendNoRecords(config, text);
    return false;
  }
  g_activity_registered.store(true, std::memory_order_release);
  // Flush before libcupti's own destructors can run: atexit handlers run before any library's.
  static bool at_exit_registered = false;
  if (!at_exit_registered) at_exit_registered = atexit(&StopAtExit) == 0;
  return EnableActivityKinds(config, f, text);
}

}  // namespace

CuptiState Start(const StartConfig& config) {
  char detail[1024];
  FixedText text(detail, sizeof(detail));
  if (!config.cupti) {
    return Report(CuptiState::kDisabled,
                  "GPUMEM_CUPTI=0: no CUPTI subscriber; memory and launches are recorded by "
                  "interposition alone",
                  false);
  }
  if (config.loader.dlopen == nullptr || config.loader.dlsym == nullptr) {
    return Report(CuptiState::kFailed, "the real dlopen/dlsym could not be found", false);
  }
  CuptiState failure = CuptiState::kFailed;
  CuptiFunctions f;
  const char* path = LoadCupti(config, text, &f, &failure);
  if (path == nullptr) return Report(failure, detail, false);
  driver::SetLoader(config.loader);

  SpinGuard guard(g_subscription_lock);  // to the end: YieldSubscription may run on another thread
  CUpti_SubscriberHandle subscriber = Subscribe(f, path, text, &failure);
  if (subscriber == nullptr) return Report(failure, detail, false);
  size_t wanted = 0;
  const size_t enabled = EnableDriverCallbacks(f, subscriber, config.launches, &wanted);
  if (enabled == 0) {
    if (f.unsubscribe != nullptr) f.unsubscribe(subscriber);  // leave the slot to other tools
    text.Append(path).Append(": cuptiEnableCallback failed for every driver callback");
    return Report(CuptiState::kFailed, detail, false);
  }
  g_cupti = f;
  g_subscriber = subscriber;
  g_launch_callbacks = config.launches;
  g_keep_memory_callbacks = config.keep_memory_callbacks;
  g_started_pid = getpid();

  text.Append(path);
  if (enabled < wanted) {
    text.Append("; ")
        .Append(static_cast<uint64_t>(kDriverCallbackCount - enabled))
        .Append(" of ")
        .Append(static_cast<uint64_t>(kDriverCallbackCount))
        .Append(" driver callbacks could not be enabled");
  }
  const bool kernel_timing = EnableActivityRecords(config, f, text);
  return Report(CuptiState::kActive, detail, kernel_timing);
}

void YieldSubscription(const void* callback, const char* name) {
  if (callback == reinterpret_cast<const void*>(&OnCallback)) return;
  SpinGuard guard(g_subscription_lock);
  if (g_subscriber == nullptr) return;
  OwnWorkScope own_work;
  // The activity API is process-wide: the newcomer will register its own buffer callbacks, so
  // every buffer CUPTI holds of ours comes back now (and is never handed to the newcomer's).
  if (g_activity_registered.exchange(false)) {
    if (g_cupti.activity_disable != nullptr) {
      if (g_pool_records) g_cupti.activity_disable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
      if (g_kernel_records) g_cupti.activity_disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    }
    g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  if (g_cupti.unsubscribe != nullptr) g_cupti.unsubscribe(g_subscriber);
  g_subscriber = nullptr;
  char detail[1024];
  FixedText text(detail, sizeof(detail));
  text.Append("gave the CUPTI subscription up to a tool that asked for it later");
  Dl_info info{};
  if (name != nullptr && name[0] != '\0') {
    text.Append(" (").Append(name).Append(")");
  } else if (callback != nullptr && dladdr(callback, &info) != 0 && info.dli_fname != nullptr) {
    text.Append(" (").Append(info.dli_fname).Append(")");
  }
  text.Append(
      ", e.g. torch.profiler/Kineto or Nsight: from then on no GPU kernel times, no CUPTI "
      "memory-pool records, no CUPTI kernel names or correlation ids, no catch-all for driver "
      "calls gpumem does not wrap; memory (pool sizes included) and launches are still recorded "
      "by interposition");
  Report(CuptiState::kOtherSubscriber, detail, false);
}

#ifdef GPUMEM_BENCH_BUILD
void SetCallbacksEnabled(bool enabled) {
  if (g_subscriber == nullptr || g_cupti.enable_callback == nullptr) return;
  OwnWorkScope own_work;
  const bool memory_retired = g_memory_callbacks_retired.load(std::memory_order_relaxed);
  for (CUpti_CallbackId cbid : kDriverCallbacks) {
    if (IsLaunchCallback(cbid) ? !g_launch_callbacks : memory_retired) continue;
    g_cupti.enable_callback(enabled ? 1 : 0, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  }
}
#endif

void NoteMemoryCallback(bool wrapped) {
  if (!wrapped) {
    g_unwrapped_memory_call.store(true, std::memory_order_relaxed);
  } else if (g_wrapped_memory_calls.load(std::memory_order_relaxed) < kMemoryProbationCalls) {
    g_wrapped_memory_calls.fetch_add(1, std::memory_order_relaxed);
  }
}

void RestartMemoryProbation() {
  g_wrapped_memory_calls.store(0, std::memory_order_relaxed);
  g_unwrapped_memory_call.store(false, std::memory_order_relaxed);
}

// Whether, once the memory callbacks retire, nothing is left for CUPTI to do.
bool NothingElseAskedOfCupti() {
  return !g_launch_callbacks && !g_pool_records && !g_kernel_records;
}

void DisableMemoryCallbacks() {
  for (CUpti_CallbackId cbid : kDriverCallbacks) {
    if (!IsLaunchCallback(cbid)) {
      g_cupti.enable_callback(0, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
    }
  }
}

// The status restated when the memory callbacks retire: what was, plus what happened to them.
void ReportRetired(const char* what_then) {
  char detail[sizeof(g_last_detail)];
  FixedText text(detail, sizeof(detail));
  text.Append(g_last_detail)
      .Append("; memory callbacks off after ")
      .Append(static_cast<uint64_t>(kMemoryProbationCalls))
      .Append(
          " memory calls that interposition recorded, none it missed (GPUMEM_CUPTI_CATCH_ALL=1 "
          "keeps them)")
      .Append(what_then);
  Report(CuptiState::kActive, detail, g_last_kernel_timing);
}

GPUMEM_HOT void RetireMemoryCallbacksIfRedundant() {
  if (g_memory_callbacks_retired.load(std::memory_order_relaxed) ||
      g_wrapped_memory_calls.load(std::memory_order_relaxed) < kMemoryProbationCalls ||
      g_unwrapped_memory_call.load(std::memory_order_relaxed) || g_keep_memory_callbacks) {
    return;
  }
  SpinGuard guard(g_subscription_lock);
  if (g_subscriber == nullptr || g_memory_callbacks_retired.exchange(true)) return;
  // Loaded and attached, CUPTI costs every driver call a detour through libcupti even with no
  // callback on (0.4 % of a PyTorch step's samples on the H100, unsubscribed or not): when
  // nothing else is asked of it, it is detached instead, which NVIDIA's documentation wants done
  // from a driver call's exit callback: the next memory call's (DetachAtExitIfPending).
  if (NothingElseAskedOfCupti() && g_cupti.finalize != nullptr) {
    g_detach_pending.store(true, std::memory_order_release);
    return;
  }
  OwnWorkScope own_work;
  DisableMemoryCallbacks();
  ReportRetired("");
}

void DetachAtExitIfPending() {
  if (!g_detach_pending.load(std::memory_order_relaxed)) return;
  SpinGuard guard(g_subscription_lock);
  if (!g_detach_pending.exchange(false) || g_subscriber == nullptr) return;
  OwnWorkScope own_work;
  const CUptiResult result = g_cupti.finalize();
  if (result == CUPTI_SUCCESS) {
    g_subscriber = nullptr;
    ReportRetired(
        "; then CUPTI detached (cuptiFinalize), nothing else being asked of it "
        "(GPUMEM_CUPTI_LAUNCHES=1, GPUMEM_CUPTI_POOLS=1 or GPUMEM_KERNEL_TIMES=1 keep it)");
  } else {
    DisableMemoryCallbacks();
    ReportRetired("; CUPTI could not be detached (cuptiFinalize failed)");
  }
}

void Stop() {
  if (!g_activity_registered.load(std::memory_order_acquire)) return;
  if (g_stopped.exchange(true)) return;
  // A child after fork has a copy of CUPTI's state but not its threads: flushing could wait on
  // a lock a parent thread held at fork time.
  if (getpid() != g_started_pid || g_cupti.flush_all == nullptr) return;
  OwnWorkScope own_work;
  g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

}  // namespace gpumem::cupti
