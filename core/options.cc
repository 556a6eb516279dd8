#include "core/options.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <initializer_list>

namespace gpumem {
namespace {

bool ParseInt(const char* text, int min, int max, int* out) {
  char* end = nullptr;
  long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < min || value > max) return false;
  *out = static_cast<int>(value);
  return true;
}

bool ParseBool(const char* text, bool* out) {
  if (strcmp(text, "1") == 0 || strcmp(text, "true") == 0 || strcmp(text, "yes") == 0) {
    *out = true;
  } else if (strcmp(text, "0") == 0 || strcmp(text, "false") == 0 || strcmp(text, "no") == 0) {
    *out = false;
  } else {
    return false;
  }
  return true;
}

void CopyString(const char* text, char* out, size_t capacity) {
  size_t n = strnlen(text, capacity - 1);
  memcpy(out, text, n);
  out[n] = '\0';
}

// The first of `names` that is set to a number in [0, INT_MAX], or -1.
int FirstIntOf(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    int value = -1;
    if (const char* v = getenv(name); v != nullptr && ParseInt(v, 0, 0x7fffffff, &value)) {
      return value;
    }
  }
  return -1;
}

void LoadDistributedIdentity(RecorderOptions* options) {
  options->rank = FirstIntOf({"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"});
  options->local_rank = FirstIntOf({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"});
  options->world_size = FirstIntOf({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"});
}

}  // namespace

void Warn(const char* part1, const char* part2, const char* part3) {
  char line[1024] = "gpumem: warning: ";
  strncat(line, part1, sizeof(line) - strlen(line) - 2);
  if (part2 != nullptr) strncat(line, part2, sizeof(line) - strlen(line) - 2);
  if (part3 != nullptr) strncat(line, part3, sizeof(line) - strlen(line) - 2);
  strcat(line, "\n");
  ssize_t ignored = write(STDERR_FILENO, line, strlen(line));
  (void)ignored;
}

void LoadRecorderOptions(RecorderOptions* options) {
  *options = RecorderOptions{};
  if (const char* v = getenv("GPUMEM_ENABLE"); v != nullptr && !ParseBool(v, &options->enabled)) {
    Warn("GPUMEM_ENABLE must be 0 or 1, got '", v, "'; recording stays on");
  }
  if (const char* v = getenv("GPUMEM_OUTPUT"); v != nullptr) {
    CopyString(v, options->output, sizeof(options->output));
  }
  if (const char* v = getenv("GPUMEM_STACK_DEPTH");
      v != nullptr && !ParseInt(v, 0, kMaxStackDepth, &options->stack_depth)) {
    Warn("GPUMEM_STACK_DEPTH must be 0..256, got '", v, "'; using 64");
  }
  if (const char* v = getenv("GPUMEM_FREE_STACKS");
      v != nullptr && !ParseBool(v, &options->free_stacks)) {
    Warn("GPUMEM_FREE_STACKS must be 0 or 1, got '", v, "'; using 0");
  }
  if (const char* v = getenv("GPUMEM_LIBUNWIND"); v != nullptr) {
    CopyString(v, options->libunwind_path, sizeof(options->libunwind_path));
  }
  if (const char* v = getenv("GPUMEM_LAUNCH_STACK_DEPTH");
      v != nullptr && !ParseInt(v, 0, kMaxStackDepth, &options->launch_stack_depth)) {
    Warn("GPUMEM_LAUNCH_STACK_DEPTH must be 0..256, got '", v, "'; using 24");
  }
  struct Switch {
    const char* name;
    bool* value;
    const char* fallback;
  };
  for (const Switch& option :
       {Switch{"GPUMEM_LAUNCHES", &options->launches, "1"},
        Switch{"GPUMEM_LAUNCH_STACKS", &options->launch_stacks, "1"},
        Switch{"GPUMEM_FAST_UNWIND", &options->fast_unwind, "1"},
        Switch{"GPUMEM_CUPTI", &options->cupti, "1"},
        Switch{"GPUMEM_KERNEL_TIMES", &options->kernel_times, "0"},
        Switch{"GPUMEM_CUPTI_LAUNCHES", &options->cupti_launches, "0"},
        Switch{"GPUMEM_CUPTI_POOLS", &options->cupti_pools, "0"},
        Switch{"GPUMEM_CUPTI_CATCH_ALL", &options->cupti_catch_all, "0"},
        Switch{"GPUMEM_PYTHON_FRAMES", &options->python_frames, "1"},
        Switch{"GPUMEM_INTERPRETER_FRAMES", &options->interpreter_frames, "0"},
        Switch{"GPUMEM_SELF_TIMING", &options->self_timing, "0"}}) {
    if (const char* v = getenv(option.name); v != nullptr && !ParseBool(v, option.value)) {
      Warn(option.name, " must be 0 or 1; using ", option.fallback);
    }
  }
  if (const char* v = getenv("GPUMEM_CUPTI_LIB"); v != nullptr) {
    CopyString(v, options->cupti_path, sizeof(options->cupti_path));
  }
  struct Text {
    const char* name;
    char* value;
    size_t capacity;
  };
  for (const Text& text :
       {Text{"GPUMEM_TENSORS", options->tensors, sizeof(options->tensors)},
        Text{"PYTORCH_CUDA_ALLOC_CONF", options->pytorch_alloc_conf,
             sizeof(options->pytorch_alloc_conf)},
        Text{"XLA_PYTHON_CLIENT_ALLOCATOR", options->xla_allocator, sizeof(options->xla_allocator)},
        Text{"TF_GPU_ALLOCATOR", options->tf_allocator, sizeof(options->tf_allocator)}}) {
    if (const char* v = getenv(text.name); v != nullptr) CopyString(v, text.value, text.capacity);
  }
  LoadDistributedIdentity(options);
}

}  // namespace gpumem
