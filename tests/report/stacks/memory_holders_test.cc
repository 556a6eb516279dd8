// Memory still live at exit that an allocator or library holds is told apart from memory the
// program lost: unit rules, and the leaks report on PyTorch traces recorded on an H100.
#include "report/stacks/memory_holders.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/test_support.h"

namespace gpumem::report {
namespace {

using gpumem::testing::BuildPath;
using gpumem::testing::ProgramRun;
using gpumem::testing::RunProgram;
using gpumem::testing::SourcePath;

Frame InModule(const std::string& module) {
  Frame frame;
  frame.module = module;
  return frame;
}

TEST(MemoryHolders, TheInnermostKnownModuleHoldsTheMemory) {
  const std::string c10 = "/usr/lib/python3/dist-packages/torch/lib/libc10_cuda.so";
  const std::string cublas = "/opt/nvidia/cu13/lib/libcublasLt.so.13";
  const MemoryHolder* holder = FindMemoryHolder({InModule(c10), InModule("/x/libtorch.so")}, false);
  ASSERT_NE(holder, nullptr);
  EXPECT_STREQ(holder->id, "pytorch_caching_allocator");
  holder = FindMemoryHolder({InModule("/x/train"), InModule(cublas), InModule(c10)}, false);
  ASSERT_NE(holder, nullptr);
  EXPECT_STREQ(holder->id, "cublas_workspace");
  // Under the cudaMallocAsync backend an allocation made in libc10_cuda is one tensor.
  EXPECT_EQ(FindMemoryHolder({InModule(c10)}, true), nullptr);
  EXPECT_NE(FindMemoryHolder({InModule(cublas)}, true), nullptr);
  EXPECT_EQ(FindMemoryHolder({InModule("/work/leak_loop"), InModule("/lib/libc.so.6")}, false),
            nullptr);
  EXPECT_EQ(FindMemoryHolder({}, false), nullptr);
}

// NCCL's buffers (its cuMem* calls, under ProcessGroupNCCL in libtorch and PyTorch's allocator
// frames further out) are NCCL's, whatever called it.
TEST(MemoryHolders, NcclHoldsItsCommunicatorsBuffers) {
  const std::string nccl = "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2";
  const MemoryHolder* holder =
      FindMemoryHolder({InModule(nccl), InModule("/x/libtorch_cuda.so"),
                        InModule("/usr/lib/python3/dist-packages/torch/lib/libc10_cuda.so")},
                       false);
  ASSERT_NE(holder, nullptr);
  EXPECT_STREQ(holder->id, "nccl_buffers");
  EXPECT_STREQ(holder->name, "NCCL");
  EXPECT_NE(FindMemoryHolder({InModule(nccl)}, true), nullptr);
}

ProgramRun Leaks(const std::string& trace, bool json) {
  std::vector<std::string> argv = {BuildPath("bin/gpumem"), "report", "--leaks"};
  if (json) argv.push_back("--json");
  argv.push_back(SourcePath("samples/traces/" + trace));
  return RunProgram(argv);
}

// Default allocator: 5 cudaMalloc segments (88 MiB, = max_memory_reserved) and cuBLAS's 6
// workspaces (128.25 MiB) are live at exit; none of it is the script's own leak.
TEST(MemoryHolders, PyTorchSegmentsAndCublasWorkspacesAreNotTheProgramsLeaks) {
  ProgramRun run = Leaks("train_mlp-default-h100.trace", false);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("held by PyTorch's CUDA caching allocator: 88.00 MiB in 5 allocations"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("held by cuBLAS: 128.25 MiB in 6 allocations"), std::string::npos);
  EXPECT_NE(run.out.find("not held by an allocator or library: 0 B in 0 allocations"),
            std::string::npos);
  ProgramRun json = Leaks("train_mlp-default-h100.trace", true);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"held_bytes\":226756608,\"held_count\":11"), std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"held_by\":\"pytorch_caching_allocator\""), std::string::npos);
}

// cudaMallocAsync backend: each allocation is a tensor, so the 3 still live are not "cached".
TEST(MemoryHolders, StreamOrderedTensorsAreNotCachedSegments) {
  ProgramRun run = Leaks("train_mlp-async-h100.trace", false);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.find("held by PyTorch's CUDA caching allocator"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("held by cuBLAS: 128.25 MiB in 6 allocations"), std::string::npos);
  EXPECT_NE(run.out.find("not held by an allocator or library: 65.00 MiB in 3 allocations"),
            std::string::npos)
      << run.out;
}

// Programs that allocate for themselves keep their leaks unlabelled, with no summary lines.
TEST(MemoryHolders, PlainProgramsHaveNoHolders) {
  ProgramRun run = Leaks("leak_loop-h200.trace", false);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.find("held by"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("10 allocations, 40.00 MiB (41943040 bytes) never freed"),
            std::string::npos);
}

}  // namespace
}  // namespace gpumem::report
