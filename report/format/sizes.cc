#include "report/format/sizes.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpumem::report {

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.2f %s", value, kUnits[unit]);
}

std::string Plural(uint64_t count, const char* one, const char* many) {
  return absl::StrCat(count, " ", count == 1 ? one : many);
}

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  static constexpr std::pair<const char*, double> kUnits[] = {{"KiB", 1024.0},
                                                              {"MiB", 1024.0 * 1024},
                                                              {"GiB", 1024.0 * 1024 * 1024},
                                                              {"TiB", 1024.0 * 1024 * 1024 * 1024},
                                                              {"KB", 1e3},
                                                              {"MB", 1e6},
                                                              {"GB", 1e9},
                                                              {"TB", 1e12},
                                                              // One letter, as nvidia-smi and
                                                              // ulimit mean it: binary.
                                                              {"K", 1024.0},
                                                              {"M", 1024.0 * 1024},
                                                              {"G", 1024.0 * 1024 * 1024},
                                                              {"T", 1024.0 * 1024 * 1024 * 1024},
                                                              {"B", 1.0}};
  const absl::string_view original = text;
  text = absl::StripAsciiWhitespace(text);
  double multiplier = 1;
  bool unit_given = false;
  for (const auto& [suffix, factor] : kUnits) {
    if (absl::EndsWith(text, suffix)) {
      text = absl::StripTrailingAsciiWhitespace(text.substr(0, text.size() - strlen(suffix)));
      multiplier = factor;
      unit_given = true;
      break;
    }
  }
  auto invalid = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid size '", original,
                     "' (expected bytes or a number with KiB, MiB, GiB, K, M, G, KB, MB, GB)"));
  };
  if (text.empty() || !(absl::ascii_isdigit(text.front()))) return invalid();
  uint64_t whole = 0;
  if (absl::SimpleAtoi(text, &whole)) {
    const auto factor = static_cast<uint64_t>(multiplier);
    if (whole > std::numeric_limits<uint64_t>::max() / factor) return invalid();
    return whole * factor;
  }
  double value = 0;
  if (!unit_given || text.find_first_not_of("0123456789.") != absl::string_view::npos ||
      !absl::SimpleAtod(text, &value)) {
    return invalid();
  }
  const double bytes = value * multiplier;
  if (!(bytes >= 0) || bytes >= 18446744073709551615.0) return invalid();
  return static_cast<uint64_t>(bytes + 0.5);
}

}  // namespace gpumem::report
