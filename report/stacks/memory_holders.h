// Who holds memory that is still live at exit, when it is not the program's own code: a caching
// allocator's segments (PyTorch keeps freed tensors' memory for reuse) or a library's workspace
// (cuBLAS, cuDNN keep theirs for the life of their handle) or a communicator's buffers (NCCL keeps
// them until the communicator is destroyed). The leaks report tells these apart from
// memory the program itself lost. Recognised from the stack's modules, so it works without symbols.
#ifndef GPUMEM_REPORT_STACKS_MEMORY_HOLDERS_H_
#define GPUMEM_REPORT_STACKS_MEMORY_HOLDERS_H_

#include <vector>

#include "report/stacks/symbolizer.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

struct MemoryHolder {
  const char* id = "";     // for JSON, e.g. "pytorch_caching_allocator"
  const char* name = "";   // for people, e.g. "PyTorch's CUDA caching allocator"
  const char* label = "";  // what the memory is, in a call site's via line: "cuBLAS workspace"
  const char* explanation = "";  // what the memory is and how it goes away
};

// The holder whose module is nearest the CUDA call in `frames` (innermost first), or nullptr when
// the allocation was made by no known allocator or library. `stream_ordered`: the allocation came
// from a stream-ordered pool (cudaMallocAsync...), which for PyTorch's cudaMallocAsync backend is
// one tensor, not a cached segment.
const MemoryHolder* FindMemoryHolder(const std::vector<Frame>& frames, bool stream_ordered);

// The same for stack `stack_id` of `trace`, from the modules of its return addresses (no symbols
// are read, no frame is made: a stack as deep as its packet costs no memory).
const MemoryHolder* FindMemoryHolderOfStack(const TraceFile& trace, uint64_t stack_id,
                                            bool stream_ordered);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_STACKS_MEMORY_HOLDERS_H_
