#include "core/own_stack.h"

namespace gpumem {
namespace {

// Initial-exec TLS, 16 bytes: reached without a call, also in a signal handler.
__thread uintptr_t t_own_low __attribute__((tls_model("initial-exec"))) = 0;
__thread uintptr_t t_own_high __attribute__((tls_model("initial-exec"))) = 0;

}  // namespace

void SetThreadStack(uintptr_t low, uintptr_t high) {
  t_own_low = low;
  t_own_high = high;
}

void RunOnThreadStack(void (*fn)(void*), void* arg) {
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (t_own_high == 0 || (here >= t_own_low && here < t_own_high)) {
    fn(arg);
    return;
  }
  gpumem_call_on_stack(fn, arg, reinterpret_cast<void*>(t_own_high & ~uintptr_t{15}));
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
