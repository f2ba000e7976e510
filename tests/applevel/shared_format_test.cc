// The on-disk pieces of shared-file mode that need no MPI (storage/shared_file.h): a rank's records as
// spans and their parsing back from memory, and the manifest's shared=/range= lines. Every single-byte
// flip and every truncation of a rank's bytes must be caught by the record checks alone (restart also
// checks the whole range's XXH3 from the manifest); the MPI side is tested in tests/mpi (mpi.ckpt.mpiio.*).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "app_util.h"
#include "core/checksum.h"
#include "storage/data_file.h"
#include "storage/manifest.h"
#include "storage/shared_file.h"

namespace revive::storage {
namespace {

struct Rank {
  std::vector<double> a = std::vector<double>(3000);
  std::string s = "a string value";
  std::vector<int> z = std::vector<int>(5000, 7);  // compressible
  std::vector<std::unique_ptr<EncodedRecord>> records;
  std::string bytes;  // the rank's range as it would be in the shared file
  uint64_t region = 0;

  Rank() {
    for (size_t i = 0; i < a.size(); ++i) a[i] = 0.5 * static_cast<double>(i);
    Checksum64Stream st;
    Add("a", 1, sizeof(double), a.size(), a.data(), a.size() * sizeof(double), 0, &st);
    Add("s", 2, 1, s.size(), s.data(), s.size(), 0, &st);
    Add("z", 3, sizeof(int), z.size(), z.data(), z.size() * sizeof(int), 3, &st);
    region = st.Digest();
    for (const auto& r : records)
      for (const auto& sp : r->spans) bytes.append(static_cast<const char*>(sp.data), sp.size);
  }
  void Add(const char* key, uint32_t tag, uint32_t elem, uint64_t count, const void* p, size_t n, int level,
           Checksum64Stream* st) {
    FileHeader h;
    h.key = key;
    h.type_tag = tag;
    h.elem_size = elem;
    h.count = count;
    auto r = std::make_unique<EncodedRecord>();
    Status s = EncodeDataRecord(std::string("test ") + key, h, {{p, n}}, level, r.get(), st);
    EXPECT_TRUE(s.ok()) << s.ToString();
    records.push_back(std::move(r));
  }
};

// Parses every record of `bytes` in order; the first failure, or OK.
Status ParseAll(const std::string& bytes, std::vector<FileHeader>* hs, std::vector<const char*>* payloads) {
  size_t pos = 0;
  for (const char* key : {"a", "s", "z"}) {
    FileHeader h;
    const char* p = nullptr;
    size_t used = 0;
    Status s = ParseDataRecord(std::string("range: record ") + key, bytes.data() + pos, bytes.size() - pos, &h, &p, &used);
    if (!s.ok()) return s;
    if (h.key != key) return Status::Corruption("range: record holds key '" + h.key + "'");
    if (hs) hs->push_back(h), payloads->push_back(p);
    pos += used;
  }
  return pos == bytes.size() ? Status::OK() : Status::Corruption("range: trailing bytes");
}

TEST(SharedFormat, RecordsRoundTripIncludingCompressed) {
  Rank r;
  uint64_t total = 0;
  for (const auto& rec : r.records) total += rec->size;
  EXPECT_EQ(total, r.bytes.size());
  EXPECT_EQ(r.region, Checksum64(r.bytes.data(), r.bytes.size()));  // one pass computed the range's XXH3
  std::vector<FileHeader> hs;
  std::vector<const char*> ps;
  ASSERT_TRUE(ParseAll(r.bytes, &hs, &ps).ok());
  EXPECT_NE(hs[2].flags & kFlagZstd, 0u);
  EXPECT_LT(hs[2].payload_len, hs[2].raw_len);
  std::vector<double> a(r.a.size());
  std::string s(r.s.size(), '\0');
  std::vector<int> z(r.z.size());
  ASSERT_TRUE(DecodePayload("a", hs[0], ps[0], a.data()).ok());
  ASSERT_TRUE(DecodePayload("s", hs[1], ps[1], s.data()).ok());
  ASSERT_TRUE(DecodePayload("z", hs[2], ps[2], z.data()).ok());
  EXPECT_EQ(a, r.a);
  EXPECT_EQ(s, r.s);
  EXPECT_EQ(z, r.z);
}

TEST(SharedFormat, EveryFlippedByteAndEveryTruncationIsCaught) {
  Rank r;
  size_t missed = 0;
  for (size_t i = 0; i < r.bytes.size(); ++i) {
    std::string b = r.bytes;
    b[i] = static_cast<char>(b[i] ^ 0x20);
    if (ParseAll(b, nullptr, nullptr).ok()) ++missed;
  }
  EXPECT_EQ(missed, 0u) << "of " << r.bytes.size() << " single-byte flips";
  for (size_t n = 0; n < r.bytes.size(); n += (n < 200 ? 1 : 97)) {
    Status s = ParseAll(r.bytes.substr(0, n), nullptr, nullptr);
    EXPECT_FALSE(s.ok()) << "truncated to " << n;
    EXPECT_NE(s.message().find("range: record"), std::string::npos) << s.ToString();  // names the record
  }
}

TEST(SharedFormat, ManifestRangesRoundTripAndAreValidated) {
  Manifest m;
  m.name = "cp";
  m.version = 4;
  m.iteration = 40;
  m.ranks = 2;
  m.keys = {"a", "s"};
  m.shared_file = kSharedFileName;
  m.ranges = {{0, 100, 0x0123456789abcdefULL}, {100, 50, 42}};
  Manifest back;
  ASSERT_TRUE(DecodeManifest("M", EncodeManifest(m), &back).ok());
  EXPECT_EQ(back.shared_file, "ranks@shared");
  ASSERT_EQ(back.ranges.size(), 2u);
  EXPECT_EQ(back.ranges[0].checksum, 0x0123456789abcdefULL);
  EXPECT_EQ(back.ranges[1].offset, 100u);
  EXPECT_EQ(back.ranges[1].length, 50u);
  // A manifest without shared lines is file-per-rank mode, as before.
  Manifest files = m;
  files.shared_file.clear();
  files.ranges.clear();
  ASSERT_TRUE(DecodeManifest("M", EncodeManifest(files), &back).ok());
  EXPECT_TRUE(back.shared_file.empty());
  // One range per rank, and none without the shared file (checksummed, so only a writer bug makes these).
  Manifest bad = m;
  bad.ranges.pop_back();
  Status s = DecodeManifest("v-4/MANIFEST", EncodeManifest(bad), &back);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.message().find("v-4/MANIFEST: manifest names 1 rank ranges for 2 ranks"), std::string::npos) << s.ToString();
  // range= lines without a shared= line (checksum recomputed, so only the content is wrong).
  std::string text = EncodeManifest(m);
  text.erase(text.find("shared="), std::string("shared=ranks@shared\n").size());
  text.erase(text.rfind("checksum="));
  char sum[40];
  std::snprintf(sum, sizeof sum, "checksum=%016llx\n", static_cast<unsigned long long>(Checksum64(text.data(), text.size())));
  s = DecodeManifest("M", text + sum, &back);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("no shared file"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace revive::storage
