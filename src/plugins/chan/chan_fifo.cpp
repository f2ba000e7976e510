// Named FIFOs between processes of the computation. A FIFO's data in flight is all in its one kernel
// buffer once every writer is suspended, so one reader (the owner) drains it alone (no marker) at save, after the drain barrier, through a second
// descriptor of its own (/proc/self/fd/N, O_NONBLOCK: the program's descriptor keeps its flags), and puts
// it back through a write descriptor to the same FIFO at once (the bytes fitted in that buffer before);
// the copy goes into the image, and only a restored reader writes it again (refill phase).
// Restart: readers reopen the path at restore (a non-blocking open for reading needs no writer), writers
// at reconnect (then every reader of the computation is back; a write open needs one).
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/chan/chan.h"
#include "plugins/common/msg.h"

namespace revive::chan {
namespace {

constexpr int kWriterWaitMs = 2000;


void self_path(char* out, size_t cap, int fd) { plugins::Msg(out, cap).s("/proc/self/fd/").i(fd); }

int fifo_err(char* msg, size_t cap, const Chan& c, const char* what, int e) {
  plugins::Msg(msg, cap).s("fd ").i(c.fd).s(" (FIFO ").s(c.path).s("): ").s(what).s(": ").err(e);
  return e > 0 ? -e : -EIO;
}

// The first table entry for the same FIFO read by this process drains it (dup'ed fds share it), and only
// in the process that owns it (several processes may read it).
bool first_reader(uint32_t i) {
  for (uint32_t j = 0; j < i; ++j)
    if (g_chans[j].kind == g_chans[i].kind && g_chans[j].ino == g_chans[i].ino && is_reader(g_chans[j])) return false;
  return is_reader(g_chans[i]) && g_chans[i].owner;
}

int place_fifo(Chan& c, int s, char* msg, size_t cap) {
  if (dup3(s, c.fd, c.cloexec ? O_CLOEXEC : 0) < 0) {
    int e = errno;
    close(s);
    return fifo_err(msg, cap, c, "cannot put it back at its number", e);
  }
  close(s);
  fcntl(c.fd, F_SETFL, c.flags & (O_NONBLOCK | O_APPEND | O_ASYNC));
  plugins::epoll_rewatch(c.fd);
  return 0;
}

}  // namespace

bool consider_fifo(int fd, Chan& c) {
  char link[64];
  self_path(link, sizeof link, fd);
  char path[sizeof c.path];
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0 || (path[0] != '/' && strncmp(path, "pipe:", 5) != 0)) return false;
  path[n] = 0;
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  reset_slot(c);
  c.fd = fd;
  c.kind = path[0] == '/' ? kFifo : kPipeOut;  // a pipe becomes kPipe when the drain finds its other end
  c.pipe_w = -1;
  c.flags = fcntl(fd, F_GETFL);
  c.cloexec = (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
  c.listen_fd = -1;
  c.ino = st.st_ino;
  memcpy(c.path, path, size_t(n) + 1);
  return true;
}

int drain_buffered(uint32_t kind, char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kind || !first_reader(i)) continue;
    char link[64];
    self_path(link, sizeof link, c.fd);
    int r = open(link, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (r < 0) return fifo_err(msg, cap, c, "cannot open it to drain", errno);
    for (;;) {
      if (!c.rx.reserve(1 << 16)) {
        close(r);
        return fifo_err(msg, cap, c, "no memory for drained data", ENOMEM);
      }
      ssize_t got = read(r, c.rx.p + c.rx.len, c.rx.cap - c.rx.len);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;  // empty (EAGAIN) or no writer left (0)
      c.rx.len += size_t(got);
      g_drained = true;
    }
    close(r);
  }
  // Put the bytes back at once, keeping the copy for the image: the writers are still suspended, so the
  // FIFO ends up exactly as it was. Waiting for resume would let a writer released first slip new bytes
  // in ahead of them (there is no peer exchange to order this, as there is for sockets).
  return put_back_fifos(kind, true, msg, cap);
}

int put_back_fifos(uint32_t kind, bool keep, char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if ((c.kind != kFifo && c.kind != kPipe) || (kind && c.kind != kind) || c.rx.len == 0) continue;
    char link[64];
    self_path(link, sizeof link, c.fd);
    int w = open(link, O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // we are a reader, so this cannot block
    if (w < 0) return fifo_err(msg, cap, c, "cannot open it to put its data back", errno);
    size_t off = 0;
    while (off < c.rx.len) {
      ssize_t n = write(w, c.rx.p + off, c.rx.len - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        int e = n < 0 ? errno : EIO;
        close(w);
        return fifo_err(msg, cap, c, "cannot put its data back", e);
      }
      off += size_t(n);
    }
    close(w);
    if (!keep) c.rx.clear();
  }
  return 0;
}

namespace {

// A FIFO the restart does not find (its directory was removed with it: an MPI job's session directory,
// cleaned by the killed job's last processes, or never there on another host) is made again, with the
// missing directories above it (mode 0700). Racing processes of the restart may both try: EEXIST is fine.
void remake_fifo(const char* path) {
  char dir[sizeof(Chan::path)];
  size_t n = strlen(path);
  if (n >= sizeof dir) return;
  memcpy(dir, path, n + 1);
  for (char* p = dir + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(dir, 0700);
    *p = '/';
  }
  mkfifo(path, 0600);
}

}  // namespace

int reopen_fifos(bool writers, char* msg, size_t cap) {
  for (uint32_t i = 0; i < g_nchans; ++i) {
    Chan& c = g_chans[i];
    if (c.kind != kFifo || is_reader(c) == writers) continue;
    int mode = (c.flags & O_ACCMODE) | O_NONBLOCK | O_CLOEXEC;
    int s = open(c.path, mode);
    if (s < 0 && errno == ENOENT) {
      remake_fifo(c.path);
      s = open(c.path, mode);
    }
    for (uint64_t until = now_ms() + kWriterWaitMs; s < 0 && errno == ENXIO && now_ms() < until;) {
      wait_fd(-1, 0, 10);  // no reader yet (it may be outside the computation): retry briefly
      s = open(c.path, mode);
    }
    if (s < 0) {
      if (writers && errno == ENXIO) {
        // Policy, as for a pipe to an outsider: widowed, as if its reader had gone away natively (writes
        // fail with EPIPE / SIGPIPE). A /dev/null stand-in would swallow them as if they were read.
        char line[700];
        plugins::warn(plugins::Msg(line, sizeof line).s("fd ").i(c.fd).s(" (FIFO ").s(c.path)
                          .s("): no reader came back; left without a reader (writes fail with EPIPE)").c_str());
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0) return fifo_err(msg, cap, c, "cannot make its widowed stand-in", errno);
        close(p[0]);
        s = p[1];
      } else {
        return fifo_err(msg, cap, c, "cannot reopen", errno);
      }
    }
    if (int rc = place_fifo(c, s, msg, cap)) return rc;
  }
  return 0;
}

}  // namespace revive::chan
