#include "report/stacks/memory_holders.h"

#include <string>

#include "absl/strings/match.h"

namespace gpumem::report {
namespace {

struct HolderRule {
  const char* module_prefix;  // basename of the module the frame is in
  bool segments_only;         // not for stream-ordered (per-tensor) allocations
  MemoryHolder holder;
};

constexpr HolderRule kRules[] = {
    {"libc10_cuda.so",
     true,
     {"pytorch_caching_allocator", "PyTorch's CUDA caching allocator",
      "PyTorch caching allocator segment",
      "segments it keeps for reuse after tensors are freed; torch.cuda.empty_cache() returns "
      "them, and they do not mean the program lost memory"}},
    {"libcublasLt.so",
     false,
     {"cublas_workspace", "cuBLAS", "cuBLAS workspace",
      "workspace its handle keeps for the life of the process"}},
    {"libcublas.so",
     false,
     {"cublas_workspace", "cuBLAS", "cuBLAS workspace",
      "workspace its handle keeps for the life of the process"}},
    {"libcudnn",
     false,
     {"cudnn_workspace", "cuDNN", "cuDNN workspace",
      "workspace its handle keeps for the life of the process"}},
    {"libnccl.so",
     false,
     {"nccl_buffers", "NCCL", "NCCL buffers",
      "buffers its communicators keep until they are destroyed (dist.destroy_process_group())"}},
};

// The rule of the module at `path`, or nullptr.
const HolderRule* RuleOf(absl::string_view path) {
  const absl::string_view module = PathBasename(path);
  for (const HolderRule& rule : kRules) {
    if (absl::StartsWith(module, rule.module_prefix)) return &rule;
  }
  return nullptr;
}

const MemoryHolder* HolderOf(const HolderRule& rule, bool stream_ordered) {
  return rule.segments_only && stream_ordered ? nullptr : &rule.holder;
}

}  // namespace

const MemoryHolder* FindMemoryHolder(const std::vector<Frame>& frames, bool stream_ordered) {
  for (const Frame& frame : frames) {
    if (const HolderRule* rule = RuleOf(frame.module)) return HolderOf(*rule, stream_ordered);
  }
  return nullptr;
}

const MemoryHolder* FindMemoryHolderOfStack(const TraceFile& trace, uint64_t stack_id,
                                            bool stream_ordered) {
  const StackRecord* record = trace.FindStack(stack_id);
  if (record == nullptr) return nullptr;
  for (const uint64_t pc : record->stack.frame()) {
    for (const ModuleRecord& module : trace.modules()) {
      if (!module.LoadedAt(record->written_at) || pc < module.module.start() ||
          pc >= module.module.end()) {
        continue;
      }
      if (const HolderRule* rule = RuleOf(module.module.path())) {
        return HolderOf(*rule, stream_ordered);
      }
      break;  // this frame's module holds nothing: on to the next frame
    }
  }
  return nullptr;
}

}  // namespace gpumem::report
