// Packet framing for gpumem trace files: turns a file into the byte ranges of its complete
// `TracePacket`s and says how the file ended. Knows nothing about the packets' contents beyond the
// first byte of the header; report/trace/trace_file.h parses them with libprotobuf.
//
// The file is a sequence of `Trace.packet` fields (core/trace.proto): the tag byte 0x0A, a varint
// length, then the packet; from format 2 also `Trace.event_ref` fields (tag 0x12), framed alike.
// Zero bytes between packets are preallocated space nobody filled and are skipped. A process that
// crashed leaves no footer, possibly a last packet cut short, and usually zeros. Threads append
// concurrently, so a writer killed half-way through its copy can also leave a damaged packet in the
// middle, followed by intact ones: on such damage the reader looks for the next offset where a
// chain of intact packets starts, skips to it, and reports what it skipped. Reads in chunks, so a
// file of any size is read in bounded memory (the buffer grows only to hold the largest single
// packet).
//
// libc only: this file is part of core/, which must not depend on protobuf or Abseil.
#ifndef GPUMEM_CORE_TRACE_READER_H_
#define GPUMEM_CORE_TRACE_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/trace_framing.h"

namespace gpumem {

// Readable bytes that follow every Packet's `bytes` (not part of it): the analyzer's hot decoders
// load eight bytes at a time near a packet's end instead of testing the end at every byte.
inline constexpr size_t kPacketReadSlack = 16;

// One complete packet of the file: a TracePacket, or an EventRef.
struct Packet {
  std::string_view bytes;    // the message, without tag and length; valid until the next call to
                             // TraceReader::Next(); kPacketReadSlack readable bytes follow it
  uint64_t offset = 0;       // byte offset of the packet's tag in the file
  bool event_ref = false;    // an EventRef (tag 0x12) or compact_ref, not a TracePacket (0x0A)
  bool compact_ref = false;  // a compact_ref (tag 0x1A, format 3)
};

// How reading ended; meaningful once TraceReader::Next() returned false (or Open() failed).
struct TraceEnd {
  enum class Kind {
    kClean,      // the file ends right after a complete packet
    kZeroTail,   // the file ends in zero bytes that no packet filled (see zero_tail_offset)
    kTorn,       // the last packet's length runs past the end of the file
    kCorrupt,    // a byte that is neither 0 nor the packet tag, or a malformed length varint
    kNotATrace,  // the file does not begin with a gpumem header packet
    kEmpty,      // zero-length or all-zero file: the recorded process wrote nothing
    kIoError,    // open/read failed (errno text in message)
  };
  Kind kind = Kind::kClean;
  uint64_t offset = 0;            // kTorn / kCorrupt: offset of the bad packet or byte
  uint64_t unread_bytes = 0;      // kTorn / kCorrupt: bytes from `offset` to the end of the file
  uint64_t zero_tail_offset = 0;  // kZeroTail: where the trailing zeros begin
  uint64_t zero_tail_bytes = 0;   // kZeroTail: how many there are
  // Damage in the middle of the file that the reader skipped over to the next intact packet.
  uint64_t skipped_regions = 0;
  uint64_t skipped_bytes = 0;
  uint64_t first_skipped_offset = 0;
  // One line, "<path>: <what> at byte <N> ..."; names the end's problem first, then any skipped
  // region. Empty when ok().
  std::string message;

  // True when every byte of the file was accounted for (packets or unused zero space).
  bool ok() const {
    return (kind == Kind::kClean || kind == Kind::kZeroTail) && skipped_regions == 0;
  }
};

class TraceReader {
 public:
  TraceReader() = default;
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // Opens `path` and checks that it begins with a header packet. On failure returns false, sets
  // *error to one line naming the path (also end().message) and end().kind to kIoError, kEmpty or
  // kNotATrace. A file cut inside its header packet (what there is starts like a header) opens
  // fine; Next() then returns false with end() saying what was cut.
  bool Open(const std::string& path, std::string* error);

  // The next complete packet in file order, skipping zeros and, after damage in the middle, to the
  // next intact packet. Returns false at the end of the file or at damage with nothing intact
  // after it; end() then says which.
  bool Next(Packet* out) {
    // Nearly every packet is framed inline (TakeShortPacket): a call per packet costs as much.
    if (!have_first_ && !finished_ && TakeShortPacket(out)) return true;
    return NextFramed(out);
  }

  const TraceEnd& end() const { return end_; }
  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t packets_read() const { return packets_read_; }
  // Zero bytes skipped so far, between packets and at the end.
  uint64_t zero_bytes_skipped() const { return zero_bytes_skipped_; }

 private:
  enum class Frame { kPacket, kEndOfFile, kDamaged };

  // What framing found at one offset: an intact packet's length (what empty), or its damage.
  struct FrameCheck {
    TraceEnd::Kind damage = TraceEnd::Kind::kCorrupt;
    std::string what;  // one line saying what is damaged; empty for an intact frame
    uint64_t length = 0;
    size_t varint_bytes = 0;
    bool ends_in_length = false;  // the file ends inside the length varint
  };

  // The next packet, the end of the file, or damage (end_ says which).
  Frame ReadFrame(Packet* out);
  // The packet at the current position when it is the common case (one-byte length, all in the
  // buffer); false for anything else, having read nothing.
  bool TakeShortPacket(Packet* out) {
    // The tag right here, a one-byte length, the whole packet in the buffer and inside the file.
    // Anything else (zeros, a longer length, the end of the buffer, damage, the header) goes the
    // careful way of ReadFrame.
    if (packets_read_ == 0 || limit_ - pos_ < 2) return false;
    const auto tag = static_cast<uint8_t>(buffer_[pos_]);
    if (!framing::IsFrameTag(tag)) return false;
    const auto length = static_cast<uint8_t>(buffer_[pos_ + 1]);
    const size_t total = 2 + size_t{length};
    if (length >= 0x80 || limit_ - pos_ < total || Position() + total > file_size_) return false;
    TakePacket(out, Position(), buffer_.data() + pos_ + 2, length, total, tag);
    return true;
  }
  // Next() for what TakeShortPacket() does not take.
  bool NextFramed(Packet* out);
  void TakePacket(Packet* out, uint64_t offset, const char* body, uint64_t length, size_t total,
                  uint8_t tag) {
    out->bytes = std::string_view(body, length);
    out->offset = offset;
    out->compact_ref = tag == framing::kCompactRefTag;
    out->event_ref = tag == framing::kEventRefTag || out->compact_ref;
    pos_ += total;
    ++packets_read_;
  }
  // Only zeros are left after `last_packet_end`: the end of the file, or an empty trace.
  Frame EndOfPackets(bool first, uint64_t last_packet_end);
  // The tag and length at the current position, `offset` in the file, `rest` bytes before its end.
  FrameCheck CheckFrame(uint64_t offset, uint64_t rest);
  static std::string AtByte(uint64_t offset);
  Frame NotATrace(uint64_t offset, const std::string& why);
  // Whether damage at the start of the file is a header cut short (still a trace).
  bool IsCutHeader(const FrameCheck& check, uint64_t rest);
  // After damage at `offset`, moves to the next intact packet if there is one (noting what was
  // skipped); false if there is none.
  bool SkipToIntactPacket(uint64_t offset, TraceEnd::Kind damage);
  // After damage at `damaged`, the first later offset where at least `min_packets` intact packets
  // follow one another (or fewer, then the end of the file). False if there is none.
  bool FindNextIntactPacket(uint64_t damaged, int min_packets, uint64_t* resume);
  // Whether a packet is framed at `offset` (tag, length, fits the file); *end is one past it.
  bool FrameAt(uint64_t offset, uint64_t* end);
  // The first offset at or after `offset` holding a non-zero byte, or file_size_.
  uint64_t NextNonZero(uint64_t offset);
  // Copies up to `size` bytes at `offset` without moving the read position.
  size_t PeekAt(uint64_t offset, char* out, size_t size);
  void AddSkippedToMessage();
  // Skips zero bytes from the current position; returns false at end of file.
  bool SkipZeros();
  // Makes at least `n` bytes available from the current position (fewer only at end of file);
  // returns how many are available.
  size_t Fill(size_t n);
  uint64_t Position() const { return buffer_offset_ + pos_; }
  // What the buffer may hold of the file: its size less the slack kept after it.
  size_t Capacity() const {
    return buffer_.size() > kPacketReadSlack ? buffer_.size() - kPacketReadSlack : 0;
  }
  void Reserve(size_t capacity) { buffer_.resize(capacity + kPacketReadSlack); }
  void Fail(TraceEnd::Kind kind, uint64_t offset, const std::string& what);

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  std::vector<char> buffer_;    // the file's bytes, then at least kPacketReadSlack more
  uint64_t buffer_offset_ = 0;  // file offset of buffer_[0]
  size_t pos_ = 0;              // next unread byte in buffer_
  size_t limit_ = 0;            // one past the last valid byte in buffer_
  uint64_t packets_read_ = 0;
  uint64_t zero_bytes_skipped_ = 0;
  bool have_first_ = false;  // first_ holds the header packet Open() already read
  Packet first_;
  bool finished_ = false;
  TraceEnd end_;
};

}  // namespace gpumem

#endif  // GPUMEM_CORE_TRACE_READER_H_
