// report/stacks/recording_mode.h: a process's recording mode from its allocations' holders, and
// which allocations each mode counts.
#include "report/stacks/recording_mode.h"

#include <cstdint>
#include <string>
#include <vector>

#include "core/trace.pb.h"
#include "gtest/gtest.h"
#include "report/stacks/memory_holders.h"

namespace gpumem::report {
namespace {

constexpr uint64_t kPyTorchStack = 7;

const MemoryHolder* PyTorch() {
  Frame torch;
  torch.module = "/site-packages/torch/lib/libc10_cuda.so";
  return FindMemoryHolder({torch}, false);
}

MemoryEvent Alloc(Api api, MemoryKind kind, uint64_t stack_id) {
  MemoryEvent event;
  event.set_api(api);
  event.set_kind(kind);
  event.set_action(ALLOC);
  event.set_device(0);
  event.set_size(1 << 20);
  event.set_address(kind == VMM_PHYSICAL ? 0 : 0x1000'0000);
  event.set_stack_id(stack_id);
  return event;
}

CachedHolderOf PyTorchAt(uint64_t stack_id, int* asked = nullptr) {
  return CachedHolderOf([stack_id, asked](uint64_t stack) {
    if (asked != nullptr) ++*asked;
    return stack == stack_id ? PyTorch() : nullptr;
  });
}

TEST(RecordingModeTest, PyTorchsAllocationsDecideTheMode) {
  ASSERT_NE(PyTorch(), nullptr);
  EXPECT_TRUE(IsPyTorchAllocator(PyTorch()));
  CachedHolderOf holders = PyTorchAt(kPyTorchStack);
  SummaryModeDetector detector;
  detector.Add(Alloc(CUDA_MALLOC, DEVICE, 1), holders);  // the program's own: no PyTorch yet
  EXPECT_EQ(detector.mode(), SummaryMode::kPlain);
  EXPECT_TRUE(detector.StillPossible(SummaryMode::kPlain));
  detector.Add(Alloc(CU_MEM_CREATE, VMM_PHYSICAL, kPyTorchStack), holders);
  EXPECT_EQ(detector.mode(), SummaryMode::kSegments);
  EXPECT_TRUE(detector.expandable_segments());
  EXPECT_FALSE(detector.StillPossible(SummaryMode::kPlain));
  EXPECT_TRUE(detector.StillPossible(SummaryMode::kSegments));
  detector.Add(Alloc(CUDA_MALLOC_ASYNC, DEVICE, kPyTorchStack), holders);
  EXPECT_EQ(detector.mode(), SummaryMode::kTensors);
  EXPECT_FALSE(detector.expandable_segments());
  EXPECT_FALSE(detector.StillPossible(SummaryMode::kSegments));
  EXPECT_TRUE(detector.StillPossible(SummaryMode::kTensors));
}

TEST(RecordingModeTest, PinnedHostAndAddressSpaceAreNotDeviceMemory) {
  CachedHolderOf holders = PyTorchAt(kPyTorchStack);
  SummaryModeDetector detector;
  detector.Add(Alloc(CUDA_HOST_ALLOC, PINNED_HOST, kPyTorchStack), holders);
  detector.Add(Alloc(CU_MEM_ADDRESS_RESERVE, VMM_RESERVATION, kPyTorchStack), holders);
  EXPECT_EQ(detector.mode(), SummaryMode::kPlain);
  EXPECT_FALSE(IsDeviceMemory(Alloc(CUDA_HOST_ALLOC, PINNED_HOST, 0)));
  EXPECT_FALSE(IsDeviceMemory(Alloc(CU_MEM_MAP, VMM_MAPPING, 0)));
  EXPECT_TRUE(IsDeviceMemory(Alloc(CUDA_MALLOC, DEVICE, 0)));
  EXPECT_TRUE(IsDeviceMemory(Alloc(CU_MEM_CREATE, VMM_PHYSICAL, 0)));
}

TEST(RecordingModeTest, EachModeCountsItsOwnAllocations) {
  const MemoryEvent tensor = Alloc(CUDA_MALLOC_ASYNC, DEVICE, kPyTorchStack);
  const MemoryEvent segment = Alloc(CUDA_MALLOC, DEVICE, kPyTorchStack);
  const MemoryHolder* pytorch = PyTorch();
  EXPECT_TRUE(CountedInMode(SummaryMode::kTensors, tensor, pytorch));
  EXPECT_FALSE(CountedInMode(SummaryMode::kTensors, segment, pytorch));
  EXPECT_TRUE(CountedInMode(SummaryMode::kSegments, segment, pytorch));
  EXPECT_FALSE(CountedInMode(SummaryMode::kSegments, tensor, pytorch));
  EXPECT_FALSE(CountedInMode(SummaryMode::kSegments, segment, nullptr));  // the program's own
  EXPECT_TRUE(CountedInMode(SummaryMode::kPlain, segment, nullptr));
  EXPECT_TRUE(CountedInMode(SummaryMode::kPlain, tensor, pytorch));
  EXPECT_STREQ(SummaryModeName(SummaryMode::kTensors), "tensors");
  EXPECT_STREQ(SummaryModeName(SummaryMode::kSegments), "segments");
  EXPECT_STREQ(SummaryModeName(SummaryMode::kPlain), "plain");
}

TEST(RecordingModeTest, HoldersAreAskedOncePerStack) {
  int asked = 0;
  CachedHolderOf holders = PyTorchAt(kPyTorchStack, &asked);
  EXPECT_EQ(holders(kPyTorchStack), PyTorch());
  EXPECT_EQ(holders(kPyTorchStack), PyTorch());
  EXPECT_EQ(holders(3), nullptr);
  EXPECT_EQ(asked, 2);
  CachedHolderOf none(nullptr);
  EXPECT_EQ(none(kPyTorchStack), nullptr);
}

TEST(RecordingModeTest, CandidatesOfModesRuledOutAreDropped) {
  CachedHolderOf holders = PyTorchAt(kPyTorchStack);
  ModeCandidates<std::vector<SummaryMode>> candidates(
      [](SummaryMode) { return std::vector<SummaryMode>{}; });
  int fed = 0;
  auto feed = [&fed](std::vector<SummaryMode>&) { ++fed; };
  candidates.Add(Alloc(CUDA_MALLOC, DEVICE, 1), holders, feed);
  EXPECT_EQ(fed, 3);  // every mode still possible
  candidates.Add(Alloc(CUDA_MALLOC, DEVICE, kPyTorchStack), holders, feed);
  EXPECT_EQ(fed, 5);  // a segment: plain ruled out
  candidates.Add(Alloc(CUDA_MALLOC_ASYNC, DEVICE, kPyTorchStack), holders, feed);
  EXPECT_EQ(fed, 6);  // a tensor: only tensors left
  int left = 0;
  candidates.ForEach([&left](std::vector<SummaryMode>&) { ++left; });
  EXPECT_EQ(left, 1);
  EXPECT_EQ(candidates.detector().mode(), SummaryMode::kTensors);
}

}  // namespace
}  // namespace gpumem::report
