// Nested checkpoints, paper Table I: Listing 7 with nL1iter=2, L1cpFreq=1, nL2iter=30, L2cpFreq=10.
// The process dies (_exit in a forked child, no destructors run: like a kill) at each stage of Fig. 3;
// the restarted run must read exactly the versions of Table I and finish with the bytes of an
// uninterrupted run.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "app_util.h"

namespace revive {
namespace {

using testing::Opts;
using testing::TmpDir;

struct Kill {
  int64_t l1, l2;  // die in L1 iteration l1 right before L2 iteration l2 (l2 = 31: after the L2 loop)
};
constexpr Kill kNoKill{-1, -1};

struct Reads {
  bool cl1 = false;
  uint64_t cl1_version = 0;
  int64_t cl1_iteration = -1;
  bool cl2 = false;
  int64_t cl2_iteration = -1;  // first CL2 read of the run
  double result[2] = {};
};

Reads Program(const TmpDir& t, Kill kill) {
  Reads r;
  Checkpoint cl1("CL1", Opts(t)), cl2("CL2", Opts(t));
  cl1.add_child(cl2);
  int64_t l1iter = 0;
  double l1sum = 0;
  int64_t l2iter = 0;
  double l2sum = 0;
  cl1.add("l1sum", &l1sum);
  cl2.add("l2sum", &l2sum);
  cl1.commit();
  cl2.commit();
  if (cl1.restart_if_needed(&l1iter)) {
    r.cl1 = true;
    r.cl1_version = cl1.version();
    r.cl1_iteration = cl1.iteration();
  }
  for (; l1iter < 2; ++l1iter) {
    l2sum = 0;
    l2iter = 1;
    if (cl2.restart_if_needed(&l2iter) && !r.cl2) {
      r.cl2 = true;
      r.cl2_iteration = cl2.iteration();
    }
    for (; l2iter <= 30; ++l2iter) {
      if (l1iter == kill.l1 && l2iter == kill.l2) _exit(3);
      l2sum = l2sum * 1.0001 + static_cast<double>(l2iter * (l1iter + 1));
      cl2.update_and_write(l2iter, 10);
    }
    if (l1iter == kill.l1 && kill.l2 == 31) _exit(3);
    l1sum = l1sum * 0.5 + l2sum;
    cl1.update_and_write(l1iter, 1);
  }
  r.result[0] = l1sum;
  r.result[1] = l2sum;
  return r;
}

struct Row {
  const char* stage;
  Kill kill;
  bool cl1;
  uint64_t cl1_version;
  bool cl2;
  int64_t cl2_iteration;
};

TEST(Nested, TableI) {
  Reads reference;
  {
    TmpDir t;
    reference = Program(t, kNoKill);
    EXPECT_FALSE(reference.cl1 || reference.cl2);
  }
  const Row rows[] = {
      {"I", {0, 5}, false, 0, false, 0},     {"II", {0, 15}, false, 0, true, 10},
      {"III", {0, 25}, false, 0, true, 20},  {"after CL2-v=30, before CL1 write", {0, 31}, false, 0, true, 30},
      {"IV", {1, 5}, true, 1, false, 0},     {"V", {1, 15}, true, 1, true, 10},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(std::string("stage ") + row.stage);
    TmpDir t;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Program(t, row.kill);
      _exit(0);  // not reached when the kill point is hit
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 3) << "the failure point was not reached";
    Reads r = Program(t, kNoKill);
    EXPECT_EQ(r.cl1, row.cl1);
    if (row.cl1) {
      EXPECT_EQ(r.cl1_version, row.cl1_version);
      EXPECT_EQ(r.cl1_iteration, 0);  // CL1 version 1 was written at L1 iteration 0
    }
    EXPECT_EQ(r.cl2, row.cl2);
    if (row.cl2) {
      EXPECT_EQ(r.cl2_iteration, row.cl2_iteration);
    }
    EXPECT_EQ(0, std::memcmp(r.result, reference.result, sizeof r.result))
        << r.result[0] << " vs " << reference.result[0];
  }
}

// The invalidation also holds when the children's files are still on disk (e.g. the cleanup after the
// parent's write was cut short): the child version records the parent version it belongs to.
TEST(Nested, StaleChildVersionIsIgnoredEvenIfPresent) {
  TmpDir t;
  {
    Checkpoint p("P", Opts(t)), c("C", Opts(t));
    p.add_child(c);
    int a = 1, b = 2;
    p.add("a", &a);
    c.add("b", &b);
    p.commit();
    c.commit();
    c.write(30);  // child version with parent version 0
  }
  {
    // Parent alone (no child registered), so the child's files are not removed.
    Checkpoint p("P", Opts(t));
    int a = 1;
    p.add("a", &a);
    p.commit();
    p.write(0);
  }
  Checkpoint p("P", Opts(t)), c("C", Opts(t));
  p.add_child(c);
  int a = 0, b = 0;
  p.add("a", &a);
  c.add("b", &b);
  p.commit();
  c.commit();
  EXPECT_TRUE(p.restart_if_needed());
  EXPECT_FALSE(c.restart_if_needed());
  EXPECT_EQ(b, 0);
}

}  // namespace
}  // namespace revive
