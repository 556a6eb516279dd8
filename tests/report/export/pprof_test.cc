// report/export/pprof.h: the pprof profile of the bundled traces and of a synthetic one, read back
// with libprotobuf through our own declaration of pprof's published fields
// (published_formats.proto), after gunzipping it with zlib: every index valid, and the sums of
// each sample type equal to what the report's replay computes for the same trace.
#include "report/export/pprof.h"

#include <zlib.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "published_formats.pb.h"
#include "report/export/folded.h"
#include "report/replay/replay.h"
#include "tests/support/export_traces.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using published::Profile;

std::string Gunzip(const std::string& compressed) {
  z_stream stream = {};
  EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);  // gzip only
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buffer[1 << 16];
  int result = Z_OK;
  while (result == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    result = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
  }
  EXPECT_EQ(result, Z_STREAM_END);
  EXPECT_EQ(stream.avail_in, 0u) << "bytes after the gzip member";
  inflateEnd(&stream);
  return out;
}

// The profile of the trace at `path`, exported and read back; the replay that made it.
Profile Exported(const std::string& path, TraceReplay* replay) {
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  std::string gzipped;
  *replay = ExportPprof(*std::move(file), nullptr, &gzipped);
  EXPECT_GT(gzipped.size(), 2u);
  EXPECT_EQ(gzipped.substr(0, 2), "\x1f\x8b");
  Profile profile;
  EXPECT_TRUE(profile.ParseFromString(Gunzip(gzipped)));
  return profile;
}

// Every reference in `profile` points at something that is there, and each thing is there once.
void ExpectValid(const Profile& profile) {
  ASSERT_GT(profile.string_table_size(), 0);
  EXPECT_EQ(profile.string_table(0), "");
  const int64_t strings = profile.string_table_size();
  auto valid_string = [&](int64_t index) { return index >= 0 && index < strings; };
  std::map<std::string, int> seen_strings;
  for (const std::string& text : profile.string_table()) {
    EXPECT_EQ(++seen_strings[text], 1) << "string written twice: " << text;
  }
  std::map<uint64_t, const published::Function*> functions;
  for (const published::Function& function : profile.function()) {
    EXPECT_TRUE(functions.emplace(function.id(), &function).second) << function.id();
    EXPECT_NE(function.id(), 0u);
    EXPECT_TRUE(valid_string(function.name()) && valid_string(function.filename()));
    EXPECT_NE(function.name(), 0) << "a function without a name";
  }
  std::map<uint64_t, bool> mappings;
  for (const published::Mapping& mapping : profile.mapping()) {
    EXPECT_TRUE(mappings.emplace(mapping.id(), true).second) << mapping.id();
    EXPECT_TRUE(valid_string(mapping.filename()) && valid_string(mapping.build_id()));
    EXPECT_LE(mapping.memory_start(), mapping.memory_limit());
  }
  std::map<uint64_t, bool> locations;
  for (const published::Location& location : profile.location()) {
    EXPECT_TRUE(locations.emplace(location.id(), true).second) << location.id();
    EXPECT_TRUE(location.mapping_id() == 0 || mappings.count(location.mapping_id()));
    ASSERT_EQ(location.line_size(), 1);
    EXPECT_TRUE(functions.count(location.line(0).function_id())) << location.id();
  }
  ASSERT_EQ(profile.sample_type_size(), 6);
  for (const published::ValueType& type : profile.sample_type()) {
    EXPECT_TRUE(valid_string(type.type()) && valid_string(type.unit()));
  }
  for (const published::Sample& sample : profile.sample()) {
    EXPECT_EQ(sample.value_size(), 6);
    EXPECT_GT(sample.location_id_size(), 0);
    for (const uint64_t id : sample.location_id()) EXPECT_TRUE(locations.count(id)) << id;
    for (const published::Label& label : sample.label()) {
      EXPECT_TRUE(valid_string(label.key()) && valid_string(label.str()));
    }
  }
  EXPECT_TRUE(valid_string(profile.default_sample_type()));
  for (const int64_t comment : profile.comment()) EXPECT_TRUE(valid_string(comment));
}

// Sums of each value per place (the sample's "place" label).
std::map<std::string, std::vector<int64_t>> SumsByPlace(const Profile& profile) {
  std::map<std::string, std::vector<int64_t>> sums;
  for (const published::Sample& sample : profile.sample()) {
    std::string place;
    for (const published::Label& label : sample.label()) {
      if (profile.string_table(label.key()) == "place") place = profile.string_table(label.str());
    }
    std::vector<int64_t>& sum = sums[place];
    sum.resize(sample.value_size());
    for (int i = 0; i < sample.value_size(); ++i) sum[i] += sample.value(i);
  }
  return sums;
}

class BundledTraceTest : public ::testing::TestWithParam<std::string> {};

// alloc_objects/alloc_space, peak_objects/peak_space, never_freed_objects/never_freed_space add
// up per place to the replay's allocations, its peak (the report's peak section) and what was
// live at the end (its never-freed section).
TEST_P(BundledTraceTest, SumsAreTheReportsFigures) {
  TraceReplay replay;
  const Profile profile = Exported(testing::SourcePath("samples/traces/" + GetParam()), &replay);
  ExpectValid(profile);
  const std::vector<std::string> types = {"alloc_objects",       "alloc_space",
                                          "peak_objects",        "peak_space",
                                          "never_freed_objects", "never_freed_space"};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(profile.string_table(profile.sample_type(i).type()), types[i]);
  }
  EXPECT_EQ(profile.string_table(profile.default_sample_type()), "peak_space");
  EXPECT_EQ(profile.time_nanos(), static_cast<int64_t>(replay.file->header().start_time_unix_ns()));
  EXPECT_GT(profile.duration_nanos(), 0);

  const std::map<std::string, std::vector<int64_t>> sums = SumsByPlace(profile);
  ASSERT_FALSE(replay.places.empty());
  for (const PlaceUsage& place : replay.places) {
    const std::string name = PlaceName(place.place, *replay.file);
    ASSERT_TRUE(sums.count(name)) << name;
    const std::vector<int64_t>& sum = sums.at(name);
    EXPECT_EQ(sum[0], static_cast<int64_t>(place.allocated.count)) << name;
    EXPECT_EQ(sum[1], static_cast<int64_t>(place.allocated.bytes)) << name;
    EXPECT_EQ(sum[3], static_cast<int64_t>(place.peak_bytes)) << name;
    EXPECT_EQ(sum[4], static_cast<int64_t>(place.live.count)) << name;
    EXPECT_EQ(sum[5], static_cast<int64_t>(place.live.bytes)) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Bundled, BundledTraceTest, testing::BundledTraces(),
                         testing::BundledTraceName);

// The leak_loop sample: native frames only, resolved; the innermost one named as the report does.
TEST(PprofTest, LocationsAreTheSymbolizedFramesInnermostFirst) {
  TraceReplay replay;
  const Profile profile =
      Exported(testing::SourcePath("samples/traces/leak_loop-h200.trace"), &replay);
  std::map<uint64_t, const published::Location*> locations;
  for (const published::Location& location : profile.location()) {
    locations[location.id()] = &location;
  }
  std::map<uint64_t, std::string> function_names;
  for (const published::Function& function : profile.function()) {
    function_names[function.id()] = profile.string_table(function.name());
  }
  bool leak_iteration_innermost = false;
  for (const published::Sample& sample : profile.sample()) {
    if (sample.value(5) == 0) continue;  // never freed: the 10 leaked activations
    const published::Location& innermost = *locations.at(sample.location_id(0));
    EXPECT_NE(innermost.mapping_id(), 0u);
    EXPECT_NE(innermost.address(), 0u);
    const std::string name = function_names.at(innermost.line(0).function_id());
    if (name.find("leak_iteration") != std::string::npos) leak_iteration_innermost = true;
    EXPECT_EQ(sample.value(5), 41943040);
  }
  EXPECT_TRUE(leak_iteration_innermost);
  ASSERT_GT(profile.mapping_size(), 0);
  EXPECT_NE(profile.string_table(profile.mapping(0).filename()), "");
}

// One stack allocating on two devices: a sample per device, each labelled with its ordinal.
TEST(PprofTest, OneSamplePerStackAndDevice) {
  testing::TempDir dir;
  std::vector<TracePacket> packets = {testing::HeaderPacket()};
  TracePacket stack;
  stack.mutable_stack()->set_id(7);
  stack.mutable_stack()->add_frame(0x1234);
  packets.push_back(stack);
  const uint64_t sizes[] = {1 << 20, 3 << 20, 2 << 20};
  const int32_t devices[] = {0, 1, 1};
  for (int i = 0; i < 3; ++i) {
    TracePacket alloc;
    MemoryEvent* event = alloc.mutable_memory();
    event->set_seq(i + 1);
    event->set_timestamp_ns(1000 * (i + 1));
    event->set_device(devices[i]);
    event->set_api(CUDA_MALLOC);
    event->set_kind(DEVICE);
    event->set_action(ALLOC);
    event->set_size(sizes[i]);
    event->set_address(0x7f0000000000 + (static_cast<uint64_t>(i) << 24));
    event->set_stack_id(7);
    packets.push_back(alloc);
  }
  packets.push_back(testing::FooterPacket(3));
  const std::string path = dir.File("two.trace");
  std::ofstream(path, std::ios::binary) << testing::FramedAll(packets);

  TraceReplay replay;
  const Profile profile = Exported(path, &replay);
  ExpectValid(profile);
  ASSERT_EQ(profile.sample_size(), 2);
  std::map<int64_t, int64_t> peak_by_device;
  for (const published::Sample& sample : profile.sample()) {
    EXPECT_EQ(sample.location_id(0), profile.sample(0).location_id(0));  // the same stack
    for (const published::Label& label : sample.label()) {
      if (profile.string_table(label.key()) == "device")
        peak_by_device[label.num()] = sample.value(3);
    }
  }
  EXPECT_EQ(peak_by_device, (std::map<int64_t, int64_t>{{0, 1 << 20}, {1, 5 << 20}}));
}

TEST(PprofTest, GzipIsOneGzipMemberOfTheBytes) {
  const std::string bytes(300000, 'x');
  const std::string gzipped = Gzip(bytes);
  EXPECT_EQ(gzipped.substr(0, 3), "\x1f\x8b\x08");
  EXPECT_LT(gzipped.size(), bytes.size() / 100);
  EXPECT_EQ(Gunzip(gzipped), bytes);
  EXPECT_EQ(Gunzip(Gzip("")), "");
}

}  // namespace
}  // namespace gpumem::report
