#include "report/export/pickle_writer.h"

#include <cstring>
#include <limits>

#include "report/format/printable.h"

namespace gpumem::report {
namespace {

// Opcodes (Python's Lib/pickletools.py names).
constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kNone = 'N';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kBinInt = 'J';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kLong1 = '\x8a';
constexpr char kBinFloat = 'G';
constexpr char kShortBinUnicode = '\x8c';
constexpr char kBinUnicode = 'X';
constexpr char kEmptyList = ']';
constexpr char kEmptyDict = '}';
constexpr char kMark = '(';
constexpr char kAppends = 'e';
constexpr char kSetItems = 'u';
constexpr char kTuple = 't';
constexpr char kLongBinPut = 'r';
constexpr char kBinGet = 'h';
constexpr char kLongBinGet = 'j';

}  // namespace

void PickleWriter::Uint32(uint32_t value) {
  for (int i = 0; i < 4; ++i) out_->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void PickleWriter::CloseBatch(const Open& open) {
  switch (open.kind) {
    case Kind::kList:
      Op(kAppends);
      break;
    case Kind::kDict:
      Op(kSetItems);
      break;
    case Kind::kTuple:
      Op(kTuple);
      break;
  }
}

void PickleWriter::Value(size_t count) {
  if (open_.empty()) return;
  Open& open = open_.back();
  open.values += count;
  if (open.kind == Kind::kTuple) return;
  const size_t per_item = open.kind == Kind::kDict ? 2 : 1;
  if (open.values >= kBatch * per_item && open.values % per_item == 0) {  // whole items
    CloseBatch(open);
    Op(kMark);
    open.values = 0;
  }
}

void PickleWriter::Protocol() {
  Op(kProto);
  out_->push_back('\x04');
}

void PickleWriter::Stop() { Op(kStop); }

void PickleWriter::None() {
  Op(kNone);
  Value();
}

void PickleWriter::Bool(bool value) {
  Op(value ? kNewTrue : kNewFalse);
  Value();
}

void PickleWriter::Int(int64_t value) {
  if (value >= 0 && value <= 0xff) {
    Op(kBinInt1);
    out_->push_back(static_cast<char>(value));
  } else if (value >= 0 && value <= 0xffff) {
    Op(kBinInt2);
    out_->push_back(static_cast<char>(value & 0xff));
    out_->push_back(static_cast<char>(value >> 8));
  } else if (value >= std::numeric_limits<int32_t>::min() &&
             value <= std::numeric_limits<int32_t>::max()) {
    Op(kBinInt);
    Uint32(static_cast<uint32_t>(value));
  } else {
    // LONG1: the fewest little-endian two's-complement bytes that keep the sign.
    const auto bits = static_cast<uint64_t>(value);
    int length = 8;
    while (length > 1) {
      const uint64_t top = (bits >> (8 * (length - 1))) & 0xff;
      const uint64_t next_sign = (bits >> (8 * (length - 2) + 7)) & 1;
      if ((top == 0 && next_sign == 0) || (top == 0xff && next_sign == 1)) {
        --length;
      } else {
        break;
      }
    }
    Op(kLong1);
    out_->push_back(static_cast<char>(length));
    for (int i = 0; i < length; ++i) out_->push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  }
  Value();
}

void PickleWriter::UInt(uint64_t value) {
  if (value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    Int(static_cast<int64_t>(value));
    return;
  }
  // The top bit is set: a ninth byte 0 keeps the number positive.
  Op(kLong1);
  out_->push_back('\x09');
  for (int i = 0; i < 8; ++i) out_->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  out_->push_back('\0');
  Value();
}

void PickleWriter::Float(double value) {
  Op(kBinFloat);
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  for (int i = 7; i >= 0; --i) out_->push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  Value();
}

void PickleWriter::String(absl::string_view text) {
  std::string valid;
  AppendEscaped(text, TextEscape::kUtf8, &valid);
  if (valid.size() < 256) {
    Op(kShortBinUnicode);
    out_->push_back(static_cast<char>(valid.size()));
  } else {
    // BINUNICODE takes up to 4 GiB; MemoryViz.js does not know BINUNICODE8.
    Op(kBinUnicode);
    Uint32(static_cast<uint32_t>(
        std::min<size_t>(valid.size(), std::numeric_limits<uint32_t>::max())));
  }
  out_->append(valid, 0, std::min<size_t>(valid.size(), std::numeric_limits<uint32_t>::max()));
  Value();
}

void PickleWriter::BeginList() {
  Op(kEmptyList);
  Op(kMark);
  open_.push_back({Kind::kList});
}

void PickleWriter::BeginDict() {
  Op(kEmptyDict);
  Op(kMark);
  open_.push_back({Kind::kDict});
}

void PickleWriter::BeginTuple() {
  Op(kMark);
  open_.push_back({Kind::kTuple});
}

void PickleWriter::EndList(int64_t memo) {
  CloseBatch(open_.back());
  open_.pop_back();
  if (memo >= 0) {
    Op(kLongBinPut);
    Uint32(static_cast<uint32_t>(memo));
  }
  Value();
}

void PickleWriter::EndDict() { EndList(); }
void PickleWriter::EndTuple() { EndList(); }

void PickleWriter::Get(uint32_t index) {
  if (index <= 0xff) {
    Op(kBinGet);
    out_->push_back(static_cast<char>(index));
  } else {
    Op(kLongBinGet);
    Uint32(index);
  }
  Value();
}

void PickleWriter::Fragment(absl::string_view bytes, size_t values) {
  out_->append(bytes.data(), bytes.size());
  Value(values);
}

}  // namespace gpumem::report
