#include "report/export/folded.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "report/format/json.h"
#include "report/format/sizes.h"
#include "report/stacks/symbolizer.h"

namespace gpumem::report {
namespace {

constexpr char kNoStack[] = "(no stack recorded)";

// The frame table, each printed frame once.
class FrameTable {
 public:
  explicit FrameTable(std::vector<FrameInfo>* frames) : frames_(frames) {}
  uint32_t Of(const Frame& frame) {
    FrameInfo info;
    info.name = FoldedFrameName(frame.ToString());
    info.file = frame.file;
    info.line = frame.line;
    info.function = frame.function;
    info.module = frame.module;
    info.pc = frame.pc;
    info.module_offset = frame.module_offset;
    return Of(std::move(info));
  }
  uint32_t Of(FrameInfo info) {
    const auto [it, added] = index_.try_emplace(info.name, static_cast<uint32_t>(frames_->size()));
    if (added) frames_->push_back(std::move(info));
    return it->second;
  }

 private:
  std::vector<FrameInfo>* frames_;
  absl::flat_hash_map<std::string, uint32_t> index_;
};

// Stack ids to frame indices, outermost first, each stack symbolized once.
class StackFrames {
 public:
  StackFrames(const TraceFile* trace, std::vector<FrameInfo>* frames)
      : symbolizer_(trace), table_(frames) {}
  const std::vector<uint32_t>& Of(uint64_t stack_id) {
    auto it = frames_.find(stack_id);
    if (it != frames_.end()) return it->second;
    std::vector<uint32_t> frames;
    const std::vector<Frame> symbolized = symbolizer_.Symbolize(stack_id);
    for (auto frame = symbolized.rbegin(); frame != symbolized.rend(); ++frame) {
      frames.push_back(table_.Of(*frame));
    }
    if (frames.empty()) {
      FrameInfo none;
      none.name = kNoStack;
      frames.push_back(table_.Of(std::move(none)));
    }
    return frames_.emplace(stack_id, std::move(frames)).first->second;
  }

 private:
  Symbolizer symbolizer_;
  FrameTable table_;
  absl::flat_hash_map<uint64_t, std::vector<uint32_t>> frames_;
};

// Adds `sites` into the tallies `member` of `place`'s stacks.
void AddSites(const std::vector<SiteTally>& sites, Tally StackTallies::*member, StackFrames* frames,
              TalliedStacks::Place* place) {
  for (const SiteTally& site : sites) {
    if (site.tally.count == 0 && site.tally.bytes == 0) continue;
    (place->stacks[frames->Of(site.stack_id)].*member).Add(site.tally);
  }
}

}  // namespace

std::string FoldedFrameName(absl::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c == ';') c = ',';
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

TraceReplay TallyStacks(std::unique_ptr<TraceFile> file, Progress* progress, TalliedStacks* out) {
  const TraceFile* trace = file.get();
  TraceReplay replay = ReplayTrace(std::move(file), [&](const MemoryEvent& event) {
    out->last_event_ns = std::max(out->last_event_ns, event.timestamp_ns());
    if (progress != nullptr) progress->Update(trace->bytes_read());
  });
  StackFrames frames(replay.file.get(), &out->frames);
  for (const PlaceUsage& usage : replay.places) {
    TalliedStacks::Place place;
    place.place = usage.place;
    place.name = PlaceName(usage.place, *replay.file);
    AddSites(usage.allocated_sites, &StackTallies::allocated, &frames, &place);
    AddSites(usage.peak_sites, &StackTallies::at_peak, &frames, &place);
    AddSites(usage.live_sites, &StackTallies::never_freed, &frames, &place);
    if (!place.stacks.empty()) out->places.push_back(std::move(place));
  }
  return replay;
}

TraceReplay WeighStacks(std::unique_ptr<TraceFile> file, StackWeight what, Progress* progress,
                        WeightedStacks* out) {
  TalliedStacks tallied;
  TraceReplay replay = TallyStacks(std::move(file), progress, &tallied);
  out->frames = std::move(tallied.frames);
  for (const TalliedStacks::Place& place : tallied.places) {
    WeightedStacks::Profile profile;
    profile.place = place.place;
    profile.name = place.name;
    for (const auto& [frames, tallies] : place.stacks) {
      const uint64_t bytes =
          what == StackWeight::kPeak ? tallies.at_peak.bytes : tallies.never_freed.bytes;
      if (bytes == 0) continue;
      profile.samples.push_back({frames, bytes});
      profile.total_bytes = SaturatingAdd(profile.total_bytes, bytes);
    }
    if (profile.samples.empty()) continue;
    std::stable_sort(profile.samples.begin(), profile.samples.end(),
                     [](const WeightedStacks::Sample& a, const WeightedStacks::Sample& b) {
                       return a.bytes > b.bytes;
                     });
    out->profiles.push_back(std::move(profile));
  }
  return replay;
}

std::string FoldedText(const WeightedStacks& stacks) {
  std::string out;
  for (const WeightedStacks::Profile& profile : stacks.profiles) {
    const std::string root = FoldedFrameName(profile.name);
    for (const WeightedStacks::Sample& sample : profile.samples) {
      absl::StrAppend(&out, root);
      for (const uint32_t frame : sample.frames)
        absl::StrAppend(&out, ";", stacks.frames[frame].name);
      absl::StrAppend(&out, " ", sample.bytes, "\n");
    }
  }
  return out;
}

std::string SpeedscopeJson(const WeightedStacks& stacks, absl::string_view name) {
  std::vector<std::string> frames;
  frames.reserve(stacks.frames.size());
  for (const FrameInfo& frame : stacks.frames) {
    std::string json = absl::StrCat("{\"name\":", JsonString(frame.name));
    if (!frame.file.empty()) {
      absl::StrAppend(&json, ",\"file\":", JsonString(frame.file));
      if (frame.line > 0) absl::StrAppend(&json, ",\"line\":", frame.line);
    }
    frames.push_back(json + "}");
  }
  std::vector<std::string> profiles;
  for (const WeightedStacks::Profile& profile : stacks.profiles) {
    std::vector<std::string> samples;
    std::vector<std::string> weights;
    for (const WeightedStacks::Sample& sample : profile.samples) {
      samples.push_back(absl::StrCat("[", absl::StrJoin(sample.frames, ","), "]"));
      weights.push_back(absl::StrCat(sample.bytes));
    }
    profiles.push_back(absl::StrCat(
        "{\"type\":\"sampled\",\"name\":", JsonString(profile.name),
        ",\"unit\":\"bytes\",\"startValue\":0,\"endValue\":", profile.total_bytes, ",\"samples\":[",
        absl::StrJoin(samples, ","), "],\"weights\":[", absl::StrJoin(weights, ","), "]}"));
  }
  return absl::StrCat(
      "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"name\":",
      JsonString(name), ",\"exporter\":\"gpumem\",\"activeProfileIndex\":0,",
      "\"shared\":{\"frames\":[", absl::StrJoin(frames, ","), "]},\"profiles\":[",
      absl::StrJoin(profiles, ",\n"), "]}\n");
}

}  // namespace gpumem::report
