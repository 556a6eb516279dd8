// The CUPTI subscriber without libcupti or a GPU: synthetic callback data and activity records
// through the translation and the callback entry point (records caught by test sinks), the
// library search, the start-up failures, and what a recorded program's trace says about CUPTI.
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/recorder.h"
#include "core/thread_flags.h"
#include "cupti/activity.h"
#include "cupti/callback_translation.h"
#include "cupti/callbacks.h"
#include "cupti/library_search.h"
#include "cupti/subscriber.h"
#include "gtest/gtest.h"
#include "report/format/names.h"
#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem::cupti {
namespace {

// ---- What the sinks caught. ----

struct CaughtLaunch {
  LaunchRecord record;
  std::string name;  // name_hint is valid during the callback only
};
struct CaughtStatus {
  proto::CuptiState state;
  std::string detail;
  bool kernel_timing;
};
struct CaughtTiming {
  uint64_t correlation_id, start, end;
  int32_t device;
};
struct CaughtPool {
  uint64_t pool;
  int32_t device;
  uint64_t reserved, used, timestamp, correlation_id;
};

std::vector<MemoryRecord> g_memory;
std::vector<CaughtLaunch> g_launches;
std::vector<CaughtStatus> g_statuses;
std::vector<CaughtTiming> g_timings;
std::vector<CaughtPool> g_pools;

Sinks TestSinks() {
  return Sinks{
      [](const MemoryRecord& record) { g_memory.push_back(record); },
      [](const LaunchRecord& record) {
        g_launches.push_back({record, record.name_hint != nullptr ? record.name_hint : ""});
      },
      [](proto::CuptiState state, const char* detail, bool kernel_timing) {
        g_statuses.push_back({state, detail != nullptr ? detail : "", kernel_timing});
      },
      [](uint64_t correlation_id, uint64_t start, uint64_t end, int32_t device) {
        g_timings.push_back({correlation_id, start, end, device});
      },
      [](uint64_t pool, int32_t device, uint64_t reserved, uint64_t used, uint64_t timestamp,
         uint64_t correlation_id) {
        g_pools.push_back({pool, device, reserved, used, timestamp, correlation_id});
      }};
}

// The recorder, initialized once for the binary (Enabled() and LaunchesEnabled() are true), with
// its trace in a temporary directory and no stacks. Records go to the test sinks, not the file.
class RecorderEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpumem-cupti-XXXXXX").string();
    directory_ = mkdtemp(pattern.data());
    setenv("GPUMEM_OUTPUT", directory_.c_str(), 1);
    setenv("GPUMEM_STACK_DEPTH", "0", 1);
    recorder::Init(LoaderFunctions{&dlopen, &dlsym});
    unsetenv("GPUMEM_SESSION_PID");
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

 private:
  std::string directory_;
};
const auto* const g_environment =
    ::testing::AddGlobalTestEnvironment(new RecorderEnvironment);  // NOLINT: owned by gtest

class CuptiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(recorder::Enabled());
    g_memory.clear();
    g_launches.clear();
    g_statuses.clear();
    g_timings.clear();
    g_pools.clear();
    SetSinks(TestSinks());
    gpumem::Locals().hook_depth = 0;
    gpumem::Locals().launch_correlation_id = 0;
  }
  void TearDown() override {
    SetSinks(RecorderSinks());
    gpumem::Locals().hook_depth = 0;
  }

  // One callback as CUPTI makes it, through the entry point handed to cuptiSubscribe.
  static void Callback(CUpti_CallbackId cbid, CUpti_ApiCallbackSite site, const void* params,
                       CUresult* result = nullptr, uint32_t correlation_id = 1,
                       const char* symbol = nullptr) {
    uint64_t correlation_data = 0;
    CUpti_CallbackData data{};
    data.callbackSite = site;
    data.functionName = "synthetic";
    data.functionParams = params;
    data.functionReturnValue = site == CUPTI_API_EXIT ? result : nullptr;
    data.symbolName = symbol;
    data.context = nullptr;
    data.correlationData = &correlation_data;
    data.correlationId = correlation_id;
    OnCallback(nullptr, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  }
  // ENTER then EXIT, as the driver does around one call.
  static void Call(CUpti_CallbackId cbid, const void* params, CUresult result,
                   uint32_t correlation_id = 1, const char* symbol = nullptr) {
    Callback(cbid, CUPTI_API_ENTER, params, nullptr, correlation_id, symbol);
    Callback(cbid, CUPTI_API_EXIT, params, &result, correlation_id, symbol);
  }
};

// ---- Classification ----

TEST_F(CuptiTest, EveryEnabledCallbackIsClassifiedAndOthersAreIgnored) {
  for (CUpti_CallbackId cbid : kDriverCallbacks) {
    EXPECT_NE(Classify(cbid).kind, CallbackClass::kIgnored) << cbid;
  }
  EXPECT_EQ(kDriverCallbackCount, 29u);  // with NCCL's retain and import
  EXPECT_EQ(Classify(CUPTI_DRIVER_TRACE_CBID_cuMemcpy).kind, CallbackClass::kIgnored);
  EXPECT_EQ(Classify(CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice).kind, CallbackClass::kIgnored);
  EXPECT_EQ(Classify(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc).kind, CallbackClass::kIgnored);  // v1
  EXPECT_EQ(Classify(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz).launch_api,
            proto::LaunchApi::kCuLaunchKernel);
  EXPECT_EQ(Classify(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz).api, proto::Api::kCuMemFreeAsync);
  EXPECT_EQ(Classify(CUPTI_DRIVER_TRACE_CBID_cuMemMap).memory_kind, proto::MemoryKind::kVmmMapping);
}

// ---- Launches ----

struct KernelArgs {
  void* pointer = reinterpret_cast<void*>(0x7f0000001000);
  int count = 42;
  void* params[2] = {&pointer, &count};
};

cuLaunchKernel_params KernelLaunchParams(KernelArgs& args) {
  cuLaunchKernel_params params{};
  params.f = reinterpret_cast<CUfunction>(0x1234);
  params.gridDimX = 4;
  params.gridDimY = 2;
  params.gridDimZ = 1;
  params.blockDimX = 128;
  params.blockDimY = 1;
  params.blockDimZ = 1;
  params.sharedMemBytes = 256;
  params.hStream = reinterpret_cast<CUstream>(0x5678);
  params.kernelParams = args.params;
  params.extra = nullptr;
  return params;
}

TEST_F(CuptiTest, InterposedLaunchOnlyHandsOverTheCorrelationId) {
  KernelArgs args;
  cuLaunchKernel_params params = KernelLaunchParams(args);
  gpumem::Locals().hook_depth = 1;  // inside an interposed cuLaunchKernel
  uint64_t before = recorder::NextSeq();
  Call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params, CUDA_SUCCESS, 77, "kernel");
  EXPECT_EQ(gpumem::Locals().launch_correlation_id, 77u);
  EXPECT_EQ(gpumem::Locals().hook_depth, 1);
  EXPECT_TRUE(g_launches.empty());
  EXPECT_TRUE(g_memory.empty());
  EXPECT_EQ(recorder::NextSeq(), before + 1);  // no sequence number taken
}

TEST_F(CuptiTest, UnwrappedLaunchIsRecordedOnceWithSeqTakenAtEntry) {
  KernelArgs args;
  cuLaunchKernel_params params = KernelLaunchParams(args);
  CUresult result = CUDA_SUCCESS;
  errno = 1234;
  Callback(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_ENTER, &params, nullptr, 9,
           "_Z6kernelPfi");
  EXPECT_TRUE(g_launches.empty());
  uint64_t between = recorder::NextSeq();
  Callback(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_API_EXIT, &params, &result, 9,
           "_Z6kernelPfi");
  EXPECT_EQ(errno, 1234);
  EXPECT_EQ(gpumem::Locals().hook_depth, 0);
  EXPECT_EQ(gpumem::Locals().launch_correlation_id, 0u);
  ASSERT_EQ(g_launches.size(), 1u);
  const LaunchRecord& launch = g_launches[0].record;
  EXPECT_LT(launch.seq, between);
  EXPECT_EQ(g_launches[0].name, "_Z6kernelPfi");
  EXPECT_EQ(launch.api, proto::LaunchApi::kCuLaunchKernel);
  EXPECT_EQ(launch.function, reinterpret_cast<void*>(0x1234));
  EXPECT_EQ(launch.grid[0], 4u);
  EXPECT_EQ(launch.grid[1], 2u);
  EXPECT_EQ(launch.grid[2], 1u);
  EXPECT_EQ(launch.block[0], 128u);
  EXPECT_EQ(launch.block[1], 1u);
  EXPECT_EQ(launch.block[2], 1u);
  EXPECT_EQ(launch.shared_memory_bytes, 256u);
  EXPECT_EQ(launch.stream, 0x5678u);
  EXPECT_EQ(launch.kernel_params, args.params);
  EXPECT_EQ(launch.extra, nullptr);
  EXPECT_EQ(launch.correlation_id, 9u);
  EXPECT_EQ(launch.result, 0);
  EXPECT_TRUE(launch.from_cupti);
  EXPECT_EQ(launch.device, -1);  // no driver to ask
  EXPECT_EQ(launch.stack_id, 0u);
}

TEST_F(CuptiTest, FailedLaunchKeepsItsResult) {
  KernelArgs args;
  cuLaunchKernel_ptsz_params params{};
  params.f = reinterpret_cast<CUfunction>(0x99);
  params.kernelParams = args.params;
  Call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &params, CUDA_ERROR_INVALID_VALUE, 3, "k");
  ASSERT_EQ(g_launches.size(), 1u);
  EXPECT_EQ(g_launches[0].record.result, CUDA_ERROR_INVALID_VALUE);
}

TEST_F(CuptiTest, LaunchExTakesTheConfigAndSkipsANullOne) {
  KernelArgs args;
  CUlaunchConfig config{};
  config.gridDimX = 8;
  config.gridDimY = 1;
  config.gridDimZ = 1;
  config.blockDimX = 64;
  config.blockDimY = 2;
  config.blockDimZ = 1;
  config.sharedMemBytes = 1024;
  config.hStream = reinterpret_cast<CUstream>(0xabc);
  cuLaunchKernelEx_params params{&config, reinterpret_cast<CUfunction>(0x42), args.params, nullptr};
  Call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &params, CUDA_SUCCESS, 5, "ex_kernel");
  ASSERT_EQ(g_launches.size(), 1u);
  const LaunchRecord& launch = g_launches[0].record;
  EXPECT_EQ(launch.api, proto::LaunchApi::kCuLaunchKernelEx);
  EXPECT_EQ(launch.grid[0], 8u);
  EXPECT_EQ(launch.block[1], 2u);
  EXPECT_EQ(launch.shared_memory_bytes, 1024u);
  EXPECT_EQ(launch.stream, 0xabcu);
  EXPECT_EQ(g_launches[0].name, "ex_kernel");

  cuLaunchKernelEx_ptsz_params no_config{nullptr, reinterpret_cast<CUfunction>(0x42), nullptr,
                                         nullptr};
  uint64_t before = recorder::NextSeq();
  Call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, &no_config, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(g_launches.size(), 1u);
  EXPECT_EQ(recorder::NextSeq(), before + 1);
}

TEST_F(CuptiTest, GraphLaunchRecordsTheGraphAndNoKernelName) {
  cuGraphLaunch_params params{reinterpret_cast<CUgraphExec>(0x600), reinterpret_cast<CUstream>(7)};
  Call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &params, CUDA_SUCCESS, 11, "not_a_kernel");
  cuGraphLaunch_ptsz_params ptsz{reinterpret_cast<CUgraphExec>(0x700), nullptr};
  Call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, &ptsz, CUDA_SUCCESS, 12);
  ASSERT_EQ(g_launches.size(), 2u);
  EXPECT_EQ(g_launches[0].record.api, proto::LaunchApi::kCuGraphLaunch);
  EXPECT_EQ(g_launches[0].record.graph, 0x600u);
  EXPECT_EQ(g_launches[0].record.stream, 7u);
  EXPECT_EQ(g_launches[0].record.function, nullptr);
  EXPECT_EQ(g_launches[0].name, "");
  EXPECT_EQ(g_launches[1].record.graph, 0x700u);
}

TEST_F(CuptiTest, CooperativeLaunchIsRecorded) {
  KernelArgs args;
  cuLaunchCooperativeKernel_params params{};
  params.f = reinterpret_cast<CUfunction>(0x77);
  params.gridDimX = 2;
  params.blockDimX = 32;
  params.kernelParams = args.params;
  Call(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, &params, CUDA_SUCCESS, 4, "coop");
  ASSERT_EQ(g_launches.size(), 1u);
  EXPECT_EQ(g_launches[0].record.api, proto::LaunchApi::kCuLaunchCooperativeKernel);
  EXPECT_EQ(g_launches[0].record.grid[0], 2u);
  EXPECT_EQ(g_launches[0].record.extra, nullptr);
}

// ---- Memory ----

TEST_F(CuptiTest, UnwrappedAllocationIsOneAllocWithSeqAfterTheCall) {
  CUdeviceptr pointer = 0;
  cuMemAlloc_v2_params params{&pointer, 1 << 20};
  Callback(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_ENTER, &params);
  EXPECT_TRUE(g_memory.empty());
  pointer = 0x7f0000200000;  // what the driver wrote
  uint64_t before = recorder::NextSeq();
  CUresult result = CUDA_SUCCESS;
  Callback(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_API_EXIT, &params, &result);
  ASSERT_EQ(g_memory.size(), 1u);
  const MemoryRecord& alloc = g_memory[0];
  EXPECT_GT(alloc.seq, before);
  EXPECT_EQ(alloc.api, proto::Api::kCuMemAlloc);
  EXPECT_EQ(alloc.kind, proto::MemoryKind::kDevice);
  EXPECT_EQ(alloc.action, proto::Action::kAlloc);
  EXPECT_EQ(alloc.address, 0x7f0000200000u);
  EXPECT_EQ(alloc.size, 1u << 20);
  EXPECT_EQ(alloc.result, 0);
  EXPECT_EQ(alloc.device, -1);  // no driver to ask
  EXPECT_EQ(gpumem::Locals().hook_depth, 0);
}

TEST_F(CuptiTest, InterposedMemoryCallsAreLeftToInterposition) {
  CUdeviceptr pointer = 0x1000;
  cuMemAlloc_v2_params alloc{&pointer, 4096};
  cuMemFree_v2_params free{0x1000};
  gpumem::Locals().hook_depth = 2;
  uint64_t before = recorder::NextSeq();
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &alloc, CUDA_SUCCESS);
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &free, CUDA_SUCCESS);
  EXPECT_TRUE(g_memory.empty());
  EXPECT_EQ(gpumem::Locals().launch_correlation_id, 0u);
  EXPECT_EQ(recorder::NextSeq(), before + 1);
}

TEST_F(CuptiTest, UnwrappedFreeIsOneFreeWithSeqTakenAtEntry) {
  cuMemFree_v2_params params{0x7f0000200000};
  Callback(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, CUPTI_API_ENTER, &params, nullptr, 21);
  EXPECT_TRUE(g_memory.empty());
  uint64_t between = recorder::NextSeq();
  CUresult result = CUDA_SUCCESS;
  Callback(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, CUPTI_API_EXIT, &params, &result, 21);
  ASSERT_EQ(g_memory.size(), 1u);
  const MemoryRecord& free = g_memory[0];
  EXPECT_LT(free.seq, between);
  EXPECT_EQ(free.api, proto::Api::kCuMemFree);
  EXPECT_EQ(free.action, proto::Action::kFree);
  EXPECT_EQ(free.address, 0x7f0000200000u);
  EXPECT_EQ(free.stack_id, 0u);
}

TEST_F(CuptiTest, FreeWhoseEntryWasNotSeenTakesItsSeqAtExit) {
  cuMemFree_v2_params params{0x5000};
  uint64_t before = recorder::NextSeq();
  CUresult result = CUDA_SUCCESS;
  Callback(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, CUPTI_API_EXIT, &params, &result, 22);
  ASSERT_EQ(g_memory.size(), 1u);
  EXPECT_GT(g_memory[0].seq, before);
}

TEST_F(CuptiTest, FailedAllocationIsAllocFailed) {
  CUdeviceptr pointer = 0xdeadbeef;  // left as it was: the call failed
  cuMemAllocAsync_params params{&pointer, size_t{1} << 40, reinterpret_cast<CUstream>(0x10)};
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &params, CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(g_memory.size(), 1u);
  const MemoryRecord& failed = g_memory[0];
  EXPECT_EQ(failed.action, proto::Action::kAllocFailed);
  EXPECT_EQ(failed.api, proto::Api::kCuMemAllocAsync);
  EXPECT_EQ(failed.kind, proto::MemoryKind::kPool);
  EXPECT_EQ(failed.result, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(failed.address, 0u);
  EXPECT_EQ(failed.size, size_t{1} << 40);
  EXPECT_EQ(failed.stream, 0x10u);
  EXPECT_TRUE(WantsMemoryInfo(failed));
}

TEST_F(CuptiTest, FailedFreeIsFreeFailedAndNullFreesAreNotRecorded) {
  cuMemFreeAsync_params bad{0x1234, nullptr};
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, &bad, CUDA_ERROR_INVALID_VALUE);
  cuMemFree_v2_params null_free{0};
  cuMemFreeHost_params null_host{nullptr};
  uint64_t before = recorder::NextSeq();
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &null_free, CUDA_SUCCESS);
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, &null_host, CUDA_SUCCESS);
  EXPECT_EQ(recorder::NextSeq(), before + 1);
  ASSERT_EQ(g_memory.size(), 1u);
  EXPECT_EQ(g_memory[0].action, proto::Action::kFreeFailed);
  EXPECT_EQ(g_memory[0].kind, proto::MemoryKind::kPool);
  EXPECT_EQ(g_memory[0].address, 0x1234u);
}

TEST_F(CuptiTest, PinnedHostAndPitchedAllocations) {
  void* host = nullptr;
  cuMemHostAlloc_params pinned{&host, 8192, 0};
  Callback(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, CUPTI_API_ENTER, &pinned);
  host = reinterpret_cast<void*>(0x7000);
  CUresult ok = CUDA_SUCCESS;
  Callback(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, CUPTI_API_EXIT, &pinned, &ok);
  CUdeviceptr pitched = 0x9000;
  size_t pitch = 512;
  cuMemAllocPitch_v2_params pitch_params{&pitched, &pitch, 500, 10, 4};
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, &pitch_params, CUDA_SUCCESS);
  ASSERT_EQ(g_memory.size(), 2u);
  EXPECT_EQ(g_memory[0].kind, proto::MemoryKind::kPinnedHost);
  EXPECT_EQ(g_memory[0].device, -1);
  EXPECT_EQ(g_memory[0].address, 0x7000u);
  EXPECT_EQ(g_memory[1].pitch, 512u);
  EXPECT_EQ(g_memory[1].size, 5120u);
  EXPECT_EQ(g_memory[1].address, 0x9000u);
}

TEST_F(CuptiTest, VirtualMemoryCalls) {
  CUdeviceptr reserved = 0x200000000;
  cuMemAddressReserve_params reserve{&reserved, 1 << 30, 0, 0, 0};
  CUmemGenericAllocationHandle handle = 0x55;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 3;
  cuMemCreate_params create{&handle, 2 << 20, &prop, 0};
  cuMemMap_params map{0x200000000, 2 << 20, 0, 0x55, 0};
  cuMemUnmap_params unmap{0x200000000, 2 << 20};
  cuMemRelease_params release{0x55};
  cuMemAddressFree_params address_free{0x200000000, 1 << 30};
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &reserve, CUDA_SUCCESS);
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &create, CUDA_SUCCESS);
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &map, CUDA_SUCCESS);
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &unmap, CUDA_SUCCESS);
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, &release, CUDA_SUCCESS);
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, &address_free, CUDA_SUCCESS);
  ASSERT_EQ(g_memory.size(), 6u);
  EXPECT_EQ(g_memory[0].kind, proto::MemoryKind::kVmmReservation);
  EXPECT_EQ(g_memory[0].address, 0x200000000u);
  EXPECT_EQ(g_memory[0].device, -1);
  EXPECT_EQ(g_memory[1].kind, proto::MemoryKind::kVmmPhysical);
  EXPECT_EQ(g_memory[1].handle, 0x55u);
  EXPECT_EQ(g_memory[1].device, 3);
  EXPECT_EQ(g_memory[1].address, 0u);
  EXPECT_EQ(g_memory[2].kind, proto::MemoryKind::kVmmMapping);
  EXPECT_EQ(g_memory[2].handle, 0x55u);
  EXPECT_EQ(g_memory[2].address, 0x200000000u);
  EXPECT_EQ(g_memory[3].action, proto::Action::kFree);
  EXPECT_EQ(g_memory[3].size, 2u << 20);
  EXPECT_EQ(g_memory[4].handle, 0x55u);
  EXPECT_EQ(g_memory[5].api, proto::Api::kCuMemAddressFree);
  // Replay order: every event after the one before it.
  for (size_t i = 1; i < g_memory.size(); ++i) EXPECT_GT(g_memory[i].seq, g_memory[i - 1].seq);
}

// NCCL's calls reaching the driver past interposition: an import is an imported handle of no
// device here; a retain is recorded as a free is (its sequence number before the call), action
// RETAIN, with the handle and the address it was asked about; a failed import is not recorded.
TEST_F(CuptiTest, SharedMemoryCalls) {
  CUmemGenericAllocationHandle imported = 0x66;
  cuMemImportFromShareableHandle_params import_params{
      &imported, reinterpret_cast<void*>(intptr_t{7}), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
  CUmemGenericAllocationHandle retained = 0x55;
  cuMemRetainAllocationHandle_params retain{&retained, reinterpret_cast<void*>(0x200000000)};
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle, &import_params, CUDA_SUCCESS);
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemRetainAllocationHandle, &retain, CUDA_SUCCESS);
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle, &import_params,
       CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(g_memory.size(), 2u);
  EXPECT_EQ(g_memory[0].api, proto::Api::kCuMemImportFromShareableHandle);
  EXPECT_EQ(g_memory[0].kind, proto::MemoryKind::kVmmImported);
  EXPECT_EQ(g_memory[0].action, proto::Action::kAlloc);
  EXPECT_EQ(g_memory[0].handle, 0x66u);
  EXPECT_EQ(g_memory[0].device, -1);
  EXPECT_EQ(g_memory[1].api, proto::Api::kCuMemRetainAllocationHandle);
  EXPECT_EQ(g_memory[1].action, proto::Action::kRetain);
  EXPECT_EQ(g_memory[1].handle, 0x55u);
  EXPECT_EQ(g_memory[1].address, 0x200000000u);
  EXPECT_GT(g_memory[1].seq, g_memory[0].seq);
}

TEST_F(CuptiTest, UnknownCallbacksAndOtherDomainsRecordNothing) {
  int params[8] = {};
  uint64_t before = recorder::NextSeq();
  Call(CUPTI_DRIVER_TRACE_CBID_cuMemcpy, params, CUDA_SUCCESS);
  Call(static_cast<CUpti_CallbackId>(99999), params, CUDA_SUCCESS);
  CUpti_CallbackData data{};
  data.functionParams = params;
  OnCallback(nullptr, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &data);
  OnCallback(nullptr, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, nullptr);
  EXPECT_TRUE(g_memory.empty());
  EXPECT_TRUE(g_launches.empty());
  EXPECT_EQ(recorder::NextSeq(), before + 1);
  EXPECT_EQ(gpumem::Locals().hook_depth, 0);
}

// ---- Activity records ----

TEST_F(CuptiTest, KernelAndPoolActivityRecords) {
  CUpti_ActivityKernel10 kernel{};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.start = 1000;
  kernel.end = 2500;
  kernel.deviceId = 1;
  kernel.correlationId = 9;
  HandleActivityRecord(reinterpret_cast<const CUpti_Activity&>(kernel));
  CUpti_ActivityMemoryPool3 pool{};
  pool.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
  pool.address = 0x300000000;
  pool.deviceId = 2;
  pool.size = 64 << 20;
  pool.utilizedSize = 10 << 20;
  pool.timestamp = 5555;
  pool.correlationId = 31;
  HandleActivityRecord(reinterpret_cast<const CUpti_Activity&>(pool));
  pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED;
  HandleActivityRecord(reinterpret_cast<const CUpti_Activity&>(pool));
  CUpti_Activity other{CUPTI_ACTIVITY_KIND_MEMCPY};
  HandleActivityRecord(other);
  ASSERT_EQ(g_timings.size(), 1u);
  EXPECT_EQ(g_timings[0].correlation_id, 9u);
  EXPECT_EQ(g_timings[0].start, 1000u);
  EXPECT_EQ(g_timings[0].end, 2500u);
  EXPECT_EQ(g_timings[0].device, 1);
  ASSERT_EQ(g_pools.size(), 2u);
  EXPECT_EQ(g_pools[0].pool, 0x300000000u);
  EXPECT_EQ(g_pools[0].device, 2);
  EXPECT_EQ(g_pools[0].reserved, 64u << 20);
  EXPECT_EQ(g_pools[0].used, 10u << 20);
  EXPECT_EQ(g_pools[0].timestamp, 5555u);
  EXPECT_EQ(g_pools[0].correlation_id, 31u);
  EXPECT_EQ(g_pools[1].reserved, 0u);
  EXPECT_EQ(g_pools[1].used, 0u);
}

// A stand-in for cuptiActivityGetNextRecord over a buffer of records laid end to end.
CUptiResult NextRecord(uint8_t* buffer, size_t valid_size, CUpti_Activity** record) {
  size_t offset = 0;
  if (*record != nullptr) {
    offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer);
    offset += (*record)->kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL ? sizeof(CUpti_ActivityMemoryPool3)
                                                                 : sizeof(CUpti_ActivityKernel10);
  }
  if (offset >= valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  return CUPTI_SUCCESS;
}

TEST_F(CuptiTest, CompletedBuffersAreReadAndReused) {
  SetGetNextRecord(&NextRecord);
  uint8_t* buffer = nullptr;
  size_t size = 0;
  size_t max_records = 1;
  BufferRequested(&buffer, &size, &max_records);
  ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(size, kActivityBufferBytes);
  EXPECT_EQ(max_records, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer) % 8, 0u);
  CUpti_ActivityKernel10 kernel{};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.correlationId = 1;
  CUpti_ActivityMemoryPool3 pool{};
  pool.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  pool.address = 0x42;
  memcpy(buffer, &kernel, sizeof(kernel));
  memcpy(buffer + sizeof(kernel), &pool, sizeof(pool));
  kernel.correlationId = 2;
  memcpy(buffer + sizeof(kernel) + sizeof(pool), &kernel, sizeof(kernel));
  BufferCompleted(nullptr, 0, buffer, size, 2 * sizeof(kernel) + sizeof(pool));
  EXPECT_EQ(gpumem::Locals().hook_depth, 0);
  ASSERT_EQ(g_timings.size(), 2u);
  EXPECT_EQ(g_timings[1].correlation_id, 2u);
  ASSERT_EQ(g_pools.size(), 1u);
  EXPECT_EQ(g_pools[0].pool, 0x42u);
  uint8_t* again = nullptr;
  BufferRequested(&again, &size, &max_records);
  EXPECT_EQ(again, buffer);  // the returned buffer is handed out again
  BufferCompleted(nullptr, 0, again, size, 0);
  SetGetNextRecord(nullptr);
}

// ---- Finding and starting libcupti ----

std::vector<std::string> Paths(const CandidatePaths& candidates) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < candidates.size(); ++i) paths.emplace_back(candidates[i]);
  return paths;
}

size_t IndexOf(const std::vector<std::string>& paths, const std::string& path) {
  for (size_t i = 0; i < paths.size(); ++i) {
    if (paths[i] == path) return i;
  }
  return paths.size();
}

TEST(CuptiLibrarySearch, ExplicitPathIsTheOnlyCandidate) {
  LoadedCudaLibraries loaded;
  strcpy(loaded.runtime, "/opt/cuda/lib64/libcudart.so.13");
  auto candidates = std::make_unique<CandidatePaths>();
  BuildCandidates("/my/libcupti.so.13", loaded, candidates.get());
  EXPECT_EQ(Paths(*candidates), std::vector<std::string>{"/my/libcupti.so.13"});
}

TEST(CuptiLibrarySearch, OrderFollowsTheLibrariesAlreadyLoaded) {
  LoadedCudaLibraries loaded;
  strcpy(loaded.runtime,
         "/venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12");
  strcpy(loaded.driver, "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  auto candidates = std::make_unique<CandidatePaths>();
  BuildCandidates(nullptr, loaded, candidates.get());
  std::vector<std::string> paths = Paths(*candidates);
  const std::string site = "/venv/lib/python3.12/site-packages/nvidia/";
  size_t runtime_dir = IndexOf(paths, site + "cuda_runtime/lib/libcupti.so");
  size_t cu13 = IndexOf(paths, site + "cu13/lib/libcupti.so.13");
  size_t cupti_wheel = IndexOf(paths, site + "cuda_cupti/lib/libcupti.so.12");
  size_t driver_dir = IndexOf(paths, "/usr/lib/x86_64-linux-gnu/libcupti.so");
  size_t toolkit = IndexOf(paths, "/usr/local/cuda/lib64/libcupti.so");
  size_t extras = IndexOf(paths, "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13");
  size_t bare = IndexOf(paths, "libcupti.so.13");
  ASSERT_LT(bare, paths.size());
  EXPECT_EQ(runtime_dir, 0u);
  EXPECT_EQ(paths[1], site + "cuda_runtime/lib/libcupti.so.13");
  EXPECT_LT(runtime_dir, cu13);
  EXPECT_LT(cu13, cupti_wheel);
  EXPECT_LT(cupti_wheel, driver_dir);
  EXPECT_LT(driver_dir, toolkit);
  EXPECT_LT(toolkit, extras);
  EXPECT_LT(extras, bare);
  EXPECT_EQ(paths.back(), "libcupti.so.12");

  // A libcupti already in the process (another tool's) comes first: never two copies.
  strcpy(loaded.cupti, "/opt/nsight/libcupti.so.13");
  candidates->Clear();
  BuildCandidates("", loaded, candidates.get());
  EXPECT_EQ(Paths(*candidates).front(), "/opt/nsight/libcupti.so.13");
}

TEST(CuptiLibrarySearch, WheelDirectoriesAreNotRepeated) {
  LoadedCudaLibraries loaded;
  strcpy(loaded.runtime, "/sp/nvidia/cu13/lib/libcudart.so.13");
  auto candidates = std::make_unique<CandidatePaths>();
  BuildCandidates(nullptr, loaded, candidates.get());
  std::vector<std::string> paths = Paths(*candidates);
  for (size_t i = 0; i < paths.size(); ++i) {
    for (size_t j = i + 1; j < paths.size(); ++j) EXPECT_NE(paths[i], paths[j]);
  }
  EXPECT_EQ(paths[0], "/sp/nvidia/cu13/lib/libcupti.so");
  EXPECT_LT(IndexOf(paths, "/sp/nvidia/cuda_cupti/lib/libcupti.so"), paths.size());
}

TEST(CuptiLibrarySearch, FindsTheLibrariesOfThisProcess) {
  LoadedCudaLibraries loaded;
  FindLoadedCudaLibraries(&loaded);  // a unit test loads no CUDA library
  EXPECT_STREQ(loaded.cupti, "");
  EXPECT_STREQ(loaded.runtime, "");
  EXPECT_STREQ(loaded.driver, "");
}

TEST_F(CuptiTest, DisabledByOption) {
  StartConfig config;
  config.cupti = false;
  config.loader = LoaderFunctions{&dlopen, &dlsym};
  EXPECT_EQ(Start(config), proto::CuptiState::kDisabled);
  ASSERT_EQ(g_statuses.size(), 1u);
  EXPECT_EQ(g_statuses[0].state, proto::CuptiState::kDisabled);
  EXPECT_FALSE(g_statuses[0].kernel_timing);
}

TEST_F(CuptiTest, UnloadableLibraryIsNotFoundAndNothingBreaks) {
  testing::TempDir dir;
  std::string fake = dir.File("libcupti.so");
  std::ofstream(fake) << "not an ELF file";
  StartConfig config;
  config.library_path = fake.c_str();
  config.kernel_times = true;
  config.loader = LoaderFunctions{&dlopen, &dlsym};
  EXPECT_EQ(Start(config), proto::CuptiState::kNotFound);
  ASSERT_EQ(g_statuses.size(), 1u);
  EXPECT_EQ(g_statuses[0].state, proto::CuptiState::kNotFound);
  EXPECT_NE(g_statuses[0].detail.find("GPUMEM_CUPTI_LIB=" + fake), std::string::npos)
      << g_statuses[0].detail;
  EXPECT_NE(g_statuses[0].detail.find(fake + ": "), std::string::npos) << g_statuses[0].detail;
  EXPECT_FALSE(g_statuses[0].kernel_timing);

  config.library_path = "/no/such/dir/libcupti.so";
  EXPECT_EQ(Start(config), proto::CuptiState::kNotFound);
  ASSERT_EQ(g_statuses.size(), 2u);
  EXPECT_NE(g_statuses[1].detail.find("/no/such/dir"), std::string::npos) << g_statuses[1].detail;
}

TEST_F(CuptiTest, ALibraryThatIsNotCuptiFails) {
  StartConfig config;
  config.library_path = "libm.so.6";  // loads, has no cuptiSubscribe
  config.loader = LoaderFunctions{&dlopen, &dlsym};
  EXPECT_EQ(Start(config), proto::CuptiState::kFailed);
  ASSERT_EQ(g_statuses.size(), 1u);
  EXPECT_NE(g_statuses[0].detail.find("not a usable libcupti"), std::string::npos)
      << g_statuses[0].detail;
}

TEST_F(CuptiTest, YieldingWithNoSubscriptionDoesNothing) {
  YieldSubscription(nullptr, "another tool");
  YieldSubscription(reinterpret_cast<const void*>(&OnCallback), nullptr);
  EXPECT_TRUE(g_statuses.empty());
  EXPECT_EQ(gpumem::Locals().hook_depth, 0);
}

// ---- In a recorded program (preload library, fake CUDA) ----

std::vector<CuptiStatus> CuptiStatuses(const std::string& trace) {
  std::vector<CuptiStatus> statuses;
  auto file =
      report::TraceFile::Read(trace, [&](const report::PacketPosition&, const TracePacket& packet) {
        if (packet.has_cupti()) statuses.push_back(packet.cupti());
      });
  EXPECT_TRUE(file.ok()) << file.status();
  return statuses;
}

TEST(CuptiInProcess, TheTraceSaysWhatBecameOfCupti) {
  testing::TempDir dir;
  struct Case {
    std::map<std::string, std::string> settings;
    CuptiState state;
  };
  for (const Case& run_case :
       {Case{{{"GPUMEM_CUPTI", "0"}}, CUPTI_DISABLED},
        Case{{{"GPUMEM_CUPTI_LIB", dir.File("missing/libcupti.so")}}, CUPTI_NOT_FOUND}}) {
    std::string trace = dir.File("run.trace");
    auto environment = testing::RecordingEnvironment(trace);
    for (const auto& [name, value] : run_case.settings) environment[name] = value;
    testing::ProgramRun run =
        testing::RunProgram({testing::BuildPath("bin/leak_loop")}, environment);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.err.find("gpumem:"), std::string::npos) << run.err;
    std::vector<CuptiStatus> statuses = CuptiStatuses(trace);
    ASSERT_EQ(statuses.size(), 1u);  // once per process, at the first CUDA call
    EXPECT_EQ(statuses[0].state(), run_case.state) << statuses[0].detail();
  }
}

// The real libcupti of this machine's toolkit, where there is one, against the fake driver: it
// cannot attach to a GPU, and the program must not notice.
TEST(CuptiInProcess, RealLibcuptiWithoutAGpuLeavesTheProgramUnharmed) {
  const std::string libcupti = "/usr/local/cuda/lib64/libcupti.so";
  if (access(libcupti.c_str(), F_OK) != 0) GTEST_SKIP() << "no " << libcupti;
  testing::TempDir dir;
  std::string trace = dir.File("real.trace");
  auto environment = testing::RecordingEnvironment(trace);
  environment["GPUMEM_CUPTI_LIB"] = libcupti;
  environment["GPUMEM_KERNEL_TIMES"] = "1";
  std::map<std::string, std::string> plain = {{"LD_LIBRARY_PATH", testing::BuildPath("lib/fake")}};
  testing::ProgramRun without = testing::RunProgram({testing::BuildPath("bin/leak_loop")}, plain);
  testing::ProgramRun with =
      testing::RunProgram({testing::BuildPath("bin/leak_loop")}, environment);
  ASSERT_EQ(with.exit_code, 0) << with.err;
  EXPECT_EQ(with.out, without.out);
  std::vector<CuptiStatus> statuses = CuptiStatuses(trace);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_NE(statuses[0].state(), CUPTI_UNKNOWN) << statuses[0].detail();
  std::cout << "real libcupti, fake driver: " << report::CuptiStateName(statuses[0].state()) << " "
            << statuses[0].detail() << "\n";
}

}  // namespace
}  // namespace gpumem::cupti

namespace gpumem::cupti {
namespace {

// Launch callbacks are enabled only on request (GPUMEM_CUPTI_LAUNCHES, GPUMEM_KERNEL_TIMES):
// exactly the eight launch APIs are told apart from the memory APIs.
TEST(CuptiCallbackSetTest, LaunchCallbacksAreTheEightLaunchApis) {
  size_t launches = 0;
  for (CUpti_CallbackId cbid : kDriverCallbacks) launches += IsLaunchCallback(cbid);
  EXPECT_EQ(launches, 8u);
  EXPECT_TRUE(IsLaunchCallback(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz));
  EXPECT_FALSE(IsLaunchCallback(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
}

// ---- The memory callbacks' probation (cupti/subscriber.h) ----

// Each case runs in a child process: retiring the memory callbacks is for the life of a process,
// and the fake libcupti (lib/fake/libcupti.so) holds one subscription.
class MemoryCallbackProbation : public CuptiTest {
 protected:
  using Check = void (*)(int (*enabled)(unsigned));
  static void InChild(bool keep_memory_callbacks, Check check, bool launches = false) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      StartConfig config;
      const std::string library = testing::BuildPath("lib/fake/libcupti.so");
      config.library_path = library.c_str();
      config.keep_memory_callbacks = keep_memory_callbacks;
      config.launches = launches;
      config.loader = LoaderFunctions{&dlopen, &dlsym};
      void* fake = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
      const bool active = Start(config) == proto::CuptiState::kActive;
      if (fake == nullptr) fake = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
      auto enabled = fake != nullptr
                         ? reinterpret_cast<int (*)(unsigned)>(dlsym(fake, "fake_cupti_enabled"))
                         : nullptr;
      if (!active || enabled == nullptr) {
        std::cerr << "the fake libcupti did not start: " << library << "\n";
        _exit(3);
      }
      RestartMemoryProbation();  // the calls of the tests before this one do not count
      check(enabled);
      _exit(::testing::Test::HasFailure() ? 1 : 0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's expectations failed (its output above)";
  }
  // A yes/no question to the fake libcupti (fake_cupti_subscribed, fake_cupti_finalized).
  static bool FakeCupti(const char* question) {
    void* fake = dlopen(testing::BuildPath("lib/fake/libcupti.so").c_str(), RTLD_NOW | RTLD_NOLOAD);
    auto ask = fake != nullptr ? reinterpret_cast<int (*)()>(dlsym(fake, question)) : nullptr;
    EXPECT_NE(ask, nullptr) << question;
    return ask != nullptr && ask() != 0;
  }
  // A memory call that interposition recorded: CUPTI's callbacks come inside its hook.
  static void WrappedAllocations(int count) {
    CUdeviceptr pointer = 0;
    cuMemAlloc_v2_params params{&pointer, 4096};
    gpumem::Locals().hook_depth = 1;
    for (int i = 0; i < count; ++i)
      Call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &params, CUDA_SUCCESS);
    gpumem::Locals().hook_depth = 0;
  }
};

TEST_F(MemoryCallbackProbation, RetiredAfterAThousandCallsInterpositionRecorded) {
  InChild(false, [](int (*enabled)(unsigned)) {
    EXPECT_TRUE(enabled(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
    EXPECT_TRUE(enabled(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync));
    EXPECT_FALSE(enabled(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));  // launches: interposition's
    WrappedAllocations(999);
    RetireMemoryCallbacksIfRedundant();
    EXPECT_TRUE(enabled(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2)) << "retired before the 1000th";
    WrappedAllocations(1);
    RetireMemoryCallbacksIfRedundant();
    // Nothing else is asked of CUPTI: it is detached, at the next memory call's exit callback.
    EXPECT_FALSE(FakeCupti("fake_cupti_finalized")) << "detached outside an exit callback";
    WrappedAllocations(1);
    EXPECT_TRUE(FakeCupti("fake_cupti_finalized"));
    EXPECT_FALSE(FakeCupti("fake_cupti_subscribed"));
    for (CUpti_CallbackId cbid : kDriverCallbacks) {
      EXPECT_FALSE(enabled(cbid)) << cbid;
    }
    ASSERT_FALSE(g_statuses.empty());
    EXPECT_EQ(g_statuses.back().state, proto::CuptiState::kActive);
    const std::string& detail = g_statuses.back().detail;
    EXPECT_NE(detail.find("memory callbacks off after 1000 memory calls"), std::string::npos)
        << detail;
    EXPECT_NE(detail.find("then CUPTI detached (cuptiFinalize)"), std::string::npos) << detail;
    EXPECT_NE(detail.find("libcupti.so"), std::string::npos);  // restated
  });
}

TEST_F(MemoryCallbackProbation, WithLaunchCallbacksOnlyTheMemoryOnesRetire) {
  InChild(
      false,
      [](int (*enabled)(unsigned)) {
        EXPECT_TRUE(enabled(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
        WrappedAllocations(1000);
        RetireMemoryCallbacksIfRedundant();
        EXPECT_FALSE(enabled(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
        WrappedAllocations(1);
        EXPECT_TRUE(enabled(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
        EXPECT_TRUE(FakeCupti("fake_cupti_subscribed"));
        EXPECT_FALSE(FakeCupti("fake_cupti_finalized"));
        EXPECT_NE(g_statuses.back().detail.find("memory callbacks off after 1000"),
                  std::string::npos);
        EXPECT_EQ(g_statuses.back().detail.find("detached"), std::string::npos);
      },
      /*launches=*/true);
}

TEST_F(MemoryCallbackProbation, OneCallInterpositionMissedKeepsThem) {
  InChild(false, [](int (*enabled)(unsigned)) {
    cuMemFree_v2_params missed{0x5000};  // reached the driver outside every hook
    Call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &missed, CUDA_SUCCESS);
    EXPECT_EQ(g_memory.size(), 1u);  // recorded from the callback
    WrappedAllocations(2000);
    RetireMemoryCallbacksIfRedundant();
    EXPECT_TRUE(enabled(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
    EXPECT_TRUE(enabled(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2));
  });
}

TEST_F(MemoryCallbackProbation, CatchAllKeepsThem) {
  InChild(true, [](int (*enabled)(unsigned)) {
    WrappedAllocations(2000);
    RetireMemoryCallbacksIfRedundant();
    EXPECT_TRUE(enabled(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
  });
}
}  // namespace
}  // namespace gpumem::cupti
