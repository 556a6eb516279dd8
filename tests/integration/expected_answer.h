// A sample's known answer, samples/<name>/expected.txt (format in samples/README.md), and the
// check of recorded traces against it. Used by the CPU tests (fake CUDA) and, pointed at traces
// brought back from the GPU machine, by tests/gpu/run.sh: one definition of "right" for both.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "report/event_counts.h"
#include "report/symbolizer.h"
#include "report/trace_file.h"

namespace gpumem::testing {

struct ExpectedAnswer {
  std::set<std::string> count_lines;  // "alloc cudaMalloc count=20 bytes=209715200", "live ..."
  std::vector<std::string> frames;    // every allocation's stack has a function containing these
  std::map<std::string, std::string> env;
  int exit_code = 0;
  int traces = 1;
  bool gpu_only = false;
  bool bytes_depend_on_device = false;  // on a real GPU only counts are compared
};

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
    total.Merge(report::CountEvents(sorted->events));
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
