// Memory pools' own sizes, recorded from the pools' attributes (core/driver_queries.h,
// NotePoolUsage) under the real preload library against the fake CUDA: the stream_ordered sample
// allocates from its device's default pool and from a pool it creates, and the trace holds one
// PoolUsage packet per change of each pool's reserved size, none for allocations that fit.
//
// The fake pool reserves in 2 MiB steps as its use grows and never gives memory back, so the
// sample's sizes are known: the default pool serves 8 x 4 MiB, one at a time (4 MiB reserved),
// then 6 MiB (6 MiB); the created pool serves 3 x 8 MiB live together (8, 16, 24 MiB).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::RecordingEnvironment;
using testing::RunProgram;
using testing::TempDir;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Reserved sizes recorded per pool, in trace order; the pools in order of first appearance.
struct PoolSizes {
  std::vector<uint64_t> pools;
  std::map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>> reserved_and_used;
};

PoolSizes RecordStreamOrdered(const std::map<std::string, std::string>& extra = {}) {
  TempDir dir;
  auto environment = RecordingEnvironment(dir.File("run.trace"));
  for (const auto& [name, value] : extra) environment[name] = value;
  const ProgramRun run = RunProgram({BuildPath("bin/stream_ordered")}, environment);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  PoolSizes sizes;
  auto file = report::TraceFile::Read(
      dir.File("run.trace"), [&](const report::PacketPosition&, const TracePacket& packet) {
        if (!packet.has_pool_usage()) return;
        const PoolUsage& usage = packet.pool_usage();
        EXPECT_EQ(usage.device(), 0);
        auto& series = sizes.reserved_and_used[usage.pool()];
        if (series.empty()) sizes.pools.push_back(usage.pool());
        series.emplace_back(usage.reserved_bytes(), usage.used_bytes());
      });
  EXPECT_TRUE(file.ok()) << file.status();
  return sizes;
}

TEST(PoolUsage, EachChangeOfAPoolsReservedSizeIsRecordedOnce) {
  const PoolSizes sizes = RecordStreamOrdered();
  ASSERT_EQ(sizes.pools.size(), 2u);
  using Series = std::vector<std::pair<uint64_t, uint64_t>>;
  // The default pool: 4 MiB at the first allocation (nothing for the seven after it, which fit),
  // 6 MiB at the leaked one.
  EXPECT_EQ(sizes.reserved_and_used.at(sizes.pools[0]),
            (Series{{4 * kMiB, 4 * kMiB}, {6 * kMiB, 6 * kMiB}}));
  // The created pool: one step per 8 MiB buffer, all three live together.
  EXPECT_EQ(sizes.reserved_and_used.at(sizes.pools[1]),
            (Series{{8 * kMiB, 8 * kMiB}, {16 * kMiB, 16 * kMiB}, {24 * kMiB, 24 * kMiB}}));
}

TEST(PoolUsage, WithoutCuptiTheAttributesStillTellThePoolSizes) {
  const PoolSizes sizes = RecordStreamOrdered({{"GPUMEM_CUPTI", "0"}});
  ASSERT_EQ(sizes.pools.size(), 2u);
  EXPECT_EQ(sizes.reserved_and_used.at(sizes.pools[0]).back().first, 6 * kMiB);
  EXPECT_EQ(sizes.reserved_and_used.at(sizes.pools[1]).back().first, 24 * kMiB);
}

}  // namespace
}  // namespace gpumem
