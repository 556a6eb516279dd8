// Byte sizes as the reports print them and as budgets are given on the command line.
#ifndef GPUMEM_REPORT_SIZES_H_
#define GPUMEM_REPORT_SIZES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpumem::report {

// "512 B", "4.00 KiB", "56.00 MiB", "1.50 GiB" (binary units, two decimals).
std::string FormatBytes(uint64_t bytes);

// "1 allocation", "2 allocations": `count` and the word that goes with it.
std::string Plural(uint64_t count, const char* one, const char* many);

// "1234", "512B", "4KiB", "1.5 GiB", "8G", "6GB": a number (decimals allowed with a unit) with an
// optional unit B, KiB, MiB, GiB, TiB or K, M, G, T (powers of 1024) or KB, MB, GB, TB (powers of
// 1000).
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_SIZES_H_
