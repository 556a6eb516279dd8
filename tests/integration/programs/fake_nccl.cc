// Built as libnccl.so.2, so that its stacks are NCCL's to gpumem's holder rules: allocates and
// frees device buffers exactly as NCCL does with cuMem* (ncclCuMemAlloc, ncclCuMemFree), reaching
// the driver the three ways a library can:
//   A (10 MiB)  through cudaGetDriverEntryPointByVersion, as NCCL does; exported to a POSIX file
//   descriptor
//               and imported back by this process (one more reference to its own handle);
//   B (2 MiB)   through cuGetProcAddress, called directly;
//   C (2 MiB)   through the exported symbols (a library linked against libcuda).
// With `peer`, a forked child imports A from the descriptor, as a peer rank does, maps it, makes
// a 2 MiB buffer of its own, and frees both the NCCL way. Every buffer is freed with NCCL's
// sequence: cuMemRetainAllocationHandle, cuMemRelease, cuMemGetAddressRange, cuMemUnmap,
// cuMemRelease, cuMemAddressFree. With `keep`, C stays allocated at exit. With `double_release`,
// only: a 2 MiB handle created, released, and released again (which the driver refuses).
// Any failing call (but the refused one) ends the process with status 1.
#include "tests/integration/programs/fake_nccl.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

void Check(int code, const char* call, int line) {
  if (code != 0) {
    fprintf(stderr, "fake_nccl.cc:%d: %s failed with error %d\n", line, call, code);
    exit(1);
  }
}
#define CHECK(call) Check(static_cast<int>(call), #call, __LINE__)

constexpr size_t kMiB = size_t{1} << 20;

// The cuMem* functions NCCL uses, however they were reached.
struct CuMem {
  PFN_cuMemCreate_v10020 create;
  PFN_cuMemAddressReserve_v10020 reserve;
  PFN_cuMemMap_v10020 map;
  PFN_cuMemSetAccess_v10020 set_access;
  PFN_cuMemRetainAllocationHandle_v11000 retain;
  PFN_cuMemRelease_v10020 release;
  PFN_cuMemGetAddressRange_v3020 address_range;
  PFN_cuMemUnmap_v10020 unmap;
  PFN_cuMemAddressFree_v10020 address_free;
  PFN_cuMemExportToShareableHandle_v10020 export_handle;
  PFN_cuMemImportFromShareableHandle_v10020 import_handle;
};

template <typename Fn>
void ByEntryPoint(const char* name, Fn* out) {
  // NCCL's cudaGetProcAddress: cudaGetDriverEntryPointByVersion from CUDA 12.5 on.
  cudaDriverEntryPointQueryResult status;
  CHECK(cudaGetDriverEntryPointByVersion(name, reinterpret_cast<void**>(out), 12000,
                                         cudaEnableDefault, &status));
  if (*out == nullptr) CHECK(CUDA_ERROR_NOT_FOUND);
}

template <typename Fn>
void ByProcAddress(const char* name, int version, Fn* out) {
  CUdriverProcAddressQueryResult status;
  CHECK(cuGetProcAddress(name, reinterpret_cast<void**>(out), version, 0, &status));
  if (*out == nullptr) CHECK(CUDA_ERROR_NOT_FOUND);
}

CuMem ThroughEntryPoints() {
  CuMem cu{};
  ByEntryPoint("cuMemCreate", &cu.create);
  ByEntryPoint("cuMemAddressReserve", &cu.reserve);
  ByEntryPoint("cuMemMap", &cu.map);
  ByEntryPoint("cuMemSetAccess", &cu.set_access);
  ByEntryPoint("cuMemRetainAllocationHandle", &cu.retain);
  ByEntryPoint("cuMemRelease", &cu.release);
  ByEntryPoint("cuMemGetAddressRange", &cu.address_range);
  ByEntryPoint("cuMemUnmap", &cu.unmap);
  ByEntryPoint("cuMemAddressFree", &cu.address_free);
  ByEntryPoint("cuMemExportToShareableHandle", &cu.export_handle);
  ByEntryPoint("cuMemImportFromShareableHandle", &cu.import_handle);
  return cu;
}

CuMem ThroughProcAddress() {
  CuMem cu{};
  ByProcAddress("cuMemCreate", 10020, &cu.create);
  ByProcAddress("cuMemAddressReserve", 10020, &cu.reserve);
  ByProcAddress("cuMemMap", 10020, &cu.map);
  ByProcAddress("cuMemSetAccess", 10020, &cu.set_access);
  ByProcAddress("cuMemRetainAllocationHandle", 11000, &cu.retain);
  ByProcAddress("cuMemRelease", 10020, &cu.release);
  ByProcAddress("cuMemGetAddressRange", 3020, &cu.address_range);
  ByProcAddress("cuMemUnmap", 10020, &cu.unmap);
  ByProcAddress("cuMemAddressFree", 10020, &cu.address_free);
  ByProcAddress("cuMemExportToShareableHandle", 10020, &cu.export_handle);
  ByProcAddress("cuMemImportFromShareableHandle", 10020, &cu.import_handle);
  return cu;
}

CuMem ThroughSymbols() {
  return {&cuMemCreate,
          &cuMemAddressReserve,
          &cuMemMap,
          &cuMemSetAccess,
          &cuMemRetainAllocationHandle,
          &cuMemRelease,
          &cuMemGetAddressRange,
          &cuMemUnmap,
          &cuMemAddressFree,
          &cuMemExportToShareableHandle,
          &cuMemImportFromShareableHandle};
}

// Maps `handle` (`size` bytes) at a new reservation, readable and writable from device 0.
CUdeviceptr MapHandle(const CuMem& cu, CUmemGenericAllocationHandle handle, size_t size) {
  CUdeviceptr pointer = 0;
  CHECK(cu.reserve(&pointer, size, 0, 0, 0));
  CHECK(cu.map(pointer, size, 0, handle, 0));
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK(cu.set_access(pointer, size, &access, 1));
  return pointer;
}

// ncclCuMemAlloc: a handle that can be exported to a file descriptor, mapped.
CUdeviceptr Allocate(const CuMem& cu, size_t size, CUmemGenericAllocationHandle* handle) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CHECK(cu.create(handle, size, &prop, 0));
  return MapHandle(cu, *handle, size);
}

// ncclCuMemFree, call for call.
void Free(const CuMem& cu, CUdeviceptr pointer) {
  CUmemGenericAllocationHandle handle;
  CHECK(cu.retain(&handle, reinterpret_cast<void*>(pointer)));
  CHECK(cu.release(handle));
  CUdeviceptr base = 0;
  size_t size = 0;
  CHECK(cu.address_range(&base, &size, pointer));
  CHECK(cu.unmap(pointer, size));
  CHECK(cu.release(handle));
  CHECK(cu.address_free(pointer, size));
}

// The peer rank: maps the exporter's buffer from `fd` and a buffer of its own, frees both.
[[noreturn]] void Peer(const CuMem& cu, int fd) {
  CUmemGenericAllocationHandle imported;
  CHECK(cu.import_handle(&imported, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  const CUdeviceptr peer_buffer = MapHandle(cu, imported, 10 * kMiB);
  CUmemGenericAllocationHandle own;
  const CUdeviceptr own_buffer = Allocate(cu, 2 * kMiB, &own);
  Free(cu, peer_buffer);
  Free(cu, own_buffer);
  exit(0);
}

int DoubleRelease() {
  const CuMem cu = ThroughSymbols();
  CUmemGenericAllocationHandle handle;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CHECK(cu.create(&handle, 2 * kMiB, &prop, 0));
  CHECK(cu.release(handle));
  // The driver refuses it: the program released once too often.
  if (cu.release(handle) != CUDA_ERROR_INVALID_VALUE) CHECK(CUDA_ERROR_UNKNOWN);
  return 0;
}

}  // namespace

extern "C" int fake_nccl_run(bool peer, bool keep, bool double_release) {
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));  // the runtime loads the driver
  if (double_release) return DoubleRelease();
  const CuMem by_entry_point = ThroughEntryPoints();
  const CuMem by_proc_address = ThroughProcAddress();
  const CuMem by_symbol = ThroughSymbols();

  CUmemGenericAllocationHandle a, b, c;
  const CUdeviceptr buffer_a = Allocate(by_entry_point, 10 * kMiB, &a);
  const CUdeviceptr buffer_b = Allocate(by_proc_address, 2 * kMiB, &b);
  const CUdeviceptr buffer_c = Allocate(by_symbol, 2 * kMiB, &c);

  int fd = -1;
  CHECK(by_entry_point.export_handle(&fd, a, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  // This process's own handle again: one more reference, one more release.
  CUmemGenericAllocationHandle again;
  CHECK(by_entry_point.import_handle(&again, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  if (again != a) CHECK(CUDA_ERROR_UNKNOWN);
  if (peer) {
    const pid_t child = fork();
    if (child < 0) CHECK(CUDA_ERROR_UNKNOWN);
    if (child == 0) Peer(by_entry_point, fd);
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      CHECK(CUDA_ERROR_UNKNOWN);
    }
  }
  close(fd);
  CHECK(by_entry_point.release(again));
  Free(by_entry_point, buffer_a);
  Free(by_proc_address, buffer_b);
  if (!keep) Free(by_symbol, buffer_c);
  return 0;
}
