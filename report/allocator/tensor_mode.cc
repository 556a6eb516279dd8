#include "report/allocator/tensor_mode.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace gpumem::report {
namespace {

// "key:value" items of an allocator config, in order, split at commas outside brackets.
std::vector<std::string> ConfItems(const std::string& conf) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  for (char c : conf) {
    if (c == '[') ++depth;
    if (c == ']' && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      if (!item.empty()) items.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  if (!item.empty()) items.push_back(item);
  return items;
}

std::string ConfKey(const std::string& item) {
  std::string key = item.substr(0, item.find(':'));
  key.erase(std::remove(key.begin(), key.end(), ' '), key.end());
  return key;
}

// Options of the native caching allocator alone: the async backend warns that it ignores them.
constexpr std::array<const char*, 5> kNativeOnlyKeys = {
    "max_split_size_mb", "roundup_power2_divisions", "garbage_collection_threshold",
    "expandable_segments", "release_lock_on_cudamalloc"};

std::string AsyncBackendConf(const std::optional<std::string>& before) {
  std::vector<std::string> kept = {"backend:cudaMallocAsync"};
  if (before) {
    for (const std::string& item : ConfItems(*before)) {
      const std::string key = ConfKey(item);
      if (key == "backend" ||
          std::find(kNativeOnlyKeys.begin(), kNativeOnlyKeys.end(), key) != kNativeOnlyKeys.end()) {
        continue;
      }
      kept.push_back(item);
    }
  }
  return absl::StrJoin(kept, ",");
}

}  // namespace

std::vector<EnvironmentChange> TensorLevelEnvironment(
    const std::function<std::optional<std::string>(const std::string&)>& get_env) {
  std::vector<EnvironmentChange> changes;
  const auto change = [&](const std::string& name, const std::string& after) {
    const std::optional<std::string> before = get_env(name);
    if (before != after) changes.push_back({name, before, after});
  };
  const std::optional<std::string> cuda_conf = get_env("PYTORCH_CUDA_ALLOC_CONF");
  const std::optional<std::string> conf = get_env("PYTORCH_ALLOC_CONF");
  // PYTORCH_ALLOC_CONF, where set, is the one newer PyTorch reads first.
  if (cuda_conf || !conf) change("PYTORCH_CUDA_ALLOC_CONF", AsyncBackendConf(cuda_conf));
  if (conf) change("PYTORCH_ALLOC_CONF", AsyncBackendConf(conf));
  change("XLA_PYTHON_CLIENT_ALLOCATOR", "platform");
  change("TF_GPU_ALLOCATOR", "cuda_malloc_async");
  return changes;
}

std::string DescribeChanges(const std::vector<EnvironmentChange>& changes) {
  std::vector<std::string> parts;
  for (const EnvironmentChange& change : changes) {
    parts.push_back(change.before ? absl::StrCat(change.name, " was '", *change.before, "'")
                                  : absl::StrCat(change.name, " was unset"));
  }
  return absl::StrJoin(parts, "; ");
}

std::optional<std::string> ValueBeforeTensors(const std::string& description,
                                              const std::string& name) {
  const std::string prefix = absl::StrCat(name, " was '");
  for (size_t at = 0; at < description.size();) {
    if (description.compare(at, prefix.size(), prefix) == 0) {
      // The value ends at the quote that ends the text or comes before "; ".
      const size_t start = at + prefix.size();
      size_t end = description.find("'; ", start);
      if (end == std::string::npos) end = description.rfind('\'');
      if (end == std::string::npos || end < start) return std::nullopt;
      return description.substr(start, end - start);
    }
    const size_t next = description.find("; ", at);
    if (next == std::string::npos) break;
    at = next + 2;
  }
  return std::nullopt;
}

std::optional<UserAllocConf> UserAllocConfOf(
    const std::function<std::optional<std::string>(const std::string&)>& option) {
  const std::optional<std::string> changes = option("GPUMEM_TENSORS");
  if (!changes) {
    const std::optional<std::string> recorded = option("PYTORCH_CUDA_ALLOC_CONF");
    if (!recorded) return std::nullopt;
    return UserAllocConf{"PYTORCH_CUDA_ALLOC_CONF", *recorded, false};
  }
  for (const char* variable : {"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"}) {
    if (std::optional<std::string> before = ValueBeforeTensors(*changes, variable)) {
      return UserAllocConf{variable, *before, true};
    }
  }
  return std::nullopt;
}

std::map<std::string, std::string> ParseAllocConf(const std::string& conf) {
  std::map<std::string, std::string> options;
  for (const std::string& item : ConfItems(conf)) {
    const size_t colon = item.find(':');
    std::string value = colon == std::string::npos ? "" : item.substr(colon + 1);
    value.erase(std::remove(value.begin(), value.end(), ' '), value.end());
    options[ConfKey(item)] = value;
  }
  return options;
}

}  // namespace gpumem::report
