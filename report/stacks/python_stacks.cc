#include "report/stacks/python_stacks.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "report/stacks/user_frames.h"

namespace gpumem::report {
namespace {

constexpr absl::string_view kEvalFunction = "_PyEval_EvalFrameDefault";

std::string JoinedKey(const char* prefix, const std::vector<Frame>& frames, bool python_only) {
  std::string key = prefix;
  for (const Frame& frame : frames) {
    if (python_only && !frame.python) continue;
    absl::StrAppend(&key, "\n", FrameKey(frame));
  }
  return key;
}

}  // namespace

std::string FrameKey(const Frame& frame) {
  if (frame.python) return absl::StrCat("py ", frame.file, ":", frame.line, " ", frame.function);
  return frame.ToString();
}

bool IsEvalFrameFunction(absl::string_view function) {
  if (!absl::StartsWith(function, kEvalFunction)) return false;
  // Exactly the function, or one of the parts the compiler split off it ("name.cold", ...).
  return function.size() == kEvalFunction.size() || function[kEvalFunction.size()] == '.';
}

std::vector<std::span<const Frame>> SpliceStack(
    const std::vector<const std::vector<Frame>*>& native, const std::vector<Frame>& python,
    const std::vector<uint32_t>& groups) {
  std::vector<std::span<const Frame>> runs;
  if (python.empty()) {
    for (const std::vector<Frame>* resolved : native) runs.emplace_back(*resolved);
    return runs;
  }
  // Python frames by group, each group in its recorded order (innermost first).
  std::map<uint32_t, std::vector<const Frame*>> by_group;
  for (size_t i = 0; i < python.size(); ++i) {
    by_group[i < groups.size() ? groups[i] : 0].push_back(&python[i]);
  }
  auto add_group = [&runs](const std::vector<const Frame*>& members) {
    for (const Frame* frame : members) runs.emplace_back(frame, 1);
  };
  uint32_t eval_index = 0;
  for (const std::vector<Frame>* resolved : native) {
    bool eval = false;
    for (const Frame& frame : *resolved) eval = eval || IsEvalFrameFunction(frame.function);
    if (eval) {
      auto it = by_group.find(eval_index++);
      if (it != by_group.end()) {
        add_group(it->second);
        by_group.erase(it);
        continue;
      }
    }
    runs.emplace_back(*resolved);
  }
  // Groups whose eval frame is not in the native stack: after it, outermost last.
  for (const auto& [group, members] : by_group) add_group(members);
  return runs;
}

bool HasPythonFrames(const std::vector<Frame>& frames) {
  for (const Frame& frame : frames) {
    if (frame.python) return true;
  }
  return false;
}

std::vector<Frame> PythonOnly(const std::vector<Frame>& frames) {
  if (!HasPythonFrames(frames)) return frames;
  std::vector<Frame> python;
  for (const Frame& frame : frames) {
    if (frame.python) python.push_back(frame);
  }
  return python;
}

bool InPythonInstallation(absl::string_view path) {
  for (absl::string_view part :
       {"/site-packages/", "/dist-packages/", "/lib/python3.", "/lib64/python3."}) {
    if (absl::StrContains(path, part)) return true;
  }
  return false;
}

bool IsLibraryPythonFile(absl::string_view file) {
  if (InPythonInstallation(file)) return true;
  // A sitecustomize.py is start-up code, never the program's own: gpumem's Python observer is one
  // (its wrapper of torch.autograd.backward is on the stack of every backward pass).
  return absl::StartsWith(file, "<frozen ") || file == "<string>" ||
         absl::StartsWith(file, "<__array_function__") || absl::EndsWith(file, "/sitecustomize.py");
}

std::string ShortPythonPath(absl::string_view file) {
  for (absl::string_view packages : {"/site-packages/", "/dist-packages/"}) {
    const size_t at = file.rfind(packages);
    if (at != absl::string_view::npos) return std::string(file.substr(at + packages.size()));
  }
  for (absl::string_view lib : {"/lib/", "/lib64/"}) {
    const size_t at = file.rfind(absl::StrCat(lib, "python3."));
    if (at != absl::string_view::npos) return std::string(file.substr(at + lib.size()));
  }
  return std::string(file);
}

bool ParseGroupBy(absl::string_view text, GroupBy* group_by) {
  if (text == "user") {
    *group_by = GroupBy::kUser;
  } else if (text == "python") {
    *group_by = GroupBy::kPython;
  } else if (text == "stack") {
    *group_by = GroupBy::kStack;
  } else {
    return false;
  }
  return true;
}

const Frame* CallSiteFrame(const std::vector<Frame>& frames, GroupBy group_by) {
  if (frames.empty()) return nullptr;
  if (group_by == GroupBy::kStack) return &frames.front();
  if (group_by == GroupBy::kUser) {
    if (const Frame* user = UserFrame(frames)) return user;
  }
  for (const Frame& frame : frames) {
    if (frame.python) return &frame;
  }
  return &frames.front();
}

std::string CallSiteKey(const std::vector<Frame>& frames, GroupBy group_by) {
  if (group_by == GroupBy::kUser) {
    if (const Frame* user = UserFrame(frames)) return absl::StrCat("user\n", FrameKey(*user));
  }
  if (group_by == GroupBy::kStack || !HasPythonFrames(frames)) {
    // As the report always grouped: the frames as printed, one per line.
    std::string key;
    for (const Frame& frame : frames) {
      if (!key.empty()) key.push_back('\n');
      key += FrameKey(frame);
    }
    return key;
  }
  if (group_by == GroupBy::kPython) return JoinedKey("python", frames, /*python_only=*/true);
  // kUser, no frame of the user's: the innermost Python frame.
  return absl::StrCat("user\n", FrameKey(*CallSiteFrame(frames, GroupBy::kPython)));
}

}  // namespace gpumem::report
