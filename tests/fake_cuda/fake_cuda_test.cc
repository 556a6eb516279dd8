// Tests of the fake CUDA itself. Both libraries are dlopened from the build tree, as a program
// loads them, and called through the pointers they hand out (nothing here links them).

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kCapacity = 1024 * kMiB;      // set through GPUMEM_FAKE_DEVICE_MEMORY below
constexpr size_t kContextReserve = 64 * kMiB;  // what the fake keeps back, as a context would
constexpr const char* kDriverPath = GPUMEM_BUILD_DIR "/lib/fake/libcuda.so.1";
constexpr const char* kRuntimePath = GPUMEM_BUILD_DIR "/lib/fake/libcudart.so.13";

struct FakeLibraries {
  void* driver;
  void* runtime;
};

// Loaded once per process with a 1 GiB device. The runtime's own dlopen("libcuda.so.1") finds the
// driver loaded here by its soname.
const FakeLibraries& Libraries() {
  static const FakeLibraries libraries = [] {
    setenv("GPUMEM_FAKE_DEVICE_MEMORY", std::to_string(kCapacity).c_str(), 1);
    FakeLibraries loaded{dlopen(kDriverPath, RTLD_NOW), dlopen(kRuntimePath, RTLD_NOW)};
    if (loaded.driver == nullptr || loaded.runtime == nullptr) {
      fprintf(stderr, "cannot load the fake CUDA: %s\n", dlerror());
      abort();
    }
    return loaded;
  }();
  return libraries;
}

void* DriverSymbol(const char* name) { return dlsym(Libraries().driver, name); }

#define FAKE_STRINGIFY(x) #x
#define FAKE_EXPANDED_NAME(x) FAKE_STRINGIFY(x)
// A driver function by its exported name, after cuda.h's renaming (cuMemAlloc -> cuMemAlloc_v2).
#define CU(name) reinterpret_cast<decltype(&name)>(DriverSymbol(FAKE_EXPANDED_NAME(name)))
#define CUDART(name) reinterpret_cast<decltype(&name)>(dlsym(Libraries().runtime, #name))
// The _ptsz forms are declared only under CUDA_API_PER_THREAD_DEFAULT_STREAM; same signature.
#define CUDART_PTSZ(name) \
  reinterpret_cast<decltype(&name)>(dlsym(Libraries().runtime, #name "_ptsz"))

// ---- cuGetProcAddress ----

struct Lookup {
  CUresult result;
  void* function;
  CUdriverProcAddressQueryResult status;
};

Lookup GetProcAddress(const char* name, int version,
                      cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT) {
  Lookup lookup{CUDA_ERROR_UNKNOWN, &lookup, CU_GET_PROC_ADDRESS_SUCCESS};
  lookup.result = CU(cuGetProcAddress)(name, &lookup.function, version, flags, &lookup.status);
  return lookup;
}

TEST(FakeDriverProcAddress, ResolvesBaseNamesToTheirVersionedSymbols) {
  const char* const kBaseToExported[][2] = {
      {"cuMemAlloc", "cuMemAlloc_v2"},
      {"cuMemFree", "cuMemFree_v2"},
      {"cuMemAllocPitch", "cuMemAllocPitch_v2"},
      {"cuMemGetInfo", "cuMemGetInfo_v2"},
      {"cuDeviceTotalMem", "cuDeviceTotalMem_v2"},
      {"cuMemAllocHost", "cuMemAllocHost_v2"},
      {"cuStreamDestroy", "cuStreamDestroy_v2"},
      {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2"},
      {"cuMemcpyHtoD", "cuMemcpyHtoD_v2"},
      {"cuMemcpyDtoH", "cuMemcpyDtoH_v2"},
      {"cuMemsetD8", "cuMemsetD8_v2"},
      {"cuMemCreate", "cuMemCreate"},
      {"cuMemAddressReserve", "cuMemAddressReserve"},
  };
  for (const auto& [base, exported] : kBaseToExported) {
    SCOPED_TRACE(base);
    ASSERT_NE(DriverSymbol(exported), nullptr);
    Lookup by_base = GetProcAddress(base, 13000);
    EXPECT_EQ(by_base.result, CUDA_SUCCESS);
    EXPECT_EQ(by_base.status, CU_GET_PROC_ADDRESS_SUCCESS);
    EXPECT_EQ(by_base.function, DriverSymbol(exported));
    EXPECT_EQ(GetProcAddress(exported, 13000).function, DriverSymbol(exported));  // exact name
  }
}

TEST(FakeDriverProcAddress, ReturnsTheVersionOfItselfThatTheCallerAsksFor) {
  EXPECT_EQ(GetProcAddress("cuGetProcAddress", 13000).function,
            DriverSymbol("cuGetProcAddress_v2"));
  EXPECT_EQ(GetProcAddress("cuGetProcAddress", 12000).function,
            DriverSymbol("cuGetProcAddress_v2"));
  EXPECT_EQ(GetProcAddress("cuGetProcAddress", 11030).function, DriverSymbol("cuGetProcAddress"));
  Lookup too_old = GetProcAddress("cuGetProcAddress", 11020);
  EXPECT_EQ(too_old.result, CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(too_old.function, nullptr);
  EXPECT_EQ(too_old.status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

  // The 4-argument original works too, and CUDA 13 moved cuCtxSynchronize to a _v2.
  auto v1 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(DriverSymbol("cuGetProcAddress"));
  void* function = nullptr;
  ASSERT_EQ(v1("cuMemAlloc", &function, 13000, CU_GET_PROC_ADDRESS_DEFAULT), CUDA_SUCCESS);
  EXPECT_EQ(function, DriverSymbol("cuMemAlloc_v2"));
  EXPECT_EQ(GetProcAddress("cuCtxSynchronize", 12080).function, DriverSymbol("cuCtxSynchronize"));
  EXPECT_EQ(GetProcAddress("cuCtxSynchronize", 13000).function,
            DriverSymbol("cuCtxSynchronize_v2"));
}

TEST(FakeDriverProcAddress, UnknownNameIsNotFound) {
  for (const char* name : {"cuNoSuchFunction", "", "cuMemAlloc_v9"}) {
    SCOPED_TRACE(name);
    Lookup lookup = GetProcAddress(name, 13000);
    EXPECT_EQ(lookup.result, CUDA_ERROR_NOT_FOUND);
    EXPECT_EQ(lookup.function, nullptr);
    EXPECT_EQ(lookup.status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  }
}

TEST(FakeDriverProcAddress, PerThreadFlagSelectsThePtszVariants) {
  for (std::string name : {"cuMemAllocAsync", "cuMemFreeAsync", "cuMemAllocFromPoolAsync"}) {
    SCOPED_TRACE(name);
    void* legacy = DriverSymbol(name.c_str());
    void* per_thread = DriverSymbol((name + "_ptsz").c_str());
    ASSERT_NE(legacy, nullptr);
    ASSERT_NE(per_thread, nullptr);
    EXPECT_NE(legacy, per_thread);
    EXPECT_EQ(GetProcAddress(name.c_str(), 11020).function, legacy);
    EXPECT_EQ(GetProcAddress(name.c_str(), 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM).function,
              legacy);
    EXPECT_EQ(
        GetProcAddress(name.c_str(), 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).function,
        per_thread);
    EXPECT_EQ(GetProcAddress((name + "_ptsz").c_str(), 13000).function, per_thread);
  }
  // No _ptsz variant: the flag changes nothing.
  EXPECT_EQ(
      GetProcAddress("cuMemAlloc", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).function,
      DriverSymbol("cuMemAlloc_v2"));
}

// ---- Driver memory ----

class FakeDriverMemoryTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(CU(cuInit)(0), CUDA_SUCCESS);
    CUcontext context = nullptr;
    ASSERT_EQ(CU(cuDevicePrimaryCtxRetain)(&context, 0), CUDA_SUCCESS);
    ASSERT_EQ(CU(cuCtxSetCurrent)(context), CUDA_SUCCESS);
    // Every test gives back what it took, so each starts from an empty device.
    ASSERT_EQ(FreeBytes(), kCapacity - kContextReserve);
  }

  static size_t FreeBytes() {
    size_t free = 0, total = 0;
    EXPECT_EQ(CU(cuMemGetInfo)(&free, &total), CUDA_SUCCESS);
    EXPECT_EQ(total, kCapacity);
    return free;
  }
};

TEST_F(FakeDriverMemoryTest, DeviceReportsConfiguredCapacity) {
  size_t total = 0;
  ASSERT_EQ(CU(cuDeviceTotalMem)(&total, 0), CUDA_SUCCESS);
  EXPECT_EQ(total, kCapacity);
  char name[64] = {};
  ASSERT_EQ(CU(cuDeviceGetName)(name, sizeof(name), 0), CUDA_SUCCESS);
  EXPECT_STREQ(name, "gpumem fake device");
  int count = 0;
  ASSERT_EQ(CU(cuDeviceGetCount)(&count), CUDA_SUCCESS);
  EXPECT_EQ(count, 1);
}

TEST_F(FakeDriverMemoryTest, OutOfMemoryWhenAllocationsDoNotFit) {
  const size_t start = FreeBytes();
  CUdeviceptr big = 0;
  ASSERT_EQ(CU(cuMemAlloc)(&big, 600 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(FreeBytes(), start - 600 * kMiB);
  // Real, writable host memory: samples memset and memcpy into it.
  ASSERT_EQ(CU(cuMemsetD8)(big + 600 * kMiB - 1, 0x5a, 1), CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(big)[600 * kMiB - 1], 0x5a);

  // 360 MiB are left: every kind of device allocation is refused, and nothing is charged.
  CUdeviceptr refused = 0;
  EXPECT_EQ(CU(cuMemAlloc)(&refused, 400 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(CU(cuMemAllocManaged)(&refused, 400 * kMiB, CU_MEM_ATTACH_GLOBAL),
            CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(CU(cuMemAllocAsync)(&refused, 400 * kMiB, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemGenericAllocationHandle handle = 0;
  EXPECT_EQ(CU(cuMemCreate)(&handle, 400 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(refused, 0u);
  EXPECT_EQ(FreeBytes(), start - 600 * kMiB);

  // Host memory is not on the device.
  void* host = nullptr;
  ASSERT_EQ(CU(cuMemHostAlloc)(&host, 400 * kMiB, 0), CUDA_SUCCESS);
  EXPECT_EQ(FreeBytes(), start - 600 * kMiB);
  EXPECT_EQ(CU(cuMemFreeHost)(host), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemFreeHost)(host), CUDA_ERROR_INVALID_VALUE);

  EXPECT_EQ(CU(cuMemFree)(big), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemFree)(big), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuMemFree)(0), CUDA_SUCCESS);
  EXPECT_EQ(FreeBytes(), start);
}

TEST_F(FakeDriverMemoryTest, AlignsAndPitchesLikeTheRealDriver) {
  CUdeviceptr small = 0, pitched = 0;
  size_t pitch = 0;
  ASSERT_EQ(CU(cuMemAlloc)(&small, 1), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemAllocPitch)(&pitched, &pitch, 1000, 3, 4), CUDA_SUCCESS);
  EXPECT_EQ(small % 256, 0u);
  EXPECT_EQ(pitched % 512, 0u);
  EXPECT_EQ(pitch, 1024u);
  EXPECT_EQ(FreeBytes(), kCapacity - kContextReserve - 1 - 3 * 1024);
  EXPECT_EQ(CU(cuMemAllocPitch)(&pitched, &pitch, 1000, 3, 3), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuMemFree)(small), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemFree)(pitched), CUDA_SUCCESS);
}

TEST_F(FakeDriverMemoryTest, PoolsAndStreamsAreDistinctHandles) {
  CUmemoryPool default_pool = nullptr, pool = nullptr;
  ASSERT_EQ(CU(cuDeviceGetDefaultMemPool)(&default_pool, 0), CUDA_SUCCESS);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  ASSERT_EQ(CU(cuMemPoolCreate)(&pool, &props), CUDA_SUCCESS);
  EXPECT_NE(pool, nullptr);
  EXPECT_NE(pool, default_pool);

  CUstream streams[2] = {};
  ASSERT_EQ(CU(cuStreamCreate)(&streams[0], 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuStreamCreate)(&streams[1], 0), CUDA_SUCCESS);
  EXPECT_NE(streams[0], nullptr);
  EXPECT_NE(streams[0], streams[1]);

  CUdeviceptr from_pool = 0, from_default = 0;
  ASSERT_EQ(CU(cuMemAllocFromPoolAsync)(&from_pool, 10 * kMiB, pool, streams[0]), CUDA_SUCCESS);
  auto alloc_async_ptsz =
      reinterpret_cast<PFN_cuMemAllocAsync_v11020_ptsz>(DriverSymbol("cuMemAllocAsync_ptsz"));
  ASSERT_EQ(alloc_async_ptsz(&from_default, 20 * kMiB, streams[1]), CUDA_SUCCESS);
  EXPECT_EQ(FreeBytes(), kCapacity - kContextReserve - 30 * kMiB);
  EXPECT_EQ(CU(cuMemFreeAsync)(from_pool, streams[0]), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemFreeAsync)(from_default, streams[1]), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemFreeAsync)(from_default, streams[1]), CUDA_ERROR_INVALID_VALUE);

  EXPECT_EQ(CU(cuMemPoolDestroy)(pool), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemPoolDestroy)(pool), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuMemAllocFromPoolAsync)(&from_pool, kMiB, pool, nullptr), CUDA_ERROR_INVALID_VALUE);
  for (CUstream stream : streams) EXPECT_EQ(CU(cuStreamDestroy)(stream), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuStreamDestroy)(streams[0]), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(FakeDriverMemoryTest, VirtualMemoryChecksReservationsAndMappings) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  size_t granularity = 0;
  ASSERT_EQ(
      CU(cuMemGetAllocationGranularity)(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      CUDA_SUCCESS);
  ASSERT_EQ(granularity, 2 * kMiB);

  CUdeviceptr base = 0, aligned = 0;
  EXPECT_EQ(CU(cuMemAddressReserve)(&base, 3 * kMiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(CU(cuMemAddressReserve)(&base, 8 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemAddressReserve)(&aligned, 2 * kMiB, 16 * kMiB, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(base % granularity, 0u);
  EXPECT_EQ(aligned % (16 * kMiB), 0u);
  EXPECT_EQ(FreeBytes(), kCapacity - kContextReserve);  // address space costs nothing

  CUmemGenericAllocationHandle handle = 0;
  EXPECT_EQ(CU(cuMemCreate)(&handle, 3 * kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(CU(cuMemCreate)(&handle, 4 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_NE(handle, 0u);
  EXPECT_EQ(FreeBytes(), kCapacity - kContextReserve - 4 * kMiB);

  ASSERT_EQ(CU(cuMemMap)(base, 4 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  reinterpret_cast<char*>(base)[4 * kMiB - 1] = 1;  // mapped memory is usable
  EXPECT_EQ(CU(cuMemMap)(base + 2 * kMiB, 2 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE)
      << "overlaps a mapping";
  EXPECT_EQ(CU(cuMemMap)(base + 6 * kMiB, 4 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE)
      << "runs past the reservation";
  EXPECT_EQ(CU(cuMemMap)(base + 4 * kMiB, 4 * kMiB, 2 * kMiB, handle, 0), CUDA_ERROR_INVALID_VALUE)
      << "runs past the handle";
  EXPECT_EQ(CU(cuMemMap)(base + 4 * kMiB, 2 * kMiB, 0, handle + 1000, 0), CUDA_ERROR_INVALID_VALUE)
      << "unknown handle";
  CUdeviceptr released = 0;  // an address that no reservation holds any more
  ASSERT_EQ(CU(cuMemAddressReserve)(&released, 2 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemAddressFree)(released, 2 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemMap)(released, 2 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE)
      << "outside every reservation";
  ASSERT_EQ(CU(cuMemMap)(base + 4 * kMiB, 2 * kMiB, 2 * kMiB, handle, 0), CUDA_SUCCESS);
  CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  EXPECT_EQ(CU(cuMemSetAccess)(base, 6 * kMiB, &access, 1), CUDA_SUCCESS);

  EXPECT_EQ(CU(cuMemUnmap)(base, 2 * kMiB), CUDA_ERROR_INVALID_VALUE) << "not the mapped size";
  EXPECT_EQ(CU(cuMemUnmap)(base, 4 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemUnmap)(base, 4 * kMiB), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuMemUnmap)(base + 4 * kMiB, 2 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemRelease)(handle), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemRelease)(handle), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(FreeBytes(), kCapacity - kContextReserve);

  EXPECT_EQ(CU(cuMemAddressFree)(base, 4 * kMiB), CUDA_ERROR_INVALID_VALUE) << "not the size";
  EXPECT_EQ(CU(cuMemAddressFree)(base, 8 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemAddressFree)(aligned, 2 * kMiB), CUDA_SUCCESS);
}

TEST(FakeDriverErrors, NamesAndStrings) {
  const char* text = nullptr;
  ASSERT_EQ(CU(cuGetErrorName)(CUDA_ERROR_OUT_OF_MEMORY, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "CUDA_ERROR_OUT_OF_MEMORY");
  ASSERT_EQ(CU(cuGetErrorString)(CUDA_ERROR_OUT_OF_MEMORY, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "out of memory");
  EXPECT_EQ(CU(cuGetErrorString)(static_cast<CUresult>(12345), &text), CUDA_ERROR_INVALID_VALUE);
}

// ---- Runtime ----

// The runtime must reach the driver only through dlopen + cuGetProcAddress, the chain the
// profiler hooks: it may not import a single cu* symbol.
TEST(FakeRuntime, ImportsNoDriverSymbols) {
  FILE* nm =
      popen((std::string("nm -D --undefined-only ") + kRuntimePath + " 2>/dev/null").c_str(), "r");
  ASSERT_NE(nm, nullptr);
  std::string imports;
  char line[512];
  while (fgets(line, sizeof(line), nm) != nullptr) imports += line;
  if (pclose(nm) != 0 || imports.empty()) GTEST_SKIP() << "nm is not available";
  EXPECT_NE(imports.find(" dlsym"), std::string::npos) << imports;
  EXPECT_EQ(imports.find(" cu"), std::string::npos) << imports;
}

TEST(FakeRuntime, AllocatesCopiesAndReportsOutOfMemory) {
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(CUDART(cudaMemGetInfo)(&free_before, &total), cudaSuccess);
  EXPECT_EQ(total, kCapacity);
  EXPECT_EQ(CUDART(cudaFree)(nullptr), cudaSuccess);

  void* device = nullptr;
  ASSERT_EQ(CUDART(cudaMalloc)(&device, 100 * kMiB), cudaSuccess);
  ASSERT_EQ(CUDART(cudaMemGetInfo)(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free_before - 100 * kMiB);
  const char message[] = "through the fake";
  char back[sizeof(message)] = {};
  ASSERT_EQ(CUDART(cudaMemset)(device, 0, 100 * kMiB), cudaSuccess);
  ASSERT_EQ(CUDART(cudaMemcpy)(device, message, sizeof(message), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(CUDART(cudaMemcpy)(back, device, sizeof(back), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_STREQ(back, message);

  void* too_big = nullptr;
  EXPECT_EQ(CUDART(cudaMalloc)(&too_big, kCapacity), cudaErrorMemoryAllocation);
  EXPECT_EQ(too_big, nullptr);
  EXPECT_EQ(CUDART(cudaPeekAtLastError)(), cudaErrorMemoryAllocation);
  EXPECT_EQ(CUDART(cudaGetLastError)(), cudaErrorMemoryAllocation);
  EXPECT_EQ(CUDART(cudaGetLastError)(), cudaSuccess);
  EXPECT_STREQ(CUDART(cudaGetErrorName)(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
  EXPECT_STREQ(CUDART(cudaGetErrorString)(cudaErrorMemoryAllocation), "out of memory");

  EXPECT_EQ(CUDART(cudaFree)(device), cudaSuccess);
  EXPECT_EQ(CUDART(cudaFree)(device), cudaErrorInvalidValue);
  EXPECT_EQ(CUDART(cudaGetLastError)(), cudaErrorInvalidValue);
  ASSERT_EQ(CUDART(cudaMemGetInfo)(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free_before);
}

TEST(FakeRuntime, LastErrorIsPerThread) {
  std::thread failing([] {
    void* p = nullptr;
    EXPECT_EQ(CUDART(cudaMalloc)(&p, 2 * kCapacity), cudaErrorMemoryAllocation);
    EXPECT_EQ(CUDART(cudaPeekAtLastError)(), cudaErrorMemoryAllocation);
  });
  failing.join();
  EXPECT_EQ(CUDART(cudaGetLastError)(), cudaSuccess);
}

TEST(FakeRuntime, PitchedStreamOrderedAndPoolAllocations) {
  cudaPitchedPtr pitched{};
  ASSERT_EQ(CUDART(cudaMalloc3D)(&pitched, cudaExtent{1000, 4, 2}), cudaSuccess);
  EXPECT_EQ(pitched.pitch, 1024u);
  EXPECT_EQ(pitched.xsize, 1000u);
  EXPECT_EQ(pitched.ysize, 4u);
  EXPECT_EQ(CUDART(cudaFree)(pitched.ptr), cudaSuccess);

  cudaStream_t stream = nullptr;
  ASSERT_EQ(CUDART(cudaStreamCreate)(&stream), cudaSuccess);
  void* async = nullptr;
  void* per_thread = nullptr;
  ASSERT_EQ(CUDART(cudaMallocAsync)(&async, kMiB, stream), cudaSuccess);
  ASSERT_EQ(CUDART_PTSZ(cudaMallocAsync)(&per_thread, kMiB, stream), cudaSuccess);
  EXPECT_EQ(CUDART(cudaFreeAsync)(async, stream), cudaSuccess);
  EXPECT_EQ(CUDART_PTSZ(cudaFreeAsync)(per_thread, stream), cudaSuccess);

  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location = {cudaMemLocationTypeDevice, 0};
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(CUDART(cudaMemPoolCreate)(&pool, &props), cudaSuccess);
  void* pooled = nullptr;
  ASSERT_EQ(CUDART(cudaMallocFromPoolAsync)(&pooled, kMiB, pool, stream), cudaSuccess);
  EXPECT_EQ(CUDART(cudaFreeAsync)(pooled, stream), cudaSuccess);
  EXPECT_EQ(CUDART(cudaMemPoolDestroy)(pool), cudaSuccess);
  EXPECT_EQ(CUDART(cudaStreamSynchronize)(stream), cudaSuccess);
  EXPECT_EQ(CUDART(cudaStreamDestroy)(stream), cudaSuccess);
  EXPECT_EQ(CUDART(cudaDeviceSynchronize)(), cudaSuccess);
}

TEST(FakeRuntime, DevicesAndVersions) {
  int count = 0, device = -1, version = 0;
  ASSERT_EQ(CUDART(cudaGetDeviceCount)(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(CUDART(cudaSetDevice)(1), cudaErrorInvalidDevice);
  EXPECT_EQ(CUDART(cudaGetLastError)(), cudaErrorInvalidDevice);
  ASSERT_EQ(CUDART(cudaSetDevice)(0), cudaSuccess);
  ASSERT_EQ(CUDART(cudaGetDevice)(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
  ASSERT_EQ(CUDART(cudaRuntimeGetVersion)(&version), cudaSuccess);
  EXPECT_EQ(version, 13000);
  ASSERT_EQ(CUDART(cudaDriverGetVersion)(&version), cudaSuccess);
  EXPECT_EQ(version, 13000);

  // cudaGetDriverEntryPointByVersion goes through the driver's cuGetProcAddress.
  void* function = nullptr;
  cudaDriverEntryPointQueryResult status{};
  ASSERT_EQ(CUDART(cudaGetDriverEntryPointByVersion)("cuMemAlloc", &function, 13000,
                                                     cudaEnableDefault, &status),
            cudaSuccess);
  EXPECT_EQ(status, cudaDriverEntryPointSuccess);
  EXPECT_EQ(function, DriverSymbol("cuMemAlloc_v2"));
}

}  // namespace
