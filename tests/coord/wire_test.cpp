// Wire protocol: round trips and every malformed case the decoder must refuse.
#include "coord/wire.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace revive::coord {
namespace {

// A raw frame with an arbitrary header and payload (for building bad frames).
std::vector<uint8_t> raw(uint16_t type, const std::string& payload, uint16_t flags = 0, uint32_t seq = 7) {
  std::vector<uint8_t> f(kHeaderSize + payload.size());
  encode_header(FrameHeader{type, flags, (uint32_t)payload.size(), seq}, f.data());
  memcpy(f.data() + kHeaderSize, payload.data(), payload.size());
  return f;
}

WireErr decode(const std::vector<uint8_t>& f) {
  FrameHeader h;
  Payload p;
  size_t used = 0;
  return decode_frame(f.data(), f.size(), &h, &p, &used);
}

TEST(Wire, RoundTrip) {
  uint8_t buf[512];
  uint8_t bin[5] = {0, 1, 0xfe, 0xff, 0x80};
  FrameBuilder b(buf, sizeof buf, kPhaseDone, 42);
  b.add("name", "write").add_u64("ok", 1).add_u64("bytes", UINT64_MAX).add_i64("delta", -17)
      .add("image", "/tmp/ckpt-3/prog-1.rimg").add_hex("blob", bin, sizeof bin).add("utf8", "héllo ✓");
  size_t n = b.finish();
  ASSERT_GT(n, kHeaderSize);
  EXPECT_EQ(0, memcmp(buf, "RVP1", 4));

  FrameHeader h;
  Payload p;
  size_t used = 0;
  ASSERT_EQ(WireErr::kOk, decode_frame(buf, n, &h, &p, &used));
  EXPECT_EQ(used, n);
  EXPECT_EQ(h.type, kPhaseDone);
  EXPECT_EQ(h.seq, 42u);
  EXPECT_EQ(h.flags, 0);
  char s[64];
  ASSERT_TRUE(p.get_str("name", s, sizeof s));
  EXPECT_STREQ(s, "write");
  uint64_t u;
  ASSERT_TRUE(p.get_u64("bytes", &u));
  EXPECT_EQ(u, UINT64_MAX);
  int64_t i;
  ASSERT_TRUE(p.get_i64("delta", &i));
  EXPECT_EQ(i, -17);
  uint8_t back[5];
  ASSERT_TRUE(p.get_hex("blob", back, sizeof back));
  EXPECT_EQ(0, memcmp(back, bin, 5));
  ASSERT_TRUE(p.get_str("utf8", s, sizeof s));
  EXPECT_STREQ(s, "héllo ✓");
  EXPECT_FALSE(p.has("missing"));
  EXPECT_FALSE(p.get_str("image", s, 5));  // does not fit: refused, not truncated
  // Iteration sees every field in order.
  std::vector<std::string> keys;
  size_t pos = 0;
  Field f;
  while (p.next(&pos, &f)) keys.emplace_back(f.key, f.key_len);
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "ok", "bytes", "delta", "image", "blob", "utf8"}));
}

TEST(Wire, HeaderIsLittleEndian) {
  uint8_t h[kHeaderSize];
  encode_header(FrameHeader{0x0102, 0, 0x01020304, 0xa0b0c0d0}, h);
  const uint8_t want[kHeaderSize] = {'R', 'V', 'P', '1', 2, 1, 0, 0, 4, 3, 2, 1, 0xd0, 0xc0, 0xb0, 0xa0};
  EXPECT_EQ(0, memcmp(h, want, kHeaderSize));
}

TEST(Wire, EmptyPayloadAndTwoFramesInOneBuffer) {
  auto a = raw(kCkptRequest, "");
  auto b = raw(kPublish, "key=k\nvalue=\n");
  std::vector<uint8_t> both = a;
  both.insert(both.end(), b.begin(), b.end());
  FrameHeader h;
  Payload p;
  size_t used;
  ASSERT_EQ(WireErr::kOk, decode_frame(both.data(), both.size(), &h, &p, &used));
  EXPECT_EQ(h.type, kCkptRequest);
  EXPECT_EQ(used, kHeaderSize);
  ASSERT_EQ(WireErr::kOk, decode_frame(both.data() + used, both.size() - used, &h, &p, &used));
  EXPECT_EQ(h.type, kPublish);
  const char* v;
  size_t vl;
  ASSERT_TRUE(p.get("value", &v, &vl));
  EXPECT_EQ(vl, 0u);  // empty values are allowed
}

TEST(Wire, Truncated) {
  auto f = raw(kPublish, "key=k\nvalue=v\n");
  for (size_t n = 0; n < f.size(); n++) {
    std::vector<uint8_t> t(f.begin(), f.begin() + n);
    EXPECT_EQ(WireErr::kNoSpace, decode(t)) << n;  // "need more bytes", never a success
  }
}

TEST(Wire, BadHeader) {
  auto f = raw(kPublish, "key=k\nvalue=v\n");
  f[0] = 'X';
  EXPECT_EQ(WireErr::kBadMagic, decode(f));
  EXPECT_EQ(WireErr::kBadFlags, decode(raw(kPublish, "key=k\nvalue=v\n", 1)));
  EXPECT_EQ(WireErr::kUnknownType, decode(raw(999, "")));
  EXPECT_EQ(WireErr::kUnknownType, decode(raw(0, "")));
  // Oversized: refused from the header alone, before anyone reads (or allocates) 1 MiB + 1.
  uint8_t h[kHeaderSize];
  encode_header(FrameHeader{kPublish, 0, kMaxPayload + 1, 0}, h);
  FrameHeader out;
  EXPECT_EQ(WireErr::kTooLarge, decode_header(h, &out));
  encode_header(FrameHeader{kPublish, 0, 0xffffffffu, 0}, h);
  EXPECT_EQ(WireErr::kTooLarge, decode_header(h, &out));
}

TEST(Wire, MaxPayloadAccepted) {
  std::string big = "key=k\nvalue=" + std::string(kMaxPayload - 13, 'x') + "\n";
  ASSERT_EQ(big.size(), kMaxPayload);
  EXPECT_EQ(WireErr::kOk, decode(raw(kPublish, big)));
}

TEST(Wire, BadPayloads) {
  struct Case {
    std::string payload;
    WireErr want;
  } cases[] = {
      {"key=k\nvalue=v", WireErr::kNoNewline},
      {"key=k\nvaluev\n", WireErr::kNoEquals},
      {"\n", WireErr::kNoEquals},
      {"=v\nkey=k\nvalue=v\n", WireErr::kBadKey},
      {"Key=k\nvalue=v\n", WireErr::kBadKey},
      {"ke-y=k\nkey=k\nvalue=v\n", WireErr::kBadKey},
      {"k y=k\nkey=k\nvalue=v\n", WireErr::kBadKey},
      {std::string(65, 'a') + "=1\nkey=k\nvalue=v\n", WireErr::kBadKey},
      {std::string("key=k\nvalue=a\0b\n", 16), WireErr::kBadValue},
      {"key=k\nvalue=\xff\n", WireErr::kBadValue},
      {"key=k\nvalue=\xc0\xaf\n", WireErr::kBadValue},        // overlong '/'
      {"key=k\nvalue=\xed\xa0\x80\n", WireErr::kBadValue},    // surrogate
      {"key=k\nvalue=\xf4\x90\x80\x80\n", WireErr::kBadValue},  // > U+10FFFF
      {"key=k\nvalue=\xe2\x9c\n", WireErr::kBadValue},        // truncated sequence
      {"key=k\nvalue=v\nkey=k2\n", WireErr::kDuplicateKey},
      {"key=k\n", WireErr::kMissingField},
      {"value=v\n", WireErr::kMissingField},
  };
  for (const auto& c : cases) EXPECT_EQ(c.want, decode(raw(kPublish, c.payload))) << c.payload;
  // '=' inside a value is fine: only the first one splits.
  EXPECT_EQ(WireErr::kOk, decode(raw(kPublish, "key=a=b\nvalue==\n")));
}

TEST(Wire, DuplicateKeysInLongPayloads) {
  // Beyond the size of the duplicate-detection table the check must still be exact.
  for (size_t lines : {10, 1500, 1600, 5000}) {
    std::string p;
    for (size_t i = 0; i < lines; i++) p += "p." + std::to_string(i) + ".upid=" + std::to_string(i) + "\n";
    Payload pl;
    EXPECT_EQ(WireErr::kOk, pl.parse(p.data(), p.size())) << lines;
    for (size_t dup : {size_t{0}, lines / 2, lines - 1}) {
      std::string q = p + "p." + std::to_string(dup) + ".upid=x\n";
      EXPECT_EQ(WireErr::kDuplicateKey, pl.parse(q.data(), q.size())) << lines << " dup " << dup;
      std::string r = "p." + std::to_string(dup) + ".upid=x\n" + p;
      EXPECT_EQ(WireErr::kDuplicateKey, pl.parse(r.data(), r.size())) << lines << " dup first " << dup;
    }
  }
}

TEST(Wire, RequiredFieldsPerType) {
  const char* missing = nullptr;
  Payload p;
  ASSERT_EQ(WireErr::kOk, p.parse("role=proc\npid=1\n", 16));
  EXPECT_EQ(WireErr::kMissingField, check_required(kHello, p, &missing));
  EXPECT_STREQ(missing, "proof");
  EXPECT_EQ(WireErr::kMissingField, decode(raw(kChallenge, "")));
  EXPECT_EQ(WireErr::kMissingField, decode(raw(kPhase, "name=write\n")));
  EXPECT_EQ(WireErr::kMissingField, decode(raw(kPhaseDone, "name=write\n")));
  EXPECT_EQ(WireErr::kMissingField, decode(raw(kBye, "")));
  EXPECT_EQ(WireErr::kMissingField, decode(raw(kError, "")));
  EXPECT_EQ(WireErr::kMissingField, decode(raw(kLookup, "wait=1\n")));
  EXPECT_EQ(WireErr::kOk, decode(raw(kKill, "")));
  EXPECT_EQ(WireErr::kOk, decode(raw(kStatusRequest, "")));
}

TEST(Wire, NumbersAreStrict) {
  Payload p;
  std::string s = "a=\nb=-1\nc=18446744073709551616\nd=12x\ne=007\nf=-9223372036854775808\ng=-\n";
  ASSERT_EQ(WireErr::kOk, p.parse(s.data(), s.size()));
  uint64_t u;
  int64_t i;
  EXPECT_FALSE(p.get_u64("a", &u));
  EXPECT_FALSE(p.get_u64("b", &u));
  EXPECT_FALSE(p.get_u64("c", &u));  // overflow
  EXPECT_FALSE(p.get_u64("d", &u));
  EXPECT_TRUE(p.get_u64("e", &u));
  EXPECT_EQ(u, 7u);
  EXPECT_TRUE(p.get_i64("b", &i));
  EXPECT_EQ(i, -1);
  EXPECT_TRUE(p.get_i64("f", &i));
  EXPECT_EQ(i, INT64_MIN);
  EXPECT_FALSE(p.get_i64("g", &i));
  EXPECT_FALSE(p.get_i64("c", &i));
  uint8_t x[2];
  EXPECT_FALSE(p.get_hex("e", x, 2));  // wrong length
}

TEST(Wire, BuilderRefusesWhatDecoderWouldRefuse) {
  uint8_t buf[64];
  EXPECT_EQ(0u, FrameBuilder(buf, sizeof buf, kPublish, 1).add("Bad", "v").finish());
  EXPECT_EQ(0u, FrameBuilder(buf, sizeof buf, kPublish, 1).add("key", "a\nb").finish());
  EXPECT_EQ(0u, FrameBuilder(buf, sizeof buf, kPublish, 1).add("key", "\xff").finish());
  FrameBuilder small(buf, sizeof buf, kPublish, 1);
  small.add("key", std::string(100, 'x').c_str());
  EXPECT_EQ(0u, small.finish());
  EXPECT_EQ(WireErr::kNoSpace, small.error());
  EXPECT_EQ(0u, FrameBuilder(buf, 8, kKill, 1).finish());
}

}  // namespace
}  // namespace revive::coord
