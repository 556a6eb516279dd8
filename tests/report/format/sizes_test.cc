// report/format/sizes.h: sizes as printed and parsed, and the saturating arithmetic on sizes.
#include "report/format/sizes.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

TEST(SizesTest, ParseSize) {
  const std::vector<std::pair<std::string, uint64_t>> valid = {
      {"0", 0},
      {"1234", 1234},
      {"512B", 512},
      {"4KiB", 4096},
      {"2 MiB", 2 * kMiB},
      {"6GiB", uint64_t{6} << 30},
      {"1.5GiB", uint64_t{3} << 29},
      {"1TiB", uint64_t{1} << 40},
      {"8G", uint64_t{8} << 30},  // one letter: binary
      {"1.5G", uint64_t{3} << 29},
      {"512M", uint64_t{512} << 20},
      {"64K", 64 * 1024},
      {"6GB", 6'000'000'000},
      {"1.5MB", 1'500'000},
      {"10KB", 10'000},
      {"18446744073709551615", UINT64_MAX},
  };
  for (const auto& [text, bytes] : valid) {
    absl::StatusOr<uint64_t> parsed = ParseSize(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(*parsed, bytes) << text;
  }
  for (const char* text :
       {"", "GiB", "-1", "1.5", "abc", "10XB", "1e3", "5 GiB extra", "99999999999999999999GiB",
        "18446744073709551616", "1..5MiB", "G", "8X"}) {
    EXPECT_FALSE(ParseSize(text).ok()) << text;
  }
}

TEST(SizesTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.00 KiB");
  EXPECT_EQ(FormatBytes(58720256), "56.00 MiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 29), "1.50 GiB");
}

TEST(SizesTest, FormatBytesTakesTheLargestUnitBelowTheSize) {
  EXPECT_EQ(FormatBytes(kMiB - 1), "1024.00 KiB");  // rounded, still in KiB
  EXPECT_EQ(FormatBytes(uint64_t{1} << 40), "1.00 TiB");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
}

TEST(SizesTest, PluralTakesTheWordThatGoesWithTheCount) {
  EXPECT_EQ(Plural(0, "allocation", "allocations"), "0 allocations");
  EXPECT_EQ(Plural(1, "allocation", "allocations"), "1 allocation");
  EXPECT_EQ(Plural(2, "process", "processes"), "2 processes");
  EXPECT_EQ(Plural(kMax, "byte", "bytes"), "18446744073709551615 bytes");
}

TEST(SizesTest, TotalsSaturateInsteadOfWrapping) {
  EXPECT_EQ(SaturatingAdd(2, 3), 5u);
  EXPECT_EQ(SaturatingAdd(kMax - 1, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMax, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMaxAllocationBytes, kMax - kMaxAllocationBytes + 1), kMax);
  EXPECT_EQ(SaturatingMultiply(3, 7), 21u);
  EXPECT_EQ(SaturatingMultiply(uint64_t{1} << 32, uint64_t{1} << 31), uint64_t{1} << 63);
  EXPECT_EQ(SaturatingMultiply(uint64_t{1} << 32, uint64_t{1} << 32), kMax);
  EXPECT_EQ(SaturatingMultiply(0, kMax), 0u);
}

TEST(SizesTest, RoundToBytesStaysWithinUint64) {
  EXPECT_EQ(RoundToBytes(0.0), 0u);
  EXPECT_EQ(RoundToBytes(-5.0), 0u);
  EXPECT_EQ(RoundToBytes(std::numeric_limits<double>::quiet_NaN()), 0u);
  EXPECT_EQ(RoundToBytes(2.4), 2u);
  EXPECT_EQ(RoundToBytes(2.5), 3u);
  EXPECT_EQ(RoundToBytes(1e30), kMax);
  EXPECT_EQ(RoundToBytes(std::numeric_limits<double>::infinity()), kMax);
  // The largest double below 2^64 converts exactly.
  EXPECT_EQ(RoundToBytes(18446744073709549568.0), uint64_t{18446744073709549568u});
}

}  // namespace
}  // namespace gpumem::report
