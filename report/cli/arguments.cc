#include "report/cli/arguments.h"

#include "absl/strings/match.h"

namespace gpumem::report {

bool ArgumentWalker::NextOption() {
  while (next_ < args_.size()) {
    const std::string& arg = args_[next_++];
    if (options_done_ || arg == "-" || !absl::StartsWith(arg, "-")) {
      positional_.push_back(arg);
    } else if (arg == "--") {
      options_done_ = true;
    } else {
      at_ = next_ - 1;
      return true;
    }
  }
  return false;
}

bool ArgumentWalker::TakesValue(absl::string_view name, std::string* value, bool* missing) {
  const std::string& arg = option();
  *missing = false;
  if (arg == name) {
    if (next_ == args_.size()) {
      *missing = true;
    } else {
      *value = args_[next_++];
    }
    return true;
  }
  if (absl::StartsWith(arg, name) && arg.size() > name.size() && arg[name.size()] == '=') {
    *value = arg.substr(name.size() + 1);
    return true;
  }
  return false;
}

}  // namespace gpumem::report
