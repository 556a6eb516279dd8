#include "viewer/timeline_buckets.h"

#include <algorithm>

#include "report/format/sizes.h"

namespace gpumem::viewer {

TimelineBuckets::TimelineBuckets(size_t max_buckets, size_t split_sites)
    : max_buckets_(std::max<size_t>(max_buckets, 2)),
      split_sites_(std::max<size_t>(split_sites, 1)) {}

void TimelineBuckets::Apply(uint64_t t, const std::vector<SiteChange>& changes) {
  Locate(t);
  for (const SiteChange& change : changes) {
    // The value before a fall is the bucket's maximum when it was just reached: split it first.
    if (change.bytes < 0) FlushPendingMax();
  }
  for (const SiteChange& change : changes) {
    if (change.site >= site_bytes_.size()) site_bytes_.resize(change.site + 1, 0);
    uint64_t& bytes = site_bytes_[change.site];
    // The magnitude in unsigned arithmetic: -INT64_MIN does not fit an int64_t.
    const uint64_t magnitude = change.bytes < 0 ? uint64_t{0} - static_cast<uint64_t>(change.bytes)
                                                : static_cast<uint64_t>(change.bytes);
    if (change.bytes < 0) {
      const uint64_t fall = std::min(bytes, magnitude);
      bytes -= fall;
      in_use_ -= std::min(in_use_, fall);
    } else {
      bytes = report::SaturatingAdd(bytes, magnitude);
      in_use_ = report::SaturatingAdd(in_use_, magnitude);
    }
  }
  TimeBucket& bucket = buckets_[current_];
  bucket.last_in_use = in_use_;
  if (in_use_ > bucket.max_in_use) {
    bucket.max_in_use = in_use_;
    pending_max_ = true;
  }
}

void TimelineBuckets::Launch(uint64_t t) { ++Locate(t).launches; }

void TimelineBuckets::Reserved(uint64_t t, uint64_t bytes) {
  TimeBucket& bucket = Locate(t);
  reserved_ = bytes;
  has_reserved_ = true;
  bucket.reserved = std::max(bucket.reserved, bytes);
}

void TimelineBuckets::Finish() {
  if (!started_) return;
  FlushPendingMax();
  buckets_[current_].at_last = Snapshot();
}

TimeBucket& TimelineBuckets::Locate(uint64_t t) {
  if (!started_) {
    started_ = true;
    latest_ = t;
    buckets_.resize(1);
    buckets_[0].touched = true;
    buckets_[0].start = t;
  }
  t = std::max(t, latest_);
  latest_ = t;
  size_t index = events_++ / per_bucket_;
  if (index >= max_buckets_) {
    FlushPendingMax();
    Merge();
    index = (events_ - 1) / per_bucket_;
  }
  if (index != current_) {
    FlushPendingMax();
    Split now = Snapshot();
    buckets_[current_].at_last = now;
    if (index >= buckets_.size()) buckets_.resize(index + 1);
    current_ = index;
    TimeBucket& bucket = buckets_[index];
    bucket.touched = true;
    bucket.start = t;
    bucket.max_in_use = bucket.last_in_use = in_use_;  // carried in
    bucket.reserved = reserved_;
    bucket.at_max = std::move(now);
  }
  return buckets_[current_];
}

void TimelineBuckets::Merge() {
  std::vector<TimeBucket> merged((buckets_.size() + 1) / 2);
  for (size_t i = 0; i < merged.size(); ++i) {
    TimeBucket& first = buckets_[2 * i];
    if (2 * i + 1 >= buckets_.size() || !buckets_[2 * i + 1].touched) {
      merged[i] = std::move(first);
      continue;
    }
    TimeBucket& second = buckets_[2 * i + 1];
    if (!first.touched) {
      merged[i] = std::move(second);
      continue;
    }
    TimeBucket& out = merged[i];
    out = std::move(first);
    if (second.max_in_use > out.max_in_use) {
      out.max_in_use = second.max_in_use;
      out.at_max = std::move(second.at_max);
    }
    out.last_in_use = second.last_in_use;
    out.at_last = std::move(second.at_last);
    out.reserved = std::max(out.reserved, second.reserved);
    out.launches += second.launches;
  }
  buckets_ = std::move(merged);
  current_ /= 2;
  per_bucket_ *= 2;
}

Split TimelineBuckets::Snapshot() const {
  Split split;
  for (uint32_t site = 0; site < site_bytes_.size(); ++site) {
    if (site_bytes_[site] > 0) split.emplace_back(site, site_bytes_[site]);
  }
  const auto larger = [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  if (split.size() > split_sites_) {
    std::nth_element(split.begin(), split.begin() + split_sites_, split.end(), larger);
    uint64_t rest = 0;
    for (size_t i = split_sites_; i < split.size(); ++i) {
      rest = report::SaturatingAdd(rest, split[i].second);
    }
    split.resize(split_sites_);
    std::sort(split.begin(), split.end(), larger);
    split.emplace_back(kRestSite, rest);
    return split;
  }
  std::sort(split.begin(), split.end(), larger);
  return split;
}

void TimelineBuckets::FlushPendingMax() {
  if (!pending_max_) return;
  buckets_[current_].at_max = Snapshot();
  pending_max_ = false;
}

}  // namespace gpumem::viewer
