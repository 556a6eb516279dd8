// `gpumem export` on the bundled H100 traces (samples/traces/README.md says what each holds), on
// traces recorded under the fake CUDA (VMM unmaps, an out-of-memory failure) and on synthetic ones
// (GPU kernel times, frame names with ';'). Every output is read back by Python's pickle / json in
// tests/report/check_export.py, against `gpumem report --json` and `gpumem dump --counts` of the
// same trace.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/export/folded.h"
#include "tests/support/export_traces.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::FooterPacket;
using testing::FramedAll;
using testing::HeaderPacket;
using testing::ProgramRun;
using testing::ReadFile;
using testing::RecordingEnvironment;
using testing::RunProgram;
using testing::SourcePath;
using testing::TempDir;

namespace fs = std::filesystem;

std::string Trace(const std::string& name) { return SourcePath("samples/traces/" + name); }

ProgramRun Gpumem(const std::vector<std::string>& args) { return testing::RunGpumem(args); }

// `gpumem COMMAND... TRACE` with its stdout saved in `dir`.
std::string Saved(const TempDir& dir, const std::string& name, std::vector<std::string> args) {
  const ProgramRun run = Gpumem(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  std::ofstream(dir.File(name), std::ios::binary) << run.out;
  return dir.File(name);
}

// tests/report/check_export.py FORMAT FILE ARGS...; its output ends "ok" when all held.
ProgramRun Check(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {GPUMEM_PYTHON3, SourcePath("tests/report/check_export.py")};
  argv.insert(argv.end(), args.begin(), args.end());
  ProgramRun run = RunProgram(argv);
  EXPECT_EQ(run.spawn_error, 0);
  return run;
}

#define EXPECT_CHECKED(run) EXPECT_EQ((run).exit_code, 0) << (run).out << (run).err

// Exports `trace` in `format` (extra flags after) into `dir`; the output's path.
std::string Export(const TempDir& dir, const std::string& trace, const std::string& format,
                   const std::string& output, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"export", "--format", format, trace, "-o", dir.File(output)};
  args.insert(args.end(), extra.begin(), extra.end());
  const ProgramRun run = Gpumem(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("gpumem: exported"), std::string::npos) << run.err;
  return dir.File(output);
}

// Every format of `trace` checked against its report and counts, plus `expect` (K=V) for the
// snapshot.
void ExportAndCheckAll(const std::string& trace, const std::vector<std::string>& expect) {
  TempDir dir;
  const std::string report = Saved(dir, "report.json", {"report", "--json", trace});
  const std::string counts = Saved(dir, "counts.txt", {"dump", "--counts", trace});
  std::vector<std::string> viz = {"memory-viz", Export(dir, trace, "memory-viz", "s.pickle"),
                                  "--report",   report,
                                  "--counts",   counts};
  if (!expect.empty()) {
    viz.push_back("--expect");
    viz.insert(viz.end(), expect.begin(), expect.end());
  }
  EXPECT_CHECKED(Check(viz));
  EXPECT_CHECKED(Check({"chrome-json", Export(dir, trace, "chrome-json", "p.json"), "--report",
                        report, "--counts", counts}));
  for (const std::string what : {"peak", "leaks"}) {
    EXPECT_CHECKED(
        Check({"folded", Export(dir, trace, "folded", what + ".folded", {"--what", what}),
               "--report", report, "--what", what}));
    EXPECT_CHECKED(
        Check({"speedscope", Export(dir, trace, "speedscope", what + ".json", {"--what", what}),
               "--report", report, "--what", what}));
  }
}

// ---- the bundled H100 traces ----

// 20 cudaMalloc, 10 cudaFree, 10 x 4 MiB never freed: a plain program, a segment per allocation.
TEST(ExportTest, LeakLoopEveryFormat) {
  ExportAndCheckAll(
      Trace("leak_loop-h200.trace"),
      {"live_segments=10", "live_bytes=41943040", "live_active_bytes=41943040", "alloc=20",
       "segment_alloc=20", "free_completed=10", "segment_free=10", "oom=0"});
}

// Tensor level: 475 cudaMallocAsync (and 6 cuBLAS workspaces), Python frames, 638 launches.
TEST(ExportTest, TensorLevelTraceEveryFormat) {
  ExportAndCheckAll(Trace("train_mlp-async-h100.trace"), {"python_frames=1", "alloc=481"});
}

// Expandable segments: 7 mappings held by PyTorch (no block of ours inside); the cuMemCreate the
// driver refused with error 800 (PyTorch's fabric-handle probe) is not out of memory: no oom entry.
TEST(ExportTest, ExpandableSegmentsEveryFormat) {
  ExportAndCheckAll(Trace("train_mlp-expandable-h100.trace"),
                    {"segment_map=7", "segment_unmap=0", "oom=0", "alloc=6", "live_segments=13"});
}

// PyTorch's default allocator: its 5 segments alone (88 MiB, no block recorded inside), the 6
// cuBLAS workspaces (the other 134481920 bytes) as allocations.
TEST(ExportTest, SegmentLevelTraceEveryFormat) {
  ExportAndCheckAll(Trace("train_mlp-default-h100.trace"),
                    {"segment_alloc=11", "alloc=6", "live_segments=11", "live_bytes=226756608",
                     "live_active_bytes=134481920"});
}

// ---- recorded under the fake CUDA ----

bool Record(const std::string& sample, const std::string& output,
            std::map<std::string, std::string> environment = {}) {
  for (const auto& [name, value] : RecordingEnvironment(output)) environment[name] = value;
  const ProgramRun run = RunProgram({BuildPath("bin/" + sample)}, environment);
  EXPECT_EQ(run.exit_code, 0) << sample << ": " << run.out << run.err;
  return run.exit_code == 0 && fs::exists(output);
}

// Five mappings, each unmapped: segment_map / segment_unmap, nothing live at the end.
TEST(ExportTest, VmmSampleMapsAndUnmaps) {
  TempDir dir;
  ASSERT_TRUE(Record("vmm", dir.File("vmm.trace")));
  ExportAndCheckAll(dir.File("vmm.trace"),
                    {"segment_map=5", "segment_unmap=5", "alloc=5", "free_completed=5",
                     "live_segments=0", "segment_alloc=0"});
}

// 7 chunks allocated, the 8th fails: an oom entry with the driver's free memory.
TEST(ExportTest, OomSampleHasAnOomEntry) {
  TempDir dir;
  ASSERT_TRUE(
      Record("oom_loop", dir.File("oom.trace"), {{"GPUMEM_FAKE_DEVICE_MEMORY", "2147483648"}}));
  ExportAndCheckAll(dir.File("oom.trace"), {"oom=1", "alloc=7", "free_completed=7"});
  const std::string snapshot = dir.File("s.pickle");
  ASSERT_EQ(
      Gpumem({"export", "--format", "memory-viz", dir.File("oom.trace"), "-o", snapshot}).exit_code,
      0);
  const ProgramRun oom =
      RunProgram({GPUMEM_PYTHON3, "-c",
                  "import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); "
                  "e=[e for e in d['device_traces'][0] if e['action']=='oom'][0]; "
                  "print(e['size'], e['device_free'] > 0, 'addr' in e)",
                  snapshot});
  EXPECT_EQ(oom.out, "268435456 True False\n") << oom.err;
}

// ---- synthetic traces ----

std::string SyntheticTrace(const TempDir& dir) {
  const std::string path = dir.File("synthetic.trace");
  testing::WriteSyntheticExportTrace(path);
  return path;
}

TEST(ExportTest, KernelSlicesUseGpuTimesWhenRecorded) {
  TempDir dir;
  const std::string trace = SyntheticTrace(dir);
  const std::string json = Export(dir, trace, "chrome-json", "p.json");
  const ProgramRun slices =
      RunProgram({GPUMEM_PYTHON3, "-c",
                  "import json,sys; d=json.load(open(sys.argv[1])); "
                  "[print(e['name'], e['ts'], e['dur'], e['args']['time'], e['tid']) "
                  "for e in d['traceEvents'] if e['ph']=='X']",
                  json});
  // The GPU's times, converted from CLOCK_REALTIME to the trace's start; the other at its host
  // launch time, 1 us long.
  EXPECT_EQ(slices.out, "kernel(int*) 20.0 3.5 gpu 2\nkernel(int*) 11.0 1.0 host launch 2\n")
      << slices.err;
}

TEST(ExportTest, FoldedFramesNeverHoldSeparators) {
  TempDir dir;
  const std::string trace = SyntheticTrace(dir);
  const std::string folded = Export(dir, trace, "folded", "s.folded", {"--what", "leaks"});
  // The frame's line break is escaped as every report prints it; its ';' is the format's.
  EXPECT_EQ(ReadFile(folded), "device 0;/home/me/train.py:12 in step,inner\\nline 2097152\n");
  EXPECT_EQ(report::FoldedFrameName("a;b\nc\rd"), "a,b c d");
}

// ---- bad input ----

// One "gpumem: error:" line first (usage errors add "Try 'gpumem export --help'.").
void ExpectErrorLine(const ProgramRun& run, const std::string& text) {
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_EQ(run.err.rfind("gpumem: error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.substr(0, run.err.find('\n')).find(text), std::string::npos) << run.err;
}

TEST(ExportTest, BadUsageIsOneErrorLine) {
  TempDir dir;
  const std::string trace = Trace("leak_loop-h200.trace");
  ExpectErrorLine(Gpumem({"export", "--format", "svg", trace}), "not memory-viz");
  ExpectErrorLine(Gpumem({"export", trace}), "--format FORMAT is required");
  ExpectErrorLine(Gpumem({"export", "--format", "folded", "--what", "all", trace}), "--what");
  ExpectErrorLine(Gpumem({"export", "--format", "perfetto", "--what", "peak", trace}),
                  "folded and speedscope only");
  ExpectErrorLine(Gpumem({"export", "--format", "pprof", "--what", "leaks", trace}),
                  "folded and speedscope only");
  ExpectErrorLine(Gpumem({"export", "--format", "perfetto", "--bogus", trace}), "'--bogus'");
  ExpectErrorLine(Gpumem({"export", "--format", "perfetto"}), "exactly one trace");
  for (const std::string format : {"perfetto", "chrome-json", "pprof"}) {
    const ProgramRun missing =
        Gpumem({"export", "--format", format, dir.File("nope.trace"), "-o", dir.File("x")});
    ExpectErrorLine(missing, dir.File("nope.trace"));
    EXPECT_EQ(missing.err.find('\n'), missing.err.size() - 1) << missing.err;
    EXPECT_FALSE(fs::exists(dir.File("x")));
  }
  const ProgramRun help = Gpumem({"export", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.out.rfind("usage: gpumem export --format FORMAT", 0), 0u) << help.out;
  EXPECT_EQ(Gpumem({"help", "export"}).out, help.out);
}

// A trace cut short exports what could be read, says so in one line, and exits 2; an output that
// cannot be written leaves nothing behind.
TEST(ExportTest, TornTraceExportsWhatCouldBeRead) {
  TempDir dir;
  const std::string whole = ReadFile(Trace("train_mlp-async-h100.trace"));
  const std::string torn = dir.File("torn.trace");
  std::ofstream(torn, std::ios::binary) << whole.substr(0, whole.size() / 2);
  const std::string snapshot = dir.File("torn.pickle");
  const ProgramRun run = Gpumem({"export", "--format", "memory-viz", torn, "-o", snapshot});
  ExpectErrorLine(run, "exported what could be read");
  EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << run.err;
  EXPECT_CHECKED(Check({"memory-viz", snapshot}));

  const ProgramRun unwritable =
      Gpumem({"export", "--format", "folded", torn, "-o", dir.File("no/such/dir/out.folded")});
  ExpectErrorLine(unwritable,
                  "writing " + dir.File("no/such/dir/out.folded") + ": No such file or directory");
  EXPECT_FALSE(fs::exists(dir.File("no")));
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

// Without -o: next to the trace; "-o -": standard output, and the same bytes.
TEST(ExportTest, DefaultOutputAndStandardOutput) {
  TempDir dir;
  const std::string trace = dir.File("run.trace");
  fs::copy_file(Trace("leak_loop-h200.trace"), trace);
  ASSERT_EQ(Gpumem({"export", "--format", "folded", trace}).exit_code, 0);
  ASSERT_EQ(Gpumem({"export", "--format", "memory-viz", trace}).exit_code, 0);
  ASSERT_EQ(Gpumem({"export", "--format", "speedscope", "--what", "leaks", trace}).exit_code, 0);
  EXPECT_TRUE(fs::exists(dir.File("run.pickle")));
  EXPECT_TRUE(fs::exists(dir.File("run.leaks.speedscope.json")));
  const ProgramRun stdout_run = Gpumem({"export", "--format", "folded", trace, "-o", "-"});
  EXPECT_EQ(stdout_run.exit_code, 0);
  EXPECT_EQ(stdout_run.err, "");
  EXPECT_EQ(stdout_run.out, ReadFile(dir.File("run.peak.folded")));
  EXPECT_NE(stdout_run.out.find(" 41943040\n"), std::string::npos) << stdout_run.out;
}

// pprof and Perfetto's protobuf: next to the trace as run.pb.gz (gzip) and run.pftrace; the JSON
// timeline under either of its names as run.perfetto.json.
TEST(ExportTest, ProtobufFormatsThroughTheCommandLine) {
  TempDir dir;
  const std::string trace = dir.File("run.trace");
  fs::copy_file(Trace("train_mlp-async-h100.trace"), trace);
  const ProgramRun pprof = Gpumem({"export", "--format", "pprof", trace});
  EXPECT_EQ(pprof.exit_code, 0) << pprof.err;
  EXPECT_NE(pprof.err.find("gpumem: exported " + trace + " to " + dir.File("run.pb.gz")),
            std::string::npos)
      << pprof.err;
  EXPECT_EQ(ReadFile(dir.File("run.pb.gz")).substr(0, 2), "\x1f\x8b");  // gzip's magic
  ASSERT_EQ(Gpumem({"export", "--format", "perfetto", trace}).exit_code, 0);
  const std::string pftrace = ReadFile(dir.File("run.pftrace"));
  ASSERT_FALSE(pftrace.empty());
  EXPECT_EQ(pftrace[0], '\x0a');  // Trace.packet: field 1, length-delimited
  ASSERT_EQ(Gpumem({"export", "--format", "perfetto-json", trace}).exit_code, 0);
  const std::string json = ReadFile(dir.File("run.perfetto.json"));
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u);
  const ProgramRun chrome = Gpumem({"export", "--format", "chrome-json", trace, "-o", "-"});
  EXPECT_EQ(chrome.out, json);
  // The protobuf is far smaller than the JSON of the same timeline.
  EXPECT_LT(pftrace.size() * 5, json.size());
}

// An output that cannot be written whole (here at a file-size limit, met as EFBIG: gpumem ignores
// SIGXFSZ) is one error line and exit 2, and leaves neither the output nor a temporary file.
TEST(ExportTest, AnOutputCutShortLeavesNothing) {
  TempDir dir;
  const std::string trace = dir.File("run.trace");
  fs::copy_file(Trace("train_mlp-async-h100.trace"), trace);
  for (const std::string format : {"perfetto", "chrome-json", "pprof"}) {
    SCOPED_TRACE(format);
    const std::string output = dir.File("out." + format);
    ProgramRun run;
    {
      const testing::FileSizeLimit limit(4096);
      run = Gpumem({"export", "--format", format, "-o", output, trace});
    }
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_EQ(run.err, "gpumem: error: writing " + output + ": File too large\n");
    EXPECT_FALSE(fs::exists(output));
  }
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string(), "run.trace");
  }
}

// ---- pprof itself ----

// The `go` command on PATH ("" when absent): its `go tool pprof` is the reference reader of
// profile.proto (Debian's golang-go).
std::string GoCommand() {
  const char* path = std::getenv("PATH");
  std::stringstream entries(path != nullptr ? path : "");
  for (std::string entry; std::getline(entries, entry, ':');) {
    const fs::path go = fs::path(entry.empty() ? "." : entry) / "go";
    if (access(go.c_str(), X_OK) == 0) return go.string();
  }
  return "";
}

// `go tool pprof ARGS...` (its caches in `dir`, not the user's home).
ProgramRun Pprof(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {GoCommand(), "tool", "pprof"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProgramRun run = testing::RunProgram(
      argv, {{"HOME", dir.path()}, {"GOCACHE", dir.File("gocache")}, {"PPROF_TMPDIR", dir.path()}});
  EXPECT_EQ(run.spawn_error, 0);
  return run;
}

// The samples of `go tool pprof -raw`: one row of the six values per sample.
std::vector<std::vector<uint64_t>> RawSamples(const std::string& raw) {
  std::vector<std::vector<uint64_t>> samples;
  std::stringstream lines(raw);
  bool in_samples = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Samples:", 0) == 0) {
      in_samples = true;
      continue;
    }
    if (line.rfind("Locations", 0) == 0) break;
    const size_t colon = line.find(':');
    if (!in_samples || colon == std::string::npos || line.find('[') != std::string::npos) continue;
    std::stringstream numbers(line.substr(0, colon));
    std::vector<uint64_t> values;
    for (uint64_t value; numbers >> value;) values.push_back(value);
    if (values.size() == 6) samples.push_back(values);
  }
  return samples;
}

// The JSON report's integer fields `key` after `"section":` and before `"until":`, in order.
std::vector<uint64_t> JsonNumbers(const std::string& json, const std::string& section,
                                  const std::string& key, const std::string& until = "") {
  const size_t begin = json.find("\"" + section + "\":");
  const size_t end = until.empty() ? json.size() : json.find("\"" + until + "\":", begin);
  const std::string needle = "\"" + key + "\":";
  std::vector<uint64_t> numbers;
  for (size_t at = json.find(needle, begin); at < end; at = json.find(needle, at + 1)) {
    numbers.push_back(std::stoull(json.substr(at + needle.size())));  // stoull skips spaces
  }
  return numbers;
}

uint64_t JsonSum(const std::string& json, const std::string& section, const std::string& key,
                 const std::string& until) {
  uint64_t sum = 0;
  for (const uint64_t number : JsonNumbers(json, section, key, until)) sum += number;
  return sum;
}

uint64_t JsonFirst(const std::string& json, const std::string& section, const std::string& key) {
  const std::vector<uint64_t> numbers = JsonNumbers(json, section, key);
  return numbers.empty() ? 0 : numbers.front();
}

// pprof reads the export: its samples add up to the report's peak and never-freed bytes, and its
// top function is the program's own line.
TEST(ExportTest, PprofItselfReadsTheProfile) {
  if (GoCommand().empty()) GTEST_SKIP() << "no `go` on PATH (apt-get install golang-go)";
  TempDir dir;
  const std::string trace = Trace("leak_loop-h200.trace");
  const std::string profile = Export(dir, trace, "pprof", "leak.pb.gz");
  const ProgramRun raw = Pprof(dir, {"-raw", profile});
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  const std::vector<std::vector<uint64_t>> samples = RawSamples(raw.out);
  ASSERT_FALSE(samples.empty()) << raw.out;
  EXPECT_NE(raw.out.find("peak_space/bytes[dflt]"), std::string::npos) << raw.out;
  uint64_t peak = 0;
  uint64_t never_freed = 0;
  for (const std::vector<uint64_t>& sample : samples) {
    peak += sample[3];
    never_freed += sample[5];
  }
  const std::string json = Gpumem({"report", "--json", trace}).out;
  // peak_bytes appears once per place; the leaks' places hold "bytes" before their sites.
  EXPECT_EQ(peak, JsonSum(json, "peak", "peak_bytes", "leaks"));
  // The leaks' place: its "bytes" come before its sites' (one place in this trace).
  EXPECT_EQ(never_freed, JsonFirst(json, "leaks", "bytes"));
  EXPECT_EQ(never_freed, 41943040u);  // the program's 10 x 4 MiB
  const ProgramRun top = Pprof(dir, {"-top", "-sample_index=never_freed_space", profile});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("Type: never_freed_space"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("100%  leak_iteration()"), std::string::npos) << top.out;
}

}  // namespace
}  // namespace gpumem
