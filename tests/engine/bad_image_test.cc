// Bad images: every kind of damage gets a clear error naming the file and the reason, from the validator
// and from revive-restart (exit status 2/3, never a crash). Uses a real image made by the fixture test
// engine.make_image (argv: IMAGE RESTART_BINARY WORKDIR).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "image/view.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace {

using revive::image::View;
namespace img = revive::image;

std::string g_image, g_restart, g_work;
std::string g_big;  // an image with a data chunk of several 8 MiB pieces (BigImage tests)

std::vector<uint8_t> load(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string validate(const std::vector<uint8_t>& b, bool* ok) {
  View v;
  char err[512] = "";
  *ok = img::open_view("test.rimg", b.data(), b.size(), &v, err, sizeof err);
  return err;
}

// Recomputes every checksum after a deliberate edit, so only the edit itself is "wrong".
void reseal(std::vector<uint8_t>& b) {
  auto* h = reinterpret_cast<img::FileHeader*>(b.data());
  auto* dir = reinterpret_cast<img::SectionEntry*>(b.data() + h->dir_offset);
  for (uint32_t i = 0; i < h->dir_count; ++i) dir[i].xxh3 = XXH3_64bits(b.data() + dir[i].offset, dir[i].length);
  auto* t = reinterpret_cast<img::Trailer*>(b.data() + b.size() - sizeof(img::Trailer));
  t->dir_xxh3 = XXH3_64bits(dir, h->dir_count * sizeof(img::SectionEntry));
  t->trailer_xxh3 = XXH3_64bits(t, offsetof(img::Trailer, trailer_xxh3));
  h->header_xxh3 = XXH3_64bits(h, offsetof(img::FileHeader, header_xxh3));
}

img::SectionEntry* section(std::vector<uint8_t>& b, const char* name) {
  auto* h = reinterpret_cast<img::FileHeader*>(b.data());
  auto* dir = reinterpret_cast<img::SectionEntry*>(b.data() + h->dir_offset);
  for (uint32_t i = 0; i < h->dir_count; ++i)
    if (strcmp(dir[i].name, name) == 0) return &dir[i];
  return nullptr;
}

// Runs revive-restart on the bytes; returns its wait status and stderr.
int restart_on(const std::vector<uint8_t>& b, const std::string& tag, std::string* err) {
  std::string path = g_work + "/bad-" + tag + ".rimg";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  std::string errf = path + ".stderr";
  std::string cmd = "'" + g_restart + "' '" + path + "' </dev/null >/dev/null 2>'" + errf + "'";
  int st = system(cmd.c_str());
  std::vector<uint8_t> e = load(errf);
  err->assign(e.begin(), e.end());
  return st;
}

void expect_refused(const std::vector<uint8_t>& b, const std::string& tag, const char* reason, int code = 2) {
  bool ok = true;
  std::string msg = validate(b, &ok);
  if (code == 2) {
    EXPECT_FALSE(ok) << tag;
    EXPECT_NE(msg.find(reason), std::string::npos) << tag << ": " << msg;
  }
  std::string err;
  int st = restart_on(b, tag, &err);
  ASSERT_TRUE(WIFEXITED(st)) << tag << ": revive-restart died of a signal";
  EXPECT_EQ(WEXITSTATUS(st), code) << tag << ": " << err;
  EXPECT_NE(err.find(reason), std::string::npos) << tag << ": " << err;
  EXPECT_NE(err.find("bad-" + tag + ".rimg"), std::string::npos) << tag << ": message must name the file: " << err;
}

TEST(BadImage, ValidImageValidates) {
  auto b = load(g_image);
  bool ok = false;
  std::string msg = validate(b, &ok);
  ASSERT_TRUE(ok) << msg;
  View v;
  char err[512];
  ASSERT_TRUE(img::open_view("x", b.data(), b.size(), &v, err, sizeof err));
  EXPECT_GT(v.region_count, 5u);
  EXPECT_GE(v.thread_count, 1u);  // a one-thread program: its thread also served the checkpoint
  for (uint32_t i = 0; i < v.chunk_count; ++i) EXPECT_TRUE(img::verify_chunk("x", v, i, err, sizeof err)) << err;
}

TEST(BadImage, Empty) { expect_refused({}, "empty", "file is empty"); }

TEST(BadImage, Truncated) {
  auto b = load(g_image);
  for (size_t keep : {size_t{100}, b.size() / 2, b.size() - 1}) {
    std::vector<uint8_t> t(b.begin(), b.begin() + long(keep));
    expect_refused(t, "trunc" + std::to_string(keep), "truncated");
  }
}

TEST(BadImage, Foreign) {
  std::vector<uint8_t> f(8192, 0);
  const char* txt = "#!/bin/sh\necho this is not an image\n";
  memcpy(f.data(), txt, strlen(txt));
  expect_refused(f, "foreign", "not a revive image");
  auto elf = load("/bin/true");
  expect_refused(elf, "elf", "not a revive image");
}

TEST(BadImage, HeaderBitFlip) {
  auto b = load(g_image);
  b[offsetof(img::FileHeader, prog)] ^= 0x20;
  expect_refused(b, "hdrflip", "header checksum");
}

TEST(BadImage, SectionBitFlip) {
  auto b = load(g_image);
  img::SectionEntry* s = section(b, "regions");
  ASSERT_NE(s, nullptr);
  b[s->offset + 17] ^= 1;
  expect_refused(b, "secflip", "section 'regions' checksum mismatch");
}

TEST(BadImage, TrailerBitFlip) {
  auto b = load(g_image);
  b[b.size() - 30] ^= 4;
  expect_refused(b, "trlflip", "trailer");
}

TEST(BadImage, OtherArchitecture) {
  auto b = load(g_image);
  reinterpret_cast<img::FileHeader*>(b.data())->arch = 183;  // EM_AARCH64
  reseal(b);
  expect_refused(b, "arch", "architecture 183");
}

TEST(BadImage, NewerFormat) {
  auto b = load(g_image);
  reinterpret_cast<img::FileHeader*>(b.data())->version = 99;
  reseal(b);
  expect_refused(b, "version", "format version 99");
}

// Shared memory records (format 2, section "shm"). The fixture maps no shared memory, so a plugin section
// is turned into an "shm" section holding one crafted record for a region flagged as a shared object.
struct ShmCase {
  std::vector<uint8_t> b;
  img::RegionRecord* region = nullptr;
  img::ShmRecord* rec = nullptr;
  uint32_t region_index = 0;
};

ShmCase shm_case(bool with_section) {
  ShmCase c;
  c.b = load(g_image);
  auto* h = reinterpret_cast<img::FileHeader*>(c.b.data());
  img::SectionEntry* regs = section(c.b, "regions");
  auto* r = reinterpret_cast<img::RegionRecord*>(c.b.data() + regs->offset);
  const uint32_t n = uint32_t(regs->length / sizeof *r);
  for (uint32_t i = 0; i < n && !c.region; ++i)  // an anonymous private region: no chunks needed either way
    if (!r[i].path[0]) c.region = &r[i], c.region_index = i;
  c.region->flags |= img::kRegShared | img::kRegShmObj;
  if (!with_section) return c;
  auto* dir = reinterpret_cast<img::SectionEntry*>(c.b.data() + h->dir_offset);
  for (uint32_t i = 0; i < h->dir_count && !c.rec; ++i)
    if (dir[i].kind == img::kKindPlugin && dir[i].length >= sizeof(img::ShmRecord)) {
      memset(dir[i].name, 0, sizeof dir[i].name);
      strcpy(dir[i].name, "shm");
      dir[i].kind = img::kKindEngine;
      dir[i].version = img::kShmVersion;
      dir[i].length = sizeof(img::ShmRecord);
      c.rec = reinterpret_cast<img::ShmRecord*>(c.b.data() + dir[i].offset);
    }
  memset(c.rec, 0, sizeof *c.rec);
  c.rec->region = c.region_index;
  c.rec->kind = img::kShmAnon;
  return c;
}

TEST(BadImage, ShmRecordsChecked) {
  {  // the crafted record itself is well formed: only the damage below is refused
    ShmCase c = shm_case(true);
    c.region->chunk_count = 0;
    reseal(c.b);
    bool ok = false;
    std::string msg = validate(c.b, &ok);
    EXPECT_TRUE(ok) << msg;
  }
  {
    ShmCase c = shm_case(false);
    reseal(c.b);
    expect_refused(c.b, "shm-norecord", "1 region(s) flagged as shared memory objects but 0 record(s)");
  }
  {
    ShmCase c = shm_case(true);
    c.rec->region = 1u << 30;
    reseal(c.b);
    expect_refused(c.b, "shm-region", "shared memory record 0 names no region (malformed section 'shm')");
  }
  {
    ShmCase c = shm_case(true);
    c.rec->kind = 77;
    reseal(c.b);
    expect_refused(c.b, "shm-kind", "shared memory record 0 has an unknown kind");
  }
  {
    ShmCase c = shm_case(true);
    c.rec->kind = img::kShmSysV;
    c.rec->sysv_id = -1;
    reseal(c.b);
    expect_refused(c.b, "shm-sysv", "shared memory record 0 has a bad SysV id");
  }
  {
    ShmCase c = shm_case(true);
    c.rec->flags = img::kShmBytesElsewhere;
    c.region->chunk_count = 1;
    reseal(c.b);
    expect_refused(c.b, "shm-elsewhere", "says its bytes are elsewhere but its region stores some");
  }
  {
    ShmCase c = shm_case(true);
    reinterpret_cast<img::FileHeader*>(c.b.data())->version = 1;
    reseal(c.b);
    expect_refused(c.b, "shm-v1", "section 'shm' in a format version 1 image");
  }
}

TEST(BadImage, DataChunkBitFlip) {
  auto b = load(g_image);
  View v;
  char err[512];
  ASSERT_TRUE(img::open_view("x", b.data(), b.size(), &v, err, sizeof err));
  // Flip a byte in the largest chunk (program data, not the vdso copy).
  uint32_t big = 0;
  for (uint32_t i = 0; i < v.chunk_count; ++i)
    if (v.chunks[i].len > v.chunks[big].len) big = i;
  uint64_t off = v.chunks[big].file_offset + 123;
  b[off] ^= 0x80;
  ASSERT_TRUE(img::open_view("x", b.data(), b.size(), &v, err, sizeof err)) << "tables are intact";
  EXPECT_FALSE(img::verify_chunk("x", v, big, err, sizeof err));
  EXPECT_NE(std::string(err).find("checksum mismatch"), std::string::npos) << err;
  expect_refused(b, "dataflip", "checksum mismatch", 3);
}

// revive-restart reads the data in pieces of at most 8 MiB, several in flight (src/restart/reader.cpp), and
// checksums them in order as they arrive: damage in a late one must still be caught whatever the number
// of readers, and the refusal must come back as an exit status, not a hang or a signal.
TEST(BigImage, LatePieceBitFlipRefused) {
  ASSERT_FALSE(g_big.empty()) << "run with BIG_IMAGE (the engine.bad_big_image test)";
  auto b = load(g_big);
  View v;
  char err[512];
  ASSERT_TRUE(img::open_view("x", b.data(), b.size(), &v, err, sizeof err));
  // The writer cuts chunks of at most 8 MiB: the heap is several, read in parallel. Damage the last.
  uint32_t big = 0, n_big = 0;
  for (uint32_t i = 0; i < v.chunk_count; ++i)
    if (v.chunks[i].len >= (uint64_t{4} << 20)) big = i, ++n_big;
  ASSERT_GE(n_big, 4u) << "the big image should hold 4+ large chunks";
  const uint64_t at = (v.chunks[big].len / 4096 - 3) * 4096 + 77;
  b[v.chunks[big].file_offset + at] ^= 0x01;
  for (const char* readers : {"1", "3", "8"}) {
    setenv("REVIVE_RESTART_READERS", readers, 1);
    expect_refused(b, std::string("lateflip-r") + readers, "checksum mismatch", 3);
  }
  unsetenv("REVIVE_RESTART_READERS");
  // The same image undamaged comes back and runs to its end (exit status 0), with three readers.
  b[v.chunks[big].file_offset + at] ^= 0x01;
  std::string e;
  const int st = restart_on(b, "lateflip-undone", &e);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << e;
}

TEST(BadImage, VdsoSizeMismatchRefused) {
  auto b = load(g_image);
  img::SectionEntry* s = section(b, "process");
  ASSERT_NE(s, nullptr);
  auto* pi = reinterpret_cast<img::ProcessInfo*>(b.data() + s->offset);
  pi->vdso_end += 4096;
  reseal(b);
  expect_refused(b, "vdso", "[vdso] is", 3);
}

TEST(BadImage, MissingFile) {
  std::string cmd = "'" + g_restart + "' /nonexistent/x.rimg 2>/dev/null >/dev/null";
  int st = system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: %s IMAGE RESTART WORKDIR [BIG_IMAGE]\n", argv[0]);
    return 2;
  }
  g_image = argv[1];
  g_restart = argv[2];
  g_work = argv[3];
  if (argc == 5) g_big = argv[4];
  return RUN_ALL_TESTS();
}
