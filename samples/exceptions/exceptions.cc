// exceptions: C++ exceptions thrown through frames that hold device memory.
//
// Every other step throws from the deepest of 4 nested layers and is caught 4 frames up. RAII
// buffers are freed by their destructors while the stack unwinds; a raw buffer in the deepest
// layer is not (its cudaFree is skipped by the throw): the classic exception-unsafe leak. A
// profiler that unwinds stacks must not disturb the program's own unwinding.
// Known answer: expected.txt next to this.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <stdexcept>

#include "common/check.h"

using samples::kKiB;
using samples::kMiB;

constexpr int kSteps = 6;
constexpr int kDepth = 4;

// Device memory owned by a scope: freed by the destructor, also during unwinding.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) { CHECK(cudaMalloc(&ptr_, bytes)); }
  ~DeviceBuffer() { CHECK(cudaFree(ptr_)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

 private:
  void* ptr_ = nullptr;
};

// Layer `depth` holds (depth + 1) MiB while the layers below it run.
__attribute__((noinline)) void layer_forward(int step, int depth) {
  DeviceBuffer activation((depth + 1) * kMiB);
  if (depth + 1 < kDepth) {
    layer_forward(step, depth + 1);
    return;
  }
  void* scratch = nullptr;
  CHECK(cudaMalloc(&scratch, 256 * kKiB));
  if (step % 2 == 1) throw std::runtime_error("bad batch");  // skips the cudaFree below: leak
  CHECK(cudaFree(scratch));
}

__attribute__((noinline)) void run_epoch() {
  for (int step = 0; step < kSteps; ++step) {
    try {
      layer_forward(step, 0);
    } catch (const std::runtime_error& error) {
      // Allocating while handling the exception, e.g. to save the failing batch.
      DeviceBuffer report(512 * kKiB);
      std::printf("exceptions: step %d: caught \"%s\"\n", step, error.what());
    }
  }
}

int main() {
  run_epoch();
  return 0;
}
