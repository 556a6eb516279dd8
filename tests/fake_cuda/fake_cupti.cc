// A fake libcupti (libcupti.so in lib/fake) for the subscriber's tests on machines without a GPU:
// cuptiSubscribe takes the one subscription, cuptiEnableCallback remembers which driver callbacks
// are on, cuptiFinalize drops both, and fake_cupti_enabled(), _subscribed() and _finalized() let a
// test ask. No activity API: the subscriber records that it
// has none and carries on.
#include <cupti.h>

#include <set>
#include <utility>

namespace {

std::set<std::pair<int, unsigned>> g_enabled;  // (domain, callback id)
bool g_subscribed = false;
bool g_finalized = false;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUptiResult cuptiSubscribe(
    CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void*) {
  if (g_subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_subscribed = true;
  static int handle;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&handle);
  return CUPTI_SUCCESS;
}

__attribute__((visibility("default"))) CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  g_subscribed = false;
  g_enabled.clear();
  return CUPTI_SUCCESS;
}

__attribute__((visibility("default"))) CUptiResult cuptiEnableCallback(uint32_t enable,
                                                                       CUpti_SubscriberHandle,
                                                                       CUpti_CallbackDomain domain,
                                                                       CUpti_CallbackId cbid) {
  if (enable) {
    g_enabled.insert({domain, cbid});
  } else {
    g_enabled.erase({domain, cbid});
  }
  return CUPTI_SUCCESS;
}

__attribute__((visibility("default"))) CUptiResult cuptiFinalize() {
  g_subscribed = false;
  g_enabled.clear();
  g_finalized = true;
  return CUPTI_SUCCESS;
}

__attribute__((visibility("default"))) CUptiResult cuptiGetResultString(CUptiResult,
                                                                        const char** text) {
  *text = "fake CUPTI error";
  return CUPTI_SUCCESS;
}

// For tests: whether cuptiFinalize detached CUPTI.
__attribute__((visibility("default"))) int fake_cupti_finalized() { return g_finalized ? 1 : 0; }

// For tests: whether someone holds the subscription.
__attribute__((visibility("default"))) int fake_cupti_subscribed() { return g_subscribed ? 1 : 0; }

// For tests: whether the driver callback `cbid` is on.
__attribute__((visibility("default"))) int fake_cupti_enabled(unsigned cbid) {
  return g_enabled.count({CUPTI_CB_DOMAIN_DRIVER_API, cbid}) > 0;
}

}  // extern "C"
