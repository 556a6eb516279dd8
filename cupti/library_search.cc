#include "cupti/library_search.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include <initializer_list>

#include "cupti/fixed_text.h"

namespace gpumem::cupti {
namespace {

constexpr const char* kNames[] = {"libcupti.so", "libcupti.so.13", "libcupti.so.12"};

const char* BaseName(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

bool StartsWith(const char* text, const char* prefix) {
  return strncmp(text, prefix, strlen(prefix)) == 0;
}

void Copy(const char* text, char* out, size_t capacity) {
  size_t n = strnlen(text, capacity - 1);
  memcpy(out, text, n);
  out[n] = '\0';
}

// The directory part of `path` ("" when it has none).
void DirectoryOf(const char* path, char* out, size_t capacity) {
  const char* slash = strrchr(path, '/');
  size_t n = slash != nullptr ? static_cast<size_t>(slash - path) : 0;
  if (n >= capacity) n = 0;
  memcpy(out, path, n);
  out[n] = '\0';
}

int CollectLoaded(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* loaded = static_cast<LoadedCudaLibraries*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  const char* base = BaseName(info->dlpi_name);
  char* slot = nullptr;
  if (StartsWith(base, "libcupti.so")) {
    slot = loaded->cupti;
  } else if (StartsWith(base, "libcudart.so")) {
    slot = loaded->runtime;
  } else if (StartsWith(base, "libcuda.so")) {
    slot = loaded->driver;
  }
  if (slot != nullptr && slot[0] == '\0') Copy(info->dlpi_name, slot, kMaxLibraryPath);
  return 0;
}

}  // namespace

void FindLoadedCudaLibraries(LoadedCudaLibraries* loaded) {
  dl_iterate_phdr(&CollectLoaded, loaded);
}

void CandidatePaths::Add(const char* directory, const char* name) {
  char path[kMaxLibraryPath];
  size_t directory_length = strlen(directory);
  size_t name_length = strlen(name);
  if (directory_length + 1 + name_length + 1 > sizeof(path)) return;
  size_t at = 0;
  if (directory_length > 0) {
    memcpy(path, directory, directory_length);
    path[directory_length] = '/';
    at = directory_length + 1;
  }
  memcpy(path + at, name, name_length + 1);
  AddPath(path);
}

void CandidatePaths::AddDirectory(const char* directory) {
  if (directory == nullptr || directory[0] == '\0') return;
  for (const char* name : kNames) Add(directory, name);
}

void CandidatePaths::AddPath(const char* path) {
  if (path == nullptr || path[0] == '\0' || count_ == kMaxCandidates) return;
  if (strlen(path) >= kMaxLibraryPath) return;
  for (size_t i = 0; i < count_; ++i) {
    if (strcmp(paths_[i], path) == 0) return;
  }
  Copy(path, paths_[count_++], kMaxLibraryPath);
}

void BuildCandidates(const char* explicit_path, const LoadedCudaLibraries& loaded,
                     CandidatePaths* candidates) {
  if (explicit_path != nullptr && explicit_path[0] != '\0') {
    candidates->AddPath(explicit_path);  // what the user asked for, and nothing else
    return;
  }
  candidates->AddPath(loaded.cupti);
  char directory[kMaxLibraryPath];
  char sibling[kMaxLibraryPath];
  if (loaded.runtime[0] != '\0') {
    DirectoryOf(loaded.runtime, directory, sizeof(directory));
    candidates->AddDirectory(directory);
    // A PyTorch wheel: <site-packages>/nvidia/<component>/lib/libcudart.so.*, with CUPTI in
    // nvidia/cu13/lib (CUDA 13: one directory for all) or nvidia/cuda_cupti/lib (CUDA 12).
    char component[kMaxLibraryPath];
    DirectoryOf(directory, component, sizeof(component));  // <site-packages>/nvidia/<component>
    char nvidia[kMaxLibraryPath];
    DirectoryOf(component, nvidia, sizeof(nvidia));  // <site-packages>/nvidia
    if (strcmp(BaseName(directory), "lib") == 0 && strcmp(BaseName(nvidia), "nvidia") == 0) {
      for (const char* wheel : {"cu13/lib", "cuda_cupti/lib"}) {
        if (strlen(nvidia) + 1 + strlen(wheel) + 1 > sizeof(sibling)) continue;
        strcpy(sibling, nvidia);
        strcat(sibling, "/");
        strcat(sibling, wheel);
        candidates->AddDirectory(sibling);
      }
    }
    // A toolkit: <cuda>/lib64/libcudart.so.* with CUPTI in <cuda>/extras/CUPTI/lib64.
    static constexpr char kExtras[] = "/../extras/CUPTI/lib64";
    if (strlen(directory) + sizeof(kExtras) <= sizeof(sibling)) {
      strcpy(sibling, directory);
      strcat(sibling, kExtras);
      candidates->AddDirectory(sibling);
    }
  }
  if (loaded.driver[0] != '\0') {
    DirectoryOf(loaded.driver, directory, sizeof(directory));
    candidates->AddDirectory(directory);
  }
  candidates->AddDirectory("/usr/local/cuda/lib64");
  candidates->AddDirectory("/usr/local/cuda/extras/CUPTI/lib64");
  for (const char* name : kNames) candidates->Add("", name);  // LD_LIBRARY_PATH, ld.so.cache
}

void* OpenFirst(const CandidatePaths& candidates, void* (*real_dlopen)(const char*, int),
                size_t* index, char* searched, size_t searched_size) {
  FixedText errors(searched, searched_size);
  char tried[kMaxLibraryPath * 2];
  FixedText places(tried, sizeof(tried));
  char previous[kMaxLibraryPath] = "\x01";
  for (size_t i = 0; i < candidates.size(); ++i) {
    const char* path = candidates[i];
    bool has_directory = strchr(path, '/') != nullptr;
    char directory[kMaxLibraryPath];
    DirectoryOf(path, directory, sizeof(directory));
    if (strcmp(directory, previous) != 0) {
      places.Append(previous[0] == '\x01' ? "" : ", ");
      places.Append(has_directory ? directory : "the loader's search path");
      Copy(directory, previous, sizeof(previous));
    }
    // A missing file is the common case: no dlopen (and no dlerror text) for it.
    if (has_directory && access(path, F_OK) != 0) continue;
    if (void* handle = real_dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
      *index = i;
      return handle;
    }
    const char* error = dlerror();  // read even when unused: it clears the thread's error
    if (has_directory) {
      errors.Append(path);
      errors.Append(": ");
      errors.Append(error != nullptr ? error : "not loadable");
      errors.Append("; ");
    }
  }
  errors.Append("no libcupti in ");
  errors.Append(tried);
  errors.Append(" (set GPUMEM_CUPTI_LIB)");
  return nullptr;
}

}  // namespace gpumem::cupti
