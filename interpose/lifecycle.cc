// Process lifecycle of the preload library: start-up, fork, exit.
#include <pthread.h>

#include <atomic>

#include "core/hot_path.h"
#include "core/recorder.h"
#include "cupti/subscriber.h"
#include "interpose/hook_guard.h"
#include "interpose/loader.h"

namespace gpumem {
namespace {

std::atomic<bool> g_initialized{false};

void ChildAfterFork() { recorder::AfterForkInChild(); }

}  // namespace

GPUMEM_COLD void InitializeRecorder() {
  if (g_initialized.load(std::memory_order_acquire)) return;
  ++t_hook_depth;  // nothing done here is recorded
  recorder::Init(LoaderFunctions{&RealDlopen, &RealDlsym});
  static std::atomic<bool> fork_handler_registered{false};
  if (!fork_handler_registered.exchange(true)) pthread_atfork(nullptr, nullptr, &ChildAfterFork);
  g_initialized.store(true, std::memory_order_release);
  --t_hook_depth;
}

// Also reached from the first hook, which may run before our constructor (another preloaded
// library's constructor can call CUDA).
GPUMEM_HOT void EnsureRecorderInitialized() {
  if (!g_initialized.load(std::memory_order_acquire)) [[unlikely]]
    InitializeRecorder();
}

}  // namespace gpumem

__attribute__((constructor)) static void GpumemStart() { gpumem::EnsureRecorderInitialized(); }

// Runs late in exit (a preloaded library is finalized after the libraries loaded after it), so
// libcudart's own teardown frees are usually recorded before the footer. Later ones still are.
__attribute__((destructor)) static void GpumemStop() {
  ++gpumem::t_hook_depth;
  gpumem::cupti::Stop();  // CUPTI's last activity records before the footer
  gpumem::recorder::Finish();
  --gpumem::t_hook_depth;
}
