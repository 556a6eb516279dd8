// gpumem's dlsym, exported for the whole process: it hands out the driver wrappers for CUDA entry
// points looked up by name (the runtime finds the driver's functions this way).
#include "core/real_loader.h"
#include "interpose/driver_table.h"

// The stub jumps through this (core/real_loader.cc) and to the slow path below.
extern "C" {
__attribute__((visibility("hidden"))) extern void* (*gpumem_real_dlsym)(void*, const char*);
__attribute__((visibility("hidden"))) void* gpumem_dlsym_slow(void* handle, const char* name);
}

// Every dlsym of the process comes here. dlsym(RTLD_NEXT, ...) depends on who called it, so that
// case jumps straight into glibc with the caller's return address untouched; everything else goes
// to gpumem_dlsym_slow, which may swap a CUDA driver entry point for its wrapper.
asm(R"(
    .text
    .globl dlsym
    .type dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    cmpq $-1, %rdi
    jne 1f
    movq gpumem_real_dlsym(%rip), %rax
    testq %rax, %rax
    je 1f
    jmp *%rax
1:
    jmp gpumem_dlsym_slow
    .cfi_endproc
    .size dlsym, .-dlsym
)");

extern "C" void* gpumem_dlsym_slow(void* handle, const char* name) {
  void* symbol = gpumem::RealDlsym(handle, name);
  if (symbol == nullptr || name == nullptr || name[0] != 'c' || name[1] != 'u') return symbol;
  return gpumem::WrapDriverSymbol(name, symbol);
}
