// The channels plugin object (docs/channels.md). Its section lists the sockets it took charge of; the
// drained bytes themselves ride in process memory (mmap'ed buffers the image saves like any other), so
// the restored process finds them where the drain left them.
#include <errno.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"
#include "plugins/common/section_io.h"

namespace revive::chan {
namespace {

bool g_scanned;  // the table describes this checkpoint (drain ran)

int save(inject::SectionWriter& w) {
  char msg[400];
  int rc = 0;
  if (!g_scanned) {  // no drain phase (standalone checkpoint): every connection counts as outside
    if (scan(msg, sizeof msg) != 0 || (rc = keep_datagrams(msg, sizeof msg)) != 0) plugins::warn(msg);
    if (rc == -EAGAIN) return rc;  // a queue that cannot be kept: taken again, never lost
    if (classify_ptys_alone(msg, sizeof msg) != 0) {
      // A pty pair whose output cannot be kept is refused, never restored without it (issue 13).
      char line[480];
      plugins::Msg(line, sizeof line).s("checkpoint refused: process ").u(uint64_t(getpid())).s(" ").s(msg);
      inject::plugin_refusal(line);
      plugins::warn(line);
      return -EIO;
    }
  } else if (drain_sockets(g_gen, msg, sizeof msg) != 0 || classify_pipes(g_gen, msg, sizeof msg) != 0 ||
             classify_ptys(g_gen, msg, sizeof msg) != 0 || (rc = keep_datagrams(msg, sizeof msg)) != 0) {
    char line[480];
    plugins::warn(plugins::Msg(line, sizeof line).s("channels: ").s(msg).c_str());
    // The coordinator's log names the reason too, not only "save failed": the process's own stderr is
    // often not kept (an MPI rank's goes through mpiexec).
    if (rc != -EAGAIN) inject::plugin_refusal(line);
    return rc == -EAGAIN ? rc : -EIO;
  }
  plugins::Out o(w);
  o.tag("RVCH");
  o.u32(g_nchans);
  for (uint32_t i = 0; i < g_nchans; ++i) {
    o.u32(uint32_t(g_chans[i].fd));
    o.u32(g_chans[i].kind);
    o.i64(int64_t(g_chans[i].rx.len));
  }
  return o.ok() ? 0 : -ENOMEM;
}

void resume(bool) {
  char msg[400] = "";
  const bool drained = g_drained;  // this process drained (a restored one refilled in the refill phase)
  if (refill(false, msg, sizeof msg) != 0) {
    char line[480];
    plugins::warn(plugins::Msg(line, sizeof line).s("channels: data in flight may be lost: ").s(msg).c_str());
  }
  // Sockets other processes hold too: our threads stay held until their owners have refilled them
  // (a thread reading one meanwhile would take the refill's bytes). A restored process needs none of
  // this: the refill phase was a barrier before any thread runs.
  if (drained) {
    publish_refilled();
    if (wait_refilled(msg, sizeof msg) != 0) {
      char line[480];
      plugins::warn(plugins::Msg(line, sizeof line).s("channels: ").s(msg).c_str());
    }
  }
  // Sockets another process rebuilt at resume: ours is the old one until we take the new (and the
  // listeners made for them at save are closed either way).
  if (take_rebuilt(msg, sizeof msg) != 0) {
    char line[480];
    plugins::warn(plugins::Msg(line, sizeof line).s("channels: ").s(msg).c_str());
  }
  g_scanned = false;
  g_drain_ran = false;
}

// The table came back with memory; the section must describe the same sockets.
int restore(inject::SectionReader& r, char* msg, size_t cap) {
  plugins::In in(r);
  if (!in.tag("RVCH")) {
    plugins::Msg(msg, cap).s("chan section: bad tag");
    return -EINVAL;
  }
  uint32_t n = in.u32();
  if (!in.ok() || n != g_nchans) {
    plugins::Msg(msg, cap).s("chan section: ").u(n).s(" sockets, but memory holds ").u(g_nchans);
    return -EINVAL;
  }
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t fd = in.u32(), kind = in.u32();
    int64_t len = in.i64();
    if (!in.ok() || fd != uint32_t(g_chans[i].fd) || kind != g_chans[i].kind || uint64_t(len) != g_chans[i].rx.len) {
      plugins::Msg(msg, cap).s("chan section: socket record ").u(i).s(" (fd ").u(fd).s(") does not match memory");
      return -EINVAL;
    }
  }
  g_scanned = false;
  return restore_local(msg, cap);
}

int on_drain(uint64_t gen, char* msg, size_t cap) {
  g_scanned = true;
  return drain(gen, msg, cap);
}

int on_refill(uint64_t gen, char* msg, size_t cap) {
  portmap_load(gen);  // every listener published in reconnect: connects from now on reach the moved ones
  return refill(true, msg, cap);
}

}  // namespace
}  // namespace revive::chan

namespace revive::inject {

// Weak defaults so the plugins link (and their tests run) without the engine, which defines the real ones.
__attribute__((weak)) bool coord_publish(const char*, const char*) { return false; }
__attribute__((weak)) int coord_lookup(const char*, bool, int, char*, size_t) { return -1; }
__attribute__((weak)) long coord_count(const char*, int) { return -1; }
__attribute__((weak)) int coord_next(const char*, const char*, int, char*, size_t, char*, size_t) { return -1; }
__attribute__((weak)) int coord_socket() { return -1; }
__attribute__((weak)) uint64_t coord_upid() { return 0; }
__attribute__((weak)) bool coord_configured() { return false; }
__attribute__((weak)) const char* restart_env(const char*) { return nullptr; }

extern const Plugin kChanPlugin = {"chan",     1,           nullptr,          chan::save,     chan::resume,
                                   chan::restore, chan::on_drain, chan::reconnect, chan::on_refill,
                                   nullptr};

}  // namespace revive::inject
