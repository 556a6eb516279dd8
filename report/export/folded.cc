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

// The frame table, each name once.
class FrameTable {
 public:
  explicit FrameTable(std::vector<WeightedStacks::FrameInfo>* frames) : frames_(frames) {}
  uint32_t Of(const std::string& name, const std::string& file, int line) {
    const auto [it, added] = index_.try_emplace(name, static_cast<uint32_t>(frames_->size()));
    if (added) frames_->push_back({name, file, line});
    return it->second;
  }

 private:
  std::vector<WeightedStacks::FrameInfo>* frames_;
  absl::flat_hash_map<std::string, uint32_t> index_;
};

}  // namespace

std::string FoldedFrameName(absl::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c == ';') c = ',';
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

TraceReplay WeighStacks(std::unique_ptr<TraceFile> file, StackWeight what, Progress* progress,
                        WeightedStacks* out) {
  const TraceFile* trace = file.get();
  MemoryEventVisitor tick;
  if (progress != nullptr) {
    tick = [progress, trace](const MemoryEvent&) { progress->Update(trace->bytes_read()); };
  }
  TraceReplay replay = ReplayTrace(std::move(file), tick);
  Symbolizer symbolizer(replay.file.get());
  FrameTable table(&out->frames);
  absl::flat_hash_map<uint64_t, std::vector<uint32_t>> stack_frames;  // stack id -> outermost first
  for (const PlaceUsage& place : replay.places) {
    const std::vector<SiteTally>& sites =
        what == StackWeight::kPeak ? place.peak_sites : place.live_sites;
    // Stacks that symbolize the same are one sample.
    std::map<std::vector<uint32_t>, uint64_t> bytes_by_stack;
    uint64_t total = 0;
    for (const SiteTally& site : sites) {
      if (site.tally.bytes == 0) continue;
      auto it = stack_frames.find(site.stack_id);
      if (it == stack_frames.end()) {
        std::vector<uint32_t> frames;
        const std::vector<Frame> symbolized = symbolizer.Symbolize(site.stack_id);
        for (auto frame = symbolized.rbegin(); frame != symbolized.rend(); ++frame) {
          frames.push_back(table.Of(FoldedFrameName(frame->ToString()), frame->file, frame->line));
        }
        if (frames.empty()) frames.push_back(table.Of(kNoStack, "", 0));
        it = stack_frames.emplace(site.stack_id, std::move(frames)).first;
      }
      uint64_t& bytes = bytes_by_stack[it->second];
      bytes = SaturatingAdd(bytes, site.tally.bytes);
      total = SaturatingAdd(total, site.tally.bytes);
    }
    if (bytes_by_stack.empty()) continue;
    WeightedStacks::Profile& profile = out->profiles.emplace_back();
    profile.place = place.place;
    profile.name = PlaceName(place.place, *replay.file);
    profile.total_bytes = total;
    for (auto& [frames, bytes] : bytes_by_stack) profile.samples.push_back({frames, bytes});
    std::stable_sort(profile.samples.begin(), profile.samples.end(),
                     [](const WeightedStacks::Sample& a, const WeightedStacks::Sample& b) {
                       return a.bytes > b.bytes;
                     });
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
  for (const WeightedStacks::FrameInfo& frame : stacks.frames) {
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
