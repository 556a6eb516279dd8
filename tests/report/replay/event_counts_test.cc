// Counts per (action, API): frees matched to allocations by address, by cuMemCreate handle and by
// range for cuMemUnmap; failed calls; what is live at the end; replay in seq order.
#include "report/replay/event_counts.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using testing::UniqueTempPath;

constexpr uint64_t kMiB = 1 << 20;

MemoryEvent Event(Api api, Action action, uint64_t size, uint64_t address, uint64_t handle = 0) {
  static uint64_t next_seq = 1;
  MemoryEvent event;
  event.set_seq(next_seq++);
  event.set_api(api);
  event.set_action(action);
  event.set_size(size);
  event.set_address(address);
  event.set_handle(handle);
  switch (api) {
    case CU_MEM_ADDRESS_RESERVE:
    case CU_MEM_ADDRESS_FREE:
      event.set_kind(VMM_RESERVATION);
      break;
    case CU_MEM_CREATE:
    case CU_MEM_RELEASE:
      event.set_kind(VMM_PHYSICAL);
      break;
    case CU_MEM_MAP:
    case CU_MEM_UNMAP:
      event.set_kind(VMM_MAPPING);
      break;
    default:
      event.set_kind(DEVICE);
  }
  return event;
}

TEST(EventCountsTest, PlainAllocationsFreesAndFailures) {
  const std::vector<MemoryEvent> events = {
      Event(CUDA_MALLOC, ALLOC, 100, 0xA000),
      Event(CUDA_MALLOC, ALLOC, 200, 0xB000),
      Event(CU_MEM_ALLOC, ALLOC, 300, 0xD000),
      Event(CUDA_FREE, FREE, 0, 0xA000),    // frees 100
      Event(CUDA_FREE, FREE, 0, 0xC000),    // never allocated: counted, 0 bytes
      Event(CUDA_FREE, FREE, 0, 0),         // cudaFree(nullptr)
      Event(CU_MEM_FREE, FREE, 0, 0xD000),  // frees 300
      Event(CUDA_MALLOC, ALLOC_FAILED, uint64_t{1} << 40, 0),
      Event(CUDA_FREE, FREE_FAILED, 0, 0xB000),  // 200 stays live
      Event(CUDA_MALLOC_ASYNC, ALLOC, 64, 0xE000),
      Event(CUDA_FREE_ASYNC, FREE, 0, 0xE000),
      Event(CUDA_MALLOC, ALLOC, 50, 0xA000),  // the freed address, reused
  };
  EXPECT_EQ(FormatEventCounts(CountEvents(events)),
            "alloc cuMemAlloc count=1 bytes=300\n"
            "alloc cudaMalloc count=3 bytes=350\n"
            "alloc cudaMallocAsync count=1 bytes=64\n"
            "free cuMemFree count=1 bytes=300\n"
            "free cudaFree count=3 bytes=100\n"
            "free cudaFreeAsync count=1 bytes=64\n"
            "alloc_failed cudaMalloc count=1 bytes=1099511627776\n"
            "free_failed cudaFree count=1 bytes=200\n"
            "live count=2 bytes=250\n");
}

TEST(EventCountsTest, VirtualMemoryByReservationHandleAndMappingRange) {
  const uint64_t va = 0x7f0000000000;
  const std::vector<MemoryEvent> events = {
      Event(CU_MEM_ADDRESS_RESERVE, ALLOC, 8 * kMiB, va),
      Event(CU_MEM_CREATE, ALLOC, 2 * kMiB, 0, /*handle=*/11),
      Event(CU_MEM_CREATE, ALLOC, 2 * kMiB, 0, /*handle=*/12),
      Event(CU_MEM_CREATE, ALLOC, 2 * kMiB, 0, /*handle=*/13),
      // The first mapping has the reservation's address: separate maps keep both.
      Event(CU_MEM_MAP, ALLOC, 2 * kMiB, va, 11),
      Event(CU_MEM_MAP, ALLOC, 2 * kMiB, va + 2 * kMiB, 12),
      Event(CU_MEM_MAP, ALLOC, 2 * kMiB, va + 4 * kMiB, 13),
      // One unmap covering the first two mappings, as PyTorch's expandable segments do.
      Event(CU_MEM_UNMAP, FREE, 4 * kMiB, va), Event(CU_MEM_RELEASE, FREE, 0, 0, /*handle=*/11),
      Event(CU_MEM_RELEASE, FREE_FAILED, 0, 0, /*handle=*/12),
      Event(CU_MEM_RELEASE, FREE, 0, 0, /*handle=*/99),  // unknown handle: 0 bytes
  };
  EventCounts counts = CountEvents(events);
  EXPECT_EQ(FormatEventCounts(counts),
            "alloc cuMemAddressReserve count=1 bytes=8388608\n"
            "alloc cuMemCreate count=3 bytes=6291456\n"
            "alloc cuMemMap count=3 bytes=6291456\n"
            "free cuMemRelease count=2 bytes=2097152\n"
            "free cuMemUnmap count=1 bytes=4194304\n"
            "free_failed cuMemRelease count=1 bytes=2097152\n"
            // reservation 8 MiB + handles 12, 13 + the mapping at va + 4 MiB
            "live count=4 bytes=14680064\n");

  // Freeing the reservation leaves the mapping at va + 4 MiB alone, and vice versa.
  std::vector<MemoryEvent> more = events;
  more.push_back(Event(CU_MEM_ADDRESS_FREE, FREE, 8 * kMiB, va));
  more.push_back(Event(CU_MEM_UNMAP, FREE, 2 * kMiB, va + 4 * kMiB));
  more.push_back(Event(CU_MEM_RELEASE, FREE, 0, 0, 12));
  more.push_back(Event(CU_MEM_RELEASE, FREE, 0, 0, 13));
  counts = CountEvents(more);
  EXPECT_EQ(counts.live.count, 0u);
  EXPECT_EQ(counts.live.bytes, 0u);
  EXPECT_EQ((counts.by_action_api[{FREE, "cuMemAddressFree"}].bytes), 8 * kMiB);
}

TEST(EventCountsTest, UnmapAtTheReservationAddressKeepsTheReservation) {
  const uint64_t va = 0x10000000;
  EventCounts counts = CountEvents(std::vector<MemoryEvent>{
      Event(CU_MEM_ADDRESS_RESERVE, ALLOC, 2 * kMiB, va),
      Event(CU_MEM_MAP, ALLOC, 2 * kMiB, va, 1),
      Event(CU_MEM_UNMAP, FREE, 2 * kMiB, va),
  });
  EXPECT_EQ(counts.live.count, 1u);
  EXPECT_EQ(counts.live.bytes, 2 * kMiB);
}

TEST(EventCountsTest, EveryApiHasItsCName) {
  const std::vector<std::pair<Api, std::string>> names = {
      {CUDA_MALLOC_FROM_POOL_ASYNC, "cudaMallocFromPoolAsync"},
      {CUDA_MALLOC_MANAGED, "cudaMallocManaged"},
      {CUDA_MALLOC_PITCH, "cudaMallocPitch"},
      {CUDA_MALLOC_3D, "cudaMalloc3D"},
      {CUDA_MALLOC_HOST, "cudaMallocHost"},
      {CUDA_HOST_ALLOC, "cudaHostAlloc"},
      {CUDA_FREE_HOST, "cudaFreeHost"},
      {CU_MEM_ALLOC_PITCH, "cuMemAllocPitch"},
      {CU_MEM_ALLOC_MANAGED, "cuMemAllocManaged"},
      {CU_MEM_ALLOC_ASYNC, "cuMemAllocAsync"},
      {CU_MEM_FREE_ASYNC, "cuMemFreeAsync"},
      {CU_MEM_ALLOC_FROM_POOL_ASYNC, "cuMemAllocFromPoolAsync"},
      {CU_MEM_HOST_ALLOC, "cuMemHostAlloc"},
      {CU_MEM_FREE_HOST, "cuMemFreeHost"},
  };
  for (const auto& [api, name] : names) {
    EventCounts counts = CountEvents(std::vector<MemoryEvent>{Event(api, ALLOC, 1, 0x10)});
    EXPECT_EQ(counts.by_action_api.begin()->first.second, name);
  }
  // Every value of the enum has a name of its own, none falls back to "api<N>".
  const google::protobuf::EnumDescriptor* apis = Api_descriptor();
  for (int i = 0; i < apis->value_count(); ++i) {
    const Api api = static_cast<Api>(apis->value(i)->number());
    EventCounts counts = CountEvents(std::vector<MemoryEvent>{Event(api, ALLOC, 1, 0x10)});
    EXPECT_NE(counts.by_action_api.begin()->first.second.rfind("api", 0), 0u)
        << apis->value(i)->name();
  }
}

TEST(EventCountsTest, MergeAddsProcessesTogether) {
  EventCounts total = CountEvents(std::vector<MemoryEvent>{Event(CUDA_MALLOC, ALLOC, 10, 0x1)});
  // The same address in another process is another allocation.
  total.Merge(CountEvents(std::vector<MemoryEvent>{Event(CUDA_MALLOC, ALLOC, 20, 0x1)}));
  EXPECT_EQ(FormatEventCounts(total),
            "alloc cudaMalloc count=2 bytes=30\n"
            "live count=2 bytes=30\n");
}

// Threads race for file space, so a file's order is not seq order. Counting in file order would
// pair the free with the wrong allocation of a reused address.
TEST(EventCountsTest, TraceFileEventsAreReplayedInSeqOrder) {
  auto framed = [](const TracePacket& packet) {
    const std::string body = packet.SerializeAsString();
    std::string out = "\x0A";
    for (uint64_t n = body.size();; n >>= 7) {
      if (n < 0x80) {
        out.push_back(static_cast<char>(n));
        break;
      }
      out.push_back(static_cast<char>((n & 0x7F) | 0x80));
    }
    return out + body;
  };
  TracePacket header;
  header.mutable_header()->set_format_version(1);
  std::string bytes = framed(header);
  MemoryEvent alloc1 = Event(CUDA_MALLOC, ALLOC, 100, 0xA000);
  MemoryEvent free1 = Event(CUDA_FREE, FREE, 0, 0xA000);
  MemoryEvent alloc2 = Event(CUDA_MALLOC, ALLOC, 300, 0xA000);
  for (const MemoryEvent& event : {alloc1, alloc2, free1}) {  // file order != seq order
    TracePacket packet;
    *packet.mutable_memory() = event;
    bytes += framed(packet);
  }
  const std::string path = UniqueTempPath(".trace");
  std::ofstream(path, std::ios::binary) << bytes;

  absl::StatusOr<SortedTrace> trace = ReadMemoryEventsBySeq(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->events.size(), 3u);
  EXPECT_EQ(trace->events[1].action(), FREE);
  EXPECT_EQ(FormatEventCounts(CountEvents(trace->events)),
            "alloc cudaMalloc count=2 bytes=400\n"
            "free cudaFree count=1 bytes=100\n"
            "live count=1 bytes=300\n");
  // Streamed, with the same answer.
  absl::StatusOr<CountedTrace> counted = CountTraceFile(path);
  ASSERT_TRUE(counted.ok()) << counted.status();
  EXPECT_EQ(FormatEventCounts(counted->counts), FormatEventCounts(CountEvents(trace->events)));
  std::remove(path.c_str());
}

// Launches are counted per API, demangled kernel name and shape; graph launches per API alone.
TEST(EventCountsTest, LaunchesByApiKernelAndShape) {
  EventCounter counter;
  LaunchEvent launch;
  launch.set_api(CU_LAUNCH_KERNEL);
  launch.set_grid_x(4);
  launch.set_grid_y(1);
  launch.set_grid_z(1);
  launch.set_block_x(128);
  launch.set_block_y(1);
  launch.set_block_z(1);
  for (int i = 0; i < 3; ++i) counter.AddLaunch(launch, "_Z9incrementPi");
  launch.set_grid_x(8);
  counter.AddLaunch(launch, "_Z9incrementPi");
  LaunchEvent graph;
  graph.set_api(CU_GRAPH_LAUNCH);
  graph.set_graph(0x1234);
  counter.AddLaunch(graph, "");
  counter.AddLaunch(graph, "");
  EXPECT_EQ(FormatEventCounts(counter.Counts()),
            "live count=0 bytes=0\n"
            "launch cuGraphLaunch count=2\n"
            "launch cuLaunchKernel kernel=increment(int*) count=3 grid=4,1,1 block=128,1,1\n"
            "launch cuLaunchKernel kernel=increment(int*) count=1 grid=8,1,1 block=128,1,1\n");
}

}  // namespace
}  // namespace gpumem::report
