// `gpumem report`: when each device peaked and what it held then, and what was never freed, by
// call site; readable text or one JSON object (schema: report/README.md).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/arguments.h"
#include "report/commands.h"
#include "report/replay.h"
#include "report/sizes.h"
#include "report/symbolizer.h"
#include "report/trace_file.h"
#include "report/trace_paths.h"

namespace gpumem::report {

const char kReportUsage[] =
    R"usage(usage: gpumem report [--peak] [--leaks] [--top N] [--json] TRACE...

Replays each trace's memory operations in order and reports, per device:
  --peak       when it peaked, by how much, and what was live then by call site, largest first
  --leaks      what was never freed at the end, by call site
  (neither: both)
  --top N      call sites shown per device (default 10; 0: all)
  --json       one JSON object instead of text (schema: report/README.md in the sources)
  -h, --help   print this text

A TRACE may be a directory: every *.trace file directly inside it, each reported on its own.
VMM: reserved address space is not memory use; cuMemCreate'd physical memory is.

Exit status: 0 ok; 2 bad usage, or a trace that is missing, not a trace or damaged (a damaged
trace is still reported as far as it could be read; the damage is named in one line on stderr).
)usage";

namespace {

constexpr size_t kDefaultTop = 10;

struct Options {
  bool peak = false;
  bool leaks = false;
  bool json = false;
  size_t top = kDefaultTop;
};

// One call site: the symbolized stack and what it held.
struct Site {
  std::vector<Frame> frames;
  Tally tally;
};

// Per-stack tallies grouped by call site (for now the whole symbolized stack, so stack ids whose
// frames read the same merge), largest first.
std::vector<Site> GroupSites(const std::vector<SiteTally>& tallies, Symbolizer& symbolizer) {
  std::vector<Site> sites;
  absl::flat_hash_map<std::string, size_t> by_key;
  for (const SiteTally& entry : tallies) {
    std::vector<Frame> frames = symbolizer.Symbolize(entry.stack_id);
    std::vector<std::string> texts;
    for (const Frame& frame : frames) texts.push_back(frame.ToString());
    const std::string key = absl::StrJoin(texts, "\n");
    auto [it, inserted] = by_key.try_emplace(key, sites.size());
    if (inserted) sites.push_back({std::move(frames), {}});
    sites[it->second].tally.Add(entry.tally);
  }
  std::stable_sort(sites.begin(), sites.end(),
                   [](const Site& a, const Site& b) { return a.tally.bytes > b.tally.bytes; });
  return sites;
}

double MillisecondsSinceStart(uint64_t timestamp_ns, const TraceFile& trace) {
  const uint64_t start = trace.header().start_time_mono_ns();
  return timestamp_ns >= start ? static_cast<double>(timestamp_ns - start) / 1e6 : 0.0;
}

std::string Plural(uint64_t count, const char* one, const char* many) {
  return absl::StrCat(count, " ", count == 1 ? one : many);
}

std::string DescribeAnomalies(const ReplayAnomalies& anomalies) {
  if (anomalies.total() == 0) return "none";
  std::vector<std::string> parts;
  if (anomalies.unknown_frees > 0) {
    parts.push_back(
        Plural(anomalies.unknown_frees, "free of an unknown pointer", "frees of unknown pointers"));
  }
  if (anomalies.double_frees > 0) {
    parts.push_back(Plural(anomalies.double_frees, "double free", "double frees"));
  }
  if (anomalies.overlapping_allocations > 0) {
    parts.push_back(Plural(anomalies.overlapping_allocations, "allocation over a live range",
                           "allocations over a live range"));
  }
  return absl::StrJoin(parts, ", ");
}

constexpr char kNotCleanExit[] =
    "the process did not exit cleanly: what was live when it stopped, not necessarily leaked";

// ---- text ----

void AppendSitesText(const std::vector<Site>& sites, size_t top, uint64_t share_of,
                     std::string* out) {
  const size_t shown = top == 0 ? sites.size() : std::min(top, sites.size());
  for (size_t i = 0; i < shown; ++i) {
    const Site& site = sites[i];
    absl::StrAppend(out, "  ", FormatBytes(site.tally.bytes));
    if (share_of > 0) {
      absl::StrAppendFormat(
          out, "  %5.1f%%",
          100.0 * static_cast<double>(site.tally.bytes) / static_cast<double>(share_of));
    }
    absl::StrAppend(out, "  ", Plural(site.tally.count, "allocation", "allocations"), "\n");
    if (site.frames.empty()) absl::StrAppend(out, "      (no stack recorded)\n");
    for (const Frame& frame : site.frames) absl::StrAppend(out, "      ", frame.ToString(), "\n");
  }
  if (shown < sites.size()) {
    Tally rest;
    for (size_t i = shown; i < sites.size(); ++i) rest.Add(sites[i].tally);
    absl::StrAppend(
        out, "  ... ", Plural(sites.size() - shown, "more call site", "more call sites"), ": ",
        FormatBytes(rest.bytes), " in ", Plural(rest.count, "allocation", "allocations"), "\n");
  }
}

std::string TextReport(const TraceReplay& replay, const Options& options) {
  const TraceFile& trace = *replay.file;
  Symbolizer symbolizer(&trace);
  std::string out;
  const Header& header = trace.header();
  absl::StrAppend(&out, "process: pid ", header.pid(), " on ", header.host(), ": ",
                  absl::StrJoin(header.command_line(), " "), "\n");
  absl::StrAppend(&out, "end: ", trace.end().Describe(), "\n");
  absl::StrAppend(&out, "memory events: ", replay.memory_events,
                  "; failed allocations: ", replay.failed_allocations,
                  "; anomalies: ", DescribeAnomalies(replay.anomalies), "\n");
  if (replay.reserved_peak_bytes > 0) {
    absl::StrAppend(&out, "VMM address space reserved (not memory use): at most ",
                    FormatBytes(replay.reserved_peak_bytes), "\n");
  }
  if (options.peak) {
    if (replay.places.empty()) absl::StrAppend(&out, "\npeak: no memory allocated\n");
    for (const PlaceUsage& place : replay.places) {
      absl::StrAppendFormat(&out, "\npeak, %s: %s (%d bytes) at seq %d, %.3f ms after start\n",
                            PlaceName(place.place, trace), FormatBytes(place.peak_bytes),
                            place.peak_bytes, place.peak_seq,
                            MillisecondsSinceStart(place.peak_timestamp_ns, trace));
      AppendSitesText(GroupSites(place.peak_sites, symbolizer), options.top, place.peak_bytes,
                      &out);
    }
  }
  if (options.leaks) {
    const bool clean = trace.end().footer_present;
    bool any = false;
    if (!clean) absl::StrAppend(&out, "\nleaks: ", kNotCleanExit, "\n");
    for (const PlaceUsage& place : replay.places) {
      if (place.live.count == 0) continue;
      any = true;
      absl::StrAppend(&out, "\nleaks, ", PlaceName(place.place, trace), ": ",
                      Plural(place.live.count, "allocation", "allocations"), ", ",
                      FormatBytes(place.live.bytes), " (", place.live.bytes, " bytes) ",
                      clean ? "never freed" : "live when it stopped", "\n");
      AppendSitesText(GroupSites(place.live_sites, symbolizer), options.top, 0, &out);
    }
    if (!any) absl::StrAppend(&out, "\nleaks: none: everything allocated was freed\n");
  }
  return out;
}

// ---- JSON ----

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (const unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out += "\"";
  return out;
}

std::string JsonFrames(const std::vector<Frame>& frames) {
  std::vector<std::string> items;
  for (const Frame& frame : frames) {
    items.push_back(absl::StrCat(
        "{\"text\":", JsonString(frame.ToString()), ",\"function\":", JsonString(frame.function),
        ",\"file\":", JsonString(frame.file), ",\"line\":", frame.line,
        ",\"module\":", JsonString(frame.module), ",\"module_offset\":", frame.module_offset,
        ",\"pc\":", frame.pc, ",\"inlined\":", frame.inlined ? "true" : "false", "}"));
  }
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
    absl::StrAppend(&item, ",\"frames\":", JsonFrames(sites[i].frames), "}");
    items.push_back(std::move(item));
  }
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string JsonPlace(int32_t place, const TraceFile& trace) {
  std::string out = absl::StrCat("\"memory\":", place == kPinnedHost ? "\"host\"" : "\"device\"",
                                 ",\"device\":", place == kPinnedHost ? -1 : place);
  for (const Device& device : trace.devices()) {
    if (device.ordinal() == place) {
      absl::StrAppend(&out, ",\"name\":", JsonString(device.name()),
                      ",\"total_memory\":", device.total_memory());
    }
  }
  return out;
}

std::string JsonReport(const std::string& path, const TraceReplay& replay, const Options& options) {
  const TraceFile& trace = *replay.file;
  Symbolizer symbolizer(&trace);
  const Header& header = trace.header();
  std::vector<std::string> argv;
  for (const std::string& arg : header.command_line()) argv.push_back(JsonString(arg));
  const bool clean = trace.end().footer_present;
  std::string out = absl::StrCat(
      "{\"path\":", JsonString(path), ",\"pid\":", header.pid(),
      ",\"host\":", JsonString(header.host()), ",\"command_line\":[", absl::StrJoin(argv, ","), "]",
      ",\"clean_exit\":", clean ? "true" : "false",
      ",\"damaged\":", trace.end().damaged() ? "true" : "false",
      ",\"end\":", JsonString(trace.end().Describe()), ",\"memory_events\":", replay.memory_events,
      ",\"failed_allocations\":", replay.failed_allocations,
      ",\"anomalies\":{\"unknown_frees\":", replay.anomalies.unknown_frees,
      ",\"double_frees\":", replay.anomalies.double_frees,
      ",\"overlapping_allocations\":", replay.anomalies.overlapping_allocations, "}",
      ",\"vmm_reserved_peak_bytes\":", replay.reserved_peak_bytes);
  if (options.peak) {
    std::vector<std::string> items;
    for (const PlaceUsage& place : replay.places) {
      items.push_back(absl::StrCat(
          "{", JsonPlace(place.place, trace), ",\"peak_bytes\":", place.peak_bytes,
          ",\"seq\":", place.peak_seq, ",\"time_ns\":",
          place.peak_timestamp_ns >= header.start_time_mono_ns()
              ? place.peak_timestamp_ns - header.start_time_mono_ns()
              : 0,
          ",\"allocations\":", place.allocated.count, ",\"allocated_bytes\":",
          place.allocated.bytes, ",\"call_sites\":", place.peak_sites.size(), ",\"sites\":",
          JsonSites(GroupSites(place.peak_sites, symbolizer), options.top, place.peak_bytes), "}"));
    }
    absl::StrAppend(&out, ",\"peak\":[", absl::StrJoin(items, ","), "]");
  }
  if (options.leaks) {
    std::vector<std::string> items;
    for (const PlaceUsage& place : replay.places) {
      if (place.live.count == 0) continue;
      items.push_back(absl::StrCat(
          "{", JsonPlace(place.place, trace), ",\"bytes\":", place.live.bytes,
          ",\"count\":", place.live.count,
          ",\"sites\":", JsonSites(GroupSites(place.live_sites, symbolizer), options.top, 0), "}"));
    }
    absl::StrAppend(&out, ",\"leaks\":{\"complete\":", clean ? "true" : "false");
    if (!clean) absl::StrAppend(&out, ",\"note\":", JsonString(kNotCleanExit));
    absl::StrAppend(&out, ",\"places\":[", absl::StrJoin(items, ","), "]}");
  }
  absl::StrAppend(&out, "}");
  return out;
}

}  // namespace

int RunReport(const std::vector<std::string>& args) {
  Options options;
  ArgumentWalker walker(args);
  std::string value;
  bool missing = false;
  while (walker.NextOption()) {
    if (walker.Is("--peak")) {
      options.peak = true;
    } else if (walker.Is("--leaks")) {
      options.leaks = true;
    } else if (walker.Is("--json")) {
      options.json = true;
    } else if (walker.TakesValue("--top", &value, &missing)) {
      if (missing) return UsageError("report: --top needs a number", "report");
      if (!absl::SimpleAtoi(value, &options.top)) {
        return UsageError(absl::StrCat("report: --top: not a number: '", value, "'"), "report");
      }
    } else if (walker.Is("-h") || walker.Is("--help")) {
      std::fputs(kReportUsage, stdout);
      return kExitOk;
    } else {
      return UsageError(absl::StrCat("report: unknown flag '", walker.option(), "'"), "report");
    }
  }
  const std::vector<std::string>& inputs = walker.positional();
  if (inputs.empty()) return UsageError("report: no trace file given", "report");
  if (!options.peak && !options.leaks) options.peak = options.leaks = true;

  absl::StatusOr<std::vector<std::string>> paths = ExpandTracePaths(inputs);
  if (!paths.ok()) {
    PrintError(paths.status().message());
    return kExitBadInput;
  }
  bool ok = true;
  std::vector<std::string> json_traces;
  for (const std::string& path : *paths) {
    absl::StatusOr<TraceReplay> replay = ReplayTrace(path);
    if (!replay.ok()) {
      PrintError(replay.status().message());
      ok = false;
      continue;
    }
    if (options.json) {
      json_traces.push_back(JsonReport(path, *replay, options));
    } else {
      std::string text = TextReport(*replay, options);
      if (paths->size() > 1) text = absl::StrCat("== ", path, "\n", text, "\n");
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
    if (replay->file->end().damaged()) {
      PrintError(replay->file->end().ErrorLine(path));
      ok = false;
    }
  }
  if (options.json) {
    const std::string json =
        absl::StrCat("{\"gpumem_report\":1,\"traces\":[", absl::StrJoin(json_traces, ","), "]}\n");
    std::fwrite(json.data(), 1, json.size(), stdout);
  }
  std::fflush(stdout);
  return ok ? kExitOk : kExitBadInput;
}

}  // namespace gpumem::report
