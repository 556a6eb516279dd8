// Which driver calls invalidate a stream capture, per capture mode and thread.
#include <cuda.h>
#include <stdio.h>
#include <string.h>
#include <thread>
#include <functional>
#include <vector>
#include <string>
CUstream s; CUdevice dev; CUcontext ctx; CUmemoryPool pool; CUdeviceptr keep;
struct Probe { const char* name; std::function<CUresult()> f; };
int main() {
  cuInit(0); cuDeviceGet(&dev, 0); cuDevicePrimaryCtxRetain(&ctx, dev); cuCtxSetCurrent(ctx);
  cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  cuDeviceGetMemPool(&pool, dev);
  cuMemAlloc(&keep, 1<<20);
  std::vector<Probe> probes = {
    {"nothing", []{ return CUDA_SUCCESS; }},
    {"cuCtxGetDevice", []{ CUdevice d; return cuCtxGetDevice(&d); }},
    {"cuDeviceGetName", []{ char n[64]; return cuDeviceGetName(n, 64, dev); }},
    {"cuDeviceTotalMem", []{ size_t t; return cuDeviceTotalMem(&t, dev); }},
    {"cuMemGetInfo", []{ size_t f,t; return cuMemGetInfo(&f,&t); }},
    {"cuDeviceGetMemPool", []{ CUmemoryPool p; return cuDeviceGetMemPool(&p, dev); }},
    {"cuMemPoolGetAttribute(reserved)", []{ cuuint64_t v; return cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v); }},
    {"cuMemPoolGetAttribute(used)", []{ cuuint64_t v; return cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v); }},
    {"cuDeviceGetGraphMemAttribute", []{ cuuint64_t v; return cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v); }},
    {"cuStreamIsCapturing", []{ CUstreamCaptureStatus st; return cuStreamIsCapturing(s, &st); }},
    {"cuStreamGetCaptureInfo", []{ CUstreamCaptureStatus st; cuuint64_t id; return cuStreamGetCaptureInfo(s, &st, &id, nullptr, nullptr, nullptr, nullptr); }},
    {"cuPointerGetAttribute", []{ int v; return cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, keep); }},
    {"cuMemGetAddressRange", []{ CUdeviceptr b; size_t z; return cuMemGetAddressRange(&b, &z, keep); }},
    {"cuMemAlloc+cuMemFree", []{ CUdeviceptr p; CUresult r = cuMemAlloc(&p, 4096); if (r) return r; return cuMemFree(p); }},
    {"cuMemFree(old)", []{ CUdeviceptr p; cuMemAlloc(&p, 4096); return CUDA_SUCCESS; }},
    {"cuCtxSynchronize", []{ return cuCtxSynchronize(); }},
  };
  const char* modes[] = {"global", "thread_local", "relaxed"};
  for (int mode = 0; mode < 3; ++mode) {
    for (int other_thread = 0; other_thread < 2; ++other_thread) {
      for (auto& p : probes) {
        CUresult rb = cuStreamBeginCapture(s, (CUstreamCaptureMode)mode);
        CUdeviceptr a = 0;
        CUresult ra = cuMemAllocAsync(&a, 1 << 20, s);
        CUresult rp;
        if (other_thread) { std::thread t([&]{ cuCtxSetCurrent(ctx); rp = p.f(); }); t.join(); }
        else rp = p.f();
        CUstreamCaptureStatus st; cuStreamIsCapturing(s, &st);
        cuMemFreeAsync(a, s);
        CUgraph g = nullptr;
        CUresult re = cuStreamEndCapture(s, &g);
        printf("%-13s %-6s %-34s begin=%d alloc=%d(0x%llx) probe=%d status_after=%d end=%d\n", modes[mode],
               other_thread ? "other" : "same", p.name, rb, ra, (unsigned long long)a, rp, st, re);
        if (g) cuGraphDestroy(g);
      }
    }
  }
  // Captured alloc: is the address usable after launch; graph memory accounting.
  CUgraph g; CUgraphExec e; CUdeviceptr a;
  cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
  cuMemAllocAsync(&a, 64 << 20, s);
  cuMemsetD8Async(a, 1, 64 << 20, s);
  cuMemFreeAsync(a, s);
  cuStreamEndCapture(s, &g);
  cuGraphInstantiate(&e, g, 0);
  cuuint64_t used, reserved, pres;
  for (int i = 0; i < 3; ++i) {
    cuGraphLaunch(e, s); cuStreamSynchronize(s);
    cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used);
    cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved);
    cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &pres);
    printf("launch %d: captured addr 0x%llx graph used %llu reserved %llu pool reserved %llu\n", i, (unsigned long long)a, used, reserved, pres);
  }
  return 0;
}
