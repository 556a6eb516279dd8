// Prints the static TLS every thread of this process carries at the top of its stack (glibc's own
// figure), then starts a thread on the smallest stack that still holds it: what a preloaded
// library must not change (static_tls_test).
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>

extern "C" void _dl_get_tls_static_info(size_t* size, size_t* align);  // glibc, GLIBC_PRIVATE

namespace {
void* Body(void*) { return nullptr; }
}  // namespace

int main() {
  int devices = 0;
  cudaGetDeviceCount(&devices);  // libcudart loaded and initialised, as in a CUDA program
  size_t size = 0;
  size_t align = 0;
  _dl_get_tls_static_info(&size, &align);
  // glibc refuses a stack smaller than the static TLS (rounded up) plus 2 KiB.
  const size_t stack = (size + align - 1) / align * align + 2048 + 4096;
  void* memory = mmap(nullptr, stack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstack(&attributes, memory, stack);
  pthread_t thread;
  const int created = pthread_create(&thread, &attributes, &Body, nullptr);
  if (created == 0) pthread_join(thread, nullptr);
  printf("static_tls size=%zu align=%zu thread_on_%zu_bytes=%d\n", size, align, stack, created);
  return 0;
}
