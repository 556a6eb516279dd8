#include "report/json.h"

#include "report/printable.h"

namespace gpumem::report {

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  AppendEscaped(text, TextEscape::kJson, &out);
  out += "\"";
  return out;
}

}  // namespace gpumem::report
