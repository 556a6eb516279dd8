#include "report/format/json.h"

#include "report/format/printable.h"

namespace gpumem::report {

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  AppendEscaped(text, TextEscape::kJson, &out);
  out += "\"";
  return out;
}

}  // namespace gpumem::report
