#include "msched/protocol.h"

#include <cstring>
#include <type_traits>

namespace msched::proto {
namespace {

// Appends each field's bytes.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  template <typename T>
  bool operator()(const T& v) {
    if constexpr (std::is_enum_v<T>) {
      return (*this)(static_cast<std::underlying_type_t<T>>(v));
    } else if constexpr (std::is_same_v<T, bool>) {
      return (*this)(static_cast<uint8_t>(v ? 1 : 0));
    } else {
      static_assert(std::is_integral_v<T>);
      out_->append(reinterpret_cast<const char*>(&v), sizeof v);
      return true;
    }
  }
  bool Text(const std::string& s, size_t max) {
    const uint32_t n = static_cast<uint32_t>(std::min(s.size(), max));
    (*this)(n);
    out_->append(s.data(), n);
    return true;
  }
  bool Name(const std::string& s) { return Text(s, kMaxName); }

 private:
  std::string* out_;
};

// Reads each field, failing on a short payload or a malformed value.
class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  bool operator()(T& v) {
    if constexpr (std::is_enum_v<T>) {
      std::underlying_type_t<T> raw{};
      if (!(*this)(raw)) return false;
      v = static_cast<T>(raw);  // range checked by the message's Validate
      return true;
    } else if constexpr (std::is_same_v<T, bool>) {
      uint8_t raw = 0;
      if (!(*this)(raw) || raw > 1) return false;
      v = raw == 1;
      return true;
    } else {
      static_assert(std::is_integral_v<T>);
      if (in_.size() - pos_ < sizeof v) return false;
      std::memcpy(&v, in_.data() + pos_, sizeof v);
      pos_ += sizeof v;
      return true;
    }
  }
  // Text is clean UTF-8 (newlines and tabs allowed), at most `max` bytes.
  bool Text(std::string& s, size_t max) { return Raw(s, max) && IsCleanText(s, /*multiline=*/true); }
  // A name: clean UTF-8 on one line.
  bool Name(std::string& s) { return Raw(s, kMaxName) && IsCleanText(s, /*multiline=*/false); }
  bool AtEnd() const { return pos_ == in_.size(); }

 private:
  bool Raw(std::string& s, size_t max) {
    uint32_t n = 0;
    if (!(*this)(n) || n > max || in_.size() - pos_ < n) return false;
    s.assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }

  const std::string& in_;
  size_t pos_ = 0;
};

template <typename M>
Result<Message> DecodeAs(const std::string& payload) {
  M m;
  Reader r(payload);
  if (!m.Fields(r) || !r.AtEnd()) {
    return Status::Corruption(std::string("malformed ") + MsgTypeName(M::kType) + " payload (" +
                              std::to_string(payload.size()) + " bytes)");
  }
  if (Status s = m.Validate(); !s.ok()) return s;
  return Message(std::move(m));
}

// The length of the UTF-8 character that starts at s[i] if it is well formed
// (shortest form, no surrogates, at most U+10FFFF), else 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0, min = 0;
  if ((c & 0xe0) == 0xc0)
    n = 2, cp = c & 0x1f, min = 0x80;
  else if ((c & 0xf0) == 0xe0)
    n = 3, cp = c & 0x0f, min = 0x800;
  else if ((c & 0xf8) == 0xf0)
    n = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

}  // namespace

Status Hello::Validate() const {
  if (static_cast<uint8_t>(job_class) > static_cast<uint8_t>(JobClass::kService)) {
    return Status::Corruption("hello: unknown job class");
  }
  if (priority < kMinPriority || priority > kMaxPriority) return Status::Corruption("hello: priority out of range");
  return Status::Ok();
}

Status Go::Validate() const {
  if (slice_end_ns < start_ns) return Status::Corruption("go: slice ends before it starts");
  return Status::Ok();
}

Status Stop::Validate() const {
  if (static_cast<uint8_t>(reason) > static_cast<uint8_t>(StopReason::kEvictOnly)) {
    return Status::Corruption("stop: unknown reason");
  }
  return Status::Ok();
}

Status Control::Validate() const {
  if (static_cast<uint8_t>(op) > static_cast<uint8_t>(ControlOp::kPriority)) {
    return Status::Corruption("control: unknown operation");
  }
  if (priority < kMinPriority || priority > kMaxPriority) return Status::Corruption("control: priority out of range");
  return Status::Ok();
}

bool IsCleanText(std::string_view text, bool multiline) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (IsControl(c) && !(multiline && (c == '\n' || c == '\t'))) return false;
    const size_t n = Utf8Length(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string SanitizeName(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    const size_t n = Utf8Length(name, i);
    const bool keep = n > 0 && !IsControl(static_cast<unsigned char>(name[i]));
    const size_t take = keep ? n : 1;  // bytes read, and bytes written ('?' for one bad byte)
    if (out.size() + take > kMaxName) break;
    if (keep) {
      out.append(name.substr(i, take));
    } else {
      out.push_back('?');
    }
    i += take;
  }
  return out;
}

uint32_t MaxPayloadOf(MsgType t) {
  constexpr uint32_t kText = 4;          // a text's length field
  constexpr uint32_t kCounters = 5 * 8;  // JobCounters
  switch (t) {
    case MsgType::kHello: return 4 * 8 + 4 + 1 + kText + kMaxName;
    case MsgType::kUsage: return 3 * 8 + kCounters;
    case MsgType::kSliceEnd: return 8;
    case MsgType::kIdle: return 8 + 1;
    case MsgType::kStopped: return 5 * 8 + kCounters;
    case MsgType::kGoodbye: return 8 + kCounters;
    case MsgType::kWelcome: return 8 + 4 + 1 + 8;
    case MsgType::kRefused: return kText + kMaxReason;
    case MsgType::kGo: return 4 * 8 + 1;
    case MsgType::kStop: return 8 + 1;
    case MsgType::kBudget: return 2 * 8;
    case MsgType::kControl: return 1 + 8 + 4;
    case MsgType::kControlReply: return kMaxPayload;
  }
  return 0;
}

const char* MsgTypeName(MsgType t) {
  switch (t) {
    case MsgType::kHello: return "hello";
    case MsgType::kUsage: return "usage";
    case MsgType::kSliceEnd: return "slice-end";
    case MsgType::kIdle: return "idle";
    case MsgType::kStopped: return "stopped";
    case MsgType::kGoodbye: return "goodbye";
    case MsgType::kWelcome: return "welcome";
    case MsgType::kRefused: return "refused";
    case MsgType::kGo: return "go";
    case MsgType::kStop: return "stop";
    case MsgType::kBudget: return "budget";
    case MsgType::kControl: return "control";
    case MsgType::kControlReply: return "control-reply";
  }
  return "unknown";
}

std::string Encode(const Message& m) {
  return std::visit(
      [](const auto& msg) {
        std::string payload;
        Writer w(&payload);
        auto fields = msg;  // Fields() serves reading and writing, so it is not const
        fields.Fields(w);
        std::string frame;
        Writer h(&frame);
        h(kMagic);
        h(kVersion);
        h(static_cast<uint16_t>(std::decay_t<decltype(msg)>::kType));
        h(static_cast<uint32_t>(payload.size()));
        return frame + payload;
      },
      m);
}

MsgType TypeOf(const Message& m) {
  return std::visit([](const auto& msg) { return std::decay_t<decltype(msg)>::kType; }, m);
}

Result<Header> DecodeHeader(const uint8_t (&bytes)[kHeaderSize]) {
  uint32_t magic, size;
  uint16_t version, type;
  std::memcpy(&magic, bytes, 4);
  std::memcpy(&version, bytes + 4, 2);
  std::memcpy(&type, bytes + 6, 2);
  std::memcpy(&size, bytes + 8, 4);
  if (magic != kMagic) return Status::Corruption("not an msched coordinator frame (bad magic)");
  if (version != kVersion) {
    return Status::Corruption("protocol version " + std::to_string(version) + " (this msched speaks " +
                              std::to_string(kVersion) + "): mixed msched versions?");
  }
  if (type < static_cast<uint16_t>(MsgType::kHello) || type > static_cast<uint16_t>(MsgType::kControlReply)) {
    return Status::Corruption("unknown message type " + std::to_string(type));
  }
  const MsgType t = static_cast<MsgType>(type);
  if (size > MaxPayloadOf(t)) {
    return Status::Corruption("a " + std::string(MsgTypeName(t)) + " payload of " + std::to_string(size) +
                              " bytes is too large");
  }
  return Header{t, size};
}

Result<Message> DecodePayload(const Header& header, const std::string& payload) {
  switch (header.type) {
    case MsgType::kHello: return DecodeAs<Hello>(payload);
    case MsgType::kUsage: return DecodeAs<Usage>(payload);
    case MsgType::kSliceEnd: return DecodeAs<SliceEnd>(payload);
    case MsgType::kIdle: return DecodeAs<Idle>(payload);
    case MsgType::kStopped: return DecodeAs<Stopped>(payload);
    case MsgType::kGoodbye: return DecodeAs<Goodbye>(payload);
    case MsgType::kWelcome: return DecodeAs<Welcome>(payload);
    case MsgType::kRefused: return DecodeAs<Refused>(payload);
    case MsgType::kGo: return DecodeAs<Go>(payload);
    case MsgType::kStop: return DecodeAs<Stop>(payload);
    case MsgType::kBudget: return DecodeAs<Budget>(payload);
    case MsgType::kControl: return DecodeAs<Control>(payload);
    case MsgType::kControlReply: return DecodeAs<ControlReply>(payload);
  }
  return Status::Corruption("unknown message type");
}

}  // namespace msched::proto
