// Prints which driver calls a stream capture forbids: for each capture mode, from the capturing
// thread and from another, each call made while a capture (holding one captured cuMemAllocAsync)
// is in progress, with what it returned, the capture's status after it and what ending the capture
// returned. The calls are those gpumem makes of its own while recording, plus references.
// Run against the real driver it prints the facts capture_rules.expected holds; against the fake
// (tests/fake_cuda) it must print the same: that is how CI knows the fake is as strict as the GPU.
#include <cuda.h>

#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

namespace {

CUdevice g_device;
CUcontext g_context;
CUstream g_stream;
CUmemoryPool g_pool;

struct Call {
  const char* name;
  std::function<CUresult()> run;
};

CUresult PoolAttribute(CUmemPool_attribute attribute) {
  cuuint64_t value = 0;
  return cuMemPoolGetAttribute(g_pool, attribute, &value);
}

// gpumem's way to ask what capture forbids: in relaxed mode, then back.
CUresult PoolAttributeInRelaxedMode() {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (CUresult r = cuThreadExchangeStreamCaptureMode(&mode)) return r;
  const CUresult result = PoolAttribute(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
  cuThreadExchangeStreamCaptureMode(&mode);
  return result;
}

std::vector<Call> Calls() {
  return {
      {"nothing", [] { return CUDA_SUCCESS; }},
      {"cuCtxGetDevice",
       [] {
         CUdevice d;
         return cuCtxGetDevice(&d);
       }},
      {"cuDeviceGet",
       [] {
         CUdevice d;
         return cuDeviceGet(&d, 0);
       }},
      {"cuDeviceGetName",
       [] {
         char n[64];
         return cuDeviceGetName(n, sizeof(n), g_device);
       }},
      {"cuDeviceTotalMem",
       [] {
         size_t t;
         return cuDeviceTotalMem(&t, g_device);
       }},
      {"cuMemGetInfo",
       [] {
         size_t f, t;
         return cuMemGetInfo(&f, &t);
       }},
      {"cuDeviceGetMemPool",
       [] {
         CUmemoryPool p;
         return cuDeviceGetMemPool(&p, g_device);
       }},
      {"cuStreamIsCapturing",
       [] {
         CUstreamCaptureStatus s;
         return cuStreamIsCapturing(g_stream, &s);
       }},
      {"cuMemPoolGetAttribute(reserved)",
       [] { return PoolAttribute(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT); }},
      {"cuMemPoolGetAttribute(used)",
       [] { return PoolAttribute(CU_MEMPOOL_ATTR_USED_MEM_CURRENT); }},
      {"relaxed:cuMemPoolGetAttribute", PoolAttributeInRelaxedMode},
      {"cuMemAlloc",
       [] {
         CUdeviceptr p = 0;
         const CUresult r = cuMemAlloc(&p, 4096);
         if (r == CUDA_SUCCESS) {  // freed once no capture is in progress
           static std::vector<CUdeviceptr> later;
           later.push_back(p);
         }
         return r;
       }},
      {"cuCtxSynchronize", [] { return cuCtxSynchronize(); }},
  };
}

const char* StatusName(CUstreamCaptureStatus status) {
  switch (status) {
    case CU_STREAM_CAPTURE_STATUS_NONE:
      return "none";
    case CU_STREAM_CAPTURE_STATUS_ACTIVE:
      return "active";
    case CU_STREAM_CAPTURE_STATUS_INVALIDATED:
      return "invalidated";
  }
  return "?";
}

void Probe(const char* mode_name, CUstreamCaptureMode mode, bool other_thread, const Call& call) {
  const CUresult begin = cuStreamBeginCapture(g_stream, mode);
  CUdeviceptr captured = 0;
  const CUresult alloc = cuMemAllocAsync(&captured, 1 << 20, g_stream);
  CUresult result = CUDA_ERROR_UNKNOWN;
  if (other_thread) {
    std::thread thread([&] {
      cuCtxSetCurrent(g_context);
      result = call.run();
    });
    thread.join();
  } else {
    result = call.run();
  }
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuStreamIsCapturing(g_stream, &status);
  if (alloc == CUDA_SUCCESS) cuMemFreeAsync(captured, g_stream);
  CUgraph graph = nullptr;
  const CUresult end = cuStreamEndCapture(g_stream, &graph);
  if (graph != nullptr) cuGraphDestroy(graph);
  std::printf("%s %s %s: begin=%d call=%d capture=%s end=%d\n", mode_name,
              other_thread ? "other-thread" : "same-thread", call.name, begin, result,
              StatusName(status), end);
}

}  // namespace

int main() {
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&g_device, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&g_context, g_device) != CUDA_SUCCESS ||
      cuCtxSetCurrent(g_context) != CUDA_SUCCESS ||
      cuStreamCreate(&g_stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
      cuDeviceGetMemPool(&g_pool, g_device) != CUDA_SUCCESS) {
    std::fprintf(stderr, "capture_rules: no CUDA device\n");
    return 1;
  }
  const struct {
    const char* name;
    CUstreamCaptureMode mode;
  } modes[] = {{"global", CU_STREAM_CAPTURE_MODE_GLOBAL},
               {"thread_local", CU_STREAM_CAPTURE_MODE_THREAD_LOCAL},
               {"relaxed", CU_STREAM_CAPTURE_MODE_RELAXED}};
  for (const auto& mode : modes) {
    for (bool other_thread : {false, true}) {
      for (const Call& call : Calls()) Probe(mode.name, mode.mode, other_thread, call);
    }
  }
  return 0;
}
