// Tests of the fake CUDA itself. Both libraries are dlopened from the build tree, as a program
// loads them, and called through the pointers they hand out (nothing here links them).

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fatbinary_section.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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
    if (strcmp(base, exported) != 0) {  // the real driver looks up base names only
      Lookup exact = GetProcAddress(exported, 13000);
      EXPECT_EQ(exact.result, CUDA_SUCCESS);
      EXPECT_EQ(exact.function, nullptr);
      EXPECT_EQ(exact.status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    }
  }
}

TEST(FakeDriverProcAddress, ReturnsTheVersionOfItselfThatTheCallerAsksFor) {
  EXPECT_EQ(GetProcAddress("cuGetProcAddress", 13000).function,
            DriverSymbol("cuGetProcAddress_v2"));
  EXPECT_EQ(GetProcAddress("cuGetProcAddress", 12000).function,
            DriverSymbol("cuGetProcAddress_v2"));
  EXPECT_EQ(GetProcAddress("cuGetProcAddress", 11030).function, DriverSymbol("cuGetProcAddress"));
  Lookup too_old = GetProcAddress("cuGetProcAddress", 11020);
  EXPECT_EQ(too_old.result, CUDA_SUCCESS);  // a miss is reported in the status, as documented
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
    EXPECT_EQ(lookup.result, CUDA_SUCCESS);
    EXPECT_EQ(lookup.function, nullptr);
    EXPECT_EQ(lookup.status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  }
  // A version newer than the driver's is an error, and leaves the outputs alone.
  Lookup too_new = GetProcAddress("cuMemAlloc", 14000);
  EXPECT_EQ(too_new.result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(too_new.function, &too_new);
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
    EXPECT_EQ(GetProcAddress((name + "_ptsz").c_str(), 13000).function, nullptr);
  }
  // No _ptsz variant: the flag changes nothing.
  EXPECT_EQ(
      GetProcAddress("cuMemAlloc", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).function,
      DriverSymbol("cuMemAlloc_v2"));
}

TEST(FakeDriverProcAddress, ResolvesLaunchModuleAndGraphFunctions) {
  const char* const kBaseToExported[][2] = {
      {"cuModuleLoadData", "cuModuleLoadData"},
      {"cuModuleLoadDataEx", "cuModuleLoadDataEx"},
      {"cuModuleUnload", "cuModuleUnload"},
      {"cuModuleGetFunction", "cuModuleGetFunction"},
      {"cuFuncGetName", "cuFuncGetName"},
      {"cuFuncGetParamInfo", "cuFuncGetParamInfo"},
      {"cuFuncGetAttribute", "cuFuncGetAttribute"},
      {"cuLaunchKernel", "cuLaunchKernel"},
      {"cuLaunchKernelEx", "cuLaunchKernelEx"},
      {"cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel"},
      {"cuGraphCreate", "cuGraphCreate"},
      {"cuGraphAddKernelNode", "cuGraphAddKernelNode_v2"},
      {"cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags"},
      {"cuGraphLaunch", "cuGraphLaunch"},
      {"cuGraphExecDestroy", "cuGraphExecDestroy"},
      {"cuGraphDestroy", "cuGraphDestroy"},
  };
  for (const auto& [base, exported] : kBaseToExported) {
    SCOPED_TRACE(base);
    ASSERT_NE(DriverSymbol(exported), nullptr);
    Lookup by_base = GetProcAddress(base, 13000);
    EXPECT_EQ(by_base.result, CUDA_SUCCESS);
    EXPECT_EQ(by_base.function, DriverSymbol(exported));
  }
  // CUDA 12 changed cuGraphAddKernelNode's struct; older callers get the original.
  EXPECT_EQ(GetProcAddress("cuGraphAddKernelNode", 11080).function,
            DriverSymbol("cuGraphAddKernelNode"));
  EXPECT_NE(DriverSymbol("cuGraphAddKernelNode"), DriverSymbol("cuGraphAddKernelNode_v2"));
  // Newer than the caller: the name is known, the version is not sufficient.
  Lookup too_old = GetProcAddress("cuFuncGetParamInfo", 12030);
  EXPECT_EQ(too_old.result, CUDA_SUCCESS);
  EXPECT_EQ(too_old.function, nullptr);
  EXPECT_EQ(too_old.status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(GetProcAddress("cuFuncGetParamInfo", 12040).function,
            DriverSymbol("cuFuncGetParamInfo"));
}

TEST(FakeDriverProcAddress, LaunchesHavePtszVariants) {
  constexpr cuuint64_t kPerThread = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  for (std::string name :
       {"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuGraphLaunch"}) {
    SCOPED_TRACE(name);
    void* legacy = DriverSymbol(name.c_str());
    void* per_thread = DriverSymbol((name + "_ptsz").c_str());
    ASSERT_NE(per_thread, nullptr);
    EXPECT_NE(legacy, per_thread);
    EXPECT_EQ(GetProcAddress(name.c_str(), 13000).function, legacy);
    EXPECT_EQ(GetProcAddress(name.c_str(), 13000, kPerThread).function, per_thread);
  }
  // cuLaunchKernel came with CUDA 4.0, its _ptsz with 7.0: asked for before, it is not there.
  Lookup before_ptsz = GetProcAddress("cuLaunchKernel", 4000, kPerThread);
  EXPECT_EQ(before_ptsz.function, nullptr);
  EXPECT_EQ(before_ptsz.status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(GetProcAddress("cuLaunchKernel", 4000).function, DriverSymbol("cuLaunchKernel"));
  EXPECT_EQ(GetProcAddress("cuLaunchKernel", 7000, kPerThread).function,
            DriverSymbol("cuLaunchKernel_ptsz"));
  EXPECT_EQ(GetProcAddress("cuLaunchKernel", 3020).status,
            CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
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

// ---- Modules, kernels, launches, graphs ----

// Comments and a .func must not count; the parameter lists cover scalars, a struct by value
// (.align 8 .b8 [24]), a byte array without .align, a pointer with .ptr attributes (whose .align
// is the pointee's), and kernels without parameters, with and without "()".
constexpr char kPtx[] = R"(//
// Generated by hand for the fake's tests
//
.version 8.0
.target sm_80
.address_size 64

// .visible .entry commented_out(
/* .entry also_commented_out( .param .u32 x ) */

.func (.param .b32 ret) helper(.param .b32 x)
{
	st.param.b32 [ret], 0;
	ret;
}

.visible .entry fill(
	.param .u64 fill_param_0,
	.param .u32 fill_param_1,
	.param .f32 fill_param_2
)
{
	ret;
}

.weak .entry _Z11with_structh6Triplettph(
	.param .u8 _Z11with_structh6Triplettph_param_0,
	.param .align 8 .b8 _Z11with_structh6Triplettph_param_1[24],
	.param .u16 _Z11with_structh6Triplettph_param_2,
	.param .b8 _Z11with_structh6Triplettph_param_3[3],
	.param .u64 .ptr .global .align 16 _Z11with_structh6Triplettph_param_4
)
.maxntid 256, 1, 1
{
	ret;
}

.visible .entry no_params()
{
	ret;
}

.entry no_list
{
	ret;
}
)";

struct Param {
  size_t offset;
  size_t size;
  bool operator==(const Param&) const = default;
};

std::vector<Param> ParamsOf(CUfunction function) {
  std::vector<Param> params;
  for (size_t i = 0;; ++i) {
    Param p{};
    CUresult r = CU(cuFuncGetParamInfo)(function, i, &p.offset, &p.size);
    if (r != CUDA_SUCCESS) {
      EXPECT_EQ(r, CUDA_ERROR_INVALID_VALUE) << "past the last parameter";
      return params;
    }
    params.push_back(p);
  }
}

// A fatbin container with one uncompressed PTX entry, laid out as `fatbinary --compress=false
// --image3=kind=ptx,sm=80,file=...` writes it (and nvcc embeds it).
std::vector<unsigned long long> PtxFatbin(std::string_view ptx) {
  const size_t payload = (ptx.size() + 1 + 7) / 8 * 8;
  std::vector<unsigned long long> words(2 + 10 + payload / 8, 0);
  auto* bytes = reinterpret_cast<unsigned char*>(words.data());
  auto put = [&](size_t offset, auto value) { memcpy(bytes + offset, &value, sizeof(value)); };
  put(0, uint32_t{0xba55ed50});  // magic
  put(4, uint16_t{1});           // version
  put(6, uint16_t{16});          // header size
  put(8, uint64_t{0x50 + payload});
  put(16, uint16_t{1});       // kind: PTX
  put(18, uint16_t{0x0101});  // entry version
  put(20, uint32_t{0x50});    // entry header size
  put(24, uint64_t{payload});
  put(32, uint32_t{0});   // compressed size: not compressed
  put(36, uint32_t{64});  // address size
  put(40, uint16_t{0});   // PTX version 8.0
  put(42, uint16_t{8});
  put(44, uint32_t{80});  // sm_80
  put(56, uint64_t{0x11});
  put(80, uint64_t{0x48});
  memcpy(bytes + 96, ptx.data(), ptx.size());
  return words;
}

class FakeDriverKernelTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(CU(cuInit)(0), CUDA_SUCCESS);
    CUcontext context = nullptr;
    ASSERT_EQ(CU(cuDevicePrimaryCtxRetain)(&context, 0), CUDA_SUCCESS);
    ASSERT_EQ(CU(cuCtxSetCurrent)(context), CUDA_SUCCESS);
    ASSERT_EQ(CU(cuModuleLoadData)(&module_, kPtx), CUDA_SUCCESS);
    ASSERT_EQ(CU(cuModuleGetFunction)(&fill_, module_, "fill"), CUDA_SUCCESS);
    ASSERT_EQ(CU(cuModuleGetFunction)(&no_params_, module_, "no_params"), CUDA_SUCCESS);
  }
  void TearDown() override { EXPECT_EQ(CU(cuModuleUnload)(module_), CUDA_SUCCESS); }

  CUmodule module_ = nullptr;
  CUfunction fill_ = nullptr;
  CUfunction no_params_ = nullptr;
  // fill(.u64, .u32, .f32): 16 bytes of parameters.
  CUdeviceptr pointer_ = 0x7000'0000;
  unsigned count_ = 1000;
  float value_ = 1.5f;
  void* args_[3] = {&pointer_, &count_, &value_};
};

TEST_F(FakeDriverKernelTest, ParsesEntryNamesAndParameterLayout) {
  const char* name = nullptr;
  ASSERT_EQ(CU(cuFuncGetName)(&name, fill_), CUDA_SUCCESS);
  EXPECT_STREQ(name, "fill");
  EXPECT_EQ(ParamsOf(fill_), (std::vector<Param>{{0, 8}, {8, 4}, {12, 4}}));

  CUfunction with_struct = nullptr;
  ASSERT_EQ(CU(cuModuleGetFunction)(&with_struct, module_, "_Z11with_structh6Triplettph"),
            CUDA_SUCCESS);
  ASSERT_EQ(CU(cuFuncGetName)(&name, with_struct), CUDA_SUCCESS);
  EXPECT_STREQ(name, "_Z11with_structh6Triplettph");
  // u8 at 0; the struct aligned to its .align 8; u16; 3 bytes aligned to 1; the pointer to 8.
  EXPECT_EQ(ParamsOf(with_struct),
            (std::vector<Param>{{0, 1}, {8, 24}, {32, 2}, {34, 3}, {40, 8}}));

  CUfunction no_list = nullptr;
  ASSERT_EQ(CU(cuModuleGetFunction)(&no_list, module_, "no_list"), CUDA_SUCCESS);
  EXPECT_TRUE(ParamsOf(no_params_).empty());
  EXPECT_TRUE(ParamsOf(no_list).empty());
  EXPECT_NE(no_list, no_params_);
  CUfunction again = nullptr;
  ASSERT_EQ(CU(cuModuleGetFunction)(&again, module_, "fill"), CUDA_SUCCESS);
  EXPECT_EQ(again, fill_);

  // Only the offset may be asked for; past the end and bad arguments are INVALID_VALUE.
  size_t offset = 0, size = 0;
  ASSERT_EQ(CU(cuFuncGetParamInfo)(fill_, 2, &offset, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(offset, 12u);
  EXPECT_EQ(CU(cuFuncGetParamInfo)(fill_, 3, &offset, &size), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuFuncGetParamInfo)(no_params_, 0, &offset, &size), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuFuncGetParamInfo)(fill_, 0, nullptr, &size), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuFuncGetName)(nullptr, fill_), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuFuncGetName)(&name, nullptr), CUDA_ERROR_INVALID_VALUE);

  for (const char* missing : {"commented_out", "also_commented_out", "helper", "fil", ""}) {
    CUfunction function = nullptr;
    EXPECT_EQ(CU(cuModuleGetFunction)(&function, module_, missing), CUDA_ERROR_NOT_FOUND)
        << missing;
  }

  int attribute = 0;
  ASSERT_EQ(CU(cuFuncGetAttribute)(&attribute, CU_FUNC_ATTRIBUTE_PTX_VERSION, fill_), CUDA_SUCCESS);
  EXPECT_EQ(attribute, 80);
  ASSERT_EQ(CU(cuFuncGetAttribute)(&attribute, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fill_),
            CUDA_SUCCESS);
  EXPECT_EQ(attribute, 1024);
}

// The answers of the real driver (580.159) to the same images.
TEST_F(FakeDriverKernelTest, RejectsWhatIsNotPtxOrDoesNotCompile) {
  CUmodule module = nullptr;
  EXPECT_EQ(CU(cuModuleLoadData)(&module, "not PTX at all"), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(CU(cuModuleLoadData)(&module, ""), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(CU(cuModuleLoadData)(&module, ".target sm_80\n.entry k() { ret; }"),
            CUDA_ERROR_INVALID_IMAGE)
      << "no .version first";
  EXPECT_EQ(CU(cuModuleLoadData)(&module, ".version 8.0\n.address_size 64\n.entry k() { ret; }"),
            CUDA_ERROR_INVALID_PTX)
      << "no .target";
  EXPECT_EQ(
      CU(cuModuleLoadData)(&module, ".version 8.0\n.target sm_80\n.entry k(.param x) { ret; }"),
      CUDA_ERROR_INVALID_PTX)
      << "parameter without a type";
  EXPECT_EQ(
      CU(cuModuleLoadData)(&module, ".version 8.0\n.target sm_80\n.entry k() {}\n.entry k() {}"),
      CUDA_ERROR_INVALID_PTX)
      << "two kernels of one name";
  EXPECT_EQ(CU(cuModuleLoadData)(&module, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuModuleLoadData)(nullptr, kPtx), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(module, nullptr);
  CUfunction function = nullptr;
  EXPECT_EQ(CU(cuModuleGetFunction)(&function, module, "fill"), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(CU(cuModuleUnload)(module), CUDA_ERROR_INVALID_HANDLE);

  // PTX without kernels is a module without functions.
  ASSERT_EQ(CU(cuModuleLoadData)(&module, "// generated\n.version 8.0\n.target sm_80\n"),
            CUDA_SUCCESS);
  EXPECT_EQ(CU(cuModuleGetFunction)(&function, module, "fill"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(CU(cuModuleUnload)(module), CUDA_SUCCESS);
}

TEST_F(FakeDriverKernelTest, LoadsPtxFromAFatbinContainer) {
  std::vector<unsigned long long> fatbin = PtxFatbin(kPtx);
  CUmodule module = nullptr;
  CUjit_option option = CU_JIT_OPTIMIZATION_LEVEL;
  void* level = reinterpret_cast<void*>(uintptr_t{4});
  ASSERT_EQ(CU(cuModuleLoadDataEx)(&module, fatbin.data(), 1, &option, &level), CUDA_SUCCESS);
  CUfunction fill = nullptr;
  ASSERT_EQ(CU(cuModuleGetFunction)(&fill, module, "fill"), CUDA_SUCCESS);
  EXPECT_NE(fill, fill_) << "a module of its own";
  EXPECT_EQ(ParamsOf(fill).size(), 3u);
  EXPECT_EQ(CU(cuModuleUnload)(module), CUDA_SUCCESS);

  // A container of compressed PTX (or only cubins) has nothing the fake can load.
  auto* entry = reinterpret_cast<unsigned char*>(fatbin.data()) + 16;
  uint32_t compressed_size = 100;
  memcpy(entry + 16, &compressed_size, sizeof(compressed_size));
  EXPECT_EQ(CU(cuModuleLoadData)(&module, fatbin.data()), CUDA_ERROR_NO_BINARY_FOR_GPU);
}

// The container the toolkit's own tool writes, where it can be found.
TEST_F(FakeDriverKernelTest, LoadsWhatTheFatbinaryToolWrites) {
  const std::string dir = testing::TempDir();
  const std::string ptx_path = dir + "/fake_cuda_test.ptx";
  const std::string fatbin_path = dir + "/fake_cuda_test.fatbin";
  FILE* ptx = fopen(ptx_path.c_str(), "w");
  ASSERT_NE(ptx, nullptr);
  fputs(kPtx, ptx);
  fclose(ptx);
  std::string command =
      "PATH=\"$PATH:/usr/local/cuda/bin\" fatbinary --compress=false --create=" + fatbin_path +
      " --image3=kind=ptx,sm=80,file=" + ptx_path + " >/dev/null 2>&1";
  if (system(command.c_str()) != 0) GTEST_SKIP() << "fatbinary is not available";
  FILE* file = fopen(fatbin_path.c_str(), "rb");
  ASSERT_NE(file, nullptr);
  std::vector<uint64_t> fatbin(4096);
  size_t read = fread(fatbin.data(), 1, fatbin.size() * 8, file);
  fclose(file);
  ASSERT_GT(read, 16u);
  CUmodule module = nullptr;
  ASSERT_EQ(CU(cuModuleLoadData)(&module, fatbin.data()), CUDA_SUCCESS);
  CUfunction function = nullptr;
  ASSERT_EQ(CU(cuModuleGetFunction)(&function, module, "_Z11with_structh6Triplettph"),
            CUDA_SUCCESS);
  EXPECT_EQ(ParamsOf(function).size(), 5u);
  EXPECT_EQ(CU(cuModuleUnload)(module), CUDA_SUCCESS);
}

TEST_F(FakeDriverKernelTest, LaunchChecksItsArguments) {
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 256, 1, 1, 256, 1, 1, 0, nullptr, args_, nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(
      CU(cuLaunchKernel)(fill_, 2, 3, 4, 8, 8, 16, 1024, CU_STREAM_PER_THREAD, args_, nullptr),
      CUDA_SUCCESS);
  EXPECT_EQ(CU(cuLaunchKernel)(no_params_, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_SUCCESS);

  struct Case {
    const char* what;
    unsigned grid[3];
    unsigned block[3];
    unsigned shared;
  };
  const Case kBadShapes[] = {
      {"empty grid", {0, 1, 1}, {256, 1, 1}, 0},
      {"empty block", {1, 1, 1}, {256, 0, 1}, 0},
      {"1056 threads", {1, 1, 1}, {32, 33, 1}, 0},
      {"block z over 64", {1, 1, 1}, {1, 1, 65}, 0},
      {"grid y over 65535", {1, 65536, 1}, {1, 1, 1}, 0},
      {"64 KiB of shared memory", {1, 1, 1}, {1, 1, 1}, 64 << 10},
  };
  for (const Case& c : kBadShapes) {
    EXPECT_EQ(CU(cuLaunchKernel)(fill_, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1],
                                 c.block[2], c.shared, nullptr, args_, nullptr),
              CUDA_ERROR_INVALID_VALUE)
        << c.what;
  }
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE)
      << "a kernel with parameters needs arguments";
  void* missing_one[3] = {&pointer_, nullptr, &value_};
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 1, 1, 1, 1, 1, 1, 0, nullptr, missing_one, nullptr),
            CUDA_ERROR_INVALID_VALUE);

  CUfunction stale = fill_;
  EXPECT_EQ(CU(cuLaunchKernel)(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, args_, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(CU(cuLaunchKernel)(reinterpret_cast<CUfunction>(&stale), 1, 1, 1, 1, 1, 1, 0, nullptr,
                               args_, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(&stale),
                               args_, nullptr),
            CUDA_ERROR_INVALID_HANDLE)
      << "not a stream";
  CUstream stream = nullptr;
  ASSERT_EQ(CU(cuStreamCreate)(&stream, 0), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 1, 1, 1, 1, 1, 1, 0, stream, args_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuStreamDestroy)(stream), CUDA_SUCCESS);

  // Without a current context nothing launches.
  CUcontext context = nullptr;
  ASSERT_EQ(CU(cuCtxGetCurrent)(&context), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuCtxSetCurrent)(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 1, 1, 1, 1, 1, 1, 0, nullptr, args_, nullptr),
            CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_EQ(CU(cuCtxSetCurrent)(context), CUDA_SUCCESS);
}

TEST_F(FakeDriverKernelTest, LaunchTakesAPackedArgumentBuffer) {
  struct {
    CUdeviceptr pointer;
    unsigned count;
    float value;
  } packed{pointer_, count_, value_};
  static_assert(sizeof(packed) == 16);
  size_t size = sizeof(packed);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, extra), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 4, 1, 1, 64, 1, 1, 0, nullptr, args_, extra),
            CUDA_ERROR_INVALID_VALUE)
      << "kernelParams and extra together";

  // As the real driver: a shorter buffer is taken, a longer one is out of resources, none is not.
  size = 12;
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, extra), CUDA_SUCCESS);
  size = 17;
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, extra),
            CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  size = 0;
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, extra),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuLaunchKernel)(no_params_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, extra),
            CUDA_SUCCESS);
  size = 8;
  EXPECT_EQ(CU(cuLaunchKernel)(no_params_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, extra),
            CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  size = sizeof(packed);
  void* no_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_END};
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, no_size),
            CUDA_ERROR_INVALID_VALUE);
  void* no_pointer[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, no_pointer),
            CUDA_ERROR_INVALID_VALUE);
  void* unknown[] = {reinterpret_cast<void*>(0x7), &size, CU_LAUNCH_PARAM_END};
  EXPECT_EQ(CU(cuLaunchKernel)(fill_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, unknown),
            CUDA_ERROR_INVALID_VALUE);
  void* empty[] = {CU_LAUNCH_PARAM_END};
  EXPECT_EQ(CU(cuLaunchKernel)(no_params_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, empty),
            CUDA_SUCCESS);

  auto launch_ptsz =
      reinterpret_cast<PFN_cuLaunchKernel_v7000_ptsz>(DriverSymbol("cuLaunchKernel_ptsz"));
  EXPECT_EQ(launch_ptsz(fill_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, extra), CUDA_SUCCESS);
  EXPECT_EQ(launch_ptsz(fill_, 4, 1, 1, 64, 1, 1, 0, nullptr, nullptr, no_size),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeDriverKernelTest, LaunchKernelExAndCooperativeLaunches) {
  CUlaunchConfig config{};
  config.gridDimX = 4096;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 256;
  config.blockDimY = config.blockDimZ = 1;
  EXPECT_EQ(CU(cuLaunchKernelEx)(&config, fill_, args_, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuLaunchKernelEx)(nullptr, fill_, args_, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuLaunchKernelEx)(&config, fill_, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuLaunchKernelEx)(&config, nullptr, args_, nullptr), CUDA_ERROR_INVALID_HANDLE);
  config.numAttrs = 1;
  EXPECT_EQ(CU(cuLaunchKernelEx)(&config, fill_, args_, nullptr), CUDA_ERROR_INVALID_VALUE)
      << "attributes counted but missing";

  // 4096 blocks of 256 threads do not fit on 108 multiprocessors at once; 864 do.
  CUlaunchAttribute cooperative{};
  cooperative.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  cooperative.value.cooperative = 1;
  config.attrs = &cooperative;
  EXPECT_EQ(CU(cuLaunchKernelEx)(&config, fill_, args_, nullptr),
            CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  config.gridDimX = 864;
  auto launch_ex_ptsz =
      reinterpret_cast<PFN_cuLaunchKernelEx_v11060_ptsz>(DriverSymbol("cuLaunchKernelEx_ptsz"));
  EXPECT_EQ(launch_ex_ptsz(&config, fill_, args_, nullptr), CUDA_SUCCESS);

  EXPECT_EQ(CU(cuLaunchCooperativeKernel)(fill_, 864, 1, 1, 256, 1, 1, 0, nullptr, args_),
            CUDA_SUCCESS);
  EXPECT_EQ(CU(cuLaunchCooperativeKernel)(fill_, 865, 1, 1, 256, 1, 1, 0, nullptr, args_),
            CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  EXPECT_EQ(CU(cuLaunchCooperativeKernel)(fill_, 1, 1, 1, 256, 1, 1, 0, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  auto cooperative_ptsz = reinterpret_cast<PFN_cuLaunchCooperativeKernel_v9000_ptsz>(
      DriverSymbol("cuLaunchCooperativeKernel_ptsz"));
  EXPECT_EQ(cooperative_ptsz(fill_, 1, 1, 1, 1024, 1, 1, 0, nullptr, args_), CUDA_SUCCESS);
}

TEST_F(FakeDriverKernelTest, UnloadInvalidatesTheModulesFunctions) {
  CUmodule module = nullptr;
  CUfunction fill = nullptr;
  ASSERT_EQ(CU(cuModuleLoadData)(&module, kPtx), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuModuleGetFunction)(&fill, module, "fill"), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuModuleUnload)(module), CUDA_SUCCESS);
  const char* name = nullptr;
  size_t offset = 0;
  EXPECT_EQ(CU(cuFuncGetName)(&name, fill), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(CU(cuFuncGetParamInfo)(fill, 0, &offset, nullptr), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(CU(cuLaunchKernel)(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, args_, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(CU(cuModuleUnload)(module), CUDA_ERROR_INVALID_HANDLE);
  // The fixture's module is untouched.
  EXPECT_EQ(CU(cuFuncGetName)(&name, fill_), CUDA_SUCCESS);
}

TEST_F(FakeDriverKernelTest, GraphsOfKernelNodes) {
  CUgraph graph = nullptr;
  EXPECT_EQ(CU(cuGraphCreate)(&graph, 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(CU(cuGraphCreate)(&graph, 0), CUDA_SUCCESS);

  CUDA_KERNEL_NODE_PARAMS params{};  // the CUDA 12 struct, through cuGraphAddKernelNode_v2
  params.func = fill_;
  params.gridDimX = 4096;
  params.gridDimY = params.gridDimZ = 1;
  params.blockDimX = 256;
  params.blockDimY = params.blockDimZ = 1;
  params.kernelParams = args_;
  CUgraphNode first = nullptr, second = nullptr;
  ASSERT_EQ(CU(cuGraphAddKernelNode)(&first, graph, nullptr, 0, &params), CUDA_SUCCESS);

  // The original takes the shorter CUDA 10 struct.
  CUDA_KERNEL_NODE_PARAMS_v1 old_params{};
  old_params.func = no_params_;
  old_params.gridDimX = old_params.gridDimY = old_params.gridDimZ = 1;
  old_params.blockDimX = old_params.blockDimY = old_params.blockDimZ = 1;
  auto add_v1 =
      reinterpret_cast<PFN_cuGraphAddKernelNode_v10000>(DriverSymbol("cuGraphAddKernelNode"));
  ASSERT_EQ(add_v1(&second, graph, &first, 1, &old_params), CUDA_SUCCESS);
  EXPECT_NE(first, second);

  CUgraphNode rejected = nullptr;
  params.kernelParams = nullptr;
  EXPECT_EQ(CU(cuGraphAddKernelNode)(&rejected, graph, nullptr, 0, &params),
            CUDA_ERROR_INVALID_VALUE)
      << "no arguments";
  params.kernelParams = args_;
  params.blockDimX = 2048;
  EXPECT_EQ(CU(cuGraphAddKernelNode)(&rejected, graph, nullptr, 0, &params),
            CUDA_ERROR_INVALID_VALUE)
      << "block too large";
  params.blockDimX = 256;
  params.func = nullptr;
  EXPECT_EQ(CU(cuGraphAddKernelNode)(&rejected, graph, nullptr, 0, &params),
            CUDA_ERROR_INVALID_HANDLE);
  params.func = fill_;
  CUgraphNode stranger = reinterpret_cast<CUgraphNode>(&rejected);
  EXPECT_EQ(CU(cuGraphAddKernelNode)(&rejected, graph, &stranger, 1, &params),
            CUDA_ERROR_INVALID_VALUE)
      << "dependency outside the graph";
  EXPECT_EQ(CU(cuGraphAddKernelNode)(&rejected, reinterpret_cast<CUgraph>(&stranger), nullptr, 0,
                                     &params),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(rejected, nullptr);

  CUgraphExec exec = nullptr;
  ASSERT_EQ(CU(cuGraphInstantiate)(&exec, graph, 0), CUDA_SUCCESS);  // ...WithFlags
  EXPECT_EQ(CU(cuGraphDestroy)(graph), CUDA_SUCCESS);                // the executable graph stays
  EXPECT_EQ(CU(cuGraphDestroy)(graph), CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(CU(cuGraphLaunch)(exec, nullptr), CUDA_SUCCESS);
  auto graph_launch_ptsz =
      reinterpret_cast<PFN_cuGraphLaunch_v10000_ptsz>(DriverSymbol("cuGraphLaunch_ptsz"));
  EXPECT_EQ(graph_launch_ptsz(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuGraphLaunch)(exec, reinterpret_cast<CUstream>(&stranger)),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(CU(cuGraphInstantiate)(&exec, graph, 0), CUDA_ERROR_INVALID_VALUE);

  EXPECT_EQ(CU(cuGraphExecDestroy)(exec), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuGraphLaunch)(exec, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(graph_launch_ptsz(exec, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuGraphExecDestroy)(exec), CUDA_ERROR_INVALID_VALUE);
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

// ---- Runtime: kernels registered as nvcc-generated code registers them ----

constexpr char kScalePtx[] = R"(.version 8.0
.target sm_80
.address_size 64

.visible .entry scale(
	.param .u64 scale_param_0,
	.param .f32 scale_param_1
)
{
	ret;
}
)";

// Host stubs: what nvcc generates for each __global__ function; their addresses are the keys.
void ScaleStub(float*, float) {}
void MissingStub() {}
void UnregisteredStub() {}

// The fake's "fat binary" convention (README.md): nvcc's wrapper struct around a fatbin
// container of uncompressed PTX, or around the PTX text itself.
class FakeRuntimeKernelTest : public testing::Test {
 protected:
  void SetUp() override {
    fatbin_ = PtxFatbin(kScalePtx);
    wrapper_ = {FATBINC_MAGIC, FATBINC_VERSION, fatbin_.data(), nullptr};
    handle_ = register_fat_binary_(&wrapper_);
    ASSERT_NE(handle_, nullptr);
    char name[] = "scale";
    register_function_(handle_, reinterpret_cast<const char*>(&ScaleStub), name, name, -1, nullptr,
                       nullptr, nullptr, nullptr, nullptr);
    char missing[] = "not_in_the_module";
    register_function_(handle_, reinterpret_cast<const char*>(&MissingStub), missing, missing, -1,
                       nullptr, nullptr, nullptr, nullptr, nullptr);
    register_fat_binary_end_(handle_);
  }
  void TearDown() override {
    unregister_fat_binary_(handle_);
    CUDART(cudaGetLastError)();
  }

  using RegisterFatBinary = void** (*)(void*);
  using RegisterFatBinaryEnd = void (*)(void**);
  using RegisterFunction = void (*)(void**, const char*, char*, const char*, int, uint3*, uint3*,
                                    dim3*, dim3*, int*);
  RegisterFatBinary register_fat_binary_ =
      reinterpret_cast<RegisterFatBinary>(dlsym(Libraries().runtime, "__cudaRegisterFatBinary"));
  RegisterFatBinaryEnd register_fat_binary_end_ = reinterpret_cast<RegisterFatBinaryEnd>(
      dlsym(Libraries().runtime, "__cudaRegisterFatBinaryEnd"));
  RegisterFatBinaryEnd unregister_fat_binary_ = reinterpret_cast<RegisterFatBinaryEnd>(
      dlsym(Libraries().runtime, "__cudaUnregisterFatBinary"));
  RegisterFunction register_function_ =
      reinterpret_cast<RegisterFunction>(dlsym(Libraries().runtime, "__cudaRegisterFunction"));

  std::vector<unsigned long long> fatbin_;
  __fatBinC_Wrapper_t wrapper_{};
  void** handle_ = nullptr;
  float* data_ = reinterpret_cast<float*>(0x7000'0000);
  float factor_ = 2.0f;
  void* args_[2] = {&data_, &factor_};
};

TEST_F(FakeRuntimeKernelTest, RegisteredKernelsLaunchThroughTheDriver) {
  auto stub = reinterpret_cast<const void*>(&ScaleStub);
  EXPECT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(256), dim3(256), args_, 0, nullptr), cudaSuccess);

  // The module was loaded through the driver: its CUfunction is the driver's.
  cudaFunction_t function = nullptr;
  ASSERT_EQ(CUDART(cudaGetFuncBySymbol)(&function, stub), cudaSuccess);
  const char* name = nullptr;
  ASSERT_EQ(CU(cuFuncGetName)(&name, reinterpret_cast<CUfunction>(function)), CUDA_SUCCESS);
  EXPECT_STREQ(name, "scale");
  EXPECT_EQ(ParamsOf(reinterpret_cast<CUfunction>(function)), (std::vector<Param>{{0, 8}, {8, 4}}));
  // The same CUfunction from the driver's own launch path.
  EXPECT_EQ(CU(cuLaunchKernel)(reinterpret_cast<CUfunction>(function), 1, 1, 1, 1, 1, 1, 0, nullptr,
                               args_, nullptr),
            CUDA_SUCCESS);

  // Checked by the driver (the runtime has no idea of the parameters) and reported back.
  EXPECT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(1), dim3(1), nullptr, 0, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(CUDART(cudaGetLastError)(), cudaErrorInvalidValue);
  // So is the shape: the real runtime (13.0) answers cudaErrorInvalidValue, from the driver.
  EXPECT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(1), dim3(2048), args_, 0, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(0), dim3(1), args_, 0, nullptr),
            cudaErrorInvalidValue);

  // Unknown host functions and device names, with the real runtime's answers.
  auto unregistered = reinterpret_cast<const void*>(&UnregisteredStub);
  EXPECT_EQ(CUDART(cudaLaunchKernel)(unregistered, dim3(1), dim3(1), args_, 0, nullptr),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(CUDART(cudaGetFuncBySymbol)(&function, unregistered), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(CUDART(cudaGetLastError)(), cudaErrorInvalidDeviceFunction);
  auto missing = reinterpret_cast<const void*>(&MissingStub);
  EXPECT_EQ(CUDART(cudaLaunchKernel)(missing, dim3(1), dim3(1), args_, 0, nullptr),
            cudaErrorSymbolNotFound);
  EXPECT_EQ(CUDART(cudaGetLastError)(), cudaErrorSymbolNotFound);
  EXPECT_STREQ(CUDART(cudaGetErrorName)(cudaErrorSymbolNotFound), "cudaErrorSymbolNotFound");
}

TEST_F(FakeRuntimeKernelTest, ExCooperativeAndPerThreadLaunches) {
  auto stub = reinterpret_cast<const void*>(&ScaleStub);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(4096);
  config.blockDim = dim3(256);
  EXPECT_EQ(CUDART(cudaLaunchKernelExC)(&config, stub, args_), cudaSuccess);
  EXPECT_EQ(CUDART_PTSZ(cudaLaunchKernelExC)(&config, stub, args_), cudaSuccess);
  cudaLaunchAttribute cooperative{};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  EXPECT_EQ(CUDART(cudaLaunchKernelExC)(&config, stub, args_), cudaErrorCooperativeLaunchTooLarge)
      << "the attribute reaches the driver";

  EXPECT_EQ(CUDART(cudaLaunchCooperativeKernel)(stub, dim3(108), dim3(256), args_, 0, nullptr),
            cudaSuccess);
  EXPECT_EQ(CUDART_PTSZ(cudaLaunchCooperativeKernel)(stub, dim3(108), dim3(256), args_, 0, nullptr),
            cudaSuccess);
  EXPECT_EQ(CUDART(cudaLaunchCooperativeKernel)(stub, dim3(100000), dim3(256), args_, 0, nullptr),
            cudaErrorCooperativeLaunchTooLarge);
  EXPECT_EQ(
      CUDART_PTSZ(cudaLaunchKernel)(stub, dim3(4096), dim3(256), args_, 0, cudaStreamPerThread),
      cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(CUDART(cudaStreamCreate)(&stream), cudaSuccess);
  EXPECT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(1), dim3(1), args_, 0, stream), cudaSuccess);
  EXPECT_EQ(CUDART(cudaStreamDestroy)(stream), cudaSuccess);
  EXPECT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(1), dim3(1), args_, 0, stream),
            cudaErrorInvalidResourceHandle);
}

TEST_F(FakeRuntimeKernelTest, UnregisteringForgetsTheKernels) {
  auto stub = reinterpret_cast<const void*>(&ScaleStub);
  ASSERT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(1), dim3(1), args_, 0, nullptr), cudaSuccess);
  cudaFunction_t function = nullptr;
  ASSERT_EQ(CUDART(cudaGetFuncBySymbol)(&function, stub), cudaSuccess);
  unregister_fat_binary_(handle_);
  EXPECT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(1), dim3(1), args_, 0, nullptr),
            cudaErrorInvalidResourceHandle);
  const char* name = nullptr;
  EXPECT_EQ(CU(cuFuncGetName)(&name, reinterpret_cast<CUfunction>(function)),
            CUDA_ERROR_INVALID_HANDLE)
      << "the module is unloaded";

  // Registered again, from the PTX text itself this time.
  wrapper_.data = reinterpret_cast<const unsigned long long*>(kScalePtx);
  handle_ = register_fat_binary_(&wrapper_);
  char scale[] = "scale";
  register_function_(handle_, reinterpret_cast<const char*>(&ScaleStub), scale, scale, -1, nullptr,
                     nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(1), dim3(1), args_, 0, nullptr), cudaSuccess);
}

TEST_F(FakeRuntimeKernelTest, BadImagesFailAtTheFirstLaunch) {
  char scale[] = "scale";
  auto stub = reinterpret_cast<const void*>(&UnregisteredStub);
  const char* kBadPtx = ".version 8.0\n.target sm_80\n.entry scale(.param x) { ret; }";
  __fatBinC_Wrapper_t bad_ptx{FATBINC_MAGIC, FATBINC_VERSION,
                              reinterpret_cast<const unsigned long long*>(kBadPtx), nullptr};
  void** handle = register_fat_binary_(&bad_ptx);
  register_function_(handle, reinterpret_cast<const char*>(stub), scale, scale, -1, nullptr,
                     nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(1), dim3(1), args_, 0, nullptr),
            cudaErrorInvalidPtx);
  unregister_fat_binary_(handle);

  const char* kNoKernels = ".version 8.0\n.target sm_80\n";
  __fatBinC_Wrapper_t no_kernels{FATBINC_MAGIC, FATBINC_VERSION,
                                 reinterpret_cast<const unsigned long long*>(kNoKernels), nullptr};
  handle = register_fat_binary_(&no_kernels);
  register_function_(handle, reinterpret_cast<const char*>(stub), scale, scale, -1, nullptr,
                     nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(1), dim3(1), args_, 0, nullptr),
            cudaErrorSymbolNotFound);
  unregister_fat_binary_(handle);

  __fatBinC_Wrapper_t not_a_wrapper{0x1234, FATBINC_VERSION, fatbin_.data(), nullptr};
  handle = register_fat_binary_(&not_a_wrapper);
  register_function_(handle, reinterpret_cast<const char*>(stub), scale, scale, -1, nullptr,
                     nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(CUDART(cudaLaunchKernel)(stub, dim3(1), dim3(1), args_, 0, nullptr),
            cudaErrorInvalidKernelImage);
  unregister_fat_binary_(handle);
}

}  // namespace
