// Damaged checkpoints: restart falls back to the newest intact version and says so on stderr; a program
// that does not match the stored data (type, size, keys) gets an error, never a silent partial read.
#include <filesystem>
#include <fstream>

#include "app_util.h"

namespace revive {
namespace {

using testing::ExpectError;
using testing::Opts;
using testing::TmpDir;

std::string Slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void Spit(const std::string& p, const std::string& d) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << d;
}

// Checkpoint `name` over an int "x" and a double[64] "arr", committed.
struct XArr {
  int x = 0;
  double arr[64] = {};
  Checkpoint cp;
  XArr(const TmpDir& t, const char* name, int x0) : x(x0), cp(name, Opts(t)) {
    cp.add("x", &x);
    cp.add("arr", arr, 64);
    cp.commit();
  }
};

// Writes versions 1 and 2 of "bad": x = 100 * version, arr[i] = version + i.
void WriteTwo(const TmpDir& t) {
  XArr w(t, "bad", 0);
  for (int v = 1; v <= 2; ++v) {
    w.x = 100 * v;
    for (int i = 0; i < 64; ++i) w.arr[i] = v + i;
    w.cp.write(v * 10);
  }
}

struct Damage {
  const char* name;
  const char* file;  // in v-2
  std::function<std::string(const std::string&)> apply;
  const char* reason;
};

TEST(BadInput, DamagedNewestVersionFallsBackAndSaysSo) {
  std::vector<Damage> damages = {
      {"bitflip", "arr", [](std::string s) { s[s.size() / 2] ^= 4; return s; }, "checksum mismatch"},
      {"truncated", "arr", [](std::string s) { return s.substr(0, s.size() - 100); }, "truncated"},
      {"empty", "x", [](std::string) { return std::string(); }, "empty"},
      {"foreign", "x", [](std::string) { return std::string("P6\n1 1\n255\n\x01\x02\x03", 14); }, "not a revive"},
      {"old_format", "x", [](std::string s) { s[8] = 0; return s; }, "format version 0"},
      {"manifest", "MANIFEST", [](std::string s) { s[20] ^= 1; return s; }, "manifest checksum"},
      {"missing", "arr", nullptr, "missing"},
  };
  for (const auto& d : damages) {
    SCOPED_TRACE(d.name);
    TmpDir t;
    WriteTwo(t);
    std::string path = t / (std::string("cp/bad/v-2/") + d.file);
    if (d.apply) Spit(path, d.apply(Slurp(path)));
    else std::filesystem::remove(path);
    XArr r(t, "bad", 0);
    int& x = r.x;
    double* arr = r.arr;
    Checkpoint& cp = r.cp;
    int64_t it = 0;
    ::testing::internal::CaptureStderr();
    bool restarted = cp.restart_if_needed(&it);
    std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(restarted);
    EXPECT_EQ(cp.version(), 1u);
    EXPECT_EQ(it, 11);
    EXPECT_EQ(x, 100);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(arr[i], 1 + i);
    EXPECT_NE(err.find("version 2 is unusable"), std::string::npos) << err;
    EXPECT_NE(err.find("falling back"), std::string::npos) << err;
    EXPECT_NE(err.find(path), std::string::npos) << err;
    EXPECT_NE(err.find(d.reason), std::string::npos) << err;
  }
}

TEST(BadInput, VersionCopiedFromAnotherCheckpointIsRefused) {
  TmpDir t;
  WriteTwo(t);
  {
    XArr other(t, "other", 999);
    for (int v = 0; v < 3; ++v) other.cp.write(v);
  }
  std::filesystem::copy(t / "cp/other/v-3", t / "cp/bad/v-3");
  XArr r(t, "bad", 0);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(r.cp.restart_if_needed());
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.x, 200);
  EXPECT_NE(err.find("belongs to checkpoint 'other'"), std::string::npos) << err;
}

TEST(BadInput, EveryVersionDamagedMeansFreshStart) {
  TmpDir t;
  WriteTwo(t);
  for (int v = 1; v <= 2; ++v) Spit(t / ("cp/bad/v-" + std::to_string(v) + "/x"), "garbage");
  XArr r(t, "bad", -7);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(r.cp.restart_if_needed());
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.x, -7);  // untouched: verification happens before anything is read into user memory
  EXPECT_EQ(r.arr[5], 0);
  EXPECT_NE(err.find("version 1 is unusable"), std::string::npos) << err;
  r.cp.write(1);
  EXPECT_EQ(r.cp.version(), 3u);
}

// A payload damaged inside (found only by its checksum, after it streamed into user memory) in every
// version: the newest was read once into memory, so the program's own data is gone and a fresh start
// would run on it: an error naming the damage and the directory, never a silent fresh start.
TEST(BadInput, EveryPayloadDamagedAfterASinglePassReadIsAnError) {
  TmpDir t;
  WriteTwo(t);
  for (int v = 1; v <= 2; ++v) {
    std::string p = t / ("cp/bad/v-" + std::to_string(v) + "/arr");
    std::string d = Slurp(p);
    d[d.size() / 2] ^= 4;
    Spit(p, d);
  }
  XArr r(t, "bad", -7);
  ::testing::internal::CaptureStderr();
  ExpectError([&] { r.cp.restart_if_needed(); }, {"no intact version", "overwrote", "checksum mismatch",
                                                  t / "cp/bad"});
  ::testing::internal::GetCapturedStderr();
}

// The same with a single version: its bytes reached user memory before the checksum failed.
TEST(BadInput, OnlyVersionWithDamagedPayloadIsAnError) {
  TmpDir t;
  {
    XArr w(t, "bad", 5);
    w.cp.write(1);
  }
  std::string p = t / "cp/bad/v-1/arr";
  std::string d = Slurp(p);
  d[d.size() / 2] ^= 4;
  Spit(p, d);
  XArr r(t, "bad", -7);
  ::testing::internal::CaptureStderr();
  ExpectError([&] { r.cp.restart_if_needed(); }, {"no intact version", "overwrote", "checksum mismatch", p});
  ::testing::internal::GetCapturedStderr();
}

// Only the newest version's payload is damaged: it streamed into user memory, the older version read
// over it repairs every byte (the arrays hold exactly version 1).
TEST(BadInput, DamagedPayloadReadInOnePassIsRepairedByTheOlderVersion) {
  TmpDir t;
  WriteTwo(t);
  std::string p = t / "cp/bad/v-2/arr";
  std::string d = Slurp(p);
  d[d.size() - 40] ^= 1;  // near the end: nearly all of version 2's bytes reached memory first
  Spit(p, d);
  XArr r(t, "bad", -7);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(r.cp.restart_if_needed());
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.cp.version(), 1u);
  EXPECT_EQ(r.x, 100);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(r.arr[i], 1 + i);
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;
}

TEST(BadInput, TypeSizeAndKeyMismatchesAreErrors) {
  TmpDir t;
  WriteTwo(t);
  {
    double x = 0;  // stored as int32
    double arr[64];
    Checkpoint cp("bad", Opts(t));
    cp.add("x", &x);
    cp.add("arr", arr, 64);
    cp.commit();
    ExpectError([&] { cp.restart_if_needed(); }, {"'x'", "v-2/x", "stored as int32", "registered as double"});
  }
  {
    int x = 0;
    double arr[32];  // stored 64
    Checkpoint cp("bad", Opts(t));
    cp.add("x", &x);
    cp.add("arr", arr, 32);
    cp.commit();
    ExpectError([&] { cp.restart_if_needed(); }, {"'arr'", "64 elements", "32 are registered"});
  }
  {
    int x = 0;
    Checkpoint cp("bad", Opts(t));
    cp.add("x", &x);
    cp.commit();
    ExpectError([&] { cp.restart_if_needed(); }, {"'arr'", "did not add"});
  }
  {
    int x = 0, y = 0;
    double arr[64];
    Checkpoint cp("bad", Opts(t));
    cp.add("x", &x);
    cp.add("arr", arr, 64);
    cp.add("y", &y);
    cp.commit();
    ExpectError([&] { cp.restart_if_needed(); }, {"'y'", "does not contain it"});
  }
  {
    struct Pod {
      int32_t a;
    } x;  // same size as int32 but a user POD: a different type
    double arr[64];
    Checkpoint cp("bad", Opts(t));
    cp.add("x", &x);
    cp.add("arr", arr, 64);
    cp.commit();
    ExpectError([&] { cp.restart_if_needed(); }, {"'x'", "POD of 4 bytes"});
  }
}

class Short : public Checkpointable {
 public:
  int a = 0, b = 0;
  bool read_both = true;
  void write(Writer& w) const override {
    w.write(a);
    w.write(b);
  }
  void read(Reader& r) override {
    r.read(a);
    if (read_both) r.read(b);
  }
};

TEST(BadInput, UserTypeThatReadsDifferentlyIsAnError) {
  TmpDir t;
  Short s;
  s.a = 1, s.b = 2;
  {
    Checkpoint cp("u", Opts(t));
    cp.add("s", s);
    cp.commit();
    cp.write(0);
  }
  Short r;
  r.read_both = false;
  Checkpoint cp("u", Opts(t));
  cp.add("s", r);
  cp.commit();
  ExpectError([&] { cp.restart_if_needed(); }, {"'s'", "read 4 of 8"});
}

}  // namespace
}  // namespace revive
