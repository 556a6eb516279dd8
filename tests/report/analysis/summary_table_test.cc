// `gpumem report --summary`: the torch.cuda.memory_summary() layout and unit formatting, the rows
// per recording mode on synthetic events with hand-computed values (large/small pool split, VMM
// physical memory, OOMs and retries, memory PyTorch does not count), and the bundled H100 traces
// against the figures PyTorch itself reported for the same runs.
#include "report/analysis/summary_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "report/stacks/memory_holders.h"
#include "report/stacks/symbolizer.h"
#include "tests/support/summary_stats.h"
#include "tests/support/synthetic_events.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using gpumem::testing::BuildPath;
using gpumem::testing::ExpectStat;
using gpumem::testing::FooterPacket;
using gpumem::testing::Framed;
using gpumem::testing::HeaderPacket;
using gpumem::testing::ProgramRun;
using gpumem::testing::RunProgram;
using gpumem::testing::SourcePath;
using gpumem::testing::TempDir;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;

// ---- unit formatting: PyTorch's _format_size and _format_count ----

TEST(SummaryFormat, SizesTakeTheUnitOfTheReference) {
  EXPECT_EQ(FormatSummarySize(0, 0), "     0 B  ");
  EXPECT_EQ(FormatSummarySize(512, 512), "   512 B  ");
  // The next unit only once the reference is 768 of the current one.
  EXPECT_EQ(FormatSummarySize(786431, 786431), "786431 B  ");
  EXPECT_EQ(FormatSummarySize(786432, 786432), "   768 KiB");
  EXPECT_EQ(FormatSummarySize(92274688, 92274688), " 90112 KiB");  // 88 MiB
  EXPECT_EQ(FormatSummarySize(768 * kMiB, 768 * kMiB), "   768 MiB");
  EXPECT_EQ(FormatSummarySize(5 * 1024 * kMiB, 5 * 1024 * kMiB), "  5120 MiB");
  // Divided by rounding down; a sub-row is written in the unit of its "all" row.
  EXPECT_EQ(FormatSummarySize(1023, 92274688), "     0 KiB");
  EXPECT_EQ(FormatSummarySize(4 * kMiB + 1023, 92274688), "  4096 KiB");
  EXPECT_EQ(FormatSummarySize(0, 5 * 1024 * kMiB), "     0 MiB");
  // PiB is the last unit; wider numbers widen the cell, as in PyTorch.
  EXPECT_EQ(FormatSummarySize(uint64_t{1} << 60, uint64_t{1} << 60), "  1024 PiB");
  EXPECT_EQ(FormatSummarySize(1234567, 1), "1234567 B  ");
}

TEST(SummaryFormat, CountsTakeTheUnitOfTheReference) {
  EXPECT_EQ(FormatSummaryCount(0, 0), "      0   ");
  EXPECT_EQ(FormatSummaryCount(475, 475), "    475   ");
  EXPECT_EQ(FormatSummaryCount(749999, 749999), " 749999   ");
  EXPECT_EQ(FormatSummaryCount(750000, 750000), "    750 K ");
  EXPECT_EQ(FormatSummaryCount(123, 2000000), "      0 K ");
  EXPECT_EQ(FormatSummaryCount(999999999, 999999999), "    999 M ");
  EXPECT_EQ(FormatSummaryCount(1000000000000, 1000000000000), "1000000 M ");
}

// ---- synthetic events ----

const MemoryHolder* HolderIn(const std::string& module) {
  Frame frame;
  frame.module = module;
  return FindMemoryHolder({frame}, false);
}
const MemoryHolder* PyTorch() { return HolderIn("/site-packages/torch/lib/libc10_cuda.so"); }
const MemoryHolder* Cublas() { return HolderIn("/opt/nvidia/lib/libcublas.so.13"); }

// Stacks of the synthetic events: 1 PyTorch's allocator, 2 cuBLAS, anything else the program.
constexpr uint64_t kTorchStack = 1;
constexpr uint64_t kCublasStack = 2;
constexpr uint64_t kProgramStack = 3;

const MemoryHolder* HolderOf(uint64_t stack_id) {
  if (stack_id == kTorchStack) return PyTorch();
  if (stack_id == kCublasStack) return Cublas();
  return nullptr;
}

class Events : public testing::SyntheticEvents {
 public:
  using SyntheticEvents::Free;
  void Malloc(uint64_t size, uint64_t address, uint64_t stack_id, int32_t device = 0) {
    Add(CUDA_MALLOC, DEVICE, ALLOC, device, size, address, stack_id);
  }
  void MallocFailed(uint64_t size, uint64_t stack_id, int32_t result = 2) {
    Add(CUDA_MALLOC, DEVICE, ALLOC_FAILED, 0, size, 0, stack_id).set_result(result);
  }
  void Free(uint64_t address) { Add(CUDA_FREE, KIND_UNKNOWN, FREE, -1, 0, address, 0); }
  void MallocAsync(uint64_t size, uint64_t address, uint64_t stack_id) {
    Add(CUDA_MALLOC_ASYNC, POOL, ALLOC, 0, size, address, stack_id);
  }
  void FreeAsync(uint64_t address) { Add(CUDA_FREE_ASYNC, POOL, FREE, -1, 0, address, 0); }
  void CuMemAlloc(uint64_t size, uint64_t address, uint64_t stack_id) {
    Add(CU_MEM_ALLOC, DEVICE, ALLOC, 0, size, address, stack_id);
  }

  Summary Run(SummaryModelChoice model = SummaryModelChoice::kNone) const {
    return ComputeSummary(events_, HolderOf, model);
  }
};

const SummaryRow& Row(const std::vector<SummaryRow>& rows, const std::string& metric) {
  for (const SummaryRow& row : rows) {
    if (metric == row.metric) return row;
  }
  static const SummaryRow kMissing{"missing", "missing", false, false, nullptr};
  ADD_FAILURE() << "no row " << metric;
  return kMissing;
}

// The metrics with a value, in order.
std::vector<std::string> Available(const std::vector<SummaryRow>& rows) {
  std::vector<std::string> names;
  for (const SummaryRow& row : rows) {
    if (row.value != nullptr) names.push_back(row.metric);
  }
  return names;
}

// PyTorch's cudaMallocAsync backend: 4 tensors around the 1 MiB line, 2 freed; cuBLAS beside.
Events TensorEvents() {
  Events events;
  events.MallocAsync(512 * kKiB, 0x10'0000, kTorchStack);     // A small
  events.MallocAsync(4 * kMiB, 0x20'0000, kTorchStack);       // B large
  events.MallocAsync(1 * kMiB, 0x80'0000, kTorchStack);       // C small: at most 1 MiB
  events.CuMemAlloc(8 * kMiB, 0x1000'0000, kCublasStack);     // not a tensor
  events.FreeAsync(0x10'0000);                                // A
  events.MallocAsync(1 * kMiB + 1, 0x100'0000, kTorchStack);  // D large: over 1 MiB (peak)
  events.FreeAsync(0x20'0000);                                // B
  return events;
}

TEST(SummaryTensors, TensorRowsAreMeasuredAndSplitByTheOneMiBRule) {
  const Summary summary = TensorEvents().Run();
  EXPECT_EQ(summary.mode, SummaryMode::kTensors);
  ASSERT_EQ(summary.devices.size(), 1u);
  const DeviceSummary& device = summary.devices[0];
  EXPECT_EQ(device.device, 0);
  // Live: A .5 | A B 4.5 | A B C 5.5 | B C 5 | B C D 6 MiB + 1 (peak) | C D 2 MiB + 1.
  ExpectStat(device.allocated_bytes.all, 2 * kMiB + 1, 6 * kMiB + 1, 6 * kMiB + 512 * kKiB + 1,
             4 * kMiB + 512 * kKiB, "bytes, all");
  ExpectStat(device.allocated_bytes.large_pool, 1 * kMiB + 1, 5 * kMiB + 1, 5 * kMiB + 1, 4 * kMiB,
             "bytes, large pool");
  ExpectStat(device.allocated_bytes.small_pool, 1 * kMiB, 1536 * kKiB, 1536 * kKiB, 512 * kKiB,
             "bytes, small pool");
  ExpectStat(device.allocations.all, 2, 3, 4, 2, "count, all");
  ExpectStat(device.allocations.large_pool, 1, 2, 2, 1, "count, large pool");
  ExpectStat(device.allocations.small_pool, 1, 2, 2, 1, "count, small pool");

  const std::vector<SummaryRow> rows = SummaryRows(summary, device);
  ASSERT_EQ(rows.size(), 11u);
  EXPECT_EQ(Available(rows),
            (std::vector<std::string>{"Allocated memory", "Active memory", "Requested memory",
                                      "Allocations", "Active allocs"}));
  EXPECT_EQ(Row(rows, "Active memory").value, &device.allocated_bytes);
  EXPECT_EQ(Row(rows, "Requested memory").value, &device.allocated_bytes);
  EXPECT_EQ(Row(rows, "Active allocs").value, &device.allocations);
  // cuBLAS's workspace is not in the rows but named.
  ASSERT_EQ(device.holdings.size(), 1u);
  EXPECT_EQ(device.holdings[0].id, "cublas_workspace");
  EXPECT_EQ(device.holdings[0].bytes, 8 * kMiB);
  EXPECT_EQ(device.holdings[0].count, 1u);
  EXPECT_EQ(device.holdings[0].live_bytes, 8 * kMiB);
  EXPECT_EQ(device.holdings[0].apis, std::vector<std::string>{"cuMemAlloc"});
}

// The whole table, line for line, as PyTorch lays it out.
TEST(SummaryTensors, TextIsPyTorchsLayout) {
  const std::string text = SummaryText(TensorEvents().Run());
  const std::string expected =
      "|===========================================================================|\n"
      "|                  gpumem memory summary, device ID 0                       |\n"
      "|---------------------------------------------------------------------------|\n"
      "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |\n"
      "|===========================================================================|\n"
      "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n"
      "|---------------------------------------------------------------------------|\n"
      "| Allocated memory      |   2048 KiB |   6144 KiB |   6656 KiB |   4608 KiB |\n"
      "|       from large pool |   1024 KiB |   5120 KiB |   5120 KiB |   4096 KiB |\n"
      "|       from small pool |   1024 KiB |   1536 KiB |   1536 KiB |    512 KiB |\n"
      "|---------------------------------------------------------------------------|\n"
      "| Active memory         |   2048 KiB |   6144 KiB |   6656 KiB |   4608 KiB |\n"
      "|       from large pool |   1024 KiB |   5120 KiB |   5120 KiB |   4096 KiB |\n"
      "|       from small pool |   1024 KiB |   1536 KiB |   1536 KiB |    512 KiB |\n"
      "|---------------------------------------------------------------------------|\n"
      "| Requested memory      |   2048 KiB |   6144 KiB |   6656 KiB |   4608 KiB |\n"
      "|       from large pool |   1024 KiB |   5120 KiB |   5120 KiB |   4096 KiB |\n"
      "|       from small pool |   1024 KiB |   1536 KiB |   1536 KiB |    512 KiB |\n"
      "|---------------------------------------------------------------------------|\n"
      "| GPU reserved memory   |    n/a     |    n/a     |    n/a     |    n/a     |\n"
      "|       from large pool |    n/a     |    n/a     |    n/a     |    n/a     |\n"
      "|       from small pool |    n/a     |    n/a     |    n/a     |    n/a     |\n"
      "|---------------------------------------------------------------------------|\n"
      "| Non-releasable memory |    n/a     |    n/a     |    n/a     |    n/a     |\n"
      "|       from large pool |    n/a     |    n/a     |    n/a     |    n/a     |\n"
      "|       from small pool |    n/a     |    n/a     |    n/a     |    n/a     |\n"
      "|---------------------------------------------------------------------------|\n"
      "| Allocations           |       2    |       3    |       4    |       2    |\n"
      "|       from large pool |       1    |       2    |       2    |       1    |\n"
      "|       from small pool |       1    |       2    |       2    |       1    |\n"
      "|---------------------------------------------------------------------------|\n"
      "| Active allocs         |       2    |       3    |       4    |       2    |\n"
      "|       from large pool |       1    |       2    |       2    |       1    |\n"
      "|       from small pool |       1    |       2    |       2    |       1    |\n"
      "|---------------------------------------------------------------------------|\n"
      "| GPU reserved segments |     n/a    |     n/a    |     n/a    |     n/a    |\n"
      "|       from large pool |     n/a    |     n/a    |     n/a    |     n/a    |\n"
      "|       from small pool |     n/a    |     n/a    |     n/a    |     n/a    |\n"
      "|---------------------------------------------------------------------------|\n"
      "| Non-releasable allocs |     n/a    |     n/a    |     n/a    |     n/a    |\n"
      "|       from large pool |     n/a    |     n/a    |     n/a    |     n/a    |\n"
      "|       from small pool |     n/a    |     n/a    |     n/a    |     n/a    |\n"
      "|---------------------------------------------------------------------------|\n"
      "| Oversize allocations  |     n/a    |     n/a    |     n/a    |     n/a    |\n"
      "|---------------------------------------------------------------------------|\n"
      "| Oversize GPU segments |     n/a    |     n/a    |     n/a    |     n/a    |\n"
      "|===========================================================================|\n"
      "notes:\n";
  ASSERT_GE(text.size(), expected.size());
  EXPECT_EQ(text.substr(0, expected.size()), expected);
  const std::string notes = text.substr(expected.size());
  EXPECT_NE(notes.find("  GPU reserved memory, GPU reserved segments: n/a: the memory pool's "
                       "reserved size is not in this trace"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("  Active memory, Active allocs: the same as Allocated"), std::string::npos);
  EXPECT_NE(notes.find("  Requested memory: the same as Allocated"), std::string::npos);
  EXPECT_NE(notes.find("  Non-releasable memory, Non-releasable allocs: n/a: "), std::string::npos);
  EXPECT_NE(notes.find("  Oversize allocations, Oversize GPU segments: n/a: "), std::string::npos);
  EXPECT_NE(notes.find("  cuBLAS: 8.00 MiB in 1 allocation made with cuMemAlloc directly, not "
                       "counted above (PyTorch does not count it either); 8.00 MiB still live at "
                       "the end\n"),
            std::string::npos)
      << notes;
  EXPECT_EQ(notes.find("CUDA OOMs,"), std::string::npos);  // none: no note
}

// The rows the native allocator would have had for the same tensors: its model's (hand-computed in
// tests/report/allocator_model_test.cc, KeepsReservedSegmentsAndInactiveSplitStatsPerPool), marked.
TEST(SummaryTensors, ModelledRowsComeFromTheNativeModelAndAreMarked) {
  const Summary summary = TensorEvents().Run(SummaryModelChoice::kFromSettings);
  ASSERT_TRUE(summary.model.has_value());
  EXPECT_EQ(summary.model->kind, AllocatorKind::kNative);
  EXPECT_FALSE(summary.model->chosen);
  EXPECT_EQ(summary.model->settings, "");
  const DeviceSummary& device = summary.devices[0];
  ASSERT_TRUE(device.model.has_value());
  EXPECT_EQ(device.model->device_memory, kUnlimitedDeviceMemory);
  const std::vector<SummaryRow> rows = SummaryRows(summary, device);
  std::vector<std::string> modelled;
  for (const SummaryRow& row : rows) {
    if (row.modelled) modelled.push_back(row.metric);
  }
  EXPECT_EQ(modelled, (std::vector<std::string>{"GPU reserved memory", "Non-releasable memory",
                                                "GPU reserved segments", "Non-releasable allocs",
                                                "Oversize allocations", "Oversize GPU segments"}));
  // The measured rows stay the tensors'.
  EXPECT_EQ(Row(rows, "Allocated memory").value, &device.allocated_bytes);
  ExpectStat(Row(rows, "GPU reserved memory").value->all, 22 * kMiB, 22 * kMiB, 22 * kMiB, 0,
             "reserved");
  ExpectStat(Row(rows, "GPU reserved segments").value->small_pool, 1, 1, 1, 0, "small segments");
  ExpectStat(Row(rows, "Non-releasable memory").value->all, 20 * kMiB - 512, 20 * kMiB - 512,
             22 * kMiB, 2 * kMiB + 512, "non-releasable");

  const std::string text = SummaryText(summary);
  EXPECT_NE(text.find("|           *CUDA OOMs: 0            |       *cudaMalloc retries: 0         "
                      "|\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("|*GPU reserved memory   |  22528 KiB |  22528 KiB |  22528 KiB |      0 B   "
                      "|\n"
                      "|       from large pool |  20480 KiB |  20480 KiB |  20480 KiB |      0 B   "
                      "|\n"
                      "|       from small pool |   2048 KiB |   2048 KiB |   2048 KiB |      0 B   "
                      "|\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("|*Non-releasable allocs |       4    |       4    |       4    |       0    "
                      "|\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| Allocated memory      |   2048 KiB |"), std::string::npos);  // measured
  EXPECT_NE(
      text.find(
          "  rows marked * are modelled: PyTorch's native caching allocator replayed "
          "over the recorded tensors (report/allocator/allocator_model.h) with no limit on its "
          "memory (the trace does not give the device's total); the others are "
          "measured\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("  Oversize allocations, Oversize GPU segments: modelled: 0: "
                      "max_split_size_mb was not set"),
            std::string::npos);
  const std::string json = SummaryJson(summary);
  EXPECT_NE(json.find("\"model\":{\"allocator\":\"native\",\"chosen\":false,\"num_ooms\":0,"
                      "\"num_alloc_retries\":0,\"ran_out\":false}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"metric\":\"GPU reserved segments\",\"key\":\"segment\",\"unit\":"
                      "\"count\",\"available\":true,\"modelled\":true,\"all\":{\"current\":2,"),
            std::string::npos)
      << json;
}

// A model is only for tensors: a trace of segments keeps its measured rows, unmarked.
TEST(SummarySegments, NoModelWithoutTensors) {
  Events events;
  events.Malloc(20 * kMiB, 0x1000'0000, kTorchStack);
  const Summary summary = events.Run(SummaryModelChoice::kNative);
  EXPECT_EQ(summary.mode, SummaryMode::kSegments);
  EXPECT_FALSE(summary.model.has_value());
  EXPECT_FALSE(summary.devices[0].model.has_value());
  for (const SummaryRow& row : SummaryRows(summary, summary.devices[0])) {
    EXPECT_FALSE(row.modelled) << row.metric;
  }
  EXPECT_EQ(SummaryText(summary).find('*'), std::string::npos);
}

// The user's allocator settings, as `gpumem record --tensors` keeps them in the header.
TEST(SummaryModel, ChosenFromTheTraceAllocatorSettings) {
  auto options = [](std::map<std::string, std::string> values) {
    return [values](const std::string& name) -> std::optional<std::string> {
      auto it = values.find(name);
      if (it == values.end()) return std::nullopt;
      return it->second;
    };
  };
  EXPECT_FALSE(ChooseSummaryModel(SummaryModelChoice::kNone, options({})).has_value());
  std::optional<SummaryModel> model =
      ChooseSummaryModel(SummaryModelChoice::kFromSettings, options({}));
  ASSERT_TRUE(model.has_value());
  EXPECT_EQ(model->kind, AllocatorKind::kNative);
  EXPECT_EQ(model->max_split_size, std::numeric_limits<uint64_t>::max());

  const auto expandable =
      options({{"GPUMEM_TENSORS",
                "PYTORCH_CUDA_ALLOC_CONF was 'expandable_segments:True,max_split_size_mb:128'; "
                "TF_GPU_ALLOCATOR was unset"},
               {"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"}});
  model = ChooseSummaryModel(SummaryModelChoice::kFromSettings, expandable);
  EXPECT_EQ(model->kind, AllocatorKind::kExpandable);
  EXPECT_FALSE(model->chosen);
  EXPECT_EQ(model->max_split_size, 128 * kMiB);
  EXPECT_EQ(model->settings,
            "PYTORCH_CUDA_ALLOC_CONF was 'expandable_segments:True,max_split_size_mb:128' before "
            "gpumem record --tensors: expandable_segments:True, so the expandable-segments "
            "model; max_split_size_mb:128, which the expandable-segments model does not keep");
  // --allocator native sets the settings' expandable segments aside, and keeps max_split_size.
  model = ChooseSummaryModel(SummaryModelChoice::kNative, expandable);
  EXPECT_EQ(model->kind, AllocatorKind::kNative);
  EXPECT_TRUE(model->chosen);
  EXPECT_EQ(model->max_split_size, 128 * kMiB);
  EXPECT_NE(model->settings.find("expandable_segments:True, set aside by --allocator native; "
                                 "max_split_size_mb:128"),
            std::string::npos)
      << model->settings;

  // PyTorch's floor: max_split_size_mb is at least its 20 MiB large segment.
  model = ChooseSummaryModel(
      SummaryModelChoice::kFromSettings,
      options({{"GPUMEM_TENSORS", "PYTORCH_CUDA_ALLOC_CONF was 'max_split_size_mb:4'"}}));
  EXPECT_EQ(model->max_split_size, 20 * kMiB);
  // Recorded without --tensors, with the async backend set by hand: the recorded variable.
  model = ChooseSummaryModel(
      SummaryModelChoice::kFromSettings,
      options({{"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync,max_split_size_mb:64"}}));
  EXPECT_EQ(model->max_split_size, 64 * kMiB);
  EXPECT_EQ(model->settings,
            "PYTORCH_CUDA_ALLOC_CONF='backend:cudaMallocAsync,max_split_size_mb:64': "
            "max_split_size_mb:64");
  // --tensors replaced a variable that was unset: no settings.
  model = ChooseSummaryModel(SummaryModelChoice::kFromSettings,
                             options({{"GPUMEM_TENSORS", "PYTORCH_CUDA_ALLOC_CONF was unset"},
                                      {"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"}}));
  EXPECT_EQ(model->settings, "");
}

// Native caching allocator: cudaMalloc from libc10_cuda.so are segments, 2 MiB ones the small
// pool's; out-of-memory failures make OOMs and retries; a cudaMalloc made by the program itself
// is not PyTorch's.
TEST(SummarySegments, ReservedRowsAreMeasuredAndTensorRowsAreNotAvailable) {
  Events events;
  events.Malloc(20 * kMiB, 0x1000'0000, kTorchStack);  // large segment
  events.Malloc(2 * kMiB, 0x2000'0000, kTorchStack);   // small segment (22 MiB: peak)
  events.MallocFailed(64 * kMiB, kTorchStack);         // out of memory ...
  events.MallocFailed(64 * kMiB, kTorchStack);         // ... retried: retry 1
  events.Free(0x1000'0000);                            // the cache emptied
  events.Malloc(12 * kMiB, 0x3000'0000, kTorchStack);  // another request: the 64 MiB was an OOM
  events.MallocFailed(32 * kMiB, kTorchStack, 800);    // not out of memory: not counted
  events.Add(CU_MEM_ALLOC, DEVICE, ALLOC_FAILED, 0, 8 * kMiB, 0, kCublasStack).set_result(2);
  events.Malloc(4 * kMiB, 0x4000'0000, kProgramStack);  // outside PyTorch's allocator
  events.MallocFailed(30 * kMiB, kTorchStack);          // never retried: OOM 2
  const Summary summary = events.Run();
  EXPECT_EQ(summary.mode, SummaryMode::kSegments);
  EXPECT_FALSE(summary.expandable_segments);
  ASSERT_EQ(summary.devices.size(), 1u);
  const DeviceSummary& device = summary.devices[0];
  ExpectStat(device.reserved_bytes.all, 14 * kMiB, 22 * kMiB, 34 * kMiB, 20 * kMiB, "bytes, all");
  ExpectStat(device.reserved_bytes.large_pool, 12 * kMiB, 20 * kMiB, 32 * kMiB, 20 * kMiB,
             "bytes, large pool");
  ExpectStat(device.reserved_bytes.small_pool, 2 * kMiB, 2 * kMiB, 2 * kMiB, 0, "bytes, small");
  ExpectStat(device.segments.all, 2, 2, 3, 1, "count, all");
  ExpectStat(device.segments.large_pool, 1, 1, 2, 1, "count, large pool");
  ExpectStat(device.segments.small_pool, 1, 1, 1, 0, "count, small pool");
  EXPECT_EQ(device.ooms, 2u);
  EXPECT_EQ(device.retries, 1u);
  ASSERT_EQ(device.holdings.size(), 1u);
  EXPECT_EQ(device.holdings[0].id, "other");
  EXPECT_EQ(device.holdings[0].bytes, 4 * kMiB);

  const std::vector<SummaryRow> rows = SummaryRows(summary, device);
  EXPECT_EQ(Available(rows),
            (std::vector<std::string>{"GPU reserved memory", "GPU reserved segments"}));

  const std::string text = SummaryText(summary);
  EXPECT_NE(text.find("|            CUDA OOMs: 2            |        cudaMalloc retries: 1         "
                      "|\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| GPU reserved memory   |  14336 KiB |  22528 KiB |  34816 KiB |  20480 KiB "
                      "|\n"
                      "|       from large pool |  12288 KiB |  20480 KiB |  32768 KiB |  20480 KiB "
                      "|\n"
                      "|       from small pool |   2048 KiB |   2048 KiB |   2048 KiB |      0 KiB "
                      "|\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| GPU reserved segments |       2    |       2    |       3    |       1    "
                      "|\n"),
            std::string::npos);
  EXPECT_NE(text.find("| Allocated memory      |    n/a     |    n/a     |    n/a     |    n/a     "
                      "|\n"),
            std::string::npos);
  EXPECT_NE(text.find("  Allocated memory, Active memory, Requested memory, Allocations, Active "
                      "allocs: n/a: tensors are not visible under the native caching allocator; "
                      "record with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (gpumem record "
                      "--tensors)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  outside PyTorch's allocator: 4.00 MiB in 1 allocation made with "
                      "cudaMalloc directly, not counted above; 4.00 MiB still live at the end\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  CUDA OOMs, cudaMalloc retries: from the out-of-memory failures"),
            std::string::npos);
}

// Expandable segments: cuMemCreate'd physical memory is the reserved memory, from creation until
// it is both released and unmapped; the address reservation and the mappings are not memory.
TEST(SummarySegments, ExpandableSegmentsArePhysicalMemory) {
  Events events;
  constexpr uint64_t kBase = 0x7000'0000'0000;
  events.Add(CU_MEM_ADDRESS_RESERVE, VMM_RESERVATION, ALLOC, -1, 1024 * kMiB, kBase, kTorchStack);
  events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 20 * kMiB, 0, kTorchStack, 0xA1);
  events.Add(CU_MEM_MAP, VMM_MAPPING, ALLOC, -1, 20 * kMiB, kBase, kTorchStack, 0xA1);
  events.Add(CU_MEM_CREATE, VMM_PHYSICAL, ALLOC, 0, 2 * kMiB, 0, kTorchStack, 0xA2);
  events.Add(CU_MEM_MAP, VMM_MAPPING, ALLOC, -1, 2 * kMiB, kBase + 20 * kMiB, kTorchStack, 0xA2);
  events.Add(CU_MEM_RELEASE, KIND_UNKNOWN, FREE, -1, 0, 0, 0, 0xA1);  // still mapped: live
  const Summary mapped = events.Run();
  ASSERT_EQ(mapped.devices.size(), 1u);
  ExpectStat(mapped.devices[0].reserved_bytes.all, 22 * kMiB, 22 * kMiB, 22 * kMiB, 0, "mapped");
  events.Add(CU_MEM_UNMAP, VMM_MAPPING, FREE, -1, 20 * kMiB, kBase, 0);  // freed now
  const Summary summary = events.Run();
  EXPECT_EQ(summary.mode, SummaryMode::kSegments);
  EXPECT_TRUE(summary.expandable_segments);
  ASSERT_EQ(summary.devices.size(), 1u);
  const DeviceSummary& device = summary.devices[0];
  ExpectStat(device.reserved_bytes.all, 2 * kMiB, 22 * kMiB, 22 * kMiB, 20 * kMiB, "bytes, all");
  ExpectStat(device.reserved_bytes.large_pool, 0, 20 * kMiB, 20 * kMiB, 20 * kMiB, "large");
  ExpectStat(device.reserved_bytes.small_pool, 2 * kMiB, 2 * kMiB, 2 * kMiB, 0, "small");
  ExpectStat(device.segments.all, 1, 2, 2, 1, "count, all");
  EXPECT_NE(SummaryText(summary).find("expandable segments"), std::string::npos);
}

// No PyTorch: every device allocation is an allocation and its own segment, stream-ordered ones
// excepted from the reserved rows; a library's workspace is counted and named; pinned host
// memory is not device memory; each device has its own table.
// The mode is decided by the whole trace, though the events stream: allocations made before the
// one that decides it are counted as that mode counts them.
TEST(SummaryStreaming, ModeDecidedByALaterAllocation) {
  Events events;
  events.Malloc(4 * kMiB, 0x1000'0000, kProgramStack);     // plain so far
  events.CuMemAlloc(8 * kMiB, 0x2000'0000, kCublasStack);  // still plain
  events.Malloc(20 * kMiB, 0x3000'0000, kTorchStack);      // segments from here on
  events.Free(0x1000'0000);
  Summary summary = events.Run();
  EXPECT_EQ(summary.mode, SummaryMode::kSegments);
  ASSERT_EQ(summary.devices.size(), 1u);
  ExpectStat(summary.devices[0].reserved_bytes.all, 20 * kMiB, 20 * kMiB, 20 * kMiB, 0,
             "segments: reserved");
  ExpectStat(summary.devices[0].segments.all, 1, 1, 1, 0, "segments: segments");
  ASSERT_EQ(summary.devices[0].holdings.size(), 2u);
  EXPECT_EQ(summary.devices[0].holdings[0].id, "other");
  EXPECT_EQ(summary.devices[0].holdings[0].bytes, 4 * kMiB);
  EXPECT_EQ(summary.devices[0].holdings[0].live_bytes, 0u);
  EXPECT_EQ(summary.devices[0].holdings[1].id, "cublas_workspace");

  events.MallocAsync(kMiB, 0x4000'0000, kTorchStack);  // a tensor: tensor level after all
  summary = events.Run();
  EXPECT_EQ(summary.mode, SummaryMode::kTensors);
  ExpectStat(summary.devices[0].allocated_bytes.all, kMiB, kMiB, kMiB, 0, "tensors: allocated");
  ExpectStat(summary.devices[0].allocated_bytes.small_pool, kMiB, kMiB, kMiB, 0,
             "tensors: small pool");
  ExpectStat(summary.devices[0].allocations.all, 1, 1, 1, 0, "tensors: allocations");
  ASSERT_EQ(summary.devices[0].holdings.size(), 3u);
  EXPECT_EQ(summary.devices[0].holdings[2].id, "pytorch_caching_allocator");
  EXPECT_EQ(summary.devices[0].holdings[2].live_bytes, 20 * kMiB);
}

TEST(SummaryPlain, AllocationsAreTheirOwnSegments) {
  Events events;
  events.Malloc(1 * kMiB, 0x1000'0000, kProgramStack);  // small: at most 1 MiB
  events.Malloc(3 * kMiB, 0x2000'0000, kProgramStack);  // large
  events.MallocAsync(256 * kKiB, 0x3000'0000, kProgramStack);
  events.CuMemAlloc(8 * kMiB, 0x4000'0000, kCublasStack);  // counted in this mode
  events.Add(CUDA_MALLOC_HOST, PINNED_HOST, ALLOC, -1, 64 * kMiB, 0x5000'0000, kProgramStack);
  events.Malloc(6 * kMiB, 0x6000'0000, kProgramStack, 1);  // device 1
  events.Free(0x2000'0000);
  events.FreeAsync(0x3000'0000);
  events.Free(0x5000'0000);                        // the pinned memory
  events.MallocFailed(100 * kMiB, kProgramStack);  // OOM 1
  const Summary summary = events.Run();
  EXPECT_EQ(summary.mode, SummaryMode::kPlain);
  ASSERT_EQ(summary.devices.size(), 2u);
  const DeviceSummary& device = summary.devices[0];
  EXPECT_EQ(device.device, 0);
  // Live: 1 | 4 | 4.25 | 12.25 (peak) | 9.25 | 9 MiB.
  ExpectStat(device.allocated_bytes.all, 9 * kMiB, 12 * kMiB + 256 * kKiB, 12 * kMiB + 256 * kKiB,
             3 * kMiB + 256 * kKiB, "allocated, all");
  ExpectStat(device.allocated_bytes.small_pool, 1 * kMiB, 1 * kMiB + 256 * kKiB,
             1 * kMiB + 256 * kKiB, 256 * kKiB, "allocated, small");
  ExpectStat(device.allocated_bytes.large_pool, 8 * kMiB, 11 * kMiB, 11 * kMiB, 3 * kMiB,
             "allocated, large");
  ExpectStat(device.allocations.all, 2, 4, 4, 2, "allocations");
  // Reserved: the same without the stream-ordered allocation.
  ExpectStat(device.reserved_bytes.all, 9 * kMiB, 12 * kMiB, 12 * kMiB, 3 * kMiB, "reserved");
  ExpectStat(device.segments.all, 2, 3, 3, 1, "segments");
  EXPECT_EQ(device.pool_allocations, 1u);
  EXPECT_EQ(device.pool_allocation_bytes, 256 * kKiB);
  EXPECT_EQ(device.ooms, 1u);
  EXPECT_EQ(device.retries, 0u);
  ASSERT_EQ(device.holdings.size(), 1u);
  EXPECT_EQ(device.holdings[0].name, "cuBLAS");
  EXPECT_EQ(summary.devices[1].device, 1);
  ExpectStat(summary.devices[1].allocated_bytes.all, 6 * kMiB, 6 * kMiB, 6 * kMiB, 0, "device 1");

  EXPECT_EQ(Available(SummaryRows(summary, device)),
            (std::vector<std::string>{"Allocated memory", "Active memory", "Requested memory",
                                      "GPU reserved memory", "Allocations", "Active allocs",
                                      "GPU reserved segments"}));
  const std::string text = SummaryText(summary);
  EXPECT_NE(text.find("|                  gpumem memory summary, device ID 1                       "
                      "|\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("except 1 stream-ordered allocation (256.00 KiB in all), left out"),
            std::string::npos);
  EXPECT_NE(text.find("  cuBLAS: 8.00 MiB in 1 allocation made with cuMemAlloc, counted above; "),
            std::string::npos)
      << text;
}

TEST(SummaryPlain, NothingAllocatedAndUnknownDeviceAndIncompleteTrace) {
  EXPECT_EQ(SummaryText(Events().Run()), "summary: no device memory allocated\n");
  Events events;
  events.Malloc(4 * kMiB, 0x1000, kProgramStack, -1);
  Summary summary = events.Run();
  summary.complete = false;
  summary.devices[0].name = "A Very Long Device Name That Does Not Fit In The Box At All";
  const std::string text = SummaryText(summary);
  EXPECT_NE(text.find("| gpumem memory summary, device ID ? (A Very Long Device Name That Does Not "
                      "Fit In The Box At All) |\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  Cur Usage: the process did not exit cleanly"), std::string::npos);
  summary.devices[0].name = "NVIDIA H100 80GB HBM3";  // centred: too long for column 18
  EXPECT_NE(SummaryText(summary).find(
                "|        gpumem memory summary, device ID ? (NVIDIA H100 80GB HBM3)         |\n"),
            std::string::npos);
}

TEST(SummaryJson, RowsHoldingsAndNotes) {
  const std::string json = SummaryJson(TensorEvents().Run());
  EXPECT_EQ(json.rfind("[{\"device\":0,\"mode\":\"tensors\",\"expandable_segments\":false,"
                       "\"complete\":true,\"num_ooms\":0,\"num_alloc_retries\":0,\"rows\":[",
                       0),
            0u)
      << json;
  EXPECT_NE(
      json.find("{\"metric\":\"Allocated memory\",\"key\":\"allocated_bytes\",\"unit\":"
                "\"bytes\",\"available\":true,\"modelled\":false,\"all\":{\"current\":2097153,"
                "\"peak\":6291457,"
                "\"allocated\":6815745,\"freed\":4718592},\"large_pool\":{\"current\":"
                "1048577,\"peak\":5242881,\"allocated\":5242881,\"freed\":4194304},"
                "\"small_pool\":{\"current\":1048576,\"peak\":1572864,\"allocated\":1572864,"
                "\"freed\":524288}}"),
      std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"metric\":\"GPU reserved memory\",\"key\":\"reserved_bytes\",\"unit\":"
                      "\"bytes\",\"available\":false,\"modelled\":false,\"note\":\"n/a: the memory "
                      "pool's reserved "
                      "size is not in this trace"),
            std::string::npos);
  EXPECT_NE(
      json.find("{\"metric\":\"Oversize GPU segments\",\"key\":\"oversize_segments\",\"unit\":"
                "\"count\",\"available\":false,\"modelled\":false,"),
      std::string::npos);
  EXPECT_NE(json.find("\"holdings\":[{\"id\":\"cublas_workspace\",\"name\":\"cuBLAS\",\"apis\":["
                      "\"cuMemAlloc\"],\"bytes\":8388608,\"count\":1,\"live_bytes\":8388608,"
                      "\"live_count\":1,\"counted\":false}]"),
            std::string::npos);
  EXPECT_NE(json.find("\"notes\":[\"recorded at tensor level"), std::string::npos);
}

// ---- the command, on trace files ----

ProgramRun Report(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem"), "report"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv);
}

std::string Sample(const std::string& name) { return SourcePath("samples/traces/" + name); }

// The number `field` of the "all" statistics of the summary row whose key is `key` (the first
// device's), or -1 when the row is n/a or missing.
int64_t RowStat(const std::string& json, const std::string& key, const std::string& field) {
  const size_t row = json.find("\"key\":\"" + key + "\"");
  if (row == std::string::npos) return -1;
  const std::string row_text = json.substr(row, json.find("\"metric\":", row) - row);
  size_t at = row_text.find("\"all\":{");
  if (at == std::string::npos) return -1;
  at = row_text.find("\"" + field + "\":", at);
  if (at == std::string::npos) return -1;
  return std::strtoll(row_text.c_str() + at + field.size() + 3, nullptr, 10);
}

// PyTorch's default allocator, H100: torch.cuda.max_memory_reserved() was 92274688 in that run
// (/tmp/gpu6/torch_default/stdout); cuBLAS's workspaces are not PyTorch's memory.
TEST(SummaryCommand, DefaultAllocatorReservedPeakIsPyTorchsMaxMemoryReserved) {
  ProgramRun run = Report({"--summary", Sample("train_mlp-default-h100.trace")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string& out = run.out;
  EXPECT_NE(out.find("|        gpumem memory summary, device ID 0 (NVIDIA H100 80GB HBM3)         "
                     "|\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("| GPU reserved memory   |  90112 KiB |  90112 KiB |  90112 KiB |      0 B   "
                     "|\n"
                     "|       from large pool |  86016 KiB |  86016 KiB |  86016 KiB |      0 B   "
                     "|\n"
                     "|       from small pool |   4096 KiB |   4096 KiB |   4096 KiB |      0 B   "
                     "|\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("| GPU reserved segments |       5    |       5    |       5    |       0    "
                     "|\n"
                     "|       from large pool |       3    |       3    |       3    |       0    "
                     "|\n"
                     "|       from small pool |       2    |       2    |       2    |       0    "
                     "|\n"),
            std::string::npos);
  EXPECT_NE(out.find("| Allocations           |     n/a    |     n/a    |     n/a    |     n/a    "
                     "|\n"),
            std::string::npos);
  EXPECT_NE(out.find("|            CUDA OOMs: 0            |        cudaMalloc retries: 0         "
                     "|\n"),
            std::string::npos);
  EXPECT_NE(out.find("  cuBLAS: 128.25 MiB in 6 allocations made with cuMemAlloc directly, not "
                     "counted above"),
            std::string::npos)
      << out;
  // --summary alone: no peak, no leaks.
  EXPECT_EQ(out.find("\npeak, "), std::string::npos);
  EXPECT_EQ(out.find("\nleaks"), std::string::npos);

  ProgramRun json = Report({"--summary", "--json", Sample("train_mlp-default-h100.trace")});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"summary\":[{\"device\":0,\"name\":\"NVIDIA H100 80GB HBM3\","
                          "\"mode\":\"segments\""),
            std::string::npos)
      << json.out;
  EXPECT_EQ(RowStat(json.out, "reserved_bytes", "peak"), 92274688);
  EXPECT_EQ(RowStat(json.out, "segment", "allocated"), 5);
  EXPECT_EQ(RowStat(json.out, "allocated_bytes", "peak"), -1);  // n/a
}

// PyTorch's cudaMallocAsync backend, H100: torch.cuda.max_memory_allocated() was 87573120 and
// max_memory_reserved() 100663296 in that run (its stdout, 2026-11-22); the same script under the
// default allocator reported allocation.all.allocated 475 (this backend leaves its own counter at
// 0).
TEST(SummaryCommand, AsyncBackendAllocationsAndAllocatedPeakMatchPyTorch) {
  ProgramRun run = Report({"--summary", Sample("train_mlp-async-h100.trace")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string& out = run.out;
  EXPECT_NE(out.find("| Allocations           |       3    |      26    |     475    |     472    "
                     "|\n"
                     "|       from large pool |       2    |       8    |      46    |      44    "
                     "|\n"
                     "|       from small pool |       1    |      19    |     429    |     428    "
                     "|\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("| Allocated memory      |  66560 KiB |  85520 KiB | 246515 KiB | 179955 KiB "
                     "|\n"),
            std::string::npos)
      << out;
  // Without a model the reserved rows are n/a, and the pool's own size (its attributes, recorded
  // after each allocation) is in the note: its peak is PyTorch's torch.cuda.max_memory_reserved()
  // of the same run, 100663296 (that run's stdout).
  ProgramRun unmodelled =
      Report({"--summary", "--allocator", "none", Sample("train_mlp-async-h100.trace")});
  ASSERT_EQ(unmodelled.exit_code, 0) << unmodelled.err;
  EXPECT_NE(unmodelled.out.find("| GPU reserved memory   |    n/a     |    n/a     |    n/a     |"
                                "    n/a     |\n"),
            std::string::npos);
  EXPECT_EQ(unmodelled.out.find("*"), std::string::npos);
  EXPECT_NE(unmodelled.out.find(
                "GPU reserved memory, GPU reserved segments: n/a in the rows (a pool's size is "
                "not split into large and small pool, and it has no segments); its own "
                "reserved size, from its attributes after each stream-ordered allocation, "
                "peaked at 96.00 MiB (100663296 bytes, what torch.cuda.max_memory_reserved() "
                "reports in this mode) and was 96.00 MiB at the end"),
            std::string::npos)
      << out;

  // The fragmentation report takes reserved from the same pool sizes: at its peak, PyTorch's
  // max_memory_reserved().
  ProgramRun fragmentation = Report({"--fragmentation", Sample("train_mlp-async-h100.trace")});
  ASSERT_EQ(fragmentation.exit_code, 0) << fragmentation.err;
  EXPECT_NE(fragmentation.out.find("at the peak of reserved"), std::string::npos)
      << fragmentation.out;
  EXPECT_NE(fragmentation.out.find("reserved 96.00 MiB (100663296 bytes), in use"),
            std::string::npos)
      << fragmentation.out;

  ProgramRun json = Report({"--json", "--summary", Sample("train_mlp-async-h100.trace")});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(RowStat(json.out, "allocation", "allocated"), 475);
  const int64_t peak = RowStat(json.out, "allocated_bytes", "peak");
  constexpr double kPyTorchMaxMemoryAllocated = 87573120;
  EXPECT_LE(std::abs(static_cast<double>(peak) - kPyTorchMaxMemoryAllocated),
            0.005 * kPyTorchMaxMemoryAllocated)
      << peak;
  EXPECT_EQ(peak, 87573120);  // in fact exactly
}

// The tensors of the async run replayed through the native model reserve exactly what PyTorch's
// default allocator reserved running the same script (train_mlp-default-h100.trace, measured
// above: torch.cuda.max_memory_reserved() 92274688, 3 large and 2 small segments); through the
// expandable model, what the expandable-segments run reserved (109051904).
TEST(SummaryCommand, ModelledReservedRowsMatchWhatPyTorchReservedUnderEachAllocator) {
  ProgramRun run = Report({"--summary", Sample("train_mlp-async-h100.trace")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(
      run.out.find("|*GPU reserved memory   |  90112 KiB |  90112 KiB |  90112 KiB |      0 B "
                   "  |\n"
                   "|       from large pool |  86016 KiB |  86016 KiB |  86016 KiB |      0 B "
                   "  |\n"
                   "|       from small pool |   4096 KiB |   4096 KiB |   4096 KiB |      0 B "
                   "  |\n"),
      std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("|*GPU reserved segments |       5    |       5    |       5    |       0 "
                         "   |\n"
                         "|       from large pool |       3    |       3    |       3    |       0 "
                         "   |\n"
                         "|       from small pool |       2    |       2    |       2    |       0 "
                         "   |\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("  rows marked * are modelled: PyTorch's native caching allocator "
                         "replayed over the recorded tensors"),
            std::string::npos);
  EXPECT_NE(run.out.find("measured, the cudaMallocAsync pool itself peaked at 96.00 MiB "
                         "(100663296 bytes)"),
            std::string::npos);

  ProgramRun json = Report({"--json", "--summary", Sample("train_mlp-async-h100.trace")});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(RowStat(json.out, "reserved_bytes", "peak"), 92274688);
  EXPECT_EQ(RowStat(json.out, "segment", "peak"), 5);
  EXPECT_NE(json.out.find("\"model\":{\"allocator\":\"native\",\"chosen\":false,"),
            std::string::npos)
      << json.out;

  ProgramRun expandable =
      Report({"--json", "--allocator", "expandable", Sample("train_mlp-async-h100.trace")});
  ASSERT_EQ(expandable.exit_code, 0) << expandable.err;
  EXPECT_EQ(RowStat(expandable.out, "reserved_bytes", "peak"), 109051904);
  EXPECT_EQ(RowStat(expandable.out, "inactive_split_bytes", "peak"), 0);  // PyTorch leaves it out
  EXPECT_NE(expandable.out.find("\"model\":{\"allocator\":\"expandable\",\"chosen\":true"),
            std::string::npos);
}

TEST(SummaryCommand, AllocatorIsForTensorLevelTracesOnly) {
  for (const char* trace : {"train_mlp-default-h100.trace", "leak_loop-h200.trace"}) {
    ProgramRun run = Report({"--summary", "--allocator", "native", Sample(trace)});
    EXPECT_EQ(run.exit_code, 2) << trace;
    EXPECT_EQ(run.out, "") << trace;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_NE(run.err.find(": --allocator needs a tensor-level trace (gpumem record --tensors); "),
              std::string::npos)
        << run.err;
  }
  ProgramRun bad = Report({"--allocator", "async", Sample("train_mlp-async-h100.trace")});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err,
            "gpumem: error: report: --allocator: not native, expandable or none: 'async'\nTry "
            "'gpumem report --help'.\n");
  ProgramRun missing = Report({Sample("train_mlp-async-h100.trace"), "--allocator"});
  EXPECT_EQ(missing.exit_code, 2);
}

// A tensor-level trace of a device with 40 MiB whose header keeps the user's settings
// (max_split_size_mb:24; or expandable_segments:True): tensors of 4 MiB (freed), 25 MiB and
// 30 MiB. Native: a 20 MiB segment, then 26 MiB does not fit beside it: the cache is emptied
// (a retry) and it fits; 30 MiB more does not fit even after a second retry: an OOM, and the
// model stops there. The 25 MiB block and its 26 MiB segment are oversize.
std::string SettingsTrace(const TempDir& dir, const std::string& name,
                          const std::string& settings_before) {
  TracePacket header = HeaderPacket();
  Option* option = header.mutable_header()->add_option();
  option->set_name("GPUMEM_TENSORS");
  option->set_value("PYTORCH_CUDA_ALLOC_CONF was '" + settings_before + "'");
  std::string bytes = Framed(header);
  auto add = [&bytes](const TracePacket& packet) { bytes += Framed(packet); };
  TracePacket device;
  device.mutable_device()->set_ordinal(0);
  device.mutable_device()->set_name("Small GPU");
  device.mutable_device()->set_total_memory(40 * kMiB);
  add(device);
  TracePacket module;
  module.mutable_module()->set_id(1);
  module.mutable_module()->set_path("/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so");
  module.mutable_module()->set_start(0x10000);
  module.mutable_module()->set_end(0x11000);
  add(module);
  TracePacket stack;
  stack.mutable_stack()->set_id(1);
  stack.mutable_stack()->add_frame(0x10010);
  add(stack);
  uint64_t seq = 0;
  auto memory = [&](Api api, Action action, uint64_t size, uint64_t address) {
    TracePacket packet;
    MemoryEvent* event = packet.mutable_memory();
    event->set_seq(++seq);
    event->set_api(api);
    event->set_kind(POOL);
    event->set_action(action);
    event->set_device(action == ALLOC ? 0 : -1);
    event->set_size(size);
    event->set_address(address);
    event->set_stack_id(action == ALLOC ? 1 : 0);
    add(packet);
  };
  memory(CUDA_MALLOC_ASYNC, ALLOC, 4 * kMiB, 0x1000'0000);
  memory(CUDA_FREE_ASYNC, FREE, 0, 0x1000'0000);
  memory(CUDA_MALLOC_ASYNC, ALLOC, 25 * kMiB, 0x2000'0000);
  memory(CUDA_MALLOC_ASYNC, ALLOC, 30 * kMiB, 0x4000'0000);
  add(FooterPacket(seq));
  const std::string path = dir.File(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(SummaryCommand, ModelTakesTheTraceSettingsAndTheDeviceMemory) {
  TempDir dir;
  const std::string split = SettingsTrace(dir, "split.trace", "max_split_size_mb:24");
  ProgramRun json = Report({"--json", "--summary", split});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"model\":{\"allocator\":\"native\",\"chosen\":false,"
                          "\"max_split_size\":25165824,\"settings\":\"PYTORCH_CUDA_ALLOC_CONF was "
                          "'max_split_size_mb:24' before gpumem record --tensors: "
                          "max_split_size_mb:24\",\"device_memory\":41943040,\"num_ooms\":1,"
                          "\"num_alloc_retries\":2,\"ran_out\":true}"),
            std::string::npos)
      << json.out;
  EXPECT_EQ(RowStat(json.out, "reserved_bytes", "peak"), 26 * kMiB);
  EXPECT_EQ(RowStat(json.out, "reserved_bytes", "freed"), 20 * kMiB);
  EXPECT_EQ(RowStat(json.out, "oversize_allocations", "current"), 1);
  EXPECT_EQ(RowStat(json.out, "oversize_segments", "current"), 1);
  ProgramRun text = Report({"--summary", split});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("|           *CUDA OOMs: 1            |       *cudaMalloc retries: 2    "
                          "     |\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("on a device of 40.00 MiB (its total memory;"), std::string::npos);
  EXPECT_NE(text.out.find("  allocator settings in the trace: PYTORCH_CUDA_ALLOC_CONF was "
                          "'max_split_size_mb:24' before gpumem record --tensors: "
                          "max_split_size_mb:24\n"),
            std::string::npos);
  EXPECT_NE(text.out.find("; it ran out, where the program would have died: the modelled rows "
                          "stop there"),
            std::string::npos);

  // expandable_segments:True in the settings picks the expandable model, unless told otherwise.
  const std::string expandable = SettingsTrace(dir, "expandable.trace", "expandable_segments:True");
  json = Report({"--json", "--summary", expandable});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"model\":{\"allocator\":\"expandable\",\"chosen\":false,"),
            std::string::npos)
      << json.out;
  json = Report({"--json", "--allocator", "native", expandable});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"model\":{\"allocator\":\"native\",\"chosen\":true,"),
            std::string::npos)
      << json.out;
}

// Expandable segments, H100: torch.cuda.max_memory_reserved() was 109051904 in that run
// (/tmp/gpu6/torch_expandable/stdout): the 7 cuMemCreate pieces.
TEST(SummaryCommand, ExpandableSegmentsReservedPeakIsPyTorchsMaxMemoryReserved) {
  ProgramRun json = Report({"--json", "--summary", Sample("train_mlp-expandable-h100.trace")});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"mode\":\"segments\",\"expandable_segments\":true"), std::string::npos)
      << json.out;
  EXPECT_EQ(RowStat(json.out, "reserved_bytes", "peak"), 109051904);
  EXPECT_EQ(RowStat(json.out, "segment", "allocated"), 7);
}

TEST(SummaryCommand, PlainProgramAndOtherReports) {
  ProgramRun run = Report({"--summary", "--leaks", Sample("leak_loop-h200.trace")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // As recorded: 20 cudaMalloc, 10 cudaFree, 10 x 4 MiB never freed; peak 56 MiB.
  EXPECT_NE(
      run.out.find("| Allocated memory      |  40960 KiB |  57344 KiB | 204800 KiB | 163840 KiB "
                   "|\n"),
      std::string::npos)
      << run.out;
  EXPECT_NE(
      run.out.find("| GPU reserved memory   |  40960 KiB |  57344 KiB | 204800 KiB | 163840 KiB "
                   "|\n"),
      std::string::npos);
  EXPECT_NE(
      run.out.find("| Allocations           |      10    |      11    |      20    |      10    "
                   "|\n"),
      std::string::npos);
  // The summary comes before the leaks.
  EXPECT_LT(run.out.find("gpumem memory summary"), run.out.find("\nleaks, device 0"));

  ProgramRun help = Report({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--summary"), std::string::npos);
}

// Modules tell PyTorch's allocator and cuBLAS apart without symbols: a synthetic trace file whose
// stacks are in libc10_cuda.so and libcublas.so.
TEST(SummaryCommand, HoldersAreRecognisedByTheStacksModules) {
  std::string bytes = Framed(HeaderPacket());
  auto add = [&bytes](const TracePacket& packet) { bytes += Framed(packet); };
  TracePacket device;
  device.mutable_device()->set_ordinal(0);
  device.mutable_device()->set_name("Test GPU");
  add(device);
  const std::vector<std::pair<std::string, uint64_t>> modules = {
      {"/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so", 0x10000},
      {"/venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.13", 0x20000},
      {"/work/train", 0x30000}};
  for (size_t i = 0; i < modules.size(); ++i) {
    TracePacket module;
    module.mutable_module()->set_id(i + 1);
    module.mutable_module()->set_path(modules[i].first);
    module.mutable_module()->set_start(modules[i].second);
    module.mutable_module()->set_end(modules[i].second + 0x1000);
    add(module);
    TracePacket stack;
    stack.mutable_stack()->set_id(i + 1);
    stack.mutable_stack()->add_frame(modules[i].second + 0x10);
    stack.mutable_stack()->add_frame(0x30000 + 0x20);  // called from the program
    add(stack);
  }
  uint64_t seq = 0;
  auto memory = [&](Api api, Action action, uint64_t size, uint64_t address, uint64_t stack) {
    TracePacket packet;
    MemoryEvent* event = packet.mutable_memory();
    event->set_seq(++seq);
    event->set_api(api);
    event->set_kind(action == ALLOC ? DEVICE : KIND_UNKNOWN);
    event->set_action(action);
    event->set_device(action == ALLOC ? 0 : -1);
    event->set_size(size);
    event->set_address(address);
    event->set_stack_id(stack);
    add(packet);
  };
  memory(CUDA_MALLOC, ALLOC, 20 * kMiB, 0x1000'0000, 1);  // PyTorch's segment
  memory(CUDA_MALLOC, ALLOC, 2 * kMiB, 0x2000'0000, 1);   // PyTorch's segment, small pool
  memory(CU_MEM_ALLOC, ALLOC, 8 * kMiB, 0x3000'0000, 2);  // cuBLAS
  memory(CUDA_MALLOC, ALLOC, 1 * kMiB, 0x4000'0000, 3);   // the program's own
  memory(CUDA_FREE, FREE, 0, 0x1000'0000, 0);
  add(FooterPacket(seq));
  TempDir dir;
  const std::string path = dir.File("modules.trace");
  std::ofstream(path, std::ios::binary) << bytes;

  ProgramRun run = Report({"--summary", path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(
      run.out.find("|                  gpumem memory summary, device ID 0 (Test GPU)            "
                   "|\n"),
      std::string::npos)
      << run.out;
  EXPECT_NE(
      run.out.find("| GPU reserved memory   |   2048 KiB |  22528 KiB |  22528 KiB |  20480 KiB "
                   "|\n"
                   "|       from large pool |      0 KiB |  20480 KiB |  20480 KiB |  20480 KiB "
                   "|\n"
                   "|       from small pool |   2048 KiB |   2048 KiB |   2048 KiB |      0 KiB "
                   "|\n"),
      std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("  cuBLAS: 8.00 MiB in 1 allocation made with cuMemAlloc directly, not "
                         "counted above"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("  outside PyTorch's allocator: 1.00 MiB in 1 allocation made with "
                         "cudaMalloc directly, not counted above"),
            std::string::npos)
      << run.out;
}

}  // namespace
}  // namespace gpumem::report
