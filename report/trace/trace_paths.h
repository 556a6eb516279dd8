// Command-line arguments naming traces: files, or directories holding one trace per process (what
// `gpumem record -o DIR` and multi-process programs such as torchrun produce).
#ifndef GPUMEM_REPORT_TRACE_TRACE_PATHS_H_
#define GPUMEM_REPORT_TRACE_TRACE_PATHS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpumem::report {

// Each argument as given if it is not a directory (opening it reports any problem); a directory
// becomes every `*.trace` file directly inside it, sorted by name. A directory without any is an
// error naming it.
absl::StatusOr<std::vector<std::string>> ExpandTracePaths(const std::vector<std::string>& args);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_TRACE_TRACE_PATHS_H_
