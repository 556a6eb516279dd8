#include "report/export/chrome_json.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/export/timeline.h"
#include "report/format/json.h"
#include "report/format/names.h"

namespace gpumem::report {
namespace {

constexpr int64_t kMemoryTid = 1;
constexpr int64_t kFirstStreamTid = 2;

double Us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

class ChromeJsonWriter final : public TimelineWriter {
 public:
  ChromeJsonWriter(const TraceFile& trace, ChunkedOutput* out) : trace_(trace), out_(out) {}

  void Counter(int32_t place, uint64_t ns, const char* name, uint64_t bytes) override {
    used_pids_[TimelinePid(place)] = place;
    Event(
        absl::StrFormat(R"({"ph":"C","name":"%s","ts":%.3f,"pid":%d,"tid":0,"args":{"bytes":%d}})",
                        name, Us(ns), TimelinePid(place), bytes));
  }
  void Memory(int32_t place, uint64_t ns, const MemoryEvent& event,
              const std::vector<std::string>& frames) override;
  void Stream(int32_t place, uint64_t stream, const std::vector<TimelineLaunch>& launches) override;
  void Finish(const TimelineTotals& totals) override;

 private:
  void Event(const std::string& json) {
    std::string* text = out_->text();
    if (events_++ > 0) text->push_back(',');
    text->append("\n");
    text->append(json);
    out_->EndOfEvent();
  }
  const std::string& StackJson(uint64_t stack_id, const std::vector<std::string>& frames) {
    auto it = stacks_.find(stack_id);
    if (it == stacks_.end()) {
      std::vector<std::string> quoted;
      for (const std::string& frame : frames) quoted.push_back(JsonString(frame));
      it = stacks_.emplace(stack_id, absl::StrCat("[", absl::StrJoin(quoted, ","), "]")).first;
    }
    return it->second;
  }

  const TraceFile& trace_;
  ChunkedOutput* out_;
  uint64_t events_ = 0;
  std::map<int64_t, int32_t> used_pids_;               // pid -> place
  std::map<int32_t, int64_t> next_tid_;                // place -> its next stream's tid
  absl::flat_hash_map<uint64_t, std::string> stacks_;  // stack id -> JSON array of frames
};

void ChromeJsonWriter::Memory(int32_t place, uint64_t ns, const MemoryEvent& event,
                              const std::vector<std::string>& frames) {
  used_pids_[TimelinePid(place)] = place;
  std::string args =
      absl::StrCat("\"size\":", event.size(), ",\"address\":\"0x", absl::Hex(event.address()),
                   "\",\"stream\":\"0x", absl::Hex(event.stream()), "\",\"seq\":", event.seq(),
                   ",\"kind\":", JsonString(KindName(event.kind())));
  if (event.action() == ALLOC_FAILED) {
    absl::StrAppend(&args, ",\"result\":", event.result(), ",\"free_bytes\":", event.free_bytes());
  }
  if (event.stack_id() != 0) {
    absl::StrAppend(&args, ",\"stack\":", StackJson(event.stack_id(), frames));
  }
  Event(absl::StrFormat(
      R"({"ph":"i","s":"t","name":%s,"ts":%.3f,"pid":%d,"tid":%d,"args":{%s}})",
      JsonString(absl::StrCat(ActionName(event.action()), " ", ApiName(event.api()))), Us(ns),
      TimelinePid(place), kMemoryTid, args));
}

void ChromeJsonWriter::Stream(int32_t place, uint64_t stream,
                              const std::vector<TimelineLaunch>& launches) {
  const int64_t pid = TimelinePid(place);
  used_pids_[pid] = place;
  auto [tid_it, added] = next_tid_.try_emplace(place, kFirstStreamTid);
  const int64_t tid = tid_it->second++;
  Event(absl::StrFormat(
      R"({"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"stream 0x%x"}})", pid,
      tid, stream));
  for (const TimelineLaunch& launch : launches) {
    Event(absl::StrFormat(
        R"({"ph":"X","name":%s,"ts":%.3f,"dur":%.3f,"pid":%d,"tid":%d,"args":{"time":"%s","seq":%d,"correlation_id":%d}})",
        JsonString(*launch.name), Us(launch.ns), Us(launch.duration_ns), pid, tid,
        launch.gpu_time ? "gpu" : "host launch", launch.seq, launch.correlation_id));
  }
}

void ChromeJsonWriter::Finish(const TimelineTotals& totals) {
  for (const auto& [pid, place] : used_pids_) {
    Event(absl::StrFormat(R"({"ph":"M","name":"process_name","pid":%d,"tid":0,"args":{"name":%s}})",
                          pid, JsonString(PlaceName(place, trace_))));
    Event(absl::StrFormat(
        R"({"ph":"M","name":"process_sort_index","pid":%d,"tid":0,"args":{"sort_index":%d}})", pid,
        pid));
    Event(absl::StrFormat(
        R"({"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"memory"}})", pid,
        kMemoryTid));
  }
  const Header& header = trace_.header();
  absl::StrAppend(out_->text(),
                  "\n],\"displayTimeUnit\":\"ns\",\"metadata\":{\"source\":\"gpumem\"",
                  ",\"host\":", JsonString(header.host()), ",\"pid\":", header.pid(),
                  ",\"command_line\":", JsonString(absl::StrJoin(header.command_line(), " ")),
                  ",\"start_time_unix_ns\":", header.start_time_unix_ns(),
                  ",\"memory_events\":", totals.memory_events, ",\"launches\":", totals.launches,
                  ",\"launches_with_gpu_times\":", totals.launches_with_gpu_times,
                  ",\"complete\":", totals.complete ? "true" : "false", "}}\n");
}

}  // namespace

TraceReplay ExportChromeJson(std::unique_ptr<TraceFile> file, Progress* progress,
                             ChunkedOutput* out) {
  out->text()->append("{\"traceEvents\":[");
  ChromeJsonWriter writer(*file, out);
  return ReplayTimeline(std::move(file), progress, &writer);
}

}  // namespace gpumem::report
