#include "viewer/iterations.h"

#include <algorithm>

namespace gpumem::viewer {

void SampledTimes::Add(uint64_t t) {
  if (count++ % stride != 0) return;
  times.push_back(t);
  if (times.size() <= kMaxIterationTimes) return;
  size_t kept = 0;
  for (size_t i = 0; i < times.size(); i += 2) times[kept++] = times[i];
  times.resize(kept);
  stride *= 2;
}

void IterationTimes::AddMemory(const MemoryEvent& event, uint64_t t) {
  if (event.action() != ALLOC) return;
  counter_.Add(event);
  by_stack_[event.stack_id()].Add(t);
  if (is_marker_ && !first_marker_stack_ && is_marker_(event.stack_id())) {
    first_marker_stack_ = event.stack_id();
  }
}

void IterationTimes::AddLaunch(const LaunchEvent& launch, uint64_t t) {
  if (is_marker_) return;
  counter_.AddLaunch(launch);
  by_launch_site_[report::LaunchSite{launch.kernel_id(), launch.stack_id()}].Add(t);
}

Iterations IterationTimes::FromStacks(uint64_t site, const report::CallSiteOf& call_site_of) const {
  Iterations out;
  for (const auto& [stack, sampled] : by_stack_) {
    if (call_site_of(stack) != site) continue;
    out.count += sampled.count;
    out.stride = std::max(out.stride, sampled.stride);
    out.times.insert(out.times.end(), sampled.times.begin(), sampled.times.end());
  }
  std::sort(out.times.begin(), out.times.end());
  while (out.times.size() > kMaxIterationTimes) {
    size_t kept = 0;
    for (size_t i = 0; i < out.times.size(); i += 2) out.times[kept++] = out.times[i];
    out.times.resize(kept);
    out.stride *= 2;
  }
  return out;
}

Iterations IterationTimes::Finish(const report::CallSiteOf& call_site_of) const {
  if (is_marker_) {
    if (!first_marker_stack_) return {};
    Iterations out = FromStacks(call_site_of(*first_marker_stack_), call_site_of);
    out.rule = "allocations of the --iteration-marker call site";
    return out;
  }
  if (const std::optional<uint64_t> marker = counter_.MostFrequent(call_site_of)) {
    Iterations out = FromStacks(*marker, call_site_of);
    out.rule = "allocations of the call site that allocates once per iteration (detected)";
    return out;
  }
  if (const std::optional<report::LaunchSite> launch = counter_.LaunchMarker()) {
    const auto it = by_launch_site_.find(*launch);
    if (it == by_launch_site_.end()) return {};
    Iterations out;
    out.count = it->second.count;
    out.times = it->second.times;
    out.stride = it->second.stride;
    out.rule = "launches of the kernel launched once per iteration (detected)";
    return out;
  }
  return {};
}

}  // namespace gpumem::viewer
