#include "core/stack_capture.h"

#include <dlfcn.h>
#include <string.h>

namespace gpumem {
namespace {

using UnwBacktraceFn = int (*)(void** buffer, int size);
using SetCachingPolicyFn = int (*)(void* address_space, int policy);
constexpr int kUnwCachePerThread = 2;   // UNW_CACHE_PER_THREAD
constexpr size_t kScratchFrames = 288;  // the deepest kept stack plus gpumem's own frames

UnwBacktraceFn g_unw_backtrace = nullptr;

void* OpenLibunwind(const char* explicit_path, void* (*real_dlopen)(const char*, int)) {
  constexpr int kFlags = RTLD_NOW | RTLD_LOCAL;
  if (explicit_path != nullptr && explicit_path[0] != '\0')
    return real_dlopen(explicit_path, kFlags);
  // Next to libgpumem.so first: that is where a carried copy lives on machines without one.
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&OpenLibunwind), &self) != 0 && self.dli_fname != nullptr) {
    char path[4096];
    const char* slash = strrchr(self.dli_fname, '/');
    size_t dir_length = slash != nullptr ? static_cast<size_t>(slash - self.dli_fname) : 0;
    static constexpr char kName[] = "/libunwind.so.8";
    if (dir_length > 0 && dir_length + sizeof(kName) < sizeof(path)) {
      memcpy(path, self.dli_fname, dir_length);
      memcpy(path + dir_length, kName, sizeof(kName));
      if (void* handle = real_dlopen(path, kFlags)) return handle;
    }
  }
  return real_dlopen("libunwind.so.8", kFlags);
}

}  // namespace

bool InitStackCapture(const char* explicit_path, void* (*real_dlopen)(const char*, int),
                      void* (*real_dlsym)(void*, const char*)) {
  void* handle = OpenLibunwind(explicit_path, real_dlopen);
  if (handle == nullptr) return false;
  auto backtrace = reinterpret_cast<UnwBacktraceFn>(real_dlsym(handle, "unw_backtrace"));
  auto set_policy =
      reinterpret_cast<SetCachingPolicyFn>(real_dlsym(handle, "_ULx86_64_set_caching_policy"));
  auto* address_space = static_cast<void**>(real_dlsym(handle, "_ULx86_64_local_addr_space"));
  if (backtrace == nullptr) return false;
  // Without the per-thread cache every unwind re-parses .eh_frame under a global lock.
  if (set_policy != nullptr && address_space != nullptr)
    set_policy(*address_space, kUnwCachePerThread);
  g_unw_backtrace = backtrace;
  return true;
}

bool StackCaptureAvailable() { return g_unw_backtrace != nullptr; }

size_t CaptureStack(uintptr_t caller_pc, uint64_t* frames, size_t capacity) {
  if (g_unw_backtrace == nullptr || capacity == 0) return 0;
  void* scratch[kScratchFrames];
  // Unwinding costs per frame: stop a little past what the caller keeps (our frames come first).
  constexpr size_t kOwnFramesAllowance = 16;
  size_t wanted = capacity + kOwnFramesAllowance;
  if (wanted > kScratchFrames) wanted = kScratchFrames;
  int depth = g_unw_backtrace(scratch, static_cast<int>(wanted));
  if (depth <= 0) return 0;
  // Drop gpumem's own frames: everything above the hooked function's return address.
  int first = 0;
  while (first < depth && reinterpret_cast<uintptr_t>(scratch[first]) != caller_pc) ++first;
  if (first == depth) first = 0;  // not found (tail call): keep everything rather than nothing
  size_t count = 0;
  for (int i = first; i < depth && count < capacity; ++i) {
    frames[count++] = reinterpret_cast<uintptr_t>(scratch[i]);
  }
  return count;
}

}  // namespace gpumem
