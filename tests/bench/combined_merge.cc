// The combined view's merge (report/analysis/combined.h, CombineTimelines) alone, on 1 and
// THREADS threads, best of 3, in time per point:
// - on ranks that ran at once: PROCESSES timelines of POINTS points each, interleaved in time,
//   each rising and falling by training step (allocations, then frees), so that block bounds prune
//   little and most points are merged;
// - or on the timelines of real traces (--traces DIR: every *.trace in it, read first).
// Usage: combined_merge [PROCESSES=64] [POINTS=1000000] [THREADS=hardware threads]
//        combined_merge --traces DIR [THREADS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
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

// The timelines of every *.trace in `dir`; exits on a trace that cannot be read.
std::vector<ProcessTimeline> TimelinesOf(const std::string& dir) {
  std::vector<ProcessTimeline> timelines;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".trace") continue;
    auto timeline = gpumem::report::ReadProcessTimeline(entry.path().string());
    if (!timeline.ok()) {
      std::fprintf(stderr, "combined_merge: %s\n",
                   std::string(timeline.status().message()).c_str());
      std::exit(1);
    }
    timelines.push_back(std::move(*timeline));
  }
  return timelines;
}

}  // namespace

int main(int argc, char** argv) {
  const bool traces = argc > 2 && std::string(argv[1]) == "--traces";
  const size_t threads =
      argc > 3 ? std::strtoull(argv[3], nullptr, 10) : std::thread::hardware_concurrency();
  std::vector<ProcessTimeline> timelines;
  std::string what;
  if (traces) {
    timelines = TimelinesOf(argv[2]);
    what = std::to_string(timelines.size()) + " traces of " + argv[2];
  } else {
    const size_t processes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64;
    const uint64_t points = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1'000'000;
    timelines = Ranks(processes, points);
    what = std::to_string(processes) + " processes x " + std::to_string(points) + " points";
  }
  uint64_t all = 0;
  uint64_t encoded = 0;  // what the spools wrote: a worker's pages, and the merge's reads
  for (const ProcessTimeline& timeline : timelines) {
    for (const auto& [place, spool] : timeline.places) {
      all += spool.size();
      encoded += spool.encoded_bytes();
    }
  }
  std::printf("%s: %llu points encoded in %llu bytes, %.2f a point\n", what.c_str(),
              static_cast<unsigned long long>(all), static_cast<unsigned long long>(encoded),
              static_cast<double>(encoded) / static_cast<double>(std::max<uint64_t>(all, 1)));
  for (size_t t : {size_t{1}, threads}) {
    const double seconds = SecondsToMerge(timelines, t);
    std::printf("%s (%llu points), %zu threads: %.3f s, %.1f ns a point\n", what.c_str(),
                static_cast<unsigned long long>(all), t, seconds,
                seconds * 1e9 / static_cast<double>(std::max<uint64_t>(all, 1)));
    if (threads == 1) break;
  }
  return 0;
}
