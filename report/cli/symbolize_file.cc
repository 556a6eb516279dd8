#include "report/cli/symbolize_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "report/cli/commands.h"
#include "report/cli/output_file.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

namespace {

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

// Every distinct (module, return address) of every stack, in file order. The module is looked up
// as of the Stack packet, while the module table is as it was then.
std::vector<ReturnAddress> CollectReturnAddresses(TraceFile& trace, const Symbolizer& symbolizer) {
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
  return addresses;
}

// The SymbolizedFrame packets for the `addresses` not yet in the trace that a binary here resolves.
struct NewFrames {
  Trace packets;  // SymbolizedFrames, then a Symbolization
  SymbolizeCounts counts;
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
      ++added.counts.already;
      continue;
    }
    const std::vector<Frame> frames = symbolizer.SymbolizeFromBinaries(address.pc, &record);
    bool named = false;
    for (const Frame& frame : frames) named = named || !frame.function.empty();
    if (!named) {
      ++added.counts.unresolved;
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
    ++added.counts.frames;
  }
  if (!new_modules.empty()) {
    Symbolization* symbolization = added.packets.add_packet()->mutable_symbolization();
    symbolization->mutable_module_id()->Assign(new_modules.begin(), new_modules.end());
    symbolization->set_host(HostName());
  }
  return added;
}

}  // namespace

absl::StatusOr<SymbolizeCounts> SymbolizeTraceFile(const std::string& path,
                                                   const std::string& target) {
  absl::StatusOr<std::unique_ptr<TraceFile>> opened = TraceFile::Open(path);
  if (!opened.ok()) return opened.status();
  TraceFile& trace = **opened;
  Symbolizer symbolizer(&trace);
  const std::vector<ReturnAddress> addresses = CollectReturnAddresses(trace, symbolizer);
  if (!trace.end().framing.ok()) {
    // Appended packets would follow the damage, where readers may not find them.
    return absl::DataLossError(absl::StrCat(trace.end().ErrorLine(path), "; nothing written"));
  }
  const NewFrames added = ResolveNew(trace, symbolizer, addresses);
  // Each packet is field 1 of Trace: the serialized Trace is exactly the packets framed as the
  // recorder frames them, so the file stays one valid Trace message.
  std::string bytes;
  added.packets.SerializeToString(&bytes);
  if (!bytes.empty() || target != path) {
    if (absl::Status written = WriteSymbolized(path, target, bytes); !written.ok()) {
      return absl::Status(written.code(),
                          absl::StrCat(written.message(), "; ", path, " is unchanged"));
    }
  }
  return added.counts;
}

}  // namespace gpumem::report
