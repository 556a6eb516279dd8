// Process lifecycle of the preload library: start-up, fork, exit.
#include <pthread.h>
#include <stdlib.h>

#include <atomic>

#include "core/hot_path.h"
#include "core/real_loader.h"
#include "core/recorder.h"
#include "cupti/subscriber.h"
#include "interpose/hook_guard.h"

namespace gpumem {
namespace {

GPUMEM_HOT_DATA std::atomic<bool> g_initialized{false};

void ChildAfterFork() { recorder::AfterForkInChild(); }

// The footer is written at exit, once the exit status is known. glibc runs exit handlers in the
// reverse order of their registration, and the dynamic linker's _dl_fini, which runs every
// library's destructors (ours too), is one of them, registered by __libc_start_main. Ours is
// usually registered earlier, from our constructor, so it runs after every destructor: our
// destructor then leaves the footer to it (every library's teardown frees are then recorded
// before the footer). Registered after _dl_fini (gpumem loaded later, as CUPTI's injection
// library), it runs first and only notes the status; our destructor then writes the footer.
enum ExitStep : int { kRunning, kStatusNoted, kFooterLeftToExitHandler };
std::atomic<int> g_exit_step{kRunning};
std::atomic<bool> g_exit_handler_registered{false};

void WriteFooter() {
  ++Locals().hook_depth;
  recorder::Finish();
  --Locals().hook_depth;
}

void AtExit(int status, void*) {
  recorder::NoteExitStatus(status);
  if (g_exit_step.exchange(kStatusNoted) == kFooterLeftToExitHandler) WriteFooter();
}

}  // namespace

GPUMEM_COLD void InitializeRecorder() {
  if (g_initialized.load(std::memory_order_acquire)) return;
  ++Locals().hook_depth;  // nothing done here is recorded
  recorder::Init(LoaderFunctions{&RealDlopen, &RealDlsym});
  static std::atomic<bool> fork_handler_registered{false};
  if (!fork_handler_registered.exchange(true)) pthread_atfork(nullptr, nullptr, &ChildAfterFork);
  if (!g_exit_handler_registered.exchange(true) && on_exit(&AtExit, nullptr) != 0) {
    g_exit_handler_registered.store(false);
  }
  g_initialized.store(true, std::memory_order_release);
  --Locals().hook_depth;
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
  ++gpumem::Locals().hook_depth;
  gpumem::cupti::Stop();  // CUPTI's last activity records before the footer
  --gpumem::Locals().hook_depth;
  int running = gpumem::kRunning;
  if (gpumem::g_exit_handler_registered.load() &&
      gpumem::g_exit_step.compare_exchange_strong(running, gpumem::kFooterLeftToExitHandler)) {
    return;  // the exit handler comes after us and writes the footer with the exit status
  }
  gpumem::WriteFooter();
}
