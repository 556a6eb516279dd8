// report/trace/progress.h: the reading progress line, on a terminal only.
#include "report/trace/progress.h"

#include <fcntl.h>
#include <pty.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace gpumem {
namespace {

using testing::ReadFile;
using testing::TempDir;

// Drives `progress` past its first delay and one update interval.
void Drive(report::Progress& progress) {
  for (int round = 0; round < 3; ++round) {
    for (uint32_t i = 0; i < report::Progress::kCallsPerClockRead; ++i) progress.Update(512);
    std::this_thread::sleep_for(std::chrono::milliseconds(350));
  }
  for (uint32_t i = 0; i < report::Progress::kCallsPerClockRead; ++i) progress.Update(512);
  progress.Finish();
}

TEST(ProgressTest, SilentWhenNotATerminal) {
  TempDir dir;
  std::FILE* file = std::fopen(dir.File("err").c_str(), "w+");
  ASSERT_NE(file, nullptr);
  {
    report::Progress progress("run.trace", 1024, file);
    EXPECT_FALSE(progress.enabled());
    Drive(progress);
  }
  std::fclose(file);
  EXPECT_EQ(ReadFile(dir.File("err")), "");
}

TEST(ProgressTest, PrintsOnATerminalAndEndsTheLine) {
  int master = -1;
  int slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  std::FILE* terminal = fdopen(slave, "w");
  ASSERT_NE(terminal, nullptr);
  {
    report::Progress progress("run.trace", 1024, terminal);
    EXPECT_TRUE(progress.enabled());
    Drive(progress);
  }
  std::fclose(terminal);
  std::string text;
  char buffer[4096];
  fcntl(master, F_SETFL, O_NONBLOCK);
  for (ssize_t n; (n = read(master, buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  close(master);
  EXPECT_NE(text.find("reading run.trace: 50% (512 B)"), std::string::npos) << text;
  EXPECT_NE(text.find("reading run.trace: 100% (1.00 KiB)"), std::string::npos) << text;
  // The terminal turns "\n" into "\r\n".
  EXPECT_TRUE(text.size() >= 2 && text.substr(text.size() - 2) == "\r\n") << text;
}

}  // namespace
}  // namespace gpumem
