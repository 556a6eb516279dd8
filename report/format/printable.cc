#include "report/format/printable.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"

namespace gpumem::report {
namespace {

// The length of the valid UTF-8 sequence at text[i], with its code point in *code; 0 when the
// byte there does not start one (a stray continuation byte, a sequence cut short, an overlong
// form, a surrogate, a value past U+10FFFF).
size_t Utf8SequenceLength(absl::string_view text, size_t i, uint32_t* code) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  *code = lead;
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t min = 0;
  if ((lead & 0xe0) == 0xc0) {
    length = 2;
    min = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3;
    min = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  uint32_t value = lead & (0x7f >> length);
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    value = (value << 6) | (byte(i + k) & 0x3f);
  }
  if (value < min || (value >= 0xd800 && value <= 0xdfff) || value > 0x10ffff) return 0;
  *code = value;
  return length;
}

// Line breaks and tabs, escaped alike in text and JSON; nullptr for any other character.
const char* ShortEscape(uint32_t code) {
  switch (code) {
    case '\n':
      return "\\n";
    case '\t':
      return "\\t";
    case '\r':
      return "\\r";
    default:
      return nullptr;
  }
}

void AppendJsonCharacter(uint32_t code, absl::string_view encoded, std::string* out) {
  if (code == '"' || code == '\\') {
    out->push_back('\\');
    out->push_back(static_cast<char>(code));
  } else if (const char* escape = ShortEscape(code)) {
    *out += escape;
  } else if (code < 0x20) {
    absl::StrAppendFormat(out, "\\u%04x", code);
  } else {
    out->append(encoded.data(), encoded.size());
  }
}

void AppendTextCharacter(uint32_t code, absl::string_view encoded, bool quoted, std::string* out) {
  if (quoted && (code == '"' || code == '\\')) {
    out->push_back('\\');
    out->push_back(static_cast<char>(code));
  } else if (const char* escape = ShortEscape(code)) {
    *out += escape;
  } else if (code < 0x20 || code == 0x7f) {
    absl::StrAppendFormat(out, "\\x%02x", code);
  } else if (code >= 0x80 && code < 0xa0) {
    absl::StrAppendFormat(out, "\\u%04x", code);
  } else {
    out->append(encoded.data(), encoded.size());
  }
}

// One character of valid UTF-8: code point `code`, encoded as `encoded`.
void AppendCharacter(uint32_t code, absl::string_view encoded, TextEscape style, std::string* out) {
  switch (style) {
    case TextEscape::kText:
    case TextEscape::kQuoted:
      AppendTextCharacter(code, encoded, style == TextEscape::kQuoted, out);
      return;
    case TextEscape::kJson:
      AppendJsonCharacter(code, encoded, out);
      return;
    case TextEscape::kUtf8:
      out->append(encoded.data(), encoded.size());
      return;
  }
}

}  // namespace

void AppendEscaped(absl::string_view bytes, TextEscape style, std::string* out) {
  for (size_t i = 0; i < bytes.size();) {
    uint32_t code = 0;
    const size_t length = Utf8SequenceLength(bytes, i, &code);
    if (length == 0) {
      // The backslash of \xNN is itself escaped in JSON: the string holds the text \xNN. Two
      // calls: absl checks a constant format string at compile time, and a ternary is not one.
      const unsigned char stray = static_cast<unsigned char>(bytes[i]);
      if (style == TextEscape::kJson) {
        absl::StrAppendFormat(out, "\\\\x%02x", stray);
      } else {
        absl::StrAppendFormat(out, "\\x%02x", stray);
      }
      ++i;
      continue;
    }
    AppendCharacter(code, bytes.substr(i, length), style, out);
    i += length;
  }
}

std::string Printable(absl::string_view bytes) {
  std::string out;
  AppendEscaped(bytes, TextEscape::kText, &out);
  return out;
}

std::string ShellWord(absl::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return absl::ascii_isalnum(c) || std::strchr("_-./+:=@%,", c) != nullptr;
  });
  if (plain) return std::string(word);
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace gpumem::report
