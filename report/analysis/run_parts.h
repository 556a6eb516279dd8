// Work split into parts, run on a few threads of this process: the combined view's merge and the
// freeing of what it read.
#ifndef GPUMEM_REPORT_ANALYSIS_RUN_PARTS_H_
#define GPUMEM_REPORT_ANALYSIS_RUN_PARTS_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <system_error>
#include <thread>
#include <vector>

namespace gpumem::report {

// Runs work(part) for each of `parts` parts, on this thread and up to min(threads, parts) - 1
// more, each taking the next part left. Where no thread can be started, the others do the rest.
template <typename Work>
void RunParts(size_t parts, size_t threads, const Work& work) {
  std::atomic<size_t> next{0};
  auto take = [&] {
    for (size_t part = next++; part < parts; part = next++) work(part);
  };
  std::vector<std::jthread> helpers;
  for (size_t h = 1; h < std::min(threads, parts); ++h) {
    try {
      helpers.emplace_back(take);
    } catch (const std::system_error&) {
      break;
    }
  }
  take();
}

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_ANALYSIS_RUN_PARTS_H_
