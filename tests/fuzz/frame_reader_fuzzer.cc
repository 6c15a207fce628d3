// Fuzzes msched::FrameReader (src/coord/unix_socket.h): the input is a byte
// stream cut into chunks of the sizes its first bytes choose, appended one
// by one with Next() drained after each, as mschedd reads a socket.
#include <cstdlib>
#include <string>

#include "coord/unix_socket.h"
#include "msched/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // Byte 0: how many chunk sizes follow (up to 15); each size byte 0 means 1.
  size_t nsizes = data[0] & 0x0f;
  if (1 + nsizes > size) nsizes = size - 1;
  const uint8_t* sizes = data + 1;
  const char* stream = reinterpret_cast<const char*>(data + 1 + nsizes);
  const size_t stream_size = size - 1 - nsizes;

  msched::FrameReader reader;
  std::string accepted;
  size_t pos = 0, chunk = 0;
  while (pos < stream_size) {
    size_t n = stream_size;
    if (nsizes != 0) n = sizes[chunk++ % nsizes] == 0 ? 1 : sizes[(chunk - 1) % nsizes];
    if (n > stream_size - pos) n = stream_size - pos;
    reader.Append(stream + pos, n);
    pos += n;
    for (;;) {
      auto next = reader.Next();
      if (!next.ok()) return 0;  // a malformed frame: the connection is dropped
      if (!next->has_value()) break;
      accepted += msched::proto::Encode(**next);
    }
  }
  // Frames that were accepted are the stream's prefix, byte for byte.
  if (accepted.compare(0, std::string::npos, stream, accepted.size()) != 0) std::abort();
  return 0;
}
