// SHA-256 against FIPS 180-4 examples and HMAC-SHA256 against all RFC 4231 test cases.
#include "coord/sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "coord/wire.h"

namespace revive::coord {
namespace {

std::string hex(const uint8_t* p, size_t n) {
  std::string s(2 * n, '?');
  hex_encode(p, n, s.data());
  return s;
}

std::string unhex(const std::string& h) {
  std::string out(h.size() / 2, '\0');
  EXPECT_TRUE(hex_decode(h.data(), h.size(), out.data(), out.size()));
  return out;
}

std::string sha(const std::string& m) {
  uint8_t d[kSha256Size];
  sha256(m.data(), m.size(), d);
  return hex(d, sizeof d);
}

std::string hmac(const std::string& k, const std::string& m) {
  uint8_t d[kSha256Size];
  hmac_sha256(k.data(), k.size(), m.data(), m.size(), d);
  return hex(d, sizeof d);
}

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string m;
  for (int i = 0; i < 1000; i++) m.push_back((char)(i * 7));
  for (size_t split : {0, 1, 55, 56, 63, 64, 65, 128, 999}) {
    Sha256 s;
    sha256_init(&s);
    sha256_update(&s, m.data(), split);
    sha256_update(&s, m.data() + split, m.size() - split);
    uint8_t d[kSha256Size];
    sha256_final(&s, d);
    EXPECT_EQ(hex(d, sizeof d), sha(m)) << "split " << split;
  }
}

TEST(HmacSha256, Rfc4231) {
  // Test case 1
  EXPECT_EQ(hmac(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // 2: key shorter than the block
  EXPECT_EQ(hmac("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // 3
  EXPECT_EQ(hmac(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // 4
  EXPECT_EQ(hmac(unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"), std::string(50, '\xcd')),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // 5: truncated output (first 128 bits)
  EXPECT_EQ(hmac(std::string(20, '\x0c'), "Test With Truncation").substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
  // 6: key longer than the block (hashed first)
  EXPECT_EQ(hmac(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  // 7
  EXPECT_EQ(hmac(std::string(131, '\xaa'),
                 "This is a test using a larger than block-size key and a larger than block-size data. "
                 "The key needs to be hashed before being used by the HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256, ConstantTimeCompare) {
  uint8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4}, c[4] = {1, 2, 3, 5};
  EXPECT_TRUE(equal_constant_time(a, b, 4));
  EXPECT_FALSE(equal_constant_time(a, c, 4));
}

}  // namespace
}  // namespace revive::coord
