#include "interpose/loader.h"

#include <dlfcn.h>

#include <atomic>

#include "interpose/driver_table.h"

namespace gpumem {
namespace {

using DlsymFn = void* (*)(void*, const char*);
using DlopenFn = void* (*)(const char*, int);

DlopenFn g_real_dlopen = nullptr;

}  // namespace
}  // namespace gpumem

// Read by the assembly stub below, hence C linkage (hidden, like everything not a hook).
extern "C" {
__attribute__((visibility("hidden"))) gpumem::DlsymFn gpumem_real_dlsym = nullptr;
__attribute__((visibility("hidden"))) void* gpumem_dlsym_slow(void* handle, const char* name);
}

namespace gpumem {
namespace {

DlsymFn ResolveRealDlsym() {
  DlsymFn real = gpumem_real_dlsym;
  if (real != nullptr) return real;
  // dlvsym is not hooked, so this finds glibc's dlsym. 2.34 merged libdl into libc.
  void* found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (found == nullptr) found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  real = reinterpret_cast<DlsymFn>(found);
  __atomic_store_n(&gpumem_real_dlsym, real, __ATOMIC_RELEASE);
  return real;
}

}  // namespace

void* RealDlsym(void* handle, const char* name) {
  DlsymFn real = ResolveRealDlsym();
  return real != nullptr ? real(handle, name) : nullptr;
}

void* NextSymbol(const char* name) { return RealDlsym(RTLD_NEXT, name); }

void* RealDlopen(const char* file, int flags) {
  if (g_real_dlopen == nullptr) {
    void* found = dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.34");
    if (found == nullptr) found = dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.2.5");
    g_real_dlopen = reinterpret_cast<DlopenFn>(found);
  }
  return g_real_dlopen != nullptr ? g_real_dlopen(file, flags) : nullptr;
}

}  // namespace gpumem

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
