// The allocator replay (report/allocator/allocator_replay.h) and `gpumem whatif` on the traces recorded on an
// H100 (samples/traces/): the tensors of train_mlp.py recorded under backend:cudaMallocAsync,
// replayed through each model, against what PyTorch really reserved when the same script ran under
// its native allocator and with expandable segments (those traces record the segments); then the
// command's verdicts, its smallest fit, its out-of-memory post-mortem and its input errors.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "report/allocator/allocator_replay.h"
#include "report/trace/event_stream.h"
#include "report/stacks/memory_holders.h"
#include "report/analysis/summary_table.h"
#include "report/trace/trace_file.h"
#include "tests/support/synthetic_events.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using testing::BuildPath;
using testing::ProgramRun;
using testing::RunProgram;
using testing::SourcePath;

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string Sample(const std::string& name) { return SourcePath("samples/traces/" + name); }

// The GPU reserved memory peak the summary table measures from a segment-level trace: what PyTorch
// itself reserved (equal to its max_memory_reserved(), README "Verified").
uint64_t MeasuredReservedPeak(const std::string& name) {
  absl::StatusOr<std::unique_ptr<TraceFile>> file = TraceFile::Open(Sample(name));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return 0;
  SummaryAnalysis analysis(**file);
  StreamMemoryEventsBySeq(**file, [&analysis](const MemoryEvent& event) { analysis.Add(event); });
  const Summary summary = analysis.Finish();
  EXPECT_EQ(summary.mode, SummaryMode::kSegments);
  EXPECT_EQ(summary.devices.size(), 1u);
  return summary.devices.empty() ? 0 : summary.devices[0].reserved_bytes.all.peak;
}

ModelledDevice ReplayedAsync(AllocatorKind kind, uint64_t device_memory = kUnlimitedDeviceMemory) {
  absl::StatusOr<AllocatorReplayResult> result =
      ReplayThroughAllocator(Sample("train_mlp-async-h100.trace"), kind, device_memory);
  EXPECT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->mode, SummaryMode::kTensors);
  EXPECT_EQ(result->devices.size(), 1u);
  return result->devices.empty() ? ModelledDevice{} : result->devices[0];
}

TEST(AllocatorReplay, NativeModelReservesWhatPyTorchReservedForTheSameScript) {
  const ModelledDevice native = ReplayedAsync(AllocatorKind::kNative);
  EXPECT_EQ(native.allocations, 475u);  // PyTorch's own allocation.all.allocated
  // Exactly: 88 MiB = 3 large segments (20 + 20 + 44 MiB) and 2 small ones, as measured.
  EXPECT_EQ(native.stats.reserved_peak, MeasuredReservedPeak("train_mlp-default-h100.trace"));
  EXPECT_EQ(native.stats.reserved_peak, 92274688u);
  EXPECT_EQ(native.stats.segments, 5u);
  // Blocks rounded to 512 bytes: 2432 bytes more than the async run's max_memory_allocated()
  // (87573120), where nothing is rounded.
  EXPECT_EQ(native.stats.allocated_peak, 87575552u);
  EXPECT_FALSE(native.oom.has_value());
  // cuBLAS's own workspaces are not the allocator's: 128.25 MiB of them live at exit, 2 KiB more
  // at most.
  EXPECT_EQ(native.outside_peak, 134479872u + 2048u);
}

// NCCL's buffers (cuMemCreate from libnccl) are outside the allocator while the driver keeps them
// (NCCL's free: retain, release, unmap, release); a peer's imported buffer is not this device's.
TEST(AllocatorReplay, NcclBuffersAreOutsideTheAllocator) {
  Frame c10;
  c10.module = "/x/torch/lib/libc10_cuda.so";
  Frame nccl;
  nccl.module = "/x/nvidia/nccl/lib/libnccl.so.2";
  const MemoryHolder* pytorch = FindMemoryHolder({c10}, false);
  const MemoryHolder* nccl_holder = FindMemoryHolder({nccl}, false);
  ASSERT_NE(nccl_holder, nullptr);
  AllocatorReplay replay(AllocatorKind::kNative, kUnlimitedDeviceMemory,
                         [&](uint64_t stack_id) { return stack_id == 2 ? nccl_holder : pytorch; });
  testing::SyntheticEvents events;
  const uint64_t base = 0x7f00'0000'0000;
  events.Add(CUDA_MALLOC_ASYNC, POOL, ALLOC, 0, kMiB, 0x1000'0000, 1);  // a tensor
  events.Add(CU_MEM_IMPORT_FROM_SHAREABLE_HANDLE, VMM_IMPORTED, ALLOC, -1, 0, 0, 2, 0xE);
  events.Add(CU_MEM_MAP, VMM_MAPPING, ALLOC, -1, 16 * kMiB, base + 64 * kMiB, 2, 0xE);
  events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 4 * kMiB, 0, 2, 0xA);
  events.Add(CU_MEM_MAP, VMM_MAPPING, ALLOC, -1, 4 * kMiB, base, 2, 0xA);
  events.Add(CU_MEM_RETAIN_ALLOCATION_HANDLE, VMM_PHYSICAL, RETAIN, -1, 0, base, 0, 0xA);
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xA);
  events.Add(CU_MEM_UNMAP, VMM_MAPPING, FREE, -1, 4 * kMiB, base);
  events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 2 * kMiB, 0, 2, 0xB);  // 4 MiB still held
  events.Add(CU_MEM_RELEASE, VMM_PHYSICAL, FREE, -1, 0, 0, 0, 0xA);
  events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 2 * kMiB, 0, 2, 0xC);  // 0xA gone: 4 MiB
  for (const MemoryEvent& event : events.events()) replay.Add(event);
  const AllocatorReplayResult result = replay.Finish();
  EXPECT_EQ(result.mode, SummaryMode::kTensors);
  ASSERT_EQ(result.devices.size(), 1u);
  EXPECT_EQ(result.devices[0].device, 0);
  EXPECT_EQ(result.devices[0].outside_peak, 6 * kMiB);
}

TEST(AllocatorReplay, ExpandableModelReservesWhatPyTorchReservedWithExpandableSegments) {
  const ModelledDevice expandable = ReplayedAsync(AllocatorKind::kExpandable);
  // Exactly: 104 MiB, the 7 cuMemCreate pages of the expandable-segments run (5 x 20 + 2 x 2 MiB).
  EXPECT_EQ(expandable.stats.reserved_peak,
            MeasuredReservedPeak("train_mlp-expandable-h100.trace"));
  EXPECT_EQ(expandable.stats.reserved_peak, 109051904u);
  EXPECT_EQ(expandable.stats.segment_allocations, 7u);
}

TEST(AllocatorReplay, AsyncModelIsALowerBoundOfThePoolsOwnSize) {
  const ModelledDevice async = ReplayedAsync(AllocatorKind::kAsync);
  // The live peak (83.52 MiB) rounded up to 2 MiB; the pool's own attribute said 96 MiB
  // (100663296 bytes): the driver packs with gaps the model does not know.
  EXPECT_EQ(async.stats.reserved_peak, 84 * kMiB);
  EXPECT_LT(async.stats.reserved_peak, 100663296u);
  EXPECT_FALSE(async.knows_blocks);
}

TEST(AllocatorReplay, RunsOutWhereTheLimitIsReachedAndStopsThere) {
  const ModelledDevice native = ReplayedAsync(AllocatorKind::kNative, 60 * kMiB);
  ASSERT_TRUE(native.oom.has_value());
  EXPECT_EQ(native.oom->seq, 52u);
  EXPECT_EQ(native.oom->size, 32 * kMiB);
  EXPECT_EQ(native.oom->live.bytes, 41864240u);
  EXPECT_EQ(native.oom->live.count, 16u);
  EXPECT_EQ(native.stats.retries, 1u);  // the cache was emptied once before giving up
  // By stack, largest first, adding up to the live set (the command merges stacks into call sites).
  Tally sum;
  for (const SiteTally& site : native.oom->live_sites) sum.Add(site.tally);
  EXPECT_EQ(sum.bytes, native.oom->live.bytes);
  EXPECT_EQ(sum.count, native.oom->live.count);
  ASSERT_FALSE(native.oom->live_sites.empty());
  EXPECT_EQ(native.oom->live_sites[0].tally.bytes, 32 * kMiB);
}

// ---- the command ----

ProgramRun Whatif(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem"), "whatif"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, {{"GPUMEM_SYMBOL_PATH", ""}});
}

TEST(WhatifCommand, SmallestFitFitsAndTwoMiBLessRunsOut) {
  const struct {
    const char* allocator;
    uint64_t smallest;
  } kCases[] = {{"native", 92274688}, {"expandable", 109051904}, {"async", 88080384}};
  for (const auto& [allocator, smallest] : kCases) {
    const std::string trace = Sample("train_mlp-async-h100.trace");
    const ProgramRun at =
        Whatif({"--device-memory", std::to_string(smallest), "--allocator", allocator, trace});
    EXPECT_EQ(at.exit_code, 0) << allocator << ": " << at.err;
    EXPECT_NE(at.out.find(std::string("smallest device memory it fits: ") +
                          std::to_string(smallest / kMiB) + ".00 MiB (" + std::to_string(smallest) +
                          " bytes)"),
              std::string::npos)
        << at.out;
    EXPECT_NE(at.out.find(std::string("whatif: ") + allocator + " fits\n"), std::string::npos);
    const ProgramRun below = Whatif(
        {"--device-memory", std::to_string(smallest - 2 * kMiB), "--allocator", allocator, trace});
    EXPECT_EQ(below.exit_code, 1) << allocator << ": " << below.err;
    EXPECT_NE(below.out.find("OUT OF MEMORY"), std::string::npos) << below.out;
    EXPECT_NE(below.out.find(std::string("whatif: ") + allocator + " runs out\n"),
              std::string::npos);
  }
}

TEST(WhatifCommand, NamesTheFailingRequestAndWhatWasLiveByCallSite) {
  const ProgramRun run = Whatif(
      {"--device-memory=60MiB", "--allocator", "native", Sample("train_mlp-async-h100.trace")});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  const std::string& out = run.out;
  const size_t oom = out.find(
      "out of memory at seq 52, 10422.375 ms after start: a request of 32.00 MiB (33554432 bytes) "
      "on stream 0, after 1 retry that emptied the cache");
  ASSERT_NE(oom, std::string::npos) << out;
  const size_t live = out.find("live then: 39.92 MiB (41864240 bytes) in 16 allocations", oom);
  ASSERT_NE(live, std::string::npos) << out;
  // The largest call site first: the ReLU activations of train_step, 5 of them.
  const size_t largest = out.find("33.50 MiB   83.9%  5 allocations", live);
  ASSERT_NE(largest, std::string::npos) << out;
  EXPECT_LT(out.find("train_mlp.py:75 in make_training.<locals>.train_step", largest),
            out.find("6.01 MiB", largest));
}

TEST(WhatifCommand, EveryAllocatorByDefaultAndSizesAsElsewhere) {
  const ProgramRun run =
      Whatif({"--device-memory", "1.5GiB", Sample("train_mlp-async-h100.trace")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("1.50 GiB (1610612736 bytes) per device"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("whatif: native fits, expandable fits, async fits\n"), std::string::npos);
  EXPECT_EQ(Whatif({"--device-memory", "8G", Sample("train_mlp-async-h100.trace")}).exit_code, 0);
}

TEST(WhatifCommand, PlainProgramsReplayThroughTheAsyncModelOnly) {
  const std::string trace = Sample("leak_loop-h200.trace");
  const ProgramRun run = Whatif({"--device-memory", "8GiB", trace});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\nasync, device 0"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("\nnative,"), std::string::npos) << run.out;
  // 56 MiB live at its peak (samples/leak_loop): 54 MiB is too little.
  EXPECT_EQ(Whatif({"--device-memory", "54MiB", trace}).exit_code, 1);
  const ProgramRun native = Whatif({"--device-memory", "8GiB", "--allocator", "native", trace});
  EXPECT_EQ(native.exit_code, 2);
  EXPECT_NE(native.err.find("only --allocator async applies"), std::string::npos) << native.err;
}

// Bad input: exit 2, one error line (and the usage hint for usage errors).
TEST(WhatifCommand, BadInputIsOneLineAndExitTwo) {
  const std::string trace = Sample("train_mlp-async-h100.trace");
  const ProgramRun segments =
      Whatif({"--device-memory", "8GiB", Sample("train_mlp-default-h100.trace")});
  EXPECT_EQ(segments.exit_code, 2);
  EXPECT_EQ(segments.out, "");
  EXPECT_EQ(segments.err,
            "gpumem: error: " + Sample("train_mlp-default-h100.trace") +
                ": recorded under PyTorch's caching allocator: only its segments are visible; "
                "record with `gpumem record --tensors`\n");
  const ProgramRun missing = Whatif({"--device-memory", "8GiB", "/nonexistent.trace"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{trace},
        {"--device-memory", "lots", trace},
        {"--device-memory", "8GiB", "--allocator", "tlsf", trace},
        {"--device-memory", "8GiB", "--bogus", trace},
        {"--device-memory", "8GiB"}}) {
    const ProgramRun run = Whatif(args);
    EXPECT_EQ(run.exit_code, 2) << args.size();
    EXPECT_EQ(run.err.rfind("gpumem: error: whatif: ", 0), 0u) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 2) << run.err;  // + the hint
  }
}

}  // namespace
}  // namespace gpumem::report
