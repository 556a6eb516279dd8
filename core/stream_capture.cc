#include "core/stream_capture.h"

#include <atomic>

#include "core/hot_path.h"
#include "core/thread_locals.h"

namespace gpumem::capture {
namespace {

// Captures in progress at once: a handful (one per capturing stream). Past this many, a capture
// goes unnoticed (its memory unmarked, gpumem's own queries not held back during it).
constexpr int kSlots = 32;

struct Slot {
  std::atomic<uint64_t> stream{0};
  std::atomic<uint64_t> capture{0};  // 0: the slot is free
};

Slot g_slots[kSlots];
GPUMEM_HOT_DATA std::atomic<int> g_in_progress{0};
std::atomic<uint64_t> g_next_capture{1};

}  // namespace

uint64_t Began(uint64_t stream) {
  const uint64_t capture = g_next_capture.fetch_add(1, std::memory_order_relaxed);
  for (Slot& slot : g_slots) {
    uint64_t expected = 0;
    if (slot.capture.compare_exchange_strong(expected, capture, std::memory_order_acq_rel)) {
      slot.stream.store(stream, std::memory_order_release);
      g_in_progress.fetch_add(1, std::memory_order_acq_rel);
      Locals().capture = capture;
      break;
    }
  }
  return capture;
}

uint64_t Ended(uint64_t stream) {
  for (Slot& slot : g_slots) {
    uint64_t capture = slot.capture.load(std::memory_order_acquire);
    if (capture == 0 || slot.stream.load(std::memory_order_acquire) != stream) continue;
    if (!slot.capture.compare_exchange_strong(capture, 0, std::memory_order_acq_rel)) continue;
    g_in_progress.fetch_sub(1, std::memory_order_acq_rel);
    if (Locals().capture == capture) Locals().capture = 0;
    return capture;
  }
  return 0;
}

bool AnyInProgress() { return g_in_progress.load(std::memory_order_relaxed) > 0; }

uint64_t OfStream(uint64_t stream) {
  if (!AnyInProgress()) return 0;
  for (const Slot& slot : g_slots) {
    const uint64_t capture = slot.capture.load(std::memory_order_acquire);
    if (capture != 0 && slot.stream.load(std::memory_order_acquire) == stream) return capture;
  }
  return 0;
}

// A capture begun relaxed may end on another thread: the beginning thread's note is checked
// against the captures still in progress.
uint64_t OfThread() {
  if (Locals().capture == 0) return 0;
  for (const Slot& slot : g_slots) {
    if (slot.capture.load(std::memory_order_acquire) == Locals().capture) return Locals().capture;
  }
  Locals().capture = 0;
  return 0;
}

}  // namespace gpumem::capture
