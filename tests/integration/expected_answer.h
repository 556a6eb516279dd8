// A sample's known answer, samples/<name>/expected.txt (format in samples/README.md), and the
// check of recorded traces against it. Used by the CPU tests (fake CUDA) and, pointed at traces
// brought back from the GPU machine, by tests/gpu/run.sh: one definition of "right" for both.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "report/replay/event_counts.h"
#include "report/analysis/kernels.h"
#include "report/replay/replay.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"

namespace gpumem::testing {

// What `gpumem report` must find: the peak (its bytes and the function of its largest call site)
// or the memory never freed (bytes, allocations, function of its largest call site).
struct ReportExpectation {
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::string site;
};

struct ExpectedAnswer {
  std::set<std::string> count_lines;  // "alloc cudaMalloc count=20 bytes=209715200", "live ..."
  std::vector<std::string> frames;    // every allocation's stack has a function containing these
  std::map<std::string, std::string> env;
  int exit_code = 0;
  int traces = 1;
  bool gpu_only = false;
  bool bytes_depend_on_device = false;      // on a real GPU only counts are compared
  std::optional<ReportExpectation> peak;    // "peak bytes=N site=FUNCTION"
  std::optional<ReportExpectation> leaked;  // "leaked bytes=N count=N site=FUNCTION"
  std::optional<ReportExpectation> unused;  // "unused bytes=N count=N site=FUNCTION": no launch
                                            // ever received these allocations
};

// "key=value" words after the keyword of a report line.
inline ReportExpectation ReadReportExpectation(std::istringstream& words) {
  ReportExpectation expectation;
  for (std::string word; words >> word;) {
    size_t equals = word.find('=');
    std::string key = word.substr(0, equals), value = word.substr(equals + 1);
    if (key == "bytes") expectation.bytes = std::stoull(value);
    if (key == "count") expectation.count = std::stoull(value);
    if (key == "site") expectation.site = value;
  }
  return expectation;
}

inline ExpectedAnswer ReadExpectedAnswer(const std::string& path) {
  ExpectedAnswer answer;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string keyword;
    words >> keyword;
    if (keyword == "frame") {
      std::string name;
      words >> name;
      answer.frames.push_back(name);
    } else if (keyword == "env") {
      std::string assignment;
      words >> assignment;
      size_t equals = assignment.find('=');
      answer.env[assignment.substr(0, equals)] = assignment.substr(equals + 1);
    } else if (keyword == "exit") {
      words >> answer.exit_code;
    } else if (keyword == "traces") {
      words >> answer.traces;
    } else if (keyword == "gpu-only") {
      answer.gpu_only = true;
    } else if (keyword == "bytes-depend-on-device") {
      answer.bytes_depend_on_device = true;
    } else if (keyword == "peak") {
      answer.peak = ReadReportExpectation(words);
    } else if (keyword == "leaked") {
      answer.leaked = ReadReportExpectation(words);
    } else if (keyword == "unused") {
      answer.unused = ReadReportExpectation(words);
    } else {
      answer.count_lines.insert(line);
    }
  }
  return answer;
}

// The trace files of one run: `<stem>.trace` and the `<stem>-<pid>.trace` of its other processes.
inline std::vector<std::string> TraceFilesOfRun(const std::string& dir, const std::string& stem) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name == stem + ".trace" || (name.rfind(stem + "-", 0) == 0 && name.size() > 6 &&
                                    name.substr(name.size() - 6) == ".trace")) {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

inline std::string WithoutBytes(const std::string& line) {
  size_t at = line.find(" bytes=");
  return at == std::string::npos ? line : line.substr(0, at);
}

// The function names of a stack, innermost first, joined for messages and searching.
inline std::string FunctionsOf(report::Symbolizer& symbolizer, uint64_t stack_id) {
  std::string functions;
  for (const report::Frame& frame : symbolizer.Symbolize(stack_id)) {
    functions += frame.function + " <- ";
  }
  return functions;
}

// The peak and leaks that `gpumem report` finds in `trace`, against the sample's answer.
inline void CheckReport(const std::string& trace, const ExpectedAnswer& answer, bool on_gpu,
                        std::vector<std::string>* problems) {
  auto file = report::TraceFile::Open(trace);
  if (!file.ok()) {
    problems->push_back(std::string(file.status().message()));
    return;
  }
  report::KernelAnalysis kernels(file->get());
  auto replay = std::make_optional(report::ReplayTrace(*std::move(file), nullptr, &kernels));
  report::Symbolizer symbolizer(replay->file.get());
  const bool compare_bytes = !(on_gpu && answer.bytes_depend_on_device);
  const report::PlaceUsage* device = nullptr;
  report::Tally leaked;
  for (const report::PlaceUsage& place : replay->places) {
    if (place.place >= 0 && (device == nullptr || place.peak_bytes > device->peak_bytes)) {
      device = &place;
    }
    leaked.Add(place.live);
  }
  if (answer.peak) {
    if (device == nullptr) {
      problems->push_back("report: no device peak");
    } else {
      if (compare_bytes && device->peak_bytes != answer.peak->bytes) {
        problems->push_back("report: peak " + std::to_string(device->peak_bytes) +
                            " bytes, expected " + std::to_string(answer.peak->bytes));
      }
      std::string site = device->peak_sites.empty()
                             ? ""
                             : FunctionsOf(symbolizer, device->peak_sites.front().stack_id);
      if (site.find(answer.peak->site) == std::string::npos) {
        problems->push_back("report: largest call site at the peak is " + site + ", expected " +
                            answer.peak->site);
      }
    }
  }
  if (answer.unused) {
    const report::KernelReport& launches = kernels.report();
    report::Tally unused;
    for (const report::UnusedSite& site : launches.never_used) unused.Add(site.tally);
    if (compare_bytes &&
        (unused.bytes != answer.unused->bytes || unused.count != answer.unused->count)) {
      problems->push_back("report: never used " + std::to_string(unused.bytes) + " bytes in " +
                          std::to_string(unused.count) + ", expected " +
                          std::to_string(answer.unused->bytes) + " in " +
                          std::to_string(answer.unused->count));
    }
    std::string site = launches.never_used.empty()
                           ? ""
                           : FunctionsOf(symbolizer, launches.never_used.front().stack_id);
    if (site.find(answer.unused->site) == std::string::npos) {
      problems->push_back("report: largest never-used call site is " + site + ", expected " +
                          answer.unused->site);
    }
  }
  if (answer.leaked) {
    if (compare_bytes &&
        (leaked.bytes != answer.leaked->bytes || leaked.count != answer.leaked->count)) {
      problems->push_back("report: leaked " + std::to_string(leaked.bytes) + " bytes in " +
                          std::to_string(leaked.count) + ", expected " +
                          std::to_string(answer.leaked->bytes) + " in " +
                          std::to_string(answer.leaked->count));
    }
    std::string site = device == nullptr || device->live_sites.empty()
                           ? ""
                           : FunctionsOf(symbolizer, device->live_sites.front().stack_id);
    if (site.find(answer.leaked->site) == std::string::npos) {
      problems->push_back("report: largest leaking call site is " + site + ", expected " +
                          answer.leaked->site);
    }
  }
}

// Everything that is wrong with `traces` as a recording of the sample, one finding per entry.
inline std::vector<std::string> CheckAgainstAnswer(const std::vector<std::string>& traces,
                                                   const ExpectedAnswer& answer,
                                                   bool counts_only_where_device_dependent) {
  std::vector<std::string> problems;
  if (static_cast<int>(traces.size()) != answer.traces) {
    problems.push_back("expected " + std::to_string(answer.traces) + " trace file(s), found " +
                       std::to_string(traces.size()));
  }
  report::EventCounts total;
  for (const std::string& path : traces) {
    auto sorted = report::ReadMemoryEventsBySeq(path);
    if (!sorted.ok()) {
      problems.push_back(std::string(sorted.status().message()));
      continue;
    }
    const report::TraceFile& file = *sorted->file;
    if (file.end().damaged()) problems.push_back(file.end().ErrorLine(path));
    if (!file.footer().has_value()) problems.push_back(path + ": no footer (no clean exit)");
    auto counted = report::CountTraceFile(path);  // memory and launches
    if (counted.ok()) total.Merge(counted->counts);
    report::Symbolizer symbolizer(&file);
    for (const MemoryEvent& event : sorted->events) {
      // A failed allocation carries what the device had left at that moment.
      if (event.action() == ALLOC_FAILED &&
          (event.total_bytes() == 0 || event.free_bytes() >= event.size())) {
        problems.push_back(
            "seq " + std::to_string(event.seq()) +
            ": failed allocation without plausible free/total memory: " + event.ShortDebugString());
      }
      if (event.action() != ALLOC) continue;
      std::vector<report::Frame> frames = symbolizer.Symbolize(event.stack_id());
      for (const std::string& wanted : answer.frames) {
        bool found = std::any_of(frames.begin(), frames.end(), [&](const report::Frame& frame) {
          return frame.function.find(wanted) != std::string::npos;
        });
        if (!found) {
          std::string stack;
          for (const report::Frame& frame : frames) stack += "\n    " + frame.ToString();
          problems.push_back("seq " + std::to_string(event.seq()) + ": no frame '" + wanted +
                             "' in stack " + std::to_string(event.stack_id()) + ":" + stack);
          break;
        }
      }
    }
  }
  if (traces.size() == 1 && (answer.peak || answer.leaked || answer.unused)) {
    CheckReport(traces.front(), answer, counts_only_where_device_dependent, &problems);
  }
  std::set<std::string> recorded;
  std::istringstream lines(report::FormatEventCounts(total));
  for (std::string line; std::getline(lines, line);) recorded.insert(line);
  bool counts_only = counts_only_where_device_dependent && answer.bytes_depend_on_device;
  auto normalize = [&](const std::string& line) { return counts_only ? WithoutBytes(line) : line; };
  std::set<std::string> expected_lines, recorded_lines;
  for (const std::string& line : answer.count_lines) expected_lines.insert(normalize(line));
  for (const std::string& line : recorded) recorded_lines.insert(normalize(line));
  for (const std::string& line : expected_lines) {
    if (!recorded_lines.count(line)) problems.push_back("missing: " + line);
  }
  for (const std::string& line : recorded_lines) {
    if (!expected_lines.count(line)) problems.push_back("unexpected: " + line);
  }
  return problems;
}

}  // namespace gpumem::testing
