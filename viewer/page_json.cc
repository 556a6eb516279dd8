#include "viewer/page_json.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "report/format/json.h"

namespace gpumem::viewer {

namespace {

using report::JsonString;

template <typename T>
std::string Numbers(const std::vector<T>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ","), "]");
}

std::string Strings(const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += JsonString(values[i]);
  }
  return out + "]";
}

void AppendFlame(const FlameNode& node, std::string* out) {
  absl::StrAppend(out, "{\"n\":", JsonString(node.name), ",\"v\":", node.bytes,
                  ",\"c\":", node.count);
  if (!node.children.empty()) {
    absl::StrAppend(out, ",\"k\":[");
    for (size_t i = 0; i < node.children.size(); ++i) {
      if (i > 0) out->push_back(',');
      AppendFlame(node.children[i], out);
    }
    out->push_back(']');
  }
  out->push_back('}');
}

std::string Rows(const std::vector<PageRow>& rows) {
  std::vector<std::string> items;
  for (const PageRow& row : rows) {
    items.push_back(absl::StrCat("[", row.site, ",", row.bytes, ",", row.count, "]"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string PlaceJson(const PagePlace& place) {
  std::string out = absl::StrCat(
      "{\"place\":", place.place, ",\"name\":", JsonString(place.name),
      ",\"total\":", place.total_memory, ",\"start\":", Numbers(place.start_ns),
      ",\"end\":", place.end_ns, ",\"max\":", Numbers(place.in_use_max),
      ",\"last\":", Numbers(place.in_use_last), ",\"reserved\":", Numbers(place.reserved),
      ",\"launches\":", Numbers(place.launches), ",\"bands\":", Numbers(place.band_sites),
      ",\"band_bytes\":[");
  for (size_t i = 0; i < place.band_bytes.size(); ++i) {
    if (i > 0) out += ",";
    out += Numbers(place.band_bytes[i]);
  }
  absl::StrAppend(&out, "],\"peak\":{\"bytes\":", place.peak_bytes, ",\"t\":", place.peak_time_ns,
                  ",\"seq\":", place.peak_seq, "},\"leaked\":{\"bytes\":", place.leaked.bytes,
                  ",\"count\":", place.leaked.count, "},\"failures\":[");
  for (size_t i = 0; i < place.failures.size(); ++i) {
    const PageFailure& failure = place.failures[i];
    absl::StrAppend(&out, i > 0 ? "," : "", "{\"t\":", failure.time_ns, ",\"seq\":", failure.seq,
                    ",\"bytes\":", failure.bytes, ",\"site\":", failure.site, "}");
  }
  absl::StrAppend(&out, "],\"failure_count\":", place.failure_count, ",\"flame_peak\":");
  AppendFlame(place.peak_flame, &out);
  absl::StrAppend(&out, ",\"flame_leak\":");
  AppendFlame(place.leak_flame, &out);
  absl::StrAppend(&out, ",\"peak_sites\":", Rows(place.peak_sites),
                  ",\"leak_sites\":", Rows(place.leak_sites), "}");
  return out;
}

std::string JsonBool(bool value) { return value ? "true" : "false"; }

std::string RemedyJson(const PageRemedy& remedy) {
  return absl::StrCat("{\"rank\":", remedy.rank, ",\"kind\":", JsonString(remedy.kind),
                      ",\"change\":", JsonString(remedy.change),
                      ",\"allocator\":", JsonString(remedy.allocator), ",\"peak\":", remedy.peak,
                      ",\"saving\":", remedy.saving, ",\"fits\":", JsonBool(remedy.fits),
                      ",\"source\":", JsonString(remedy.extrapolated ? "extrapolated" : "modelled"),
                      ",\"site_heading\":", JsonString(remedy.site_heading),
                      ",\"site\":", Strings(remedy.site_lines),
                      ",\"holder_heading\":", JsonString(remedy.holder_heading),
                      ",\"holder\":", Strings(remedy.holder_lines), "}");
}

std::string PageAdviceJson(const PageAdvice& advice) {
  std::vector<std::string> remedies;
  for (const PageRemedy& remedy : advice.remedies) remedies.push_back(RemedyJson(remedy));
  return absl::StrCat(
      "{\"refused\":", JsonString(advice.refused), ",\"device_memory\":", advice.device_memory,
      ",\"device_memory_recorded\":", JsonBool(advice.device_memory_recorded),
      ",\"allocator\":", JsonString(advice.allocator), ",\"peak\":", advice.peak,
      ",\"fits\":", JsonBool(advice.fits), ",\"verdict\":", Strings(advice.verdict),
      ",\"heading\":", JsonString(advice.heading), ",\"remedies\":[", absl::StrJoin(remedies, ","),
      "],\"second_recording\":", Strings(advice.second_recording),
      ",\"notes\":", Strings(advice.notes), "}");
}

}  // namespace

std::string PageJson(const PageData& page) {
  std::string out = absl::StrCat(
      "{\"gpumem_view\":1,\"trace\":", JsonString(page.trace_path),
      ",\"host\":", JsonString(page.host), ",\"pid\":", page.pid,
      ",\"command\":", Strings(page.command_line), ",\"start_unix_ns\":", page.start_unix_ns,
      ",\"duration_ns\":", page.duration_ns, ",\"footer\":", page.footer ? "true" : "false",
      ",\"end\":", JsonString(page.end), ",\"notice\":", JsonString(page.notice),
      ",\"memory_events\":", page.memory_events, ",\"launches\":", page.launches,
      ",\"anomalies\":", JsonString(page.anomalies),
      ",\"unrecorded_events\":", page.unrecorded_events,
      ",\"unrecorded\":", JsonString(page.unrecorded),
      ",\"iterations\":{\"count\":", page.iterations.count, ",\"stride\":", page.iterations.stride,
      ",\"times\":", Numbers(page.iterations.times), ",\"rule\":", JsonString(page.iterations.rule),
      "},\"summary\":", JsonString(page.summary), ",\"advice\":", PageAdviceJson(page.advice),
      ",\"sites\":[");
  for (size_t i = 0; i < page.sites.size(); ++i) {
    const PageSite& site = page.sites[i];
    absl::StrAppend(&out, i > 0 ? "," : "", "{\"label\":", JsonString(site.label),
                    ",\"via\":", JsonString(site.via), ",\"frames\":", Strings(site.frames),
                    ",\"held_by\":", JsonString(site.held_by), "}");
  }
  out += "],\"places\":[";
  for (size_t i = 0; i < page.places.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? "," : "", PlaceJson(page.places[i]));
  }
  out += "]}";
  return EmbedSafeJson(out);
}

std::string EmbedSafeJson(absl::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 16);
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xE2' && i + 2 < json.size() && json[i + 1] == '\x80' &&
               (json[i + 2] == '\xA8' || json[i + 2] == '\xA9')) {
      out += json[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace gpumem::viewer
