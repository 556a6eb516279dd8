#include "report/analysis/kernels.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/format/json.h"
#include "report/format/names.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/stacks/call_sites.h"
#include "report/stacks/user_frames.h"

namespace gpumem::report {
namespace {

// Graph launches are keyed apart from kernel ids (which the recorder numbers from 1).
constexpr uint64_t kGraphKeyBit = uint64_t{1} << 63;

}  // namespace

UnusedSite& KernelAnalysis::SiteTable::Sparse(int32_t place, uint64_t stack_id) {
  UnusedSite& site = sparse_[{place, stack_id}];
  site.place = place;
  site.stack_id = stack_id;
  return site;
}

UnusedSite& KernelAnalysis::SiteTable::At(int32_t place, uint64_t stack_id) {
  if (stack_id >= kDenseStackIds) return Sparse(place, stack_id);
  if (last_place_ >= places_.size() || places_[last_place_].place != place) {
    auto same = [place](const Place& known) { return known.place == place; };
    const size_t found =
        static_cast<size_t>(std::find_if(places_.begin(), places_.end(), same) - places_.begin());
    if (found == places_.size()) {
      if (places_.size() == kDensePlaces) return Sparse(place, stack_id);
      places_.push_back({place, {}});
    }
    last_place_ = found;
  }
  UnusedSite& site = GrownToHold(places_[last_place_].by_stack, stack_id, kDenseStackIds);
  site.place = place;
  site.stack_id = stack_id;
  return site;
}

std::vector<UnusedSite> KernelAnalysis::SiteTable::Largest() const {
  std::vector<UnusedSite> out;
  for (const Place& place : places_) {
    for (const UnusedSite& site : place.by_stack) {
      if (site.tally.count > 0) out.push_back(site);
    }
  }
  for (const auto& [key, site] : sparse_) out.push_back(site);
  // Largest first; ties by place and stack, so the output does not depend on hashing.
  std::sort(out.begin(), out.end(), [](const UnusedSite& a, const UnusedSite& b) {
    if (a.tally.bytes != b.tally.bytes) return a.tally.bytes > b.tally.bytes;
    if (a.place != b.place) return a.place < b.place;
    return a.stack_id < b.stack_id;
  });
  return out;
}

std::string KernelLabel(const TraceFile* trace, uint64_t kernel_id) {
  const std::string* name = trace != nullptr ? trace->FindKernelName(kernel_id) : nullptr;
  return name != nullptr && !name->empty() ? Printable(Demangle(name->c_str()))
                                           : absl::StrCat("kernel ", kernel_id);
}

std::string KernelName(const LaunchEvent& launch, const TraceFile* trace) {
  if (launch.api() == CU_GRAPH_LAUNCH) return absl::StrCat("graph 0x", absl::Hex(launch.graph()));
  return KernelLabel(trace, launch.kernel_id());
}

std::pair<uint64_t, KernelAnalysis::Kernel*> KernelAnalysis::KernelOf(const LaunchEvent& launch) {
  const bool graph = launch.api() == CU_GRAPH_LAUNCH;
  const uint64_t key = graph ? (launch.graph() | kGraphKeyBit) : launch.kernel_id();
  const bool dense = !graph && key < kDenseKernelIds;
  if (dense && key < kernels_by_id_.size() && kernels_by_id_[key] != nullptr) {
    return {key, kernels_by_id_[key]};
  }
  auto [it, inserted] = kernels_.try_emplace(key);
  if (inserted) it->second.name = KernelName(launch, trace_);
  if (dense) {
    if (key >= kernels_by_id_.size()) kernels_by_id_.resize(key + 1, nullptr);
    kernels_by_id_[key] = &it->second;
  }
  return {key, &it->second};
}

void KernelAnalysis::AllocationStarted(const LiveAllocation& live) {
  // Uses are kept from the first launch on (AddLaunch): before it, no allocation can have been
  // received by a kernel, and a trace without launches costs no table.
  if (launch_index_ > 0) UseOf(live) = Use{0, 0, launch_index_};
}

void KernelAnalysis::AfterMemory(const MemoryEventFields& event, const Replay& replay) {
  if (event.action != ALLOC && event.action != FREE) return;
  // The peak window of the event's place: open at each new peak, closed by the first decrease.
  const int32_t place = event.action == ALLOC ? PlaceOf(event) : event.device;
  if (open_windows_ > 0) {  // most events: every window closed, nothing to close
    for (auto& [known, window] : peaks_) {
      if (!window.at_peak || (place >= 0 && known != place)) continue;
      if (replay.LiveBytes(known) < window.peak_bytes) {
        window.at_peak = false;
        --open_windows_;
      }
    }
  }
  if (event.action == ALLOC) {
    if (last_window_ == nullptr || last_window_place_ != place) {
      last_window_ = &peaks_[place];
      last_window_place_ = place;
    }
    PeakWindow& window = *last_window_;
    const uint64_t live = replay.LiveBytes(place);
    if (live > window.peak_bytes) {
      window.peak_bytes = live;
      if (!window.at_peak) ++open_windows_;
      window.at_peak = true;
      window.kernels.clear();
    }
  }
}

void KernelAnalysis::AddLaunch(const LaunchEvent& launch, const Replay& replay) {
  if (launch_index_ == 0) {
    // The first launch: from now on every live allocation's uses are counted.
    replay.ForEachLive([this](const LiveAllocation& live) { UseOf(live) = Use{0, 0, 0}; });
  }
  ++launch_index_;
  const auto [key, kernel] = KernelOf(launch);
  ++kernel->launches;
  CountStack(launch.stack_id(), key, kernel);
  if (launch.api() == CU_GRAPH_LAUNCH) ++graph_launches_;
  if (launch.api() == CU_GRAPH_LAUNCH || launch.params_unknown()) ++unscanned_launches_;
  for (auto& [place, window] : peaks_) {
    if (window.at_peak && (launch.device() < 0 || launch.device() == place)) {
      ++window.kernels[key];
    }
  }
  for (uint64_t pointer : launch.pointer_args()) {
    const LiveAllocation* live = replay.FindContaining(pointer);
    if (live == nullptr) continue;
    Use& use = UseOf(*live);
    if (use.last_use_launch == launch_index_) continue;  // two pointers into one
    ++use.launches;
    use.last_use_launch = launch_index_;
  }
}

void KernelAnalysis::CountStack(uint64_t stack_id, uint64_t kernel_key, Kernel* kernel) {
  if (stack_id < kDenseLaunchStacks) {
    StackLaunches& entry = GrownToHold(launches_by_stack_, stack_id, kDenseLaunchStacks);
    if (entry.launches == 0) entry.kernel_key = kernel_key;
    if (entry.kernel_key == kernel_key) {
      ++entry.launches;
      return;
    }
  }
  ++kernel->stacks[stack_id];
}

void KernelAnalysis::Classify(const LiveAllocation& live, const Use& use) {
  if (use.launches == 0) {
    never_used_.At(live.place, live.stack_id).tally.Add(live.size);
    return;
  }
  const uint64_t lifetime = launch_index_ - use.first_launch;
  const uint64_t idle = launch_index_ - use.last_use_launch;
  if (idle >= kIdleLaunches && static_cast<double>(idle) >= kIdleShare * lifetime) {
    UnusedSite& site = idle_.At(live.place, live.stack_id);
    site.tally.Add(live.size);
    site.idle_launches += idle;
  }
}

void KernelAnalysis::AllocationEnded(const LiveAllocation& live) {
  // Before any launch: never received.
  Classify(live, launch_index_ == 0 ? Use{} : UseOf(live));
}

void KernelAnalysis::Finished(const Replay& replay) {
  KernelReport& report = report_;
  report.launches = launch_index_;
  report.graph_launches = graph_launches_;
  report.unscanned_launches = unscanned_launches_;
  if (launch_index_ > 0) {
    replay.ForEachLive([&](const LiveAllocation& live) { Classify(live, UseOf(live)); });
    report.never_used = never_used_.Largest();
    report.idle = idle_.Largest();
  }
  for (uint64_t stack_id = 0; stack_id < launches_by_stack_.size(); ++stack_id) {
    const StackLaunches& entry = launches_by_stack_[stack_id];
    if (entry.launches != 0) kernels_.at(entry.kernel_key).stacks[stack_id] += entry.launches;
  }
  launches_by_stack_.clear();
  for (auto& [key, kernel] : kernels_) {
    KernelStats stats;
    stats.name = kernel.name;
    stats.launches = kernel.launches;
    for (const auto& [stack, count] : kernel.stacks) stats.stacks.push_back({stack, count});
    std::sort(stats.stacks.begin(), stats.stacks.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    report.kernels.push_back(std::move(stats));
  }
  std::sort(report.kernels.begin(), report.kernels.end(),
            [](const KernelStats& a, const KernelStats& b) {
              return a.launches != b.launches ? a.launches > b.launches : a.name < b.name;
            });
  for (const auto& [place, window] : peaks_) {
    if (window.kernels.empty()) continue;
    auto& list = report.at_peak[place];
    for (const auto& [key, count] : window.kernels) list.push_back({kernels_[key].name, count});
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
  }
}

namespace {

// A peak's kernels as the text prints them: by short name (ShortKernelName), kernels that share
// one counted together, most launched first; the first `top` (0: all), then "..." for the rest.
std::string AtPeakItems(const std::vector<std::pair<std::string, uint64_t>>& kernels, size_t top) {
  std::vector<std::pair<std::string, uint64_t>> merged;
  absl::flat_hash_map<std::string, size_t> index;
  for (const auto& [name, count] : kernels) {
    const std::string shown = ShortKernelName(name);  // `name` is printable already
    auto [it, added] = index.try_emplace(shown, merged.size());
    if (added) merged.push_back({shown, 0});
    merged[it->second].second += count;
  }
  std::stable_sort(merged.begin(), merged.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  const size_t shown = top == 0 ? merged.size() : std::min(top, merged.size());
  std::vector<std::string> items;
  for (size_t i = 0; i < shown; ++i) {
    items.push_back(absl::StrCat(merged[i].first, " x", merged[i].second));
  }
  if (shown < merged.size()) items.push_back("...");
  return absl::StrJoin(items, ", ");
}

}  // namespace

std::string KernelsText(const KernelReport& report, const TraceFile& trace, size_t top,
                        const std::function<std::vector<std::string>(uint64_t)>& frames_of) {
  auto shown = [top](size_t n) { return top == 0 ? n : std::min(top, n); };
  std::string out = absl::StrCat("kernels: ", report.launches, " launches of ",
                                 report.kernels.size(), " kernels");
  if (report.graph_launches > 0)
    absl::StrAppend(&out, " (", report.graph_launches, " graph launches)");
  absl::StrAppend(&out, "\n");
  if (report.launches == 0) {
    absl::StrAppend(&out,
                    "  no launch events: recorded with GPUMEM_LAUNCHES=0, or by a gpumem without "
                    "launch recording\n");
    return out;
  }
  for (size_t i = 0; i < shown(report.kernels.size()); ++i) {
    const KernelStats& kernel = report.kernels[i];
    absl::StrAppend(&out,
                    absl::StrFormat("  %8d  %s\n", kernel.launches, ShortKernelName(kernel.name)));
    for (size_t s = 0; s < std::min<size_t>(3, kernel.stacks.size()); ++s) {
      const auto& [stack, count] = kernel.stacks[s];
      const std::vector<std::string> frames = frames_of(stack);
      absl::StrAppend(&out, absl::StrFormat("            %d from %s\n", count,
                                            frames.empty() ? "(no stack)" : frames.front()));
      for (size_t f = 1; f < std::min<size_t>(frames.size(), 6); ++f) {
        absl::StrAppend(&out, "              <- ", frames[f], "\n");
      }
    }
  }
  for (const auto& [place, list] : report.at_peak) {
    absl::StrAppend(&out, "kernels while ", PlaceName(place, trace),
                    " stood at its peak: ", AtPeakItems(list, top), "\n");
  }
  auto sites = [&](const char* title, const std::vector<UnusedSite>& list, bool idle) {
    Tally total;
    for (const UnusedSite& site : list) total.Add(site.tally);
    absl::StrAppend(&out, title, ": ", FormatBytes(total.bytes), " in ", total.count,
                    " allocation(s)\n");
    for (size_t i = 0; i < shown(list.size()); ++i) {
      const UnusedSite& site = list[i];
      absl::StrAppend(&out, "  ", FormatBytes(site.tally.bytes), " in ", site.tally.count, " on ",
                      PlaceName(site.place, trace));
      if (idle) {
        absl::StrAppend(&out, ", idle for ", site.idle_launches / site.tally.count,
                        " launches each on average");
      }
      absl::StrAppend(&out, "\n");
      for (const std::string& frame : frames_of(site.stack_id)) {
        absl::StrAppend(&out, "      ", frame, "\n");
      }
    }
  };
  sites("never received by any kernel", report.never_used, false);
  if (report.unscanned_launches > 0) {
    absl::StrAppend(&out, "  (", report.unscanned_launches,
                    " launches could not be looked into — graph launches, or kernels whose "
                    "parameter layout the driver did not give — so some of these may be used)\n");
  }
  sites(absl::StrFormat("idle for at least %d launches after the last use", kIdleLaunches).c_str(),
        report.idle, true);
  return out;
}

std::string KernelsJson(const KernelReport& report, size_t top,
                        const std::function<std::string(uint64_t)>& json_frames_of) {
  auto shown = [top](size_t n) { return top == 0 ? n : std::min(top, n); };
  std::vector<std::string> kernels;
  for (size_t i = 0; i < shown(report.kernels.size()); ++i) {
    const KernelStats& kernel = report.kernels[i];
    std::vector<std::string> stacks;
    for (size_t s = 0; s < std::min<size_t>(3, kernel.stacks.size()); ++s) {
      stacks.push_back(absl::StrCat("{\"launches\":", kernel.stacks[s].second,
                                    ",\"frames\":", json_frames_of(kernel.stacks[s].first), "}"));
    }
    kernels.push_back(absl::StrCat("{\"name\":", JsonString(kernel.name),
                                   ",\"launches\":", kernel.launches, ",\"call_sites\":[",
                                   absl::StrJoin(stacks, ","), "]}"));
  }
  std::vector<std::string> at_peak;
  for (const auto& [place, list] : report.at_peak) {
    std::vector<std::string> items;
    for (const auto& [name, count] : list) {
      items.push_back(absl::StrCat("{\"name\":", JsonString(name), ",\"launches\":", count, "}"));
    }
    at_peak.push_back(
        absl::StrCat("{\"place\":", place, ",\"kernels\":[", absl::StrJoin(items, ","), "]}"));
  }
  auto sites = [&](const std::vector<UnusedSite>& list) {
    std::vector<std::string> items;
    for (size_t i = 0; i < shown(list.size()); ++i) {
      const UnusedSite& site = list[i];
      items.push_back(absl::StrCat("{\"place\":", site.place, ",\"bytes\":", site.tally.bytes,
                                   ",\"count\":", site.tally.count,
                                   ",\"idle_launches\":", site.idle_launches,
                                   ",\"frames\":", json_frames_of(site.stack_id), "}"));
    }
    return absl::StrCat("[", absl::StrJoin(items, ","), "]");
  };
  return absl::StrCat(
      "{\"launches\":", report.launches, ",\"graph_launches\":", report.graph_launches,
      ",\"unscanned_launches\":", report.unscanned_launches, ",\"kernels\":[",
      absl::StrJoin(kernels, ","), "],\"at_peak\":[", absl::StrJoin(at_peak, ","),
      "],\"never_used\":", sites(report.never_used), ",\"idle\":", sites(report.idle), "}");
}

// The kernel report with its call sites merged as CallSites::KernelSiteOf says (unchanged without
// Python frames or under --group-by stack).
KernelReport RegroupKernels(const KernelReport& report, CallSites& sites) {
  KernelReport out = report;
  for (KernelStats& kernel : out.kernels) {
    absl::flat_hash_map<uint64_t, uint64_t> merged;
    for (const auto& [stack, count] : kernel.stacks) merged[sites.KernelSiteOf(stack)] += count;
    kernel.stacks.assign(merged.begin(), merged.end());
    std::sort(kernel.stacks.begin(), kernel.stacks.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
  }
  for (std::vector<UnusedSite>* list : {&out.never_used, &out.idle}) {
    std::vector<UnusedSite> merged;
    absl::flat_hash_map<std::pair<int32_t, uint64_t>, size_t> index;
    for (const UnusedSite& site : *list) {
      const std::pair<int32_t, uint64_t> key{site.place, sites.KernelSiteOf(site.stack_id)};
      auto [it, inserted] = index.try_emplace(key, merged.size());
      if (inserted) {
        merged.push_back(site);
        merged.back().stack_id = key.second;
        continue;
      }
      merged[it->second].tally.Add(site.tally);
      merged[it->second].idle_launches += site.idle_launches;
    }
    std::stable_sort(merged.begin(), merged.end(), [](const UnusedSite& a, const UnusedSite& b) {
      return a.tally.bytes > b.tally.bytes;
    });
    *list = std::move(merged);
  }
  return out;
}

// "kernels while at the peak: ..." under a place's peak, when launches were recorded.
void AppendKernelsAtPeakText(const std::optional<KernelReport>& kernels, int32_t place, size_t top,
                             std::string* out) {
  if (!kernels || kernels->launches == 0) return;
  auto it = kernels->at_peak.find(place);
  if (it == kernels->at_peak.end()) {
    absl::StrAppend(out, "  kernels launched while at the peak: none\n");
    return;
  }
  absl::StrAppend(out, "  kernels launched while at the peak: ", AtPeakItems(it->second, top),
                  "\n");
}

}  // namespace gpumem::report
