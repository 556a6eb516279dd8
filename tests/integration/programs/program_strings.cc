// Hands gpumem text that is not UTF-8, as programs do: its argv (whatever the test passes), a
// thread name the kernel cut inside a character, and a plugin dlopen'd from the path given in
// argv[1] (a directory whose name is not UTF-8). Allocates from the thread and from the plugin,
// and keeps both buffers (leaks, for the reports to name).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>

namespace {

void* AllocateInNamedThread(void*) {
  // Eight two-byte characters: PR_SET_NAME keeps 15 bytes, the last the first half of the eighth.
  prctl(PR_SET_NAME, "αααααααα");
  void* buffer = nullptr;
  return cudaMalloc(&buffer, 1 << 20) == cudaSuccess ? buffer : nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  pthread_t thread;
  void* from_thread = nullptr;
  if (pthread_create(&thread, nullptr, AllocateInNamedThread, nullptr) != 0) return 1;
  pthread_join(thread, &from_thread);
  void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  auto allocate = reinterpret_cast<void* (*)(size_t)>(dlsym(plugin, "plugin_allocate"));
  void* from_plugin = allocate != nullptr ? allocate(2 << 20) : nullptr;
  return from_thread != nullptr && from_plugin != nullptr ? 0 : 1;
}
