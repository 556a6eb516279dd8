// report/format/printable.h: how text a traced program handed over (any bytes) is shown in each
// output.
#include "report/format/printable.h"

#include <gtest/gtest.h>

#include <string>

#include "report/format/json.h"

namespace gpumem::report {
namespace {

std::string Escaped(const std::string& bytes, TextEscape style) {
  std::string out;
  AppendEscaped(bytes, style, &out);
  return out;
}

TEST(Printable, ValidUtf8IsKeptAsItIs) {
  EXPECT_EQ(Printable("plain/path.so"), "plain/path.so");
  EXPECT_EQ(Printable("αβγ ✓ 函数 \xF0\x9F\x98\x80"), "αβγ ✓ 函数 \xF0\x9F\x98\x80");
  EXPECT_EQ(Printable(""), "");
}

TEST(Printable, EachByteThatIsNotUtf8IsAnEscape) {
  EXPECT_EQ(Printable("a\xff"
                      "b"),
            "a\\xffb");
  EXPECT_EQ(Printable("ααααααα\xce"), "ααααααα\\xce");      // a thread name cut at 15 bytes
  EXPECT_EQ(Printable("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(Printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(Printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(Printable("\x80x"), "\\x80x");                           // a stray continuation byte
  EXPECT_EQ(Printable("\xe2\x9c x"), "\\xe2\\x9c x");                // cut short, then text again
}

TEST(Printable, ControlCharactersCannotStartALineOrDriveTheTerminal) {
  EXPECT_EQ(Printable("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(Printable(std::string("\x1b[31m\0\x7f", 7)), "\\x1b[31m\\x00\\x7f");
  EXPECT_EQ(Printable("\xc2\x9b"
                      "2J"),
            "\\u009b2J");  // C1 CSI
}

TEST(Printable, EscapingTwiceChangesNothing) {
  const std::string once = Printable("/x\xff/y\n\"z\"\\w");
  EXPECT_EQ(once, "/x\\xff/y\\n\"z\"\\w");
  EXPECT_EQ(Printable(once), once);
}

TEST(Printable, QuotedAlsoEscapesQuotesAndBackslashes) {
  EXPECT_EQ(Escaped("say \"hi\" \\ \xff\n", TextEscape::kQuoted), "say \\\"hi\\\" \\\\ \\xff\\n");
}

TEST(Printable, JsonHoldsTheEscapeAsText) {
  EXPECT_EQ(Escaped("a\xff\"\\\n\x01", TextEscape::kJson), "a\\\\xff\\\"\\\\\\n\\u0001");
  EXPECT_EQ(Escaped("αβγ", TextEscape::kJson), "αβγ");
  // The same string for raw bytes and for text already escaped: JSON says what the text says.
  EXPECT_EQ(JsonString("pl\xffug"), "\"pl\\\\xffug\"");
  EXPECT_EQ(JsonString(Printable("pl\xffug")), JsonString("pl\xffug"));
}

TEST(Printable, Utf8OnlyReplacesWhatIsNotUtf8) {
  EXPECT_EQ(Escaped("a\xff\n\"\\", TextEscape::kUtf8), "a\\xff\n\"\\");
}

TEST(ShellWord, QuotesOnlyWhatTheShellWouldChange) {
  EXPECT_EQ(ShellWord("run/b16.trace"), "run/b16.trace");
  EXPECT_EQ(ShellWord("--lr=1e-3,x+y:z@a%b"), "--lr=1e-3,x+y:z@a%b");
  EXPECT_EQ(ShellWord("my run.trace"), "'my run.trace'");
  EXPECT_EQ(ShellWord("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellWord("$HOME"), "'$HOME'");
  EXPECT_EQ(ShellWord(""), "''");
}

}  // namespace
}  // namespace gpumem::report
