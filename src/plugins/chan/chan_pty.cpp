// Pseudo-terminal pairs inside the computation. Open MPI's mpiexec gives every rank a pty as its stdout
// and reads the master: after a restart the rank's old /dev/pts/N means nothing (another pair, or none),
// so the pair is rebuilt like an anonymous pipe (chan_pipe.cpp): one holder of the master (the owner,
// elected like a pipe's reader) opens a new pair and hands the master to the other master holders and the
// slave to every slave holder, over a Unix socket (SCM_RIGHTS).
//
// Output the slave side wrote that the master side has not read yet is part of the checkpoint: the owner
// reads it at save (every process of the computation is suspended by then, so nothing is added to it)
// and writes it back through the slave at once, with output processing off so the bytes are not
// translated twice; a restored owner writes it into the new pair the same way. Input the master wrote
// that the slave side has not read yet is not kept (docs/channels.md).
//
// A slave that is the controlling terminal of a session (script, expect or ssh -t running a shell) is
// made the new slave's role again by the restored session leader (TIOCSCTTY), with the foreground group
// it had: without it /dev/tty fails with ENXIO/ENOTTY and job control is gone after a restart.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "inject/sys.h"
#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"

namespace revive::chan {

int pty_err(char* msg, size_t cap, const Chan& c, const char* what, int e) {
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(" (pty ").u(c.ino).s(c.kind == kPtyMaster ? " master" : " slave")
      .s("): ").s(what).s(": ").err(e);
  return e > 0 ? -e : -EIO;
}

namespace {

constexpr int kHandOverTimeoutMs = 60000;
constexpr unsigned kPtmxMajor = 5, kPtmxMinor = 2;         // /dev/ptmx (and /dev/pts/ptmx)
constexpr unsigned kSlaveMajorFirst = 136, kSlaveMajorLast = 143;  // UNIX98 pty slaves

void key(char* out, size_t cap, const char* prefix, uint64_t gen, uint64_t idx) {
  plugins::Msg(out, cap).s(prefix).u(gen).s(".").u(idx);
}

bool is_pty(const Chan& c) { return c.kind == kPtyMaster || c.kind == kPtySlave; }

// An earlier entry of this process for the same end of the same pair (dup'ed descriptors).
int first_same(uint32_t i) {
  for (uint32_t j = 0; j < i; ++j)
    if (g_chans[j].kind == g_chans[i].kind && g_chans[j].ino == g_chans[i].ino) return int(j);
  return -1;
}

// This process's owning master entry of pair idx, or -1.
int owner_of(uint64_t idx) {
  for (uint32_t j = 0; j < g_nchans; ++j)
    if (g_chans[j].kind == kPtyMaster && g_chans[j].owner && g_chans[j].ino == idx) return int(j);
  return -1;
}

}  // namespace

int pty_put_at(Chan& c, int s, char* msg, size_t cap) {
  if (s != c.fd && dup3(s, c.fd, c.cloexec ? O_CLOEXEC : 0) < 0)
    return pty_err(msg, cap, c, "cannot put it back at its number", errno);
  fcntl(c.fd, F_SETFL, c.flags & (O_NONBLOCK | O_APPEND | O_ASYNC));
  plugins::epoll_rewatch(c.fd);
  return 0;
}

// Writes bytes through the slave of master m so that they wait at the master again, untranslated.
bool write_through_slave(int m, const uint8_t* p, size_t n) {
  if (n == 0) return true;
  int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (s < 0) return false;
  struct termios t, raw;
  bool have = tcgetattr(s, &t) == 0;
  if (have) {
    raw = t;
    raw.c_oflag &= ~tcflag_t(OPOST);
    tcsetattr(s, TCSANOW, &raw);
  }
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(s, p + done, n - done);
    if (w > 0) {
      done += size_t(w);
    } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      pollfd pf = {s, POLLOUT, 0};
      if (poll(&pf, 1, 1000) <= 0) break;  // nobody drains the master: the queue is full
    } else {
      break;
    }
  }
  if (have) tcsetattr(s, TCSANOW, &t);
  close(s);
  return done == n;
}

// Reads what waits at master m (the owner's, all writers suspended) into rx and writes it back.
int keep_pty_output(Chan& c, char* msg, size_t cap) {
  int fl = fcntl(c.fd, F_GETFL);
  if (fl >= 0 && !(fl & O_NONBLOCK)) fcntl(c.fd, F_SETFL, fl | O_NONBLOCK);
  c.rx.clear();
  int rc = 0;
  for (;;) {
    if (!c.rx.reserve(4096)) {
      rc = pty_err(msg, cap, c, "no memory for its pending output", ENOMEM);
      break;
    }
    ssize_t r = read(c.fd, c.rx.p + c.rx.len, 4096);
    if (r > 0) {
      c.rx.len += size_t(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    break;  // EAGAIN: all read; EIO: no slave open any more (nothing pending either)
  }
  if (fl >= 0 && !(fl & O_NONBLOCK)) fcntl(c.fd, F_SETFL, fl);
  if (rc == 0 && !write_through_slave(c.fd, c.rx.p, c.rx.len))
    rc = pty_err(msg, cap, c, "cannot put its pending output back", errno ? errno : EIO);
  return rc;
}

bool consider_pty(int fd, const struct stat& st, Chan& c) {
  if (!S_ISCHR(st.st_mode)) return false;
  const unsigned maj = major(st.st_rdev), mnr = minor(st.st_rdev);
  const bool master = maj == kPtmxMajor && mnr == kPtmxMinor;
  if (!master && !(maj >= kSlaveMajorFirst && maj <= kSlaveMajorLast)) return false;
  unsigned idx = 0;
  if (master && ioctl(fd, TIOCGPTN, &idx) != 0) return false;
  if (!master) idx = (maj - kSlaveMajorFirst) * 256 + mnr;
  reset_slot(c);
  c.fd = fd;
  c.kind = master ? kPtyMaster : kPtySlave;
  c.ino = idx;
  c.pipe_w = -1;
  c.listen_fd = -1;
  c.flags = fcntl(fd, F_GETFL);
  c.cloexec = (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
  if (master) {
    tcgetattr(fd, &c.tio);
    ioctl(fd, TIOCGWINSZ, &c.ws);
  } else {
    // Kernel ids on both sides (raw calls: the vpid wrappers would give getsid the program's id); the
    // foreground group through tcgetpgrp, as the program knows it, for tcsetpgrp at restore.
    pid_t sid = 0;
    const long me = inject::sys::sc(SYS_getpid), my_sid = inject::sys::sc(SYS_getsid, 0);
    c.ctty = ioctl(fd, TIOCGSID, &sid) == 0 && sid == my_sid && my_sid == me;
    c.fg_pgrp = c.ctty ? tcgetpgrp(fd) : -1;
    c.fg_own = c.ctty && c.fg_pgrp == getpgrp();
  }
  // A dup of an earlier entry for the same end (the same open file description: kcmp). g_nchans is this
  // slot's index: the entries before it are this scan's.
  const pid_t me = getpid();
  for (uint32_t j = 0; j < g_nchans && &g_chans[j] != &c; ++j)
    if (g_chans[j].kind == c.kind && g_chans[j].ino == c.ino &&
        syscall(SYS_kcmp, me, me, KCMP_FILE, g_chans[j].fd, fd) == 0) {
      c.pty_same = j + 1;
      break;
    }
  return true;
}

// Drain phase: each master holder publishes its pid; the last one published owns the pair.
void publish_ptys(uint64_t gen) {
  char k[96], pid[24];
  plugins::Msg(pid, sizeof pid).u(uint64_t(getpid()));
  for (uint32_t i = 0; i < g_nchans; ++i) {
    if (g_chans[i].kind != kPtyMaster) continue;
    key(k, sizeof k, "ptym.", gen, g_chans[i].ino);
    inject::coord_publish(k, pid);
  }
}

// Save (a barrier after the drain phase: every master is published).
int classify_ptys(uint64_t gen, char* msg, size_t cap) {
  char k[96], val[24], pid[24];
  plugins::Msg(pid, sizeof pid).u(uint64_t(getpid()));
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (!is_pty(c)) continue;
    key(k, sizeof k, "ptym.", gen, c.ino);
    int r = inject::coord_lookup(k, false, 10000, val, sizeof val);
    if (r < 0) return pty_err(msg, cap, c, "coordinator lost while looking up its master", EIO);
    if (c.kind == kPtySlave) {
      if (r == 0) c.kind = kPtyOut;  // the user's terminal, or another outside pair: the fd plugin's
      continue;
    }
    c.owner = r == 1 && strcmp(val, pid) == 0 && first_same(i) < 0;
    if (c.owner)
      if (int rc = keep_pty_output(c, msg, cap)) return rc;
  }
  return 0;
}

int ptys_listen(uint64_t gen, char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (!is_pty(c)) continue;
    c.listen_fd = -1;
    if (c.kind != kPtyMaster || !c.owner) continue;
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0) {
      int e = errno;
      if (m >= 0) close(m);
      return pty_err(msg, cap, c, "cannot open a new pseudo-terminal", e);
    }
    tcsetattr(m, TCSANOW, &c.tio);
    ioctl(m, TIOCSWINSZ, &c.ws);
    int rc = pty_put_at(c, m, msg, cap);
    close(m);
    if (rc) return rc;
    if (!write_through_slave(c.fd, c.rx.p, c.rx.len))
      return pty_err(msg, cap, c, "cannot write its pending output into the new pair", errno ? errno : EIO);
    char k[96];
    key(k, sizeof k, "chant.", gen, c.ino);
    if (int e = handover_listen(k, &c.listen_fd)) return pty_err(msg, cap, c, "cannot listen for the other holders", e);
  }
  return 0;
}

int ptys_connect(uint64_t gen, char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (!is_pty(c) || (c.kind == kPtyMaster && c.owner) || first_same(i) >= 0 || owner_of(c.ino) >= 0) continue;
    char k[96];
    key(k, sizeof k, "chant.", gen, c.ino);
    // Our end arrives on c.listen_fd in the refill phase.
    if (int e = handover_reach(k, c.kind == kPtyMaster ? 'm' : 's', kHandOverTimeoutMs, &c.listen_fd))
      return pty_err(msg, cap, c, e == ETIMEDOUT ? "its owner did not publish where to get the new pair"
                                                 : "cannot reach its owner", e);
  }
  return 0;
}

namespace {

// Restored alone (give_back_ctty): this process leads a session of its own, as at the checkpoint (a
// session leader is the only one that may take a controlling terminal). False, with a warning, when it
// cannot: it leads its process group (revive-restart started as a job by a shell), so setsid() refuses.
bool lead_new_session(const Chan& c) {
  const long me = inject::sys::sc(SYS_getpid);
  if (inject::sys::sc(SYS_getsid, 0) == me) return true;
  const long r = inject::sys::sc(SYS_setsid);
  if (r >= 0) return true;
  char line[400];
  plugins::warn(plugins::Msg(line, sizeof line).s("channels: fd ").i(c.fd)
                    .s(": cannot make the pseudo-terminal the controlling terminal again: setsid: ").err(int(-r))
                    .s(r == -EPERM ? " (revive-restart leads its process group: start it with setsid -w)" : "")
                    .c_str());
  return false;
}

}  // namespace

void give_back_ctty(bool alone) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kPtySlave || !c.ctty) continue;
    char line[200];
    if (alone) {
      bool master_here = false;
      for (uint32_t j = 0; j < g_nchans; ++j) master_here |= g_chans[j].kind == kPtyMaster && g_chans[j].ino == c.ino;
      if (!master_here || !lead_new_session(c)) return;
    }
    if (ioctl(c.fd, TIOCSCTTY, 0) != 0) {
      int e = errno;
      plugins::warn(plugins::Msg(line, sizeof line).s("channels: fd ").i(c.fd)
                        .s(": cannot make the new pseudo-terminal the session's controlling terminal again: ").err(e).c_str());
      return;
    }
    // Restored alone, the process's own group is its new session's (TIOCSCTTY made it the foreground);
    // another group of the session did not come back with it.
    const pid_t fg = alone && c.fg_own ? getpgrp() : c.fg_pgrp;
    // From a background group tcsetpgrp raises SIGTTOU: held off for the call (raw: the signal plugin's
    // wrappers keep the program's own mask).
    uint64_t ttou = uint64_t(1) << (SIGTTOU - 1), old = 0;
    inject::sys::sc(SYS_rt_sigprocmask, SIG_BLOCK, &ttou, &old, 8);
    if (fg > 0 && tcsetpgrp(c.fd, fg) != 0) {
      int e = errno;
      plugins::warn(plugins::Msg(line, sizeof line).s("channels: fd ").i(c.fd).s(": cannot give the terminal its foreground group ")
                        .i(fg).s(" again: ").err(e).c_str());
    }
    inject::sys::sc(SYS_rt_sigprocmask, SIG_SETMASK, &old, nullptr, 8);
    return;
  }
}

int ptys_hand_over(char* msg, size_t cap) {
  // Owners serve every holder that connected during reconnect (a barrier ago).
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kPtyMaster || !c.owner || c.listen_fd < 0) continue;
    for (;;) {
      int s = accept4(c.listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (s < 0) break;
      char one = 0;
      if (wait_fd(s, POLLIN, kHandOverTimeoutMs) <= 0 || read(s, &one, 1) != 1 || (one != 'm' && one != 's')) {
        close(s);
        return pty_err(msg, cap, c, "a holder connected but did not say which end it wants", EPROTO);
      }
      int end = one == 'm' ? c.fd : ioctl(c.fd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
      bool sent = end >= 0 && send_fd(s, end, one);
      int e = errno;
      if (one == 's' && end >= 0) close(end);
      close(s);
      if (!sent) return pty_err(msg, cap, c, "cannot hand the new pair over", e);
    }
    close(c.listen_fd);
    c.listen_fd = -1;
  }
  // Every other holder puts its end at the old number.
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (!is_pty(c) || (c.kind == kPtyMaster && c.owner)) continue;
    if (int j = first_same(i); j >= 0) {
      if (int rc = pty_put_at(c, g_chans[j].fd, msg, cap)) return rc;
      continue;
    }
    int fd = -1;
    if (int o = owner_of(c.ino); o >= 0) {  // the pair is ours: open its other end here
      fd = c.kind == kPtyMaster ? dup(g_chans[o].fd) : ioctl(g_chans[o].fd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    } else if (c.listen_fd >= 0) {
      fd = recv_fd(c.listen_fd, kHandOverTimeoutMs);
      close(c.listen_fd);
      c.listen_fd = -1;
    }
    if (fd < 0) return pty_err(msg, cap, c, "its owner did not hand over the new pair", ETIMEDOUT);
    int rc = pty_put_at(c, fd, msg, cap);
    close(fd);
    if (rc) return rc;
  }
  give_back_ctty(false);
  return 0;
}

}  // namespace revive::chan
