// Progress of reading a trace, for people at a terminal: "reading run.trace: 43% (1.2 GiB)" on
// stderr, rewritten in place (carriage return) at most kUpdatesPerSecond times a second, and
// finished with a newline. Silent when stderr is not a terminal (isatty), so logs, pipes and tests
// see nothing.
//
// Use: make one per file read, call Update() with the bytes read so far as often as convenient (it
// costs a clock read only every kCallsPerClockRead calls), and Finish() (or let the destructor) at
// the end:
//
//   Progress progress(path, file->file_size());
//   ... progress.Update(file->bytes_read()); ...
//   progress.Finish();
#ifndef GPUMEM_REPORT_TRACE_PROGRESS_H_
#define GPUMEM_REPORT_TRACE_PROGRESS_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace gpumem::report {

class Progress {
 public:
  static constexpr int kUpdatesPerSecond = 4;
  static constexpr uint32_t kCallsPerClockRead = 1024;

  // Reading `path`, `total_bytes` long. Prints to `out` (stderr by default) only when it is a
  // terminal; `force` prints wherever it goes (for tests).
  Progress(std::string path, uint64_t total_bytes, std::FILE* out = stderr, bool force = false);
  ~Progress() { Finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `bytes_read` of the file are read.
  void Update(uint64_t bytes_read) {
    if (!enabled_ || ++calls_ % kCallsPerClockRead != 0) return;
    Print(bytes_read, false);
  }
  // The last line at 100% and a newline, once; nothing if nothing was printed yet.
  void Finish();

  bool enabled() const { return enabled_; }

 private:
  void Print(uint64_t bytes_read, bool last);

  std::string path_;  // escaped for the terminal
  uint64_t total_bytes_;
  std::FILE* out_;
  bool enabled_;
  bool printed_ = false;
  bool finished_ = false;
  uint32_t calls_ = 0;
  int64_t next_print_ns_ = 0;
};

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_TRACE_PROGRESS_H_
