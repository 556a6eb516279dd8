// The program the report-time benchmark records (run_report_time.sh): many allocations and frees,
// each from a stack of 9 to 17 levels of functions (of 17, each calling the next from one of four
// lines), the path picked per allocation from STACKS distinct paths, so the trace holds that many
// different stacks over some hundred return addresses, like a framework's. Every 500th
// allocation is never freed. Usage: deep_stacks ALLOCATIONS STACKS
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include <cstdint>
#include <deque>
#include <vector>

namespace {

struct Run {
  std::deque<void*> window;   // freed after a while
  std::vector<void*> leaked;  // never freed
  uint64_t allocations = 0;
};

// A size from the path (so call sites differ in bytes too): 256 B to 2 MiB.
size_t SizeOf(uint32_t path) { return size_t{256} << (path % 14); }

__attribute__((noinline)) void Allocate(uint32_t path, Run& run) {
  void* buffer = nullptr;
  if (cudaMalloc(&buffer, SizeOf(path)) != cudaSuccess) return;
  if (++run.allocations % 500 == 0) {
    run.leaked.push_back(buffer);
    return;
  }
  run.window.push_back(buffer);
  if (run.window.size() > 64) {
    cudaFree(run.window.front());
    run.window.pop_front();
  }
}

// Level N calls level N+1 from one of four lines (the next two bits of `path`), or allocates once
// `depth` runs out; each level is a function of its own. The asm statements keep the four calls
// apart (no merged call sites) and the calls from becoming jumps.
constexpr int kLevels = 16;
template <int N>
__attribute__((noinline)) void Level(uint32_t path, int depth, Run& run) {
  if constexpr (N == kLevels) {
    Allocate(path, run);
  } else {
    if (depth == 0) return Allocate(path, run);
    const uint32_t next = path >> 2 | path << 30;
    switch (path & 3) {
      case 0:
        Level<N + 1>(next, depth - 1, run);
        asm volatile("# call site 0" ::: "memory");
        break;
      case 1:
        Level<N + 1>(next, depth - 1, run);
        asm volatile("# call site 1" ::: "memory");
        break;
      case 2:
        Level<N + 1>(next, depth - 1, run);
        asm volatile("# call site 2" ::: "memory");
        break;
      default:
        Level<N + 1>(next, depth - 1, run);
        asm volatile("# call site 3" ::: "memory");
        break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: deep_stacks ALLOCATIONS STACKS\n");
    return 2;
  }
  const uint64_t allocations = strtoull(argv[1], nullptr, 10);
  const uint32_t stacks = static_cast<uint32_t>(strtoul(argv[2], nullptr, 10));
  if (stacks == 0) return 2;
  Run run;
  uint32_t state = 12345;
  for (uint64_t i = 0; i < allocations; ++i) {
    state = state * 1664525u + 1013904223u;  // which of the paths, in no order
    const uint32_t path = (state >> 8) % stacks * 2654435761u;
    Level<0>(path, 8 + static_cast<int>(path >> 28), run);
  }
  for (void* buffer : run.window) cudaFree(buffer);
  printf("deep_stacks: %llu allocations, %zu never freed\n",
         static_cast<unsigned long long>(run.allocations), run.leaked.size());
  return 0;
}
