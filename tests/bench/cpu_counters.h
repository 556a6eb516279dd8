// The CPU's own counters (perf_event_open, user mode only) summed over timed regions of a
// benchmark: which of instruction fetch, data misses and TLB misses a region's time goes to, where
// a time alone cannot tell. Each counter opens on its own (a PMU may lack some); where the kernel
// gives none (a VM without a virtual PMU, perf_event_paranoid), Open() is false and nothing is
// counted.
#pragma once

#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

class CpuCounters {
 public:
  bool Open() {
    constexpr uint64_t kMiss = uint64_t{PERF_COUNT_HW_CACHE_OP_READ} << 8 |
                               uint64_t{PERF_COUNT_HW_CACHE_RESULT_MISS} << 16;
    const Event events[] = {
        {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
        {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
        {"L1i misses", PERF_TYPE_HW_CACHE, PERF_COUNT_HW_CACHE_L1I | kMiss},
        {"L1d misses", PERF_TYPE_HW_CACHE, PERF_COUNT_HW_CACHE_L1D | kMiss},
        {"iTLB misses", PERF_TYPE_HW_CACHE, PERF_COUNT_HW_CACHE_ITLB | kMiss},
        {"dTLB misses", PERF_TYPE_HW_CACHE, PERF_COUNT_HW_CACHE_DTLB | kMiss},
    };
    for (const Event& event : events) {
      perf_event_attr attr{};
      attr.size = sizeof(attr);
      attr.type = event.type;
      attr.config = event.config;
      attr.exclude_kernel = 1;
      attr.exclude_hv = 1;
      const int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
      if (fd < 0) continue;
      counters_[count_++] = {event.name, fd, 0, 0};
    }
    return count_ > 0;
  }
  // Around each timed region: counts between Start and Stop are summed.
  void Start() {
    for (int i = 0; i < count_; ++i) counters_[i].started = Read(counters_[i].fd);
  }
  void Stop() {
    for (int i = 0; i < count_; ++i) {
      counters_[i].total += Read(counters_[i].fd) - counters_[i].started;
    }
  }
  // One line: each counter's sum divided by `regions`.
  void Print(const char* prefix, uint64_t regions) const {
    printf("%s", prefix);
    for (int i = 0; i < count_; ++i) {
      printf(" %s=%.1f", counters_[i].name,
             static_cast<double>(counters_[i].total) / static_cast<double>(regions));
    }
    printf("\n");
  }

 private:
  struct Event {
    const char* name;
    uint32_t type;
    uint64_t config;
  };
  struct Counter {
    const char* name;
    int fd;
    uint64_t started;
    uint64_t total;
  };
  static uint64_t Read(int fd) {
    uint64_t value = 0;
    return read(fd, &value, sizeof(value)) == sizeof(value) ? value : 0;
  }
  Counter counters_[6];
  int count_ = 0;
};
