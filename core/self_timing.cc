#include "core/self_timing.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>

#include "core/thread_locals.h"

namespace gpumem::self_timing {

GPUMEM_HOT_DATA bool g_enabled = false;
namespace {

// A phase's sums in one cache line: a Scope's end touches it and its histogram's bucket.
struct alignas(32) Total {
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> ns{0};
  std::atomic<uint64_t> exclusive_ns{0};
};
Total g_totals[kPhaseCount];
Total g_bookkeeping;  // count: Scopes ended; ns: their bookkeeping

// Each phase's times in buckets of a quarter octave (±12 %): a mean alone hides whether a phase is
// slow every time or only now and then (a page fault, the thread preempted inside the phase).
constexpr int kSubBuckets = 4;
constexpr int kBuckets = 64 * kSubBuckets;
std::atomic<uint32_t> g_histograms[kPhaseCount][kBuckets];

int BucketOf(uint64_t ns) {
  if (ns == 0) return 0;
  const int octave = 63 - __builtin_clzll(ns);
  const uint64_t sub = octave >= 2 ? (ns >> (octave - 2)) & 3 : (ns << (2 - octave)) & 3;
  return octave * kSubBuckets + static_cast<int>(sub);
}

// The middle of a bucket's range.
double BucketValue(int bucket) {
  const int octave = bucket / kSubBuckets;
  const double low = static_cast<double>(uint64_t{1} << octave);
  const double step = low / kSubBuckets;
  return low + step * (bucket % kSubBuckets) + step / 2;
}

// The time under which `fraction` of the phase's timed parts fell (each part of a phase timed in
// two parts counts apart).
double Percentile(int phase, double fraction) {
  uint64_t total = 0;
  for (const auto& bucket : g_histograms[phase]) total += bucket.load(std::memory_order_relaxed);
  if (total == 0) return 0;
  const auto wanted = static_cast<uint64_t>(fraction * static_cast<double>(total));
  uint64_t seen = 0;
  for (int bucket = 0; bucket < kBuckets; ++bucket) {
    seen += g_histograms[phase][bucket].load(std::memory_order_relaxed);
    if (seen > wanted) return BucketValue(bucket);
  }
  return BucketValue(kBuckets - 1);
}

constexpr const char* kNames[kPhaseCount] = {
    "native stack",  "Python frames", "stack lookup",    "memory event", "launch event",
    "kernel lookup", "pointer scan",  "pool query",      "device query", "sink write",
    "stack capture", "hook entry",    "allocation hook", "free hook",    "launch hook"};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kPhaseCount);

std::atomic<uint64_t> g_counts[kCounterCount];
constexpr const char* kCounterNames[kCounterCount] = {
    "stacks left to libunwind",
    "stacks replayed from an earlier unwind",
    "stacks unwound, none kept from this stack pointer",
    "stacks unwound, the kept one's stack words changed",
    "stacks too deep to keep for a replay",
    "native frames captured",
    "kernel parameter bytes scanned"};

}  // namespace

void Add(Phase phase, uint64_t ns, uint64_t exclusive_ns, bool count) {
  if (count) g_totals[phase].count.fetch_add(1, std::memory_order_relaxed);
  g_totals[phase].ns.fetch_add(ns, std::memory_order_relaxed);
  g_totals[phase].exclusive_ns.fetch_add(exclusive_ns, std::memory_order_relaxed);
  g_histograms[phase][BucketOf(ns)].fetch_add(1, std::memory_order_relaxed);
}

PhaseTotals Totals(Phase phase) {
  const Total& total = g_totals[phase];
  return {total.count.load(std::memory_order_relaxed), total.ns.load(std::memory_order_relaxed),
          total.exclusive_ns.load(std::memory_order_relaxed)};
}

PhaseTotals Bookkeeping() {
  const uint64_t ns = g_bookkeeping.ns.load(std::memory_order_relaxed);
  return {g_bookkeeping.count.load(std::memory_order_relaxed), ns, ns};
}

void Scope::Begin() {
  const uint64_t begun = MonotonicNs();
  thread_ = &Locals().timing;
  bookkeeping_at_start_ = thread_->bookkeeping_ns;
  parent_children_ns_ = thread_->children_ns;
  thread_->children_ns = 0;
  start_ = MonotonicNs();
  begin_bookkeeping_ns_ = start_ - begun;
}

// The time since Begin less the nested Scopes' bookkeeping is the phase's; what of it no direct
// child took is its exclusive time; it is its parent's child time. This Scope's own bookkeeping,
// Begin's and from its end's clock read to here, is what its parent leaves out.
void Scope::End() {
  const uint64_t end = MonotonicNs();
  const uint64_t nested_bookkeeping = thread_->bookkeeping_ns - bookkeeping_at_start_;
  const uint64_t elapsed = end - start_;
  const uint64_t ns = elapsed > nested_bookkeeping ? elapsed - nested_bookkeeping : 0;
  const uint64_t children = thread_->children_ns;
  Add(phase_, ns, ns > children ? ns - children : 0, count_);
  thread_->children_ns = parent_children_ns_ + ns;
  const uint64_t bookkeeping = MonotonicNs() - end + begin_bookkeeping_ns_;
  thread_->bookkeeping_ns += bookkeeping;
  g_bookkeeping.count.fetch_add(1, std::memory_order_relaxed);
  g_bookkeeping.ns.fetch_add(bookkeeping, std::memory_order_relaxed);
}

void AddCount(Counter counter, uint64_t amount) {
  g_counts[counter].fetch_add(amount, std::memory_order_relaxed);
}

uint64_t CountOf(Counter counter) { return g_counts[counter].load(std::memory_order_relaxed); }

void Print() {
  if (!g_enabled) return;
  uint64_t all_ns = 0;
  for (int phase = 0; phase < kPhaseCount; ++phase) {
    if (!IsOuterPhase(phase)) all_ns += g_totals[phase].ns.load(std::memory_order_relaxed);
  }
  // snprintf + write: no stdio buffer, which may be gone at exit.
  char line[256];
  int n =
      snprintf(line, sizeof(line), "gpumem: self timing (pid %d): %.3f ms in the inner phases\n",
               static_cast<int>(getpid()), static_cast<double>(all_ns) / 1e6);
  if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  for (int phase = 0; phase < kPhaseCount; ++phase) {
    const PhaseTotals totals = Totals(static_cast<Phase>(phase));
    if (totals.count == 0) continue;
    const auto mean = [&](uint64_t ns) {
      return static_cast<double>(ns) / static_cast<double>(totals.count);
    };
    n = snprintf(line, sizeof(line),
                 "gpumem:   %-14s %10llu x %8.0f ns = %9.3f ms  (median %.0f ns, p90 %.0f, "
                 "p99 %.0f; outside nested phases %.0f ns)\n",
                 kNames[phase], static_cast<unsigned long long>(totals.count), mean(totals.ns),
                 static_cast<double>(totals.ns) / 1e6, Percentile(phase, 0.5),
                 Percentile(phase, 0.9), Percentile(phase, 0.99), mean(totals.exclusive_ns));
    if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  }
  const PhaseTotals bookkeeping = Bookkeeping();
  n = snprintf(line, sizeof(line),
               "gpumem:   self timing's own bookkeeping, left out of every phase: %llu x %.0f ns = "
               "%.3f ms\n",
               static_cast<unsigned long long>(bookkeeping.count),
               bookkeeping.count != 0
                   ? static_cast<double>(bookkeeping.ns) / static_cast<double>(bookkeeping.count)
                   : 0.0,
               static_cast<double>(bookkeeping.ns) / 1e6);
  if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  for (int counter = 0; counter < kCounterCount; ++counter) {
    n = snprintf(
        line, sizeof(line), "gpumem:   %s: %llu\n", kCounterNames[counter],
        static_cast<unsigned long long>(g_counts[counter].load(std::memory_order_relaxed)));
    if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  }
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) {
    n = snprintf(line, sizeof(line), "gpumem:   process: %ld minor page faults, %ld major\n",
                 usage.ru_minflt, usage.ru_majflt);
    if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  }
}

}  // namespace gpumem::self_timing
