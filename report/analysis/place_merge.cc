#include "report/analysis/place_merge.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <queue>
#include <system_error>
#include <thread>
#include <utility>

namespace gpumem::report {
namespace {

// The merge's read buffers, all slices' and spools' together, unless that leaves a reader fewer
// than kMinReadChunkPoints: 64 MiB holds 1024 points for each of 64 processes on 16 threads.
constexpr size_t kMergeReadBytes = size_t{64} << 20;
constexpr size_t kMinReadChunkPoints = 64;

// The highest sum one slice of time reached, first: each process's bytes then.
struct SliceBest {
  unsigned __int128 peak = 0;  // in 128 bits: each process's bytes fit in 64, their sum need not
  uint64_t timestamp_ns = 0;
  std::vector<uint64_t> at_peak;  // empty: the slice never rose above 0
};

// A slice of time: [from, to); `to` 0 for no end.
struct Slice {
  uint64_t from = 0;
  uint64_t to = 0;
};

// Merges the points of `spools` (null: none at this place) stamped within `slice`, by timestamp
// (ties: by spool, then in each spool's order), each process starting from its last point before
// the slice. Spools' timestamps never go back (TimelineSpool), so the slices of a merge cut in time
// see the same sums, in the same order, as one merge of everything.
SliceBest MergeSlice(const std::vector<const TimelineSpool*>& spools, Slice slice, size_t chunk) {
  const size_t count = spools.size();
  std::vector<std::optional<TimelineSpool::Reader>> readers(count);
  std::vector<TimelinePoint> next(count);  // each reader's point at the head
  std::vector<uint64_t> current(count, 0);
  // (timestamp, spool): the smallest first.
  using Head = std::pair<uint64_t, size_t>;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
  auto advance = [&](size_t i) {
    if (readers[i]->Next(&next[i]) && (slice.to == 0 || next[i].timestamp_ns < slice.to)) {
      heads.emplace(next[i].timestamp_ns, i);
    }
  };
  unsigned __int128 sum = 0;
  for (size_t i = 0; i < count; ++i) {
    if (spools[i] == nullptr) continue;
    const uint64_t start = slice.from == 0 ? 0 : spools[i]->FirstAtOrAfter(slice.from);
    if (start > 0) current[i] = spools[i]->At(start - 1).live_bytes;
    sum += current[i];
    readers[i].emplace(spools[i]->Read(start, chunk));
    advance(i);
  }
  SliceBest best;
  while (!heads.empty()) {
    const auto [timestamp, i] = heads.top();
    heads.pop();
    sum = sum - current[i] + next[i].live_bytes;
    current[i] = next[i].live_bytes;
    if (sum > best.peak) {
      best.peak = sum;
      best.timestamp_ns = timestamp;
      best.at_peak = current;
    }
    advance(i);
  }
  return best;
}

// Cuts the time of `spools` into at most `threads` slices of about equal numbers of points, at
// least `min_points` each, by the spools' index of timestamps.
std::vector<Slice> CutInTime(const std::vector<const TimelineSpool*>& spools, size_t threads,
                             uint64_t min_points) {
  uint64_t points = 0;
  std::vector<uint64_t> samples;  // one per TimelineSpool::kIndexStride points
  for (const TimelineSpool* spool : spools) {
    if (spool == nullptr) continue;
    points += spool->size();
    samples.insert(samples.end(), spool->index().begin(), spool->index().end());
  }
  const uint64_t by_size = points / std::max<uint64_t>(min_points, 1);
  const size_t slices =
      static_cast<size_t>(std::clamp<uint64_t>(by_size, 1, std::max<size_t>(threads, 1)));
  std::sort(samples.begin(), samples.end());
  std::vector<uint64_t> cuts;
  for (size_t s = 1; s < slices; ++s) {
    const uint64_t cut = samples[s * samples.size() / slices];
    if (cut > 0 && (cuts.empty() || cut > cuts.back())) cuts.push_back(cut);
  }
  std::vector<Slice> result;
  uint64_t from = 0;
  for (const uint64_t cut : cuts) {
    result.push_back({from, cut});
    from = cut;
  }
  result.push_back({from, 0});
  return result;
}

}  // namespace

CombinedPlace MergePlace(int32_t place, const std::vector<size_t>& members,
                         const std::vector<ProcessTimeline>& processes, size_t threads,
                         uint64_t min_points_per_thread) {
  std::vector<const TimelineSpool*> spools(members.size(), nullptr);
  for (size_t i = 0; i < members.size(); ++i) {
    const auto it = processes[members[i]].places.find(place);
    if (it != processes[members[i]].places.end()) spools[i] = &it->second;
  }
  const std::vector<Slice> slices = CutInTime(spools, threads, min_points_per_thread);
  std::vector<SliceBest> bests(slices.size());
  // Each slice reads every spool a chunk at a time: all chunks together in kMergeReadBytes.
  const size_t chunk = std::clamp<size_t>(
      kMergeReadBytes /
          (slices.size() * std::max<size_t>(spools.size(), 1) * sizeof(TimelinePoint)),
      kMinReadChunkPoints, TimelineSpool::kReadChunkPoints);
  {
    std::vector<std::jthread> workers;
    for (size_t s = 1; s < slices.size(); ++s) {
      try {
        workers.emplace_back([&, s] { bests[s] = MergeSlice(spools, slices[s], chunk); });
      } catch (const std::system_error&) {  // no thread to be had: merged on this one
        bests[s] = MergeSlice(spools, slices[s], chunk);
      }
    }
    bests[0] = MergeSlice(spools, slices[0], chunk);
  }
  // A later slice counts only when it rose higher than every earlier one: the first to reach the
  // highest sum is the one a single merge would have kept.
  const SliceBest* highest = nullptr;
  for (const SliceBest& best : bests) {
    if (!best.at_peak.empty() && (highest == nullptr || best.peak > highest->peak)) highest = &best;
  }
  CombinedPlace result;
  result.place = place;
  if (highest != nullptr) {
    result.peak_bytes = static_cast<uint64_t>(
        std::min<unsigned __int128>(highest->peak, std::numeric_limits<uint64_t>::max()));
    result.timestamp_ns = highest->timestamp_ns;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    result.shares.push_back({members[i], highest != nullptr ? highest->at_peak[i] : 0});
  }
  std::stable_sort(
      result.shares.begin(), result.shares.end(),
      [](const CombinedShare& a, const CombinedShare& b) { return a.bytes > b.bytes; });
  return result;
}

}  // namespace gpumem::report
