// Text built in a caller's fixed buffer, truncated when full: status details and search
// summaries without allocation.
#pragma once

#include <string.h>

#include <cstddef>
#include <cstdint>

namespace gpumem::cupti {

class FixedText {
 public:
  FixedText(char* buffer, size_t capacity) : buffer_(buffer), capacity_(capacity) {
    if (capacity_ > 0) buffer_[0] = '\0';
  }
  FixedText& Append(const char* text) {
    if (capacity_ == 0 || text == nullptr) return *this;
    size_t n = strnlen(text, capacity_ - 1 - length_);
    memcpy(buffer_ + length_, text, n);
    length_ += n;
    buffer_[length_] = '\0';
    return *this;
  }
  FixedText& Append(uint64_t value) {
    char digits[21];
    size_t at = sizeof(digits) - 1;
    digits[at] = '\0';
    do {
      digits[--at] = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value != 0);
    return Append(digits + at);
  }
  const char* c_str() const { return buffer_; }
  size_t size() const { return length_; }

 private:
  char* buffer_;
  size_t capacity_;
  size_t length_ = 0;
};

}  // namespace gpumem::cupti
