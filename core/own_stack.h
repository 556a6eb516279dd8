// gpumem's own stacks. A hook runs on whatever stack its caller has: a thread made with a 16 KiB
// stack, a signal handler on an 8 KiB sigaltstack. What gpumem does rarely and deep (opening the
// trace, reading the options, interning a new stack or kernel, loading libcupti, libunwind's
// unwind) runs on a stack of its own instead: per thread, mapped with its per-thread state
// (core/recorder.cc), and a temporary one for the process's initialisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace gpumem {

// Room of each thread's own stack (mapped, so only what is touched costs memory).
inline constexpr size_t kOwnStackBytes = 256 * 1024;

// Calls fn(arg) with the stack pointer at `top` (16-byte aligned) and returns there. Unwinders
// (libunwind, gdb, the program's crash handler) follow it back to the caller's stack.
extern "C" void gpumem_call_on_stack(void (*fn)(void*), void* arg, void* top);

// The calling thread's own stack [low, high), set by the recorder with its per-thread state.
void SetThreadStack(uintptr_t low, uintptr_t high);

// Runs fn(arg) on the calling thread's own stack; right here when the thread has none (it could
// not be mapped) or is on it already.
void RunOnThreadStack(void (*fn)(void*), void* arg);

template <typename Fn>
void OnThreadStack(Fn&& fn) {
  using Callable = std::remove_reference_t<Fn>;
  RunOnThreadStack([](void* callable) { (*static_cast<Callable*>(callable))(); }, &fn);
}

}  // namespace gpumem
