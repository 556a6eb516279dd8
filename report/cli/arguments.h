// Walks a subcommand's arguments the same way for every command: options may stand before, among
// or after the trace paths; "--" ends the options; "-" is a path; an option's value may follow as
// the next argument or after '=' ("--top 5", "--top=5").
#ifndef GPUMEM_REPORT_CLI_ARGUMENTS_H_
#define GPUMEM_REPORT_CLI_ARGUMENTS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpumem::report {

class ArgumentWalker {
 public:
  explicit ArgumentWalker(const std::vector<std::string>& args) : args_(args) {}

  // Moves to the next argument that is not "--"; false at the end. Positional arguments are
  // collected in positional() and skipped.
  bool NextOption();
  const std::string& option() const { return args_[at_]; }
  bool Is(absl::string_view name) const { return option() == name; }
  // Whether the current option is `name` taking a value. Sets *value, or *missing when none
  // follows.
  bool TakesValue(absl::string_view name, std::string* value, bool* missing);
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  const std::vector<std::string>& args_;
  std::vector<std::string> positional_;
  size_t next_ = 0;
  size_t at_ = 0;
  bool options_done_ = false;
};

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_CLI_ARGUMENTS_H_
