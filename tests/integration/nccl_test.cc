// NCCL's device buffers under the real preload library against the fake CUDA
// (programs/fake_nccl.cc, built as libnccl.so.2): every cuMem* call recorded exactly once whichever
// way it reached the driver (cudaGetDriverEntryPointByVersion, cuGetProcAddress, the exported
// symbol), NCCL's free sequence (retain, release, unmap, release) replayed without anomalies, a
// peer's imported buffer kept out of the device peak, a true double release still reported, the
// buffers labelled as NCCL's, and the ranks of two processes in one table.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "report/replay/event_counts.h"
#include "report/format/names.h"
#include "report/replay/replay.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::RecordingEnvironment;
using testing::RunProgram;
using testing::TempDir;

constexpr uint64_t kMiB = uint64_t{1} << 20;

using Counts = std::map<std::string, uint64_t>;  // "action api" -> count, cuMem* APIs only

// Runs nccl_buffers with `args`, recording into `dir`; the traces it left, the parent's first.
std::vector<std::string> Record(const std::string& dir, const std::vector<std::string>& args,
                                const std::map<std::string, std::string>& extra = {}) {
  auto environment = RecordingEnvironment(dir);
  for (const auto& [name, value] : extra) environment[name] = value;
  std::vector<std::string> argv = {BuildPath("tests/programs/nccl_buffers")};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProgramRun run = RunProgram(argv, environment);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  std::vector<std::pair<uint32_t, std::string>> traces;  // (parent pid, path): the parent has 0
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    auto replayed = report::ReplayTrace(entry.path().string());
    EXPECT_TRUE(replayed.ok()) << replayed.status();
    if (replayed.ok()) {
      traces.emplace_back(replayed->file->header().parent_pid(), entry.path().string());
    }
  }
  std::sort(traces.begin(), traces.end());
  std::vector<std::string> paths;
  for (const auto& [parent, path] : traces) paths.push_back(path);
  return paths;
}

Counts CuMemCounts(const std::string& trace) {
  Counts counts;
  auto counted = report::CountTraceFile(trace);
  EXPECT_TRUE(counted.ok()) << counted.status();
  if (!counted.ok()) return counts;
  for (const auto& [key, tally] : counted->counts.by_action_api) {
    if (key.second.rfind("cuMem", 0) == 0) {
      counts[report::ActionName(key.first) + " " + key.second] = tally.count;
    }
  }
  return counts;
}

TEST(Nccl, EveryCuMemCallOnceNoAnomaliesImportedMemoryApart) {
  TempDir dir;
  const std::vector<std::string> traces = Record(dir.path(), {"peer"});
  ASSERT_EQ(traces.size(), 2u) << "the program and its forked peer";
  // Three buffers, each through another door to the driver, freed the NCCL way; one import of the
  // process's own exported handle, released once more.
  EXPECT_EQ(CuMemCounts(traces[0]), (Counts{{"alloc cuMemAddressReserve", 3},
                                            {"alloc cuMemCreate", 3},
                                            {"alloc cuMemImportFromShareableHandle", 1},
                                            {"alloc cuMemMap", 3},
                                            {"free cuMemAddressFree", 3},
                                            {"free cuMemRelease", 7},
                                            {"free cuMemUnmap", 3},
                                            {"retain cuMemRetainAllocationHandle", 3}}));
  // The peer: the parent's 10 MiB imported and mapped, and 2 MiB of its own.
  EXPECT_EQ(CuMemCounts(traces[1]), (Counts{{"alloc cuMemAddressReserve", 2},
                                            {"alloc cuMemCreate", 1},
                                            {"alloc cuMemImportFromShareableHandle", 1},
                                            {"alloc cuMemMap", 2},
                                            {"free cuMemAddressFree", 2},
                                            {"free cuMemRelease", 4},
                                            {"free cuMemUnmap", 2},
                                            {"retain cuMemRetainAllocationHandle", 2}}));
  const uint64_t expected_peaks[] = {14 * kMiB, 2 * kMiB};
  const uint64_t expected_imported[] = {0, 10 * kMiB};
  for (size_t i = 0; i < traces.size(); ++i) {
    auto replayed = report::ReplayTrace(traces[i]);
    ASSERT_TRUE(replayed.ok()) << replayed.status();
    EXPECT_EQ(replayed->anomalies.total(), 0u)
        << traces[i] << ": " << report::DescribeAnomalies(replayed->anomalies);
    ASSERT_EQ(replayed->places.size(), 1u) << traces[i];
    EXPECT_EQ(replayed->places[0].place, 0);
    EXPECT_EQ(replayed->places[0].peak_bytes, expected_peaks[i]) << traces[i];
    EXPECT_EQ(replayed->places[0].live.bytes, 0u) << traces[i];
    EXPECT_EQ(replayed->imported_mapped_peak_bytes, expected_imported[i]) << traces[i];
  }
  for (const std::string& trace : traces) {
    auto counted = report::CountTraceFile(trace);
    ASSERT_TRUE(counted.ok()) << counted.status();
    EXPECT_EQ(counted->counts.live.count, 0u) << trace << ": nothing live at exit";
  }
  // The summary table's devices: the peer's own only (the imported handle is on none of them).
  const ProgramRun summary =
      RunProgram({BuildPath("bin/gpumem"), "report", "--summary", traces[1]});
  EXPECT_EQ(summary.exit_code, 0) << summary.err;
  const size_t table = summary.out.find("memory summary, device ID 0");
  ASSERT_NE(table, std::string::npos) << summary.out;
  EXPECT_EQ(summary.out.find("memory summary, device ID", table + 1), std::string::npos)
      << summary.out;
  const ProgramRun report = RunProgram({BuildPath("bin/gpumem"), "report", traces[1]});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("anomalies: none"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("mapped from other processes (their memory, counted in their traces): "
                            "at most 10.00 MiB"),
            std::string::npos)
      << report.out;
  EXPECT_NE(report.out.find("2.00 MiB  100.0%  1 allocation  [held by NCCL]"), std::string::npos)
      << report.out;
}

TEST(Nccl, AReleasePastTheLastReferenceIsADoubleFree) {
  TempDir dir;
  const std::vector<std::string> traces = Record(dir.path(), {"double_release"});
  ASSERT_EQ(traces.size(), 1u);
  auto replayed = report::ReplayTrace(traces[0]);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_EQ(replayed->anomalies.double_frees, 1u) << report::DescribeAnomalies(replayed->anomalies);
  EXPECT_EQ(replayed->anomalies.total(), 1u);
}

// Two ranks of one job (torchrun's variables), each keeping one 2 MiB NCCL buffer at exit.
TEST(Nccl, TheCombinedReportHasARowPerRank) {
  TempDir dir;
  for (const char* rank : {"1", "0"}) {
    Record(dir.path(), {"keep"}, {{"RANK", rank}, {"LOCAL_RANK", rank}, {"WORLD_SIZE", "2"}});
  }
  const ProgramRun text = RunProgram({BuildPath("bin/gpumem"), "report", dir.path()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const size_t table = text.out.find("\nranks: a row per process and device");
  ASSERT_NE(table, std::string::npos) << text.out;
  const size_t rank0 = text.out.find("\n  0      ", table);
  const size_t rank1 = text.out.find("\n  1      ", table);
  ASSERT_NE(rank0, std::string::npos) << text.out;
  ASSERT_NE(rank1, std::string::npos) << text.out;
  EXPECT_LT(rank0, rank1) << "rows in rank order";
  EXPECT_NE(text.out.find("device 0", rank0), std::string::npos);
  EXPECT_NE(text.out.find("at the peak: NCCL 14.00 MiB\n         at exit: NCCL 2.00 MiB", rank0),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("%  rank 0  pid "), std::string::npos) << "in the combined peak";
  EXPECT_NE(text.out.find("process: pid "), std::string::npos);
  EXPECT_NE(text.out.find(" (rank 1 of 2, local rank 1) on "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("held by NCCL: 2.00 MiB in 1 allocation"), std::string::npos) << text.out;

  const ProgramRun json = RunProgram({BuildPath("bin/gpumem"), "report", "--json", dir.path()});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const size_t ranks = json.out.find("\"ranks\":[{\"rank\":0,\"local_rank\":0,\"world_size\":2,");
  ASSERT_NE(ranks, std::string::npos) << json.out;
  EXPECT_NE(json.out.find("{\"rank\":1,\"local_rank\":1,\"world_size\":2,", ranks),
            std::string::npos);
  EXPECT_NE(json.out.find("\"held_at_exit\":[{\"id\":\"nccl_buffers\",\"name\":\"NCCL\","
                          "\"bytes\":2097152}]",
                          ranks),
            std::string::npos)
      << json.out;
}

}  // namespace
}  // namespace gpumem
