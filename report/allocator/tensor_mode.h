// `gpumem record --tensors`: the environment that makes each framework's allocator ask the driver
// for every tensor (so the trace sees tensors, not the caching allocator's segments), and how the
// trace header records what was changed. The rules, per framework:
//
// - PyTorch: `backend:cudaMallocAsync` in PYTORCH_CUDA_ALLOC_CONF (and in PYTORCH_ALLOC_CONF, the
//   newer name, where the user set that). The user's other settings stay, except those of the
//   native allocator alone (max_split_size_mb, roundup_power2_divisions,
//   garbage_collection_threshold, expandable_segments, release_lock_on_cudamalloc), which the
//   async backend ignores with a warning; they stay in the header for the allocator models.
// - JAX: XLA_PYTHON_CLIENT_ALLOCATOR=platform.
// - TensorFlow: TF_GPU_ALLOCATOR=cuda_malloc_async.
#ifndef GPUMEM_REPORT_ALLOCATOR_TENSOR_MODE_H_
#define GPUMEM_REPORT_ALLOCATOR_TENSOR_MODE_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::report {

struct EnvironmentChange {
  std::string name;
  std::optional<std::string> before;  // nullopt: was unset
  std::string after;
};

// The variables to set for tensor-level recording, given the current environment.
std::vector<EnvironmentChange> TensorLevelEnvironment(
    const std::function<std::optional<std::string>(const std::string&)>& get_env);

// The value of GPUMEM_TENSORS, which the recorder copies into the trace header: what each changed
// variable was before, e.g. "PYTORCH_CUDA_ALLOC_CONF was 'max_split_size_mb:128'; TF_GPU_ALLOCATOR
// was unset".
std::string DescribeChanges(const std::vector<EnvironmentChange>& changes);

// The value a variable had before `gpumem record --tensors` changed it, from GPUMEM_TENSORS'
// text: nullopt when it was unset or not mentioned.
std::optional<std::string> ValueBeforeTensors(const std::string& description,
                                              const std::string& name);

// The user's own PyTorch allocator settings in a trace's header, whose options `option` looks up by
// name: what PYTORCH_ALLOC_CONF (read first by newer PyTorch), else PYTORCH_CUDA_ALLOC_CONF, was
// before `gpumem record --tensors` changed it (GPUMEM_TENSORS); in a trace recorded without it,
// PYTORCH_CUDA_ALLOC_CONF as recorded. nullopt: none set.
struct UserAllocConf {
  std::string variable;  // PYTORCH_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF
  std::string value;
  bool before_tensors = false;  // from GPUMEM_TENSORS: what `record --tensors` replaced
};
std::optional<UserAllocConf> UserAllocConfOf(
    const std::function<std::optional<std::string>(const std::string&)>& option);

// PYTORCH_CUDA_ALLOC_CONF's "key:value,key:value" as a map (keys as written; values may hold
// brackets, e.g. roundup_power2_divisions:[256:1,512:2]).
std::map<std::string, std::string> ParseAllocConf(const std::string& conf);

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ALLOCATOR_TENSOR_MODE_H_
