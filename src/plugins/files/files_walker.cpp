// files plugin: which process of a host walks its node-local directories at a checkpoint (docs/plugins.md
// "files"). The launch root used to, always. But with `revive launch -n N` (and each host's part of
// `--hosts`) every copy is a launch root: the copies of one host all walked, each saving the same node-local
// files into its own image and each writing them back at restart, concurrently; and a host where no root
// runs (a process moved there by `restart --map`, a part holding no copy) had no walker, so its node-local
// files were not saved at all.
//
// Now, with a coordinator: in the drain phase every launched process publishes
// "gen.<G>.walk.<host>.<upid, 20 digits>" (<host>: boot id and mount namespace: where node-local
// directories are one set of files); at save, after the drain's barrier, each reads the first such key of
// its host: the process it names walks (the lowest upid: the launch root where one runs, it connected
// first). Every process sees the same keys, so exactly one per host walks. The one that walked at the
// checkpoint sweeps at restart (g_walked is in its restored memory). Without a coordinator (a checkpoint of
// one process): the launch root walks, as before. Program threads never run this: the checkpoint thread.
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/common/host_tag.h"
#include "plugins/common/msg.h"
#include "plugins/files/files_internal.h"
#include "plugins/plugins.h"

namespace revive::plugins {
namespace {

uint64_t g_walk_gen;  // the generation whose drain published our candidacy (0: none)
bool g_walked;        // this process walked at its last checkpoint (saved with memory: the restore's sweep)

void walk_prefix(char* out, size_t cap, uint64_t gen) {
  char host[48];
  host_now(host, sizeof host, "mnt");
  Msg(out, cap).s("gen.").u(gen).s(".walk.").s(host).s(".");
}

void upid20(Msg& m, uint64_t upid) {  // fixed width: the coordinator's key order is the upids' order
  char d[21];
  for (int i = 19; i >= 0; --i, upid /= 10) d[i] = char('0' + upid % 10);
  d[20] = '\0';
  m.s(d);
}

}  // namespace

int files_walk_drain(uint64_t gen, char*, size_t) {
  g_walk_gen = 0;
  if (!g_files.launched || !g_files.local[0] || !inject::coord_configured() || inject::coord_upid() == 0) return 0;
  char key[160];
  walk_prefix(key, sizeof key, gen);
  Msg m(key + strlen(key), sizeof key - strlen(key));
  upid20(m, inject::coord_upid());
  if (inject::coord_publish(key, "")) g_walk_gen = gen;
  return 0;
}

bool files_walker() {
  g_walked = false;
  const uint64_t gen = g_walk_gen;
  g_walk_gen = 0;  // this checkpoint's: a later one without a drain phase (no coordinator) has none
  if (!g_files.local[0]) return false;
  if (gen == 0) {  // no election this checkpoint: the launch root's rule
    g_walked = g_files.root;
    return g_walked;
  }
  char prefix[160], first[200], val[8], mine[200];
  walk_prefix(prefix, sizeof prefix, gen);
  Msg m(mine, sizeof mine);
  m.s(prefix);
  upid20(m, inject::coord_upid());
  if (inject::coord_next(prefix, prefix, 10000, first, sizeof first, val, sizeof val) != 1) {
    g_walked = g_files.root;  // the coordinator lost: the checkpoint fails anyway
    return g_walked;
  }
  g_walked = strcmp(first, mine) == 0;
  return g_walked;
}

bool files_walked() { return g_walked; }

}  // namespace revive::plugins
