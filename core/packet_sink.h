// What the interning tables need from the recorder: a place to append a finished packet.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpumem {

class PacketSink {
 public:
  virtual bool AppendPacket(const uint8_t* data, size_t size) = 0;

 protected:
  ~PacketSink() = default;
};

}  // namespace gpumem
