#include "core/stack_capture.h"

#include <dlfcn.h>
#include <string.h>

#include <algorithm>
#include <atomic>

#include "core/eh_frame_unwinder.h"
#include "core/hot_path.h"
#include "core/own_stack.h"
#include "core/self_timing.h"
#include "core/stack_table.h"

namespace gpumem {
namespace {

using UnwBacktraceFn = int (*)(void** buffer, int size);
using SetCachingPolicyFn = int (*)(void* address_space, int policy);
constexpr int kUnwCachePerThread = 2;  // UNW_CACHE_PER_THREAD
constexpr size_t kScratchFrames = kUnwindScratchFrames;

GPUMEM_HOT_DATA UnwBacktraceFn g_unw_backtrace = nullptr;
GPUMEM_HOT_DATA bool g_fast_unwind = false;

// libunwind, on the thread's own stack (it needs kilobytes): its frames then begin with the
// frames of that switch, which CaptureStack drops with the rest of gpumem's own.
GPUMEM_COLD int UnwindWithLibunwind(void** frames, int capacity) {
  struct Call {
    void** frames;
    int capacity;
    int depth;
  } call{frames, capacity, 0};
  RunOnThreadStack(
      [](void* argument) {
        auto* c = static_cast<Call*>(argument);
        c->depth = g_unw_backtrace(c->frames, c->capacity);
      },
      &call);
  return call.depth;
}

// The fast unwinder where it can, libunwind where it cannot. Inlined into CaptureStack, so the
// fast one starts at the return address into CaptureStack.
__attribute__((always_inline)) inline int Unwind(void** frames, int capacity,
                                                 eh_frame_unwinder::ReplayNote** note,
                                                 uintptr_t anchor) {
  int depth = g_fast_unwind ? eh_frame_unwinder::Backtrace(frames, capacity, note, anchor) : -1;
  if (depth < 0) {
    if (g_fast_unwind) self_timing::Count(self_timing::kUnwindFallback);
    depth = eh_frame_unwinder::CutAtStop(frames, UnwindWithLibunwind(frames, capacity));
  }
  self_timing::Count(self_timing::kFramesUnwound, static_cast<uint64_t>(std::max(depth, 0)));
  return depth;
}

// Own frames expected before a hooked call site's return address, before it was learnt.
constexpr size_t kOwnFramesAllowance = 16;
// What was learnt, per call site: its return address in the low 56 bits (user-space addresses
// have 47), the count of gpumem frames above it in the top 8; 0 when nothing was. Shared by all
// threads (the count does not depend on the thread); a slot another site takes over is learnt
// again.
constexpr int kOwnShift = 56;
constexpr uint64_t kPcMask = (uint64_t{1} << kOwnShift) - 1;
constexpr uint64_t kMaxOwnFrames = 255;
constexpr size_t kOwnFrameSlots = 256;
std::atomic<uint64_t> g_own_frames[kOwnFrameSlots];

std::atomic<uint64_t>& OwnFramesSlot(uintptr_t caller_pc) {
  return g_own_frames[(caller_pc ^ caller_pc >> 8 ^ caller_pc >> 16) % kOwnFrameSlots];
}

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

bool InitStackCapture(const char* explicit_path, bool fast_unwind,
                      void* (*real_dlopen)(const char*, int),
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
  g_fast_unwind = fast_unwind && eh_frame_unwinder::Init(real_dlsym);
  return true;
}

bool StackCaptureAvailable() { return g_unw_backtrace != nullptr; }

GPUMEM_HOT void PrefetchStack(uintptr_t anchor) {
  if (g_fast_unwind) eh_frame_unwinder::PrefetchReplay(anchor);
}

void SetStackEnd(uintptr_t start, uintptr_t end) { eh_frame_unwinder::SetStop(start, end); }

GPUMEM_HOT size_t CaptureStack(uintptr_t caller_pc, uint64_t* frames, size_t capacity,
                               UnwindScratch* unwind_scratch, StackPrint* print, uintptr_t anchor) {
  if (g_unw_backtrace == nullptr || capacity == 0) return 0;
  void** scratch = unwind_scratch->frames;
  // The note of the unwind, when it is one the unwinder keeps: [0] the hash (never 0), [1] the
  // caller's pc, [2] capacity and kept, [3] the count. Read only with a print.
  eh_frame_unwinder::ReplayNote* note = nullptr;
  eh_frame_unwinder::ReplayNote** note_wanted = print != nullptr ? &note : nullptr;
  const uint64_t shape = print != nullptr ? capacity | uint64_t{print->kept} << 32 : 0;
  // Unwinding costs per frame, so it stops at what the caller keeps plus gpumem's own frames
  // (which come first). How many of those there are is fixed for a given hooked call site: learnt
  // the first time, then exact; until then an allowance.
  std::atomic<uint64_t>& learnt = OwnFramesSlot(caller_pc);
  const uint64_t known = learnt.load(std::memory_order_relaxed);
  const bool is_known = known != 0 && (known & kPcMask) == caller_pc;
  const size_t own = is_known ? static_cast<size_t>(known >> kOwnShift) : kOwnFramesAllowance;
  size_t wanted = std::min(capacity + own, kScratchFrames);
  int depth = Unwind(scratch, static_cast<int>(wanted), note_wanted, anchor);
  if (depth <= 0) return 0;
  if (note != nullptr && note->word[0] != 0) {
    if (note->word[1] == caller_pc && note->word[2] == shape) {
      print->hash = note->word[0];
      print->frames_written = false;
      return static_cast<size_t>(note->word[3]);
    }
    // Noted by another caller or shape (not expected): the frames were not written; again,
    // copying them.
    note = nullptr;
    depth = Unwind(scratch, static_cast<int>(wanted), nullptr, anchor);
    if (depth <= 0) return 0;
  }
  // Drop gpumem's own frames: everything above the hooked function's return address.
  int first = 0;
  if (is_known && static_cast<int>(own) < depth &&
      reinterpret_cast<uintptr_t>(scratch[own]) == caller_pc) {
    first = static_cast<int>(own);
  } else {
    while (first < depth && reinterpret_cast<uintptr_t>(scratch[first]) != caller_pc) ++first;
    const size_t full = std::min(capacity + static_cast<size_t>(first), kScratchFrames);
    if (first < depth && static_cast<size_t>(depth) == wanted && full > wanted) {
      // More own frames than learnt or allowed (another path to this call site): the unwind
      // stopped short of what the caller keeps, so once more, far enough.
      wanted = full;
      note = nullptr;
      depth = Unwind(scratch, static_cast<int>(wanted), nullptr, anchor);
      if (depth <= first) return 0;
    }
    if (first == depth) {
      first = 0;  // not found (tail call): keep everything rather than nothing
    } else if ((caller_pc & ~kPcMask) == 0 && static_cast<uint64_t>(first) < kMaxOwnFrames) {
      learnt.store(caller_pc | static_cast<uint64_t>(first) << kOwnShift,
                   std::memory_order_relaxed);
    }
  }
  size_t count = 0;
  for (int i = first; i < depth && count < capacity; ++i) {
    frames[count++] = reinterpret_cast<uintptr_t>(scratch[i]);
  }
  if (print != nullptr) {
    print->hash = StackTable::Hash(frames, std::min(count, print->kept));
    print->frames_written = true;
    if (note != nullptr) *note = {{print->hash, caller_pc, shape, count}};
  }
  return count;
}

}  // namespace gpumem
