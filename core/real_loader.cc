#include "core/real_loader.h"

#include <dlfcn.h>
#include <link.h>

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

namespace {

// Whether `address` lies in libgpumem itself.
bool InOwnLibrary(const void* address) {
  Dl_info own{}, found{};
  return dladdr(reinterpret_cast<const void*>(&InOwnLibrary), &own) != 0 &&
         dladdr(address, &found) != 0 && found.dli_fbase == own.dli_fbase;
}

// `name` as the object at `path` (already loaded) and its dependencies see it; nullptr when that
// is nothing or gpumem's own.
void* SymbolSeenFrom(const char* path, const char* name) {
  void* handle = RealDlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* found = RealDlsym(handle, name);
  dlclose(handle);  // RTLD_NOLOAD took a reference
  return found != nullptr && !InOwnLibrary(found) ? found : nullptr;
}

// The loaded objects' paths (at most kMaxObjects; the main program and the vDSO have none).
constexpr size_t kMaxObjects = 256;
struct LoadedObjects {
  const char* paths[kMaxObjects];
  size_t count = 0;
};

int AddLoadedObject(dl_phdr_info* info, size_t, void* data) {
  auto* objects = static_cast<LoadedObjects*>(data);
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0' && objects->count < kMaxObjects) {
    objects->paths[objects->count++] = info->dlpi_name;
  }
  return 0;
}

}  // namespace

void* NextSymbol(const char* name, uintptr_t caller) {
  void* found = RealDlsym(RTLD_NEXT, name);
  if (found != nullptr) return found;
  Dl_info info{};
  if (caller != 0 && dladdr(reinterpret_cast<void*>(caller), &info) != 0 &&
      info.dli_fname != nullptr && info.dli_fname[0] != '\0') {
    found = SymbolSeenFrom(info.dli_fname, name);
    if (found != nullptr) return found;
  }
  // Collected first, opened after: dlopen must not run inside dl_iterate_phdr (the loader's lock).
  LoadedObjects objects;
  dl_iterate_phdr(AddLoadedObject, &objects);
  for (size_t i = 0; i < objects.count && found == nullptr; ++i) {
    found = SymbolSeenFrom(objects.paths[i], name);
  }
  return found;
}

void* RealDlopen(const char* file, int flags) {
  if (g_real_dlopen == nullptr) {
    void* found = dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.34");
    if (found == nullptr) found = dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.2.5");
    g_real_dlopen = reinterpret_cast<DlopenFn>(found);
  }
  return g_real_dlopen != nullptr ? g_real_dlopen(file, flags) : nullptr;
}

}  // namespace gpumem
