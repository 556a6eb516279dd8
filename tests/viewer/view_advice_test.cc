// `gpumem view`'s "What would lower the peak": for a trace recorded at tensor level the page's data
// holds `gpumem advise`'s ranked list (run both against the same --device-memory: the same
// remedies, ranks, peaks, savings, fits and sources, the same verdict); for a trace advise refuses
// (recorded under the caching allocator: only segments) the reason, and the page is still written.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using testing::BuildPath;
using testing::ProgramRun;
using testing::SourcePath;

constexpr char kTensorTrace[] = "samples/traces/train_mlp-async-h100.trace";
constexpr char kSegmentsTrace[] = "samples/traces/train_mlp-default-h100.trace";
constexpr char kDataOpen[] = "<script type=\"application/json\" id=\"gpumem-data\">";

ProgramRun Gpumem(std::vector<std::string> args) {
  args.insert(args.begin(), BuildPath("bin/gpumem"));
  return testing::RunProgram(args, {{"GPUMEM_SYMBOL_PATH", ""}});
}

Struct ParseJson(const std::string& json) {
  Struct parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << ": " << json.substr(0, 200);
  return parsed;
}

// The JSON object at `key` in the JSON the page embeds (page_json.h), parsed. Only that object:
// the whole page's data nests its flame graphs deeper than protobuf's JSON parser goes.
Struct PageObject(const std::string& html, const std::string& key) {
  const size_t data = html.find(kDataOpen);
  const size_t at = html.find("\"" + key + "\":{", data);
  if (data == std::string::npos || at == std::string::npos) {
    ADD_FAILURE() << "no \"" << key << "\" in the page's data";
    return {};
  }
  const size_t begin = at + key.size() + 3;
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < html.size(); ++i) {
    const char c = html[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return ParseJson(html.substr(begin, i + 1 - begin));
    }
  }
  ADD_FAILURE() << "\"" << key << "\" does not end";
  return {};
}

const Value& Field(const Struct& object, const std::string& key) {
  static const Value kMissing;
  const auto found = object.fields().find(key);
  if (found == object.fields().end()) {
    ADD_FAILURE() << "no \"" << key << "\"";
    return kMissing;
  }
  return found->second;
}

// The page's advice section for `trace`, as `gpumem view -o - [--device-memory SIZE]` writes it.
Struct PageAdvice(const std::string& trace, const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"view", "-o", "-"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back(SourcePath(trace));
  const ProgramRun view = Gpumem(args);
  EXPECT_EQ(view.exit_code, 0) << view.err;
  return PageObject(view.out, "advice");
}

Struct AdviseJson(const std::string& trace, const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"advise", "--json"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back(SourcePath(trace));
  const ProgramRun advise = Gpumem(args);
  EXPECT_TRUE(advise.exit_code == 0 || advise.exit_code == 1) << advise.err;
  return ParseJson(advise.out);
}

// The lines under a remedy: "file:line in function" of the user's frame, then "via ..." when
// there is a via line.
void ExpectSiteLines(const google::protobuf::ListValue& lines, const Struct& user_frame,
                     const std::string& via) {
  ASSERT_EQ(lines.values_size(), via.empty() ? 1 : 2);
  const std::string& user_line = lines.values(0).string_value();
  const std::string file = Field(user_frame, "file").string_value();
  EXPECT_TRUE(
      absl::StartsWith(user_line, absl::StrCat(file.substr(file.rfind('/') + 1), ":",
                                               Field(user_frame, "line").number_value(), " in ")))
      << user_line;
  EXPECT_TRUE(absl::EndsWith(user_line, Field(user_frame, "function").string_value())) << user_line;
  if (!via.empty()) {
    EXPECT_EQ(lines.values(1).string_value(), "via " + via);
  }
}

// The page's advice is advise's: the verdict and every remedy, in its rank.
void ExpectPageShowsAdvise(const std::string& trace, const std::vector<std::string>& flags) {
  const Struct page = PageAdvice(trace, flags);
  const Struct advise = AdviseJson(trace, flags);
  EXPECT_EQ(Field(page, "refused").string_value(), "");
  for (const char* key : {"device_memory", "device_memory_recorded", "allocator", "peak", "fits"}) {
    EXPECT_EQ(Field(page, key).DebugString(), Field(advise, key).DebugString()) << key;
  }
  const auto& shown = Field(page, "remedies").list_value().values();
  const auto& ranked = Field(advise, "remedies").list_value().values();
  ASSERT_EQ(shown.size(), ranked.size());
  ASSERT_GT(shown.size(), 0);
  for (int i = 0; i < shown.size(); ++i) {
    SCOPED_TRACE(i);
    const Struct& remedy = shown[i].struct_value();
    const Struct& expected = ranked[i].struct_value();
    EXPECT_EQ(Field(remedy, "rank").number_value(), i + 1);
    for (const char* key :
         {"rank", "kind", "change", "allocator", "peak", "saving", "fits", "source"}) {
      EXPECT_EQ(Field(remedy, key).DebugString(), Field(expected, key).DebugString()) << key;
    }
    // A remedy with a call site names the user's line and the via line, as the text does.
    if (Field(expected, "kind").string_value() == "allocator") continue;
    EXPECT_NE(Field(remedy, "site_heading").string_value(), "");
    ExpectSiteLines(Field(remedy, "site").list_value(),
                    Field(expected, "user_frame").struct_value(),
                    Field(expected, "via").string_value());
    const std::string holder =
        Field(expected, "holder").has_null_value() ? "" : Field(expected, "holder").string_value();
    const auto& holder_lines = Field(remedy, "holder").list_value().values();
    EXPECT_EQ(holder_lines.empty() ? "" : holder_lines[0].string_value(), holder);
  }
}

TEST(ViewAdviceTest, TensorTraceShowsAdvisesRankedListForTheRecordedDevice) {
  ExpectPageShowsAdvise(kTensorTrace, {});
}

// A growing call site (leak_loop keeps 4 MiB more each iteration) as advise ranks it.
TEST(ViewAdviceTest, GrowingSiteShowsAdvisesRemedy) {
  ExpectPageShowsAdvise("samples/traces/leak_loop-h200.trace", {});
  const Struct page = PageAdvice("samples/traces/leak_loop-h200.trace", {});
  const auto& remedies = Field(page, "remedies").list_value().values();
  ASSERT_EQ(remedies.size(), 1);
  const Struct& remedy = remedies[0].struct_value();
  EXPECT_EQ(Field(remedy, "kind").string_value(), "release_growing");
  EXPECT_EQ(Field(remedy, "site_heading").string_value(),
            "4.00 MiB more each iteration, allocated at:");
}

TEST(ViewAdviceTest, TensorTraceShowsAdvisesRankedListForAnotherDeviceMemory) {
  ExpectPageShowsAdvise(kTensorTrace, {"--device-memory", "80MiB"});
  // Against 80 MiB the run does not fit, and the page says so in the text's words.
  const Struct page = PageAdvice(kTensorTrace, {"--device-memory", "80MiB"});
  EXPECT_FALSE(Field(page, "fits").bool_value());
  EXPECT_EQ(Field(page, "device_memory").number_value(), 80 << 20);
  const auto& verdict = Field(page, "verdict").list_value().values();
  ASSERT_EQ(verdict.size(), 2);
  EXPECT_TRUE(absl::StartsWith(verdict[0].string_value(), "device memory: 80.00 MiB"));
  EXPECT_TRUE(absl::StrContains(verdict[1].string_value(), "DOES NOT FIT"));
  // One trace: what a second recording adds, and how to make it.
  const auto& second = Field(page, "second_recording").list_value().values();
  ASSERT_EQ(second.size(), 3);
  EXPECT_TRUE(absl::StrContains(second[0].string_value(), "largest batch that fits"));
}

TEST(ViewAdviceTest, SegmentsTraceGetsTheReasonAndThePage) {
  const Struct page = PageAdvice(kSegmentsTrace, {});
  EXPECT_TRUE(
      absl::StrContains(Field(page, "refused").string_value(), "recorded under PyTorch's caching"))
      << Field(page, "refused").string_value();
  EXPECT_EQ(Field(page, "remedies").list_value().values_size(), 0);
}

}  // namespace
}  // namespace gpumem
