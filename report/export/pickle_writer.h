// A small writer of Python pickles (protocol 4), for `gpumem export --format memory-viz`: PyTorch's
// memory snapshot is a pickled dict, read back by Python's `pickle` and by the pickle reader inside
// PyTorch's MemoryViz.js. Only opcodes both readers know are written: PROTO 4, EMPTY_DICT,
// EMPTY_LIST, MARK, SETITEMS, APPENDS, TUPLE, BININT1/BININT2/BININT, LONG1, SHORT_BINUNICODE,
// BINUNICODE, NONE, NEWTRUE, NEWFALSE, BINFLOAT, LONG_BINPUT, BINGET/LONG_BINGET and STOP (no
// FRAME: framing is optional in protocol 4).
//
// Values go in as a stream, the way the pickle machine builds them: BeginList(), the items,
// EndList(); BeginDict(), key, value, key, value, ..., EndDict(). Lists and dicts are written in
// batches of kBatch items (MARK ... APPENDS/SETITEMS), as Python's own pickler does, so that no
// reader has to take one huge batch at once (MemoryViz.js spreads a batch into the arguments of
// one call).
#ifndef GPUMEM_REPORT_EXPORT_PICKLE_WRITER_H_
#define GPUMEM_REPORT_EXPORT_PICKLE_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpumem::report {

class PickleWriter {
 public:
  static constexpr size_t kBatch = 1000;

  // Appends to `*out`, which must outlive the writer.
  explicit PickleWriter(std::string* out) : out_(out) {}

  // The protocol header (PROTO 4): the first thing of a whole pickle, left out of fragments.
  void Protocol();
  // The end of a whole pickle (STOP): exactly one value must have been written.
  void Stop();

  void None();
  void Bool(bool value);
  void Int(int64_t value);
  void UInt(uint64_t value);  // above INT64_MAX: LONG1 of 9 bytes
  void Float(double value);
  // A str. Each byte that is not part of valid UTF-8 becomes the text \xNN
  // (report/format/printable.h): Python would refuse the pickle.
  void String(absl::string_view text);

  // A dict's key and value: String(key), then the value.
  void Item(absl::string_view key, uint64_t value) {
    String(key);
    UInt(value);
  }
  void Item(absl::string_view key, absl::string_view value) {
    String(key);
    String(value);
  }

  void BeginList();
  // Ends the list; with `memo`, also stores it in the memo at that index (LONG_BINPUT) before
  // anything else is written, to be referred to by Get() later.
  void EndList(int64_t memo = -1);
  void BeginDict();  // then key, value, ... (any values; keys are str here)
  void EndDict();
  void BeginTuple();
  void EndTuple();

  // Pushes the memo's value at `index` (BINGET, LONG_BINGET), stored by EndList(index): one object
  // written once and referred to many times.
  void Get(uint32_t index);

  // Appends `values` complete values that another PickleWriter wrote (a fragment without
  // Protocol() or Stop()) as items of the open list or dict.
  void Fragment(absl::string_view bytes, size_t values);

 private:
  enum class Kind { kList, kDict, kTuple };
  struct Open {
    Kind kind;
    size_t values = 0;  // values since the last MARK
  };
  void Op(char op) { out_->push_back(op); }
  void Uint32(uint32_t value);
  // One complete value was written at the current level.
  void Value(size_t count = 1);
  void CloseBatch(const Open& open);

  std::string* out_;
  std::vector<Open> open_;
};

}  // namespace gpumem::report

#endif  // GPUMEM_REPORT_EXPORT_PICKLE_WRITER_H_
