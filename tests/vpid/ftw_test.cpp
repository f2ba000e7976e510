// The /proc walker of the vpid plugin (src/plugins/vpid/vpid_ftw.cpp) against
// glibc's nftw and ftw on a tree with files, nested and empty directories, a
// FIFO, symlinks to a file, to a directory (reached a second time through it),
// to an ancestor (a loop) and a dangling one: every flag combination (FTW_PHYS,
// FTW_DEPTH, FTW_CHDIR, FTW_MOUNT, FTW_ACTIONRETVAL with skip-subtree,
// skip-siblings and stop), roots with a trailing slash, a symlink, a dangling
// symlink, a file and a missing path. Each callback's path, type, base, level
// and working directory, the return value, errno and the final working
// directory must be glibc's. Exit 1 naming each difference.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "plugins/vpid/vpid.h"
#include "plugins/vpid/vpid_ftw.h"
namespace revive::vpid {
Table g_table;  // unmapped: the nftw/ftw wrappers in vpid_ftw.cpp forward to
                // glibc's
}
static std::vector<std::string> g_log;
static bool g_cwd;
static const char* g_skip_subtree;
static const char* g_skip_sib;
static const char* g_stop;
static int cb(const char* p, const struct stat* st, int type, struct FTW* f) {
  char cwd[4096] = "";
  if (g_cwd && !getcwd(cwd, sizeof cwd)) strcpy(cwd, "?");
  char b[8192];
  snprintf(b, sizeof b, "%s t=%d base=%d lvl=%d cwd=%s %s", p, type, f->base, f->level, cwd,
           type == FTW_NS ? "" : (S_ISDIR(st->st_mode) ? "dir" : "nd"));
  g_log.push_back(b);
  const char* name = p + f->base;
  if (g_stop && !strcmp(name, g_stop)) return (g_skip_subtree || g_skip_sib) ? FTW_STOP : 42;
  if (g_skip_subtree && !strcmp(name, g_skip_subtree)) return FTW_SKIP_SUBTREE;
  if (g_skip_sib && !strcmp(name, g_skip_sib)) return FTW_SKIP_SIBLINGS;
  return 0;
}
static int fcb(const char* p, const struct stat* , int type) {
  char b[8192];
  snprintf(b, sizeof b, "%s t=%d", p, type);
  g_log.push_back(b);
  return 0;
}
int main() {
  using NF = int (*)(const char* , __nftw_func_t, int, int);
  NF libc_nftw = (NF)dlsym(RTLD_NEXT, "nftw");
  using F = int (*)(const char* , __ftw_func_t, int);
  F libc_ftw = (F)dlsym(RTLD_NEXT, "ftw");
  char top[] = "/tmp/revive-ftw-test-XXXXXX";
  if (!mkdtemp(top)) return 2;
  const std::string t = std::string(top) + "/tree";
  for (const char* d : {"", "/a", "/a/b", "/a/b/c", "/d", "/d/e", "/empty"})
    if (mkdir((t + d).c_str(), 0755) != 0) return 2;
  for (const char* f : {"/f1", "/a/f2", "/a/b/c/f3"}) {
    int fd = open((t + f).c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd < 0 || write(fd, "x", 1) != 1) return 2;
    close(fd);
  }
  if (symlink("../f1", (t + "/a/l1").c_str()) || symlink("nowhere", (t + "/a/dangle").c_str()) ||
      symlink("..", (t + "/a/b/up").c_str()) || symlink("../d", (t + "/a/tod").c_str()) ||
      mkfifo((t + "/d/fifo").c_str(), 0644))
    return 2;
  const std::string r_slash = t + "/", r_link = t + "/a/l1", r_dangle = t + "/a/dangle",
                    r_missing = std::string(top) + "/none", r_file = t + "/f1";
  const char* roots[] = {t.c_str(),        r_slash.c_str(),   r_link.c_str(),
                         r_dangle.c_str(), r_missing.c_str(), r_file.c_str()};
  int flagsets[] = {0,
                    FTW_PHYS,
                    FTW_DEPTH,
                    FTW_PHYS | FTW_DEPTH,
                    FTW_CHDIR,
                    FTW_CHDIR | FTW_DEPTH,
                    FTW_MOUNT,
                    FTW_PHYS | FTW_CHDIR | FTW_DEPTH | FTW_MOUNT,
                    FTW_ACTIONRETVAL,
                    FTW_ACTIONRETVAL | FTW_DEPTH};
  struct {
    const char* sub;
    const char* sib;
    const char* stop;
  } acts[] = {{0, 0, 0}, {"a", 0, 0}, {0, "b", 0}, {0, 0, "c"}, {"b", "e", "f3"}};
  int bad = 0, n = 0;
  for (const char* r : roots)
    for (int fl : flagsets)
      for (auto a : acts) {
        if (!(fl & FTW_ACTIONRETVAL) && (a.sub || a.sib)) continue;
        g_cwd = fl & FTW_CHDIR;
        g_skip_subtree = a.sub;
        g_skip_sib = a.sib;
        g_stop = a.stop;
        if (chdir(top)) return 2;
        g_log.clear();
        errno = 0;
        int r1 = libc_nftw(r, cb, 5, fl);
        int e1 = r1 < 0 ? errno : 0;
        auto l1 = g_log;
        char c1[4096];
        if (!getcwd(c1, sizeof c1)) strcpy(c1, "?");
        if (chdir(top)) return 2;
        g_log.clear();
        errno = 0;
        int r2 = revive::vpid::walk_tree(r, cb, nullptr, fl);
        int e2 = r2 < 0 ? errno : 0;
        auto l2 = g_log;
        char c2[4096];
        if (!getcwd(c2, sizeof c2)) strcpy(c2, "?");
        ++n;
        if (r1 != r2 || e1 != e2 || l1 != l2 || strcmp(c1, c2)) {
          ++bad;
          printf(
              "DIFF root=%s flags=%#x sub=%s sib=%s stop=%s: ret %d/%d "
              "errno %d/%d cwd %s/%s\n",
              r, fl, a.sub ? a.sub : "-", a.sib ? a.sib : "-", a.stop ? a.stop : "-", r1, r2, e1, e2, c1, c2);
          for (size_t i = 0; i < l1.size() || i < l2.size(); ++i) {
            const char* x = i < l1.size() ? l1[i].c_str() : "(none)";
            const char* y = i < l2.size() ? l2[i].c_str() : "(none)";
            if (strcmp(x, y)) printf("  %zu glibc: %s\n  %zu ours : %s\n", i, x, i, y);
          }
        }
      }
  for (const char* r : roots) {
    g_log.clear();
    int r1 = libc_ftw(r, fcb, 5);
    auto l1 = g_log;
    g_log.clear();
    int r2 = revive::vpid::walk_tree(r, nullptr, fcb, 0);
    ++n;
    if (r1 != r2 || l1 != g_log) {
      ++bad;
      printf("FTW DIFF %s %d/%d\n", r, r1, r2);
    }
  }
  printf("%d of %d walks differ from glibc's\n", bad, n);
  std::string rm = std::string("rm -rf ") + top;
  if (chdir("/") || system(rm.c_str())) return 2;
  return bad != 0;
}
