// The combined view's merge (report/analysis/combined.h, CombineTimelines) on ranks that ran at
// once: PROCESSES timelines of POINTS points each, interleaved in time, each rising and falling by
// training step (allocations, then frees), so that block bounds prune little and most points are
// merged. Prints the merge's time per point on 1 and THREADS threads, best of 3.
// Usage: combined_merge [PROCESSES=64] [POINTS=1000000] [THREADS=hardware threads]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "report/analysis/combined.h"

namespace {

using gpumem::report::CombineTimelines;
using gpumem::report::ProcessTimeline;

std::vector<ProcessTimeline> Ranks(size_t processes, uint64_t points) {
  std::vector<ProcessTimeline> timelines(processes);
  std::mt19937_64 random(7);
  for (size_t p = 0; p < processes; ++p) {
    timelines[p].host = "node1";
    auto& spool = timelines[p].places.try_emplace(0).first->second;
    uint64_t live = 0;
    uint64_t time = 1'000'000 + p * 13;
    for (uint64_t i = 0; i < points; ++i) {
      time += 500 + random() % 1000;  // about a point every microsecond in every rank
      // Training steps of 200 points: half allocating, half freeing back to where it began.
      const uint64_t size = (random() % 64 + 1) << 20;
      live = (i / 100) % 2 == 0 ? live + size : live - std::min(live, size);
      spool.Append({time, live});
    }
  }
  return timelines;
}

double SecondsToMerge(const std::vector<ProcessTimeline>& timelines, size_t threads) {
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    const auto start = std::chrono::steady_clock::now();
    const auto combined = CombineTimelines(timelines, threads);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (combined.hosts.empty()) std::abort();
    best = std::min(best, seconds);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t processes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64;
  const uint64_t points = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1'000'000;
  const size_t threads =
      argc > 3 ? std::strtoull(argv[3], nullptr, 10) : std::thread::hardware_concurrency();
  const std::vector<ProcessTimeline> timelines = Ranks(processes, points);
  const double all = static_cast<double>(processes * points);
  for (size_t t : {size_t{1}, threads}) {
    const double seconds = SecondsToMerge(timelines, t);
    std::printf("%zu processes x %llu points, %zu threads: %.3f s, %.1f ns a point\n", processes,
                static_cast<unsigned long long>(points), t, seconds, seconds * 1e9 / all);
    if (threads == 1) break;
  }
  return 0;
}
