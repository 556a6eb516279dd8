// The real dynamic-loader functions, past gpumem's own dlsym (interpose/loader.cc), which shadows
// dlsym for the whole process: what the recorder and the CUPTI subscriber use to find libraries'
// symbols.
#pragma once

namespace gpumem {

// glibc's own dlsym and dlopen (ours shadow dlsym for the whole process).
void* RealDlsym(void* handle, const char* name);
void* RealDlopen(const char* file, int flags);
// dlsym(RTLD_NEXT, name) as seen from libgpumem: the definition our exported hook shadows.
void* NextSymbol(const char* name);

}  // namespace gpumem
