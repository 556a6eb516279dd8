// `gpumem record --tensors`' environment rules (report/allocator/tensor_mode.h).
#include "report/allocator/tensor_mode.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

std::vector<EnvironmentChange> ChangesFor(const std::map<std::string, std::string>& environment) {
  return TensorLevelEnvironment([&](const std::string& name) -> std::optional<std::string> {
    auto found = environment.find(name);
    if (found == environment.end()) return std::nullopt;
    return found->second;
  });
}

std::map<std::string, std::string> After(const std::vector<EnvironmentChange>& changes) {
  std::map<std::string, std::string> after;
  for (const EnvironmentChange& change : changes) after[change.name] = change.after;
  return after;
}

TEST(TensorMode, SetsEachFrameworksPerTensorAllocatorWhenNothingWasSet) {
  const auto changes = ChangesFor({});
  EXPECT_EQ(After(changes), (std::map<std::string, std::string>{
                                {"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"},
                                {"TF_GPU_ALLOCATOR", "cuda_malloc_async"},
                                {"XLA_PYTHON_CLIENT_ALLOCATOR", "platform"}}));
  EXPECT_EQ(DescribeChanges(changes),
            "PYTORCH_CUDA_ALLOC_CONF was unset; XLA_PYTHON_CLIENT_ALLOCATOR was unset; "
            "TF_GPU_ALLOCATOR was unset");
}

TEST(TensorMode, KeepsTheUsersSettingsButTheNativeAllocatorsOwn) {
  const auto changes = ChangesFor(
      {{"PYTORCH_CUDA_ALLOC_CONF",
        "max_split_size_mb:128,pinned_use_cuda_host_register:True,roundup_power2_divisions:[256:"
        "1,512:2],backend:native,expandable_segments:True"},
       {"TF_GPU_ALLOCATOR", "cuda_malloc_async"}});
  const auto after = After(changes);
  EXPECT_EQ(after.at("PYTORCH_CUDA_ALLOC_CONF"),
            "backend:cudaMallocAsync,pinned_use_cuda_host_register:True");
  EXPECT_EQ(after.count("TF_GPU_ALLOCATOR"), 0u);  // already per tensor: not a change
  // What it was is kept for the allocator models, readable back from the header's text.
  const std::string described = DescribeChanges(changes);
  const std::optional<std::string> before =
      ValueBeforeTensors(described, "PYTORCH_CUDA_ALLOC_CONF");
  ASSERT_TRUE(before.has_value()) << described;
  EXPECT_EQ(ParseAllocConf(*before).at("max_split_size_mb"), "128");
  EXPECT_EQ(ParseAllocConf(*before).at("roundup_power2_divisions"), "[256:1,512:2]");
  EXPECT_EQ(ParseAllocConf(*before).at("expandable_segments"), "True");
  EXPECT_EQ(ValueBeforeTensors(described, "XLA_PYTHON_CLIENT_ALLOCATOR"), std::nullopt);
}

TEST(TensorMode, ThePytorchAllocConfNameIsMergedIntoToo) {
  const auto after = After(ChangesFor({{"PYTORCH_ALLOC_CONF", "expandable_segments:True"}}));
  EXPECT_EQ(after.at("PYTORCH_ALLOC_CONF"), "backend:cudaMallocAsync");
  EXPECT_EQ(after.count("PYTORCH_CUDA_ALLOC_CONF"), 0u);  // newer PyTorch reads the other first
}

TEST(TensorMode, AlreadyAsyncIsNoChange) {
  const auto changes = ChangesFor({{"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"},
                                   {"XLA_PYTHON_CLIENT_ALLOCATOR", "platform"},
                                   {"TF_GPU_ALLOCATOR", "cuda_malloc_async"}});
  EXPECT_TRUE(changes.empty());
}

}  // namespace
}  // namespace gpumem::report
