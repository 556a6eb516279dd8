#include "report/export/packet_format.h"

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/format/names.h"
#include "report/format/printable.h"

namespace gpumem::report {
namespace {

// A string field in quotes, escaped (invalid UTF-8 as \xNN, control characters, " and \).
std::string Quoted(const std::string& text) {
  std::string quoted = "\"";
  AppendEscaped(text, TextEscape::kQuoted, &quoted);
  quoted += "\"";
  return quoted;
}

// Addresses, streams, pools and handles: hex, with 0 (null) as plain 0.
std::string Address(uint64_t value) {
  return value == 0 ? "0" : absl::StrCat("0x", absl::Hex(value));
}

// Milliseconds since the trace started; CLOCK_MONOTONIC on both sides.
std::string RelativeTime(uint64_t mono_ns, const Header& header) {
  const int64_t delta = static_cast<int64_t>(mono_ns - header.start_time_mono_ns());
  return absl::StrFormat("%.3fms", static_cast<double>(delta) / 1e6);
}

std::string UtcTime(uint64_t unix_ns) {
  const time_t seconds = static_cast<time_t>(unix_ns / 1000000000);
  struct tm utc;
  if (gmtime_r(&seconds, &utc) == nullptr) return "?";
  char text[32];
  strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  return absl::StrFormat("%s.%03uZ", text, static_cast<unsigned>(unix_ns / 1000000 % 1000));
}

void AppendHeader(const Header& header, std::string* line) {
  std::vector<std::string> argv;
  for (const std::string& arg : header.command_line()) argv.push_back(Quoted(arg));
  std::vector<std::string> options;
  for (const Option& option : header.option()) {
    options.push_back(absl::StrCat(Printable(option.name()), "=", Quoted(option.value())));
  }
  absl::StrAppend(
      line, "header format_version=", header.format_version(), " host=", Quoted(header.host()),
      " pid=", header.pid(), " parent_pid=", header.parent_pid(), " command_line=[",
      absl::StrJoin(argv, " "), "] start_time_unix_ns=", header.start_time_unix_ns(), " (",
      UtcTime(header.start_time_unix_ns()), ")",
      " start_time_mono_ns=", header.start_time_mono_ns(), " options=[",
      absl::StrJoin(options, " "), "]", " recorder_version=", Quoted(header.recorder_version()),
      " stacks_unavailable=", header.stacks_unavailable() ? "true" : "false");
}

void AppendMemory(const MemoryEvent& event, const Header& header, std::string* line) {
  absl::StrAppend(line, "memory seq=", event.seq(),
                  " t=", RelativeTime(event.timestamp_ns(), header), " tid=", event.tid(),
                  " dev=", event.device(), " ", ApiName(event.api()), " ",
                  ActionName(event.action()), " ", KindName(event.kind()), " size=", event.size(),
                  " addr=", Address(event.address()), " stream=", Address(event.stream()),
                  " result=", event.result(), " stack=", event.stack_id());
  // Fields only some APIs use: shown only when set.
  if (event.pool() != 0) absl::StrAppend(line, " pool=", Address(event.pool()));
  if (event.handle() != 0) absl::StrAppend(line, " handle=", Address(event.handle()));
  if (event.offset() != 0) absl::StrAppend(line, " offset=", event.offset());
  if (event.pitch() != 0) absl::StrAppend(line, " pitch=", event.pitch());
  if (event.capture() != 0) absl::StrAppend(line, " capture=", event.capture());
  if (event.free_bytes() != 0 || event.total_bytes() != 0) {
    absl::StrAppend(line, " free_bytes=", event.free_bytes(), " total_bytes=", event.total_bytes());
  }
}

void AppendLaunch(const LaunchEvent& launch, const TraceFile& trace, std::string* line) {
  const std::string* name = trace.FindKernelName(launch.kernel_id());
  absl::StrAppend(line, "launch seq=", launch.seq(),
                  " t=", RelativeTime(launch.timestamp_ns(), trace.header()), " tid=", launch.tid(),
                  " dev=", launch.device(), " ", LaunchApiName(launch.api()));
  if (launch.api() == CU_GRAPH_LAUNCH) {
    absl::StrAppend(line, " graph=", Address(launch.graph()));
  } else {
    absl::StrAppend(line, " kernel=", launch.kernel_id(), " ", Quoted(name != nullptr ? *name : ""),
                    " grid=", launch.grid_x(), ",", launch.grid_y(), ",", launch.grid_z(),
                    " block=", launch.block_x(), ",", launch.block_y(), ",", launch.block_z(),
                    " shared=", launch.shared_memory_bytes());
  }
  absl::StrAppend(line, " stream=", Address(launch.stream()), " result=", launch.result(),
                  " stack=", launch.stack_id());
  if (launch.correlation_id() != 0) absl::StrAppend(line, " correlation=", launch.correlation_id());
  std::vector<std::string> pointers;
  for (uint64_t pointer : launch.pointer_args()) pointers.push_back(Address(pointer));
  if (!pointers.empty())
    absl::StrAppend(line, " pointer_args=[", absl::StrJoin(pointers, " "), "]");
  if (launch.params_unknown()) absl::StrAppend(line, " params_unknown");
  if (launch.from_cupti()) absl::StrAppend(line, " from_cupti");
}

void AppendStack(const Stack& stack, Symbolizer* symbolizer, std::string* line) {
  std::vector<std::string> frames;
  if (symbolizer != nullptr) {
    // The stack table already holds this packet's stack: the visitor runs after the update.
    for (const Frame& frame : symbolizer->Symbolize(stack.id())) frames.push_back(frame.ToString());
  } else {
    for (uint64_t pc : stack.frame()) frames.push_back(absl::StrCat("0x", absl::Hex(pc)));
  }
  absl::StrAppend(line, "stack id=", stack.id(), " frames=[",
                  absl::StrJoin(frames, symbolizer != nullptr ? " <- " : " "), "]");
  if (stack.truncated()) absl::StrAppend(line, " truncated");
  // Python frames: symbolized, they are spliced into `frames`; raw, as code:line:group each.
  if (symbolizer == nullptr && stack.python_code_size() > 0) {
    std::vector<std::string> python;
    for (int i = 0; i < stack.python_code_size(); ++i) {
      python.push_back(absl::StrCat(stack.python_code(i), ":",
                                    i < stack.python_line_size() ? stack.python_line(i) : 0, ":",
                                    i < stack.python_group_size() ? stack.python_group(i) : 0));
    }
    absl::StrAppend(line, " python=[", absl::StrJoin(python, " "), "]");
  }
  if (stack.python_truncated()) absl::StrAppend(line, " python_truncated");
}

void AppendModule(const Module& module, std::string* line) {
  absl::StrAppend(line, "module id=", module.id(), " path=", Quoted(module.path()), " build_id=",
                  module.build_id().empty() ? "none" : absl::BytesToHexString(module.build_id()),
                  " load_bias=", Address(module.load_bias()), " start=", Address(module.start()),
                  " end=", Address(module.end()));
}

void AppendModuleUnload(const ModuleUnload& unload, const TraceFile& trace, std::string* line) {
  absl::StrAppend(line, "module_unload id=", unload.id());
  const std::vector<ModuleRecord>& modules = trace.modules();
  auto it = std::find_if(modules.begin(), modules.end(),
                         [&](const ModuleRecord& m) { return m.module.id() == unload.id(); });
  if (it != modules.end()) absl::StrAppend(line, " path=", Quoted(it->module.path()));
}

void AppendFooter(const Footer& footer, const Header& header, std::string* line) {
  absl::StrAppend(line, "footer events=", footer.events(),
                  " events_dropped=", footer.events_dropped(), " stacks=", footer.stacks(),
                  " stacks_failed=", footer.stacks_failed(),
                  " bytes_written=", footer.bytes_written(),
                  " clean_exit=", footer.clean_exit() ? "true" : "false",
                  " t=", RelativeTime(footer.end_time_mono_ns(), header));
  if (footer.has_exit_status()) absl::StrAppend(line, " exit_status=", footer.exit_status());
  absl::StrAppend(line, " hook_conflicts=", footer.hook_conflicts());
  if (footer.events_reentrant() > 0) {
    absl::StrAppend(line, " events_reentrant=", footer.events_reentrant());
  }
  if (footer.stop_reason() != STOP_NONE) {
    absl::StrAppend(line, " stop_reason=", RecordingStopName(footer.stop_reason()),
                    " stopped_at_seq=", footer.stopped_at_seq());
  }
}

void AppendSymbolizedFrame(const SymbolizedFrame& symbolized, std::string* line) {
  std::vector<std::string> frames;
  for (const ResolvedFrame& frame : symbolized.frame()) {
    std::string text = Printable(frame.function());
    if (!frame.file().empty()) {
      absl::StrAppend(&text, " (", Printable(frame.file()), ":", frame.line(), ")");
    }
    if (frame.inlined()) absl::StrAppend(&text, " [inlined]");
    frames.push_back(std::move(text));
  }
  absl::StrAppend(line, "symbolized_frame pc=", Address(symbolized.pc()),
                  " module=", symbolized.module_id(), " frames=[", absl::StrJoin(frames, " <- "),
                  "]");
}

void AppendDevice(const Device& device, std::string* line) {
  absl::StrAppend(line, "device ordinal=", device.ordinal(), " name=", Quoted(device.name()),
                  " total_memory=", device.total_memory());
}

void AppendThread(const Thread& thread, std::string* line) {
  absl::StrAppend(line, "thread tid=", thread.tid(), " name=", Quoted(thread.name()));
}

void AppendSymbolization(const Symbolization& symbolization, std::string* line) {
  absl::StrAppend(line, "symbolization host=", Quoted(symbolization.host()), " modules=[",
                  absl::StrJoin(symbolization.module_id(), " "), "]");
}

void AppendKernelName(const KernelName& kernel, std::string* line) {
  absl::StrAppend(line, "kernel_name id=", kernel.id(), " name=", Quoted(kernel.name()));
}

void AppendCupti(const CuptiStatus& cupti, std::string* line) {
  absl::StrAppend(line, "cupti state=", CuptiStateName(cupti.state()),
                  " detail=", Quoted(cupti.detail()),
                  " kernel_timing=", cupti.kernel_timing() ? "true" : "false");
}

void AppendKernelTiming(const KernelTiming& timing, std::string* line) {
  absl::StrAppend(line, "kernel_timing correlation=", timing.correlation_id(),
                  " dev=", timing.device(), " start_ns=", timing.start_ns(),
                  " end_ns=", timing.end_ns());
}

void AppendPythonCode(const PythonCode& code, std::string* line) {
  absl::StrAppend(line, "python_code id=", code.id(), " filename=", Quoted(code.filename()),
                  " function=", Quoted(code.function()), " first_line=", code.first_line());
}

void AppendPythonStatus(const PythonStatus& status, std::string* line) {
  absl::StrAppend(line, "python_status version=", Quoted(status.version()),
                  " supported=", status.supported() ? "true" : "false",
                  " detail=", Quoted(status.detail()));
}

void AppendPoolUsage(const PoolUsage& pool, const Header& header, std::string* line) {
  absl::StrAppend(line, "pool_usage pool=", Address(pool.pool()), " dev=", pool.device(),
                  " reserved=", pool.reserved_bytes(), " used=", pool.used_bytes(),
                  " t=", RelativeTime(pool.timestamp_ns(), header));
}

void AppendStreamCapture(const StreamCapture& capture, const Header& header, std::string* line) {
  absl::StrAppend(line, "stream_capture seq=", capture.seq(), " tid=", capture.tid(),
                  " capture=", capture.capture(), " stream=", Address(capture.stream()), " ",
                  capture.ended() ? "ended" : "began");
  if (capture.mode() != CAPTURE_MODE_UNKNOWN) {
    absl::StrAppend(line, " mode=", CaptureModeName(capture.mode()));
  }
  absl::StrAppend(line, " result=", capture.result(),
                  " t=", RelativeTime(capture.timestamp_ns(), header));
}

void AppendPythonHolder(const PythonHolder& holder, const Header& header, std::string* line) {
  absl::StrAppend(line, "python_holder seq=", holder.seq(), " tid=", holder.tid(),
                  " address=", Address(holder.address()), " size=", holder.size(),
                  " stack=", holder.stack_id(), " how=", Quoted(holder.how()),
                  " t=", RelativeTime(holder.timestamp_ns(), header));
}

void AppendFrameworkOom(const FrameworkOom& oom, const Header& header, std::string* line) {
  absl::StrAppend(line, "framework_oom seq=", oom.seq(), " tid=", oom.tid(), " dev=", oom.device(),
                  " source=", OomSourceName(oom.source()), " requested=", oom.requested(),
                  oom.requested_from_message() ? " (from message)" : "",
                  " allocated=", oom.allocated(), " reserved=", oom.reserved(),
                  " limit=", oom.limit(), " free=", oom.device_free(), " stack=", oom.stack_id(),
                  " t=", RelativeTime(oom.timestamp_ns(), header));
  if (!oom.message().empty()) absl::StrAppend(line, " message=", Quoted(oom.message()));
}

void AppendBackwardPass(const BackwardPass& pass, const Header& header, std::string* line) {
  absl::StrAppend(line, "backward_pass seq=", pass.seq(), " tid=", pass.tid(),
                  " pass=", pass.pass(), " ", pass.ended() ? "ended" : "began");
  if (!pass.ended()) absl::StrAppend(line, " stack=", pass.stack_id());
  absl::StrAppend(line, " t=", RelativeTime(pass.timestamp_ns(), header));
}

void AppendProcessEnd(const ProcessEnd& end, std::string* line) {
  absl::StrAppend(line, "process_end pid=", end.pid(), " exit_status=", end.exit_status(),
                  " signal=", end.signal());
  if (end.signal() != 0) absl::StrAppend(line, " (", strsignal(end.signal()), ")");
  absl::StrAppend(line, " core_dumped=", end.core_dumped() ? "true" : "false");
}

// A packet with no data: padding, empty, or of a type this build does not know.
void AppendNoData(const PacketPosition& position, const TracePacket& packet, std::string* line) {
  if (!packet.padding().empty()) {
    absl::StrAppend(line, "padding bytes=", packet.padding().size());
  } else if (position.size == 0) {
    absl::StrAppend(line, "empty");
  } else {
    absl::StrAppend(line, "unknown (", position.size, " bytes; a packet type from a newer schema)");
  }
}

// The packet's type and fields.
void AppendPacket(const PacketPosition& position, const TracePacket& packet, const TraceFile& trace,
                  Symbolizer* symbolizer, std::string* line) {
  const Header& header = trace.header();
  switch (packet.data_case()) {
    case TracePacket::kHeader:
      return AppendHeader(packet.header(), line);
    case TracePacket::kDevice:
      return AppendDevice(packet.device(), line);
    case TracePacket::kModule:
      return AppendModule(packet.module(), line);
    case TracePacket::kModuleUnload:
      return AppendModuleUnload(packet.module_unload(), trace, line);
    case TracePacket::kThread:
      return AppendThread(packet.thread(), line);
    case TracePacket::kStack:
      return AppendStack(packet.stack(), symbolizer, line);
    case TracePacket::kMemory:
      return AppendMemory(packet.memory(), header, line);
    case TracePacket::kFooter:
      return AppendFooter(packet.footer(), header, line);
    case TracePacket::kSymbolizedFrame:
      return AppendSymbolizedFrame(packet.symbolized_frame(), line);
    case TracePacket::kSymbolization:
      return AppendSymbolization(packet.symbolization(), line);
    case TracePacket::kKernelName:
      return AppendKernelName(packet.kernel_name(), line);
    case TracePacket::kLaunch:
      return AppendLaunch(packet.launch(), trace, line);
    case TracePacket::kCupti:
      return AppendCupti(packet.cupti(), line);
    case TracePacket::kKernelTiming:
      return AppendKernelTiming(packet.kernel_timing(), line);
    case TracePacket::kPythonCode:
      return AppendPythonCode(packet.python_code(), line);
    case TracePacket::kPythonStatus:
      return AppendPythonStatus(packet.python_status(), line);
    case TracePacket::kPoolUsage:
      return AppendPoolUsage(packet.pool_usage(), header, line);
    case TracePacket::kStreamCapture:
      return AppendStreamCapture(packet.stream_capture(), header, line);
    case TracePacket::kPythonHolder:
      return AppendPythonHolder(packet.python_holder(), header, line);
    case TracePacket::kFrameworkOom:
      return AppendFrameworkOom(packet.framework_oom(), header, line);
    case TracePacket::kBackwardPass:
      return AppendBackwardPass(packet.backward_pass(), header, line);
    case TracePacket::kProcessEnd:
      return AppendProcessEnd(packet.process_end(), line);
    case TracePacket::DATA_NOT_SET:
      return AppendNoData(position, packet, line);
  }
}

}  // namespace

std::string FormatPacket(const PacketPosition& position, const TracePacket& packet,
                         const TraceFile& trace, Symbolizer* symbolizer) {
  std::string line = absl::StrCat("#", position.index, " ");
  if (!position.parsed) {
    absl::StrAppend(&line, "unparseable at byte ", position.offset, " (", position.size,
                    " bytes): not a valid TracePacket, typically a write cut short by a crash");
    return line;
  }
  AppendPacket(position, packet, trace, symbolizer, &line);
  return line;
}

}  // namespace gpumem::report
