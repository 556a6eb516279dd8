// The real dynamic-loader functions, past gpumem's own dlsym (interpose/loader.cc), which shadows
// dlsym for the whole process: what the recorder and the CUPTI subscriber use to find libraries'
// symbols.
#pragma once

#include <cstdint>

namespace gpumem {

// glibc's own dlsym and dlopen (ours shadow dlsym for the whole process).
void* RealDlsym(void* handle, const char* name);
void* RealDlopen(const char* file, int flags);
// The definition our exported hook `name` shadows: dlsym(RTLD_NEXT, name) as seen from libgpumem,
// else, when the library that defines it was loaded RTLD_LOCAL (ctypes' default, a plugin's
// dependencies) and so is not in the global scope, the definition visible from the caller's own
// object (`caller`: a return address in it; 0: none), else the first loaded object that defines
// it. Never one of gpumem's own. Slow (the loader's locks): for a hook's first call.
void* NextSymbol(const char* name, uintptr_t caller = 0);

}  // namespace gpumem
