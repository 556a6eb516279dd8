#include "core/trace_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/trace_framing.h"

namespace gpumem {
namespace {

using framing::DecodeVarint;
using framing::IsFrameTag;
using framing::kEventRefTag;
using framing::kMaxVarintBytes;
using framing::StartsLikeHeader;
using framing::VarintResult;

// Read at a time (a packet longer than this grows the buffer to hold it). Small: the buffer is
// written by the kernel's copy and read once, and a 4 MiB one held 4 MiB more of each open trace
// (8 MiB of `gpumem report --growth`'s peak, which opens the trace twice) and pushed the reader's
// and the replay's tables out of a 2 MiB L2 cache at each refill; the thousand reads more of a
// 70 MB trace cost about a millisecond.
constexpr size_t kChunkBytes = 64 << 10;
// libprotobuf refuses messages of 2 GiB or more; a longer length can only be garbage.
constexpr uint64_t kMaxPacketBytes = (uint64_t{1} << 31) - 1;

std::string ByteText(uint8_t byte) {
  char text[8];
  std::snprintf(text, sizeof(text), "0x%02x", byte);
  return text;
}

}  // namespace

TraceReader::~TraceReader() {
  if (fd_ >= 0) close(fd_);
}

bool TraceReader::Open(const std::string& path, std::string* error) {
  path_ = path;
  auto fail = [&](TraceEnd::Kind kind, const std::string& what) {
    end_ = TraceEnd{};
    end_.kind = kind;
    end_.message = path_ + ": " + what;
    finished_ = true;
    if (error != nullptr) *error = end_.message;
    return false;
  };
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It is refused just
  // below; for a regular file the flag means nothing, and it is cleared anyway.
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) return fail(TraceEnd::Kind::kIoError, std::strerror(errno));
  struct stat info;
  if (fstat(fd_, &info) != 0) return fail(TraceEnd::Kind::kIoError, std::strerror(errno));
  if (S_ISDIR(info.st_mode)) return fail(TraceEnd::Kind::kIoError, "is a directory");
  if (!S_ISREG(info.st_mode)) return fail(TraceEnd::Kind::kIoError, "not a regular file");
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  file_size_ = static_cast<uint64_t>(info.st_size);
  if (file_size_ == 0) {
    return fail(TraceEnd::Kind::kEmpty, "empty trace: the recorded process wrote nothing");
  }
  posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  Reserve(std::min<uint64_t>(kChunkBytes, file_size_));

  // Read the header now, so that a file that is no trace at all fails here, with one message.
  switch (ReadFrame(&first_)) {
    case Frame::kPacket:
      have_first_ = true;
      return true;
    case Frame::kEndOfFile:  // not for a first frame: an all-zero file is kEmpty
    case Frame::kDamaged:
      finished_ = true;
      if (end_.kind == TraceEnd::Kind::kTorn) return true;  // a header cut short: Next() says so
      if (error != nullptr) *error = end_.message;
      return false;
  }
  return false;
}

bool TraceReader::NextFramed(Packet* out) {
  if (have_first_) {
    have_first_ = false;
    *out = first_;
    return true;
  }
  if (finished_) return false;
  if (ReadFrame(out) == Frame::kPacket) return true;
  finished_ = true;
  return false;
}

void TraceReader::Fail(TraceEnd::Kind kind, uint64_t offset, const std::string& what) {
  // A read error explains whatever follows from it (a short packet, a missing tail).
  if (end_.kind == TraceEnd::Kind::kIoError) return;
  end_.kind = kind;
  end_.offset = offset;
  end_.unread_bytes = file_size_ > offset ? file_size_ - offset : 0;
  end_.message = path_ + ": " + what;
}

size_t TraceReader::Fill(size_t n) {
  if (limit_ - pos_ >= n) return limit_ - pos_;
  // Move the unread bytes to the front, then read after them.
  std::memmove(buffer_.data(), buffer_.data() + pos_, limit_ - pos_);
  buffer_offset_ += pos_;
  limit_ -= pos_;
  pos_ = 0;
  if (Capacity() < n) Reserve(std::max(n, kChunkBytes));
  while (limit_ < n) {
    const uint64_t read_at = buffer_offset_ + limit_;
    if (read_at >= file_size_) break;
    const size_t want = std::min<uint64_t>(Capacity() - limit_, file_size_ - read_at);
    const ssize_t got = pread(fd_, buffer_.data() + limit_, want, static_cast<off_t>(read_at));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      Fail(TraceEnd::Kind::kIoError, read_at,
           "read failed at byte " + std::to_string(read_at) + ": " + std::strerror(errno));
      file_size_ = read_at;  // nothing more can be read
      break;
    }
    if (got == 0) {
      file_size_ = read_at;  // the file shrank since Open(); its end is here now
      break;
    }
    limit_ += static_cast<size_t>(got);
  }
  return limit_ - pos_;
}

bool TraceReader::SkipZeros() {
  const uint64_t start = Position();
  for (;;) {
    size_t i = pos_;
    // Eight bytes at a time: the zero tail of a crashed trace can be most of the file.
    while (i + sizeof(uint64_t) <= limit_) {
      uint64_t word;
      std::memcpy(&word, buffer_.data() + i, sizeof(word));
      if (word != 0) break;
      i += sizeof(word);
    }
    while (i < limit_ && buffer_[i] == 0) ++i;
    pos_ = i;
    if (pos_ < limit_) break;
    if (Position() >= file_size_) break;
    // Preallocated space is often a hole in a sparse file: jump to the next data directly.
    const off_t data = lseek(fd_, static_cast<off_t>(Position()), SEEK_DATA);
    if (data < 0 && errno == ENXIO) {
      buffer_offset_ = file_size_;
      pos_ = limit_ = 0;
      break;
    }
    if (data > static_cast<off_t>(Position())) {
      buffer_offset_ = std::min<uint64_t>(static_cast<uint64_t>(data), file_size_);
      pos_ = limit_ = 0;
    }
    if (Fill(1) == 0) break;
  }
  zero_bytes_skipped_ += Position() - start;
  return pos_ < limit_;
}

size_t TraceReader::PeekAt(uint64_t offset, char* out, size_t size) {
  size_t done = 0;
  while (done < size && offset + done < file_size_) {
    const size_t want = std::min<uint64_t>(size - done, file_size_ - offset - done);
    const ssize_t got = pread(fd_, out + done, want, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

bool TraceReader::FrameAt(uint64_t offset, uint64_t* end) {
  char prefix[1 + kMaxVarintBytes];
  const size_t have = PeekAt(offset, prefix, sizeof(prefix));
  if (have < 2 || !IsFrameTag(static_cast<uint8_t>(prefix[0]))) return false;
  uint64_t length = 0;
  size_t varint_bytes = 0;
  if (DecodeVarint(prefix + 1, have - 1, &length, &varint_bytes) != VarintResult::kOk) return false;
  if (length > kMaxPacketBytes || length > file_size_ - offset - 1 - varint_bytes) return false;
  *end = offset + 1 + varint_bytes + length;
  return true;
}

uint64_t TraceReader::NextNonZero(uint64_t offset) {
  char chunk[64 << 10];
  while (offset < file_size_) {
    const off_t data = lseek(fd_, static_cast<off_t>(offset), SEEK_DATA);  // skip holes at once
    if (data < 0 && errno == ENXIO) return file_size_;
    if (data > static_cast<off_t>(offset)) offset = static_cast<uint64_t>(data);
    const size_t have = PeekAt(offset, chunk, sizeof(chunk));
    if (have == 0) return file_size_;
    for (size_t i = 0; i < have; ++i) {
      if (chunk[i] != 0) return offset + i;
    }
    offset += have;
  }
  return file_size_;
}

bool TraceReader::FindNextIntactPacket(uint64_t damaged, int min_packets, uint64_t* resume) {
  // Three packets in a row, each followed by zeros or the next tag, do not happen by chance
  // inside the remains of a half-written packet.
  constexpr int kChainLength = 3;
  char chunk[64 << 10];
  for (uint64_t base = damaged + 1; base < file_size_;) {
    const size_t have = PeekAt(base, chunk, sizeof(chunk));
    if (have == 0) return false;
    for (size_t i = 0; i < have; ++i) {
      if (!IsFrameTag(static_cast<uint8_t>(chunk[i]))) continue;
      const uint64_t candidate = base + i;
      uint64_t at = candidate;
      int intact = 0;
      uint64_t end = 0;
      while (intact < kChainLength && FrameAt(at, &end)) {
        ++intact;
        at = NextNonZero(end);
        if (at >= file_size_) break;
      }
      if (intact >= kChainLength || (at >= file_size_ && intact >= min_packets)) {
        *resume = candidate;
        return true;
      }
    }
    base += have;
  }
  return false;
}

void TraceReader::AddSkippedToMessage() {
  if (end_.skipped_regions == 0) return;
  const std::string skipped = "corrupt data at byte " + std::to_string(end_.first_skipped_offset) +
                              ": skipped " + std::to_string(end_.skipped_bytes) +
                              " damaged bytes in " + std::to_string(end_.skipped_regions) +
                              " place(s) to the next intact packet";
  end_.message = end_.message.empty() ? path_ + ": " + skipped : end_.message + "; also " + skipped;
}

TraceReader::Frame TraceReader::ReadFrame(Packet* out) {
  if (TakeShortPacket(out)) return Frame::kPacket;
  const bool first = packets_read_ == 0;
  for (;;) {
    const uint64_t last_packet_end = Position();
    if (Fill(1) == 0 || !SkipZeros()) return EndOfPackets(first, last_packet_end);

    const uint64_t offset = Position();
    const uint64_t rest = file_size_ - offset;
    FrameCheck check = CheckFrame(offset, rest);
    if (first && check.ends_in_length) return NotATrace(offset, "file too short to hold a header");
    if (check.what.empty()) {
      const size_t total = static_cast<size_t>(1 + check.varint_bytes + check.length);
      if (Fill(total) < total) {  // the file shrank while we read it
        check.damage = TraceEnd::Kind::kTorn;
        check.what = "torn packet" + AtByte(offset) + ": the file ended while reading it (last " +
                     std::to_string(rest) + " bytes unreadable)";
      } else {
        const char* body = buffer_.data() + pos_ + 1 + check.varint_bytes;
        if (first && !StartsLikeHeader(body, check.length, check.length)) {
          return NotATrace(offset, "no header packet");
        }
        TakePacket(out, offset, body, check.length, total, static_cast<uint8_t>(buffer_[pos_]));
        return Frame::kPacket;
      }
    }

    if (first) {
      if (!IsCutHeader(check, rest)) return NotATrace(offset, "no header packet");
    } else if (SkipToIntactPacket(offset, check.damage)) {
      continue;
    }
    Fail(check.damage, offset, check.what);
    AddSkippedToMessage();
    return Frame::kDamaged;
  }
}

TraceReader::Frame TraceReader::EndOfPackets(bool first, uint64_t last_packet_end) {
  if (end_.kind == TraceEnd::Kind::kIoError) return Frame::kDamaged;
  if (first) {
    Fail(TraceEnd::Kind::kEmpty, 0,
         "empty trace: the recorded process wrote nothing (" + std::to_string(file_size_) +
             " zero bytes)");
    return Frame::kDamaged;
  }
  if (last_packet_end < file_size_) {
    end_.kind = TraceEnd::Kind::kZeroTail;
    end_.zero_tail_offset = last_packet_end;
    end_.zero_tail_bytes = file_size_ - last_packet_end;
  }
  AddSkippedToMessage();
  return Frame::kEndOfFile;
}

// Built only on failure: the success path allocates nothing.
std::string TraceReader::AtByte(uint64_t offset) { return " at byte " + std::to_string(offset); }

TraceReader::FrameCheck TraceReader::CheckFrame(uint64_t offset, uint64_t rest) {
  FrameCheck check;
  const uint8_t tag = static_cast<uint8_t>(buffer_[pos_]);
  if (!IsFrameTag(tag)) {
    check.what = "corrupt data" + AtByte(offset) + ": byte " + ByteText(tag) +
                 " is neither zero padding nor a packet tag (last " + std::to_string(rest) +
                 " bytes not read)";
    return check;
  }
  const size_t available = Fill(1 + kMaxVarintBytes);
  switch (
      DecodeVarint(buffer_.data() + pos_ + 1, available - 1, &check.length, &check.varint_bytes)) {
    case VarintResult::kOk:
      if (check.length > rest - 1 - check.varint_bytes) {
        check.damage = TraceEnd::Kind::kTorn;
        check.what = "torn packet" + AtByte(offset) + ": its length (" +
                     std::to_string(check.length) + " bytes) runs past the end of the file (last " +
                     std::to_string(rest) + " bytes unreadable)";
      } else if (check.length > kMaxPacketBytes) {
        check.what = "corrupt data" + AtByte(offset) + ": packet length " +
                     std::to_string(check.length) + " is beyond protobuf's 2 GiB limit (last " +
                     std::to_string(rest) + " bytes not read)";
      }
      break;
    case VarintResult::kTruncated:  // Fill() stopped short: the file ends inside the varint
      check.ends_in_length = true;
      check.damage = TraceEnd::Kind::kTorn;
      check.what = "torn packet" + AtByte(offset) + ": the file ends inside its length (last " +
                   std::to_string(rest) + " bytes unreadable)";
      break;
    case VarintResult::kTooLong:
      check.what = "corrupt data" + AtByte(offset) + ": malformed packet length (last " +
                   std::to_string(rest) + " bytes not read)";
      break;
  }
  return check;
}

TraceReader::Frame TraceReader::NotATrace(uint64_t offset, const std::string& why) {
  Fail(TraceEnd::Kind::kNotATrace, offset, "not a gpumem trace (" + why + AtByte(offset) + ")");
  return Frame::kDamaged;
}

bool TraceReader::IsCutHeader(const FrameCheck& check, uint64_t rest) {
  // A header cut short is still a trace (what there is of it must look like a header).
  if (check.damage != TraceEnd::Kind::kTorn) return false;
  const size_t have = Fill(std::min<uint64_t>(rest, kChunkBytes));
  const size_t prefix = 1 + check.varint_bytes;
  return have > prefix &&
         StartsLikeHeader(buffer_.data() + pos_ + prefix, have - prefix, check.length);
}

bool TraceReader::SkipToIntactPacket(uint64_t offset, TraceEnd::Kind damage) {
  // A torn packet is normally the last thing in the file; anything intact after the damage must
  // be a longer chain to count, so the remains of a cut packet are not taken for one.
  uint64_t resume = 0;
  const int min_packets = damage == TraceEnd::Kind::kTorn ? 2 : 1;
  if (!FindNextIntactPacket(offset, min_packets, &resume)) return false;
  if (end_.skipped_regions++ == 0) end_.first_skipped_offset = offset;
  end_.skipped_bytes += resume - offset;
  buffer_offset_ = resume;
  pos_ = limit_ = 0;
  return true;
}

}  // namespace gpumem
