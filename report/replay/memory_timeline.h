// Reserved and in-use bytes of one device over time, in memory bounded whatever the length of the
// trace: the timeline of the fragmentation report and of each allocator model's replay.
#ifndef GPUMEM_REPORT_REPLAY_MEMORY_TIMELINE_H_
#define GPUMEM_REPORT_REPLAY_MEMORY_TIMELINE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumem::report {

// Reserved and in-use bytes on one device right after one event. A value the mode does not know
// is 0 (see Fragmentation::has_reserved / has_in_use).
struct FragmentationPoint {
  uint64_t timestamp_ns = 0;
  uint64_t reserved = 0;
  uint64_t in_use = 0;
  // reserved - in_use, when both are known.
  uint64_t unused() const { return reserved > in_use ? reserved - in_use : 0; }
};

inline constexpr size_t kFragmentationSamples = 10;
inline constexpr size_t kFragmentationTimelineBuckets = 1024;

// One device's values over time in memory bounded by `buckets`, whatever the length of the trace.
// Time from the device's first point is cut into buckets of one width, each keeping the last
// point that fell in it; a point beyond the last of `buckets` buckets doubles the width (each pair
// of buckets becomes one, keeping the later point) until it fits. A point stamped before one seen
// already goes to that one's bucket: replay order wins. The width starts at 1 ns and stays below
// span / (buckets / 2), and a point is dropped only for a later one less than a width after it:
// a value read at time t from Points() is exact, or up to one width old.
class BucketedTimeline {
 public:
  explicit BucketedTimeline(size_t buckets = kFragmentationTimelineBuckets);
  void Add(const FragmentationPoint& point);
  // The kept points, in replay order.
  std::vector<FragmentationPoint> Points() const;
  uint64_t bucket_width_ns() const { return width_; }

 private:
  struct Bucket {
    FragmentationPoint last;
    bool filled = false;
  };
  size_t max_buckets_;
  uint64_t origin_ = 0;  // the first point's timestamp
  uint64_t latest_ = 0;  // the latest timestamp seen
  uint64_t width_ = 1;   // nanoseconds per bucket
  std::vector<Bucket> buckets_;
};

// The value at each of `samples` evenly spaced times from `first` to `last`: the last of `points`
// (in replay order) at or before it, zeros before the first.
std::vector<FragmentationPoint> SampleTimeline(const std::vector<FragmentationPoint>& points,
                                               uint64_t first, uint64_t last, size_t samples);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_REPLAY_MEMORY_TIMELINE_H_
