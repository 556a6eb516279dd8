// How gpumem shows text that a traced program handed over: argv, the environment, paths, thread,
// kernel, device and function names. The trace keeps them as the bytes they were (core/trace.proto
// stores them as `bytes`): a Linux path or a thread name the kernel cut at 15 bytes need not be
// UTF-8. Every output shows them through AppendEscaped, in the style its format needs; valid
// UTF-8 is kept as it is.
#ifndef GPUMEM_REPORT_FORMAT_PRINTABLE_H_
#define GPUMEM_REPORT_FORMAT_PRINTABLE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gpumem::report {

enum class TextEscape {
  // Text output: each byte that is not part of valid UTF-8 as \xNN; newline, tab and carriage
  // return as \n, \t, \r, other control characters as \xNN (C1 controls: \u0080..\u009f), so a
  // name cannot start a line or drive the terminal. Backslashes stay as they are: escaping text
  // already escaped changes nothing.
  kText,
  // kText, with " and \ escaped too: a quoted field that reads back unambiguously (gpumem dump).
  kQuoted,
  // The inside of a JSON string: ", \ and control characters as JSON escapes, each byte that is not
  // part of valid UTF-8 as the text \xNN (`\\xNN` in the JSON source), so the JSON is valid UTF-8.
  kJson,
  // Each byte that is not part of valid UTF-8 as the text \xNN, nothing else changed: a Python str
  // (the memory-viz pickle), which must be valid UTF-8.
  kUtf8,
};

// Appends `bytes` to `out`, escaped in `style`.
void AppendEscaped(absl::string_view bytes, TextEscape style, std::string* out);

// `bytes` escaped for text output (TextEscape::kText).
std::string Printable(absl::string_view bytes);

// `word` as one POSIX shell word: as it is when made only of characters a shell leaves alone
// ([A-Za-z0-9_./=:,+@%-]), else in single quotes (a quote inside as '\''), so a command gpumem
// prints can be pasted back.
std::string ShellWord(absl::string_view word);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_FORMAT_PRINTABLE_H_
