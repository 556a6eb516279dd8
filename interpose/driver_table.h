// The driver entry points gpumem wraps, and how a real entry point is swapped for its wrapper.
// libcudart (shared or static) never calls driver symbols: it fetches every entry point through
// cuGetProcAddress, which it gets through dlsym (DESIGN, "How the chain works"). So wrappers are
// handed out at those two places; programs linked against libcuda reach the exported symbols.
#pragma once

#include <cstdint>

namespace gpumem {

// For dlsym(handle, name): the wrapper to return instead of `real`, or `real` itself.
void* WrapDriverSymbol(const char* name, void* real);

// For cuGetProcAddress(symbol, ..., cuda_version, flags) that returned `real`.
void* WrapProcAddressResult(const char* symbol, void* real, int cuda_version, uint64_t flags);

// Memory and launch entry points (driver_hooks.cc). `per_thread_stream`: the _ptsz variant was
// asked for.
void* WrapDriverFunction(const char* name_or_symbol, void* real, int cuda_version,
                         bool per_thread_stream, bool by_symbol);

}  // namespace gpumem
