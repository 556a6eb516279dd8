// CHECK(call): stop the sample with a message when a CUDA call fails unexpectedly.
//
// Works for both the runtime (cudaError_t) and the driver (CUresult): success is 0 in both. The
// message carries the numeric code only, so samples need no cudaGetErrorString / cuGetErrorName.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace samples {

inline void check(int code, const char* call, const char* file, int line) {
  if (code != 0) {
    std::fprintf(stderr, "%s:%d: %s failed with error %d\n", file, line, call, code);
    std::exit(1);
  }
}

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

}  // namespace samples

#define CHECK(call) ::samples::check(static_cast<int>(call), #call, __FILE__, __LINE__)
