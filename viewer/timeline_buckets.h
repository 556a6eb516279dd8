// One place's memory over time, reduced to a fixed number of time buckets whatever the length of
// the trace: per bucket its start time, the highest and the last in-use bytes, each with its split
// by call site (the largest sites, the rest summed), the reserved bytes where known, and the kernel
// launches.
//
// Buckets hold equal numbers of events (memory events, launches, pool sizes), not equal spans of
// time: where the program is busy the buckets are short, so zooming into a burst after a long quiet
// start (PyTorch's import) shows it in detail, and quiet stretches cost no buckets. A bucket runs
// from its first event to the next bucket's first; once the last bucket is full, each pair of
// buckets becomes one (the earlier start, the higher maximum with its split, the later last value
// with its split, launches summed) and buckets take twice as many events. A point stamped before
// one seen already counts at that one's time: replay order wins. A bucket's maximum includes the
// value carried in from the bucket before, so the maximum over any range of buckets is exact: the
// bucket holding the peak shows the peak itself.
//
// The split by call site is taken lazily: at most once per new maximum of a bucket (when the value
// next falls, or the bucket is left) and once when a bucket is left, so its cost follows the
// number of record highs, not of events. Memory: buckets x split sites, and the live bytes per
// call site.
#ifndef GPUMEM_VIEWER_TIMELINE_BUCKETS_H_
#define GPUMEM_VIEWER_TIMELINE_BUCKETS_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace gpumem::viewer {

inline constexpr size_t kDefaultBuckets = 2000;
// Call sites kept in each bucket's split; the others are summed under kRestSite.
inline constexpr size_t kSplitSites = 32;
inline constexpr uint32_t kRestSite = std::numeric_limits<uint32_t>::max();

// (call site, bytes), largest first; kRestSite (the other sites summed) last when present. The
// bytes sum to the in-use value it was taken at.
using Split = std::vector<std::pair<uint32_t, uint64_t>>;

struct TimeBucket {
  bool touched = false;  // an event fell in it (else its values are carried from the one before)
  uint64_t start = 0;    // the time of its first event
  uint64_t max_in_use = 0;
  uint64_t last_in_use = 0;
  uint64_t reserved = 0;  // the highest reserved value known in it
  uint64_t launches = 0;
  Split at_max;
  Split at_last;
};

// A change of one call site's live bytes (totals saturate at 2^64 - 1).
struct SiteChange {
  uint32_t site = 0;
  int64_t bytes = 0;
};

class TimelineBuckets {
 public:
  explicit TimelineBuckets(size_t max_buckets = kDefaultBuckets, size_t split_sites = kSplitSites);

  // In replay order. `t` is nanoseconds (any origin, the same for every call).
  // The changes one memory event made (frees first), applied at `t`.
  void Apply(uint64_t t, const std::vector<SiteChange>& changes);
  void Launch(uint64_t t);
  void Reserved(uint64_t t, uint64_t bytes);

  // Ends the series (takes the last bucket's split). Call once, after the last event.
  void Finish();

  const std::vector<TimeBucket>& buckets() const { return buckets_; }
  uint64_t end() const { return latest_; }  // the time of the last event
  uint64_t in_use() const { return in_use_; }
  bool has_reserved() const { return has_reserved_; }

 private:
  // The bucket of the next event, at `t` (replay order wins), made current; merges pairs when the
  // last bucket is full.
  TimeBucket& Locate(uint64_t t);
  void Merge();
  Split Snapshot() const;
  void FlushPendingMax();

  size_t max_buckets_;
  size_t split_sites_;
  bool started_ = false;
  uint64_t latest_ = 0;
  uint64_t events_ = 0;      // events so far
  uint64_t per_bucket_ = 1;  // events per bucket
  size_t current_ = 0;
  bool pending_max_ = false;  // the current bucket's maximum was reached and not split yet
  uint64_t in_use_ = 0;
  uint64_t reserved_ = 0;
  bool has_reserved_ = false;
  std::vector<uint64_t> site_bytes_;  // live bytes by call site
  std::vector<TimeBucket> buckets_;
};

}  // namespace gpumem::viewer

#endif  // GPUMEM_VIEWER_TIMELINE_BUCKETS_H_
