#include "report/analysis/combined.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/trace_format.h"
#include "report/analysis/place_merge.h"
#include "report/format/json.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"
#include "report/stacks/memory_holders.h"
#include "report/trace/event_stream.h"

namespace gpumem::report {

namespace {

// Devices ascending, then -1, then kPinnedHost (as Replay::Places).
bool PlaceBefore(int32_t a, int32_t b) {
  const auto rank = [](int32_t place) {
    return std::make_pair(place >= 0 ? 0 : place == -1 ? 1 : 2, place);
  };
  return rank(a) < rank(b);
}

// What a block's encoding starts from: its first point's time, and the live bytes before it.
TimelinePoint BlockStart(const TimelineSpool::Block& block) {
  return {block.first_ns, block.entering};
}

uint64_t Since(uint64_t timestamp_ns, uint64_t start) {
  return timestamp_ns >= start ? timestamp_ns - start : 0;
}

// A spool's point: a byte holding the lengths of the two values (the time since the point before,
// low nibble; the change in live bytes, zigzagged, high nibble; 0 to 8 bytes each), then the
// values' bytes, least significant first. Lengths come from the values' bit widths and bytes are
// stored eight at a time, so a point costs the same whatever its values.
constexpr size_t kMaxPointBytes = 1 + 2 * sizeof(uint64_t);
static_assert(std::endian::native == std::endian::little, "points are stored as the host's bytes");

size_t ByteLength(uint64_t value) { return (static_cast<size_t>(std::bit_width(value)) + 7) / 8; }

// Writes a point at `out`, which has kMaxPointBytes of room; returns where the next one goes.
char* EncodePoint(char* out, uint64_t since, uint64_t zigzag) {
  const size_t since_bytes = ByteLength(since);
  const size_t zigzag_bytes = ByteLength(zigzag);
  out[0] = static_cast<char>(since_bytes | zigzag_bytes << 4);
  std::memcpy(out + 1, &since, sizeof(since));
  std::memcpy(out + 1 + since_bytes, &zigzag, sizeof(zigzag));
  return out + 1 + since_bytes + zigzag_bytes;
}

// The low `n` bytes of a word, for n from 0 to 8.
constexpr uint64_t kLowBytes[9] = {0,           0xff,         0xffff,         0xffffff,
                                   0xffffffff,  0xffffffffff, 0xffffffffffff, 0xffffffffffffff,
                                   ~uint64_t{0}};

// The value of the `bytes` (0 to 8) bytes at `in`; `room`: at least 8 bytes can be read there.
uint64_t LoadValue(const char* in, size_t bytes, bool room) {
  uint64_t value = 0;
  if (room) {  // one load: copying `bytes` bytes stalls on each
    std::memcpy(&value, in, sizeof(value));
    return value & kLowBytes[bytes];
  }
  std::memcpy(&value, in, bytes);
  return value;
}

// Reads a point at `in`; nullptr when the bytes before `end` do not hold one.
const char* DecodePoint(const char* in, const char* end, uint64_t* since, uint64_t* zigzag) {
  if (in == end) return nullptr;
  const auto lengths = static_cast<uint8_t>(in[0]);
  const size_t since_bytes = lengths & 15;
  const size_t zigzag_bytes = lengths >> 4;
  const auto left = static_cast<size_t>(end - in);
  if (since_bytes > 8 || zigzag_bytes > 8 || left < 1 + since_bytes + zigzag_bytes) return nullptr;
  const bool room = left >= kMaxPointBytes;
  *since = LoadValue(in + 1, since_bytes, room);
  *zigzag = LoadValue(in + 1 + since_bytes, zigzag_bytes, room);
  return in + 1 + since_bytes + zigzag_bytes;
}

}  // namespace

TimelineSpool::TimelineSpool(size_t buffered, size_t block_points) {
  state_.buffered = std::max<size_t>(buffered, 1);
  state_.block_points = std::max<size_t>(block_points, 1);
  last_block_points_ = state_.block_points;  // the first point begins a block
}

void TimelineSpool::BeginBlock(TimelinePoint point) {
  state_.blocks.push_back({point.timestamp_ns, point.timestamp_ns, point.live_bytes,
                           state_.last_live_bytes, encoded_bytes()});
  last_block_points_ = 0;
  // Room for the whole block, so that a point needs no check of its own.
  const size_t room = state_.block_points * kMaxPointBytes;
  if (pending_.size() - pending_used_ < room) {
    pending_.resize(std::max({2 * pending_.size(), pending_used_ + room, size_t{4096}}));
  }
}

void TimelineSpool::Append(TimelinePoint point) {
  point.timestamp_ns = std::max(point.timestamp_ns, state_.last_timestamp_ns);
  uint64_t since = point.timestamp_ns - state_.last_timestamp_ns;
  if (last_block_points_ == state_.block_points) [[unlikely]] {
    BeginBlock(point);
    since = 0;  // the first point of a block: against the block's summary
  }
  Block& block = state_.blocks.back();
  block.last_ns = point.timestamp_ns;
  block.highest = std::max(block.highest, point.live_bytes);
  const char* next = EncodePoint(pending_.data() + pending_used_, since,
                                 proto::ZigZag(point.live_bytes - state_.last_live_bytes));
  pending_used_ = static_cast<size_t>(next - pending_.data());
  state_.last_timestamp_ns = point.timestamp_ns;
  state_.last_live_bytes = point.live_bytes;
  ++state_.points;
  // Only whole blocks go to the file: a block's bytes then lie all in the file or all in memory.
  if (++last_block_points_ == state_.block_points && pending_used_ >= state_.buffered &&
      !state_.no_file) {
    Spill();
  }
}

bool TimelineSpool::ReadBlock(size_t block, std::vector<TimelinePoint>* points) const {
  if (block >= state_.blocks.size()) return false;
  const bool last = block + 1 == state_.blocks.size();
  const uint64_t from = state_.blocks[block].offset;
  const uint64_t to = last ? encoded_bytes() : state_.blocks[block + 1].offset;
  if (from > to || to > encoded_bytes()) return false;
  std::string copy;
  const char* bytes = from >= state_.in_file ? pending_.data() + (from - state_.in_file)
                                             : FileBytes(from, to, &copy);
  if (bytes == nullptr) return false;
  const char* end = bytes + (to - from);
  points->clear();
  TimelinePoint point = BlockStart(state_.blocks[block]);
  while (bytes != end) {
    uint64_t since = 0;
    uint64_t zigzag = 0;
    bytes = DecodePoint(bytes, end, &since, &zigzag);
    if (bytes == nullptr) return false;
    point.timestamp_ns += since;
    point.live_bytes += static_cast<uint64_t>(proto::FromZigZag(zigzag));
    points->push_back(point);
  }
  return points->size() == (last ? last_block_points_ : state_.block_points);
}

TimelineSpool::FileMap::~FileMap() {
  if (bytes != nullptr) munmap(const_cast<char*>(bytes), size);
}

const char* TimelineSpool::FileBytes(uint64_t from, uint64_t to, std::string* copy) const {
  if (to > state_.in_file || file_ == nullptr) return nullptr;
  std::call_once(file_map_->mapped, [this] {
    void* map = mmap(nullptr, state_.in_file, PROT_READ, MAP_SHARED, fileno(file_.get()), 0);
    if (map == MAP_FAILED) return;  // read with pread instead
    file_map_->bytes = static_cast<const char*>(map);
    file_map_->size = state_.in_file;
  });
  if (to <= file_map_->size) return file_map_->bytes + from;
  copy->resize(to - from);
  char* at = copy->data();
  size_t left = copy->size();
  off_t offset = static_cast<off_t>(from);
  while (left > 0) {
    const ssize_t got = pread(fileno(file_.get()), at, left, offset);
    if (got <= 0) return nullptr;  // our own temporary file: an I/O error ends it
    at += got;
    left -= static_cast<size_t>(got);
    offset += got;
  }
  return copy->data();
}

void TimelineSpool::Spill() {
  if (file_ == nullptr) file_.reset(std::tmpfile());
  const char* bytes = pending_.data();
  size_t left = pending_used_;
  off_t offset = static_cast<off_t>(state_.in_file);
  while (file_ != nullptr && left > 0) {
    const ssize_t written = pwrite(fileno(file_.get()), bytes, left, offset);
    if (written <= 0) break;
    bytes += written;
    left -= static_cast<size_t>(written);
    offset += written;
  }
  if (file_ == nullptr || left > 0) {
    state_.no_file = true;  // what a failed write left lies past in_file bytes: never read
    return;
  }
  state_.in_file += pending_used_;
  pending_used_ = 0;
}

TimelineSpool::Reader::Reader(const TimelineSpool* spool, uint64_t position)
    : spool_(spool),
      block_(static_cast<size_t>(position / spool->block_points())),
      skip_(static_cast<size_t>(position % spool->block_points())) {}

bool TimelineSpool::Reader::Next(TimelinePoint* point) {
  while (chunk_next_ == chunk_.size()) {
    if (!spool_->ReadBlock(block_, &chunk_)) return false;
    ++block_;
    chunk_next_ = std::min(skip_, chunk_.size());
    skip_ = 0;
  }
  *point = chunk_[chunk_next_++];
  return true;
}

std::vector<TimelinePoint> TimelineSpool::ReadAll() const {
  std::vector<TimelinePoint> points;
  Reader reader = Read();
  TimelinePoint point;
  while (reader.Next(&point)) points.push_back(point);
  return points;
}

TimelineSpool::State TimelineSpool::state() const {
  State state = state_;
  state.file = file_ != nullptr ? fileno(file_.get()) : -1;
  state.pending.assign(pending_.data(), pending_used_);
  return state;
}

std::optional<TimelineSpool> TimelineSpool::FromState(State state) {
  TimelineSpool spool(state.buffered, state.block_points);
  if (state.file >= 0) {
    spool.file_.reset(fdopen(state.file, "r+b"));
    if (spool.file_ == nullptr) {
      close(state.file);
      return std::nullopt;
    }
  }
  const size_t block_points = spool.state_.block_points;
  const uint64_t encoded = state.in_file + state.pending.size();
  const bool adds_up = state.blocks.size() == (state.points + block_points - 1) / block_points &&
                       (state.blocks.empty() || state.blocks.back().offset <= encoded) &&
                       (spool.file_ != nullptr || state.in_file == 0);
  if (!adds_up) return std::nullopt;
  spool.last_block_points_ =
      state.blocks.empty() ? block_points : state.points - (state.blocks.size() - 1) * block_points;
  spool.pending_ = std::move(state.pending);
  spool.pending_used_ = spool.pending_.size();
  state.pending.clear();
  state.buffered = spool.state_.buffered;
  state.block_points = block_points;
  state.file = -1;
  spool.state_ = std::move(state);
  return spool;
}

void TimelineBuilder::Add(const MemoryEvent& event) {
  const MemoryEventFields fields = FromProto(event);
  replay_.Add(fields);
  AddReplayed(fields, replay_);
}

void TimelineBuilder::AddReplayed(const MemoryEventFields& event, const Replay& replay) {
  // A free names no place; any place may have changed. Places are few (devices, pinned host).
  if (event.action == ALLOC) {
    const int32_t place = PlaceOf(event);
    if (std::none_of(last_.begin(), last_.end(),
                     [&](const PlaceLast& p) { return p.place == place; })) {
      last_.push_back({place, 0, nullptr});
    }
  }
  for (PlaceLast& entry : last_) {
    // Its counter, not a lookup per event; until the replay has the place, its live bytes are 0.
    if (entry.live == nullptr && (entry.live = replay.LiveBytesCounter(entry.place)) == nullptr) {
      continue;
    }
    const uint64_t now = *entry.live;
    if (now == entry.last) continue;
    entry.last = now;
    if (entry.spool == nullptr)
      entry.spool = &places_.try_emplace(entry.place, buffered_).first->second;
    entry.spool->Append({event.timestamp_ns, now});
  }
}

ProcessTimeline TimelineBuilder::Finish(const std::string& path, const TraceFile& trace) {
  ProcessTimeline timeline;
  timeline.path = path;
  timeline.host = trace.header().host();
  timeline.pid = trace.header().pid();
  timeline.start_time_mono_ns = trace.header().start_time_mono_ns();
  for (const std::string& arg : trace.header().command_line()) timeline.command_line.push_back(arg);
  if (trace.header().has_rank()) timeline.rank = trace.header().rank();
  if (trace.header().has_local_rank()) timeline.local_rank = trace.header().local_rank();
  if (trace.header().has_world_size()) timeline.world_size = trace.header().world_size();
  timeline.places = std::move(places_);
  for (const auto& [place, points] : timeline.places) {
    timeline.place_names[place] = PlaceName(place, trace);
  }
  return timeline;
}

namespace {

constexpr char kNotHeldId[] = "other";
constexpr char kNotHeldName[] = "not held by an allocator or library";

// `sites` summed by the holder of each stack, largest first (ties: first seen first).
std::vector<HeldBy> ByHolder(const std::vector<SiteTally>& sites, const TraceReplay& replay) {
  std::vector<HeldBy> held;
  for (const SiteTally& site : sites) {
    const MemoryHolder* holder = FindMemoryHolderOfStack(
        *replay.file, site.stack_id, replay.stream_ordered_stacks.contains(site.stack_id));
    const std::string id = holder != nullptr ? holder->id : kNotHeldId;
    auto it = std::find_if(held.begin(), held.end(), [&](const HeldBy& h) { return h.id == id; });
    if (it == held.end()) {
      it = held.insert(held.end(), {id, holder != nullptr ? holder->name : kNotHeldName, 0});
    }
    it->bytes = SaturatingAdd(it->bytes, site.tally.bytes);
  }
  std::stable_sort(held.begin(), held.end(),
                   [](const HeldBy& a, const HeldBy& b) { return a.bytes > b.bytes; });
  return held;
}

}  // namespace

void AddProcessRows(const TraceReplay& replay, ProcessTimeline* timeline) {
  const uint64_t start = replay.file->header().start_time_mono_ns();
  for (const PlaceUsage& place : replay.places) {
    if (place.place == kPinnedHost) continue;
    ProcessDeviceRow& row = timeline->rows.emplace_back();
    row.place = place.place;
    row.peak_bytes = place.peak_bytes;
    row.peak_time_ns = place.peak_timestamp_ns > start ? place.peak_timestamp_ns - start : 0;
    row.at_peak = ByHolder(place.peak_sites, replay);
    row.exit_bytes = place.live.bytes;
    row.at_exit = ByHolder(place.live_sites, replay);
  }
}

std::string DescribeRank(const Header& header) {
  if (!header.has_rank() && !header.has_local_rank()) return "";
  std::vector<std::string> parts;
  if (header.has_rank()) {
    parts.push_back(header.has_world_size()
                        ? absl::StrCat("rank ", header.rank(), " of ", header.world_size())
                        : absl::StrCat("rank ", header.rank()));
  }
  if (header.has_local_rank()) parts.push_back(absl::StrCat("local rank ", header.local_rank()));
  return absl::StrCat(" (", absl::StrJoin(parts, ", "), ")");
}

absl::StatusOr<ProcessTimeline> ReadProcessTimeline(const std::string& path, size_t buffered) {
  TimelineBuilder builder(buffered);
  absl::StatusOr<StreamedTrace> streamed =
      ForEachMemoryEventBySeq(path, [&](const MemoryEvent& event) { builder.Add(event); });
  if (!streamed.ok()) return streamed.status();
  return builder.Finish(path, *streamed->file);
}

Combined CombineTimelines(const std::vector<ProcessTimeline>& processes, size_t threads,
                          uint64_t min_points_per_thread) {
  Combined combined;
  combined.processes = processes.size();
  for (size_t i = 0; i < processes.size(); ++i) {
    auto it =
        std::find_if(combined.hosts.begin(), combined.hosts.end(),
                     [&](const CombinedHost& host) { return host.host == processes[i].host; });
    if (it == combined.hosts.end()) {
      it = combined.hosts.insert(combined.hosts.end(), CombinedHost{});
      it->host = processes[i].host;
      it->start_time_mono_ns = processes[i].start_time_mono_ns;
    }
    it->processes.push_back(i);
    it->start_time_mono_ns = std::min(it->start_time_mono_ns, processes[i].start_time_mono_ns);
  }
  combined.per_host = combined.hosts.size() > 1;
  for (CombinedHost& host : combined.hosts) {
    std::vector<int32_t> places;
    for (const size_t index : host.processes) {
      for (const auto& [place, points] : processes[index].places) {
        if (std::find(places.begin(), places.end(), place) == places.end()) places.push_back(place);
      }
    }
    std::sort(places.begin(), places.end(), PlaceBefore);
    for (const int32_t place : places) {
      host.places.push_back(
          MergePlace(place, host.processes, processes, threads, min_points_per_thread));
    }
  }
  return combined;
}

namespace {

struct RankRow {
  const ProcessTimeline* process;
  const ProcessDeviceRow* row;
};

// Every process's rows: by rank (processes without one last), then pid, then place.
std::vector<RankRow> RankRows(const std::vector<ProcessTimeline>& processes) {
  std::vector<RankRow> rows;
  for (const ProcessTimeline& process : processes) {
    for (const ProcessDeviceRow& row : process.rows) rows.push_back({&process, &row});
  }
  auto key = [](const RankRow& r) {
    const int64_t rank = r.process->rank ? *r.process->rank : std::numeric_limits<int64_t>::max();
    return std::make_tuple(rank, r.process->pid, r.row->place >= 0 ? 0 : 1, r.row->place);
  };
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const RankRow& a, const RankRow& b) { return key(a) < key(b); });
  return rows;
}

std::string HeldText(const std::vector<HeldBy>& held) {
  std::vector<std::string> parts;
  for (const HeldBy& h : held) {
    if (h.bytes > 0) parts.push_back(absl::StrCat(h.name, " ", FormatBytes(h.bytes)));
  }
  return parts.empty() ? "nothing" : absl::StrJoin(parts, ", ");
}

std::string DeviceText(int32_t place) {
  return place >= 0 ? absl::StrCat("device ", place) : "device ?";
}

// "ranks: ..." with a row per process and device, and what holds its memory at the peak and at
// exit; "" when no process has a row.
std::string RankTableText(const std::vector<ProcessTimeline>& processes) {
  const std::vector<RankRow> rows = RankRows(processes);
  if (rows.empty()) return "";
  std::string out =
      "\nranks: a row per process and device (its own peak; held at the peak and at exit, by "
      "allocator or library)\n";
  absl::StrAppendFormat(&out, "  %-6s %-8s %-10s %14s %14s %14s\n", "rank", "pid", "device", "peak",
                        "at (ms)", "held at exit");
  for (const RankRow& r : rows) {
    absl::StrAppendFormat(&out, "  %-6s %-8d %-10s %14s %14.3f %14s\n",
                          r.process->rank ? absl::StrCat(*r.process->rank) : "-", r.process->pid,
                          DeviceText(r.row->place), FormatBytes(r.row->peak_bytes),
                          static_cast<double>(r.row->peak_time_ns) / 1e6,
                          FormatBytes(r.row->exit_bytes));
    absl::StrAppend(&out, "         at the peak: ", HeldText(r.row->at_peak), "\n");
    absl::StrAppend(&out, "         at exit: ", HeldText(r.row->at_exit), "\n");
  }
  return out;
}

std::string OptionalJson(const std::optional<int32_t>& value) {
  return value ? absl::StrCat(*value) : "null";
}

std::string HeldJson(const std::vector<HeldBy>& held) {
  std::vector<std::string> items;
  for (const HeldBy& h : held) {
    items.push_back(absl::StrCat("{\"id\":", JsonString(h.id), ",\"name\":", JsonString(h.name),
                                 ",\"bytes\":", h.bytes, "}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

std::string RankTableJson(const std::vector<ProcessTimeline>& processes) {
  std::vector<std::string> items;
  for (const RankRow& r : RankRows(processes)) {
    const ProcessTimeline& process = *r.process;
    items.push_back(absl::StrCat(
        "{\"rank\":", OptionalJson(process.rank),
        ",\"local_rank\":", OptionalJson(process.local_rank),
        ",\"world_size\":", OptionalJson(process.world_size), ",\"pid\":", process.pid,
        ",\"host\":", JsonString(process.host), ",\"path\":", JsonString(process.path),
        ",\"device\":", r.row->place, ",\"peak_bytes\":", r.row->peak_bytes,
        ",\"peak_time_ns\":", r.row->peak_time_ns, ",\"held_at_peak\":", HeldJson(r.row->at_peak),
        ",\"held_at_exit_bytes\":", r.row->exit_bytes,
        ",\"held_at_exit\":", HeldJson(r.row->at_exit), "}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

}  // namespace

std::string CombinedPlaceName(int32_t place, const CombinedHost& host,
                              const std::vector<ProcessTimeline>& processes) {
  for (const size_t index : host.processes) {
    const auto it = processes[index].place_names.find(place);
    if (it != processes[index].place_names.end()) return it->second;
  }
  if (place == kPinnedHost) return "pinned host";
  if (place < 0) return "device ?";
  return absl::StrCat("device ", place);
}

std::string CombinedText(const Combined& combined, const std::vector<ProcessTimeline>& processes) {
  std::string out = absl::StrCat("== combined, ", combined.processes, " processes\n");
  absl::StrAppend(&out, RankTableText(processes));
  if (combined.per_host) {
    absl::StrAppend(&out, "the traces come from ", combined.hosts.size(),
                    " hosts: CLOCK_MONOTONIC is per host, so the combined view is per host\n");
  }
  for (const CombinedHost& host : combined.hosts) {
    const std::string host_name = host.host.empty() ? "(unknown host)" : Printable(host.host);
    if (combined.per_host) {
      absl::StrAppend(&out, "\nhost ", host_name, ": ", host.processes.size(),
                      host.processes.size() == 1 ? " process\n" : " processes\n");
    }
    if (host.places.empty()) absl::StrAppend(&out, "\ncombined: no memory allocated\n");
    for (const CombinedPlace& place : host.places) {
      absl::StrAppendFormat(
          &out, "\ncombined peak, %s: %s (%d bytes) at %.3f ms after the first process started\n",
          CombinedPlaceName(place.place, host, processes), FormatBytes(place.peak_bytes),
          place.peak_bytes,
          static_cast<double>(Since(place.timestamp_ns, host.start_time_mono_ns)) / 1e6);
      for (const CombinedShare& share : place.shares) {
        const ProcessTimeline& process = processes[share.process];
        absl::StrAppendFormat(
            &out, "  %s  %5.1f%%  %spid %d  %s\n", FormatBytes(share.bytes),
            place.peak_bytes == 0
                ? 0.0
                : 100.0 * static_cast<double>(share.bytes) / static_cast<double>(place.peak_bytes),
            process.rank ? absl::StrCat("rank ", *process.rank, "  ") : "", process.pid,
            Printable(process.command_line.empty() ? process.path
                                                   : absl::StrJoin(process.command_line, " ")));
      }
    }
  }
  return out;
}

std::string CombinedJson(const Combined& combined, const std::vector<ProcessTimeline>& processes) {
  std::vector<std::string> hosts;
  for (const CombinedHost& host : combined.hosts) {
    std::vector<std::string> places;
    for (const CombinedPlace& place : host.places) {
      std::vector<std::string> shares;
      for (const CombinedShare& share : place.shares) {
        const ProcessTimeline& process = processes[share.process];
        std::vector<std::string> argv;
        for (const std::string& arg : process.command_line) argv.push_back(JsonString(arg));
        shares.push_back(absl::StrCat("{\"pid\":", process.pid,
                                      process.rank ? absl::StrCat(",\"rank\":", *process.rank) : "",
                                      ",\"path\":", JsonString(process.path), ",\"command_line\":[",
                                      absl::StrJoin(argv, ","), "],\"bytes\":", share.bytes, "}"));
      }
      places.push_back(absl::StrCat(
          "{\"memory\":", place.place == kPinnedHost ? "\"host\"" : "\"device\"",
          ",\"device\":", place.place == kPinnedHost ? -1 : place.place,
          ",\"name\":", JsonString(CombinedPlaceName(place.place, host, processes)),
          ",\"peak_bytes\":", place.peak_bytes, ",\"timestamp_ns\":", place.timestamp_ns,
          ",\"time_ns\":", Since(place.timestamp_ns, host.start_time_mono_ns), ",\"processes\":[",
          absl::StrJoin(shares, ","), "]}"));
    }
    std::vector<std::string> pids;
    for (const size_t index : host.processes) pids.push_back(absl::StrCat(processes[index].pid));
    hosts.push_back(absl::StrCat("{\"host\":", JsonString(host.host), ",\"pids\":[",
                                 absl::StrJoin(pids, ","), "],\"places\":[",
                                 absl::StrJoin(places, ","), "]}"));
  }
  return absl::StrCat(
      "{\"processes\":", combined.processes, ",\"per_host\":", combined.per_host ? "true" : "false",
      ",\"ranks\":", RankTableJson(processes), ",\"hosts\":[", absl::StrJoin(hosts, ","), "]}");
}

}  // namespace gpumem::report
