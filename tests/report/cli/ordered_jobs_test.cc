// RunInOrder (report/cli/ordered_jobs.h): items run on several threads at once, results delivered
// on the calling thread in item order, whatever order they finish in.
#include "report/cli/ordered_jobs.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

// The first items take longest: in parallel, later ones finish first.
TEST(OrderedJobsTest, DeliversInItemOrderOnTheCallingThread) {
  constexpr size_t kItems = 12;
  std::atomic<int> running{0};
  std::atomic<int> most_running{0};
  std::vector<size_t> delivered;
  const std::thread::id caller = std::this_thread::get_id();
  RunInOrder<std::string>(
      kItems, 4,
      [&](size_t i) {
        const int now = ++running;
        for (int seen = most_running;
             now > seen && !most_running.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5 * (kItems - i)));
        --running;
        return "item " + std::to_string(i);
      },
      [&](size_t i, std::string&& result) {
        EXPECT_EQ(std::this_thread::get_id(), caller);
        EXPECT_EQ(result, "item " + std::to_string(i));
        delivered.push_back(i);
      });
  ASSERT_EQ(delivered.size(), kItems);
  for (size_t i = 0; i < kItems; ++i) EXPECT_EQ(delivered[i], i);
  EXPECT_GT(most_running.load(), 1) << "the items did not run at once";
  EXPECT_LE(most_running.load(), 4);
}

TEST(OrderedJobsTest, OneJobIsAPlainLoopOnTheCallingThread) {
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::string> events;
  RunInOrder<int>(
      3, 1,
      [&](size_t i) {
        EXPECT_EQ(std::this_thread::get_id(), caller);
        events.push_back("work " + std::to_string(i));
        return static_cast<int>(i);
      },
      [&](size_t i, int&&) { events.push_back("deliver " + std::to_string(i)); });
  EXPECT_EQ(events, (std::vector<std::string>{"work 0", "deliver 0", "work 1", "deliver 1",
                                              "work 2", "deliver 2"}));
}

// Items 2, 1, 0 on two threads: item 1 waits until item 2 has started, so item 0 (the third
// taken) can start only after item 2 did, unless items were taken in index order.
TEST(OrderedJobsTest, StartsItemsInTheOrderGivenAndDeliversInItemOrder) {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<size_t> started;
  std::vector<size_t> delivered;
  RunInOrder<size_t>(
      3, 2,
      [&](size_t i) {
        std::unique_lock<std::mutex> lock(mutex);
        started.push_back(i);
        changed.notify_all();
        if (i == 1) {
          changed.wait_for(lock, std::chrono::seconds(10), [&] {
            return std::find(started.begin(), started.end(), 2) != started.end();
          });
        }
        return i;
      },
      [&](size_t i, size_t&& result) {
        EXPECT_EQ(result, i);
        delivered.push_back(i);
      },
      {2, 1, 0});
  ASSERT_EQ(started.size(), 3u);
  EXPECT_LT(std::find(started.begin(), started.end(), 2),
            std::find(started.begin(), started.end(), 0))
      << "item 0 started before item 2";
  EXPECT_EQ(delivered, (std::vector<size_t>{0, 1, 2}));
}

TEST(OrderedJobsTest, LargestFirstTiesInIndexOrder) {
  EXPECT_EQ(LargestFirst({5, 40, 5, 100, 0}), (std::vector<size_t>{3, 1, 0, 2, 4}));
  EXPECT_TRUE(LargestFirst({}).empty());
}

TEST(OrderedJobsTest, JobCount) {
  EXPECT_EQ(JobCount(4, 64), 4u);
  EXPECT_EQ(JobCount(8, 3), 3u);  // never more threads than items
  EXPECT_EQ(JobCount(4, 0), 1u);
  EXPECT_GE(JobCount(0, 1000), 1u);  // one per hardware thread
  EXPECT_LE(JobCount(0, 1000), std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace gpumem::report
