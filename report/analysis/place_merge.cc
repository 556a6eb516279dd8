#include "report/analysis/place_merge.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <iterator>
#include <limits>
#include <numeric>
#include <utility>

#include "report/analysis/run_parts.h"

namespace gpumem::report {
namespace {

// The merge's buffers (per spool and thread: a decoded block, and up to a block of points gathered
// and put in order), all threads' together: fewer threads merge where more would need more.
// 256 MiB holds them for blocks of 64 points of 1024 processes on 64 threads.
constexpr size_t kMergeBufferBytes = size_t{256} << 20;
// Windows merged in the first round, per thread; each round after merges four times as many.
constexpr size_t kFirstRoundWindowsPerThread = 1;

using Sum = unsigned __int128;  // each process's bytes fit in 64 bits, their sum need not

// The highest sum one slice of time reached, first, and the point that made it: what each process
// held then is looked up once the best of all slices is known (SharesAt), not for every slice.
struct SliceBest {
  static constexpr size_t kNone = std::numeric_limits<size_t>::max();
  Sum peak = 0;
  uint64_t timestamp_ns = 0;
  size_t spool = kNone;  // whose point made the sum; kNone: the slice never rose above 0
  uint64_t held = 0;     // what that spool held after it
  bool found() const { return spool != kNone; }
};

// Whether `a` is the answer rather than `b`, of two disjoint slices: higher, or as high and first.
bool Beats(const SliceBest& a, const SliceBest& b) {
  if (!a.found()) return false;
  return !b.found() || a.peak > b.peak || (a.peak == b.peak && a.timestamp_ns < b.timestamp_ns);
}

// A slice of time: [from, to); `to` 0 for no end.
struct Slice {
  uint64_t from = 0;
  uint64_t to = 0;
};

// One spool's block as a thread decoded it last. A thread merges its slices in time order, and a
// slice mostly starts in the block where the one before it ended: decoded once, not per slice.
struct DecodedBlock {
  size_t block = std::numeric_limits<size_t>::max();
  bool read = false;  // its points could be read
  std::vector<TimelinePoint> points;
};

// Reads one spool's points in order, a block at a time, through its thread's DecodedBlock.
class SpoolCursor {
 public:
  SpoolCursor(const TimelineSpool* spool, DecodedBlock* decoded)
      : spool_(spool), decoded_(decoded) {}

  // Moves to the first point at or after `from` (the block's points before it only say what the
  // process held when the slice began): sets *held to that and *head to the point; false when
  // there is none.
  bool Enter(uint64_t from, uint64_t* held, TimelinePoint* head) {
    const std::vector<TimelineSpool::Block>& blocks = spool_->blocks();
    const auto first = std::partition_point(
        blocks.begin(), blocks.end(),
        [&](const TimelineSpool::Block& block) { return block.last_ns < from; });
    if (first == blocks.end()) {
      *held = spool_->last_live_bytes();
      return false;
    }
    *held = first->entering;
    if (!Load(static_cast<size_t>(first - blocks.begin()))) return false;
    const std::vector<TimelinePoint>& points = decoded_->points;
    next_ = static_cast<size_t>(std::partition_point(points.begin(), points.end(),
                                                     [&](const TimelinePoint& point) {
                                                       return point.timestamp_ns < from;
                                                     }) -
                                points.begin());
    if (next_ > 0) *held = points[next_ - 1].live_bytes;
    return Next(head);
  }

  // The next point into *point; false after the last (or when its block cannot be read).
  bool Next(TimelinePoint* point) {
    while (next_ == decoded_->points.size()) {
      if (block_ + 1 >= spool_->blocks().size() || !Load(block_ + 1)) return false;
    }
    *point = decoded_->points[next_++];
    return true;
  }

  // The timestamp of the last point of the block the cursor reads now.
  uint64_t BlockLastNs() const { return spool_->blocks()[block_].last_ns; }

  // The live bytes of the last point of block `block` for which `before(timestamp)` holds (its
  // first does); 0 when the block cannot be read.
  template <typename Before>
  uint64_t LastIn(size_t block, const Before& before) {
    if (!Load(block)) return 0;
    const std::vector<TimelinePoint>& points = decoded_->points;
    const auto after = std::partition_point(
        points.begin(), points.end(),
        [&](const TimelinePoint& point) { return before(point.timestamp_ns); });
    return after == points.begin() ? 0 : std::prev(after)->live_bytes;
  }

 private:
  bool Load(size_t block) {
    block_ = block;
    next_ = 0;
    if (decoded_->block != block) {
      decoded_->block = block;
      decoded_->read = spool_->ReadBlock(block, &decoded_->points);
    }
    if (!decoded_->read) decoded_->points.clear();
    return decoded_->read;
  }

  const TimelineSpool* spool_;
  DecodedBlock* decoded_;
  size_t block_ = 0;
  size_t next_ = 0;  // the index of the next point in the decoded block
};

// A point as the merge takes it: when, which spool's, and what that spool held after it.
struct Arrival {
  uint64_t timestamp_ns;
  uint64_t live_bytes;
  size_t spool;
};

// Moves per arrival past which a bucket is sorted rather than put in order by insertion.
constexpr size_t kMovesPerArrival = 16;

// Orders `arrivals` (gathered spool after spool, each in its own order) by timestamp, keeping that
// order among equal ones (ties: by spool, then in each spool's order), into *ordered: a counting
// sort into about as many buckets of time as there are arrivals, then each bucket in order.
// `counts`: scratch.
void OrderByTime(const std::vector<Arrival>& arrivals, std::vector<Arrival>* ordered,
                 std::vector<uint32_t>* counts) {
  ordered->resize(arrivals.size());
  if (arrivals.empty()) return;
  uint64_t first = arrivals[0].timestamp_ns;
  uint64_t last = first;
  for (const Arrival& arrival : arrivals) {
    first = std::min(first, arrival.timestamp_ns);
    last = std::max(last, arrival.timestamp_ns);
  }
  // Buckets of 2^shift nanoseconds, no more of them than arrivals (rounded up to a power of two).
  const uint64_t span = last - first;
  const int wanted_bits = static_cast<int>(std::bit_width(arrivals.size()));
  const int shift = std::max(0, static_cast<int>(std::bit_width(span)) - wanted_bits);
  const size_t buckets = static_cast<size_t>(span >> shift) + 1;
  counts->assign(buckets + 1, 0);
  for (const Arrival& arrival : arrivals)
    ++(*counts)[((arrival.timestamp_ns - first) >> shift) + 1];
  for (size_t b = 1; b <= buckets; ++b) (*counts)[b] += (*counts)[b - 1];
  for (const Arrival& arrival : arrivals) {
    (*ordered)[(*counts)[(arrival.timestamp_ns - first) >> shift]++] = arrival;
  }
  // Each bucket now holds its arrivals in gathered order, from counts[b - 1] to counts[b]: runs of
  // one spool each, already in order. Put in time order by insertion, which costs what is out of
  // order, little for a few points or runs that barely overlap; a bucket that takes more moves
  // than kMovesPerArrival per arrival (a burst of interleaved runs) is stable-sorted instead.
  const auto earlier = [](const Arrival& a, const Arrival& b) {
    return a.timestamp_ns < b.timestamp_ns;
  };
  for (size_t b = 0, begin = 0; b < buckets; begin = (*counts)[b], ++b) {
    const size_t end = (*counts)[b];
    const size_t most_moves = kMovesPerArrival * (end - begin);
    size_t moves = 0;
    for (size_t i = begin + 1; i < end && moves <= most_moves; ++i) {
      const Arrival moving = (*ordered)[i];
      size_t at = i;
      for (; at > begin && (*ordered)[at - 1].timestamp_ns > moving.timestamp_ns; --at) {
        (*ordered)[at] = (*ordered)[at - 1];
      }
      (*ordered)[at] = moving;
      moves += i - at;
    }
    if (moves > most_moves) {
      std::stable_sort(ordered->begin() + static_cast<std::ptrdiff_t>(begin),
                       ordered->begin() + static_cast<std::ptrdiff_t>(end), earlier);
    }
  }
}

// What a thread reuses from slice to slice: the block per spool it decoded last, and the merge's
// buffers.
struct MergeScratch {
  std::vector<DecodedBlock> decoded;
  std::vector<Arrival> gathered;
  std::vector<Arrival> ordered;
  std::vector<uint32_t> counts;
};

// What `spool` held just after its last point stamped before `timestamp_ns` (`inclusive`: at or
// before); 0 before its first. `decoded`: this thread's block of the spool.
uint64_t HeldAt(const TimelineSpool& spool, uint64_t timestamp_ns, bool inclusive,
                DecodedBlock* decoded) {
  const auto before = [&](uint64_t t) { return inclusive ? t <= timestamp_ns : t < timestamp_ns; };
  const std::vector<TimelineSpool::Block>& blocks = spool.blocks();
  const auto after = std::partition_point(
      blocks.begin(), blocks.end(),
      [&](const TimelineSpool::Block& block) { return before(block.first_ns); });
  if (after == blocks.begin()) return 0;
  SpoolCursor cursor(&spool, decoded);
  const auto block = static_cast<size_t>(after - blocks.begin()) - 1;
  return cursor.LastIn(block, before);
}

// Merges the points of `spools` (null: none at this place) stamped within `slice`, by timestamp
// (ties: by spool, then in each spool's order), each process starting from its last point before
// the slice. Spools' timestamps never go back (TimelineSpool), so slices of a merge cut in time see
// the same sums, in the same order, as one merge of everything; so do the stretches a slice is
// merged in, each up to the earliest end of the spools' blocks being read (at most a block a
// spool), gathered and put in time order at once (OrderByTime) rather than point by point.
SliceBest MergeSlice(const std::vector<const TimelineSpool*>& spools, Slice slice,
                     MergeScratch* scratch) {
  const size_t count = spools.size();
  std::vector<SpoolCursor> cursors;
  cursors.reserve(count);
  for (size_t i = 0; i < count; ++i) cursors.emplace_back(spools[i], &scratch->decoded[i]);
  std::vector<TimelinePoint> next(count);   // each cursor's point at the head
  std::vector<bool> reading(count, false);  // the cursor has a point within the slice at the head
  std::vector<uint64_t> current(count, 0);
  const auto within = [&](const TimelinePoint& point) {
    return slice.to == 0 || point.timestamp_ns < slice.to;
  };
  Sum sum = 0;
  for (size_t i = 0; i < count; ++i) {
    if (spools[i] == nullptr) continue;
    reading[i] = cursors[i].Enter(slice.from, &current[i], &next[i]) && within(next[i]);
    sum += current[i];
  }
  SliceBest best;
  for (;;) {
    uint64_t until = std::numeric_limits<uint64_t>::max();
    for (size_t i = 0; i < count; ++i) {
      if (reading[i]) until = std::min(until, cursors[i].BlockLastNs());
    }
    if (until == std::numeric_limits<uint64_t>::max()) break;
    std::vector<Arrival>& gathered = scratch->gathered;
    gathered.clear();
    for (size_t i = 0; i < count; ++i) {
      while (reading[i] && next[i].timestamp_ns <= until) {
        gathered.push_back({next[i].timestamp_ns, next[i].live_bytes, i});
        reading[i] = cursors[i].Next(&next[i]) && within(next[i]);
      }
    }
    OrderByTime(gathered, &scratch->ordered, &scratch->counts);
    for (const Arrival& arrival : scratch->ordered) {
      sum = sum - current[arrival.spool] + arrival.live_bytes;
      current[arrival.spool] = arrival.live_bytes;
      if (sum > best.peak) best = {sum, arrival.timestamp_ns, arrival.spool, arrival.live_bytes};
    }
  }
  return best;
}

// What each of `spools` held at `best`: merged before it were every spool's points stamped
// earlier, and those stamped at the same time of the spools before the best's.
std::vector<uint64_t> SharesAt(const std::vector<const TimelineSpool*>& spools,
                               const SliceBest& best) {
  std::vector<uint64_t> shares(spools.size(), 0);
  DecodedBlock decoded;
  for (size_t i = 0; i < spools.size(); ++i) {
    if (spools[i] == nullptr) continue;
    shares[i] = i == best.spool ? best.held
                                : HeldAt(*spools[i], best.timestamp_ns, i < best.spool, &decoded);
    decoded.block = std::numeric_limits<size_t>::max();  // the next spool's blocks are its own
  }
  return shares;
}

// A stretch of time between two of the spools' block starts, and the most the processes can have
// held in it together: the sum of each one's highest bytes there.
struct Window {
  Slice slice;
  Sum bound = 0;
};

// Adds to each window of [begin, end) (in time order) the most `spool` can have held in it: the
// highest of its blocks with points in the window, and what it held entering the window.
void AddBounds(const TimelineSpool& spool, Window* begin, Window* end) {
  if (begin == end) return;
  const std::vector<TimelineSpool::Block>& blocks = spool.blocks();
  // The first block with a point in the window or after it, and past the last block starting
  // before the window's end: both move on with the windows. Every block before `first` ends before
  // the first window, so starts before its end: `past` starts at `first`.
  const uint64_t from = begin->slice.from;
  auto first = static_cast<size_t>(
      std::partition_point(blocks.begin(), blocks.end(),
                           [&](const TimelineSpool::Block& b) { return b.last_ns < from; }) -
      blocks.begin());
  size_t past = first;
  for (Window* window = begin; window != end; ++window) {
    while (first < blocks.size() && blocks[first].last_ns < window->slice.from) ++first;
    while (past < blocks.size() &&
           (window->slice.to == 0 || blocks[past].first_ns < window->slice.to)) {
      ++past;
    }
    // Entering the window it held the last point before it: in block `first` when that starts
    // before the window (counted below), else the point before that block.
    uint64_t highest = first == blocks.size()                         ? spool.last_live_bytes()
                       : blocks[first].first_ns >= window->slice.from ? blocks[first].entering
                                                                      : 0;
    for (size_t b = first; b < past; ++b) highest = std::max(highest, blocks[b].highest);
    window->bound += highest;
  }
}

// Points of a spool per cut of the time into windows: windows of about this many points a spool
// keep their number (and the time to bound them all) in proportion to the points, while their
// bounds come from the spools' smaller blocks.
constexpr size_t kPointsPerCut = 1024;

// The time of `spools` cut at the start of a block every kPointsPerCut points, each window bounded
// (AddBounds) on up to `threads` threads, each taking a stretch of windows. A window bounded for
// one spool costs about what a point merged does: a thread takes `min_points_per_thread` of them
// at least.
std::vector<Window> BoundedWindows(const std::vector<const TimelineSpool*>& spools, size_t threads,
                                   uint64_t min_points_per_thread) {
  // Each spool's cuts are in time order already: runs merged pairwise, not sorted anew.
  std::vector<uint64_t> cuts;
  std::vector<size_t> runs{0};  // where each spool's cuts start, then their end
  for (const TimelineSpool* spool : spools) {
    if (spool == nullptr) continue;
    const std::vector<TimelineSpool::Block>& blocks = spool->blocks();
    const size_t stride = std::max<size_t>(1, kPointsPerCut / spool->block_points());
    for (size_t b = 0; b < blocks.size(); b += stride) cuts.push_back(blocks[b].first_ns);
    runs.push_back(cuts.size());
  }
  std::vector<uint64_t> merged(cuts.size());
  while (runs.size() > 2) {
    std::vector<size_t> joined{0};
    for (size_t r = 0; r + 1 < runs.size(); r += 2) {
      const size_t end = r + 2 < runs.size() ? runs[r + 2] : runs[r + 1];
      std::merge(cuts.begin() + static_cast<std::ptrdiff_t>(runs[r]),
                 cuts.begin() + static_cast<std::ptrdiff_t>(runs[r + 1]),
                 cuts.begin() + static_cast<std::ptrdiff_t>(runs[r + 1]),
                 cuts.begin() + static_cast<std::ptrdiff_t>(end),
                 merged.begin() + static_cast<std::ptrdiff_t>(runs[r]));
      joined.push_back(end);
    }
    cuts.swap(merged);
    runs.swap(joined);
  }
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<Window> windows(cuts.size());
  for (size_t k = 0; k < cuts.size(); ++k) {
    windows[k].slice = {k == 0 ? 0 : cuts[k], k + 1 < cuts.size() ? cuts[k + 1] : 0};
  }
  const uint64_t work = uint64_t{windows.size()} * spools.size();
  const size_t parts = static_cast<size_t>(std::clamp<uint64_t>(
      work / std::max<uint64_t>(min_points_per_thread, 1), 1, std::max<size_t>(threads, 1)));
  const size_t per_part = (windows.size() + parts - 1) / parts;
  RunParts(parts, parts, [&](size_t part) {
    Window* begin = windows.data() + std::min(windows.size(), part * per_part);
    Window* end = windows.data() + std::min(windows.size(), (part + 1) * per_part);
    for (const TimelineSpool* spool : spools) {
      if (spool != nullptr) AddBounds(*spool, begin, end);
    }
  });
  return windows;
}

// Whether `window` may hold the answer rather than `best`: a sum above it, or as high and earlier.
bool MayBeat(const Window& window, const SliceBest& best) {
  if (!best.found()) return window.bound > 0;
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

// Merges `slices` on up to `threads` threads; each one's best. `block_points`: the spools' largest
// blocks.
std::vector<SliceBest> MergeSlices(const std::vector<const TimelineSpool*>& spools,
                                   size_t block_points, const std::vector<Slice>& slices,
                                   size_t threads) {
  std::vector<SliceBest> bests(slices.size());
  // Each thread reads every spool a block at a time: all buffers together in kMergeBufferBytes.
  const size_t per_spool = block_points * (sizeof(TimelinePoint) + 2 * sizeof(Arrival));
  const size_t fit = kMergeBufferBytes / (std::max<size_t>(spools.size(), 1) * per_spool);
  const size_t workers =
      std::clamp<size_t>(std::min(threads, fit), 1, std::max<size_t>(slices.size(), 1));
  // Threads take runs of neighbouring slices, each in time order, so that one decoded block
  // serves the slices it spans; four runs a thread even out the work.
  const size_t run = std::max<size_t>(1, (slices.size() + 4 * workers - 1) / (4 * workers));
  std::atomic<size_t> next_run{0};
  RunParts(workers, workers, [&](size_t) {
    MergeScratch scratch;
    scratch.decoded.resize(spools.size());
    for (size_t first = run * next_run++; first < slices.size(); first = run * next_run++) {
      for (size_t s = first; s < std::min(first + run, slices.size()); ++s) {
        bests[s] = MergeSlice(spools, slices[s], &scratch);
      }
    }
  });
  return bests;
}

// The number of threads worth starting for `windows` of `all`, holding `points` in all, of
// `spools`' blocks of `block_points`. A window costs its share of the points and, to enter it, a
// block decoded per spool (HeldAt): with many ranks, entering is most of the work.
size_t ThreadsFor(size_t windows, size_t all, uint64_t points, size_t spools, size_t block_points,
                  size_t threads, uint64_t min_points_per_thread) {
  const uint64_t share =
      points / std::max<size_t>(all, 1) * windows + uint64_t{windows} * spools * block_points;
  return static_cast<size_t>(std::clamp<uint64_t>(
      share / std::max<uint64_t>(min_points_per_thread, 1), 1, std::max<size_t>(threads, 1)));
}

// The first moment of the highest sum of `spools` (`points` in all): windows are merged highest
// bound first, a round at a time, until no window left can hold a sum above the best found (or as
// high, earlier). Most points are never read.
SliceBest MergeWindowsThatMayHoldThePeak(const std::vector<const TimelineSpool*>& spools,
                                         uint64_t points, size_t threads,
                                         uint64_t min_points_per_thread) {
  const std::vector<Window> windows = BoundedWindows(spools, threads, min_points_per_thread);
  size_t present = 0;
  size_t block_points = 1;
  for (const TimelineSpool* spool : spools) {
    if (spool == nullptr) continue;
    ++present;
    block_points = std::max(block_points, spool->block_points());
  }
  // Windows by bound, highest first (as high: the earlier first), put in that order a round at a
  // time: the rounds stop long before the last window, so most are never sorted.
  struct Ranked {
    Sum bound;
    size_t index;
  };
  std::vector<Ranked> order(windows.size());
  for (size_t i = 0; i < windows.size(); ++i) order[i] = {windows[i].bound, i};
  const auto higher = [](const Ranked& a, const Ranked& b) {
    return a.bound > b.bound || (a.bound == b.bound && a.index < b.index);
  };
  SliceBest best;
  size_t round = kFirstRoundWindowsPerThread * std::max<size_t>(threads, 1);
  for (size_t taken = 0; taken < order.size(); round *= 4) {
    const auto from = order.begin() + static_cast<std::ptrdiff_t>(taken);
    const auto to =
        order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), taken + round));
    std::nth_element(from, to - 1, order.end(), higher);
    std::sort(from, to, higher);
    if (!MayBeat(windows[order[taken].index], best)) break;
    std::vector<size_t> chosen;
    for (; taken < order.size() && chosen.size() < round &&
           MayBeat(windows[order[taken].index], best);
         ++taken) {
      chosen.push_back(order[taken].index);
    }
    std::sort(chosen.begin(), chosen.end());
    const size_t workers = ThreadsFor(chosen.size(), windows.size(), points, present, block_points,
                                      threads, min_points_per_thread);
    for (SliceBest& slice_best :
         MergeSlices(spools, block_points, JoinNeighbours(windows, chosen, workers), workers)) {
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
  std::vector<uint64_t> shares(members.size(), 0);
  if (best.found()) {
    result.peak_bytes =
        static_cast<uint64_t>(std::min<Sum>(best.peak, std::numeric_limits<uint64_t>::max()));
    result.timestamp_ns = best.timestamp_ns;
    shares = SharesAt(spools, best);
  }
  for (size_t i = 0; i < members.size(); ++i) result.shares.push_back({members[i], shares[i]});
  std::stable_sort(
      result.shares.begin(), result.shares.end(),
      [](const CombinedShare& a, const CombinedShare& b) { return a.bytes > b.bytes; });
  return result;
}

}  // namespace gpumem::report
