#include "report/stacks/call_sites.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/format/json.h"
#include "report/format/sizes.h"

namespace gpumem::report {

const MemoryHolder* CallSites::HolderOf(uint64_t stack_id) {
  return FindMemoryHolder(Frames(stack_id), stream_ordered_.contains(stack_id));
}

SiteLabel CallSites::LabelOf(uint64_t stack_id) {
  return report::LabelOf(Frames(stack_id), HolderOf(stack_id));
}

std::vector<std::string> CallSites::Lines(uint64_t stack_id) {
  return SiteLines(Shown(stack_id), LabelOf(stack_id), style_);
}

std::vector<std::string> CallSites::LaunchLines(uint64_t stack_id) {
  return SiteLines(Shown(stack_id), report::LabelOf(Frames(stack_id), nullptr), style_);
}

void CallSites::AppendStackText(uint64_t stack_id, std::string* out, absl::string_view indent) {
  for (const std::string& line : Lines(stack_id)) absl::StrAppend(out, indent, line, "\n");
}

Site CallSites::SiteOf(uint64_t stack_id, const Tally& tally) {
  Site site;
  site.frames = Shown(stack_id);
  site.tally = tally;
  site.label = LabelOf(stack_id);
  return site;
}

std::vector<Site> GroupSites(const std::vector<SiteTally>& tallies, CallSites& call_sites,
                             const absl::flat_hash_set<uint64_t>& stream_ordered_stacks,
                             const absl::flat_hash_set<uint64_t>* graph_stacks) {
  std::vector<Site> sites;
  std::vector<uint64_t> largest;  // per site: the bytes of the member whose frames it shows
  absl::flat_hash_map<std::string, size_t> by_key;
  for (const SiteTally& entry : tallies) {
    const std::vector<Frame>& frames = call_sites.Frames(entry.stack_id);
    const MemoryHolder* holder =
        FindMemoryHolder(frames, stream_ordered_stacks.contains(entry.stack_id));
    SiteLabel label = LabelOf(frames, holder);
    // Without a frame of the user's, what the site prints (library and via line) is the site.
    std::string key = call_sites.group_by() == GroupBy::kUser && !label.user_frame
                          ? absl::StrCat("library\n", label.first_line, "\n", label.via)
                          : call_sites.Key(entry.stack_id);
    // What a holder keeps stays apart from the program's own memory at the same call site.
    if (holder != nullptr) key = absl::StrCat(holder->id, "\n", key);
    auto [it, inserted] = by_key.try_emplace(std::move(key), sites.size());
    if (inserted) {
      sites.emplace_back().holder = holder;
      largest.push_back(0);
    }
    Site& site = sites[it->second];
    if (inserted || entry.tally.bytes > largest[it->second]) {
      site.frames = call_sites.ShownOf(frames);
      site.label = std::move(label);
      largest[it->second] = entry.tally.bytes;
    }
    site.tally.Add(entry.tally);
    if (graph_stacks != nullptr && graph_stacks->contains(entry.stack_id)) site.for_graph = true;
  }
  std::stable_sort(sites.begin(), sites.end(),
                   [](const Site& a, const Site& b) { return a.tally.bytes > b.tally.bytes; });
  return sites;
}

void AppendSitesText(const std::vector<Site>& sites, size_t top, uint64_t share_of,
                     StackStyle style, std::string* out) {
  const size_t shown = top == 0 ? sites.size() : std::min(top, sites.size());
  for (size_t i = 0; i < shown; ++i) {
    const Site& site = sites[i];
    absl::StrAppend(out, "  ", FormatBytes(site.tally.bytes));
    if (share_of > 0) {
      absl::StrAppendFormat(
          out, "  %5.1f%%",
          100.0 * static_cast<double>(site.tally.bytes) / static_cast<double>(share_of));
    }
    absl::StrAppend(out, "  ", Plural(site.tally.count, "allocation", "allocations"));
    if (site.holder != nullptr) absl::StrAppend(out, "  [held by ", site.holder->name, "]");
    if (site.for_graph) absl::StrAppend(out, "  [for a CUDA graph]");
    absl::StrAppend(out, "\n");
    for (const std::string& line : SiteLines(site.frames, site.label, style)) {
      absl::StrAppend(out, "      ", line, "\n");
    }
  }
  if (shown < sites.size()) {
    Tally rest;
    for (size_t i = shown; i < sites.size(); ++i) rest.Add(sites[i].tally);
    absl::StrAppend(
        out, "  ... ", Plural(sites.size() - shown, "more call site", "more call sites"), ": ",
        FormatBytes(rest.bytes), " in ", Plural(rest.count, "allocation", "allocations"), "\n");
  }
}

std::string JsonFrame(const Frame& frame) {
  return absl::StrCat(
      "{\"text\":", JsonString(frame.ToString()), ",\"function\":", JsonString(frame.function),
      ",\"file\":", JsonString(frame.file), ",\"line\":", frame.line,
      ",\"module\":", JsonString(frame.module), ",\"module_offset\":", frame.module_offset,
      ",\"pc\":", frame.pc, ",\"inlined\":", frame.inlined ? "true" : "false",
      frame.python ? ",\"python\":true" : "", "}");
}

std::string JsonFrames(const std::vector<Frame>& frames) {
  std::vector<std::string> items;
  for (const Frame& frame : frames) items.push_back(JsonFrame(frame));
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string JsonSites(const std::vector<Site>& sites, size_t top, uint64_t share_of) {
  const size_t shown = top == 0 ? sites.size() : std::min(top, sites.size());
  std::vector<std::string> items;
  for (size_t i = 0; i < shown; ++i) {
    std::string item =
        absl::StrCat("{\"bytes\":", sites[i].tally.bytes, ",\"count\":", sites[i].tally.count);
    if (share_of > 0) {
      absl::StrAppendFormat(
          &item, ",\"share\":%.6f",
          static_cast<double>(sites[i].tally.bytes) / static_cast<double>(share_of));
    }
    if (sites[i].holder != nullptr) {
      absl::StrAppend(&item, ",\"held_by\":", JsonString(sites[i].holder->id));
    }
    if (sites[i].for_graph) absl::StrAppend(&item, ",\"for_cuda_graph\":true");
    const SiteLabel& label = sites[i].label;
    // The frames first, as before; the label's fields after them.
    absl::StrAppend(&item, ",\"frames\":", JsonFrames(sites[i].frames), JsonLabelFields(label),
                    "}");
    items.push_back(std::move(item));
  }
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string JsonLabelFields(const SiteLabel& label) {
  return absl::StrCat(
      ",\"user_frame\":", label.user_frame ? JsonFrame(*label.user_frame) : std::string("null"),
      ",\"via\":", JsonString(label.via));
}

std::string SizeText(uint64_t bytes) {
  return absl::StrCat(FormatBytes(bytes), " (", bytes, " bytes)");
}

double MillisecondsSinceStart(uint64_t timestamp_ns, const TraceFile& trace) {
  const uint64_t start = trace.header().start_time_mono_ns();
  return timestamp_ns >= start ? static_cast<double>(timestamp_ns - start) / 1e6 : 0.0;
}

uint64_t SinceStart(uint64_t timestamp_ns, const TraceFile& trace) {
  const uint64_t start = trace.header().start_time_mono_ns();
  return timestamp_ns >= start ? timestamp_ns - start : 0;
}

}  // namespace gpumem::report
