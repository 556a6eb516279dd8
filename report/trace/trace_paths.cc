#include "report/trace/trace_paths.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpumem::report {

absl::StatusOr<std::vector<std::string>> ExpandTracePaths(const std::vector<std::string>& args) {
  std::vector<std::string> paths;
  for (const std::string& arg : args) {
    std::error_code error;
    if (!std::filesystem::is_directory(arg, error)) {
      paths.push_back(arg);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(arg, error)) {
      const std::string name = entry.path().filename().string();
      if (absl::EndsWith(name, ".trace") && !entry.is_directory()) {
        found.push_back(entry.path().string());
      }
    }
    if (error) return absl::InvalidArgumentError(absl::StrCat(arg, ": ", error.message()));
    if (found.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(arg, ": directory holds no *.trace file"));
    }
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  return paths;
}

}  // namespace gpumem::report
