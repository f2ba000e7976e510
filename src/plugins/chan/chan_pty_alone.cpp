// Pseudo-terminal pairs without a coordinator: a standalone checkpoint (REVIVE_INTERVAL, the checkpoint
// signal) restarted with `revive-restart IMAGE`, or one image of a coordinated computation restarted alone.
// Nothing rebuilds the pair through the coordinator then, and the fd plugin alone would reopen /dev/ptmx
// as a fresh, unrelated master (the program reads nothing, or blocks for ever) and /dev/pts/N by path
// (another pair that reused the number, or nothing). Issue 13: never such a silent substitute. So:
// - a pair whose master and slave this process holds is made again as one new pair (saved termios and
//   window size, the output that waited at the master written back), every descriptor at its number;
// - a master whose slave only processes that do not come back held is widowed: a new pair whose slave was
//   opened and closed, so reads give EIO (after any output kept), as after a hang-up;
// - a slave whose master was inside the computation and does not come back is widowed too: a new pair
//   whose master is closed (reads 0, writes EIO). At fds 0/1/2 the restart's own stdio stays, as for pipes.
// A slave whose master was never ours (the user's terminal) stays the fd plugin's (kPtyOut).
// A pair held whole whose slave was the controlling terminal of the session this process led is that
// again, with the process's own group in the foreground (give_back_ctty: setsid, TIOCSCTTY).
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"

namespace revive::chan {
namespace {

bool is_pty(const Chan& c) { return c.kind == kPtyMaster || c.kind == kPtySlave; }

// The first entry of `kind` for pair idx in this process, or -1.
int first_of(uint32_t kind, uint64_t idx) {
  for (uint32_t j = 0; j < g_nchans; ++j)
    if (g_chans[j].kind == kind && g_chans[j].ino == idx) return int(j);
  return -1;
}

// A new pair's master with c's saved terminal settings (the slave's: a master's TCGETS reads its peer's).
int new_master(const Chan& c) {
  int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0) return -1;
  if (grantpt(m) != 0 || unlockpt(m) != 0) {
    int e = errno;
    close(m);
    errno = e;
    return -1;
  }
  if (c.kind == kPtyMaster) {
    tcsetattr(m, TCSANOW, &c.tio);
    ioctl(m, TIOCSWINSZ, &c.ws);
  }
  return m;
}

// The slave of master m as entry c had it open (access mode, O_NONBLOCK; never our controlling terminal).
int open_slave(int m, const Chan& c) {
  return ioctl(m, TIOCGPTPEER, (c.flags & (O_ACCMODE | O_NONBLOCK)) | O_NOCTTY | O_CLOEXEC);
}

void warn_widowed(const Chan& c, const char* what) {
  char line[400];
  plugins::Msg(line, sizeof line).s("fd ").i(c.fd).s(" (pseudo-terminal ").s(c.kind == kPtyMaster ? "master" : "slave")
      .s(", /dev/pts/").u(c.ino).s(") ").s(what);
  plugins::warn(line);
}

// Master entry i, the first of its pair here: a new pair at its number, the kept output in it again.
int restore_master(uint32_t i, char* msg, size_t cap) {
  Chan& c = g_chans[i];
  int m = new_master(c);
  if (m < 0) return pty_err(msg, cap, c, "cannot open a new pseudo-terminal", errno);
  int rc = pty_put_at(c, m, msg, cap);
  if (m != c.fd) close(m);
  if (rc) return rc;
  // The output kept at the checkpoint: in the entry that read it (a coordinated image's owner; the first
  // entry in a standalone one). Another process's, if it owned the pair, is not in this image.
  for (uint32_t j = i; j < g_nchans; ++j) {
    const Chan& o = g_chans[j];
    if (o.kind != kPtyMaster || o.ino != c.ino || o.rx.len == 0) continue;
    if (!write_through_slave(c.fd, o.rx.p, o.rx.len))
      return pty_err(msg, cap, c, "cannot write its pending output into the new pair", errno ? errno : EIO);
    break;
  }
  if (first_of(kPtySlave, c.ino) >= 0) return 0;
  // Its slave's holders do not come back: open the new slave once and close it, so the master reads what
  // was kept and then EIO, as after a hang-up, never a fresh master whose reads block for ever.
  int s = ioctl(c.fd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s < 0) return pty_err(msg, cap, c, "cannot hang up the new pair", errno);
  close(s);
  warn_widowed(c, "cannot be rebuilt without a coordinator (restart the computation with revive restart): its "
                  "slave side was held by processes that do not come back; it reads the output kept at the "
                  "checkpoint, then EIO");
  return 0;
}

// Slave entry c (not a dup) whose master is not here: a new pair whose master is closed (hung up).
int restore_widowed_slave(Chan& c, char* msg, size_t cap) {
  int m = new_master(c);
  if (m < 0) return pty_err(msg, cap, c, "cannot open a new pseudo-terminal", errno);
  int s = open_slave(m, c);
  int e = errno;
  close(m);
  if (s < 0) return pty_err(msg, cap, c, "cannot open the new slave", e);
  int rc = pty_put_at(c, s, msg, cap);
  if (s != c.fd) close(s);
  if (rc == 0)
    warn_widowed(c, "cannot be rebuilt without a coordinator (restart the computation with revive restart): its "
                    "master comes back closed (reads end of file, writes EIO); output not yet read is lost");
  return rc;
}

}  // namespace

int classify_ptys_alone(char* msg, size_t cap) {
  if (g_pty_dropped >= 0) {
    plugins::Msg(msg, cap).s("fd ").i(g_pty_dropped).s(" is a pseudo-terminal master that revive cannot rebuild: ")
        .s("its channel table is full (").u(kMaxChans).s(" entries)");
    return -ENOSPC;
  }
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind == kPtySlave && first_of(kPtyMaster, c.ino) < 0) c.kind = kPtyOut;  // the user's terminal
    c.owner = c.kind == kPtyMaster && c.pty_same == 0 && first_of(kPtyMaster, c.ino) == int(i);
    if (c.owner)
      if (int rc = keep_pty_output(c, msg, cap)) return rc;
  }
  return 0;
}

int restore_ptys_alone(char* msg, size_t cap) {
  // Masters first: a slave may sit at a lower number than its master (stdout), and opens the new master's.
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < g_nchans; ++i) {
      Chan& c = g_chans[i];
      if (!is_pty(c) || (c.kind == kPtyMaster) != (pass == 0)) continue;
      const int first = first_of(c.kind, c.ino);
      if (c.kind == kPtyMaster && first != int(i)) {  // masters of one pair are one description
        if (int rc = pty_put_at(c, g_chans[first].fd, msg, cap)) return rc;
        continue;
      }
      if (c.kind == kPtyMaster) {
        if (int rc = restore_master(i, msg, cap)) return rc;
        continue;
      }
      if (c.pty_same != 0) {  // a dup of an earlier slave entry, already in place
        if (int rc = pty_put_at(c, g_chans[c.pty_same - 1].fd, msg, cap)) return rc;
        continue;
      }
      if (int m = first_of(kPtyMaster, c.ino); m >= 0) {
        int s = open_slave(g_chans[m].fd, c);
        if (s < 0) return pty_err(msg, cap, c, "cannot open the new pair's slave", errno);
        int rc = pty_put_at(c, s, msg, cap);
        if (s != c.fd) close(s);
        if (rc) return rc;
      } else if (c.fd > 2) {  // fds 0/1/2: the restart's own stdio stays (the fd plugin left it)
        if (int rc = restore_widowed_slave(c, msg, cap)) return rc;
      }
    }
  }
  give_back_ctty(true);  // a pair held whole that was the session's terminal: it is again
  return 0;
}

}  // namespace revive::chan
