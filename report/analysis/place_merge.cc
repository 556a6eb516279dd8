#include "report/analysis/place_merge.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <numeric>
#include <optional>
#include <queue>
#include <system_error>
#include <thread>
#include <utility>

namespace gpumem::report {
namespace {

// The merge's read buffers (a decoded block per spool and thread), all threads' together: fewer
// threads merge where more would need more. 64 MiB holds a block of 1024 points for each of 64
// processes on 64 threads.
constexpr size_t kMergeReadBytes = size_t{64} << 20;
// Windows merged in the first round, per thread; each round after merges four times as many.
constexpr size_t kFirstRoundWindowsPerThread = 1;

using Sum = unsigned __int128;  // each process's bytes fit in 64 bits, their sum need not

// The highest sum one slice of time reached, first: each process's bytes then.
struct SliceBest {
  Sum peak = 0;
  uint64_t timestamp_ns = 0;
  std::vector<uint64_t> at_peak;  // empty: the slice never rose above 0
};

// Whether `a` is the answer rather than `b`, of two disjoint slices: higher, or as high and first.
bool Beats(const SliceBest& a, const SliceBest& b) {
  if (a.at_peak.empty()) return false;
  return b.at_peak.empty() || a.peak > b.peak ||
         (a.peak == b.peak && a.timestamp_ns < b.timestamp_ns);
}

// A slice of time: [from, to); `to` 0 for no end.
struct Slice {
  uint64_t from = 0;
  uint64_t to = 0;
};

// Starts reading `spool` for a slice from `from`, at the first block with a point in the slice
// (its points before the slice only say what the process held when the slice began): sets *held to
// that, *reader, and *head to the first point at or after `from`; false when there is none.
bool EnterSlice(const TimelineSpool& spool, uint64_t from, uint64_t* held,
                std::optional<TimelineSpool::Reader>* reader, TimelinePoint* head) {
  const std::vector<TimelineSpool::Block>& blocks = spool.blocks();
  const auto first =
      std::partition_point(blocks.begin(), blocks.end(),
                           [&](const TimelineSpool::Block& block) { return block.last_ns < from; });
  if (first == blocks.end()) {
    *held = spool.last_live_bytes();
    return false;
  }
  *held = first->entering;
  const auto block = static_cast<uint64_t>(first - blocks.begin());
  reader->emplace(spool.Read(block * spool.block_points()));
  while ((*reader)->Next(head)) {
    if (head->timestamp_ns >= from) return true;
    *held = head->live_bytes;
  }
  return false;
}

// Merges the points of `spools` (null: none at this place) stamped within `slice`, by timestamp
// (ties: by spool, then in each spool's order), each process starting from its last point before
// the slice. Spools' timestamps never go back (TimelineSpool), so slices of a merge cut in time see
// the same sums, in the same order, as one merge of everything.
SliceBest MergeSlice(const std::vector<const TimelineSpool*>& spools, Slice slice) {
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
  Sum sum = 0;
  for (size_t i = 0; i < count; ++i) {
    if (spools[i] == nullptr) continue;
    if (EnterSlice(*spools[i], slice.from, &current[i], &readers[i], &next[i]) &&
        (slice.to == 0 || next[i].timestamp_ns < slice.to)) {
      heads.emplace(next[i].timestamp_ns, i);
    }
    sum += current[i];
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

// A stretch of time between two of the spools' block starts, and the most the processes can have
// held in it together: the sum of each one's highest bytes there.
struct Window {
  Slice slice;
  Sum bound = 0;
};

// Adds to each window (in time order) the most `spool` can have held in it: the highest of its
// blocks with points in the window, and what it held entering the window.
void AddBounds(const TimelineSpool& spool, std::vector<Window>* windows) {
  const std::vector<TimelineSpool::Block>& blocks = spool.blocks();
  size_t first = 0;  // the first block with a point in the window or after it
  size_t end = 0;    // past the last block starting before the window's end
  for (Window& window : *windows) {
    while (first < blocks.size() && blocks[first].last_ns < window.slice.from) ++first;
    while (end < blocks.size() &&
           (window.slice.to == 0 || blocks[end].first_ns < window.slice.to)) {
      ++end;
    }
    // Entering the window it held the last point before it: in block `first` when that starts
    // before the window (counted below), else the point before that block.
    uint64_t highest = first == blocks.size()                        ? spool.last_live_bytes()
                       : blocks[first].first_ns >= window.slice.from ? blocks[first].entering
                                                                     : 0;
    for (size_t b = first; b < end; ++b) highest = std::max(highest, blocks[b].highest);
    window.bound += highest;
  }
}

// The time of `spools` cut at every block's start, each window bounded (AddBounds).
std::vector<Window> BoundedWindows(const std::vector<const TimelineSpool*>& spools) {
  std::vector<uint64_t> cuts;
  for (const TimelineSpool* spool : spools) {
    if (spool == nullptr) continue;
    for (const TimelineSpool::Block& block : spool->blocks()) cuts.push_back(block.first_ns);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<Window> windows(cuts.size());
  for (size_t k = 0; k < cuts.size(); ++k) {
    windows[k].slice = {k == 0 ? 0 : cuts[k], k + 1 < cuts.size() ? cuts[k + 1] : 0};
  }
  for (const TimelineSpool* spool : spools) {
    if (spool != nullptr) AddBounds(*spool, &windows);
  }
  return windows;
}

// Whether `window` may hold the answer rather than `best`: a sum above it, or as high and earlier.
bool MayBeat(const Window& window, const SliceBest& best) {
  if (best.at_peak.empty()) return window.bound > 0;
  return window.bound > best.peak ||
         (window.bound == best.peak && window.slice.from < best.timestamp_ns);
}

// The windows `chosen` (indexes, ascending) as slices: neighbours joined, then cut so that no slice
// has more than its share of `parts`.
std::vector<Slice> JoinNeighbours(const std::vector<Window>& windows,
                                  const std::vector<size_t>& chosen, size_t parts) {
  const size_t most = std::max<size_t>(1, (chosen.size() + parts - 1) / std::max<size_t>(parts, 1));
  std::vector<Slice> slices;
  size_t joined = 0;  // windows in the last slice
  for (size_t c = 0; c < chosen.size(); ++c) {
    const Window& window = windows[chosen[c]];
    if (c > 0 && chosen[c] == chosen[c - 1] + 1 && joined < most) {
      slices.back().to = window.slice.to;
      ++joined;
    } else {
      slices.push_back(window.slice);
      joined = 1;
    }
  }
  return slices;
}

// Merges `slices` on up to `threads` threads; each one's best.
std::vector<SliceBest> MergeSlices(const std::vector<const TimelineSpool*>& spools,
                                   const std::vector<Slice>& slices, size_t threads) {
  std::vector<SliceBest> bests(slices.size());
  // Each thread reads every spool a block at a time: all blocks together in kMergeReadBytes.
  size_t block_bytes = sizeof(TimelinePoint);
  for (const TimelineSpool* spool : spools) {
    if (spool != nullptr)
      block_bytes = std::max(block_bytes, spool->block_points() * sizeof(TimelinePoint));
  }
  const size_t fit = kMergeReadBytes / (std::max<size_t>(spools.size(), 1) * block_bytes);
  const size_t workers =
      std::clamp<size_t>(std::min(threads, fit), 1, std::max<size_t>(slices.size(), 1));
  std::atomic<size_t> next_slice{0};
  auto work = [&] {
    for (size_t s = next_slice++; s < slices.size(); s = next_slice++) {
      bests[s] = MergeSlice(spools, slices[s]);
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (size_t w = 1; w < workers; ++w) {
      try {
        helpers.emplace_back(work);
      } catch (const std::system_error&) {  // no thread to be had: this one does the rest
        break;
      }
    }
    work();
  }
  return bests;
}

// The number of threads worth starting for `windows` of `all`, holding `points` in all.
size_t ThreadsFor(size_t windows, size_t all, uint64_t points, size_t threads,
                  uint64_t min_points_per_thread) {
  const uint64_t share = points / std::max<size_t>(all, 1) * windows;
  return static_cast<size_t>(std::clamp<uint64_t>(
      share / std::max<uint64_t>(min_points_per_thread, 1), 1, std::max<size_t>(threads, 1)));
}

// The first moment of the highest sum of `spools` (`points` in all): windows are merged highest
// bound first, a round at a time, until no window left can hold a sum above the best found (or as
// high, earlier). Most points are never read.
SliceBest MergeWindowsThatMayHoldThePeak(const std::vector<const TimelineSpool*>& spools,
                                         uint64_t points, size_t threads,
                                         uint64_t min_points_per_thread) {
  const std::vector<Window> windows = BoundedWindows(spools);
  std::vector<size_t> order(windows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return windows[a].bound > windows[b].bound; });
  SliceBest best;
  size_t round = kFirstRoundWindowsPerThread * std::max<size_t>(threads, 1);
  for (size_t taken = 0; taken < order.size() && MayBeat(windows[order[taken]], best); round *= 4) {
    std::vector<size_t> chosen;
    for (; taken < order.size() && chosen.size() < round && MayBeat(windows[order[taken]], best);
         ++taken) {
      chosen.push_back(order[taken]);
    }
    std::sort(chosen.begin(), chosen.end());
    const size_t workers =
        ThreadsFor(chosen.size(), windows.size(), points, threads, min_points_per_thread);
    for (SliceBest& slice_best :
         MergeSlices(spools, JoinNeighbours(windows, chosen, workers), workers)) {
      if (Beats(slice_best, best)) best = std::move(slice_best);
    }
  }
  return best;
}

}  // namespace

CombinedPlace MergePlace(int32_t place, const std::vector<size_t>& members,
                         const std::vector<ProcessTimeline>& processes, size_t threads,
                         uint64_t min_points_per_thread) {
  std::vector<const TimelineSpool*> spools(members.size(), nullptr);
  uint64_t points = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    const auto it = processes[members[i]].places.find(place);
    if (it == processes[members[i]].places.end()) continue;
    spools[i] = &it->second;
    points += it->second.size();
  }
  const SliceBest best =
      MergeWindowsThatMayHoldThePeak(spools, points, threads, min_points_per_thread);
  CombinedPlace result;
  result.place = place;
  if (!best.at_peak.empty()) {
    result.peak_bytes =
        static_cast<uint64_t>(std::min<Sum>(best.peak, std::numeric_limits<uint64_t>::max()));
    result.timestamp_ns = best.timestamp_ns;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    result.shares.push_back({members[i], best.at_peak.empty() ? 0 : best.at_peak[i]});
  }
  std::stable_sort(
      result.shares.begin(), result.shares.end(),
      [](const CombinedShare& a, const CombinedShare& b) { return a.bytes > b.bytes; });
  return result;
}

}  // namespace gpumem::report
