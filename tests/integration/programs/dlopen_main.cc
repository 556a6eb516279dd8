// dlopen a plugin that allocates, dlclose it, allocate again from a new call site.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

__attribute__((noinline)) void allocate_after_unload() {
  void* buffer = nullptr;
  if (cudaMalloc(&buffer, 2 << 20) == cudaSuccess) cudaFree(buffer);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  auto allocate = reinterpret_cast<void* (*)(size_t)>(dlsym(plugin, "plugin_allocate"));
  void* buffer = allocate != nullptr ? allocate(1 << 20) : nullptr;
  if (buffer == nullptr) return 1;
  cudaFree(buffer);
  dlclose(plugin);
  allocate_after_unload();
  return 0;
}
