// vmm: virtual memory management, the way PyTorch's `expandable_segments:True` gets memory.
//
// A large virtual range is reserved once and physical chunks are created and mapped into it as the
// segment grows (and unmapped when it shrinks). No cudaMalloc / cuMemAlloc happens at all, so a
// profiler that only hooks those reports an empty program. Known answer: expected.txt next to this.
#include <cuda.h>

#include <cstdio>
#include <vector>

#include "common/check.h"

using samples::kMiB;

constexpr size_t kReserveBytes = 64 * kMiB;
constexpr size_t kChunkBytes = 2 * kMiB;  // the allocation granularity of current GPUs

// A segment that grows at its end: the shape of PyTorch's ExpandableSegment.
class ExpandableSegment {
 public:
  __attribute__((noinline)) explicit ExpandableSegment(int device) : device_(device) {
    CHECK(cuMemAddressReserve(&base_, kReserveBytes, 0, 0, 0));
  }

  // Maps `bytes` of new physical memory at the end of the mapped part.
  __attribute__((noinline)) void grow(size_t bytes) {
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device_;
    CUmemGenericAllocationHandle handle = 0;
    CHECK(cuMemCreate(&handle, bytes, &prop, 0));
    CUdeviceptr where = base_ + mapped_bytes_;
    CHECK(cuMemMap(where, bytes, 0, handle, 0));
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cuMemSetAccess(where, bytes, &access, 1));
    chunks_.push_back({handle, bytes});
    mapped_bytes_ += bytes;
  }

  // Gives the last chunk back to the device (what torch.cuda.empty_cache() does to a segment).
  __attribute__((noinline)) void shrink() {
    Chunk last = chunks_.back();
    chunks_.pop_back();
    mapped_bytes_ -= last.bytes;
    CHECK(cuMemUnmap(base_ + mapped_bytes_, last.bytes));
    CHECK(cuMemRelease(last.handle));
  }

  __attribute__((noinline)) ~ExpandableSegment() {
    while (!chunks_.empty()) shrink();
    CHECK(cuMemAddressFree(base_, kReserveBytes));
  }

  size_t mapped_bytes() const { return mapped_bytes_; }

 private:
  struct Chunk {
    CUmemGenericAllocationHandle handle;
    size_t bytes;
  };
  int device_;
  CUdeviceptr base_ = 0;
  size_t mapped_bytes_ = 0;
  std::vector<Chunk> chunks_;
};

int main() {
  CHECK(cuInit(0));
  CUdevice device = 0;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));

  // The sizes below are whole chunks; make sure that is true on this device.
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granularity = 0;
  CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  if (granularity == 0 || kChunkBytes % granularity != 0) {
    std::fprintf(stderr, "vmm: granularity %zu does not divide %zu\n", granularity, kChunkBytes);
    return 1;
  }

  {
    ExpandableSegment segment(device);
    segment.grow(kChunkBytes);      // 2 MiB
    segment.grow(kChunkBytes);      // 4 MiB
    segment.grow(kChunkBytes);      // 6 MiB
    segment.grow(4 * kChunkBytes);  // 14 MiB: a large tensor arrives
    segment.shrink();               // 6 MiB: it is gone and the cache is emptied
    segment.grow(kChunkBytes);      // 8 MiB
    std::printf("vmm: %zu bytes mapped in a %zu-byte reservation\n", segment.mapped_bytes(),
                kReserveBytes);
  }  // the destructor unmaps and releases the 4 chunks left, then frees the range

  CHECK(cuDevicePrimaryCtxRelease(device));
  return 0;
}
