#include "report/trace/backward_credit.h"

#include <algorithm>

#include "absl/strings/match.h"

namespace gpumem::report {
namespace {

// Python frame groups of a derived stack are moved past any eval-loop frame its native part could
// have (a stack has at most 256 return addresses): they all follow the native frames, outermost.
constexpr uint32_t kOuterGroupOffset = 1u << 20;

// A derived stack's preferred id: a mix of the two ids (splitmix64's finalizer), never 0.
uint64_t MixIds(uint64_t native_id, uint64_t begin_id) {
  uint64_t x = native_id ^ (begin_id * 0x9e3779b97f4a7c15ull) ^ 0xbac4ba5d00000000ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x == 0 ? 1 : x;
}

}  // namespace

bool IsAutogradThreadName(const std::string& name) { return absl::StartsWith(name, "pt_autograd"); }

uint64_t BackwardCredit::StackFor(Action action, uint64_t seq, uint32_t tid, uint64_t stack_id) {
  if (action != ALLOC && action != ALLOC_FAILED) return stack_id;
  CatchUp();
  const Pass* pass = OpenAt(seq, tid);
  if (pass == nullptr || HasPythonFrames(stack_id) || !OnAutogradThread(tid, stack_id)) {
    return stack_id;
  }
  return Derived(stack_id, pass->stack_id);
}

void BackwardCredit::CatchUp() {
  const std::vector<BackwardPass>& packets = file_->backward_passes();
  for (; packets_taken_ < packets.size(); ++packets_taken_) {
    const BackwardPass& packet = packets[packets_taken_];
    if (packet.ended()) {
      for (Pass& pass : passes_) {
        if (pass.pass == packet.pass() && pass.end_seq == ~uint64_t{0}) pass.end_seq = packet.seq();
      }
      continue;
    }
    Pass pass;
    pass.pass = packet.pass();
    pass.begin_seq = packet.seq();
    pass.tid = packet.tid();
    pass.stack_id = packet.stack_id();
    // Nearly always the latest: insert in begin order.
    auto later =
        std::upper_bound(passes_.begin(), passes_.end(), pass.begin_seq,
                         [](uint64_t seq, const Pass& other) { return seq < other.begin_seq; });
    passes_.insert(later, pass);
  }
}

const BackwardCredit::Pass* BackwardCredit::OpenAt(uint64_t seq, uint32_t tid) {
  // Passes that ended before this event are over for the events after it too.
  std::erase_if(passes_, [seq](const Pass& pass) { return pass.end_seq < seq; });
  for (auto it = passes_.rbegin(); it != passes_.rend(); ++it) {
    if (it->begin_seq < seq && seq < it->end_seq && it->tid != tid) return &*it;
  }
  return nullptr;
}

bool BackwardCredit::OnAutogradThread(uint32_t tid, uint64_t stack_id) {
  auto thread = autograd_threads_.find(tid);
  if (thread == autograd_threads_.end()) {
    const Thread* record = file_->FindThread(tid);
    thread =
        autograd_threads_.emplace(tid, record != nullptr && IsAutogradThreadName(record->name()))
            .first;
  }
  if (thread->second) return true;
  const TraceFile::StackTest& test = file_->autograd_stack_test();
  if (!test || stack_id == 0) return false;
  auto stack = autograd_stacks_.find(stack_id);
  if (stack == autograd_stacks_.end())
    stack = autograd_stacks_.emplace(stack_id, test(stack_id)).first;
  return stack->second;
}

bool BackwardCredit::HasPythonFrames(uint64_t stack_id) const {
  const StackRecord* record = file_->FindStack(stack_id);
  return record != nullptr && record->stack.python_code_size() > 0;
}

uint64_t BackwardCredit::Derived(uint64_t native_id, uint64_t begin_id) {
  const auto key = std::make_pair(native_id, begin_id);
  if (auto it = derived_.find(key); it != derived_.end()) return it->second;
  Stack stack;
  uint64_t written_at = 0;
  if (const StackRecord* native = file_->FindStack(native_id)) {
    stack = native->stack;
    written_at = native->written_at;
  }
  if (const StackRecord* begin = file_->FindStack(begin_id)) {
    const Stack& outer = begin->stack;
    for (int i = 0; i < outer.python_code_size(); ++i) {
      stack.add_python_code(outer.python_code(i));
      stack.add_python_line(i < outer.python_line_size() ? outer.python_line(i) : 0);
      stack.add_python_group(kOuterGroupOffset +
                             (i < outer.python_group_size() ? outer.python_group(i) : 0));
    }
    stack.set_python_truncated(outer.python_truncated());
  }
  const uint64_t id =
      file_->AddDerivedStack(MixIds(native_id, begin_id), std::move(stack), written_at);
  derived_.emplace(key, id);
  return id;
}

}  // namespace gpumem::report
