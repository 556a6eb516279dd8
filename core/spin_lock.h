// A lock for the recorder's rare slow paths (growing the file, new stacks, module scans).
// pthread mutexes would do too, but an atomic_flag can be reset in a child after fork() whatever
// state the parent's threads left it in.
#pragma once

#include <sched.h>

#include <atomic>

namespace gpumem {

class SpinGuard {
 public:
  explicit SpinGuard(std::atomic_flag& flag) : flag_(flag) {
    while (flag_.test_and_set(std::memory_order_acquire)) sched_yield();
  }
  ~SpinGuard() { flag_.clear(std::memory_order_release); }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;

 private:
  std::atomic_flag& flag_;
};

}  // namespace gpumem
