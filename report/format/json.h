// JSON text for the reports' --json output, which is written by hand (no JSON library).
#ifndef GPUMEM_REPORT_FORMAT_JSON_H_
#define GPUMEM_REPORT_FORMAT_JSON_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gpumem::report {

// `text` as a quoted JSON string, with quotes, backslashes and control characters escaped, and each
// byte that is not part of valid UTF-8 as the text \xNN (report/format/printable.h): the JSON is
// valid UTF-8 whatever bytes a trace holds.
std::string JsonString(absl::string_view text);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_FORMAT_JSON_H_
