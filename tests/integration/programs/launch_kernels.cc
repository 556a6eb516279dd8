// Launches kernels through every launch API gpumem records, then frees everything and exits 0:
//   fill   3x cuLaunchKernel through a pointer from cudaGetDriverEntryPointByVersion (grid 256,
//          block 256), 1x cuLaunchCooperativeKernel;
//   add    100x cuLaunchKernel, the exported symbol (grid 4096, block 256, kernelParams), the
//          last one with the same pointer as both inputs,
//          10x cuLaunchKernelEx (a packed argument buffer through `extra`),
//          5x cuGraphLaunch of a one-node graph;
//   scale  7x cudaLaunchKernel, registered at start-up as nvcc-generated code registers it.
// fill and add come from a PTX module loaded with cuModuleLoadData; scale from a "fat binary"
// (tests/fake_cuda/README.md): a fatbin container of uncompressed PTX, which the real runtime
// JIT-compiles as well. On the fake CUDA kernels do not run; on a GPU the results are checked.
// Any failing CUDA call ends the program with a message and exit status 1.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <fatbinary_section.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "tests/integration/programs/fill_add_ptx.h"

// What nvcc-generated host code calls (crt/host_runtime.h, which is internal to nvcc).
extern "C" {
void** __cudaRegisterFatBinary(void* fatCubin);
void __cudaRegisterFatBinaryEnd(void** fatCubinHandle);
void __cudaUnregisterFatBinary(void** fatCubinHandle);
void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                            const char* deviceName, int thread_limit, uint3* tid, uint3* bid,
                            dim3* bDim, dim3* gDim, int* wSize);
}

namespace {

void Check(int code, const char* call, int line) {
  if (code != 0) {
    fprintf(stderr, "launch_kernels.cc:%d: %s failed with error %d\n", line, call, code);
    exit(1);
  }
}
#define CHECK(call) Check(static_cast<int>(call), #call, __LINE__)

void Fail(const char* message) {
  fprintf(stderr, "launch_kernels: %s\n", message);
  exit(1);
}

constexpr size_t kBufferBytes = size_t{1} << 20;
constexpr unsigned kElements = kBufferBytes / sizeof(float);

// scale(.u64 ptr, .f32 factor): one element per thread.
constexpr char kScalePtx[] = R"(.version 8.0
.target sm_80
.address_size 64

.visible .entry scale(
	.param .u64 scale_param_0,
	.param .f32 scale_param_1
)
{
	.reg .f32 	%f<4>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [scale_param_0];
	ld.param.f32 	%f1, [scale_param_1];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mad.lo.s32 	%r4, %r1, %r2, %r3;
	mul.wide.u32 	%rd3, %r4, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.f32 	%f2, [%rd4];
	mul.f32 	%f3, %f2, %f1;
	st.global.f32 	[%rd4], %f3;
	ret;
}
)";

// A fatbin container with one uncompressed PTX entry for sm_80, laid out as
// `fatbinary --compress=false --image3=kind=ptx,sm=80,file=scale.ptx` writes it.
std::vector<unsigned long long> PtxFatbin(std::string_view ptx) {
  const size_t payload = (ptx.size() + 1 + 7) / 8 * 8;  // NUL-terminated, 8-byte padded
  std::vector<unsigned long long> words(2 + 10 + payload / 8, 0);
  auto* bytes = reinterpret_cast<unsigned char*>(words.data());
  auto put = [&](size_t offset, auto value) { memcpy(bytes + offset, &value, sizeof(value)); };
  put(0, uint32_t{0xba55ed50});  // container: magic, version, header size, size of the entries
  put(4, uint16_t{1});
  put(6, uint16_t{16});
  put(8, uint64_t{0x50 + payload});
  put(16, uint16_t{1});  // entry: kind PTX, version, header size, padded payload size
  put(18, uint16_t{0x0101});
  put(20, uint32_t{0x50});
  put(24, uint64_t{payload});
  put(36, uint32_t{64});  // address size; the compressed size before it stays 0
  put(42, uint16_t{8});   // PTX 8.0 (minor, major)
  put(44, uint32_t{80});  // sm_80
  put(56, uint64_t{0x11});
  put(80, uint64_t{0x48});
  memcpy(bytes + 96, ptx.data(), ptx.size());
  return words;
}

// The host stub nvcc generates for `__global__ void scale(float*, float)`: `scale<<<grid,
// block>>>(data, factor)` ends up here, and the stub launches the kernel by its own address.
__attribute__((noinline)) void scale(dim3 grid, dim3 block, float* data, float factor) {
  void* args[] = {&data, &factor};
  CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(&scale), grid, block, args, 0, nullptr));
}

// What nvcc's __cudaRegisterBinary does in a static constructor.
__fatBinC_Wrapper_t fat_device_text;
void** fat_cubin_handle = nullptr;

__attribute__((constructor)) void RegisterKernels() {
  static std::vector<unsigned long long> fatbin = PtxFatbin(kScalePtx);
  fat_device_text = {FATBINC_MAGIC, FATBINC_VERSION, fatbin.data(), nullptr};
  fat_cubin_handle = __cudaRegisterFatBinary(&fat_device_text);
  char name[] = "scale";
  __cudaRegisterFunction(fat_cubin_handle, reinterpret_cast<const char*>(&scale), name, name, -1,
                         nullptr, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterFatBinaryEnd(fat_cubin_handle);
  atexit([] { __cudaUnregisterFatBinary(fat_cubin_handle); });
}

// The three buffers every launch works on.
struct Buffers {
  float* a = nullptr;
  float* b = nullptr;
  float* out = nullptr;
};

// fill, 3 launches: through the pointer the driver hands out (as libraries that never link libcuda
// do).
void FillThroughEntryPoint(CUfunction fill, const Buffers& buffers) {
  PFN_cuLaunchKernel_v4000 launch_kernel = nullptr;
  cudaDriverEntryPointQueryResult status{};
  CHECK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", reinterpret_cast<void**>(&launch_kernel),
                                         12000, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || launch_kernel == nullptr) {
    Fail("cudaGetDriverEntryPointByVersion found no cuLaunchKernel");
  }
  unsigned n = kElements;
  const struct {
    float* buffer;
    float value;
  } kFills[] = {{buffers.a, 1.0f}, {buffers.b, 2.0f}, {buffers.out, 0.0f}};
  for (const auto& f : kFills) {
    float* buffer = f.buffer;
    float value = f.value;
    void* args[] = {&buffer, &n, &value};
    CHECK(launch_kernel(fill, 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
  }
}

// add, 100 launches: the exported symbol, arguments by pointer. The last one adds `a` to itself:
// the same pointer in two parameters is one touched buffer.
void AddByPointer(CUfunction add, Buffers buffers) {
  unsigned n = kElements;
  void* add_args[] = {&buffers.a, &buffers.b, &buffers.out, &n};
  void* add_in_place_args[] = {&buffers.a, &buffers.a, &buffers.out, &n};
  for (int i = 0; i < 100; ++i) {
    CHECK(cuLaunchKernel(add, 4096, 1, 1, 256, 1, 1, 0, nullptr,
                         i < 99 ? add_args : add_in_place_args, nullptr));
  }
}

// add, 10 launches: cuLaunchKernelEx, arguments packed in one buffer as the driver lays them out.
// Its size is the parameters' (28 bytes), not the padded struct's: a larger buffer is
// CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES.
void AddPackedEx(CUfunction add, const Buffers& buffers) {
  struct AddArguments {
    float* a;
    float* b;
    float* out;
    unsigned n;
  } packed{buffers.a, buffers.b, buffers.out, kElements};
  size_t packed_size = offsetof(AddArguments, n) + sizeof(packed.n);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &packed_size, CU_LAUNCH_PARAM_END};
  CUlaunchConfig config{};
  config.gridDimX = 4096;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 256;
  config.blockDimY = config.blockDimZ = 1;
  for (int i = 0; i < 10; ++i) CHECK(cuLaunchKernelEx(&config, add, nullptr, extra));
}

// fill, 1 launch: cooperative; 256 blocks of 256 threads fit on any device able to run this.
void FillCooperative(CUfunction fill, float* buffer) {
  unsigned n = kElements;
  float four = 4.0f;
  void* fill_args[] = {&buffer, &n, &four};
  CHECK(cuLaunchCooperativeKernel(fill, 256, 1, 1, 256, 1, 1, 0, nullptr, fill_args));
}

// add: a one-node graph, launched 5 times. The graph is destroyed by the caller, at the end.
struct Graph {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
};
Graph AddThroughGraph(CUfunction add, Buffers buffers) {
  Graph graph;
  CHECK(cuGraphCreate(&graph.graph, 0));
  unsigned n = kElements;
  void* add_args[] = {&buffers.a, &buffers.b, &buffers.out, &n};
  CUDA_KERNEL_NODE_PARAMS node{};
  node.func = add;
  node.gridDimX = 4096;
  node.gridDimY = node.gridDimZ = 1;
  node.blockDimX = 256;
  node.blockDimY = node.blockDimZ = 1;
  node.kernelParams = add_args;
  CUgraphNode add_node = nullptr;
  CHECK(cuGraphAddKernelNode(&add_node, graph.graph, nullptr, 0, &node));
  CHECK(cuGraphInstantiate(&graph.exec, graph.graph, 0));
  for (int i = 0; i < 5; ++i) CHECK(cuGraphLaunch(graph.exec, nullptr));
  return graph;
}

// out = (4 + 2) * 0.5^7 where kernels run; the fake device runs none.
void CheckResult(const float* out) {
  char device_name[256] = "";
  CHECK(cuDeviceGetName(device_name, sizeof(device_name), 0));
  if (strcmp(device_name, "gpumem fake device") == 0) return;
  std::vector<float> result(kElements);
  CHECK(cudaMemcpy(result.data(), out, kBufferBytes, cudaMemcpyDeviceToHost));
  for (float value : result) {
    if (value != 6.0f / 128) Fail("wrong result: the kernels did not run as launched");
  }
  printf("launch_kernels: results checked on %s\n", device_name);
}

}  // namespace

int main() {
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));  // creates the primary context and makes it current for the driver
  Buffers buffers;
  CHECK(cudaMalloc(reinterpret_cast<void**>(&buffers.a), kBufferBytes));
  CHECK(cudaMalloc(reinterpret_cast<void**>(&buffers.b), kBufferBytes));
  CHECK(cudaMalloc(reinterpret_cast<void**>(&buffers.out), kBufferBytes));

  CUmodule module = nullptr;
  CUfunction fill = nullptr;
  CUfunction add = nullptr;
  CHECK(cuModuleLoadData(&module, kFillAddPtx));
  CHECK(cuModuleGetFunction(&fill, module, "fill"));
  CHECK(cuModuleGetFunction(&add, module, "add"));

  FillThroughEntryPoint(fill, buffers);
  AddByPointer(add, buffers);
  AddPackedEx(add, buffers);
  FillCooperative(fill, buffers.a);
  const Graph graph = AddThroughGraph(add, buffers);
  // scale: 7 launches of the runtime-registered kernel; 1024 x 256 threads, one per element.
  for (int i = 0; i < 7; ++i) scale(dim3(kElements / 256), dim3(256), buffers.out, 0.5f);
  CHECK(cudaDeviceSynchronize());
  CheckResult(buffers.out);

  CHECK(cuGraphExecDestroy(graph.exec));
  CHECK(cuGraphDestroy(graph.graph));
  CHECK(cuModuleUnload(module));
  CHECK(cudaFree(buffers.a));
  CHECK(cudaFree(buffers.b));
  CHECK(cudaFree(buffers.out));
  printf("launch_kernels: 126 launches\n");
  return 0;
}
