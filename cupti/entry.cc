// How the subscriber is started in a process: at the preload library's first recorded call, or by
// the CUDA driver itself when libgpumem.so is named in CUDA_INJECTION64_PATH. And how it steps
// aside when another tool subscribes later: libgpumem.so exports cuptiSubscribe / _v2.
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>

#include <atomic>

#include "core/hot_path.h"
#include "core/options.h"
#include "core/real_loader.h"
#include "core/recorder.h"
#include "core/thread_flags.h"
#include "cupti/subscriber.h"

namespace gpumem::cupti {
namespace {

enum StartState : int { kNotStarted = 0, kStarting = 1, kStarted = 2 };
GPUMEM_HOT_DATA std::atomic<int> g_start_state{kNotStarted};

}  // namespace

GPUMEM_HOT void StartOnce() {
  if (g_start_state.load(std::memory_order_acquire) != kNotStarted) {
    RetireMemoryCallbacksIfRedundant();
    return;
  }
  int expected = kNotStarted;
  if (!g_start_state.compare_exchange_strong(expected, kStarting, std::memory_order_acq_rel)) {
    return;
  }
  if (recorder::Enabled()) {
    OwnWorkScope own_work;  // what libcupti does while starting is not recorded (nor called back)
    const RecorderOptions& options = recorder::Options();
    StartConfig config;
    config.cupti = options.cupti;
    config.kernel_times = options.kernel_times;
    config.pools = options.cupti_pools;
    config.launches = options.cupti_launches || options.kernel_times;
    config.keep_memory_callbacks = options.cupti_catch_all;
    config.library_path = options.cupti_path;
    config.loader = LoaderFunctions{&RealDlopen, &RealDlsym};
    // Loading libcupti takes kilobytes of stack; the first hook may come on a small one.
    recorder::OnOwnStack([&] { Start(config); });
  }
  g_start_state.store(kStarted, std::memory_order_release);
}

// The definition of `name` the caller would have reached without libgpumem: looked up from the
// caller's own object (its dependencies: the libcupti it links), else the next one after us.
template <typename Fn>
Fn CallersDefinition(const char* name, uintptr_t caller, void* self) {
  void* found = nullptr;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(caller), &info) != 0 && info.dli_fname != nullptr) {
    if (void* object = RealDlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) {
      found = RealDlsym(object, name);
      dlclose(object);
    }
  }
  if (found == nullptr || found == self) found = NextSymbol(name);
  return found == self ? nullptr : reinterpret_cast<Fn>(found);
}

}  // namespace gpumem::cupti

// A tool subscribing after gpumem (torch.profiler starting mid-run) gets the subscription instead
// of CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED. gpumem's own subscription does not come
// through here (it calls libcupti's function by its handle).
extern "C" __attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  const int saved_errno = errno;
  auto real = gpumem::cupti::CallersDefinition<decltype(&cuptiSubscribe)>(
      "cuptiSubscribe", reinterpret_cast<uintptr_t>(__builtin_return_address(0)),
      reinterpret_cast<void*>(&cuptiSubscribe));
  if (real != nullptr) {
    gpumem::cupti::YieldSubscription(reinterpret_cast<const void*>(callback), nullptr);
  }
  errno = saved_errno;
  return real != nullptr ? real(subscriber, callback, userdata) : CUPTI_ERROR_NOT_INITIALIZED;
}

extern "C" __attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                  CUpti_SubscriberParams* params) {
  const int saved_errno = errno;
  auto real = gpumem::cupti::CallersDefinition<decltype(&cuptiSubscribe_v2)>(
      "cuptiSubscribe_v2", reinterpret_cast<uintptr_t>(__builtin_return_address(0)),
      reinterpret_cast<void*>(&cuptiSubscribe_v2));
  if (real != nullptr) {
    gpumem::cupti::YieldSubscription(reinterpret_cast<const void*>(callback),
                                     params != nullptr ? params->subscriberName : nullptr);
  }
  errno = saved_errno;
  return real != nullptr ? real(subscriber, callback, userdata, params)
                         : CUPTI_ERROR_NOT_INITIALIZED;
}

// CUDA_INJECTION64_PATH=libgpumem.so: the driver loads the library during cuInit and calls this.
// 1 tells it the injection succeeded (gpumem never makes the program's cuInit fail).
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  gpumem::cupti::StartOnce();
  return 1;
}
