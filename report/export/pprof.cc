#include "report/export/pprof.h"

#include <zlib.h>

#include <algorithm>
#include <map>
#include <new>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "report/export/proto_encoder.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"

namespace gpumem::report {
namespace {

// Field numbers of pprof's proto/profile.proto (package perftools.profiles).
namespace profile {
constexpr uint32_t kSampleType = 1, kSample = 2, kMapping = 3, kLocation = 4, kFunction = 5,
                   kStringTable = 6, kTimeNanos = 9, kDurationNanos = 10, kPeriodType = 11,
                   kPeriod = 12, kComment = 13, kDefaultSampleType = 14;
}
namespace value_type {
constexpr uint32_t kType = 1, kUnit = 2;
}
namespace sample {
constexpr uint32_t kLocationId = 1, kValue = 2, kLabel = 3;
}
namespace label {
constexpr uint32_t kKey = 1, kStr = 2, kNum = 3;
}
namespace mapping {
constexpr uint32_t kId = 1, kMemoryStart = 2, kMemoryLimit = 3, kFileOffset = 4, kFilename = 5,
                   kBuildId = 6, kHasFunctions = 7, kHasFilenames = 8, kHasLineNumbers = 9;
}
namespace location {
constexpr uint32_t kId = 1, kMappingId = 2, kAddress = 3, kLine = 4;
}
namespace line {
constexpr uint32_t kFunctionId = 1, kLine = 2;
}
namespace function {
constexpr uint32_t kId = 1, kName = 2, kSystemName = 3, kFilename = 4;
}

// The sample types, in the order of each Sample's values.
struct SampleType {
  const char* type;
  const char* unit;
};
constexpr SampleType kSampleTypes[] = {
    {"alloc_objects", "count"}, {"alloc_space", "bytes"},         {"peak_objects", "count"},
    {"peak_space", "bytes"},    {"never_freed_objects", "count"}, {"never_freed_space", "bytes"},
};
constexpr char kDefaultSampleType[] = "peak_space";

// string_table: each string once, "" first. Strings are made valid UTF-8 on the way in.
class StringTable {
 public:
  StringTable() { Of(""); }
  int64_t Of(absl::string_view bytes) {
    std::string text;
    AppendEscaped(bytes, TextEscape::kUtf8, &text);
    const auto [it, added] = index_.try_emplace(text, static_cast<int64_t>(strings_.size()));
    if (added) strings_.push_back(std::move(text));
    return it->second;
  }
  void WriteTo(ProtoEncoder* profile) const {
    for (const std::string& text : strings_) profile->Bytes(profile::kStringTable, text);
  }

 private:
  std::vector<std::string> strings_;
  absl::flat_hash_map<std::string, int64_t> index_;
};

// One Mapping per module the frames name, looked up by path and load bias.
class Mappings {
 public:
  explicit Mappings(const TraceFile& trace) {
    for (const ModuleRecord& record : trace.modules()) {
      records_.try_emplace({record.module.path(), record.module.load_bias()}, &record.module);
    }
  }
  // The mapping id of `frame`'s module (0: none known).
  uint64_t Of(const FrameInfo& frame) {
    if (frame.module.empty()) return 0;
    const auto record = records_.find({frame.module, frame.pc - frame.module_offset});
    if (record == records_.end()) return 0;
    const auto [it, added] = ids_.try_emplace(record->second, used_.size() + 1);
    if (added) used_.push_back({record->second, false});
    if (!frame.function.empty()) used_[it->second - 1].resolved = true;
    return it->second;
  }
  void WriteTo(StringTable* strings, ProtoEncoder* profile) const {
    for (size_t i = 0; i < used_.size(); ++i) {
      const Module& module = *used_[i].module;
      ProtoEncoder message;
      message.Varint(mapping::kId, i + 1);
      message.Varint(mapping::kMemoryStart, module.start());
      message.Varint(mapping::kMemoryLimit, module.end());
      message.Varint(mapping::kFileOffset, module.start() - module.load_bias());
      message.Int64(mapping::kFilename, strings->Of(module.path()));
      message.Int64(mapping::kBuildId, strings->Of(absl::BytesToHexString(module.build_id())));
      // Resolved here: pprof must not look for the binaries again.
      message.Bool(mapping::kHasFunctions, used_[i].resolved);
      message.Bool(mapping::kHasFilenames, used_[i].resolved);
      message.Bool(mapping::kHasLineNumbers, used_[i].resolved);
      profile->Message(profile::kMapping, message);
    }
  }

 private:
  struct Used {
    const Module* module;
    bool resolved;  // some frame in it has a function name
  };
  std::map<std::pair<std::string, uint64_t>, const Module*> records_;
  absl::flat_hash_map<const Module*, uint64_t> ids_;
  std::vector<Used> used_;
};

// Functions, each (name, file) once; ids from 1.
class Functions {
 public:
  uint64_t Of(const FrameInfo& frame, StringTable* strings) {
    // An unresolved frame is named as the report prints it: module+offset, or its address.
    const std::string& name = frame.function.empty() ? frame.name : frame.function;
    const int64_t name_index = strings->Of(name);
    const int64_t file_index = strings->Of(frame.file);
    const auto [it, added] = ids_.try_emplace({name_index, file_index}, ids_.size() + 1);
    if (added) {
      ProtoEncoder message;
      message.Varint(function::kId, it->second);
      message.Int64(function::kName, name_index);
      message.Int64(function::kSystemName, name_index);
      message.Int64(function::kFilename, file_index);
      messages_.push_back(std::move(message));
    }
    return it->second;
  }
  void WriteTo(ProtoEncoder* profile) const {
    for (const ProtoEncoder& message : messages_) profile->Message(profile::kFunction, message);
  }

 private:
  std::map<std::pair<int64_t, int64_t>, uint64_t> ids_;
  std::vector<ProtoEncoder> messages_;
};

// One Location per frame of the table: id = frame index + 1.
void WriteLocations(const std::vector<FrameInfo>& frames, StringTable* strings, Mappings* mappings,
                    Functions* functions, ProtoEncoder* profile) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const FrameInfo& frame = frames[i];
    ProtoEncoder line_message;
    line_message.Varint(line::kFunctionId, functions->Of(frame, strings));
    line_message.Int64(line::kLine, frame.line);
    ProtoEncoder message;
    message.Varint(location::kId, i + 1);
    if (const uint64_t mapping_id = mappings->Of(frame); mapping_id != 0) {
      message.Varint(location::kMappingId, mapping_id);
    }
    if (frame.pc != 0) message.Varint(location::kAddress, frame.pc);
    message.Message(location::kLine, line_message);
    profile->Message(profile::kLocation, message);
  }
}

ProtoEncoder Label(StringTable* strings, absl::string_view key, absl::string_view text) {
  ProtoEncoder message;
  message.Int64(label::kKey, strings->Of(key));
  message.Int64(label::kStr, strings->Of(text));
  return message;
}

ProtoEncoder NumericLabel(StringTable* strings, absl::string_view key, int64_t number) {
  ProtoEncoder message;
  message.Int64(label::kKey, strings->Of(key));
  message.Int64(label::kNum, number);
  return message;
}

void WriteSamples(const TalliedStacks& stacks, StringTable* strings, ProtoEncoder* profile) {
  for (const TalliedStacks::Place& place : stacks.places) {
    const ProtoEncoder place_label = Label(strings, "place", place.name);
    for (const auto& [frames, tallies] : place.stacks) {
      std::vector<uint64_t> locations;
      locations.reserve(frames.size());
      for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame) {
        locations.push_back(uint64_t{*frame} + 1);  // innermost first, as pprof wants
      }
      const std::vector<uint64_t> values = {
          tallies.allocated.count, tallies.allocated.bytes,   tallies.at_peak.count,
          tallies.at_peak.bytes,   tallies.never_freed.count, tallies.never_freed.bytes,
      };
      ProtoEncoder message;
      message.PackedVarints(sample::kLocationId, locations);
      message.PackedVarints(sample::kValue, values);
      message.Message(sample::kLabel, place_label);
      if (place.place >= 0) {
        message.Message(sample::kLabel, NumericLabel(strings, "device", place.place));
      }
      profile->Message(profile::kSample, message);
    }
  }
}

void WriteValueType(uint32_t field, const char* type, const char* unit, StringTable* strings,
                    ProtoEncoder* profile) {
  ProtoEncoder message;
  message.Int64(value_type::kType, strings->Of(type));
  message.Int64(value_type::kUnit, strings->Of(unit));
  profile->Message(field, message);
}

// What the header says of the run: its times and comments.
void WriteRun(const TalliedStacks& stacks, const TraceFile& trace, StringTable* strings,
              ProtoEncoder* profile) {
  const Header& header = trace.header();
  const uint64_t start = header.start_time_mono_ns();
  uint64_t end = stacks.last_event_ns;
  if (trace.footer() && trace.footer()->end_time_mono_ns() != 0) {
    end = std::max(end, trace.footer()->end_time_mono_ns());
  }
  profile->Int64(profile::kTimeNanos, static_cast<int64_t>(header.start_time_unix_ns()));
  profile->Int64(profile::kDurationNanos, end > start ? static_cast<int64_t>(end - start) : 0);
  const std::string comments[] = {
      absl::StrCat("gpumem: process ", header.pid(), " on ", header.host()),
      absl::StrCat("command line: ", absl::StrJoin(header.command_line(), " ")),
  };
  for (const std::string& comment : comments) {
    profile->Int64(profile::kComment, strings->Of(comment));
  }
}

}  // namespace

std::string PprofProfile(const TalliedStacks& stacks, const TraceFile& trace) {
  StringTable strings;
  Mappings mappings(trace);
  Functions functions;
  ProtoEncoder profile;
  for (const SampleType& type : kSampleTypes) {
    WriteValueType(profile::kSampleType, type.type, type.unit, &strings, &profile);
  }
  WriteSamples(stacks, &strings, &profile);
  WriteLocations(stacks.frames, &strings, &mappings, &functions, &profile);
  functions.WriteTo(&profile);
  mappings.WriteTo(&strings, &profile);
  // Every allocation is recorded: one event per unit, nothing sampled.
  WriteValueType(profile::kPeriodType, "space", "bytes", &strings, &profile);
  profile.Int64(profile::kPeriod, 1);
  profile.Int64(profile::kDefaultSampleType, strings.Of(kDefaultSampleType));
  WriteRun(stacks, trace, &strings, &profile);
  strings.WriteTo(&profile);  // last: every message above added its strings
  return std::move(profile.mutable_bytes());
}

std::string Gzip(absl::string_view bytes) {
  z_stream stream = {};
  // windowBits 15 + 16: a gzip header and trailer around the deflate stream.
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    throw std::bad_alloc();  // zlib's only failure here: no memory for its state
  }
  std::string out;
  char buffer[1 << 16];
  int flush = Z_NO_FLUSH;
  while (flush != Z_FINISH) {
    // In pieces: zlib counts in 32 bits.
    const size_t piece = std::min<size_t>(bytes.size(), size_t{1} << 30);
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    stream.avail_in = static_cast<uInt>(piece);
    bytes.remove_prefix(piece);
    flush = bytes.empty() ? Z_FINISH : Z_NO_FLUSH;
    do {
      stream.next_out = reinterpret_cast<Bytef*>(buffer);
      stream.avail_out = sizeof(buffer);
      deflate(&stream, flush);  // cannot fail: the stream is valid and output always has room
      out.append(buffer, sizeof(buffer) - stream.avail_out);
    } while (stream.avail_out == 0);
  }
  deflateEnd(&stream);
  return out;
}

TraceReplay ExportPprof(std::unique_ptr<TraceFile> file, Progress* progress, std::string* out) {
  TalliedStacks stacks;
  TraceReplay replay = TallyStacks(std::move(file), progress, &stacks);
  out->append(Gzip(PprofProfile(stacks, *replay.file)));
  return replay;
}

}  // namespace gpumem::report
