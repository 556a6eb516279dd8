#include "report/memory_holders.h"

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
      "segments it keeps for reuse after tensors are freed; torch.cuda.empty_cache() returns "
      "them, and they do not mean the program lost memory"}},
    {"libcublasLt.so",
     false,
     {"cublas_workspace", "cuBLAS", "workspace its handle keeps for the life of the process"}},
    {"libcublas.so",
     false,
     {"cublas_workspace", "cuBLAS", "workspace its handle keeps for the life of the process"}},
    {"libcudnn",
     false,
     {"cudnn_workspace", "cuDNN", "workspace its handle keeps for the life of the process"}},
};

absl::string_view Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

const MemoryHolder* FindMemoryHolder(const std::vector<Frame>& frames, bool stream_ordered) {
  for (const Frame& frame : frames) {
    absl::string_view module = Basename(frame.module);
    for (const HolderRule& rule : kRules) {
      if (!absl::StartsWith(module, rule.module_prefix)) continue;
      return rule.segments_only && stream_ordered ? nullptr : &rule.holder;
    }
  }
  return nullptr;
}

std::vector<Frame> ModuleFrames(const TraceFile& trace, uint64_t stack_id) {
  std::vector<Frame> frames;
  const StackRecord* record = trace.FindStack(stack_id);
  if (record == nullptr) return frames;
  for (const uint64_t pc : record->stack.frame()) {
    Frame& frame = frames.emplace_back();
    frame.pc = pc;
    for (const ModuleRecord& module : trace.modules()) {
      if (module.LoadedAt(record->written_at) && pc >= module.module.start() &&
          pc < module.module.end()) {
        frame.module = module.module.path();
        break;
      }
    }
  }
  return frames;
}

}  // namespace gpumem::report
