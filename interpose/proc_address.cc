// cuGetProcAddress: the door through which libcudart (shared or static) fetches every driver
// entry point. The wrapper hands out memory wrappers, and when asked for cuGetProcAddress itself
// returns itself — miss that step and nothing is seen (DESIGN).
#include <cuda.h>
#include <string.h>

#include <atomic>

#include "core/real_loader.h"
#include "core/recorder.h"
#include "interpose/driver_table.h"
#include "interpose/hook_guard.h"

namespace gpumem {
namespace {

// cuda.h maps cuGetProcAddress to the 5-argument _v2; the 4-argument original still exists.
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);
using GetProcAddressV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);

std::atomic<void*> g_real_v1{nullptr};
std::atomic<void*> g_real_v2{nullptr};

constexpr int kFirstVersionWithV2 = 12000;

CUresult ChainV1(const char* symbol, void** function, int cuda_version, cuuint64_t flags);
CUresult ChainV2(const char* symbol, void** function, int cuda_version, cuuint64_t flags,
                 CUdriverProcAddressQueryResult* status);

bool Install(std::atomic<void*>& slot, void* real) {
  void* expected = nullptr;
  if (slot.compare_exchange_strong(expected, real) || expected == real) return true;
  recorder::CountHookConflict();
  return false;
}

// A cuGetProcAddress pointer (from dlsym or from asking cuGetProcAddress for itself) → wrapper.
bool IsOwnResolver(void* function);

void* WrapResolver(void* real, bool is_v2) {
  if (IsOwnResolver(real)) return real;
  if (is_v2) return Install(g_real_v2, real) ? reinterpret_cast<void*>(&ChainV2) : real;
  return Install(g_real_v1, real) ? reinterpret_cast<void*>(&ChainV1) : real;
}

void* WrapResult(const char* symbol, void* real, int cuda_version, uint64_t flags) {
  if (real == nullptr || symbol == nullptr) return real;
  if (strcmp(symbol, "cuGetProcAddress") == 0) {
    // Which ABI came back? Compare with the two we know, else go by the version asked for.
    bool is_v2 = real == g_real_v2.load() ||
                 (real != g_real_v1.load() && cuda_version >= kFirstVersionWithV2);
    return WrapResolver(real, is_v2);
  }
  bool per_thread_stream = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  return WrapDriverFunction(symbol, real, cuda_version, per_thread_stream, /*by_symbol=*/false);
}

CUresult ChainV1(const char* symbol, void** function, int cuda_version, cuuint64_t flags) {
  auto real = reinterpret_cast<GetProcAddressV1>(g_real_v1.load(std::memory_order_acquire));
  CUresult result = real(symbol, function, cuda_version, flags);
  if (result == CUDA_SUCCESS && function != nullptr) {
    ErrnoKeeper keep;
    *function = WrapResult(symbol, *function, cuda_version, flags);
  }
  return result;
}

CUresult ChainV2(const char* symbol, void** function, int cuda_version, cuuint64_t flags,
                 CUdriverProcAddressQueryResult* status) {
  auto real = reinterpret_cast<GetProcAddressV2>(g_real_v2.load(std::memory_order_acquire));
  CUresult result = real(symbol, function, cuda_version, flags, status);
  if (result == CUDA_SUCCESS && function != nullptr) {
    ErrnoKeeper keep;
    *function = WrapResult(symbol, *function, cuda_version, flags);
  }
  return result;
}

}  // namespace
}  // namespace gpumem

extern "C" CUresult gpumem_cuGetProcAddress_v1(const char*, void**, int,
                                               cuuint64_t) __asm__("cuGetProcAddress");

namespace gpumem {
namespace {

bool IsOwnResolver(void* function) {
  return function == reinterpret_cast<void*>(&ChainV1) ||
         function == reinterpret_cast<void*>(&ChainV2) ||
         function == reinterpret_cast<void*>(&gpumem_cuGetProcAddress_v1) ||
         function == reinterpret_cast<void*>(&::cuGetProcAddress_v2);
}

}  // namespace

void* WrapProcAddressResult(const char* symbol, void* real, int cuda_version, uint64_t flags) {
  return WrapResult(symbol, real, cuda_version, flags);
}

void* WrapDriverSymbol(const char* name, void* real) {
  if (strncmp(name, "cuGetProcAddress", 16) == 0) {
    if (name[16] == '\0') return WrapResolver(real, /*is_v2=*/false);
    if (strcmp(name + 16, "_v2") == 0) return WrapResolver(real, /*is_v2=*/true);
    return real;
  }
  return WrapDriverFunction(name, real, 0, false, /*by_symbol=*/true);
}

}  // namespace gpumem

// Exported for programs that link libcuda and call cuGetProcAddress themselves. cuda.h renames
// cuGetProcAddress to _v2, so the 4-argument original is defined under its real name by label.
extern "C" __attribute__((visibility("default"))) CUresult gpumem_cuGetProcAddress_v1(
    const char* symbol, void** function, int cuda_version, cuuint64_t flags) {
  auto real = reinterpret_cast<gpumem::GetProcAddressV1>(gpumem::NextSymbol(
      "cuGetProcAddress", reinterpret_cast<uintptr_t>(__builtin_return_address(0))));
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(symbol, function, cuda_version, flags);
  if (result == CUDA_SUCCESS && function != nullptr) {
    gpumem::ErrnoKeeper keep;
    *function = gpumem::WrapProcAddressResult(symbol, *function, cuda_version, flags);
  }
  return result;
}

extern "C" __attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** function, int cuda_version, cuuint64_t flags,
    CUdriverProcAddressQueryResult* status) {
  auto real = reinterpret_cast<gpumem::GetProcAddressV2>(gpumem::NextSymbol(
      "cuGetProcAddress_v2", reinterpret_cast<uintptr_t>(__builtin_return_address(0))));
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult result = real(symbol, function, cuda_version, flags, status);
  if (result == CUDA_SUCCESS && function != nullptr) {
    gpumem::ErrnoKeeper keep;
    *function = gpumem::WrapProcAddressResult(symbol, *function, cuda_version, flags);
  }
  return result;
}
