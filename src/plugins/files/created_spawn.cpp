// posix_spawn's file actions, for the creation log (created_log.h) and the pre-images (files_pre.h): glibc
// runs an addopen action in the spawned child, between its clone and its exec, where no wrapper of ours
// runs. So the parent remembers each addopen (and addchdir_np / addfchdir_np, which move where the later
// relative paths lead) per actions object, and around the spawn (proctree's wrapper) keeps the pre-image
// of each file an action opens for writing before the child can change it, then records the node-local
// files an O_CREAT action made once it has returned (the child has exec'd by then: the files exist).
//
// Not a signal path: allocation is fine; the table's lock is a spin lock that gives up after a while
// rather than ever block (a fork in another thread while it is held must not leave the child stuck), so
// a busy or full table only loses the record of a file.
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/next_symbol.h"
#include "plugins/files/created_log.h"
#include "plugins/files/files_pre.h"
#include "plugins/vpid/vpid_prime.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace revive::plugins {
namespace {

struct Action {
  const void* fa;  // the actions object (nullptr: a free slot)
  char* path;      // as the child will resolve it from the parent's working directory (malloc'd)
  int oflag;
};
constexpr int kActions = 256;
Action g_actions[kActions];
// The directory relative paths of later actions lead to, per object (addchdir_np): a prefix with '/'.
struct Dir {
  const void* fa;
  char* prefix;
};
Dir g_dirs[32];
int g_lock;

bool lock() {
  for (int k = 0; k < 100000; ++k) {
    if (!__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE)) return true;
    if (k > 100) sched_yield();
  }
  return false;
}
void unlock() { __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE); }

Dir* dir_of(const void* fa) {
  for (auto& d : g_dirs)
    if (d.fa == fa) return &d;
  return nullptr;
}

void forget(const void* fa) {
  if (!lock()) return;
  for (auto& a : g_actions)
    if (a.fa == fa) free(a.path), a = Action{};
  if (Dir* d = dir_of(fa)) free(d->prefix), *d = Dir{};
  unlock();
}

// A later relative path of fa's actions leads below `prefix` (ends with '/'), relative to the current one.
void set_dir(const void* fa, const char* dir) {
  char buf[PATH_MAX];
  if (!lock()) return;
  Dir* d = dir_of(fa);
  if (!d) d = dir_of(nullptr);
  if (d) {
    Msg m(buf, sizeof buf);
    if (dir[0] != '/' && d->fa == fa && d->prefix) m.s(d->prefix);
    m.s(dir).s("/");
    if (m.size() + 1 >= sizeof buf) buf[0] = '\0';  // cut short: later relative paths are not followed
    free(d->prefix);
    d->prefix = buf[0] ? strdup(buf) : nullptr;
    d->fa = d->prefix ? fa : nullptr;
  }
  unlock();
}

void remember(const void* fa, const char* path, int oflag) {
  if ((oflag & O_ACCMODE) == O_RDONLY && !(oflag & (O_TRUNC | O_CREAT))) return;  // changes nothing
  char buf[PATH_MAX];
  if (!lock()) return;
  const Dir* d = path[0] == '/' ? nullptr : dir_of(fa);
  Msg m(buf, sizeof buf);
  m.s(d ? d->prefix : "").s(path);
  for (auto& a : g_actions) {
    if (m.size() + 1 >= sizeof buf) break;  // cut short: would name another file
    if (a.fa) continue;
    a.path = strdup(buf);
    if (a.path) a.fa = fa, a.oflag = oflag;
    break;
  }
  unlock();
}

}  // namespace

int64_t spawn_actions_before(const void* fa) {
  if (!fa) return 0;
  if (lock()) {
    for (const auto& a : g_actions)
      if (a.fa == fa) pre_open(AT_FDCWD, a.path, a.oflag);
    unlock();
  }
  return created_clock();
}

void spawn_actions_after(const void* fa, int rc, int64_t t_before) {
  if (!fa || rc != 0 || !lock()) return;
  for (const auto& a : g_actions)
    if (a.fa == fa && (a.oflag & O_CREAT)) created_path(AT_FDCWD, a.path, a.oflag & O_EXCL, t_before);
  unlock();
}

}  // namespace revive::plugins

using revive::plugins::forget;
using revive::plugins::remember;
using revive::plugins::set_dir;

#define FA_CALL(name, params, args, after) \
  VPID_WRAPPER_AFTER(int, ENOSYS, name, params, args, (void)0, if (r == 0) after)
FA_CALL(posix_spawn_file_actions_init, (posix_spawn_file_actions_t* fa), (fa), forget(fa))
FA_CALL(posix_spawn_file_actions_destroy, (posix_spawn_file_actions_t* fa), (fa), forget(fa))
FA_CALL(posix_spawn_file_actions_addopen, (posix_spawn_file_actions_t* fa, int fd, const char* path, int oflag, mode_t mode),
        (fa, fd, path, oflag, mode), remember(fa, path, oflag))
FA_CALL(posix_spawn_file_actions_addchdir_np, (posix_spawn_file_actions_t* fa, const char* dir), (fa, dir), set_dir(fa, dir))
// A directory descriptor: the parent still holds it when the spawn returns (the child inherited it).
FA_CALL(posix_spawn_file_actions_addfchdir_np, (posix_spawn_file_actions_t* fa, int dfd), (fa, dfd), {
  char d[40];
  revive::plugins::Msg(d, sizeof d).s("/proc/self/fd/").i(dfd);
  set_dir(fa, d);
})
