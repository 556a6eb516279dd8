// libFuzzer target: arbitrary bytes through the whole path the gpumem tools read a trace by.
//
//   1. core/trace_reader: framing, zero skipping, torn and corrupt files, resynchronisation.
//   2. report/trace_file: libprotobuf decode of every packet, the interned tables (devices,
//      modules, threads, stacks), how the file ended; report/packet_format: each `dump` line.
//   3. The replay: ReadMemoryEventsBySeq, report/event_counts, report/replay (Replay::Add over the
//      decoded events, Places(), ForEachLive), report/oom and report/growth.
//   4. report/symbolizer on every stack the input declares, against the modules it declares.
//   5. The commands themselves, as the `gpumem` binary runs them (report/cli/commands.h), in process:
//      `dump` (plain, --counts, --symbolize), `report` (every section, text and JSON), `check`,
//      `whatif` (each --allocator, text and JSON), `view` and `export` in every format, their
//      output written to stdout, which the fuzzer sends to /dev/null.
//
// Plus invariants that make "bad input is handled" checkable, not just "does not crash": every
// error is one line naming the path; the command-level and library-level views of the same file
// agree; `dump` exits 2 exactly when the file cannot be opened or is damaged.
//
// The symbolizer opens the module files a trace names (and GPUMEM_SYMBOL_PATH). An input must not
// make the fuzzer open arbitrary files on this machine (a FIFO blocks, /dev/zero never ends, a
// 1 GiB library is slow), so symbolization (stage 4, and every command but `dump`, `dump --counts`
// and `check`: they show call sites) runs only when no module path the input declares exists here,
// and GPUMEM_SYMBOL_PATH is unset: the symbolizer's trace-driven part (module lookup by address and
// packet index, load bias, caching, unknown stacks) is fuzzed, and no file but the input is ever
// opened. Resolving real ELF files is covered by tests/report/stacks/symbolizer_test.cc.
//
// TraceReader reads from a path (pread, SEEK_DATA), so each input is written to one file per
// process in /dev/shm, truncated and rewritten for every input: it never holds more than one input
// (-max_len bytes). libFuzzer ends with _Exit() (no atexit), so each start removes the files of
// fuzzer processes that are gone, and tests/fuzz/run.sh removes them when it ends.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "core/trace_reader.h"
#include "report/allocator/allocator_replay.h"
#include "report/cli/commands.h"
#include "report/replay/event_counts.h"
#include "report/analysis/growth.h"
#include "report/analysis/oom.h"
#include "report/export/packet_format.h"
#include "report/replay/replay.h"
#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"

namespace {

using namespace gpumem;
using namespace gpumem::report;

std::string g_path;  // the input's file

// An invariant broken: print it and abort, which libFuzzer reports as a crash with the input.
#define FUZZ_CHECK(condition, what)                                                              \
  do {                                                                                           \
    if (!(condition)) {                                                                          \
      std::fprintf(stderr, "trace_reader_fuzz: %s:%d: %s: %s\n", __FILE__, __LINE__, #condition, \
                   std::string(what).c_str());                                                   \
      std::abort();                                                                              \
    }                                                                                            \
  } while (false)

// Input files left by fuzzer processes that no longer run (see the top of the file).
void RemoveStaleInputFiles(const std::string& dir) {
  DIR* entries = opendir(dir.c_str());
  if (entries == nullptr) return;
  while (const dirent* entry = readdir(entries)) {
    int pid = 0;
    char end = 0;
    if (std::sscanf(entry->d_name, "gpumem-fuzz-%d.trac%c", &pid, &end) == 2 && end == 'e' &&
        pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
      unlinkat(dirfd(entries), entry->d_name, 0);
    }
  }
  closedir(entries);
}

void WriteInput(const uint8_t* data, size_t size) {
  const int fd = open(g_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0, g_path);
  for (size_t done = 0; done < size;) {
    const ssize_t wrote = write(fd, data + done, size - done);
    FUZZ_CHECK(wrote > 0, g_path);
    done += static_cast<size_t>(wrote);
  }
  close(fd);
}

// An error message as the commands print it: one line, about this file.
void CheckErrorLine(const std::string& message) {
  FUZZ_CHECK(message.rfind(g_path + ": ", 0) == 0, message);
  FUZZ_CHECK(message.find('\n') == std::string::npos, message);
}

// See the top of the file: no module the input names may exist here.
bool SymbolizingOpensNothing(const TraceFile& trace) {
  for (const ModuleRecord& record : trace.modules()) {
    struct stat info;
    // c_str(): what the symbolizer's access() and open() would see, up to an embedded NUL.
    if (lstat(record.module.path().c_str(), &info) == 0) return false;
  }
  return true;
}

// Stage 1: framing alone. Returns the number of packets.
uint64_t FramePackets() {
  TraceReader reader;
  std::string error;
  if (!reader.Open(g_path, &error)) {
    CheckErrorLine(error);
    FUZZ_CHECK(!reader.end().ok(), error);
    return 0;
  }
  Packet packet;
  uint64_t packets = 0;
  uint64_t checksum = 0;
  while (reader.Next(&packet)) {
    ++packets;
    FUZZ_CHECK(packet.offset + 2 + packet.bytes.size() <= reader.file_size(), "packet past EOF");
    if (!packet.bytes.empty()) {  // the view's ends must be readable (ASan)
      checksum +=
          static_cast<uint8_t>(packet.bytes.front()) + static_cast<uint8_t>(packet.bytes.back());
    }
  }
  FUZZ_CHECK(!reader.Next(&packet), "Next() after the end");
  const TraceEnd& end = reader.end();
  FUZZ_CHECK(end.ok() == end.message.empty(), end.message);
  if (!end.ok()) CheckErrorLine(end.message);
  FUZZ_CHECK(packets == reader.packets_read(), "packet count");
  (void)checksum;
  return packets;
}

void Symbolize(const TraceFile& trace, const std::vector<uint64_t>& stack_ids) {
  Symbolizer symbolizer(&trace);
  for (uint64_t id : stack_ids) {
    for (const report::Frame& frame : symbolizer.Symbolize(id)) (void)frame.ToString();
  }
  // Return addresses at every packet index, including ones no module or stack covers.
  for (const ModuleRecord& record : trace.modules()) {
    for (uint64_t pc :
         {record.module.start(), record.module.end() - 1, record.module.load_bias()}) {
      for (const report::Frame& frame : symbolizer.SymbolizeReturnAddress(pc, record.loaded_at)) {
        (void)frame.ToString();
      }
    }
  }
  (void)symbolizer.Symbolize(0);
}

// What stages 2 to 4 found out about the file, for stage 5 to check the commands against.
struct Decoded {
  bool opened = false;            // TraceFile::Open() accepted it
  bool symbolize = false;         // symbolizing it opens no file (SymbolizingOpensNothing)
  int dump_exit = kExitBadInput;  // what `gpumem dump` must exit with
  // The recording mode the summary and `whatif` decide on (whatif refuses kSegments).
  SummaryMode mode = SummaryMode::kPlain;
};

// Stages 2 to 4.
Decoded Decode(uint64_t framed_packets) {
  Decoded decoded;
  absl::StatusOr<std::unique_ptr<TraceFile>> opened = TraceFile::Open(g_path);
  if (!opened.ok()) {
    CheckErrorLine(std::string(opened.status().message()));
    return decoded;
  }
  decoded.opened = true;
  TraceFile& trace = **opened;
  std::vector<uint64_t> stack_ids;
  std::string dump;
  trace.ReadPackets([&](const PacketPosition& position, const TracePacket& packet) {
    dump += FormatPacket(position, packet, trace, nullptr);
    if (packet.has_stack()) stack_ids.push_back(packet.stack().id());
  });
  const TraceEndStatus& end = trace.end();
  dump += end.Describe();
  const std::string error = end.ErrorLine(g_path);
  FUZZ_CHECK(end.damaged() == !error.empty(), error);
  if (end.damaged()) CheckErrorLine(error);
  FUZZ_CHECK(trace.packet_count() == framed_packets, "TraceFile and TraceReader disagree");
  decoded.dump_exit = end.damaged() ? kExitBadInput : kExitOk;

  absl::StatusOr<SortedTrace> sorted = ReadMemoryEventsBySeq(g_path);
  FUZZ_CHECK(sorted.ok(), "opened once, not twice");
  const std::vector<MemoryEvent>& events = sorted->events;
  FUZZ_CHECK(events.size() == trace.memory_event_count(), "memory events");

  (void)FormatEventCounts(CountEvents(events));
  Replay replay;
  for (const MemoryEvent& event : events) replay.Add(event);
  for (const PlaceUsage& place : replay.Places()) {
    (void)PlaceName(place.place, trace);
    FUZZ_CHECK(place.peak_bytes >= place.live.bytes, "live above the peak");
  }
  uint64_t live = 0;
  replay.ForEachLive([&](const LiveAllocation& allocation) { live += allocation.size; });
  (void)live;

  const OomReport ooms = AnalyzeOoms(events);
  for (const OomFailure& failure : ooms.failures) {
    bool enough = false;
    (void)SitesThatWouldHaveMadeRoom(failure, &enough);
  }
  (void)AnalyzeGrowth(events, GrowthOptions{});
  GrowthOptions marker;
  marker.is_marker = [](uint64_t stack_id) { return stack_id % 3 == 1; };
  (void)AnalyzeGrowth(events, marker);

  decoded.symbolize = SymbolizingOpensNothing(trace);
  if (decoded.symbolize) Symbolize(trace, stack_ids);
  absl::StatusOr<AllocatorReplayResult> modelled =
      ReplayThroughAllocator(g_path, AllocatorKind::kNative, uint64_t{1} << 30);
  FUZZ_CHECK(modelled.ok(), "opened once, not twice");
  decoded.mode = modelled->mode;
  return decoded;
}

// What `whatif --allocator KIND` must exit with: 2 for a damaged trace, for one recorded under
// PyTorch's caching allocator (only segments) and for a plain program under a model of PyTorch's
// allocator; else 0 (fits) or 1 (runs out): -1 here.
int ExpectedWhatif(const Decoded& decoded, const std::string& allocator) {
  if (decoded.dump_exit == kExitBadInput || decoded.mode == SummaryMode::kSegments) {
    return kExitBadInput;
  }
  if (decoded.mode == SummaryMode::kPlain && allocator != "async") return kExitBadInput;
  return -1;
}

// `expected` -1: a verdict, 0 (pass) or 1 (fail); else exactly that.
void ExpectExit(int exit, int expected, const std::string& command) {
  if (expected == -1) {
    FUZZ_CHECK(exit == kExitOk || exit == kExitCheckFailed, command + ": " + std::to_string(exit));
    return;
  }
  FUZZ_CHECK(exit == expected, command + " exited " + std::to_string(exit) + ", expected " +
                                   std::to_string(expected));
}

// The commands that show call sites, so symbolize (see the top of the file): `dump --symbolize`,
// `report` with every section, `whatif` under each allocator, `view`, `export` in every format.
void RunSymbolizingCommands(const Decoded& decoded) {
  const int expected = decoded.dump_exit;
  ExpectExit(RunDump({"--symbolize", g_path}), expected, "dump --symbolize");
  ExpectExit(RunReport({"--peak", "--leaks", "--oom", "--growth", "--summary", "--fragmentation",
                        "--kernels", "--top", "3", g_path}),
             expected, "report");
  ExpectExit(
      RunReport({"--json", "--peak", "--leaks", "--oom", "--growth", "--summary", "--fragmentation",
                 "--kernels", "--iteration-marker", "a", "--top", "0", g_path}),
      expected, "report --json");
  for (const std::string allocator : {"native", "expandable", "async"}) {
    ExpectExit(RunWhatif({"--device-memory", "64MiB", "--allocator", allocator, g_path}),
               ExpectedWhatif(decoded, allocator), "whatif --allocator " + allocator);
  }
  ExpectExit(RunWhatif({"--device-memory", "1GiB", "--allocator", "async", "--json", g_path}),
             ExpectedWhatif(decoded, "async"), "whatif --json");
  ExpectExit(RunView({"-o", "-", g_path}), expected, "view");
  for (const std::string format : {"memory-viz", "perfetto"}) {
    ExpectExit(RunExport({"--format", format, "-o", "-", g_path}), expected, "export " + format);
  }
  for (const std::string format : {"folded", "speedscope"}) {
    for (const std::string what : {"peak", "leaks"}) {
      ExpectExit(RunExport({"--format", format, "--what", what, "-o", "-", g_path}), expected,
                 "export " + format + " --what " + what);
    }
  }
}

// Stage 5: the commands, on the same file, must agree with what the libraries said about it.
void RunCommands(const Decoded& decoded) {
  const int expected = decoded.dump_exit;
  ExpectExit(RunDump({g_path}), expected, "dump");
  ExpectExit(RunDump({"--counts", g_path}), expected, "dump --counts");
  ExpectExit(RunCheck({"--max-peak", "1MiB", "--no-leaks", g_path}),
             expected == kExitOk ? -1 : expected, "check");
  // The others symbolize once the trace opens (see the top of the file).
  if (decoded.opened && !decoded.symbolize) return;
  RunSymbolizingCommands(decoded);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  unsetenv("GPUMEM_SYMBOL_PATH");  // the symbolizer must open nothing (see the top)
  struct stat info;
  const std::string dir =
      stat("/dev/shm", &info) == 0 && S_ISDIR(info.st_mode) ? "/dev/shm" : "/tmp";
  g_path = dir + "/gpumem-fuzz-" + std::to_string(getpid()) + ".trace";
  RemoveStaleInputFiles(dir);
  // The commands print their reports on stdout: not wanted here (libFuzzer writes to stderr).
  const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    std::fflush(stdout);
    dup2(null, STDOUT_FILENO);
    close(null);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  WriteInput(data, size);
  RunCommands(Decode(FramePackets()));
  return 0;
}
