// Where libcupti is looked for (it is dlopen'd, never linked): GPUMEM_CUPTI_LIB alone when set;
// else a libcupti already in the process (another tool's: two copies must not coexist); else next
// to the libcudart loaded (and a PyTorch wheel's nvidia/cu13/lib or nvidia/cuda_cupti/lib beside
// it, the toolkit's extras/CUPTI/lib64); next to libcuda; /usr/local/cuda/lib64 and
// /usr/local/cuda/extras/CUPTI/lib64; last the loader's own search path. In each directory:
// libcupti.so, libcupti.so.13, libcupti.so.12. Fixed-size storage only, no allocation.
#pragma once

#include <cstddef>

namespace gpumem::cupti {

inline constexpr size_t kMaxLibraryPath = 1024;

// Paths of CUDA libraries already loaded in the process ("" when none).
struct LoadedCudaLibraries {
  char cupti[kMaxLibraryPath] = {};
  char runtime[kMaxLibraryPath] = {};  // libcudart.so*
  char driver[kMaxLibraryPath] = {};   // libcuda.so*
};

// Fills `loaded` from the objects mapped in the process (dl_iterate_phdr).
void FindLoadedCudaLibraries(LoadedCudaLibraries* loaded);

class CandidatePaths {
 public:
  static constexpr size_t kMaxCandidates = 40;

  // Adds `directory`/`name` ("" directory: `name` alone, for the loader's search path). Paths too
  // long, duplicates and a full list are skipped.
  void Add(const char* directory, const char* name);
  // Adds libcupti.so, libcupti.so.13 and libcupti.so.12 in `directory`.
  void AddDirectory(const char* directory);
  // Adds a full path.
  void AddPath(const char* path);
  void Clear() { count_ = 0; }

  size_t size() const { return count_; }
  const char* operator[](size_t index) const { return paths_[index]; }

 private:
  char paths_[kMaxCandidates][kMaxLibraryPath];
  size_t count_ = 0;
};

// The search order above. `explicit_path` (GPUMEM_CUPTI_LIB) may be null or "".
void BuildCandidates(const char* explicit_path, const LoadedCudaLibraries& loaded,
                     CandidatePaths* candidates);

// Tries each candidate in order with `real_dlopen` (RTLD_NOW | RTLD_LOCAL). Returns the handle and
// its index, or null with a summary of what was tried (and why each existing file did not load)
// in `searched`.
void* OpenFirst(const CandidatePaths& candidates, void* (*real_dlopen)(const char*, int),
                size_t* index, char* searched, size_t searched_size);

}  // namespace gpumem::cupti
