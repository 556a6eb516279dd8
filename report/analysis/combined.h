// `gpumem report` over several traces: the combined view of their processes. Each process is
// replayed on its own (report/replay/replay.h: device pointers of different processes may coincide
// and are never matched across processes) into a per-place timeline of its live bytes; the
// timelines of processes of one host are merged by timestamp (CLOCK_MONOTONIC is one clock per
// host) to find, per place, the highest sum of live bytes over all processes at once, when it
// happened and what each process held then. Traces of different hosts are combined per host: their
// clocks are not comparable. Rules: report/README.md ("Combined view").
#ifndef GPUMEM_REPORT_ANALYSIS_COMBINED_H_
#define GPUMEM_REPORT_ANALYSIS_COMBINED_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/trace.pb.h"
#include "report/replay/replay.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// One process's live bytes on one place right after an event that changed them.
struct TimelinePoint {
  uint64_t timestamp_ns = 0;
  uint64_t live_bytes = 0;
};

// Encoded bytes held in memory per spool before they go to its file: 64 KiB.
inline constexpr size_t kTimelineBufferedBytes = size_t{64} << 10;

// One process's points on one place, in replay order, compact and bounded in memory: each point is
// encoded as it comes, as the time since the point before and the change in live bytes against the
// point before (the first of a block against its summary, blocks()): a byte holding both values'
// lengths, then their bytes (about 3 to 6 bytes a point against 16), written with no branch on the
// values, since encoding is most of what a timeline adds to a replay. Each time a block ends with
// `buffered` encoded bytes held, they are written to an unlinked temporary file (tmpfile()), so a
// long trace's timeline costs disk, not memory. Where no temporary file can be written, the bytes
// stay in memory. Timestamps never go back: a point stamped before the one appended last takes that
// one's time (events of several threads reach the replay in seq order, not always in time order),
// so a spool can be searched by time and the merge of several is one pass in time order.
class TimelineSpool {
 public:
  // `block_points`: points a block sums up (blocks()); fewer than kBlockPoints only in tests.
  explicit TimelineSpool(size_t buffered = kTimelineBufferedBytes,
                         size_t block_points = kBlockPoints);
  void Append(TimelinePoint point);
  uint64_t size() const { return state_.points; }

  // The points in blocks of block_points() (the first ones, the next ones, ...), each summed up:
  // where its points lie in time, the most live bytes among them and the live bytes before it. By
  // these a merge finds a time without reading the points, and bounds what a stretch of time can
  // hold. A block is read whole, from where its encoding starts. Small blocks bound the merge's
  // windows closely (a training step's rise and fall is hundreds of points) and make entering a
  // window cheap; the summaries cost about 0.6 bytes of memory a point.
  static constexpr size_t kBlockPoints = 64;
  struct Block {
    uint64_t first_ns = 0;  // the timestamp of its first point
    uint64_t last_ns = 0;   // of its last
    uint64_t highest = 0;   // the highest live bytes of its points
    uint64_t entering = 0;  // the live bytes of the point before it (0 for the first block)
    uint64_t offset = 0;    // where its encoding starts in the spool's bytes (file, then memory)
  };
  const std::vector<Block>& blocks() const { return state_.blocks; }
  size_t block_points() const { return state_.block_points; }
  // The live bytes of the last point (0 without one).
  uint64_t last_live_bytes() const { return state_.last_live_bytes; }
  // The bytes of the points encoded so far (in the file and in memory).
  uint64_t encoded_bytes() const { return state_.in_file + pending_used_; }

  // Reads the points back in order from `position`, a block at a time; readers of one spool are
  // independent. The spool must outlive its readers and not change while they read.
  class Reader {
   public:
    Reader(const TimelineSpool* spool, uint64_t position);
    // The next point into *point; false after the last (or when the file cannot be read).
    bool Next(TimelinePoint* point);

   private:
    const TimelineSpool* spool_;
    size_t block_;                      // the block to decode next
    size_t skip_;                       // its points to pass over (a position inside it)
    std::vector<TimelinePoint> chunk_;  // the block decoded last
    size_t chunk_next_ = 0;             // the one of its points to return next
  };
  Reader Read(uint64_t position = 0) const { return Reader(this, position); }
  // The points of block `block` (< blocks().size()) into *points; false when they cannot be read.
  // Thread-safe. The first read maps the file's bytes: a merge reads many blocks of each spool on
  // many threads, and a call per block cost more than decoding it.
  bool ReadBlock(size_t block, std::vector<TimelinePoint>* points) const;
  // Every point, in memory: for tests and small timelines.
  std::vector<TimelinePoint> ReadAll() const;

  // A spool's whole state, to hand it to another process (`gpumem report` hands its workers'
  // timelines to the parent, report/cli/trace_outcome.h), and what the spool keeps. `file`: a
  // descriptor of the file, -1 without one (the spool itself keeps its file apart, as `file_`).
  struct State {
    size_t buffered = kTimelineBufferedBytes;
    size_t block_points = kBlockPoints;
    int file = -1;
    bool no_file = false;       // the file could not be made or written: everything stays in memory
    uint64_t in_file = 0;       // encoded bytes written to the file, the first ones
    std::string pending;        // the encoded bytes after those
    std::vector<Block> blocks;  // see blocks()
    uint64_t points = 0;
    uint64_t last_timestamp_ns = 0;  // of the point appended last
    uint64_t last_live_bytes = 0;    // of the point appended last
  };
  // The state, its `file` the spool's own descriptor (still the spool's to close).
  State state() const;
  // The spool that `state` describes, taking `state.file` (a descriptor of its own) over; none
  // where its file cannot be opened (the descriptor is closed) or the state does not add up.
  static std::optional<TimelineSpool> FromState(State state);

 private:
  struct CloseFile {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  // Begins a block at `point` (its time already kept from going back) and makes room for it.
  void BeginBlock(TimelinePoint point);
  // Writes the bytes held in memory to the file (made on first use); keeps them when that fails.
  void Spill();
  // The encoded bytes [from, to), all in the file: where they lie in file_map_ (mapped at the
  // first call), or read into *copy where they cannot be mapped; nullptr when they cannot be read.
  const char* FileBytes(uint64_t from, uint64_t to, std::string* copy) const;

  // The file's first bytes mapped for reading (spools do not change while they are read).
  struct FileMap {
    FileMap() = default;
    FileMap(const FileMap&) = delete;
    FileMap& operator=(const FileMap&) = delete;
    ~FileMap();
    std::once_flag mapped;
    const char* bytes = nullptr;
    size_t size = 0;
  };

  State state_;  // its `file` and `pending` unused: they are file_ and pending_
  std::unique_ptr<std::FILE, CloseFile> file_;
  // The encoded bytes not in the file: the first pending_used_ of pending_, the rest room for the
  // points of the block begun last, made when it begins (reused after each spill, not given back).
  std::string pending_;
  size_t pending_used_ = 0;
  // Points of the last block so far; block_points when the next point begins a block (none yet).
  size_t last_block_points_ = 0;
  std::unique_ptr<FileMap> file_map_ = std::make_unique<FileMap>();
};

// Who holds part of a process's memory (report/stacks/memory_holders.h): an allocator or library,
// or nobody known ("other"). In the order first seen, the largest first once sorted.
struct HeldBy {
  std::string id;    // MemoryHolder::id, or "other"
  std::string name;  // MemoryHolder::name, or "not held by an allocator or library"
  uint64_t bytes = 0;
};

// One process on one device (or place): its own peak and what it held at exit, each by holder.
struct ProcessDeviceRow {
  int32_t place = 0;
  uint64_t peak_bytes = 0;
  uint64_t peak_time_ns = 0;  // after the process started
  std::vector<HeldBy> at_peak;
  uint64_t exit_bytes = 0;
  std::vector<HeldBy> at_exit;
};

struct ProcessTimeline {
  std::string path;
  std::string host;
  uint32_t pid = 0;
  // The process's distributed identity as the header recorded it (none: not in a launcher's job).
  std::optional<int32_t> rank;
  std::optional<int32_t> local_rank;
  std::optional<int32_t> world_size;
  // Its devices (not pinned host), from the whole trace's replay (AddProcessRows); none when the
  // timeline was read without one.
  std::vector<ProcessDeviceRow> rows;
  std::vector<std::string> command_line;
  uint64_t start_time_mono_ns = 0;
  // Per place (report/replay/replay.h): the points in replay (seq) order.
  std::map<int32_t, TimelineSpool> places;
  // "device 0 (NVIDIA H100 80GB HBM3)" per place, from the trace's Device packets.
  std::map<int32_t, std::string> place_names;
};

// Builds a process's timelines from its memory events, fed in seq order.
class TimelineBuilder {
 public:
  // `buffered`: encoded bytes held in memory per place (TimelineSpool).
  explicit TimelineBuilder(size_t buffered = kTimelineBufferedBytes) : buffered_(buffered) {}
  // Replays `event` itself (a replay of its own).
  void Add(const MemoryEvent& event);
  // Or takes the live bytes from `replay`, which has just replayed `event` (the report's own
  // replay: every event replayed once, not once more for the timeline). One or the other, always.
  void AddReplayed(const MemoryEventFields& event, const Replay& replay);
  // The timeline, with the process and place names from `trace` (read whole by now). Once.
  ProcessTimeline Finish(const std::string& path, const TraceFile& trace);

 private:
  // A place seen allocating: the live bytes after its last point, and its spool (made with the
  // first point; map nodes do not move). A few places at most (devices, pinned host): a vector,
  // searched, costs less per event than a map.
  struct PlaceLast {
    int32_t place = 0;
    uint64_t last = 0;
    TimelineSpool* spool = nullptr;
    const uint64_t* live = nullptr;  // Replay::LiveBytesCounter, once the replay has the place
  };

  size_t buffered_;
  Replay replay_;  // Add()'s
  std::map<int32_t, TimelineSpool> places_;
  std::vector<PlaceLast> last_;
};

// Fills `timeline->rows` from the process's replay: per device, the peak and what was live at
// exit, each by holder (memory_holders.h, from the stacks' modules).
void AddProcessRows(const TraceReplay& replay, ProcessTimeline* timeline);

// " (rank 0 of 2, local rank 0)" for a header that has them, else "".
std::string DescribeRank(const Header& header);

// Streams `path` in seq order and builds its timeline. Fails as TraceFile::Open does.
absl::StatusOr<ProcessTimeline> ReadProcessTimeline(const std::string& path,
                                                    size_t buffered = kTimelineBufferedBytes);

// What one process held at a combined peak.
struct CombinedShare {
  size_t process = 0;  // index into the timelines given to CombineTimelines
  uint64_t bytes = 0;
};

struct CombinedPlace {
  int32_t place = 0;
  uint64_t peak_bytes = 0;    // highest sum of the processes' live bytes at once
  uint64_t timestamp_ns = 0;  // CLOCK_MONOTONIC of the event that first reached it
  // Every process of the host, largest first (ties by process index); 0 for one with nothing there.
  std::vector<CombinedShare> shares;
};

struct CombinedHost {
  std::string host;
  std::vector<size_t> processes;      // indexes, in the order given
  uint64_t start_time_mono_ns = 0;    // the earliest start of its processes
  std::vector<CombinedPlace> places;  // devices ascending, then -1, then kPinnedHost
};

struct Combined {
  size_t processes = 0;
  bool per_host = false;            // the traces come from more than one host
  std::vector<CombinedHost> hosts;  // in order of first appearance
};

// Below this many points per thread, a place's timelines are merged by fewer threads.
inline constexpr uint64_t kMinPointsPerMergeThread = uint64_t{1} << 16;

// Groups the processes by host and merges each group's timelines by timestamp (ties: in the order
// the processes were given, then in each process's order). Only the stretches of time whose bound
// (the spools' blocks) can still beat the best sum found are read (place_merge.h), on up to
// `threads` threads at once (no fewer than `min_points_per_thread` points each); the result is the
// same as one merge from start to end. Memory is bounded by a few blocks' points per process and
// thread (threads are fewer where those would pass 256 MiB, see place_merge.cc).
Combined CombineTimelines(const std::vector<ProcessTimeline>& processes, size_t threads = 1,
                          uint64_t min_points_per_thread = kMinPointsPerMergeThread);

// "device 0 (NVIDIA H100 80GB HBM3)": the place as its processes' traces name it.
std::string CombinedPlaceName(int32_t place, const CombinedHost& host,
                              const std::vector<ProcessTimeline>& processes);

// The "combined, N processes" section, and its JSON object (schema: report/README.md): the table
// of ranks (a row per process and device), then the combined peaks per host.
std::string CombinedText(const Combined& combined, const std::vector<ProcessTimeline>& processes);
std::string CombinedJson(const Combined& combined, const std::vector<ProcessTimeline>& processes);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ANALYSIS_COMBINED_H_
