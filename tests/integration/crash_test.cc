// kill -9 of a recording program at a random point: every event it completed before the kill is
// in the trace and reads back (DESIGN rule 6).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>

#include <random>
#include <string>

#include "report/trace/trace_file.h"
#include "tests/support/test_support.h"

namespace gpumem::testing {
namespace {

TEST(Crash, KillNineKeepsEveryCompletedEvent) {
  std::mt19937 random(std::random_device{}());
  for (int attempt = 0; attempt < 5; ++attempt) {
    TempDir dir;
    std::string trace = dir.File("killed.trace");
    std::string out = dir.File("out");
    pid_t pid = Spawn({BuildPath("tests/programs/alloc_forever")}, RecordingEnvironment(trace), out,
                      dir.File("err"));
    ASSERT_GT(pid, 0);
    // Wait until the program has reported a random number of completed malloc/free pairs.
    const long kill_after = std::uniform_int_distribution<long>(1, 20000)(random);
    long reported = 0;
    while (reported < kill_after) {
      std::string text = ReadFile(out);
      size_t end = text.rfind('\n');
      if (end != std::string::npos) {
        size_t start = text.rfind('\n', end - 1);
        reported = std::stol(text.substr(start == std::string::npos ? 0 : start + 1));
      }
    }
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    ASSERT_EQ(WaitExitCode(pid), 128 + SIGKILL);
    // The last number printed before the kill: that many pairs had returned.
    std::string text = ReadFile(out);
    text.resize(text.rfind('\n'));
    long completed = std::stol(text.substr(text.rfind('\n') + 1));

    auto sorted = report::ReadMemoryEventsBySeq(trace);
    ASSERT_TRUE(sorted.ok()) << sorted.status();
    EXPECT_FALSE(sorted->file->footer().has_value());
    const auto& events = sorted->events;
    ASSERT_GE(static_cast<long>(events.size()), 2 * completed)
        << "killed after " << completed << " pairs; " << sorted->file->end().Describe();
    for (long i = 0; i < 2 * completed; ++i) {
      const MemoryEvent& event = events[i];
      ASSERT_EQ(event.seq(), static_cast<uint64_t>(i + 1));
      ASSERT_EQ(event.action(), i % 2 == 0 ? ALLOC : FREE) << event.ShortDebugString();
      if (i % 2 == 1) {
        ASSERT_EQ(event.address(), events[i - 1].address());
      }
    }
  }
}

}  // namespace
}  // namespace gpumem::testing
