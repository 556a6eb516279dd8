#include "report/replay/memory_timeline.h"

#include <algorithm>

namespace gpumem::report {

std::vector<FragmentationPoint> SampleTimeline(const std::vector<FragmentationPoint>& points,
                                               uint64_t first, uint64_t last, size_t samples) {
  std::vector<FragmentationPoint> out;
  size_t next = 0;
  FragmentationPoint value;
  for (size_t i = 0; i < samples; ++i) {
    // In 128 bits: the span times i does not fit in 64, nor exactly in a double.
    const uint64_t time =
        samples == 1 ? last
                     : first + static_cast<uint64_t>(static_cast<unsigned __int128>(last - first) *
                                                     i / (samples - 1));
    while (next < points.size() && points[next].timestamp_ns <= time) value = points[next++];
    FragmentationPoint sample = value;
    sample.timestamp_ns = time;
    out.push_back(sample);
  }
  return out;
}

BucketedTimeline::BucketedTimeline(size_t buckets) : max_buckets_(std::max<size_t>(buckets, 2)) {}

void BucketedTimeline::Add(const FragmentationPoint& point) {
  if (buckets_.empty()) origin_ = latest_ = point.timestamp_ns;
  latest_ = std::max(latest_, point.timestamp_ns);
  uint64_t index = (latest_ - origin_) / width_;
  while (index >= max_buckets_) {
    for (size_t i = 0; i < buckets_.size(); i += 2) {
      const bool later = i + 1 < buckets_.size() && buckets_[i + 1].filled;
      buckets_[i / 2] = buckets_[later ? i + 1 : i];
    }
    buckets_.resize((buckets_.size() + 1) / 2);
    width_ *= 2;
    index = (latest_ - origin_) / width_;
  }
  if (index >= buckets_.size()) buckets_.resize(index + 1);
  buckets_[index] = {point, true};
}

std::vector<FragmentationPoint> BucketedTimeline::Points() const {
  std::vector<FragmentationPoint> points;
  for (const Bucket& bucket : buckets_) {
    if (bucket.filled) points.push_back(bucket.last);
  }
  return points;
}

}  // namespace gpumem::report
