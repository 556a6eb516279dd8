// One trace symbolized in place (or into a copy): every return address of its stacks resolved with
// the binaries on this machine and appended as SymbolizedFrame packets, and a Symbolization packet
// naming the modules looked at, so that the trace reads the same (function, file, line) where the
// binaries are gone and reports never open them. Shared by `gpumem symbolize` and by `gpumem
// record`, which symbolizes its traces as soon as the program ends.
#ifndef GPUMEM_REPORT_CLI_SYMBOLIZE_FILE_H_
#define GPUMEM_REPORT_CLI_SYMBOLIZE_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace gpumem::report {

// What symbolizing one trace did.
struct SymbolizeCounts {
  uint64_t frames = 0;      // return addresses resolved here and appended
  uint64_t already = 0;     // in the trace already
  uint64_t unresolved = 0;  // no binary here names their function
};

// Symbolizes the trace at `path` into `target` (`path` itself: in place). The new file is written
// aside, flushed and renamed over `target` keeping the mode of `path`: on any failure (a full
// disk, a file-size limit, a damaged trace) `target` is left byte for byte as it was, and the error
// says so in one line. Nothing is written in place when nothing is new.
absl::StatusOr<SymbolizeCounts> SymbolizeTraceFile(const std::string& path,
                                                   const std::string& target);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_CLI_SYMBOLIZE_FILE_H_
