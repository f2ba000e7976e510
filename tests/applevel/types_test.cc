// Every registrable type and every API call round-trips through a written version, plus API misuse.
#include <stdlib.h>

#include <complex>
#include <filesystem>
#include <fstream>

#include "app_util.h"

namespace revive {
namespace {

using testing::ExpectError;
using testing::Opts;
using testing::TmpDir;

struct Particle {
  double x, y, z;
  int id;
};

// A class we pretend we cannot modify: checkpointed through a free serialize() found by ADL.
struct Mesh {
  std::string label;
  std::vector<double> nodes;
  std::vector<std::string> tags;
  int level = 0;
};
void serialize(Archive& ar, Mesh& m) { ar & m.label & m.nodes & m.tags & m.level; }

class Counter : public Checkpointable {
 public:
  int64_t value = 0;
  std::vector<int> history;
  int updates = 0;
  void update() override { ++updates; }
  void write(Writer& w) const override {
    w.write(value);
    w.write(history);
  }
  void read(Reader& r) override {
    r.read(value);
    r.read(history);
  }
};

struct State {
  int i = 0;
  double d = 0;
  float f = 0;
  std::complex<double> z;
  Particle p{};
  long arr[5] = {};
  double m_store[3][4] = {};
  double* m[3] = {m_store[0], m_store[1], m_store[2]};
  int c_store[2][5] = {};
  int* c[2] = {c_store[0], c_store[1]};
  std::vector<float> v;
  std::string s;
  Mesh mesh;
  Counter ref;
  std::shared_ptr<Counter> shared = std::make_shared<Counter>();
  std::vector<Mesh> meshes;

  void Register(Checkpoint& cp) {
    cp.add("i", &i);
    cp.add("d", &d);
    cp.add("f", &f);
    cp.add("z", &z);
    cp.add("p", &p);
    cp.add("arr", arr, 5);
    cp.add("m", m, 3, 4);
    cp.add("cols", c, 2, 5, {1, 3});
    cp.add("v", v);
    cp.add("s", s);
    cp.add("mesh", &mesh);
    cp.add("ref", ref);
    cp.add("shared", shared);
    cp.add("meshes", meshes);
  }
  void Fill(int k) {
    i = 7 * k;
    d = 1.5 * k;
    f = 0.25f * k;
    z = {1.0 * k, -2.0 * k};
    p = {1.0 * k, 2.0, 3.0, k};
    for (int j = 0; j < 5; ++j) arr[j] = 100L * k + j;
    for (int r = 0; r < 3; ++r)
      for (int col = 0; col < 4; ++col) m[r][col] = r * 10 + col + k;
    for (int r = 0; r < 2; ++r)
      for (int col = 0; col < 5; ++col) c[r][col] = 1000 * k + 10 * r + col;
    v.assign(static_cast<size_t>(k + 3), 0.5f * k);
    s = "state " + std::to_string(k) + std::string(static_cast<size_t>(k), '!');
    mesh.label = "mesh" + std::to_string(k);
    mesh.nodes.assign(static_cast<size_t>(k), 2.0 * k);
    mesh.tags = {"a", std::to_string(k)};
    mesh.level = k;
    ref.value = k;
    ref.history.assign(static_cast<size_t>(k), k);
    shared->value = -k;
    meshes.assign(2, mesh);
    meshes[1].label = "second";
  }
};

void ExpectSame(State& a, State& b, bool cols_only_picked) {
  EXPECT_EQ(a.i, b.i);
  EXPECT_EQ(a.d, b.d);
  EXPECT_EQ(a.f, b.f);
  EXPECT_EQ(a.z, b.z);
  EXPECT_EQ(0, std::memcmp(&a.p, &b.p, sizeof a.p));
  EXPECT_EQ(0, std::memcmp(a.arr, b.arr, sizeof a.arr));
  EXPECT_EQ(0, std::memcmp(a.m_store, b.m_store, sizeof a.m_store));
  for (int r = 0; r < 2; ++r)
    for (int col = 0; col < 5; ++col)
      if (!cols_only_picked || col == 1 || col == 3) {
        EXPECT_EQ(a.c[r][col], b.c[r][col]) << r << "," << col;
      }
  EXPECT_EQ(a.v, b.v);
  EXPECT_EQ(a.s, b.s);
  EXPECT_EQ(a.mesh.label, b.mesh.label);
  EXPECT_EQ(a.mesh.nodes, b.mesh.nodes);
  EXPECT_EQ(a.mesh.tags, b.mesh.tags);
  EXPECT_EQ(a.mesh.level, b.mesh.level);
  EXPECT_EQ(a.ref.value, b.ref.value);
  EXPECT_EQ(a.ref.history, b.ref.history);
  EXPECT_EQ(a.shared->value, b.shared->value);
  ASSERT_EQ(a.meshes.size(), b.meshes.size());
  EXPECT_EQ(a.meshes[1].label, b.meshes[1].label);
}

class TypesTest : public ::testing::TestWithParam<bool> {};  // param: compress

TEST_P(TypesTest, EveryTypeRoundTrips) {
  TmpDir t;
  Options o = Opts(t);
  o.compress = GetParam();
  State a;
  {
    Checkpoint cp("types", o);
    a.Register(cp);
    cp.commit();
    int64_t it = 0;
    EXPECT_FALSE(cp.restart_if_needed(&it));
    EXPECT_EQ(it, 0);
    a.Fill(4);
    cp.write(4);
    EXPECT_EQ(a.ref.updates, 1);  // the update hook runs for each version taken
    a.Fill(5);
    cp.update_and_write(5, 5);
    EXPECT_EQ(a.ref.updates, 2);  // once per version, also through update_and_write
    EXPECT_EQ(cp.version(), 2u);
    EXPECT_EQ(cp.iteration(), 5);
  }
  State b;  // different sizes of vector/string/mesh: resized on read
  b.Fill(1);
  Checkpoint cp("types", o);
  b.Register(cp);
  cp.commit();
  int64_t it = 0;
  ASSERT_TRUE(cp.restart_if_needed(&it));
  EXPECT_EQ(it, 6);
  EXPECT_EQ(cp.version(), 2u);
  ExpectSame(a, b, true);
  // The unpicked columns were not touched by the read.
  EXPECT_EQ(b.c[0][0], 1000);
  EXPECT_EQ(b.c[1][4], 1014);
  // A second call in the same run does not read again.
  b.i = -1;
  EXPECT_FALSE(cp.restart_if_needed(&it));
  EXPECT_FALSE(cp.restart_if_needed(nullptr));
  EXPECT_EQ(b.i, -1);
}

INSTANTIATE_TEST_SUITE_P(PlainAndZstd, TypesTest, ::testing::Values(false, true));

TEST(Api, IterationItselfRegisteredAndUpdateAndWriteFrequency) {
  TmpDir t;
  int iteration = 0;
  double x = 0;
  {
    Checkpoint cp("loop", Opts(t));
    cp.add("iteration", &iteration);
    cp.add("x", &x);
    cp.commit();
    ASSERT_FALSE(cp.restart_if_needed(&iteration));
    int writes = 0;
    for (; iteration < 23; ++iteration) {
      x += iteration;
      writes += cp.update_and_write(iteration, 5);
    }
    EXPECT_EQ(writes, 5);  // 0,5,10,15,20
    EXPECT_EQ(cp.iteration(), 20);
    EXPECT_FALSE(cp.update_and_write(3, 0));  // every <= 0: never
  }
  int it2 = -5;
  double x2 = 0;
  Checkpoint cp("loop", Opts(t));
  cp.add("iteration", &it2);
  cp.add("x", &x2);
  cp.commit();
  ASSERT_TRUE(cp.restart_if_needed(&it2));
  EXPECT_EQ(it2, 21);  // recorded 20 (it was also the stored value) -> 20 + 1
  EXPECT_EQ(x2, 210.0);  // sum 0..20
}

TEST(Api, KeepsLastKVersions) {
  TmpDir t;
  Options o = Opts(t);
  o.keep = 3;
  int x = 0;
  std::string dir;
  {
    Checkpoint cp("keep", o);
    cp.add("x", &x);
    cp.commit();
    for (x = 1; x <= 6; ++x) cp.write(x);
    dir = cp.directory();
  }  // old versions are deleted on the writer thread; the destructor (not wait()) waits for that
  std::vector<std::string> dirs;
  for (auto& e : std::filesystem::directory_iterator(dir)) dirs.push_back(e.path().filename());
  std::sort(dirs.begin(), dirs.end());
  EXPECT_EQ(dirs, (std::vector<std::string>{"v-4", "v-5", "v-6"}));
  EXPECT_TRUE(std::filesystem::exists(dir + "/v-6/MANIFEST"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/v-6/x"));
}

TEST(Api, ReadOnRestartOffStartsFresh) {
  TmpDir t;
  int x = 5;
  {
    Checkpoint cp("fresh", Opts(t));
    cp.add("x", &x);
    cp.commit();
    cp.write(9);
  }
  Options o = Opts(t);
  o.read_on_restart = false;
  int y = 1;
  int64_t it = 0;
  Checkpoint cp("fresh", o);
  cp.add("x", &y);
  cp.commit();
  EXPECT_FALSE(cp.restart_if_needed(&it));
  EXPECT_EQ(y, 1);
  EXPECT_EQ(it, 0);
  cp.write(1);
  EXPECT_EQ(cp.version(), 2u);  // numbering continues after the old versions
}

TEST(Api, OptionsFromEnvironment) {
  setenv("REVIVE_CP_PATH", "/tmp/somewhere", 1);
  setenv("REVIVE_KEEP", "5", 1);
  setenv("REVIVE_COMPRESS", "1", 1);
  setenv("REVIVE_WRITE_ASYNC_ZERO_COPY", "1", 1);
  setenv("REVIVE_READ_ON_RESTART", "0", 1);
  setenv("REVIVE_ASYNC_THREAD_CPU", "1", 1);
  setenv("REVIVE_MPIIO", "1", 1);
  Options o = Options::from_env();
  EXPECT_TRUE(o.mpiio);
  EXPECT_EQ(o.base_path, "/tmp/somewhere");
  EXPECT_EQ(o.keep, 5);
  EXPECT_TRUE(o.compress);
  EXPECT_TRUE(o.zero_copy);
  EXPECT_FALSE(o.read_on_restart);
  EXPECT_EQ(o.async_thread_cpu, 1);
  setenv("REVIVE_KEEP", "0", 1);
  ExpectError([] { Options::from_env(); }, {"REVIVE_KEEP"});
  setenv("REVIVE_KEEP", "2", 1);
  setenv("REVIVE_WRITE_ASYNC", "sometimes", 1);
  ExpectError([] { Checkpoint cp("x"); }, {"REVIVE_WRITE_ASYNC", "sometimes"});
  for (const char* n : {"REVIVE_CP_PATH", "REVIVE_KEEP", "REVIVE_COMPRESS", "REVIVE_WRITE_ASYNC_ZERO_COPY",
                        "REVIVE_READ_ON_RESTART", "REVIVE_ASYNC_THREAD_CPU", "REVIVE_WRITE_ASYNC", "REVIVE_MPIIO"})
    unsetenv(n);
}

TEST(Api, MisuseIsAClearError) {
  TmpDir t;
  int x = 0, y = 0;
  double* rows[1] = {nullptr};
  Checkpoint cp("misuse", Opts(t));
  ExpectError([&] { cp.write(1); }, {"misuse", "before commit"});
  ExpectError([&] { cp.restart_if_needed(); }, {"before commit"});
  ExpectError([&] { cp.add("bad/key", &x); }, {"bad/key", "not a valid file name"});
  ExpectError([&] { cp.add("MANIFEST", &x); }, {"MANIFEST"});
  ExpectError([&] { cp.add("", &x); }, {"not a valid"});
  ExpectError([&] { cp.add("m", rows, 1, 3, {0, 3}); }, {"m", "column 3"});
  ExpectError([&] { cp.add("null", std::shared_ptr<Checkpointable>()); }, {"null"});
  cp.add("x", &x);
  ExpectError([&] { cp.add("x", &y); }, {"'x'", "twice"});
  cp.commit();
  ExpectError([&] { cp.add("y", &y); }, {"misuse", "'y'", "after commit"});
  ExpectError([&] { cp.commit(); }, {"twice"});
  ExpectError([&] { Checkpoint bad("../escape", Opts(t)); }, {"../escape", "not a valid directory name"});
  Options o = Opts(t);
  o.keep = 0;
  ExpectError([&] { Checkpoint bad("k", o); }, {"keep"});
  Checkpoint other("other", Opts(t));
  ExpectError([&] { cp.add_child(cp); }, {"itself"});
  cp.add_child(other);
  ExpectError([&] { other.add_child(cp); }, {"cycle"});
  Checkpoint third("third", Opts(t));
  ExpectError([&] { third.add_child(other); }, {"already has a parent"});
}

// Two live objects that write the same directory would number their versions alike: the second one's
// first write() is refused, naming the checkpoint (reading next to a writer is allowed); the name is free
// again once the first is destroyed.
TEST(Api, SameNameWrittenTwiceInOneProcessIsAnError) {
  TmpDir t;
  int x = 1;
  {
    Checkpoint first("twice", Opts(t));
    first.add("x", &x);
    first.commit();
    first.write(1);
    Checkpoint reader("twice", Opts(t));  // reading is fine
    reader.add("x", &x);
    reader.commit();
    EXPECT_TRUE(reader.restart_if_needed());
    ExpectError([&] { reader.write(2); }, {"'twice'", "another Checkpoint object"});
    // The same directory spelt differently (relative, with "./" and a trailing slash) is the same name.
    std::filesystem::path old = std::filesystem::current_path();
    std::filesystem::current_path(t.path());
    Options rel;
    rel.base_path = "./cp/";
    Checkpoint second("twice", rel);
    std::filesystem::current_path(old);
    second.add("x", &x);
    second.commit();
    ExpectError([&] { second.write(2); }, {"'twice'", "another Checkpoint object"});
    // Another name, or the same name under another base, is another checkpoint.
    Checkpoint other("twice2", Opts(t));
    Options elsewhere = Opts(t);
    elsewhere.base_path = t / "sub";
    Checkpoint moved("twice", elsewhere);
    for (Checkpoint* c : {&other, &moved}) {
      c->add("x", &x);
      c->commit();
      c->write(1);
    }
    EXPECT_EQ(first.version(), 1u);
  }
  Checkpoint again("twice", Opts(t));  // the writer is gone: its name is free
  again.add("x", &x);
  again.commit();
  x = 0;
  EXPECT_TRUE(again.restart_if_needed());
  EXPECT_EQ(x, 1);
  again.write(2);
  EXPECT_EQ(again.version(), 2u);
}

// Shared-file mode is for the MPI flavour; a serial checkpoint ignores the option and writes its files.
TEST(Api, MpiioOptionDoesNotChangeASerialCheckpoint) {
  TmpDir t;
  Options o = Opts(t);
  o.mpiio = true;
  int x = 5;
  {
    Checkpoint cp("serial", o);
    cp.add("x", &x);
    cp.commit();
    cp.write(1);
  }
  EXPECT_TRUE(std::filesystem::exists(t / "cp/serial/v-1/x"));
  EXPECT_FALSE(std::filesystem::exists(t / "cp/serial/v-1/ranks@shared"));
}

TEST(Api, RelativeBaseIsResolvedAtConstruction) {
  TmpDir t;
  std::filesystem::path old = std::filesystem::current_path();
  std::filesystem::current_path(t.path());
  Options o;
  o.base_path = "rel/./cps/";
  int x = 3;
  {
    Checkpoint cp("c", o);
    std::filesystem::current_path(old);  // the program moves; its checkpoints do not
    EXPECT_EQ(cp.directory(), t / "rel/cps/c");
    cp.add("x", &x);
    cp.commit();
    cp.write(0);
  }
  EXPECT_TRUE(std::filesystem::exists(t / "rel/cps/c/v-1/x"));
  o.base_path = "";
  ExpectError([&] { Checkpoint cp("c", o); }, {"base path is empty"});
}

TEST(Api, UnwritableBaseIsAClearError) {
  TmpDir t;
  std::string file = t / "plainfile";
  { std::ofstream(file) << "x"; }
  Options o = Opts(t);
  o.base_path = file;
  int x = 0;
  Checkpoint cp("c", o);
  cp.add("x", &x);
  ExpectError([&] { cp.commit(); }, {"plainfile", "cannot create"});
}

}  // namespace
}  // namespace revive
