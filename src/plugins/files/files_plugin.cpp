// files plugin: the contents of files the computation writes come back with the checkpoint
// (files_save.cpp, files_scan.cpp, files_restore.cpp; policy in docs/plugins.md).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/outside_files.h"
#include "plugins/files/created_log.h"
#include "plugins/files/files_internal.h"
#include "plugins/files/files_pre.h"
#include "plugins/plugins.h"

namespace revive::plugins {

FilesPolicy g_files = {true, kDefaultFilesMaxBytes, kDefaultFilesDeltaBytes, "/tmp:/var/tmp:/dev/shm", "", "", true, false, 0, 0, false, false, ""};

namespace {

bool parse_i64(const char* v, int64_t lo, int64_t hi, int64_t* out) {
  if (!v || !*v) return false;
  char* end = nullptr;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || *end || x < lo || x > hi) return false;
  *out = x;
  return true;
}

// A size in MiB from the environment into *bytes (left alone when unset). false, warned, if malformed.
bool mib_setting(const char* name, int64_t* bytes) {
  const char* v = getenv(name);
  if (!v) return true;
  int64_t mb = 0;
  if (!parse_i64(v, 0, 1 << 20, &mb)) {
    char line[160];
    warn(Msg(line, sizeof line).s(name).s(" is not a size in MiB (0..1048576); checkpointing disabled").c_str());
    return false;
  }
  *bytes = mb << 20;
  return true;
}

// A setting NAME that is FIRST (the default, also when empty: *on = true) or SECOND (*on = false); false,
// warned, otherwise.
bool two_way(const char* name, const char* first, const char* second, bool* on) {
  const char* v = getenv(name);
  if (!v) return true;
  if (*v == '\0' || strcmp(v, first) == 0) *on = true;
  else if (strcmp(v, second) == 0) *on = false;
  else {
    char line[160];
    warn(Msg(line, sizeof line).s(name).s(" must be '").s(first).s("' or '").s(second).s("'; checkpointing disabled").c_str());
    return false;
  }
  return true;
}

}  // namespace

// init runs before main, single-threaded: getenv is fine here (and only here). A malformed setting
// disables checkpointing with a warning rather than silently saving less than asked.
int files_init() {
  outside_files_init();  // a malformed list is the fd plugin's warning
  if (!two_way("REVIVE_FILES", "written", "none", &g_files.written) ||
      !two_way("REVIVE_FILES_AFTER", "move", "keep", &g_files.displace))
    return -EINVAL;
  bool by_log = true;
  if (!two_way("REVIVE_LOCAL_WALK", "log", "birth", &by_log)) return -EINVAL;
  g_files.walk_birth = !by_log;
  if (!mib_setting("REVIVE_FILES_MAX_MB", &g_files.max_bytes) ||
      !mib_setting("REVIVE_FILES_DELTA_MB", &g_files.delta_bytes))  // 0: never by blocks
    return -EINVAL;
  if (const char* v = getenv("REVIVE_LOCAL_DIRS")) {
    size_t n = strlen(v);
    bool ok = n < sizeof g_files.local;
    for (const char* d = v; ok && *d;) {  // every entry absolute
      if (*d != '/') ok = false;
      const char* e = strchr(d, ':');
      if (!e) break;
      d = e + 1;
    }
    if (!ok) {
      warn("REVIVE_LOCAL_DIRS must be ':'-separated absolute directories (under 1024 bytes); checkpointing disabled");
      return -EINVAL;
    }
    memcpy(g_files.local, v, n + 1);
  }
  // The walk must not take revive's own per-user records (the coordinator's port record is born under
  // /tmp during the run): same rule as launch/user_record.cpp's UserRecordDir.
  const char* x = getenv("XDG_RUNTIME_DIR");
  struct stat xs;
  if (x && *x == '/' && strlen(x) + 8 < sizeof g_files.records && stat(x, &xs) == 0 && S_ISDIR(xs.st_mode) &&
      xs.st_uid == getuid())
    snprintf(g_files.records, sizeof g_files.records, "%s/revive", x);
  else
    snprintf(g_files.records, sizeof g_files.records, "/tmp/revive-%u", unsigned(getuid()));
  if (const char* v = getenv("REVIVE_LAUNCH_CWD"); v && *v == '/' && strlen(v) < sizeof g_files.launch_cwd)
    memcpy(g_files.launch_cwd, v, strlen(v) + 1);
  // Where multi-level storage keeps images and pieces (coord/tlevels.cpp, applevel options: same default).
  const char* lp = getenv("REVIVE_LOCAL_PATH");
  if (lp && *lp == '/' && strlen(lp) < sizeof g_files.levels)
    snprintf(g_files.levels, sizeof g_files.levels, "%s", lp);
  else
    snprintf(g_files.levels, sizeof g_files.levels, "/dev/shm/revive-%u", unsigned(getuid()));
  int64_t root = 0, t0 = 0;
  g_files.launched = parse_i64(getenv("REVIVE_LAUNCH_T0"), 1, INT64_MAX, &t0);
  if (g_files.launched && parse_i64(getenv("REVIVE_LAUNCH_ROOT"), 1, 1LL << 31, &root) && root == getpid())
    g_files.root = true;
  if (g_files.launched) {  // every process: any may be its host's walker (files_walker.cpp)
    g_files.t0_sec = t0 / 1000000000;
    g_files.t0_nsec = t0 % 1000000000;
  }
  pre_init();
  created_init();
  return 0;
}

}  // namespace revive::plugins

namespace revive::inject {

// Weak default so the plugins link without the engine (plugin tests).
__attribute__((weak)) const char* checkpoint_dir() { return ""; }
__attribute__((weak)) const char* host_name() { return ""; }
__attribute__((weak)) bool coord_publish(const char*, const char*) { return false; }
__attribute__((weak)) int coord_next(const char*, const char*, int, char*, size_t, char*, size_t) { return -1; }
__attribute__((weak)) bool coord_configured() { return false; }
__attribute__((weak)) uint64_t coord_upid() { return 0; }

bool node_local_path(const char* path) { return plugins::files_local(path); }

const Plugin kFilesPlugin = {"files", plugins::kFilesVersion, plugins::files_init, plugins::files_save,
                             plugins::pre_resumed, plugins::files_restore, plugins::files_walk_drain, nullptr,
                             nullptr, nullptr,
                             plugins::kFilesOldestVersion};

}  // namespace revive::inject
