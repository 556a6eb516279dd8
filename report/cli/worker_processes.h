// Work items run in worker processes, their results handed back in item order: how `gpumem report
// DIR` reports a directory of per-rank traces on every core and still prints what the sequential
// loop printed, byte for byte. Processes, not threads: threads of one process stopped scaling at
// about 16 cores where independent processes went on (tests/bench/RESULTS.md, *Analyzer
// throughput*), and a trace that crashes the analysis ends its own worker, not the whole report.
#ifndef GPUMEM_REPORT_CLI_WORKER_PROCESSES_H_
#define GPUMEM_REPORT_CLI_WORKER_PROCESSES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace gpumem::report {

// The number of jobs for `requested` (0: one per hardware thread), never more than `items`, at
// least 1.
inline size_t JobCount(size_t requested, size_t items) {
  size_t jobs = requested != 0 ? requested : std::thread::hardware_concurrency();
  return std::max<size_t>(1, std::min(jobs, items));
}

// The items' indexes, largest `sizes` first (ties in index order): the order to start them in.
// The pool is done when its last item is, so the largest are started first, while the small ones
// fill the other workers (started in index order, the largest could come last and run alone).
inline std::vector<size_t> LargestFirst(const std::vector<uint64_t>& sizes) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  return order;
}

// What a work item hands back: bytes, and open file descriptors that go with them (a worker's
// temporary files, say), which the result owns: whoever holds it closes them or passes them on.
struct WorkerResult {
  std::string bytes;
  std::vector<int> descriptors;
};

// Closes `result`'s descriptors.
void CloseDescriptors(WorkerResult* result);

// Calls `work(i)` for each i in [0, count), and `deliver(i, result)` in this process, on the
// calling thread, in order of i, each as soon as item i and every item before it are done. With
// more than one job (JobCount()), each item runs in a process of its own forked from this one, at
// most `jobs` at once, started in `start_order` (a permutation of [0, count); empty: in index
// order); its result's bytes come back through a socket and its descriptors as descriptors of this
// process. A worker that ends without handing back a whole result (a crash, a kill) delivers an
// error naming how it ended. With one job, or while no process can be forked, items run in this
// process, one after the other. Results' descriptors stay open until the caller closes them, so
// this process's soft limit on open descriptors is raised to its hard limit first. In a worker,
// `work` must not print: what it printed would mix with this process's output, and what stdio still
// buffers when it ends is dropped (so is the worker's copy of this process's unwritten output,
// which this process writes itself).
void RunInWorkers(size_t count, size_t jobs, const std::function<WorkerResult(size_t)>& work,
                  const std::function<void(size_t, absl::StatusOr<WorkerResult>)>& deliver,
                  const std::vector<size_t>& start_order = {});

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_CLI_WORKER_PROCESSES_H_
