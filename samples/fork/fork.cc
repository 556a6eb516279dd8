// fork: a process that forks, the two ways real programs do it.
//
// CUDA cannot be used in a child forked after the parent initialised it (the driver refuses), so:
//  1. a "launcher" child is forked before the parent touches CUDA and uses CUDA itself (like a
//     process pool forked at start-up); it leaves one buffer unfreed and ends with exit();
//  2. after the parent has allocated, a "data-loader worker" child is forked that never calls CUDA
//     and ends with _exit() (as Python's multiprocessing does).
// The parent's events must appear once, in the parent's trace: neither child may write the
// parent's buffered events, and the child that used CUDA gets a trace of its own.
// Known answer: expected.txt next to this.
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "common/check.h"

using samples::kMiB;

__attribute__((noinline)) void allocate_in_child() {
  void* a = nullptr;
  void* b = nullptr;
  CHECK(cudaMalloc(&a, 4 * kMiB));
  CHECK(cudaMalloc(&b, 2 * kMiB));  // never freed: the child's own leak
  CHECK(cudaFree(a));
}

__attribute__((noinline)) void* allocate_in_parent_before_fork() {
  void* kept = nullptr;
  void* temporary = nullptr;
  CHECK(cudaMalloc(&kept, 16 * kMiB));
  CHECK(cudaMalloc(&temporary, 8 * kMiB));
  CHECK(cudaFree(temporary));
  return kept;
}

__attribute__((noinline)) void allocate_in_parent_after_fork(void* kept) {
  void* more = nullptr;
  CHECK(cudaMalloc(&more, 32 * kMiB));
  CHECK(cudaFree(more));
  CHECK(cudaFree(kept));
}

// Forks, runs `child` in the child, and waits for it; exits if the child failed.
static void run_child(const char* name, void (*child)()) {
  std::fflush(nullptr);  // so buffered output is not written twice
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (pid == 0) {
    child();  // ends the process itself
    _exit(1);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "fork: %s child failed (status %d)\n", name, status);
    std::exit(1);
  }
}

int main() {
  // 1. Before the parent's first CUDA call: the child may use CUDA.
  run_child("launcher", [] {
    allocate_in_child();
    std::printf("fork: launcher child done\n");
    std::exit(0);  // runs atexit handlers (the CUDA runtime's and the profiler's) in the child
  });

  void* kept = allocate_in_parent_before_fork();

  // 2. After it: the child must not touch CUDA. It does host work and leaves without cleanup.
  run_child("worker", [] { _exit(0); });

  allocate_in_parent_after_fork(kept);
  std::printf("fork: parent done\n");
  return 0;
}
