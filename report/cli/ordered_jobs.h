// Work items run on a bounded pool of threads, their results handed back in item order: how
// `gpumem report DIR` reports a directory of per-rank traces on every core and still prints what
// the sequential loop printed, byte for byte.
#ifndef GPUMEM_REPORT_CLI_ORDERED_JOBS_H_
#define GPUMEM_REPORT_CLI_ORDERED_JOBS_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

namespace gpumem::report {

// The number of jobs for `requested` (0: one per hardware thread), never more than `items`, at
// least 1.
inline size_t JobCount(size_t requested, size_t items) {
  size_t jobs = requested != 0 ? requested : std::thread::hardware_concurrency();
  return std::max<size_t>(1, std::min(jobs, items));
}

// The items' indexes, largest `sizes` first (ties in index order): the order to start them in.
// The pool is done when its last item is, so the largest are started first, while the small ones
// fill the other threads (started in index order, the largest could come last and run alone).
inline std::vector<size_t> LargestFirst(const std::vector<uint64_t>& sizes) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  return order;
}

// Calls `work(i)` for each i in [0, count) on `jobs` threads (JobCount()), and `deliver(i,
// Result&&)` on the calling thread in order of i, each as soon as item i is done (and every item
// before it was delivered). Items are started in `start_order` (a permutation of [0, count);
// empty: in index order). With one job, everything runs on the calling thread in index order, one
// item after the other, as a plain loop would. `work` must be safe to call from several threads at
// once for different items.
template <typename Result, typename Work, typename Deliver>
void RunInOrder(size_t count, size_t jobs, Work&& work, Deliver&& deliver,
                const std::vector<size_t>& start_order = {}) {
  const auto one_after_the_other = [&] {
    for (size_t i = 0; i < count; ++i) deliver(i, work(i));
  };
  jobs = JobCount(jobs, count);
  if (jobs <= 1) return one_after_the_other();
  std::vector<std::optional<Result>> done(count);
  std::mutex mutex;
  std::condition_variable ready;
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  threads.reserve(jobs);
  for (size_t t = 0; t < jobs; ++t) {
    try {
      threads.emplace_back([&] {
        for (size_t started = next++; started < count; started = next++) {
          const size_t i = start_order.empty() ? started : start_order[started];
          Result result = work(i);
          std::lock_guard<std::mutex> lock(mutex);
          done[i].emplace(std::move(result));
          ready.notify_one();
        }
      });
    } catch (const std::system_error&) {
      break;  // no more threads to be had: those started take every item
    }
  }
  if (threads.empty()) return one_after_the_other();
  for (size_t i = 0; i < count; ++i) {
    std::optional<Result> result;
    {
      std::unique_lock<std::mutex> lock(mutex);
      ready.wait(lock, [&] { return done[i].has_value(); });
      result = std::move(done[i]);
      done[i].reset();
    }
    deliver(i, std::move(*result));
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_CLI_ORDERED_JOBS_H_
