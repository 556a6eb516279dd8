#include "report/trace/progress.h"

#include <time.h>
#include <unistd.h>

#include "absl/strings/str_format.h"
#include "report/format/printable.h"
#include "report/format/sizes.h"

namespace gpumem::report {
namespace {

int64_t NowNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

// Nothing for the first moments: a quick command prints no progress at all.
constexpr int64_t kFirstDelayNs = 300000000;

}  // namespace

Progress::Progress(std::string path, uint64_t total_bytes, std::FILE* out, bool force)
    : path_(Printable(path)),
      total_bytes_(total_bytes),
      out_(out),
      enabled_(out != nullptr && (force || isatty(fileno(out)) == 1)),
      next_print_ns_(enabled_ && !force ? NowNs() + kFirstDelayNs : 0) {}

void Progress::Print(uint64_t bytes_read, bool last) {
  const int64_t now = NowNs();
  if (!last && now < next_print_ns_) return;
  next_print_ns_ = now + 1000000000 / kUpdatesPerSecond;
  const uint64_t shown = total_bytes_ > 0 && bytes_read > total_bytes_ ? total_bytes_ : bytes_read;
  const int percent =
      total_bytes_ == 0 ? 100 : static_cast<int>(100.0 * static_cast<double>(shown) / total_bytes_);
  // "\r" back to the start of the line, "\033[K" erases what a longer line left.
  absl::FPrintF(out_, "\rreading %s: %d%% (%s)\033[K", path_, percent, FormatBytes(shown));
  std::fflush(out_);
  printed_ = true;
}

void Progress::Finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_ || !printed_) return;
  Print(total_bytes_, true);
  std::fputc('\n', out_);
  std::fflush(out_);
}

}  // namespace gpumem::report
