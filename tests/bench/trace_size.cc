// trace_size TRACE...: how many bytes a trace spends on each memory or launch event, over the
// whole file and over its second half alone (events whose packet starts at or after the middle
// byte: the steady state a longer run converges to, past the start-up's stacks, modules and
// first events). Counts what the reader expands, references included (trace_size.sh).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "report/trace/trace_file.h"

namespace {

struct Region {
  uint64_t events = 0;
  uint64_t references = 0;
  uint64_t full_bytes = 0;       // of the events written in full, their messages
  uint64_t reference_bytes = 0;  // of the references, theirs
};

int Measure(const std::string& path) {
  auto opened = gpumem::report::TraceFile::Open(path);
  if (!opened.ok()) {
    fprintf(stderr, "trace_size: %s\n", std::string(opened.status().message()).c_str());
    return 2;
  }
  gpumem::report::TraceFile& trace = **opened;
  const uint64_t bytes = trace.file_size();
  const uint64_t middle = bytes / 2;
  Region whole;
  Region second_half;
  trace.ReadPackets(
      [&](const gpumem::report::PacketPosition& position, const gpumem::TracePacket& packet) {
        if (!packet.has_memory() && !packet.has_launch()) return;
        for (Region* region : {&whole, position.offset >= middle ? &second_half : nullptr}) {
          if (region == nullptr) continue;
          ++region->events;
          region->references += position.event_ref;
          (position.event_ref ? region->reference_bytes : region->full_bytes) += position.size;
        }
      });
  const auto per_event = [](uint64_t size, uint64_t events) {
    return events == 0 ? 0.0 : static_cast<double>(size) / static_cast<double>(events);
  };
  printf(
      "%s: format %u, %llu events (%llu references), %llu bytes, %.1f bytes an event; "
      "second half: %llu events (%llu references), %llu bytes, %.1f bytes an event\n",
      path.c_str(), trace.header().format_version(), static_cast<unsigned long long>(whole.events),
      static_cast<unsigned long long>(whole.references), static_cast<unsigned long long>(bytes),
      per_event(bytes, whole.events), static_cast<unsigned long long>(second_half.events),
      static_cast<unsigned long long>(second_half.references),
      static_cast<unsigned long long>(bytes - middle),
      per_event(bytes - middle, second_half.events));
  // What the events written in full cost beyond references (their framing left out).
  const uint64_t full = whole.events - whole.references;
  printf("  in full: %llu events, %.1f bytes each; references %.1f bytes each\n",
         static_cast<unsigned long long>(full), per_event(whole.full_bytes, full),
         per_event(whole.reference_bytes, whole.references));
  return trace.end().damaged() ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: trace_size TRACE...\n");
    return 2;
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) status = std::max(status, Measure(argv[i]));
  return status;
}
