// Backward passes credited to the line that started them (report/README.md, "Backward passes").
// PyTorch's autograd engine runs a backward pass's CUDA work on device threads of its own, whose
// stacks have no Python frames: their allocations would read as coming from nowhere in the
// program. The observer notes each pass's begin (with the stack of the line that called
// loss.backward()) and end (BackwardPass packets); an allocation (or failed allocation) that
// - has no Python frames in its stack,
// - was made while a pass was open (seq between its begin and its end; of several, the latest
//   begun), on a thread other than the one that began it,
// - on an autograd thread: a thread named `pt_autograd...` (PyTorch names its device threads so),
//   or one whose native stack the TraceFile's autograd stack test accepts (a frame in
//   torch::autograd::Engine, where the stack is symbolized),
// takes a derived stack: its native frames, then the begin stack's Python frames as the outermost
// ones, as if the engine had run inline. Derived stacks are added to the TraceFile's stack table
// (TraceFile::AddDerivedStack), one per (native stack, begin stack) pair, so that every reader of
// stack ids (the symbolizer, call sites, every report and export) sees them as recorded stacks.
#ifndef GPUMEM_REPORT_TRACE_BACKWARD_CREDIT_H_
#define GPUMEM_REPORT_TRACE_BACKWARD_CREDIT_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/trace.pb.h"
#include "report/trace/trace_file.h"

namespace gpumem::report {

// Whether a thread's name is one PyTorch gives its autograd device threads ("pt_autograd_0").
bool IsAutogradThreadName(const std::string& name);

class BackwardCredit {
 public:
  // `file` must outlive this; its BackwardPass packets are read as they come (the file may still
  // be reading: a pass's begin is always in the file before the allocations it credits).
  explicit BackwardCredit(TraceFile* file) : file_(file) {}

  // The stack id an event with these fields is to be read with: a derived stack where a backward
  // pass credits it, else `stack_id`. Events are expected nearly in seq order (one that comes
  // after a pass it belongs to was closed and dropped keeps its own stack).
  uint64_t StackFor(Action action, uint64_t seq, uint32_t tid, uint64_t stack_id);

 private:
  struct Pass {
    uint64_t pass = 0;
    uint64_t begin_seq = 0;
    uint64_t end_seq = ~uint64_t{0};  // open
    uint32_t tid = 0;
    uint64_t stack_id = 0;  // where it was called
  };

  // Takes the BackwardPass packets read since the last call.
  void CatchUp();
  // The latest begun pass open at `seq` and begun on a thread other than `tid`, or nullptr.
  const Pass* OpenAt(uint64_t seq, uint32_t tid);
  bool OnAutogradThread(uint32_t tid, uint64_t stack_id);
  bool HasPythonFrames(uint64_t stack_id) const;
  uint64_t Derived(uint64_t native_id, uint64_t begin_id);

  TraceFile* file_;
  size_t packets_taken_ = 0;
  std::vector<Pass> passes_;  // by begin seq; those ended before the events reached are dropped
  absl::flat_hash_map<uint32_t, bool> autograd_threads_;  // by tid: named so
  absl::flat_hash_map<uint64_t, bool> autograd_stacks_;   // by stack id: the file's test said so
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, uint64_t> derived_;
};

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_TRACE_BACKWARD_CREDIT_H_
