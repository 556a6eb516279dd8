// `gpumem symbolize`: resolves every return address of a trace's stacks with the binaries on this
// machine and appends the results to the trace as SymbolizedFrame packets, so that the trace reads
// the same (function, file, line) on a machine without the binaries. Several traces, or directories
// of them, are each symbolized in place: written aside, then renamed over the original.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "report/cli/commands.h"
#include "report/cli/flags.h"
#include "report/cli/output_file.h"
#include "report/format/printable.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"
#include "report/trace/trace_paths.h"

namespace gpumem::report {

namespace {

constexpr char kSynopsis[] = R"usage(usage: gpumem symbolize [-o OUT] TRACE...

Resolves every stack frame of each TRACE to function, file and line with the binaries on this
machine (as `dump --symbolize` does: the recorded paths, else GPUMEM_SYMBOL_PATH matched by GNU
build id) and appends the results to that TRACE as SymbolizedFrame packets. `gpumem report`,
`check` and `dump --symbolize` use them before any local binary, so the trace then reads the same
on a machine without the binaries: from then on reports never open a binary for the modules it
looked at, whatever lies at their recorded paths elsewhere. Frames already recorded are not
resolved again: running it twice adds nothing; frames that no binary here resolves are left out
(print as module+offset).

A TRACE may be a directory: every *.trace file directly inside it (one per process), each
symbolized in place. A trace that fails does not stop the others.

The new trace is written to a temporary file beside it, flushed to disk and renamed over TRACE
(keeping its permissions): if anything fails (a full disk, a file-size limit), TRACE is left
byte for byte as it was.

)usage";

constexpr char kEpilogue[] = R"usage(
Exit status: 0 ok; 2 bad usage, or a trace that is missing, not a trace, damaged or unwritable
(the others are still symbolized), or output that could not be written.
)usage";

struct Options {
  std::string output;  // empty: each trace in place
};

CommandLine SymbolizeCommandLine(Options* options) {
  return CommandLine{
      .command = "symbolize",
      .synopsis = kSynopsis,
      .epilogue = kEpilogue,
      .help_column = 14,
      .flags = {
          OutputFlag({"-o", "--output"}, "OUT",
                     "write a copy of TRACE with the frames appended to OUT; TRACE is left as it "
                     "is\n(only with a single trace file; OUT may not be TRACE under any name)",
                     &options->output),
      }};
}

// A return address and the module it belongs to (index into TraceFile::modules()).
struct ReturnAddress {
  uint64_t pc = 0;
  size_t module = 0;
};

// Writes `source` followed by `appended` to `target` (`source` itself for in place) through an
// AtomicFile: `target` is replaced only once the new file is whole on disk, and keeps the mode of
// `source`.
absl::Status WriteSymbolized(const std::string& source, const std::string& target,
                             const std::string& appended) {
  struct stat info;
  if (stat(source.c_str(), &info) != 0) {
    return absl::UnavailableError(absl::StrCat("reading ", source, ": ", std::strerror(errno)));
  }
  absl::StatusOr<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(target);
  if (!file.ok()) return file.status();
  if (absl::Status copied = (*file)->CopyFrom(source); !copied.ok()) return copied;
  if (absl::Status written = (*file)->Write(appended); !written.ok()) return written;
  return (*file)->Commit(info.st_mode & 07777);
}

// The SymbolizedFrame packets for the `addresses` not yet in the trace that a binary here resolves.
struct NewFrames {
  Trace packets;            // SymbolizedFrames, then a Symbolization
  uint64_t frames = 0;      // return addresses resolved here
  uint64_t already = 0;     // in the trace already
  uint64_t unresolved = 0;  // no function found
};
NewFrames ResolveNew(const TraceFile& trace, Symbolizer& symbolizer,
                     const std::vector<ReturnAddress>& addresses) {
  NewFrames added;
  // Every module with a frame, found here or not: reports then open none of their binaries.
  std::set<uint32_t> new_modules;
  for (const ReturnAddress& address : addresses) {
    const ModuleRecord& record = trace.modules()[address.module];
    if (!trace.ModuleSymbolized(record.module.id())) new_modules.insert(record.module.id());
    if (trace.FindSymbolizedFrame(record.module.id(), address.pc) != nullptr) {
      ++added.already;
      continue;
    }
    const std::vector<Frame> frames = symbolizer.SymbolizeFromBinaries(address.pc, &record);
    bool named = false;
    for (const Frame& frame : frames) named = named || !frame.function.empty();
    if (!named) {
      ++added.unresolved;
      continue;
    }
    SymbolizedFrame* symbolized = added.packets.add_packet()->mutable_symbolized_frame();
    symbolized->set_pc(address.pc);
    symbolized->set_module_id(record.module.id());
    for (const Frame& frame : frames) {
      ResolvedFrame* resolved = symbolized->add_frame();
      resolved->set_function(frame.function);
      resolved->set_file(frame.file);
      resolved->set_line(static_cast<uint32_t>(frame.line));
      resolved->set_inlined(frame.inlined);
    }
    ++added.frames;
  }
  if (!new_modules.empty()) {
    Symbolization* symbolization = added.packets.add_packet()->mutable_symbolization();
    symbolization->mutable_module_id()->Assign(new_modules.begin(), new_modules.end());
    symbolization->set_host(HostName());
  }
  return added;
}

// Symbolizes one trace file, in place or (with `output`) into a copy; prints one line on stdout,
// or the error on stderr and returns false.
bool SymbolizeTrace(const std::string& path, const std::string& output) {
  absl::StatusOr<std::unique_ptr<TraceFile>> opened = TraceFile::Open(path);
  if (!opened.ok()) {
    PrintError(opened.status().message());
    return false;
  }
  TraceFile& trace = **opened;
  Symbolizer symbolizer(&trace);
  // Every distinct (module, return address) of every stack, in file order. The module is looked
  // up as of the Stack packet, while the module table is as it was then.
  std::vector<ReturnAddress> addresses;
  absl::flat_hash_set<std::pair<uint32_t, uint64_t>> seen;
  trace.ReadPackets([&](const PacketPosition& position, const TracePacket& packet) {
    if (!packet.has_stack()) return;
    for (uint64_t pc : packet.stack().frame()) {
      const ModuleRecord* record = symbolizer.FindModule(pc, position.index);
      if (record == nullptr) continue;
      if (!seen.insert({record->module.id(), pc}).second) continue;
      addresses.push_back({pc, static_cast<size_t>(record - trace.modules().data())});
    }
  });
  if (!trace.end().framing.ok()) {
    // Appended packets would follow the damage, where readers may not find them.
    PrintError(absl::StrCat(trace.end().ErrorLine(path), "; nothing written"));
    return false;
  }

  const NewFrames added = ResolveNew(trace, symbolizer, addresses);
  // Each packet is field 1 of Trace: the serialized Trace is exactly the packets framed as the
  // recorder frames them, so the file stays one valid Trace message.
  std::string bytes;
  added.packets.SerializeToString(&bytes);
  const std::string target = output.empty() ? path : output;
  if (!bytes.empty() || !output.empty()) {
    if (absl::Status written = WriteSymbolized(path, target, bytes); !written.ok()) {
      PrintError(absl::StrCat(written.message(), "; ", path, " is unchanged"));
      return false;
    }
  }
  WriteOutput(absl::StrCat(Printable(target), ": ", added.frames,
                           " return address(es) symbolized, ", added.already,
                           " already in the trace, ", added.unresolved, " unresolved\n"));
  FlushOutput();  // each trace's line before the next trace's error, if any
  return true;
}

}  // namespace

std::string SymbolizeUsage() { return UsageOf(SymbolizeCommandLine); }

int RunSymbolize(const std::vector<std::string>& args) {
  Options options;
  std::vector<std::string> inputs;
  if (int done = kExitOk; !ParseCommandLine(SymbolizeCommandLine(&options), args, &inputs, &done)) {
    return done;
  }
  const std::string& output = options.output;
  if (inputs.empty()) return UsageError("symbolize: no trace file given", "symbolize");
  std::error_code error;
  if (!output.empty() && (inputs.size() != 1 || std::filesystem::is_directory(inputs[0], error))) {
    return UsageError("symbolize: -o takes a single trace file, not a directory or several traces",
                      "symbolize");
  }
  absl::StatusOr<std::vector<std::string>> paths = ExpandTracePaths(inputs);
  if (!paths.ok()) {
    PrintError(paths.status().message());
    return kExitBadInput;
  }
  for (const std::string& written : {std::string(kStandardOutput), output}) {
    if (written.empty()) continue;
    if (absl::Status status = RefuseOutputOverInputs(written, *paths); !status.ok()) {
      PrintError(status.message());
      return kExitBadInput;
    }
  }
  bool ok = true;
  for (const std::string& path : *paths) ok = SymbolizeTrace(path, output) && ok;
  return ok ? kExitOk : kExitBadInput;
}

}  // namespace gpumem::report
