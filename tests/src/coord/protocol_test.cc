#include "msched/protocol.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace msched::proto {
namespace {

Result<Message> Decode(const std::string& frame) {
  if (frame.size() < kHeaderSize) return Status::Corruption("short frame");
  uint8_t header[kHeaderSize];
  std::memcpy(header, frame.data(), kHeaderSize);
  Result<Header> h = DecodeHeader(header);
  if (!h.ok()) return h.status();
  if (frame.size() - kHeaderSize != h->size) return Status::Corruption("size mismatch");
  return DecodePayload(*h, frame.substr(kHeaderSize));
}

std::vector<Message> Samples() {
  Hello hello;
  hello.declared_mem = 8ull << 30;
  hello.allocated = 4096;
  hello.device_total = 16ull << 30;
  hello.now_ns = 123456789;
  hello.priority = -7;
  hello.job_class = JobClass::kShort;
  hello.name = "train.py";
  Welcome welcome;
  welcome.job = 42;
  welcome.slot = 3;
  welcome.admitted = true;
  welcome.idle_yield_ns = 50'000'000;
  Go go;
  go.start_ns = 10, go.budget = 1 << 30, go.slice_end_ns = 20, go.idle_yield_ns = 30, go.load = true;
  Stop stop;
  stop.evict_bytes = kNever, stop.reason = StopReason::kPause;
  Control control;
  control.op = ControlOp::kPriority, control.job = 9, control.priority = 50;
  ControlReply reply;
  reply.ok = true;
  reply.text = "{\n\t\"jobs\": []\n}";
  return {hello,
          Usage{1 << 20, 5, {6, 7}, 3},
          SliceEnd{77},
          Stopped{1, 2, 3, 4, 5, {6, 7, 11, 12, 13}},
          Goodbye{8, {9, 10}},
          welcome,
          Refused{"too big"},
          go,
          stop,
          Budget{99, 3},
          control,
          reply,
          Idle{123, true},
          Idle{456, false}};
}

TEST(ProtocolTest, EveryMessageRoundTrips) {
  for (const Message& m : Samples()) {
    const std::string frame = Encode(m);
    Result<Message> back = Decode(frame);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->index(), m.index());
    EXPECT_EQ(Encode(*back), frame);
  }
  const Hello h = std::get<Hello>(*Decode(Encode(Samples()[0])));
  EXPECT_EQ(h.name, "train.py");
  EXPECT_EQ(h.priority, -7);
  EXPECT_EQ(h.job_class, JobClass::kShort);
  // The job's counters travel with its usage, stops and goodbye.
  const Stopped st = std::get<Stopped>(*Decode(Encode(Samples()[3])));
  EXPECT_EQ(st.load_ns, 5u);
  EXPECT_EQ(st.counters.faults, 6u);
  EXPECT_EQ(st.counters.prefetched, 7u);
  EXPECT_EQ(st.counters.peak_over_budget, 11u);
  EXPECT_EQ(st.counters.shared, 12u);
  EXPECT_EQ(st.counters.unpaged, 13u);
  EXPECT_EQ(std::get<Usage>(*Decode(Encode(Samples()[1]))).counters.prefetched, 7u);
  EXPECT_EQ(std::get<Goodbye>(*Decode(Encode(Samples()[4]))).counters.faults, 9u);
  // The welcome tells the job its idle yield; a job reports going
  // idle, and having work again.
  EXPECT_EQ(std::get<Welcome>(*Decode(Encode(Samples()[5]))).idle_yield_ns, 50'000'000u);
  EXPECT_EQ(std::get<Go>(*Decode(Encode(Samples()[7]))).idle_yield_ns, 30u) << "and each Go the turn's";
  const Idle gone = std::get<Idle>(*Decode(Encode(Samples()[12])));
  EXPECT_EQ(gone.at_ns, 123u);
  EXPECT_TRUE(gone.idle);
  EXPECT_FALSE(std::get<Idle>(*Decode(Encode(Samples()[13]))).idle);
}

TEST(ProtocolTest, HeadersFromAnotherProgramOrVersionAreRejected) {
  std::string frame = Encode(Usage{1, 2, {}});
  std::string bad = frame;
  bad[0] ^= 1;
  EXPECT_NE(Decode(bad).status().message().find("bad magic"), std::string::npos);
  bad = frame;
  bad[4] = 11;  // version
  EXPECT_NE(Decode(bad).status().message().find("protocol version 11"), std::string::npos);
  bad[4] = 9;  // the version before the counters carried the bytes that cannot page: refused as clearly
  EXPECT_NE(Decode(bad).status().message().find("protocol version 9 (this msched speaks 10): mixed msched versions?"),
            std::string::npos);
  bad = frame;
  bad[6] = 99;  // type
  EXPECT_NE(Decode(bad).status().message().find("unknown message type 99"), std::string::npos);
  bad = frame;
  const uint32_t huge = kMaxPayload + 1;
  std::memcpy(bad.data() + 8, &huge, 4);
  uint8_t header[kHeaderSize];
  std::memcpy(header, bad.data(), kHeaderSize);
  EXPECT_FALSE(DecodeHeader(header).ok());
}

TEST(ProtocolTest, MalformedPayloadsAreRejected) {
  auto decode_payload = [](MsgType t, const std::string& payload) { return DecodePayload({t, 0}, payload); };
  const std::string usage = Encode(Usage{1, 2, {}}).substr(kHeaderSize);
  EXPECT_FALSE(decode_payload(MsgType::kUsage, usage.substr(1)).ok()) << "short";
  EXPECT_FALSE(decode_payload(MsgType::kUsage, usage + "x").ok()) << "trailing bytes";
  EXPECT_FALSE(decode_payload(MsgType::kUsage, usage.substr(0, usage.size() - 8)).ok())
      << "a usage report of protocol 4, without the ask";
  EXPECT_FALSE(decode_payload(MsgType::kBudget, Encode(Budget{}).substr(kHeaderSize, 8)).ok())
      << "a budget of protocol 4, without the answer";

  Hello h;
  h.name = std::string("bad\x01name");
  EXPECT_FALSE(Decode(Encode(h)).ok()) << "control character in text";
  h.name = "ok";
  h.priority = 1000;
  EXPECT_NE(Decode(Encode(h)).status().message().find("priority out of range"), std::string::npos);
  h.priority = 0;
  h.job_class = JobClass::kService;
  ASSERT_TRUE(Decode(Encode(h)).ok());
  EXPECT_EQ(std::get<Hello>(*Decode(Encode(h))).job_class, JobClass::kService);
  h.job_class = static_cast<JobClass>(static_cast<uint8_t>(JobClass::kService) + 1);
  EXPECT_NE(Decode(Encode(h)).status().message().find("unknown job class"), std::string::npos);

  Go go;
  go.start_ns = 10, go.slice_end_ns = 5;
  EXPECT_FALSE(Decode(Encode(go)).ok()) << "slice ends before it starts";
  std::string go_frame = Encode(Go{});
  go_frame.back() = 2;  // the bool
  EXPECT_FALSE(Decode(go_frame).ok()) << "a bool must be 0 or 1";
  std::string idle_frame = Encode(Idle{});
  idle_frame.back() = 3;
  EXPECT_FALSE(Decode(idle_frame).ok()) << "an idle report's flag must be 0 or 1";
  EXPECT_FALSE(decode_payload(MsgType::kWelcome, Encode(Welcome{}).substr(kHeaderSize, 13)).ok())
      << "a welcome of protocol 3, without the idle yield";

  Stop stop;
  stop.reason = static_cast<StopReason>(9);
  EXPECT_FALSE(Decode(Encode(stop)).ok());
  Control c;
  c.op = static_cast<ControlOp>(200);
  EXPECT_FALSE(Decode(Encode(c)).ok());

  // A text length that points past the payload.
  std::string refused = Encode(Refused{"abc"}).substr(kHeaderSize);
  const uint32_t n = 1000;
  std::memcpy(refused.data(), &n, 4);
  EXPECT_FALSE(decode_payload(MsgType::kRefused, refused).ok());
}

TEST(ProtocolTest, TextThatIsNotCleanUtf8IsRejected) {
  Hello h;
  for (const char* bad : {"caf\xe9", "bad\x01name", "two\nlines", "\xc0\xaf", "\xed\xa0\x80", "del\x7f"}) {
    h.name = bad;
    EXPECT_FALSE(Decode(Encode(h)).ok()) << "name " << testing::PrintToString(std::string(bad));
  }
  h.name = "caf\xc3\xa9 \xe6\xbc\xa2\xf0\x9f\x9a\x80";  // café, a CJK character and an emoji
  EXPECT_TRUE(Decode(Encode(h)).ok());
  EXPECT_FALSE(Decode(Encode(Refused{"no\xff"})).ok());
  EXPECT_TRUE(Decode(Encode(Refused{"two\nlines\tand a tab"})).ok());
}

TEST(ProtocolTest, SanitizedNamesAlwaysDecode) {
  EXPECT_EQ(SanitizeName("caf\xe9"), "caf?");
  EXPECT_EQ(SanitizeName("bad\x01name"), "bad?name");
  EXPECT_EQ(SanitizeName("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(SanitizeName(std::string(100, 'x')).size(), kMaxName);
  // Cut on a character boundary: 31 two-byte characters fit in 63 bytes, not 32.
  std::string wide;
  for (int i = 0; i < 40; ++i) wide += "\xc3\xa9";
  EXPECT_EQ(SanitizeName(wide).size(), 62u);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 100, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    Hello h;
    h.name = SanitizeName(junk);
    ASSERT_TRUE(Decode(Encode(h)).ok()) << testing::PrintToString(junk);
  }
}

TEST(ProtocolTest, EachTypesSizeLimitIsCheckedFromTheHeaderAlone) {
  for (const Message& m : Samples()) {
    const std::string frame = Encode(m);
    EXPECT_LE(frame.size() - kHeaderSize, MaxPayloadOf(TypeOf(m))) << MsgTypeName(TypeOf(m));
  }
  Hello longest;
  longest.name = std::string(kMaxName, 'n');
  EXPECT_EQ(Encode(longest).size() - kHeaderSize, MaxPayloadOf(MsgType::kHello)) << "the limit is exact";
  for (const Message& m :
       {Message(Usage{}), Message(Stopped{}), Message(Goodbye{}), Message(Welcome{}), Message(Idle{})}) {
    EXPECT_EQ(Encode(m).size() - kHeaderSize, MaxPayloadOf(TypeOf(m))) << MsgTypeName(TypeOf(m)) << ": exact";
  }
  // A hello announcing a megabyte is refused before a byte of it is read.
  std::string frame = Encode(Hello{});
  const uint32_t big = 1 << 20;
  std::memcpy(frame.data() + 8, &big, 4);
  uint8_t header[kHeaderSize];
  std::memcpy(header, frame.data(), kHeaderSize);
  EXPECT_NE(DecodeHeader(header).status().message().find("too large"), std::string::npos);
}

TEST(ProtocolTest, RandomlyCorruptedFramesNeverDecodeToSomethingElse) {
  std::mt19937_64 rng(7);
  const std::vector<Message> samples = Samples();
  size_t accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string frame = Encode(samples[rng() % samples.size()]);
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) frame[rng() % frame.size()] = static_cast<char>(rng());
    if (rng() % 8 == 0) frame.resize(rng() % frame.size());
    Result<Message> m = Decode(frame);
    if (m.ok()) {
      ++accepted;
      EXPECT_EQ(Encode(*m), frame) << "an accepted frame is exactly the encoding of what it decoded to";
    }
  }
  EXPECT_LT(accepted, 20000u);
}

}  // namespace
}  // namespace msched::proto
