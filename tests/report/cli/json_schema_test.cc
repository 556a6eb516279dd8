// `gpumem report --json` with every section, on real traces (the samples recorded under the fake
// CUDA, the bundled H100 traces, directories of them for the combined view, a damaged trace, two
// hosts), validated against report/report.schema.json by python3's jsonschema; and documents
// broken on purpose, which the schema must reject.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::ReadFile;
using testing::RecordingEnvironment;
using testing::RunProgram;
using testing::SourcePath;
using testing::TempDir;

namespace fs = std::filesystem;

// Every section of a trace's report, as the flags name them and as its JSON keys.
const std::vector<std::string> kSections = {"summary", "peak",          "leaks",  "oom",
                                            "growth",  "fragmentation", "kernels"};

// Validates documents against the schema, which it first checks against its own metaschema (the
// draft its "$schema" names). argv: SCHEMA SECTIONS COMBINED DOCUMENT...; SECTIONS
// (comma-separated, may be empty) are made required in every trace and COMBINED ("combined" or "-")
// at the top, so that a section missing from the output fails too. JSON is parsed strictly: a
// duplicate key, NaN or Infinity is an error. Exit 0: all valid; 1: a document is not; 3: the
// schema is not valid.
constexpr char kValidator[] = R"py(
import json, os, sys
import jsonschema

def strict_object(pairs):
    keys = [key for key, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise ValueError("duplicate key %r" % key)
    return dict(pairs)

def reject_constant(name):
    raise ValueError("not JSON: %s" % name)

schema_path, sections, combined = sys.argv[1:4]
with open(schema_path) as f:
    schema = json.load(f)
cls = jsonschema.validators.validator_for(schema)
try:
    cls.check_schema(schema)
except jsonschema.exceptions.SchemaError as error:
    print("%s: not a valid schema: %s" % (schema_path, error.message))
    sys.exit(3)
if sections:
    schema["$defs"]["trace"]["required"] += sections.split(",")
if combined == "combined":
    schema["required"].append("combined")
# References to the schema's siblings (whatif.schema.json uses report.schema.json's frames) resolve
# against its own path.
resolver = jsonschema.RefResolver("file://" + os.path.abspath(schema_path), schema)
validator = cls(schema, resolver=resolver)
bad = 0
for path in sys.argv[4:]:
    try:
        with open(path) as f:
            document = json.load(f, object_pairs_hook=strict_object, parse_constant=reject_constant)
    except ValueError as error:
        print("%s: %s" % (path, error))
        bad += 1
        continue
    errors = list(validator.iter_errors(document))
    for error in errors[:20]:
        where = "/".join(str(part) for part in error.absolute_path) or "(top)"
        print("%s: %s: %s" % (path, where, error.message[:300]))
    if len(errors) > 20:
        print("%s: ... %d more" % (path, len(errors) - 20))
    bad += len(errors)
print("%s: %d error(s)" % (cls.__name__, bad))
sys.exit(1 if bad else 0)
)py";

// A python3 that can import jsonschema (tests/install_deps.sh installs Debian's
// python3-jsonschema for /usr/bin/python3; PATH may name another python3 first), or "".
const std::string& Python() {
  static const std::string python = [] {
    for (const char* candidate : {"python3", "/usr/bin/python3"}) {
      const ProgramRun run = RunProgram({candidate, "-c", "import jsonschema"});
      if (run.spawn_error == 0 && run.exit_code == 0) return std::string(candidate);
    }
    return std::string();
  }();
  return python;
}

#define SKIP_WITHOUT_JSONSCHEMA()                                               \
  if (Python().empty()) {                                                       \
    GTEST_SKIP() << "python3 with jsonschema not found (tests/install_deps.sh " \
                    "installs python3-jsonschema)";                             \
  }

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : ",") + part;
  return out;
}

// Writes `documents` to files and validates them against `schema` (a path in the sources);
// ProgramRun.out says what failed, where.
ProgramRun ValidateAgainst(const std::string& schema, const std::vector<std::string>& documents,
                           const std::vector<std::string>& required_sections = {},
                           bool require_combined = false) {
  TempDir dir;
  std::vector<std::string> argv = {Python(),
                                   "-c",
                                   kValidator,
                                   SourcePath(schema),
                                   Join(required_sections),
                                   require_combined ? "combined" : "-"};
  for (size_t i = 0; i < documents.size(); ++i) {
    const std::string path = dir.File("document" + std::to_string(i) + ".json");
    std::ofstream(path, std::ios::binary) << documents[i];
    argv.push_back(path);
  }
  ProgramRun run = RunProgram(argv);
  if (run.spawn_error != 0) ADD_FAILURE() << "cannot run " << argv[0];
  return run;
}

// The same against report/report.schema.json.
ProgramRun Validate(const std::vector<std::string>& documents,
                    const std::vector<std::string>& required_sections = {},
                    bool require_combined = false) {
  return ValidateAgainst("report/report.schema.json", documents, required_sections,
                         require_combined);
}

// `gpumem report --json` with every section (and `extra` flags) on `traces`.
ProgramRun ReportJson(const std::vector<std::string>& traces,
                      const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem"), "report", "--json"};
  for (const std::string& section : kSections) argv.push_back("--" + section);
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), traces.begin(), traces.end());
  ProgramRun run = RunProgram(argv, {{"GPUMEM_SYMBOL_PATH", ""}});
  if (run.spawn_error != 0) ADD_FAILURE() << "cannot run " << argv[0];
  return run;
}

// One JSON object on one line.
void ExpectOneLine(const ProgramRun& report, const std::string& what) {
  ASSERT_FALSE(report.out.empty()) << what << ": " << report.err;
  EXPECT_EQ(report.out.front(), '{') << what;
  EXPECT_EQ(report.out.find('\n'), report.out.size() - 1) << what;
}

// Records bin/`sample` under the fake CUDA into `output` (a child that uses CUDA writes
// <stem>-<pid>.trace next to it).
bool Record(const std::string& sample, const std::string& output,
            const std::map<std::string, std::string>& extra_environment = {}) {
  std::map<std::string, std::string> environment = RecordingEnvironment(output);
  for (const auto& [name, value] : extra_environment) environment[name] = value;
  const ProgramRun run = RunProgram({BuildPath("bin/" + sample)}, environment);
  EXPECT_EQ(run.exit_code, 0) << sample << ": " << run.out << run.err;
  EXPECT_TRUE(fs::exists(output)) << sample << ": " << run.err;
  return run.exit_code == 0 && fs::exists(output);
}

std::vector<std::string> TracesIn(const std::string& dir) {
  std::vector<std::string> traces;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".trace") traces.push_back(entry.path().string());
  }
  std::sort(traces.begin(), traces.end());
  return traces;
}

TEST(JsonSchemaTest, SchemaIsValidAndAcceptsTheSmallestReport) {
  SKIP_WITHOUT_JSONSCHEMA();
  const ProgramRun run = Validate({R"({"gpumem_report":1,"traces":[]})"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("Draft202012Validator"), std::string::npos) << run.out;
}

// leak (leak_loop), OOM (oom_loop), a temporary at the peak (peak_temporary), pinned host and
// managed memory (runtime_apis), VMM (vmm), kernel launches (unused_buffer), and fork: two
// traces, so a combined view.
TEST(JsonSchemaTest, SamplesRecordedUnderTheFakeCudaValidate) {
  SKIP_WITHOUT_JSONSCHEMA();
  TempDir dir;
  std::vector<std::string> documents;
  for (const std::string sample :
       {"leak_loop", "peak_temporary", "runtime_apis", "vmm", "unused_buffer"}) {
    ASSERT_TRUE(Record(sample, dir.File(sample + ".trace")));
  }
  ASSERT_TRUE(Record("oom_loop", dir.File("oom_loop.trace"),
                     {{"GPUMEM_FAKE_DEVICE_MEMORY", "2147483648"}}));
  fs::create_directory(dir.File("fork"));
  ASSERT_TRUE(Record("fork", dir.File("fork/fork.trace")));
  ASSERT_EQ(TracesIn(dir.File("fork")).size(), 2u);

  std::map<std::string, std::string> by_name;
  for (const std::string& trace : TracesIn(dir.path())) {
    const ProgramRun report = ReportJson({trace});
    EXPECT_EQ(report.exit_code, 0) << trace << ": " << report.err;
    ExpectOneLine(report, trace);
    EXPECT_EQ(report.out.find("\"combined\""), std::string::npos) << trace;
    documents.push_back(report.out);
    by_name[fs::path(trace).filename().string()] = report.out;
  }
  // Content the schema's conditional parts hinge on, so that they are exercised.
  const std::string& oom = by_name["oom_loop.trace"];
  EXPECT_NE(oom.find("\"failures\":[{"), std::string::npos) << oom;
  const std::string& pinned = by_name["runtime_apis.trace"];
  EXPECT_NE(pinned.find("\"memory\":\"host\",\"device\":-1"), std::string::npos) << pinned;
  const std::string& vmm = by_name["vmm.trace"];
  EXPECT_EQ(vmm.find("\"vmm_reserved_peak_bytes\":0,"), std::string::npos) << vmm;

  // The iteration-marker rule, every call site.
  const ProgramRun marker = ReportJson({dir.File("leak_loop.trace")},
                                       {"--iteration-marker", "leak_iteration", "--top", "0"});
  EXPECT_EQ(marker.exit_code, 0) << marker.err;
  EXPECT_NE(marker.out.find("\"rule\":\"iteration_marker\",\"marker\":\"leak_iteration\""),
            std::string::npos)
      << marker.out;
  documents.push_back(marker.out);

  ProgramRun run = Validate(documents, kSections);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;

  // A directory of one process's traces (fork), and every trace at once.
  std::vector<std::string> combined;
  for (const std::vector<std::string>& traces :
       {std::vector<std::string>{dir.File("fork")}, std::vector<std::string>{dir.path()}}) {
    const ProgramRun report = ReportJson(traces);
    EXPECT_EQ(report.exit_code, 0) << report.err;
    ExpectOneLine(report, traces[0]);
    combined.push_back(report.out);
  }
  EXPECT_NE(combined[0].find("\"combined\":{\"processes\":2,\"per_host\":false"), std::string::npos)
      << combined[0];
  run = Validate(combined, kSections, /*require_combined=*/true);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

TEST(JsonSchemaTest, BundledGpuTracesValidate) {
  SKIP_WITHOUT_JSONSCHEMA();
  const std::vector<std::string> traces = TracesIn(SourcePath("samples/traces"));
  ASSERT_GE(traces.size(), 5u);
  std::vector<std::string> documents;
  for (const std::string& trace : traces) {
    const ProgramRun report = ReportJson({trace});
    EXPECT_EQ(report.exit_code, 0) << trace << ": " << report.err;
    ExpectOneLine(report, trace);
    documents.push_back(report.out);
  }
  // The tensor-level trace's modelled rows, under either model.
  const std::string async = SourcePath("samples/traces/train_mlp-async-h100.trace");
  const ProgramRun expandable = ReportJson({async}, {"--allocator", "expandable"});
  EXPECT_EQ(expandable.exit_code, 0) << expandable.err;
  ExpectOneLine(expandable, async);
  EXPECT_NE(expandable.out.find("\"model\":{\"allocator\":\"expandable\",\"chosen\":true"),
            std::string::npos)
      << expandable.out;
  documents.push_back(expandable.out);
  ProgramRun run = Validate(documents, kSections);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;

  const ProgramRun all = ReportJson({SourcePath("samples/traces")});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  ExpectOneLine(all, "samples/traces");
  run = Validate({all.out}, kSections, /*require_combined=*/true);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

// A trace cut short (no footer: leaks incomplete, with a note; exit 2 but still reported), and the
// fork sample's traces as if from two hosts (the combined view per host).
// How the program ended, as `gpumem record` appends it to the trace.
TEST(JsonSchemaTest, ProcessEndValidates) {
  SKIP_WITHOUT_JSONSCHEMA();
  TempDir dir;
  const ProgramRun record = RunProgram(
      {BuildPath("bin/gpumem"), "record", "-o", dir.File("leak.trace"), BuildPath("bin/leak_loop")},
      {{"LD_LIBRARY_PATH", BuildPath("lib/fake")}});
  ASSERT_EQ(record.exit_code, 0) << record.err;
  const ProgramRun report = ReportJson({dir.File("leak.trace")});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("\"process_end\":{"), std::string::npos) << report.out;
  const ProgramRun run = Validate({report.out}, {"process_end"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

// PyTorch's out-of-memory error, a backward pass and a call that failed with error 800, from a
// script that notes them as gpumem's Python observer does.
TEST(JsonSchemaTest, FrameworkOomAndFailedCallValidate) {
  SKIP_WITHOUT_JSONSCHEMA();
  TempDir dir;
  const std::string trace = dir.File("framework_oom.trace");
  const ProgramRun record =
      RunProgram({"python3", SourcePath("tests/integration/programs/framework_oom.py"),
                  BuildPath("tests/programs/site-packages/torch/lib/libfake_autograd_engine.so")},
                 RecordingEnvironment(trace));
  ASSERT_EQ(record.exit_code, 0) << record.out << record.err;
  const ProgramRun report = ReportJson({trace});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("\"framework_ooms\":[{"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("\"failed_calls\":[{"), std::string::npos) << report.out;
  const ProgramRun run = Validate({report.out}, kSections);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

TEST(JsonSchemaTest, DamagedTraceAndTwoHostsValidate) {
  SKIP_WITHOUT_JSONSCHEMA();
  TempDir dir;
  ASSERT_TRUE(Record("leak_loop", dir.File("leak.trace")));
  const std::string bytes = ReadFile(dir.File("leak.trace"));
  std::ofstream(dir.File("cut.trace"), std::ios::binary) << bytes.substr(0, bytes.size() * 3 / 4);
  const ProgramRun cut = ReportJson({dir.File("cut.trace")});
  EXPECT_EQ(cut.exit_code, 2);
  ExpectOneLine(cut, "cut.trace");
  EXPECT_NE(cut.out.find("\"clean_exit\":false,\"damaged\":true"), std::string::npos) << cut.out;
  EXPECT_NE(cut.out.find("\"leaks\":{\"complete\":false,\"note\":"), std::string::npos) << cut.out;

  fs::create_directory(dir.File("fork"));
  ASSERT_TRUE(Record("fork", dir.File("fork/fork.trace")));
  const std::vector<std::string> forked = TracesIn(dir.File("fork"));
  ASSERT_EQ(forked.size(), 2u);
  // The file is one Trace message: rewrite the child's header as if it ran elsewhere.
  Trace child;
  ASSERT_TRUE(child.ParseFromString(ReadFile(forked[1])));
  ASSERT_TRUE(child.packet(0).has_header());
  child.mutable_packet(0)->mutable_header()->set_host("another-host");
  std::ofstream(forked[1], std::ios::binary | std::ios::trunc) << child.SerializeAsString();
  const ProgramRun hosts = ReportJson({dir.File("fork")});
  EXPECT_EQ(hosts.exit_code, 0) << hosts.err;
  ExpectOneLine(hosts, "two hosts");
  EXPECT_NE(hosts.out.find("\"per_host\":true"), std::string::npos) << hosts.out;

  ProgramRun run = Validate({cut.out}, kSections);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  run = Validate({hosts.out}, kSections, /*require_combined=*/true);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

// A recording that stopped early (its last footer says why) and a process's exit status.
TEST(JsonSchemaTest, StoppedRecordingValidates) {
  SKIP_WITHOUT_JSONSCHEMA();
  TempDir dir;
  const std::string trace = dir.File("leak.trace");
  ASSERT_TRUE(Record("leak_loop", trace));
  TracePacket stopped;
  Footer* footer = stopped.mutable_footer();
  footer->set_events(40);
  footer->set_events_dropped(12);
  footer->set_clean_exit(true);
  footer->set_exit_status(0);
  footer->set_stop_reason(DISK_FULL);
  footer->set_stopped_at_seq(29);
  std::ofstream(trace, std::ios::binary | std::ios::app) << testing::Framed(stopped);
  const ProgramRun report = ReportJson({trace});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  ExpectOneLine(report, trace);
  EXPECT_NE(report.out.find("\"clean_exit\":false,\"exit_status\":0,\"recording_stopped\":{"
                            "\"reason\":\"disk_full\",\"at_seq\":29,\"events_dropped\":12,"
                            "\"process_exited\":true}"),
            std::string::npos)
      << report.out;
  EXPECT_NE(report.out.find("\"leaks\":{\"complete\":false,\"note\":\"recording stopped at event "
                            "29 of 40: no space left on the file system"),
            std::string::npos)
      << report.out;
  const ProgramRun run = Validate({report.out}, kSections);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

// `text` with the first `from` replaced by `to`; "" when `from` is not in it.
std::string Replaced(const std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) return "";
  return text.substr(0, at) + to + text.substr(at + from.size());
}

// Where the value of the first member `"name":` of `text` starts and ends (a scalar: up to the
// next ',' or '}'); false when there is none.
bool FindScalar(const std::string& text, const std::string& name, size_t* begin, size_t* end) {
  const std::string key = "\"" + name + "\":";
  const size_t at = text.find(key);
  if (at == std::string::npos) return false;
  *begin = at + key.size();
  *end = text.find_first_of(",}", *begin);
  return *end != std::string::npos;
}

// `text` with the scalar value of the first member `name` replaced by `value`.
std::string WithValue(const std::string& text, const std::string& name, const std::string& value) {
  size_t begin = 0;
  size_t end = 0;
  if (!FindScalar(text, name, &begin, &end)) return "";
  return text.substr(0, begin) + value + text.substr(end);
}

// `text` without the first member `"name":scalar,`.
std::string Removed(const std::string& text, const std::string& name) {
  size_t begin = 0;
  size_t end = 0;
  if (!FindScalar(text, name, &begin, &end) || text[end] != ',') return "";
  return text.substr(0, begin - name.size() - 3) + text.substr(end + 1);
}

// The validation can fail: a real report broken in one place each way is rejected, naming why.
TEST(JsonSchemaTest, BrokenDocumentsAreRejected) {
  SKIP_WITHOUT_JSONSCHEMA();
  const ProgramRun report = ReportJson({SourcePath("samples/traces/leak_loop-h200.trace")});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string good = report.out;
  ProgramRun run = Validate({good}, kSections);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;

  struct Broken {
    std::string what;
    std::string document;
    std::string expected;  // in the validator's message
  };
  const std::vector<Broken> cases = {
      {"a required field removed", Removed(good, "pid"), "'pid' is a required property"},
      {"a required field removed from a frame", Removed(good, "module_offset"),
       "'module_offset' is a required property"},
      {"a summary row without its modelled flag", Removed(good, "modelled"),
       "'modelled' is a required property"},
      {"a wrong type", WithValue(good, "clean_exit", "\"yes\""), "is not of type 'boolean'"},
      {"a wrong type in a frame", WithValue(good, "line", "\"26\""), "is not of type 'integer'"},
      {"a fraction for a count", WithValue(good, "call_sites", "1.5"), "is not of type 'integer'"},
      {"a negative size", WithValue(good, "peak_bytes", "-1"), "less than the minimum"},
      {"null for a time", WithValue(good, "time_ns", "null"), "is not of type 'integer'"},
      {"an unknown field", Replaced(good, "\"traces\":[{", "\"traces\":[{\"extra\":1,"),
       "Additional properties are not allowed ('extra' was unexpected)"},
      {"another version", Replaced(good, "\"gpumem_report\":1", "\"gpumem_report\":2"),
       "1 was expected"},
      {"an unknown enum value", Replaced(good, "\"memory\":\"device\"", "\"memory\":\"disk\""),
       "is not one of"},
      {"a duplicate key", Replaced(good, "\"traces\":[{", "\"traces\":[{\"pid\":1,"),
       "duplicate key 'pid'"},
      {"not JSON", good.substr(0, good.size() / 2), ""},
  };
  for (const Broken& broken : cases) {
    SCOPED_TRACE(broken.what);
    ASSERT_FALSE(broken.document.empty()) << "the mutation did not apply";
    ASSERT_NE(broken.document, good);
    run = Validate({broken.document}, kSections);
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    EXPECT_NE(run.out.find(broken.expected), std::string::npos) << run.out;
  }
  // A section present but not asked to be: only --peak and --leaks, still valid without the
  // others; the same document fails when the others are required.
  const ProgramRun plain = RunProgram({BuildPath("bin/gpumem"), "report", "--json",
                                       SourcePath("samples/traces/leak_loop-h200.trace")});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  run = Validate({plain.out}, {"peak", "leaks"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  run = Validate({plain.out}, kSections);
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("'summary' is a required property"), std::string::npos) << run.out;
}

// `gpumem COMMAND --json` with `args` (whatif, advise): one JSON object on one line, exit 0 or 1.
std::string CommandJson(const std::string& command, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem"), command, "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProgramRun run = RunProgram(argv, {{"GPUMEM_SYMBOL_PATH", ""}});
  EXPECT_LE(run.exit_code, 1) << run.err;
  ExpectOneLine(run, args.back());
  return run.out;
}
std::string AdviseJson(const std::vector<std::string>& args) { return CommandJson("advise", args); }

// COMMAND's JSON on the bundled tensor-level H100 trace with 8 GiB and with 60 MiB (which no model
// fits), and on a plain CUDA program with 8 GiB.
std::vector<std::string> TensorAndPlainDocuments(const std::string& command) {
  const std::string async = SourcePath("samples/traces/train_mlp-async-h100.trace");
  const std::string plain = SourcePath("samples/traces/leak_loop-h200.trace");
  std::vector<std::string> documents;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--device-memory", "8GiB", async},
        std::vector<std::string>{"--device-memory", "60MiB", async},
        std::vector<std::string>{"--device-memory", "8GiB", plain}}) {
    documents.push_back(CommandJson(command, args));
  }
  return documents;
}

// `gpumem whatif --json` on the bundled H100 traces: every allocator fitting, every allocator out
// of memory (the OOM objects with their frames and sites), and a plain CUDA program (async only);
// and a document with a field the schema does not name, which it must reject.
TEST(JsonSchemaTest, WhatifOutputValidates) {
  SKIP_WITHOUT_JSONSCHEMA();
  const std::vector<std::string> documents = TensorAndPlainDocuments("whatif");
  EXPECT_NE(documents[1].find("\"oom\":{"), std::string::npos);
  const ProgramRun run = ValidateAgainst("report/whatif.schema.json", documents);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  std::string broken = documents[0];
  broken.insert(broken.find("\"fits\""), "\"surprise\":1,");
  EXPECT_EQ(ValidateAgainst("report/whatif.schema.json", {broken}).exit_code, 1);
}

// `gpumem advise --json` on the bundled tensor-level H100 trace, fitting and not (its remedies with
// their call sites), and a plain CUDA program; and a document with a field the schema does not
// name, which it must reject.
TEST(JsonSchemaTest, AdviseOutputValidates) {
  SKIP_WITHOUT_JSONSCHEMA();
  const std::vector<std::string> documents = TensorAndPlainDocuments("advise");
  EXPECT_NE(documents[1].find("\"kind\":\"free_after_last_use\""), std::string::npos);
  const ProgramRun run = ValidateAgainst("report/advise.schema.json", documents);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  std::string broken = documents[1];
  broken.insert(broken.find("\"fits\""), "\"surprise\":1,");
  EXPECT_EQ(ValidateAgainst("report/advise.schema.json", {broken}).exit_code, 1);
}

// `gpumem advise --json` on a training loop in plain CUDA recorded under the fake CUDA
// (tests/integration/programs/advise_program.cc): one trace (remedies at the program's lines, the
// command of a second recording), and two at batch sizes 16 and 8 under a limit that 16 does not
// fit (the batch section, the batch remedy).
TEST(JsonSchemaTest, AdviseOfTwoBatchSizesValidates) {
  SKIP_WITHOUT_JSONSCHEMA();
  TempDir dir;
  std::vector<std::string> traces;
  for (const std::string batch : {"16", "8"}) {
    traces.push_back(dir.File("b" + batch + ".trace"));
    const ProgramRun run =
        RunProgram({BuildPath("tests/programs/advise_program"), "--batch", batch},
                   RecordingEnvironment(traces.back()));
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  }
  const std::vector<std::string> documents = {
      AdviseJson({"--device-memory", "1GiB", traces[0]}),
      AdviseJson({"--device-memory", "81MiB", traces[0], traces[1]})};
  EXPECT_NE(documents[0].find("\"kind\":\"release_growing\""), std::string::npos);
  EXPECT_NE(documents[0].find("\"second_trace\":{\"command\":\"gpumem record"), std::string::npos);
  EXPECT_NE(documents[1].find("\"kind\":\"batch\""), std::string::npos);
  EXPECT_NE(documents[1].find("\"batch\":{\"sizes\":[16,8]"), std::string::npos);
  const ProgramRun run = ValidateAgainst("report/advise.schema.json", documents);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

}  // namespace
}  // namespace gpumem
