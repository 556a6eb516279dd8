// RunInWorkers (report/cli/worker_processes.h): items run in forked worker processes, at most
// `jobs` at once, results (bytes and descriptors) delivered on the calling thread in item order,
// whatever order they finish in; a worker that crashes delivers an error, not a lost report.
#include "report/cli/worker_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace gpumem::report {
namespace {

uint64_t NowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

// What a test worker reports: "item pid start_ns end_ns".
struct Ran {
  size_t item = 0;
  uint64_t pid = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

WorkerResult Sleep(size_t item, std::chrono::milliseconds how_long) {
  const uint64_t start = NowNs();
  std::this_thread::sleep_for(how_long);
  return {absl::StrCat(item, " ", getpid(), " ", start, " ", NowNs()), {}};
}

Ran Parse(const std::string& bytes) {
  const std::vector<std::string> fields = absl::StrSplit(bytes, ' ');
  Ran ran;
  EXPECT_EQ(fields.size(), 4u) << bytes;
  if (fields.size() != 4) return ran;
  uint64_t item = 0;
  EXPECT_TRUE(absl::SimpleAtoi(fields[0], &item) && absl::SimpleAtoi(fields[1], &ran.pid) &&
              absl::SimpleAtoi(fields[2], &ran.start_ns) &&
              absl::SimpleAtoi(fields[3], &ran.end_ns));
  ran.item = item;
  return ran;
}

// The most items whose runs overlap at one moment.
size_t MostAtOnce(const std::vector<Ran>& runs) {
  size_t most = 0;
  for (const Ran& at : runs) {
    size_t now = 0;
    for (const Ran& other : runs)
      now += other.start_ns <= at.start_ns && at.start_ns < other.end_ns;
    most = std::max(most, now);
  }
  return most;
}

// The first items take longest: in parallel, later ones finish first.
TEST(WorkerProcessesTest, DeliversInItemOrderFromProcessesOfTheirOwn) {
  constexpr size_t kItems = 8;
  std::vector<Ran> runs;
  RunInWorkers(
      kItems, 3, [&](size_t i) { return Sleep(i, std::chrono::milliseconds(20 * (kItems - i))); },
      [&](size_t i, absl::StatusOr<WorkerResult> result) {
        ASSERT_TRUE(result.ok()) << result.status();
        runs.push_back(Parse(result->bytes));
        EXPECT_EQ(runs.back().item, i);
      });
  ASSERT_EQ(runs.size(), kItems);
  for (size_t i = 0; i < kItems; ++i) EXPECT_EQ(runs[i].item, i);
  for (const Ran& ran : runs) EXPECT_NE(ran.pid, static_cast<uint64_t>(getpid()));
  EXPECT_GT(MostAtOnce(runs), 1u) << "the items did not run at once";
  EXPECT_LE(MostAtOnce(runs), 3u);
}

TEST(WorkerProcessesTest, OneJobIsAPlainLoopInThisProcess) {
  std::vector<std::string> events;
  RunInWorkers(
      3, 1,
      [&](size_t i) {
        events.push_back(absl::StrCat("work ", i));
        return WorkerResult{std::to_string(getpid()), {}};
      },
      [&](size_t i, absl::StatusOr<WorkerResult> result) {
        ASSERT_TRUE(result.ok());
        EXPECT_EQ(result->bytes, std::to_string(getpid()));
        events.push_back(absl::StrCat("deliver ", i));
      });
  EXPECT_EQ(events, (std::vector<std::string>{"work 0", "deliver 0", "work 1", "deliver 1",
                                              "work 2", "deliver 2"}));
}

// Items 2 and 1 are started first, on both jobs; item 0 only once one of them has ended.
TEST(WorkerProcessesTest, StartsItemsInTheOrderGiven) {
  std::vector<Ran> runs;
  RunInWorkers(
      3, 2, [&](size_t i) { return Sleep(i, std::chrono::milliseconds(100)); },
      [&](size_t, absl::StatusOr<WorkerResult> result) {
        ASSERT_TRUE(result.ok()) << result.status();
        runs.push_back(Parse(result->bytes));
      },
      {2, 1, 0});
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_GE(runs[0].start_ns, std::min(runs[1].end_ns, runs[2].end_ns))
      << "item 0 started before item 2 or item 1 ended";
}

// Each item writes its own name into temporary files; the parent reads them through the
// descriptors it was handed. Item 1 hands back more than one message can carry.
TEST(WorkerProcessesTest, HandsDescriptorsBack) {
  const std::vector<size_t> files = {1, 300, 0};
  std::vector<size_t> delivered;
  RunInWorkers(
      files.size(), 3,
      [&](size_t i) {
        WorkerResult result{absl::StrCat("item ", i), {}};
        for (size_t f = 0; f < files[i]; ++f) {
          std::FILE* file = std::tmpfile();
          const std::string text = absl::StrCat(i, ".", f);
          EXPECT_EQ(pwrite(fileno(file), text.data(), text.size(), 0),
                    static_cast<ssize_t>(text.size()));
          result.descriptors.push_back(dup(fileno(file)));
          std::fclose(file);
        }
        return result;
      },
      [&](size_t i, absl::StatusOr<WorkerResult> result) {
        ASSERT_TRUE(result.ok()) << result.status();
        EXPECT_EQ(result->bytes, absl::StrCat("item ", i));
        ASSERT_EQ(result->descriptors.size(), files[i]);
        for (size_t f = 0; f < files[i]; ++f) {
          char text[32] = {};
          ASSERT_GT(pread(result->descriptors[f], text, sizeof(text) - 1, 0), 0);
          EXPECT_EQ(std::string(text), absl::StrCat(i, ".", f));
        }
        CloseDescriptors(&*result);
        delivered.push_back(i);
      });
  EXPECT_EQ(delivered, (std::vector<size_t>{0, 1, 2}));
}

// More descriptors than the soft limit allowed when it began: the limit is raised to the hard one.
TEST(WorkerProcessesTest, TakesMoreDescriptorsThanTheSoftLimit) {
  rlimit before;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  if (before.rlim_max != RLIM_INFINITY && before.rlim_max < 256) GTEST_SKIP() << "hard limit";
  rlimit low = before;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  size_t received = 0;
  RunInWorkers(
      2, 2,
      [&](size_t) {
        WorkerResult result;
        for (int f = 0; f < 100; ++f) result.descriptors.push_back(open("/dev/null", O_RDONLY));
        return result;
      },
      [&](size_t, absl::StatusOr<WorkerResult> result) {
        ASSERT_TRUE(result.ok()) << result.status();
        received += result->descriptors.size();
        CloseDescriptors(&*result);
      });
  setrlimit(RLIMIT_NOFILE, &before);
  EXPECT_EQ(received, 200u);
}

// Item 1's worker dies by a signal and item 2's exits early: each delivers an error naming how it
// ended, in its place, and the others' results come as ever. The parent's output that was not yet
// written when the workers were forked is written once, by the parent.
TEST(WorkerProcessesTest, AWorkerThatDiesDeliversAnError) {
  testing::internal::CaptureStdout();
  std::printf("written once");  // no newline: still in stdout's buffer
  std::vector<std::string> delivered;
  RunInWorkers(
      4, 4,
      [&](size_t i) {
        if (i == 1) raise(SIGKILL);
        if (i == 2) std::exit(3);
        return WorkerResult{absl::StrCat("item ", i), {}};
      },
      [&](size_t, absl::StatusOr<WorkerResult> result) {
        delivered.push_back(result.ok() ? result->bytes : std::string(result.status().message()));
      });
  std::fflush(stdout);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "written once");
  ASSERT_EQ(delivered.size(), 4u);
  EXPECT_EQ(delivered[0], "item 0");
  EXPECT_EQ(delivered[1], "its analysis ended by signal 9 (Killed)");
  EXPECT_EQ(delivered[2], "its analysis ended with exit status 3 before handing back a result");
  EXPECT_EQ(delivered[3], "item 3");
}

// The processes whose parent is this one, zombies included (/proc/PID/stat's fourth field).
size_t ChildProcesses() {
  size_t children = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; it ends at the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    long parent = 0;
    rest >> state >> parent;
    children += parent == getpid();
  }
  return children;
}

// A whole result is taken as soon as it has come, before its worker has ended; the workers are
// reaped all the same, none left behind as a zombie.
TEST(WorkerProcessesTest, EveryWorkerIsReaped) {
  size_t delivered = 0;
  RunInWorkers(
      8, 4,
      [](size_t i) {
        return WorkerResult{absl::StrCat("item ", i), {}};
      },
      [&](size_t i, absl::StatusOr<WorkerResult> result) {
        ASSERT_TRUE(result.ok()) << result.status();
        EXPECT_EQ(result->bytes, absl::StrCat("item ", i));
        ++delivered;
      });
  EXPECT_EQ(delivered, 8u);
  // Reaped by then, or soon after by a thread of RunInWorkers: this process has no child left.
  size_t left = ChildProcesses();
  for (int i = 0; i < 1000 && left > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    left = ChildProcesses();
  }
  EXPECT_EQ(left, 0u);
}

TEST(WorkerProcessesTest, LargestFirstTiesInIndexOrder) {
  EXPECT_EQ(LargestFirst({5, 40, 5, 100, 0}), (std::vector<size_t>{3, 1, 0, 2, 4}));
  EXPECT_TRUE(LargestFirst({}).empty());
}

TEST(WorkerProcessesTest, JobCount) {
  EXPECT_EQ(JobCount(4, 64), 4u);
  EXPECT_EQ(JobCount(8, 3), 3u);  // never more workers than items
  EXPECT_EQ(JobCount(4, 0), 1u);
  EXPECT_GE(JobCount(0, 1000), 1u);  // one per hardware thread
  EXPECT_LE(JobCount(0, 1000), std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace gpumem::report
