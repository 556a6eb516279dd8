#include "core/thread_locals.h"

#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <new>

#include "core/hot_path.h"

namespace gpumem {
namespace thread_locals_internal {

GPUMEM_HOT_DATA pthread_key_t g_key;
GPUMEM_HOT_DATA std::atomic<int> g_key_state{kNoKey};

}  // namespace thread_locals_internal
namespace {

using namespace thread_locals_internal;

// Blocks for this many threads live in the library's zero-initialised data (only the pages used
// take memory); past them a thread's block is mapped, and given back at its exit.
constexpr int kPooledBlocks = 1024;
ThreadLocals g_pool[kPooledBlocks];
std::atomic<int> g_pool_next{0};
// Pool blocks given back at thread exit, for the next threads: a flag per block.
std::atomic<bool> g_pool_free[kPooledBlocks];

// Where a thread's block comes from when no key could be made: shared, so depth counts are
// approximate; never expected (a process has 1024 keys).
ThreadLocals g_shared_fallback;

bool InPool(const ThreadLocals* block) { return block >= g_pool && block < g_pool + kPooledBlocks; }

void GiveBack(void* pointer) {
  auto* block = static_cast<ThreadLocals*>(pointer);
  if (InPool(block)) {
    *block = ThreadLocals{};
    g_pool_free[block - g_pool].store(true, std::memory_order_release);
  } else {
    munmap(block, sizeof(ThreadLocals));
  }
}

bool KeyReady() {
  int state = g_key_state.load(std::memory_order_acquire);
  if (state == kReady) return true;
  if (state == kNoKey && g_key_state.compare_exchange_strong(state, kCreating)) {
    state = pthread_key_create(&g_key, &GiveBack) == 0 ? kReady : kFailed;
    g_key_state.store(state, std::memory_order_release);
    return state == kReady;
  }
  while ((state = g_key_state.load(std::memory_order_acquire)) == kCreating) {
  }
  return state == kReady;
}

ThreadLocals* TakeBlock() {
  for (int i = 0; i < kPooledBlocks; ++i) {
    bool expected = true;
    if (g_pool_free[i].load(std::memory_order_relaxed) &&
        g_pool_free[i].compare_exchange_strong(expected, false, std::memory_order_acq_rel)) {
      return &g_pool[i];
    }
  }
  const int next = g_pool_next.fetch_add(1, std::memory_order_relaxed);
  if (next < kPooledBlocks) return &g_pool[next];
  void* memory = mmap(nullptr, sizeof(ThreadLocals), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return memory == MAP_FAILED ? nullptr : new (memory) ThreadLocals;
}

}  // namespace

ThreadLocals& thread_locals_internal::Take() {
  if (!KeyReady()) [[unlikely]]
    return g_shared_fallback;
  if (void* block = pthread_getspecific(g_key); block != nullptr) [[likely]]
    return *static_cast<ThreadLocals*>(block);
  ThreadLocals* block = TakeBlock();
  if (block == nullptr || pthread_setspecific(g_key, block) != 0) return g_shared_fallback;
  return *block;
}

}  // namespace gpumem
