#include "core/own_stack.h"

#include "core/thread_locals.h"

namespace gpumem {

void SetThreadStack(uintptr_t low, uintptr_t high) {
  ThreadLocals& locals = Locals();
  locals.own_low = low;
  locals.own_high = high;
}

void RunOnThreadStack(void (*fn)(void*), void* arg) {
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  const ThreadLocals& locals = Locals();
  if (locals.own_high == 0 || (here >= locals.own_low && here < locals.own_high)) {
    fn(arg);
    return;
  }
  gpumem_call_on_stack(fn, arg, reinterpret_cast<void*>(locals.own_high & ~uintptr_t{15}));
}

}  // namespace gpumem

#if defined(__x86_64__)
// rbp keeps the caller's stack pointer across the call: the CFI says the caller's frame is found
// through it (as in any frame-pointer function), so unwinding crosses back to the caller's stack.
asm(R"(
    .text
    .globl gpumem_call_on_stack
    .hidden gpumem_call_on_stack
    .type gpumem_call_on_stack, @function
    .p2align 4
gpumem_call_on_stack:
    .cfi_startproc
    pushq %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    movq %rsp, %rbp
    .cfi_def_cfa_register %rbp
    movq %rdx, %rsp
    movq %rdi, %rax
    movq %rsi, %rdi
    callq *%rax
    movq %rbp, %rsp
    popq %rbp
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
    .size gpumem_call_on_stack, .-gpumem_call_on_stack
)");
#else
extern "C" void gpumem_call_on_stack(void (*fn)(void*), void* arg, void*) { fn(arg); }
#endif
