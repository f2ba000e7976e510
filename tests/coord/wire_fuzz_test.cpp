// Randomized-mutation fuzzing of the frame decoder: ~100k mutated frames (bit flips, byte sets, inserts,
// deletes, truncations, splices, header length lies) through decode_frame. Run under ASan/UBSan in the
// sanitizer build, so any out-of-bounds read is a failure; in every build each result must be consistent
// (success implies the frame re-validates and all accessors stay inside it).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "coord/wire.h"

namespace revive::coord {
namespace {

std::vector<uint8_t> seed_frame(std::mt19937_64& rng) {
  static const char* const kPayloads[] = {
      "role=proc\npid=12\nhost=n1\nprog=a.out\nrestart=0\nproof=00ff\n",
      "nonce=000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f\n",
      "name=write\nok=1\nimage=/d/ckpt-1/p-1.rimg\nbytes=4096\n",
      "key=ib.lid.3\nvalue=é✓\n",
      "procs=2\ngeneration=3\nstate=idle\np.0.upid=1\np.1.upid=2\n",
      "",
  };
  static const uint16_t kTypes[] = {kHello, kChallenge, kPhaseDone, kPublish, kStatus, kKill};
  size_t i = rng() % 6;
  std::string p = kPayloads[i];
  std::vector<uint8_t> f(kHeaderSize + p.size());
  encode_header(FrameHeader{kTypes[i], 0, (uint32_t)p.size(), (uint32_t)rng()}, f.data());
  memcpy(f.data() + kHeaderSize, p.data(), p.size());
  return f;
}

void mutate(std::vector<uint8_t>& f, std::mt19937_64& rng) {
  int rounds = 1 + (int)(rng() % 4);
  for (int r = 0; r < rounds; r++) {
    size_t n = f.size();
    switch (rng() % 8) {
      case 0: if (n) f[rng() % n] ^= (uint8_t)(1u << (rng() % 8)); break;
      case 1: if (n) f[rng() % n] = (uint8_t)rng(); break;
      case 2: f.insert(f.begin() + (n ? rng() % (n + 1) : 0), (uint8_t)"=\n\0\xff\xc3" "a."[rng() % 7]); break;
      case 3: if (n) f.erase(f.begin() + rng() % n); break;
      case 4: f.resize(n ? rng() % n : 0); break;
      case 5: {  // header length lies about the payload
        if (n >= kHeaderSize) {
          uint32_t len = (uint32_t)(rng() % 3 == 0 ? rng() : (n - kHeaderSize) + rng() % 5 - 2);
          for (int k = 0; k < 4; k++) f[8 + k] = (uint8_t)(len >> (8 * k));
        }
        break;
      }
      case 6: {  // splice a chunk of the frame onto itself
        if (n > 2) {
          size_t a = rng() % n, b = a + rng() % (n - a);
          std::vector<uint8_t> chunk(f.begin() + a, f.begin() + b);
          f.insert(f.begin() + rng() % (n + 1), chunk.begin(), chunk.end());
        }
        break;
      }
      case 7: if (n >= 6) { f[4] = (uint8_t)(rng() % 70); f[5] = 0; } break;  // other types
    }
  }
}

TEST(WireFuzz, HundredThousandMutatedFrames) {
  std::mt19937_64 rng(0x5eed);  // fixed seed: failures reproduce
  size_t ok = 0, refused = 0;
  for (int iter = 0; iter < 100000; iter++) {
    std::vector<uint8_t> f = seed_frame(rng);
    mutate(f, rng);
    // Copy to an exact-size heap block so ASan catches a read one byte past the end.
    std::unique_ptr<uint8_t[]> exact(new uint8_t[f.size() + 1]);
    memcpy(exact.get(), f.data(), f.size());
    FrameHeader h;
    Payload p;
    size_t used = 0;
    WireErr e = decode_frame(exact.get(), f.size(), &h, &p, &used);
    if (e == WireErr::kOk) {
      ok++;
      ASSERT_LE(used, f.size());
      ASSERT_EQ(used, kHeaderSize + h.length);
      ASSERT_NE(msg_type_name(h.type), nullptr);
      size_t pos = 0;
      Field fl;
      size_t total = 0;
      while (p.next(&pos, &fl)) {
        ASSERT_TRUE(valid_key(fl.key, fl.key_len));
        ASSERT_TRUE(valid_value(fl.value, fl.value_len));
        total += fl.key_len + fl.value_len + 2;
        char buf[128];
        std::string k(fl.key, fl.key_len);
        p.get_str(k.c_str(), buf, sizeof buf);
        uint64_t u;
        p.get_u64(k.c_str(), &u);
      }
      ASSERT_EQ(total, h.length);
    } else {
      refused++;
    }
  }
  // Both outcomes must occur, or the mutator is not exercising the decoder.
  EXPECT_GT(ok, 1000u);
  EXPECT_GT(refused, 10000u);
}

}  // namespace
}  // namespace revive::coord
