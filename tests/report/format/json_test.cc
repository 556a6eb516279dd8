// report/format/json.h: JSON strings of any bytes a trace holds.
#include "report/format/json.h"

#include <string>

#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

TEST(JsonTest, StringIsQuotedWithItsSpecialCharactersEscaped) {
  EXPECT_EQ(JsonString(""), "\"\"");
  EXPECT_EQ(JsonString("cudaMalloc"), "\"cudaMalloc\"");
  EXPECT_EQ(JsonString("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(JsonString("C:\\path"), "\"C:\\\\path\"");
  EXPECT_EQ(JsonString("a\nb\tc\r"), "\"a\\nb\\tc\\r\"");
}

TEST(JsonTest, ControlCharactersAreUnicodeEscapes) {
  EXPECT_EQ(JsonString(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonString(std::string("a\0b", 3)), "\"a\\u0000b\"");
}

TEST(JsonTest, Utf8StaysAndOtherBytesAreTextEscapes) {
  EXPECT_EQ(JsonString("函数 αβγ"), "\"函数 αβγ\"");
  // \xNN as text: the backslash itself escaped, so a JSON reader gets the four characters back.
  EXPECT_EQ(JsonString("lib\xfe.so"), "\"lib\\\\xfe.so\"");
}

}  // namespace
}  // namespace gpumem::report
