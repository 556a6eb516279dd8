// Byte sizes as the reports print them and as budgets are given on the command line, and the
// arithmetic the analyses do on sizes a trace gives: the largest allocation that can have
// succeeded, and totals that saturate instead of wrapping (report/README.md, "Impossible sizes").
#ifndef GPUMEM_REPORT_FORMAT_SIZES_H_
#define GPUMEM_REPORT_FORMAT_SIZES_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpumem::report {

// The largest allocation that can have succeeded: 2^48 bytes (256 TiB), as much as the whole
// virtual address space of a process on x86-64 or arm64 Linux (47 or 48 bits) and over a thousand
// times the memory of any GPU. A recorded allocation of more is damage or a crafted trace: every
// analysis leaves it out, and the replay counts it as an anomaly (report/trace/event_stream.h).
// Below it, 65536 allocations live at once are needed for a total to reach 2^64.
inline constexpr uint64_t kMaxAllocationBytes = uint64_t{1} << 48;

// a + b, or the largest uint64_t where the sum does not fit: totals of bytes saturate, never wrap.
inline uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<uint64_t>::max() : sum;
}

// `bytes` to the nearest whole byte, within 0 .. 2^64 - 1 (converting a double at or past 2^64
// to an integer is undefined).
inline uint64_t RoundToBytes(double bytes) {
  if (!(bytes > 0)) return 0;
  if (bytes >= 18446744073709551616.0) return std::numeric_limits<uint64_t>::max();
  // The largest double below 2^64 is 2^64 - 2048: adding 0.5 cannot reach 2^64.
  return static_cast<uint64_t>(bytes + 0.5);
}

// a * b, or the largest uint64_t where the product does not fit.
inline uint64_t SaturatingMultiply(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? std::numeric_limits<uint64_t>::max() : product;
}

// "512 B", "4.00 KiB", "56.00 MiB", "1.50 GiB" (binary units, two decimals).
std::string FormatBytes(uint64_t bytes);

// "1 allocation", "2 allocations": `count` and the word that goes with it.
std::string Plural(uint64_t count, const char* one, const char* many);

// "1234", "512B", "4KiB", "1.5 GiB", "8G", "6GB": a number (decimals allowed with a unit) with an
// optional unit B, KiB, MiB, GiB, TiB or K, M, G, T (powers of 1024) or KB, MB, GB, TB (powers of
// 1000).
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_FORMAT_SIZES_H_
