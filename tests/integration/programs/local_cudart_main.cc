// Links no CUDA library: loads a plugin that needs libcudart with RTLD_LOCAL (as ctypes and many
// plugin systems do), so libcudart is in the plugin's scope only, never the global one. The
// plugin's cudaMalloc binds to gpumem's hook, which must still reach the real one.
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  auto allocate = reinterpret_cast<void* (*)(size_t)>(dlsym(plugin, "plugin_allocate"));
  if (allocate == nullptr || allocate(1 << 20) == nullptr) {
    fprintf(stderr, "plugin_allocate failed\n");
    return 1;
  }
  return 0;
}
