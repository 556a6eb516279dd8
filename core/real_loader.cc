#include "core/real_loader.h"

#include <dlfcn.h>

namespace gpumem {
namespace {

using DlsymFn = void* (*)(void*, const char*);
using DlopenFn = void* (*)(const char*, int);

DlopenFn g_real_dlopen = nullptr;

}  // namespace
}  // namespace gpumem

// Read by interpose/loader.cc's dlsym stub too, hence C linkage (hidden, like everything not a
// hook).
extern "C" {
__attribute__((visibility("hidden"))) gpumem::DlsymFn gpumem_real_dlsym = nullptr;
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

