// The CPython interpreters of this machine, for tests that run Python programs under the preload
// library: python3 from PATH, those GPUMEM_TEST_PYTHONS names (colon-separated paths), and
// pyenv's (CI's Debian has 3.11 only; a machine with pyenv has other versions), each once.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/test_support.h"

namespace gpumem::testing {

// Those of version 3.<min_minor> to 3.<max_minor>, by the path of the executable each runs as (a
// pyenv shim runs one of pyenv's versions): the first path naming each.
inline std::vector<std::string> PythonInterpreters(int min_minor, int max_minor) {
  std::vector<std::string> candidates = {"python3"};
  if (const char* extra = getenv("GPUMEM_TEST_PYTHONS")) {
    std::stringstream list(extra);
    for (std::string path; std::getline(list, path, ':');) {
      if (!path.empty()) candidates.push_back(path);
    }
  }
  std::string pyenv_root;
  if (const char* root = getenv("PYENV_ROOT")) {
    pyenv_root = root;
  } else if (const char* home = getenv("HOME")) {
    pyenv_root = std::string(home) + "/.pyenv";
  }
  std::error_code error;
  for (const auto& version : std::filesystem::directory_iterator(pyenv_root + "/versions", error)) {
    const std::filesystem::path python = version.path() / "bin" / "python3";
    if (std::filesystem::exists(python, error)) candidates.push_back(python.string());
  }
  const std::string check =
      "import os, sys\nprint(os.path.realpath(sys.executable))\nsys.exit(0 if (3, " +
      std::to_string(min_minor) + ") <= sys.version_info[:2] <= (3, " + std::to_string(max_minor) +
      ") else 1)";
  std::vector<std::string> found;
  std::set<std::string> executables;
  for (const std::string& python : candidates) {
    const ProgramRun run = RunProgram({python, "-c", check});
    if (run.exit_code == 0 && executables.insert(run.out).second) found.push_back(python);
  }
  return found;
}

// Whether `python` is CPython 3.<minor> or newer.
inline bool PythonAtLeast(const std::string& python, int minor) {
  return RunProgram({python, "-c",
                     "import sys; sys.exit(0 if sys.version_info >= (3, " + std::to_string(minor) +
                         ") else 1)"})
             .exit_code == 0;
}

}  // namespace gpumem::testing
