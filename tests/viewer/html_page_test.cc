// Escaping: strings from a trace (C++ template names, paths full of < > & and quotes, a function
// called </script>) reach the page only inside the embedded JSON, escaped so they can neither end
// its <script> element nor open a comment, and the template itself cannot be broken out of.
#include "viewer/html_page.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "viewer/page_json.h"

namespace gpumem::viewer {
namespace {

constexpr char kDataOpen[] = "<script type=\"application/json\" id=\"gpumem-data\">";

const char* const kHostile[] = {
    "std::vector<std::pair<int,float>>::push_back(std::pair<int,float>&&)",
    "</script><script>alert(1)</script>",
    "<!-- comment",
    "/tmp/a<b>&c\"d'e.cc",
    "line\xE2\x80\xA8separator\xE2\x80\xA9paragraph",
};

PageData HostilePage() {
  PageData page;
  page.trace_path = "/traces/<run>&\"x\".trace";
  page.host = "<host>";
  page.command_line = {"python3", "train.py", "--tag=</script>"};
  page.summary = "<b>table</b>";
  for (const char* text : kHostile) {
    page.sites.push_back({text, text, {text, std::string(text) + " (" + text + ":1)"}, text});
  }
  PagePlace& place = page.places.emplace_back();
  place.name = "device 0 (<GPU> & \"friends\")";
  place.peak_flame.name = "all";
  place.peak_flame.children.push_back({kHostile[1], 1, 1, {}});
  return page;
}

size_t Count(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

TEST(HtmlPageTest, EmbedSafeJsonEscapesWhatCouldEndTheScript) {
  EXPECT_EQ(EmbedSafeJson(R"({"f":"a</script>b<!--c&d"})"),
            R"({"f":"a\u003c/script\u003eb\u003c!--c\u0026d"})");
  EXPECT_EQ(EmbedSafeJson("\"a\xE2\x80\xA8"
                          "b\xE2\x80\xA9\""),
            R"("a\u2028b\u2029")");
  EXPECT_EQ(EmbedSafeJson("\"\xE2\x82\xAC\""), "\"\xE2\x82\xAC\"");  // other UTF-8 stays as is
}

TEST(HtmlPageTest, TraceStringsAppearOnlyEscapedInsideTheJson) {
  const PageData page = HostilePage();
  const std::string html = RenderPage(page);
  const size_t open = html.find(kDataOpen);
  ASSERT_NE(open, std::string::npos);
  const size_t begin = open + std::string(kDataOpen).size();
  const size_t end = html.find("</script>", begin);
  ASSERT_NE(end, std::string::npos);
  const std::string json = html.substr(begin, end - begin);
  // The data is all of it: the element ends where the JSON ends.
  EXPECT_EQ(json, PageJson(page));
  EXPECT_EQ(json.find_first_of("<>&"), std::string::npos);
  EXPECT_FALSE(absl::StrContains(json, "\xE2\x80\xA8"));
  EXPECT_TRUE(absl::StrContains(json, R"(\u003c/script\u003e\u003cscript\u003ealert(1))"));
  EXPECT_TRUE(absl::StrContains(json, R"(std::vector\u003cstd::pair\u003cint,float\u003e\u003e)"));
  EXPECT_TRUE(absl::StrContains(json, R"(/tmp/a\u003cb\u003e\u0026c\"d'e.cc)"));
  // Outside the JSON the page is the template, whatever the data: nothing from the trace there.
  const std::string outside = html.substr(0, begin) + html.substr(end);
  EXPECT_EQ(outside, RenderPageWithJson(""));
  for (const char* text : kHostile) EXPECT_FALSE(absl::StrContains(outside, text)) << text;
  EXPECT_FALSE(absl::StrContains(outside, "alert(1)"));
  // Exactly the template's two script elements, and no comment opened.
  EXPECT_EQ(Count(html, "</script"), 2u);
  EXPECT_EQ(Count(html, "<script"), 2u);
  EXPECT_FALSE(absl::StrContains(html, "<!--"));
}

TEST(HtmlPageTest, TemplateCannotBeBrokenOutOf) {
  // The script and stylesheet are pasted into <script> and <style>: they must not close them.
  EXPECT_FALSE(absl::StrContains(TemplateJs(), "</script"));
  EXPECT_FALSE(absl::StrContains(TemplateJs(), "<!--"));
  EXPECT_FALSE(absl::StrContains(TemplateCss(), "</style"));
  // Each placeholder once; the page has no network reference.
  for (const char* placeholder : {"/*GPUMEM_CSS*/", "/*GPUMEM_JS*/", "/*GPUMEM_DATA*/"}) {
    EXPECT_EQ(Count(std::string(TemplateHtml()), placeholder), 1u) << placeholder;
  }
  const std::string html = RenderPageWithJson("{}");
  for (const char* remote : {"http://", "https://", "//cdn", "src=\"", "href=\""}) {
    EXPECT_FALSE(absl::StrContains(html, remote)) << remote;
  }
  // Strings from the data are shown with textContent, never parsed as HTML.
  for (const char* sink : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"}) {
    EXPECT_FALSE(absl::StrContains(TemplateJs(), sink)) << sink;
  }
}

}  // namespace
}  // namespace gpumem::viewer
