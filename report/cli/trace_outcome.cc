#include "report/cli/trace_outcome.h"

#include <unistd.h>

#include <utility>

#include "absl/status/status.h"
#include "report/cli/trace_outcome.pb.h"

namespace gpumem::report {
namespace {

using google::protobuf::RepeatedPtrField;

void EncodeHolders(const std::vector<HeldBy>& holders, RepeatedPtrField<wire::HeldBy>* out) {
  for (const HeldBy& holder : holders) {
    wire::HeldBy* held = out->Add();
    held->set_id(holder.id);
    held->set_name(holder.name);
    held->set_bytes(holder.bytes);
  }
}

std::vector<HeldBy> DecodeHolders(const RepeatedPtrField<wire::HeldBy>& holders) {
  std::vector<HeldBy> out;
  for (const wire::HeldBy& held : holders) out.push_back({held.id(), held.name(), held.bytes()});
  return out;
}

// The spool, its file dup'ed into `descriptors`.
void EncodeSpool(int32_t place, const TimelineSpool& spool, wire::TimelineSpool* out,
                 std::vector<int>* descriptors) {
  const TimelineSpool::State state = spool.state();
  out->set_place(place);
  out->set_buffered(state.buffered);
  out->set_block_points(state.block_points);
  out->set_file(-1);
  if (state.file >= 0) {
    const int copy = dup(state.file);
    if (copy >= 0) {
      out->set_file(static_cast<int32_t>(descriptors->size()));
      descriptors->push_back(copy);
    }
  }
  // Without a copy of its file, the spool's points there cannot be handed over: the decoder
  // refuses it (in_file points, no file), as for any outcome that does not add up.
  out->set_no_file(state.no_file);
  out->set_in_file(state.in_file);
  out->set_pending(state.pending);
  for (const TimelineSpool::Block& block : state.blocks) {
    for (uint64_t field :
         {block.first_ns, block.last_ns, block.highest, block.entering, block.offset}) {
      out->add_blocks(field);
    }
  }
  out->set_points(state.points);
  out->set_last_timestamp_ns(state.last_timestamp_ns);
  out->set_last_live_bytes(state.last_live_bytes);
}

// The spool `in` describes; `descriptors` are the result's, each taken at most once (-1 after).
absl::StatusOr<TimelineSpool> DecodeSpool(const wire::TimelineSpool& in,
                                          std::vector<int>* descriptors) {
  TimelineSpool::State state;
  state.buffered = in.buffered();
  state.block_points = in.block_points();
  if (in.file() >= 0) {
    if (static_cast<size_t>(in.file()) >= descriptors->size() || (*descriptors)[in.file()] < 0) {
      return absl::InternalError("a timeline names a file it was not handed");
    }
    state.file = std::exchange((*descriptors)[in.file()], -1);
  }
  if (state.file < 0 && in.in_file() > 0) {
    return absl::InternalError("a timeline's file could not be handed over");
  }
  if (in.blocks_size() % 5 != 0) {
    if (state.file >= 0) close(state.file);
    return absl::InternalError("a timeline's points do not add up");
  }
  state.no_file = in.no_file();
  state.in_file = in.in_file();
  state.pending = in.pending();
  for (int i = 0; i < in.blocks_size(); i += 5) {
    state.blocks.push_back(
        {in.blocks(i), in.blocks(i + 1), in.blocks(i + 2), in.blocks(i + 3), in.blocks(i + 4)});
  }
  state.points = in.points();
  state.last_timestamp_ns = in.last_timestamp_ns();
  state.last_live_bytes = in.last_live_bytes();
  std::optional<TimelineSpool> spool = TimelineSpool::FromState(std::move(state));
  if (!spool)
    return absl::InternalError(
        "a timeline's file could not be opened, or its points do not add up");
  return std::move(*spool);
}

void EncodeTimeline(const ProcessTimeline& timeline, wire::ProcessTimeline* out,
                    std::vector<int>* descriptors) {
  out->set_path(timeline.path);
  out->set_host(timeline.host);
  out->set_pid(timeline.pid);
  if (timeline.rank) out->set_rank(*timeline.rank);
  if (timeline.local_rank) out->set_local_rank(*timeline.local_rank);
  if (timeline.world_size) out->set_world_size(*timeline.world_size);
  for (const ProcessDeviceRow& row : timeline.rows) {
    wire::ProcessDeviceRow* to = out->add_rows();
    to->set_place(row.place);
    to->set_peak_bytes(row.peak_bytes);
    to->set_peak_time_ns(row.peak_time_ns);
    EncodeHolders(row.at_peak, to->mutable_at_peak());
    to->set_exit_bytes(row.exit_bytes);
    EncodeHolders(row.at_exit, to->mutable_at_exit());
  }
  for (const std::string& argument : timeline.command_line) out->add_command_line(argument);
  out->set_start_time_mono_ns(timeline.start_time_mono_ns);
  for (const auto& [place, spool] : timeline.places) {
    EncodeSpool(place, spool, out->add_places(), descriptors);
  }
  for (const auto& [place, name] : timeline.place_names)
    (*out->mutable_place_names())[place] = name;
}

absl::StatusOr<ProcessTimeline> DecodeTimeline(const wire::ProcessTimeline& in,
                                               std::vector<int>* descriptors) {
  ProcessTimeline timeline;
  timeline.path = in.path();
  timeline.host = in.host();
  timeline.pid = in.pid();
  if (in.has_rank()) timeline.rank = in.rank();
  if (in.has_local_rank()) timeline.local_rank = in.local_rank();
  if (in.has_world_size()) timeline.world_size = in.world_size();
  for (const wire::ProcessDeviceRow& row : in.rows()) {
    timeline.rows.push_back({row.place(), row.peak_bytes(), row.peak_time_ns(),
                             DecodeHolders(row.at_peak()), row.exit_bytes(),
                             DecodeHolders(row.at_exit())});
  }
  timeline.command_line.assign(in.command_line().begin(), in.command_line().end());
  timeline.start_time_mono_ns = in.start_time_mono_ns();
  for (const wire::TimelineSpool& spool : in.places()) {
    absl::StatusOr<TimelineSpool> decoded = DecodeSpool(spool, descriptors);
    if (!decoded.ok()) return decoded.status();
    timeline.places.insert_or_assign(spool.place(), std::move(*decoded));
  }
  timeline.place_names.insert(in.place_names().begin(), in.place_names().end());
  return timeline;
}

}  // namespace

WorkerResult EncodeOutcome(const TraceOutcome& outcome) {
  WorkerResult result;
  wire::TraceOutcome out;
  for (const TraceOutcome::Piece& piece : outcome.pieces) {
    wire::TraceOutcome::Piece* to = out.add_pieces();
    to->set_error(piece.error);
    to->set_text(piece.text);
  }
  if (outcome.json) out.set_json(*outcome.json);
  out.set_ok(outcome.ok);
  if (outcome.timeline) {
    EncodeTimeline(*outcome.timeline, out.mutable_timeline(), &result.descriptors);
  }
  out.SerializeToString(&result.bytes);
  return result;
}

absl::StatusOr<TraceOutcome> DecodeOutcome(WorkerResult result) {
  wire::TraceOutcome in;
  absl::StatusOr<TraceOutcome> decoded = absl::InternalError("its analysis handed back no outcome");
  if (in.ParseFromString(result.bytes)) {
    TraceOutcome outcome;
    for (const wire::TraceOutcome::Piece& piece : in.pieces()) {
      outcome.pieces.push_back({piece.error(), piece.text()});
    }
    if (in.has_json()) outcome.json = in.json();
    outcome.ok = in.ok();
    decoded = std::move(outcome);
    if (in.has_timeline()) {
      absl::StatusOr<ProcessTimeline> timeline = DecodeTimeline(in.timeline(), &result.descriptors);
      if (timeline.ok()) {
        decoded->timeline = std::move(*timeline);
      } else {
        decoded = timeline.status();
      }
    }
  }
  for (int descriptor : result.descriptors) {
    if (descriptor >= 0) close(descriptor);  // those no spool took over
  }
  return decoded;
}

}  // namespace gpumem::report
