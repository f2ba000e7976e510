// The environment an exec'ed descendant needs to stay in the computation: LD_PRELOAD naming our library
// and the REVIVE_* variables, captured at load time and put back when a program execs with an
// environment of its own (execve with a custom envp, env -i, a shell that cleaned up LD_PRELOAD...).
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/proctree/engine_hooks.h"
#include "plugins/proctree/proctree.h"
#include "plugins/vpid/vpid.h"

extern char** environ;
// chan (weak: plugins do not call each other otherwise): "REVIVE_PORTMAP=..." for an exec'ed image, so it
// sends connects to the listeners moved at the restart as this process does; 0 when none moved.
extern "C" size_t revive_chan_portmap_env(char* out, size_t cap) __attribute__((weak));
constexpr size_t kPortmapEnvMax = 4096;

namespace revive::proctree {
namespace {

constexpr int kMaxKeep = 32;
char* g_keep[kMaxKeep];  // "REVIVE_X=value", strdup'ed at init
int g_nkeep;
char g_lib[4096];        // absolute path of librevive_inject.so
int g_prev_fd = -1;      // predecessor's coordinator socket (exec'ed image), until adopted
int g_sync_fd = -1;      // posix_spawn's parent waits for a byte on it (spawned image), until adopted
constexpr char kPrevKey[] = "REVIVE_PREV_COORD_FD";
constexpr char kSyncKey[] = "REVIVE_SPAWN_SYNC_FD";
// The virtual-pid table is this incarnation's (a restored process's captured environment names the
// table of an earlier restart, or none): always the one mapped now, or none.
constexpr char kVpidKey[] = "REVIVE_VPID_TABLE";
// The listener ports moved at this incarnation's restart (chan_portmap.cpp): always the current ones, or none.
constexpr char kPortmapKey[] = "REVIVE_PORTMAP";

size_t key_len(const char* e) {
  const char* q = strchr(e, '=');
  return q ? size_t(q - e) : strlen(e);
}

bool same_key(const char* a, const char* b) {
  size_t n = key_len(a);
  return n == key_len(b) && strncmp(a, b, n) == 0;
}

}  // namespace

void capture_env() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&capture_env), &info) && info.dli_fname && info.dli_fname[0] == '/')
    strncpy(g_lib, info.dli_fname, sizeof g_lib - 1);
  const char* prev = getenv(kPrevKey);
  if (prev && *prev) g_prev_fd = atoi(prev);
  const char* sync = getenv(kSyncKey);
  if (sync && *sync) g_sync_fd = atoi(sync);
  unsetenv(kPrevKey);  // never inherited further: the numbers are only valid in this image
  unsetenv(kSyncKey);
  for (char** e = environ; e && *e && g_nkeep < kMaxKeep; ++e)
    if (strncmp(*e, "REVIVE_", 7) == 0) g_keep[g_nkeep++] = strdup(*e);
}

void adopt_exec_predecessor() {
  if (g_prev_fd < 0 && g_sync_fd < 0) return;
  // Connect first, then let the predecessor's connection (or the spawning parent) go: the coordinator
  // always has this process before anyone can take a checkpoint without it.
  if (inject::coord_connect_now) inject::coord_connect_now(false);
  if (g_prev_fd >= 0) close(g_prev_fd);
  if (g_sync_fd >= 0) {
    char c = joined_byte();
    while (write(g_sync_fd, &c, 1) < 0 && errno == EINTR) {
    }
    close(g_sync_fd);
  }
  g_prev_fd = g_sync_fd = -1;
}

char** fixed_env(char* const* envp, int prev_fd, int sync_fd) {
  if (!envp) envp = environ;
  size_t n = 0;
  while (envp[n]) ++n;
  char** out = static_cast<char**>(calloc(n + kMaxKeep + 12, sizeof(char*)));
  if (!out) return nullptr;
  size_t k = 0;
  bool have_preload = false;
  // The coordinator keys come from the engine's current config (after a restart: the restart's
  // coordinator, not the launch's that this process's environment still names).
  char* coord = nullptr;
  size_t coord_len = 0;
  if (inject::exec_coord_env) {
    coord = static_cast<char*>(malloc(4096));
    if (!coord) return nullptr;
    coord_len = inject::exec_coord_env(coord, 4096);
  }
  auto engine_owned = [&](const char* e) {
    if (!coord) return false;
    static const char* const kKeys[] = {"REVIVE_CKPT_DIR=", "REVIVE_HOST_ID=", "REVIVE_COORD_PORT=",
                                        "REVIVE_COORD_HOST=", "REVIVE_SECRET_FILE="};
    for (const char* key : kKeys)
      if (same_key(e, key)) return true;
    return false;
  };
  for (size_t i = 0; i < n; ++i) {
    const char* e = envp[i];
    if (same_key(e, kPrevKey) || same_key(e, kSyncKey) || same_key(e, kVpidKey) || same_key(e, kPortmapKey)) continue;
    if (engine_owned(e)) continue;
    if (g_lib[0] && same_key(e, "LD_PRELOAD=")) {
      have_preload = true;
      if (!strstr(e, g_lib)) {  // the program's own preloads stay, after ours
        size_t len = strlen(e) + strlen(g_lib) + 2;
        char* p = static_cast<char*>(malloc(len));
        if (!p) return nullptr;
        strcpy(p, "LD_PRELOAD=");
        strcat(p, g_lib);
        if (e[11]) strcat(p, ":"), strcat(p, e + 11);
        out[k++] = p;
        continue;
      }
    }
    out[k++] = const_cast<char*>(e);
  }
  if (g_lib[0] && !have_preload) {
    char* p = static_cast<char*>(malloc(strlen(g_lib) + 12));
    if (!p) return nullptr;
    strcpy(p, "LD_PRELOAD=");
    strcat(p, g_lib);
    out[k++] = p;
  }
  for (size_t off = 0; coord && off < coord_len; off += strlen(coord + off) + 1) out[k++] = coord + off;
  for (int j = 0; j < g_nkeep; ++j) {
    if (same_key(g_keep[j], kVpidKey) || same_key(g_keep[j], kPortmapKey) || engine_owned(g_keep[j])) continue;
    bool present = false;
    for (size_t i = 0; i < n && !present; ++i) present = same_key(envp[i], g_keep[j]);
    if (!present) out[k++] = g_keep[j];
  }
  const struct {
    const char* key;
    int fd;
  } fds[] = {{kPrevKey, prev_fd}, {kSyncKey, sync_fd}};
  for (const auto& f : fds) {
    if (f.fd < 0) continue;
    char* p = static_cast<char*>(malloc(48));
    if (!p) return nullptr;
    plugins::Msg(p, 48).s(f.key).s("=").i(f.fd);
    out[k++] = p;
  }
  if (vpid::active() && vpid::table_path()[0]) {
    const char* t = vpid::table_path();
    char* p = static_cast<char*>(malloc(strlen(t) + sizeof kVpidKey + 1));
    if (!p) return nullptr;
    plugins::Msg(p, strlen(t) + sizeof kVpidKey + 1).s(kVpidKey).s("=").s(t);
    out[k++] = p;
  }
  if (revive_chan_portmap_env) {
    char* p = static_cast<char*>(malloc(kPortmapEnvMax));
    if (!p) return nullptr;
    if (revive_chan_portmap_env(p, kPortmapEnvMax) > 0)
      out[k++] = p;
    else
      free(p);
  }
  out[k] = nullptr;
  return out;
}

}  // namespace revive::proctree
