// An export's output as it is produced, handed on in chunks of about a mebibyte: a timeline export
// of a long trace (perfetto.h, chrome_json.h) grows with its events, and must not hold all of it in
// memory before writing. Without a consumer every byte stays in text() (tests, small outputs).
#ifndef GPUMEM_REPORT_EXPORT_CHUNKED_OUTPUT_H_
#define GPUMEM_REPORT_EXPORT_CHUNKED_OUTPUT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpumem::report {

class ChunkedOutput {
 public:
  using Consumer = std::function<absl::Status(absl::string_view)>;
  static constexpr size_t kChunkBytes = size_t{1} << 20;

  ChunkedOutput() = default;
  explicit ChunkedOutput(Consumer consumer, size_t chunk_bytes = kChunkBytes)
      : consumer_(std::move(consumer)), chunk_bytes_(chunk_bytes) {}

  // The bytes not handed on yet: writers append here, then call EndOfEvent().
  std::string* text() { return &text_; }
  // Between two events: hands the text on once it holds a chunk.
  void EndOfEvent() {
    if (consumer_ && text_.size() >= chunk_bytes_) HandOn();
  }
  // Hands the rest on; the first error of any chunk (after one, the rest is dropped: the output is
  // incomplete and the caller discards it).
  absl::Status Finish() {
    if (consumer_) HandOn();
    return status_;
  }
  // Every byte written so far, handed on or not.
  uint64_t size() const { return handed_on_ + text_.size(); }

 private:
  void HandOn() {
    if (status_.ok() && !text_.empty()) status_ = consumer_(text_);
    handed_on_ += text_.size();
    text_.clear();
  }

  Consumer consumer_;
  size_t chunk_bytes_ = kChunkBytes;
  std::string text_;
  uint64_t handed_on_ = 0;
  absl::Status status_;
};

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_EXPORT_CHUNKED_OUTPUT_H_
