// `gpumem dump`: every packet of a trace, readably; or with --counts, the per-API counts.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "report/cli/commands.h"
#include "report/cli/flags.h"
#include "report/cli/output_file.h"
#include "report/export/packet_format.h"
#include "report/format/printable.h"
#include "report/replay/event_counts.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"
#include "report/trace/trace_paths.h"

namespace gpumem::report {

namespace {

constexpr char kSynopsis[] = R"usage(usage: gpumem dump [--symbolize] [--counts] TRACE...

Prints every packet of each trace, one line each in file order, then how the file ended. An
event the file holds as a reference to an earlier one is printed in full, marked (reference).
A TRACE may be a directory: every *.trace file directly inside it.

)usage";

constexpr char kEpilogue[] = R"usage(
Exit status: 0 ok; 2 bad usage, a trace that is missing, not a trace (a FIFO, a device) or
damaged, or standard output that could not be written. A damaged trace still prints everything
readable; the damage is named in one line on stderr.
)usage";

struct Options {
  bool symbolize = false;
  bool counts = false;
};

CommandLine DumpCommandLine(Options* options) {
  return CommandLine{
      .command = "dump",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 15,
      .flags = {
          Switch({"--symbolize"},
                 "resolve stack frames to \"function (file:line)\" with the recorded module map;\n"
                 "a module missing on this machine is looked for in the directories of\n"
                 "GPUMEM_SYMBOL_PATH (colon-separated), matched by GNU build id",
                 &options->symbolize),
          Switch({"--counts"},
                 "print only, over all traces, the count and bytes of each (action, API) and what\n"
                 "was still allocated at the end",
                 &options->counts),
      }};
}

// Buffered stdout: a dump can be millions of lines.
class Output {
 public:
  ~Output() { Flush(); }
  void Line(const std::string& text) {
    buffer_.append(text);
    buffer_.push_back('\n');
    if (buffer_.size() > (1 << 20)) Flush();
  }
  void Flush() {
    WriteOutput(buffer_);
    FlushOutput();
    buffer_.clear();
  }

 private:
  std::string buffer_;
};

// Prints one file's packets and end; returns false if the file could not be read whole.
bool DumpOne(const std::string& path, bool symbolize, Output* out) {
  absl::StatusOr<std::unique_ptr<TraceFile>> opened = TraceFile::Open(path);
  if (!opened.ok()) {
    out->Flush();
    PrintError(opened.status().message());
    return false;
  }
  TraceFile& trace = **opened;
  std::unique_ptr<Symbolizer> symbolizer;
  if (symbolize) symbolizer = std::make_unique<Symbolizer>(&trace);
  trace.ReadPackets([&](const PacketPosition& position, const TracePacket& packet) {
    std::string line = FormatPacket(position, packet, trace, symbolizer.get());
    // Expanded: the event as written in full; the mark says the file holds a reference.
    if (position.event_ref) line += " (reference)";
    out->Line(line);
  });
  out->Line("end: " + trace.end().Describe());
  if (const std::string note = trace.end().recording.UnrecordedNote(); !note.empty()) {
    out->Line("note: " + note);
  }
  if (!trace.end().damaged()) return true;
  out->Flush();
  PrintError(trace.end().ErrorLine(path));
  return false;
}

// Counts over all files, each streamed in seq order (CountTraceFile: memory bounded by the reorder
// window) and replayed on its own.
bool CountAll(const std::vector<std::string>& paths, Output* out) {
  bool ok = true;
  EventCounts total;
  uint64_t events = 0;
  uint64_t references = 0;
  std::string notes;  // events a trace could not record: its counts are lower bounds
  for (const std::string& path : paths) {
    absl::StatusOr<CountedTrace> trace = CountTraceFile(path);
    if (!trace.ok()) {
      PrintError(trace.status().message());
      ok = false;
      continue;
    }
    total.Merge(trace->counts);
    events += trace->file->memory_event_count() + trace->file->launch_event_count();
    references += trace->file->event_ref_count();
    if (const std::string note = trace->file->end().recording.UnrecordedNote(); !note.empty()) {
      absl::StrAppend(&notes, "note: ", Printable(path), ": ", note, "\n");
    }
    if (trace->file->end().damaged()) {
      PrintError(trace->file->end().ErrorLine(path));
      ok = false;
    }
  }
  std::string text = FormatEventCounts(total);
  // How many memory and launch events the files held as references (format 2) to earlier ones.
  if (references > 0)
    absl::StrAppend(&text, "event_refs count=", references, " events=", events, "\n");
  text += notes;
  text.pop_back();  // Line() adds the last newline
  out->Line(text);
  return ok;
}

}  // namespace

std::string DumpUsage() { return UsageOf(DumpCommandLine); }

int RunDump(const std::vector<std::string>& args) {
  Options options;
  std::vector<std::string> inputs;
  if (int done = kExitOk; !ParseCommandLine(DumpCommandLine(&options), args, &inputs, &done)) {
    return done;
  }
  if (inputs.empty()) return UsageError("dump: no trace file given", "dump");

  absl::StatusOr<std::vector<std::string>> paths = ExpandTracePaths(inputs);
  if (!paths.ok()) {
    PrintError(paths.status().message());
    return kExitBadInput;
  }
  if (absl::Status status = RefuseOutputOverInputs(kStandardOutput, *paths); !status.ok()) {
    PrintError(status.message());
    return kExitBadInput;
  }
  Output out;
  if (options.counts) return CountAll(*paths, &out) ? kExitOk : kExitBadInput;
  bool ok = true;
  for (const std::string& path : *paths) {
    if (paths->size() > 1) out.Line("== " + Printable(path));
    ok = DumpOne(path, options.symbolize, &out) && ok;
  }
  return ok ? kExitOk : kExitBadInput;
}

}  // namespace gpumem::report
