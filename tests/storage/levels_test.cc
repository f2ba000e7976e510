// Unit tests of the node-local pieces of multi-level checkpoints (local_store.h) and of the catalog that plans
// a restart from them (catalog.h): the piece descriptions' format and every kind of bad input, LocalStore on a
// real directory (damage, misplaced descriptions, a write that fails halfway, pruning), and Catalog::Plan on
// 6 ranks in two XOR groups with real parity (stripes.h), checking that a planned rebuild gives back the bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <string_view>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../core/test_tmpdir.h"
#include "core/checksum.h"
#include "core/fault_env.h"
#include "storage/catalog.h"
#include "storage/erasure.h"
#include "storage/local_store.h"
#include "storage/stripes.h"
#include "storage/text_fields.h"

namespace revive::storage {
namespace {

using revive::testing::TmpDir;
namespace fs = std::filesystem;

const char kWhat[] = "/local/n1/ck/v-7/rank-3.meta";

std::string Bytes(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(g());
  return s;
}

PieceMeta DataMeta(uint32_t rank, uint32_t ranks, const std::string& bytes, const std::string& host,
                   const std::string& holder, uint64_t version = 7) {
  PieceMeta m;
  m.kind = PieceMeta::kData;
  m.name = "ck";
  m.version = version;
  m.iteration = 100 + static_cast<int64_t>(version);
  m.parent_version = version - 1;
  m.ranks = ranks;
  m.rank = rank;
  m.host = host;
  m.holder_host = holder;
  m.length = bytes.size();
  m.checksum = Checksum64(bytes.data(), bytes.size());
  m.keys = {"x", "grid.u"};
  return m;
}

PieceMeta SampleData() {
  PieceMeta m = DataMeta(3, 6, Bytes(1000, 1), "n3", "n4");
  m.iteration = -5;  // negative iterations are legal
  return m;
}

PieceMeta SampleParity() {
  PieceMeta m;
  m.kind = PieceMeta::kParity;
  m.name = "ck";
  m.version = 7;
  m.iteration = 107;
  m.parent_version = 6;
  m.ranks = 6;
  m.rank = 2;
  m.host = "n2";
  m.holder_host = "n2";
  m.parity = 1;
  m.members = {0, 2, 4};
  m.block = 512;
  m.lengths = {1000, 900, 1};
  m.checksums = {0x0123456789abcdefULL, 2, 0xffffffffffffffffULL};
  m.parity_length = 512;
  m.parity_checksum = 0xdeadbeefULL;
  return m;
}

void ExpectSame(const PieceMeta& a, const PieceMeta& b) {
  EXPECT_EQ(EncodePieceMeta(a), EncodePieceMeta(b));
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.iteration, b.iteration);
  EXPECT_EQ(a.parent_version, b.parent_version);
  EXPECT_EQ(a.ranks, b.ranks);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.host, b.host);
  EXPECT_EQ(a.holder_host, b.holder_host);
  EXPECT_EQ(a.FileLength(), b.FileLength());
  EXPECT_EQ(a.FileChecksum(), b.FileChecksum());
  EXPECT_EQ(a.keys, b.keys);
  EXPECT_EQ(a.parity, b.parity);
  EXPECT_EQ(a.members, b.members);
  EXPECT_EQ(a.block, b.block);
  EXPECT_EQ(a.lengths, b.lengths);
  EXPECT_EQ(a.checksums, b.checksums);
}

// The encoding without its checksum line, and a body sealed with a correct checksum line.
std::string Body(const std::string& enc) { return enc.substr(0, enc.rfind("checksum=")); }
std::string Seal(const std::string& body) {
  return body + "checksum=" + Hex(Checksum64(body.data(), body.size())) + "\n";
}
// Replaces the line starting with `key=` by `line` (empty: removes it), and reseals.
std::string Edit(const std::string& enc, const std::string& key, const std::string& line) {
  std::string b = Body(enc);
  size_t p = b.find("\n" + key + "=");
  EXPECT_NE(p, std::string::npos) << key;
  size_t e = b.find('\n', p + 1);
  b.replace(p + 1, e - p, line.empty() ? "" : line + "\n");
  return Seal(b);
}

::testing::AssertionResult IsCorruptionNaming(const Status& s, const std::string& what,
                                              const std::string& part = "") {
  if (!s.IsCorruption()) return ::testing::AssertionFailure() << "not Corruption: " << s.ToString();
  if (s.message().find(what) == std::string::npos)
    return ::testing::AssertionFailure() << "does not name " << what << ": " << s.ToString();
  if (s.message().find(part) == std::string::npos)
    return ::testing::AssertionFailure() << "does not say '" << part << "': " << s.ToString();
  return ::testing::AssertionSuccess();
}

Status Decode(const std::string& text, PieceMeta* m = nullptr) {
  PieceMeta tmp;
  return DecodePieceMeta(kWhat, text, m ? m : &tmp);
}

// ---------------------------------------------------------------- PieceMeta encoding

TEST(PieceMetaTest, RoundTripData) {
  const PieceMeta a = SampleData();
  PieceMeta b;
  ASSERT_TRUE(Decode(EncodePieceMeta(a), &b).ok());
  ExpectSame(a, b);
  EXPECT_EQ(b.FileName(), "rank-3");
  PieceMeta nokeys = a;
  nokeys.keys.clear();
  ASSERT_TRUE(Decode(EncodePieceMeta(nokeys), &b).ok());
  ExpectSame(nokeys, b);
}

TEST(PieceMetaTest, RoundTripParity) {
  const PieceMeta a = SampleParity();
  PieceMeta b;
  ASSERT_TRUE(Decode(EncodePieceMeta(a), &b).ok());
  ExpectSame(a, b);
  EXPECT_EQ(b.FileName(), "parity-2");
  EXPECT_EQ(b.MemberIndex(2), 1);
  EXPECT_EQ(b.MemberIndex(3), -1);
  EXPECT_EQ(b.FileLength(), 512u);
  EXPECT_EQ(b.FileChecksum(), 0xdeadbeefULL);
  PieceMeta rs = a;  // Reed-Solomon, 2 parity
  rs.parity = 2;
  rs.members = {5, 1, 3, 0};
  rs.rank = 5;
  rs.lengths = {1, 2, 3, 4};
  rs.checksums = {1, 2, 3, 4};
  rs.parity_length = 1024;
  ASSERT_TRUE(Decode(EncodePieceMeta(rs), &b).ok());
  ExpectSame(rs, b);
}

TEST(PieceMetaTest, BadInputIsCorruptionNamingTheFile) {
  const std::string d = EncodePieceMeta(SampleData()), p = EncodePieceMeta(SampleParity());
  struct Case {
    const char* why;
    std::string text;
    const char* says;
  };
  std::string flipped = d;
  flipped[d.find("name=ck") + 5] = 'X';
  std::string flipped_sum = d;
  flipped_sum[d.size() - 2] = flipped_sum[d.size() - 2] == '0' ? '1' : '0';
  const std::vector<Case> cases = {
      {"empty", "", "not a revive piece"},
      {"foreign", "revive-manifest 1\nversion=1\n", "not a revive piece"},
      {"foreign binary", std::string("\0\1\2\3", 4), "not a revive piece"},
      {"future version", "revive-piece 3\nkind=data\n", "not supported"},
      {"future version sealed", Seal("revive-piece 3\n" + Body(d).substr(15)), "not supported"},
      {"first line only", "revive-piece 1\n", "truncated"},
      {"no checksum line", Body(d), "truncated"},
      {"half a checksum line", d.substr(0, d.size() - 9), "truncated"},
      {"no final newline", d.substr(0, d.size() - 1), "truncated"},
      {"data after checksum", d + "x\n", "truncated"},
      {"flipped character", flipped, "checksum mismatch"},
      {"flipped checksum", flipped_sum, "checksum mismatch"},
      {"duplicated field", Seal(Body(d) + "rank=3\n"), "twice"},
      {"duplicated parity field", Seal(Body(p) + "block=512\n"), "twice"},
      {"missing kind", Edit(d, "kind", ""), "missing"},
      {"missing rank", Edit(d, "rank", ""), "missing"},
      {"missing holder_host", Edit(d, "holder_host", ""), "missing"},
      {"missing length", Edit(d, "length", ""), "length"},
      {"missing data_checksum", Edit(d, "data_checksum", ""), "length"},
      {"missing members", Edit(p, "members", ""), "misses"},
      {"missing parity_checksum", Edit(p, "parity_checksum", ""), "misses"},
      {"unknown field", Seal(Body(d) + "colour=blue\n"), "bad line"},
      {"line without =", Seal(Body(d) + "oops\n"), "without '='"},
      {"bad kind", Edit(d, "kind", "kind=mirror"), "bad line"},
      {"version 0", Edit(d, "version", "version=0"), "bad line"},
      {"version not a number", Edit(d, "version", "version=7a"), "bad line"},
      {"version too big", Edit(d, "version", "version=99999999999999999999"), "bad line"},
      {"negative rank", Edit(d, "rank", "rank=-1"), "bad line"},
      {"ranks 0", Edit(d, "ranks", "ranks=0"), "bad line"},
      {"ranks > uint32", Edit(d, "ranks", "ranks=4294967296"), "bad line"},
      {"iteration below int64", Edit(d, "iteration", "iteration=-9223372036854775809"), "bad line"},
      {"short hex checksum", Edit(d, "data_checksum", "data_checksum=abc"), "bad line"},
      {"upper-case hex", Edit(d, "data_checksum", "data_checksum=ABCDEF0123456789"), "bad line"},
      {"rank == ranks", Edit(d, "rank", "rank=6"), "rank 6 of 6"},
      {"rank > ranks", Edit(d, "rank", "rank=4000000000"), "of 6 ranks"},
      {"parity 0", Edit(p, "parity", "parity=0"), "bad line"},
      {"fewer lengths", Edit(p, "lengths", "lengths=1000 900"), "inconsistent"},
      {"more checksums", Edit(p, "checksums", "checksums=0000000000000001 0000000000000002 "
                                              "0000000000000003 0000000000000004"),
       "inconsistent"},
      {"fewer members", Edit(p, "members", "members=0 2"), "inconsistent"},
      {"empty members", Edit(p, "members", "members="), "bad line"},
      {"double space in list", Edit(p, "members", "members=0  2 4"), "bad line"},
      {"member listed twice", Edit(p, "members", "members=0 2 2"), "twice"},
      {"member out of range", Edit(p, "members", "members=0 2 9"), "out of range"},
      {"holder not a member", Edit(p, "members", "members=0 1 4"), "inconsistent"},
      {"group smaller than parity+1", Edit(Edit(Edit(Edit(p, "members", "members=2"), "lengths", "lengths=1"),
                                                "checksums", "checksums=0000000000000001"),
                                           "parity_length", "parity_length=512"),
       "inconsistent"},
      {"parity_length != parity*block", Edit(p, "parity_length", "parity_length=511"), "inconsistent"},
      {"parity_length for m=2", Edit(p, "parity", "parity=2"), "inconsistent"},
      {"host with /", Edit(d, "host", "host=a/b"), "bad line"},
      {"host ..", Edit(d, "host", "host=.."), "bad line"},
      {"host .", Edit(d, "host", "host=."), "bad line"},
      {"empty host", Edit(d, "host", "host="), "bad line"},
      {"holder_host with /", Edit(d, "holder_host", "holder_host=../n2"), "bad line"},
      {"holder_host ..", Edit(d, "holder_host", "holder_host=.."), "bad line"},
  };
  for (const Case& c : cases) {
    PieceMeta m;
    Status s = Decode(c.text, &m);
    EXPECT_TRUE(IsCorruptionNaming(s, kWhat, c.says)) << c.why;
  }
}

// Random damage to a valid encoding: always either a clean Corruption naming the file, or a successful decode of
// a text that re-encodes identically (never a crash, never a silently different description).
TEST(PieceMetaTest, FuzzDamagedEncodings) {
  std::mt19937 g(12345);
  const std::vector<std::string> valid = {EncodePieceMeta(SampleData()), EncodePieceMeta(SampleParity())};
  int decoded = 0, resealed_ok = 0;
  for (int it = 0; it < 20000; ++it) {
    const bool reseal = it % 2;  // also damage the body and seal it again: only the field checks remain
    std::string t = reseal ? Body(valid[it / 2 % 2]) : valid[it / 2 % 2];
    const int edits = 1 + static_cast<int>(g() % 3);
    for (int e = 0; e < edits && !t.empty(); ++e) {
      const size_t at = g() % t.size();
      switch (g() % 5) {
        case 0: t[at] = static_cast<char>(g()); break;                     // random byte
        case 1: t[at] = static_cast<char>(t[at] ^ (1u << (g() % 8))); break;  // one bit
        case 2: t.resize(at); break;                                         // truncation
        case 3: t.erase(at, 1); break;
        case 4: t.insert(at, 1, "0123456789 =-\n/.a"[g() % 17]); break;
      }
    }
    if (reseal) t = Seal(t);
    PieceMeta m;
    Status s = Decode(t, &m);
    if (s.ok()) {
      ++decoded;
      if (!reseal) {
        EXPECT_EQ(EncodePieceMeta(m), t) << "iteration " << it;
      } else {
        ++resealed_ok;
        // A resealed text may spell a number differently ("07"), but what it decodes to is stable.
        PieceMeta again;
        ASSERT_TRUE(Decode(EncodePieceMeta(m), &again).ok()) << "iteration " << it << "\n" << t;
        EXPECT_EQ(EncodePieceMeta(again), EncodePieceMeta(m));
        EXPECT_LT(m.rank, m.ranks);
        if (m.kind == PieceMeta::kParity) {
          EXPECT_GE(m.MemberIndex(m.rank), 0);
          EXPECT_EQ(m.lengths.size(), m.members.size());
          EXPECT_EQ(m.parity_length, static_cast<uint64_t>(m.parity) * m.block);
        }
      }
    } else {
      EXPECT_TRUE(IsCorruptionNaming(s, kWhat)) << "iteration " << it;
    }
  }
  EXPECT_GT(resealed_ok, 0);  // the field checks were exercised on texts that pass the checksum
  (void)decoded;
}

// ---------------------------------------------------------------- LocalStore

void WriteRaw(const std::string& path, const std::string& s) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << s;
}

class LocalStoreTest : public ::testing::Test {
 protected:
  LocalStore Store(Env* env = Env::Default(), const std::string& host = "n1") {
    return LocalStore(env, tmp_.path(), host, LocalStore::MakeId("ck", "/global/ck"));
  }
  std::vector<PieceMeta> Scan(const LocalStore& st, std::vector<std::string>* problems = nullptr) {
    std::vector<PieceMeta> metas;
    std::vector<std::string> p;
    EXPECT_TRUE(st.Scan(&metas, problems ? problems : &p).ok());
    return metas;
  }
  TmpDir tmp_;
};

TEST_F(LocalStoreTest, IdAndPaths) {
  LocalStore st = Store();
  const std::string id = LocalStore::MakeId("ck", "/global/ck");
  EXPECT_EQ(id.size(), 3u + 16u);
  EXPECT_EQ(id.compare(0, 3, "ck-"), 0);
  EXPECT_NE(id, LocalStore::MakeId("ck", "/other/ck"));
  EXPECT_EQ(st.dir(), tmp_.path() + "/n1/" + id);
  EXPECT_EQ(st.VersionDir(12), st.dir() + "/v-12");
  std::vector<uint64_t> v;
  ASSERT_TRUE(st.ListVersions(&v).ok());  // nothing written yet: no versions, not an error
  EXPECT_TRUE(v.empty());
  EXPECT_TRUE(Scan(st).empty());
}

TEST_F(LocalStoreTest, WriteReadRoundTrip) {
  LocalStore st = Store();
  const std::string bytes = Bytes(5000, 2), empty;
  const PieceMeta d = DataMeta(3, 6, bytes, "n1", "n1", 4);
  const PieceMeta copy = DataMeta(0, 6, bytes, "n0", "n1", 4);  // a partner's copy held here
  const PieceMeta zero = DataMeta(5, 6, empty, "n1", "n1", 4);
  PieceMeta par = SampleParity();
  par.version = 4;
  par.holder_host = "n1";
  const std::string pbytes = Bytes(512, 3);
  par.parity_checksum = Checksum64(pbytes.data(), pbytes.size());
  ASSERT_TRUE(st.WritePiece(d, bytes.data(), bytes.size()).ok());
  ASSERT_TRUE(st.WritePiece(copy, bytes.data(), bytes.size()).ok());
  ASSERT_TRUE(st.WritePiece(zero, empty.data(), 0).ok());
  ASSERT_TRUE(st.WritePiece(par, pbytes.data(), pbytes.size()).ok());
  std::string out;
  ASSERT_TRUE(st.ReadPiece(d, &out).ok());
  EXPECT_EQ(out, bytes);
  ASSERT_TRUE(st.ReadPiece(copy, &out).ok());
  EXPECT_EQ(out, bytes);
  ASSERT_TRUE(st.ReadPiece(zero, &out).ok());
  EXPECT_EQ(out, "");
  ASSERT_TRUE(st.ReadPiece(par, &out).ok());
  EXPECT_EQ(out, pbytes);
  EXPECT_TRUE(fs::exists(st.VersionDir(4) + "/rank-3.meta"));
  EXPECT_TRUE(fs::exists(st.VersionDir(4) + "/parity-2"));
  std::vector<std::string> problems;
  std::vector<PieceMeta> metas = Scan(st, &problems);
  EXPECT_TRUE(problems.empty());
  ASSERT_EQ(metas.size(), 4u);
  std::map<std::string, PieceMeta> by_name;
  for (const auto& m : metas) by_name[m.FileName()] = m;
  ExpectSame(by_name["rank-3"], d);
  ExpectSame(by_name["rank-0"], copy);
  ExpectSame(by_name["rank-5"], zero);
  ExpectSame(by_name["parity-2"], par);
  // A rewrite of the same piece (a retried version) replaces it.
  const std::string bytes2 = Bytes(300, 9);
  const PieceMeta d2 = DataMeta(3, 6, bytes2, "n1", "n1", 4);
  ASSERT_TRUE(st.WritePiece(d2, bytes2.data(), bytes2.size()).ok());
  ASSERT_TRUE(st.ReadPiece(d2, &out).ok());
  EXPECT_EQ(out, bytes2);
  EXPECT_FALSE(st.ReadPiece(d, &out).ok());
}

TEST_F(LocalStoreTest, DamagedPieceIsCorruptionNamingThePath) {
  LocalStore st = Store();
  const std::string bytes = Bytes(4096, 4);
  const PieceMeta d = DataMeta(3, 6, bytes, "n1", "n1", 2);
  ASSERT_TRUE(st.WritePiece(d, bytes.data(), bytes.size()).ok());
  const std::string path = st.PiecePath(2, d);
  std::string out;
  WriteRaw(path, bytes.substr(0, 4000));
  EXPECT_TRUE(IsCorruptionNaming(st.ReadPiece(d, &out), path, "4000 bytes"));
  WriteRaw(path, bytes + "x");
  EXPECT_TRUE(IsCorruptionNaming(st.ReadPiece(d, &out), path, "4097 bytes"));
  WriteRaw(path, "");
  EXPECT_TRUE(IsCorruptionNaming(st.ReadPiece(d, &out), path));
  for (size_t at : {size_t{0}, size_t{1234}, bytes.size() - 1}) {
    std::string bad = bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    WriteRaw(path, bad);
    EXPECT_TRUE(IsCorruptionNaming(st.ReadPiece(d, &out), path, "checksum mismatch")) << at;
  }
  WriteRaw(path, bytes);
  ASSERT_TRUE(st.ReadPiece(d, &out).ok());
  fs::remove(path);
  Status s = st.ReadPiece(d, &out);
  EXPECT_FALSE(s.ok());
}

TEST_F(LocalStoreTest, ScanReportsMisplacedAndGarbageMetas) {
  LocalStore st = Store();
  const std::string bytes = Bytes(700, 5);
  const PieceMeta d = DataMeta(3, 6, bytes, "n1", "n1", 1);
  ASSERT_TRUE(st.WritePiece(d, bytes.data(), bytes.size()).ok());
  const std::string v1 = st.VersionDir(1), v2 = st.VersionDir(2);
  // rank-3's description copied as rank-4's.
  fs::copy_file(v1 + "/rank-3.meta", v1 + "/rank-4.meta");
  fs::copy_file(v1 + "/rank-3", v1 + "/rank-4");
  // rank-3's description moved into another version's directory.
  fs::create_directories(v2);
  fs::copy_file(v1 + "/rank-3.meta", v2 + "/rank-3.meta");
  fs::copy_file(v1 + "/rank-3", v2 + "/rank-3");
  // A piece described as held by another host.
  const PieceMeta other = DataMeta(1, 6, bytes, "n1", "n9", 1);
  ASSERT_TRUE(st.WritePiece(other, bytes.data(), bytes.size()).ok());
  // Garbage, an empty description, and files that are not descriptions (ignored silently).
  WriteRaw(v1 + "/rank-5.meta", "hello\n");
  WriteRaw(v1 + "/parity-0.meta", "");
  WriteRaw(v1 + "/rank-5.meta.tmp", "junk");
  WriteRaw(v1 + "/.meta", "junk");
  WriteRaw(st.dir() + "/not-a-version", "junk");
  fs::create_directories(st.dir() + "/v-03");

  std::vector<std::string> problems;
  std::vector<PieceMeta> metas = Scan(st, &problems);
  ASSERT_EQ(metas.size(), 1u);
  ExpectSame(metas[0], d);
  ASSERT_EQ(problems.size(), 5u);
  auto reported = [&](const std::string& path) {
    for (const auto& p : problems)
      if (p.find(path) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(reported(v1 + "/rank-4.meta"));
  EXPECT_TRUE(reported(v2 + "/rank-3.meta"));
  EXPECT_TRUE(reported(v1 + "/rank-1.meta"));
  EXPECT_TRUE(reported(v1 + "/rank-5.meta"));
  EXPECT_TRUE(reported(v1 + "/parity-0.meta"));
  std::vector<uint64_t> versions;
  ASSERT_TRUE(st.ListVersions(&versions).ok());
  EXPECT_EQ(versions, (std::vector<uint64_t>{1, 2}));  // v-03 is not a version directory
  // Another host's store does not see n1's pieces.
  EXPECT_TRUE(Scan(Store(Env::Default(), "n2")).empty());
}

// A rewrite that fails halfway must leave no description of the partial bytes: the stale one is deleted first.
TEST_F(LocalStoreTest, FailedRewriteLeavesNoDescription) {
  const std::string old_bytes = Bytes(3000, 6), new_bytes = Bytes(3000, 7);
  const PieceMeta old_meta = DataMeta(3, 6, old_bytes, "n1", "n1", 5);
  const PieceMeta new_meta = DataMeta(3, 6, new_bytes, "n1", "n1", 5);
  const PieceMeta keep = DataMeta(0, 6, old_bytes, "n0", "n1", 5);
  {
    LocalStore st = Store();
    ASSERT_TRUE(st.WritePiece(old_meta, old_bytes.data(), old_bytes.size()).ok());
    ASSERT_TRUE(st.WritePiece(keep, old_bytes.data(), old_bytes.size()).ok());
  }
  struct Fault {
    const char* what;
    std::function<void(FaultEnv*)> arm;
  };
  const std::vector<Fault> faults = {
      {"short write", [](FaultEnv* e) { e->ShortWriteNth(1); }},
      {"write", [](FaultEnv* e) { e->FailNth(FaultEnv::Op::kWrite, 1); }},
      {"sync", [](FaultEnv* e) { e->FailNth(FaultEnv::Op::kSync, 1); }},
      {"open", [](FaultEnv* e) { e->FailNth(FaultEnv::Op::kOpen, 1); }},
      {"rename of the meta", [](FaultEnv* e) { e->FailNth(FaultEnv::Op::kRename, 1); }},
      {"second open (the meta)", [](FaultEnv* e) { e->FailNth(FaultEnv::Op::kOpen, 2); }},
  };
  for (const Fault& f : faults) {
    {  // restore the old, complete piece
      LocalStore st = Store();
      ASSERT_TRUE(st.WritePiece(old_meta, old_bytes.data(), old_bytes.size()).ok());
    }
    FaultEnv env(Env::Default());
    f.arm(&env);
    LocalStore st = Store(&env);
    EXPECT_FALSE(st.WritePiece(new_meta, new_bytes.data(), new_bytes.size()).ok()) << f.what;
    std::vector<std::string> problems;
    std::vector<PieceMeta> metas = Scan(st, &problems);
    EXPECT_TRUE(problems.empty()) << f.what;
    ASSERT_EQ(metas.size(), 1u) << f.what;  // only the untouched piece
    ExpectSame(metas[0], keep);
    EXPECT_FALSE(fs::exists(st.PiecePath(5, old_meta) + ".meta")) << f.what;
  }
  // A crash at every step of a rewrite: whatever description is left describes complete bytes.
  for (uint64_t n = 1; n < 30; ++n) {
    {
      LocalStore st = Store();
      ASSERT_TRUE(st.WritePiece(old_meta, old_bytes.data(), old_bytes.size()).ok());
    }
    FaultEnv env(Env::Default());
    env.FailFrom(n);
    LocalStore st = Store(&env);
    const bool ok = st.WritePiece(new_meta, new_bytes.data(), new_bytes.size()).ok();
    for (const PieceMeta& m : Scan(st)) {
      std::string out;
      EXPECT_TRUE(st.ReadPiece(m, &out).ok()) << "crash at op " << n << ": " << m.FileName();
    }
    if (ok) break;
  }
}

TEST_F(LocalStoreTest, RemoveOlderThanKeepsNewerVersions) {
  LocalStore st = Store();
  const std::string bytes = Bytes(100, 8);
  for (uint64_t v : {1, 2, 3, 4, 10}) {
    ASSERT_TRUE(st.WritePiece(DataMeta(0, 2, bytes, "n1", "n1", v), bytes.data(), bytes.size()).ok());
    ASSERT_TRUE(st.WritePiece(DataMeta(1, 2, bytes, "n2", "n1", v), bytes.data(), bytes.size()).ok());
  }
  WriteRaw(st.VersionDir(2) + "/rank-0.meta.tmp", "leftover");  // removed with its directory
  ASSERT_TRUE(st.RemoveOlderThan(3).ok());
  std::vector<uint64_t> v;
  ASSERT_TRUE(st.ListVersions(&v).ok());
  EXPECT_EQ(v, (std::vector<uint64_t>{3, 4, 10}));
  EXPECT_FALSE(fs::exists(st.VersionDir(1)));
  EXPECT_FALSE(fs::exists(st.VersionDir(2)));
  EXPECT_EQ(Scan(st).size(), 6u);
  ASSERT_TRUE(st.RemoveOlderThan(3).ok());  // nothing older left
  ASSERT_TRUE(st.RemoveVersion(4).ok());
  ASSERT_TRUE(st.RemoveVersion(4).ok());  // already gone
  ASSERT_TRUE(st.RemoveVersion(77).ok());
  ASSERT_TRUE(st.ListVersions(&v).ok());
  EXPECT_EQ(v, (std::vector<uint64_t>{3, 10}));
  std::string out;
  EXPECT_TRUE(st.ReadPiece(DataMeta(1, 2, bytes, "n2", "n1", 10), &out).ok());
  ASSERT_TRUE(st.RemoveOlderThan(100).ok());
  ASSERT_TRUE(st.ListVersions(&v).ok());
  EXPECT_TRUE(v.empty());
}

// ---------------------------------------------------------------- Catalog

// 6 ranks, rank r on host r; two XOR groups {0 2 4} and {1 3 5}; rank r's partner copy on host r+1.
class CatalogTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kRanks = 6;
  static constexpr uint64_t kV = 7;

  void SetUp() override {
    ASSERT_TRUE(ErasureCode::Make(2, 1, &code_).ok());
    for (uint32_t r = 0; r < kRanks; ++r) data_.push_back(Bytes(1000 + 137 * r, 100 + r));
    parity_.resize(kRanks);
    for (const auto& grp : {std::vector<uint32_t>{0, 2, 4}, std::vector<uint32_t>{1, 3, 5}}) {
      uint64_t max_len = 0;
      std::vector<std::string_view> in;
      std::vector<uint64_t> lengths, sums;
      for (uint32_t r : grp) {
        in.emplace_back(data_[r]);
        max_len = std::max<uint64_t>(max_len, data_[r].size());
        lengths.push_back(data_[r].size());
        sums.push_back(Checksum64(data_[r].data(), data_[r].size()));
      }
      StripeLayout layout(3, 1, max_len);
      std::vector<std::string> out;
      ASSERT_TRUE(EncodeGroup(*code_, layout, in, &out).ok());
      for (size_t i = 0; i < grp.size(); ++i) {
        const uint32_t r = grp[i];
        parity_[r] = out[i];
        PieceMeta p = DataMeta(r, kRanks, data_[r], Host(r), Host(r), kV);
        p.kind = PieceMeta::kParity;
        p.keys.clear();
        p.length = p.checksum = 0;
        p.parity = 1;
        p.members = grp;
        p.block = layout.block_size();
        p.lengths = lengths;
        p.checksums = sums;
        p.parity_length = out[i].size();
        p.parity_checksum = Checksum64(out[i].data(), out[i].size());
        // Every description passes the decoder's checks.
        PieceMeta check;
        ASSERT_TRUE(DecodePieceMeta("p", EncodePieceMeta(p), &check).ok());
        parity_meta_.push_back(p);
      }
    }
  }
  static std::string Host(uint32_t h) { return "n" + std::to_string(h); }
  PieceMeta Own(uint32_t r, uint64_t v = kV) const { return DataMeta(r, kRanks, data_[r], Host(r), Host(r), v); }
  PieceMeta Copy(uint32_t r, uint64_t v = kV) const {
    return DataMeta(r, kRanks, data_[r], Host(r), Host((r + 1) % kRanks), v);
  }
  const PieceMeta& Parity(uint32_t r) const {
    for (const auto& p : parity_meta_)
      if (p.rank == r) return p;
    abort();
  }
  // Everything, except the own copies / partner copies of the ranks listed.
  void AddAll(Catalog* c, const std::set<uint32_t>& no_own = {}, const std::set<uint32_t>& no_copy = {},
              const std::set<uint32_t>& no_parity = {}) const {
    for (uint32_t h = 0; h < kRanks; ++h) {
      if (!no_own.count(h)) c->Add(h, Own(h));
      const uint32_t partner = (h + kRanks - 1) % kRanks;
      if (!no_copy.count(partner)) c->Add(h, Copy(partner));
      if (!no_parity.count(h)) c->Add(h, Parity(h));
    }
  }
  static std::vector<int> Home() { return {0, 1, 2, 3, 4, 5}; }
  // The bytes a planned piece stands for.
  std::string BytesOf(const PieceRef& p) const {
    EXPECT_TRUE(p.ok());
    return p.meta->kind == PieceMeta::kData ? data_[p.meta->rank] : parity_[p.meta->rank];
  }
  // Runs the planned rebuild of rank r and checks it gives back its bytes.
  void CheckRebuild(const VersionPlan& plan, uint32_t r, const std::vector<uint32_t>& survivors) const {
    const RankSource& src = plan.sources[r];
    ASSERT_EQ(src.how, RankSource::kRebuild);
    ASSERT_NE(src.group, nullptr);
    const PieceMeta& g = *src.group;
    ASSERT_EQ(g.members[src.index], r);
    ASSERT_EQ(src.member_data.size(), g.members.size());
    ASSERT_EQ(src.member_parity.size(), g.members.size());
    std::vector<uint32_t> got_survivors;
    std::vector<std::string> mdata(g.members.size()), mparity(g.members.size());
    std::vector<bool> present(g.members.size());
    for (size_t i = 0; i < g.members.size(); ++i) {
      EXPECT_EQ(src.member_data[i].ok(), src.member_parity[i].ok()) << i;
      present[i] = src.member_data[i].ok() && src.member_parity[i].ok();
      if (!present[i]) continue;
      got_survivors.push_back(g.members[i]);
      EXPECT_EQ(src.member_data[i].meta->rank, g.members[i]);
      EXPECT_EQ(src.member_data[i].meta->kind, PieceMeta::kData);
      EXPECT_EQ(src.member_parity[i].meta->rank, g.members[i]);
      EXPECT_EQ(src.member_parity[i].meta->kind, PieceMeta::kParity);
      mdata[i] = BytesOf(src.member_data[i]);
      mparity[i] = BytesOf(src.member_parity[i]);
    }
    EXPECT_EQ(got_survivors, survivors);
    EXPECT_FALSE(present[src.index]);
    uint64_t max_len = *std::max_element(g.lengths.begin(), g.lengths.end());
    StripeLayout layout(static_cast<int>(g.members.size()), g.parity, max_len);
    ASSERT_EQ(layout.block_size(), g.block);
    ASSERT_TRUE(RebuildGroup(*code_, layout, &mdata, g.lengths, &mparity, present).ok());
    EXPECT_EQ(mdata[src.index], data_[r]);
    EXPECT_EQ(Checksum64(mdata[src.index].data(), mdata[src.index].size()), g.checksums[src.index]);
    EXPECT_EQ(mparity[src.index], parity_[r]);
  }

  std::unique_ptr<ErasureCode> code_;
  std::vector<std::string> data_, parity_;
  std::vector<PieceMeta> parity_meta_;
};

TEST_F(CatalogTest, PrefersTheHomeHolder) {
  Catalog c;
  AddAll(&c);
  VersionPlan plan;
  std::string why;
  ASSERT_TRUE(c.Plan(kV, kRanks, Home(), &plan, &why)) << why;
  EXPECT_EQ(plan.version, kV);
  EXPECT_EQ(plan.iteration, 100 + static_cast<int64_t>(kV));
  EXPECT_EQ(plan.parent_version, kV - 1);
  EXPECT_EQ(plan.ranks, kRanks);
  EXPECT_EQ(plan.keys, (std::vector<std::string>{"x", "grid.u"}));
  EXPECT_EQ(plan.own, 6);
  EXPECT_EQ(plan.copies, 0);
  EXPECT_EQ(plan.rebuilt, 0);
  for (uint32_t r = 0; r < kRanks; ++r) {
    EXPECT_EQ(plan.sources[r].how, RankSource::kRead);
    EXPECT_EQ(plan.sources[r].data.holder, static_cast<int>(r));
    EXPECT_EQ(plan.sources[r].data.meta->rank, r);
  }
  // Ranks that moved: rank r now runs on host r+1, which holds its partner copy.
  std::vector<int> moved = {1, 2, 3, 4, 5, 0};
  ASSERT_TRUE(c.Plan(kV, kRanks, moved, &plan, &why)) << why;
  EXPECT_EQ(plan.own, 6);
  for (uint32_t r = 0; r < kRanks; ++r) EXPECT_EQ(plan.sources[r].data.holder, moved[r]);
  EXPECT_NE(plan.Summary().find("6 ranks"), std::string::npos) << plan.Summary();
}

TEST_F(CatalogTest, FetchesFromAnotherHolder) {
  Catalog c;
  AddAll(&c, /*no_own=*/{2});
  VersionPlan plan;
  std::string why;
  ASSERT_TRUE(c.Plan(kV, kRanks, Home(), &plan, &why)) << why;
  EXPECT_EQ(plan.sources[2].how, RankSource::kRead);
  EXPECT_EQ(plan.sources[2].data.holder, 3);
  EXPECT_EQ(plan.own, 5);
  EXPECT_EQ(plan.copies, 1);
  // No home at all (a rank on a new node): any copy, counted as fetched.
  std::vector<int> home = Home();
  home[4] = -1;
  ASSERT_TRUE(c.Plan(kV, kRanks, home, &plan, &why)) << why;
  EXPECT_EQ(plan.sources[4].how, RankSource::kRead);
  EXPECT_TRUE(plan.sources[4].data.holder == 4 || plan.sources[4].data.holder == 5);
  EXPECT_EQ(plan.copies, 2);
  // home shorter than ranks: the missing entries mean no home.
  ASSERT_TRUE(c.Plan(kV, kRanks, {0, 1}, &plan, &why)) << why;
  EXPECT_EQ(plan.own, 2);
  EXPECT_EQ(plan.copies, 4);
}

TEST_F(CatalogTest, RebuildsLostDataFromItsGroup) {
  Catalog c;
  AddAll(&c, /*no_own=*/{2}, /*no_copy=*/{2});
  VersionPlan plan;
  std::string why;
  ASSERT_TRUE(c.Plan(kV, kRanks, Home(), &plan, &why)) << why;
  EXPECT_EQ(plan.rebuilt, 1);
  EXPECT_EQ(plan.own, 5);
  EXPECT_EQ(plan.sources[2].group->members, (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_EQ(plan.sources[2].index, 1);
  CheckRebuild(plan, 2, {0, 4});
  EXPECT_NE(plan.Summary().find("1 rebuilt"), std::string::npos) << plan.Summary();
  // One lost rank in each group.
  Catalog c2;
  AddAll(&c2, {0, 5}, {0, 5});
  ASSERT_TRUE(c2.Plan(kV, kRanks, Home(), &plan, &why)) << why;
  EXPECT_EQ(plan.rebuilt, 2);
  CheckRebuild(plan, 0, {2, 4});
  CheckRebuild(plan, 5, {1, 3});
  // A survivor's data only as a partner copy, and the lost rank's own parity gone too.
  Catalog c3;
  AddAll(&c3, {1, 3}, {1}, {1});
  ASSERT_TRUE(c3.Plan(kV, kRanks, Home(), &plan, &why)) << why;
  EXPECT_EQ(plan.sources[3].how, RankSource::kRead);
  EXPECT_EQ(plan.sources[3].data.holder, 4);
  CheckRebuild(plan, 1, {3, 5});
  EXPECT_EQ(plan.sources[1].member_data[1].holder, 4);  // rank 3's bytes: its partner copy on host 4
}

TEST_F(CatalogTest, MoreLostThanParityToleratesFails) {
  Catalog c;
  AddAll(&c, {2, 4}, {2, 4});
  VersionPlan plan;
  std::string why;
  EXPECT_FALSE(c.Plan(kV, kRanks, Home(), &plan, &why));
  EXPECT_NE(why.find("version 7"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 2"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 4"), std::string::npos) << why;
  EXPECT_NE(why.find("XOR group (ranks 0 2 4)"), std::string::npos) << why;
  EXPECT_NE(why.find("lost 2 members (ranks 2 4)"), std::string::npos) << why;
  EXPECT_NE(why.find("parity tolerates 1"), std::string::npos) << why;
  // Data of 2 present but a survivor's parity lost as well: still 2 of 3 lost.
  Catalog c2;
  AddAll(&c2, {2}, {2}, {0});
  EXPECT_FALSE(c2.Plan(kV, kRanks, Home(), &plan, &why));
  EXPECT_NE(why.find("parity tolerates 1"), std::string::npos) << why;
  EXPECT_NE(why.find("ranks 0 2"), std::string::npos) << why;
  // No parity at all for a lost rank.
  Catalog c3;
  AddAll(&c3, {3}, {3}, {1, 3, 5});
  EXPECT_FALSE(c3.Plan(kV, kRanks, Home(), &plan, &why));
  EXPECT_NE(why.find("rank 3: no copy"), std::string::npos) << why;
  // Nothing of the version at all.
  EXPECT_FALSE(c3.Plan(99, kRanks, Home(), &plan, &why));
  EXPECT_NE(why.find("version 99"), std::string::npos) << why;
}

TEST_F(CatalogTest, IgnoresPiecesThatDisagree) {
  // Rank 2's only copy is from another run (other iteration), rank 4's has other keys, rank 1's was written
  // by a run of 8 ranks: all ignored, so 2 and 1 are rebuilt... but group {0 2 4} then lost 2 and 4.
  Catalog c;
  AddAll(&c, {2, 1}, {2, 1});
  PieceMeta stale = Own(2);
  stale.iteration = 5;
  c.Add(2, stale);
  PieceMeta wide = DataMeta(1, 8, data_[1], Host(1), Host(1), kV);
  c.Add(1, wide);
  VersionPlan plan;
  std::string why;
  ASSERT_TRUE(c.Plan(kV, kRanks, Home(), &plan, &why)) << why;
  EXPECT_EQ(plan.rebuilt, 2);
  CheckRebuild(plan, 2, {0, 4});
  CheckRebuild(plan, 1, {3, 5});
  // A parity piece of another run is not taken as the group's parity.
  Catalog c2;
  AddAll(&c2, {2}, {2}, {0});
  PieceMeta p0 = Parity(0);
  p0.parent_version = 3;
  c2.Add(0, p0);
  EXPECT_FALSE(c2.Plan(kV, kRanks, Home(), &plan, &why));
  EXPECT_NE(why.find("parity tolerates 1"), std::string::npos) << why;
  // A data piece whose bytes differ from what the group encoded is no survivor.
  Catalog c3;
  AddAll(&c3, {2, 4}, {2, 4});
  PieceMeta other4 = DataMeta(4, kRanks, Bytes(55, 1), Host(4), Host(4), kV);
  c3.Add(4, other4);
  EXPECT_FALSE(c3.Plan(kV, kRanks, Home(), &plan, &why));
  EXPECT_NE(why.find("rank 2"), std::string::npos) << why;
  EXPECT_EQ(why.find("rank 4"), std::string::npos) << why;  // rank 4 itself is read
}

// A leftover piece of another run, found before the version's own pieces, must not decide what the version is.
TEST_F(CatalogTest, StalePieceFoundFirstDoesNotWin) {
  Catalog c;
  PieceMeta stale = Own(0);
  stale.iteration = 99;
  c.Add(6, stale);  // a host outside this run
  AddAll(&c);
  VersionPlan plan;
  std::string why;
  ASSERT_TRUE(c.Plan(kV, kRanks, Home(), &plan, &why)) << why;
  EXPECT_EQ(plan.iteration, 100 + static_cast<int64_t>(kV));
  EXPECT_EQ(plan.sources[0].data.holder, 0);
  EXPECT_EQ(plan.sources[0].data.meta->iteration, plan.iteration);
}

TEST_F(CatalogTest, RankCountMismatchIsExplained) {
  Catalog c;
  AddAll(&c);
  VersionPlan plan;
  std::string why;
  EXPECT_FALSE(c.Plan(kV, 4, {0, 1, 2, 3}, &plan, &why));
  EXPECT_NE(why.find("written by 6 ranks, this run has 4"), std::string::npos) << why;
  EXPECT_FALSE(c.Plan(kV, 8, Home(), &plan, &why));
  EXPECT_NE(why.find("written by 6 ranks, this run has 8"), std::string::npos) << why;
}

TEST_F(CatalogTest, MarkBadSwitchesToTheNextSource) {
  Catalog c;
  AddAll(&c);
  VersionPlan plan;
  std::string why;
  c.MarkBad(2, PieceMeta::kData, 2, kV);  // rank 2's own copy failed its checks
  EXPECT_TRUE(c.IsBad(2, Own(2)));
  EXPECT_FALSE(c.IsBad(3, Copy(2)));
  EXPECT_FALSE(c.IsBad(2, Own(2, kV + 1)));
  ASSERT_TRUE(c.Plan(kV, kRanks, Home(), &plan, &why)) << why;
  EXPECT_EQ(plan.sources[2].how, RankSource::kRead);
  EXPECT_EQ(plan.sources[2].data.holder, 3);
  c.MarkBad(3, PieceMeta::kData, 2, kV);  // and the partner copy too
  ASSERT_TRUE(c.Plan(kV, kRanks, Home(), &plan, &why)) << why;
  CheckRebuild(plan, 2, {0, 4});
  // A survivor's parity found bad: the group has lost 2.
  c.MarkBad(4, PieceMeta::kParity, 4, kV);
  EXPECT_FALSE(c.Plan(kV, kRanks, Home(), &plan, &why));
  EXPECT_NE(why.find("ranks 2 4"), std::string::npos) << why;
  EXPECT_EQ(c.Pieces(kV).size(), 6u * 3 - 3);
}

TEST_F(CatalogTest, VersionsAreNotMixed) {
  Catalog c;
  AddAll(&c, {2}, {2});  // version 7 lacks rank 2's data
  for (uint32_t r = 0; r < kRanks; ++r) c.Add(r, Own(r, 8));  // version 8 has it (but no parity)
  c.Add(0, Own(0, 3));
  EXPECT_EQ(c.Versions(), (std::vector<uint64_t>{8, 7, 3}));
  for (const PieceRef& p : c.Pieces(7)) EXPECT_EQ(p.meta->version, 7u);
  EXPECT_EQ(c.Pieces(8).size(), 6u);
  VersionPlan plan;
  std::string why;
  ASSERT_TRUE(c.Plan(7, kRanks, Home(), &plan, &why)) << why;
  EXPECT_EQ(plan.version, 7u);
  CheckRebuild(plan, 2, {0, 4});
  for (uint32_t r = 0; r < kRanks; ++r) {
    if (r == 2) continue;
    EXPECT_EQ(plan.sources[r].data.meta->version, 7u);
  }
  ASSERT_TRUE(c.Plan(8, kRanks, Home(), &plan, &why)) << why;
  EXPECT_EQ(plan.own, 6);
  EXPECT_FALSE(c.Plan(3, kRanks, Home(), &plan, &why));
  EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
  EXPECT_TRUE(Catalog().Versions().empty());
}

}  // namespace
}  // namespace revive::storage
