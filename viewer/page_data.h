// The data model of `gpumem view`'s page, built from a trace in one streamed pass (ReplayTrace with
// an observer: memory bounded by the live set and the reductions, not by the length of the trace)
// and reduced to what a browser can draw at once:
// - per place (device, pinned host): the timeline as at most `buckets` time buckets
//   of equal event counts (viewer/timeline_buckets.h) with in use (highest and last per bucket, the
//   peak exact), reserved where the trace knows it (memory pools' sizes), the largest `bands` call
//   sites as bands and the rest as "other", kernel launches per bucket; the peak, the failed
//   allocations (the first kMaxFailureMarkers) and what was live at the peak and at the end as
//   flame graphs pruned below `flame_min_fraction` and as tables of call sites (the first
//   `table_rows`);
// - the iterations (viewer/iterations.h), the summary table (report/analysis/summary_table.h), and
// the
//   process: command line, host, duration, how the trace ended.
// viewer/page_json.h turns it into the JSON the page reads.
#ifndef GPUMEM_VIEWER_PAGE_DATA_H_
#define GPUMEM_VIEWER_PAGE_DATA_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "report/replay/event_counts.h"
#include "report/stacks/python_stacks.h"
#include "viewer/flame.h"
#include "viewer/iterations.h"
#include "viewer/page_advice.h"

namespace gpumem::viewer {

inline constexpr size_t kDefaultBands = 12;
inline constexpr double kDefaultFlameMinFraction = 0.002;
inline constexpr size_t kDefaultTableRows = 100;
inline constexpr size_t kMaxFailureMarkers = 100;

struct ViewOptions {
  size_t buckets = 2000;
  size_t bands = kDefaultBands;
  double flame_min_fraction = kDefaultFlameMinFraction;
  size_t table_rows = kDefaultTableRows;
  report::GroupBy group_by = report::GroupBy::kUser;
  std::string iteration_marker;  // a function name; empty: detect the iterations
};

// A call site: its label (the frame that names it) and its whole stack as text, innermost first.
struct PageSite {
  std::string label;  // the user's line (report/stacks/user_frames.h SiteLabel::first_line)
  std::string via;    // its via line, or ""
  std::vector<std::string> frames;
  std::string
      held_by;  // an allocator or library that holds it (report/stacks/memory_holders.h), or ""
};

struct PageFailure {
  uint64_t time_ns = 0;  // since the trace's start
  uint64_t seq = 0;
  uint64_t bytes = 0;  // the request
  int32_t site = -1;   // index into PageData::sites
};

// A row of a call-site table: a site and what it held.
struct PageRow {
  int32_t site = -1;
  uint64_t bytes = 0;
  uint64_t count = 0;
};

struct PagePlace {
  int32_t place = 0;          // device ordinal, -1 unknown, report::kPinnedHost
  std::string name;           // "device 0 (NVIDIA H100 80GB HBM3)"
  uint64_t total_memory = 0;  // from the Device packet; 0 unknown
  // Buckets: bucket i runs from start_ns[i] to start_ns[i + 1] (the last to end_ns), times since
  // the trace's start; each holds about as many events as the others (viewer/timeline_buckets.h).
  std::vector<uint64_t> start_ns;
  uint64_t end_ns = 0;
  std::vector<uint64_t> in_use_max;   // per bucket
  std::vector<uint64_t> in_use_last;  // per bucket
  std::vector<uint64_t> reserved;     // per bucket; empty when not known
  std::vector<uint64_t> launches;     // per bucket
  // Bands: band_sites[i] is the site of band i; band_bytes has one row more, "other", last. Each
  // bucket's bands sum to in_use_max of that bucket.
  std::vector<int32_t> band_sites;
  std::vector<std::vector<uint64_t>> band_bytes;
  uint64_t peak_bytes = 0;
  uint64_t peak_time_ns = 0;
  uint64_t peak_seq = 0;
  report::Tally leaked;               // live at the end
  std::vector<PageFailure> failures;  // the first kMaxFailureMarkers
  uint64_t failure_count = 0;
  FlameNode peak_flame;             // live at the peak, by stack
  FlameNode leak_flame;             // live at the end
  std::vector<PageRow> peak_sites;  // live at the peak by call site, largest first
  std::vector<PageRow> leak_sites;  // live at the end
};

// Names and paths from the trace are escaped as the text reports show them
// (report/format/printable.h).
struct PageData {
  std::string trace_path;
  std::string host;
  uint32_t pid = 0;
  std::vector<std::string> command_line;
  uint64_t start_unix_ns = 0;
  uint64_t duration_ns = 0;  // the last event (or the footer's end) since the start
  bool footer = false;       // the trace holds the whole run (clean exit): leaks are leaks
  std::string end;           // TraceEndStatus::Describe()
  std::string notice;        // the damage when the trace is torn or corrupt; "" otherwise
  uint64_t memory_events = 0;
  uint64_t launches = 0;
  std::string anomalies;           // "" when none
  uint64_t unrecorded_events = 0;  // events the trace could not record (footer)
  std::string unrecorded;          // RecordingEnd::UnrecordedNote(): "" when none
  std::vector<PagePlace> places;
  std::vector<PageSite> sites;
  Iterations iterations;
  std::string summary;  // report/analysis/summary_table.h's text
  PageAdvice advice;    // not built by BuildPageData: gpumem view adds it (BuildPageAdvice)
};

// Reads and reduces `path`. Fails as report::TraceFile::Open does (one line naming the path); a
// damaged trace gives what could be read, with `notice` set.
absl::StatusOr<PageData> BuildPageData(const std::string& path, const ViewOptions& options);

}  // namespace gpumem::viewer

#endif  // GPUMEM_VIEWER_PAGE_DATA_H_
