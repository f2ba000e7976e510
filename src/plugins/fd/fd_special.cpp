// fd kinds whose kernel state is saved beyond a path: eventfd (counter), timerfd (clock, remaining time,
// interval, unread expirations; CONFIG_CHECKPOINT_RESTORE's TFD_IOC_SET_TICKS puts those back), and pipes
// both of whose ends the process holds (self-pipes of event loops): recreated as a new pipe with the
// bytes it buffered. A pipe to another process is the distributed issue's and stays a stand-in.
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "plugins/common/msg.h"
#include "plugins/common/sigfd_set.h"
#include "plugins/fd/fd_internal.h"
#include "plugins/fd/timerfd_make.h"
#include "plugins/common/fdinfo.h"
#include "plugins/plugins.h"

// The chan plugin's (chan_connect.cpp); weak: null when it is not linked in (plugin tests).
extern "C" bool revive_chan_restores(int fd) __attribute__((weak));


extern "C" bool revive_chan_restores(int fd) __attribute__((weak));

namespace revive::plugins {
namespace {

int fail_fd(RestoreCtx& c, const FdRecord& rec, const char* what, int e) {
  return fail(c.msg, c.cap, Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(" (").s(fd_kind_name(rec.kind)).s("): ")
      .s(what).s(": ").err(e), e);
}

bool read_payload(RestoreCtx& c, const FdRecord& rec, void* out, size_t len) {
  return rec.content_len == static_cast<int64_t>(len) && c.in.bytes(out, len);
}

int write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? -errno : -EIO;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

}  // namespace

int64_t special_payload(int fd, FdKind kind, void* buf, size_t cap) {
  char info[1024];
  if (!fdinfo_load(fd, info, sizeof info)) return -1;
  if (kind == FdKind::kEventfd && cap >= sizeof(EventfdState)) {
    EventfdState s{};
    uint64_t sem = 0;
    if (!fdinfo_num(info, "eventfd-count", 16, &s.count)) return -1;
    fdinfo_num(info, "eventfd-semaphore", 10, &sem);  // Linux 6.7+; older kernels: not a semaphore
    s.semaphore = sem != 0;
    memcpy(buf, &s, sizeof s);
    return sizeof s;
  }
  if (kind == FdKind::kSignalfd && cap >= sizeof(uint64_t)) {
    uint64_t mask = 0;
    if (!fdinfo_num(info, "sigmask", 16, &mask)) return -1;
    memcpy(buf, &mask, sizeof mask);
    return sizeof mask;
  }
  if (kind == FdKind::kTimerfd && cap >= sizeof(TimerfdState)) {
    TimerfdState s{};
    uint64_t clock = 0, vs = 0, vn = 0, is = 0, in = 0;
    if (!fdinfo_num(info, "clockid", 10, &clock) || !fdinfo_num(info, "ticks", 10, &s.ticks) ||
        !fdinfo_pair(info, "it_value", &vs, &vn) || !fdinfo_pair(info, "it_interval", &is, &in)) {
      return -1;
    }
    s.clockid = static_cast<int32_t>(clock);
    s.value_sec = static_cast<int64_t>(vs);
    s.value_nsec = static_cast<int64_t>(vn);
    s.interval_sec = static_cast<int64_t>(is);
    s.interval_nsec = static_cast<int64_t>(in);
    memcpy(buf, &s, sizeof s);
    return sizeof s;
  }
  return -1;
}

int64_t pipe_peek(int read_end, int write_end, char* buf, size_t cap) {
  // Read through a new open file description (/proc/self/fd/N), non-blocking: setting O_NONBLOCK on the
  // program's own would change it for every process sharing it (a fork child checkpointed at once).
  char link[48];
  Msg(link, sizeof link).s("/proc/self/fd/").i(read_end);
  int r = open(link, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (r < 0) return -errno;
  size_t len = 0;
  while (len < cap) {
    ssize_t n = read(r, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<size_t>(n);
  }
  close(r);
  // Put the bytes back at once (they came out of this pipe, so they fit): the program sees no change.
  int rc = write_all(write_end, buf, len);
  return rc < 0 ? rc : static_cast<int64_t>(len);
}

int restore_eventfd(RestoreCtx& c, const FdRecord& rec, const char* path) {
  EventfdState s;
  if (!read_payload(c, rec, &s, sizeof s)) return fail_fd(c, rec, "bad eventfd state in the section", EINVAL);
  int flags = EFD_CLOEXEC | (rec.flags & O_NONBLOCK ? EFD_NONBLOCK : 0) | (s.semaphore ? EFD_SEMAPHORE : 0);
  int fd = eventfd(0, flags);
  if (fd < 0) return stand_in(c, rec, path, "cannot be recreated");
  // The counter may exceed eventfd()'s unsigned int initial value: add it with a write.
  if (s.count > 0 && write(fd, &s.count, sizeof s.count) != sizeof s.count) {
    int e = errno;
    close(fd);
    return fail_fd(c, rec, "cannot set the counter", e);
  }
  return place(c, fd, rec);
}

int restore_signalfd(RestoreCtx& c, const FdRecord& rec, const char* path) {
  uint64_t mask;
  if (!read_payload(c, rec, &mask, sizeof mask)) return fail_fd(c, rec, "bad signalfd mask in the section", EINVAL);
  // Raw syscall: the kernel's 8-byte set, and no detour through our own signalfd wrapper.
  int fd = static_cast<int>(syscall(SYS_signalfd4, -1, &mask, 8, SFD_CLOEXEC | (rec.flags & O_NONBLOCK ? SFD_NONBLOCK : 0)));
  if (fd < 0) return stand_in(c, rec, path, "cannot be recreated");
  sigfd_mark(fd);  // its reads give senders as the program knows them (place() carries the mark over)
  return place(c, fd, rec);
}

int restore_timerfd(RestoreCtx& c, const FdRecord& rec, const char* path) {
  TimerfdState s;
  if (!read_payload(c, rec, &s, sizeof s)) return fail_fd(c, rec, "bad timerfd state in the section", EINVAL);
  TimerfdMade why;
  bool ticks_lost;
  int fd = timerfd_from_state(s, TFD_CLOEXEC | (rec.flags & O_NONBLOCK ? TFD_NONBLOCK : 0), &why, &ticks_lost);
  if (why == TimerfdMade::kMalformed) return fail_fd(c, rec, "bad timerfd state in the section", EINVAL);
  if (why == TimerfdMade::kNoClock) return stand_in(c, rec, path, "cannot be recreated (clock not available)");
  if (why == TimerfdMade::kNotArmed) return fail_fd(c, rec, "cannot re-arm", errno);
  if (ticks_lost) {
    warn(Msg(c.line, sizeof c.line).s("fd ").i(rec.fd).s(" (timerfd): ").u(s.ticks)
        .s(" unread expirations lost (kernel without TFD_IOC_SET_TICKS)").c_str());
  }
  return place(c, fd, rec);
}

// First end of a pair (peer_fd above it): a new pipe, our end placed here, the other end placed at its
// number right away (its own record, later, only sets its flags; numbers between are placed with dup3
// onto their own numbers and cannot disturb it). Second end: flags, capacity, and the buffered bytes.
int restore_local_pipe(RestoreCtx& c, const FdRecord& rec) {
  bool reader = (rec.flags & O_ACCMODE) == O_RDONLY;
  if (rec.peer_fd > rec.fd) {
    if (rec.content_len != 0) return fail_fd(c, rec, "pipe data on the wrong end", EINVAL);
    if (inject::fd_reserved(rec.peer_fd)) return fail_fd(c, rec, "the other end's number is the engine's", EBUSY);
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return fail_fd(c, rec, "cannot create the pipe", errno);
    // Move both ends above the two target numbers first: pipe2 may have returned either of them.
    int above = (rec.fd > rec.peer_fd ? rec.fd : rec.peer_fd) + 1;
    int r = fcntl(p[0], F_DUPFD_CLOEXEC, above), w = fcntl(p[1], F_DUPFD_CLOEXEC, above);
    int e = errno;
    close(p[0]);
    close(p[1]);
    int mine = reader ? r : w, other = reader ? w : r;
    if (r < 0 || w < 0 || dup3(other, rec.peer_fd, O_CLOEXEC) < 0) {
      e = r < 0 || w < 0 ? e : errno;
      if (r >= 0) close(r);
      if (w >= 0) close(w);
      return fail_fd(c, rec, "cannot place the other end", e);
    }
    close(other);
    if (rec.flags & O_NONBLOCK) fcntl(mine, F_SETFL, O_NONBLOCK);
    return place(c, mine, rec);
  }
  // Second end: already at its number since the first end's record.
  int fl = fcntl(rec.fd, F_GETFL), peer_fl = fcntl(rec.peer_fd, F_GETFL);
  if (fl < 0 || peer_fl < 0 || (fl & O_ACCMODE) != (rec.flags & O_ACCMODE) || (peer_fl & O_ACCMODE) == (fl & O_ACCMODE))
    return fail_fd(c, rec, "its other end was not restored first", EINVAL);
  fcntl(rec.fd, F_SETFL, (fl & ~O_NONBLOCK) | (rec.flags & O_NONBLOCK));
  fcntl(rec.fd, F_SETFD, rec.fd_flags & FD_CLOEXEC);
  int write_end = reader ? rec.peer_fd : rec.fd;
  if (rec.size > 65536) fcntl(write_end, F_SETPIPE_SZ, static_cast<int>(rec.size));  // best effort
  // Non-blocking while refilling: if the capacity could not be restored, fail instead of hanging.
  int wfl = fcntl(write_end, F_GETFL);
  fcntl(write_end, F_SETFL, wfl | O_NONBLOCK);
  char buf[4096];
  int rc = 0;
  for (int64_t left = rec.content_len; left > 0 && rc == 0;) {
    size_t n = static_cast<size_t>(left < (int64_t)sizeof buf ? left : (int64_t)sizeof buf);
    if (!c.in.bytes(buf, n)) return fail_fd(c, rec, "pipe data truncated in the section", EINVAL);
    rc = write_all(write_end, buf, n);
    left -= static_cast<int64_t>(n);
  }
  fcntl(write_end, F_SETFL, wfl);
  return rc == 0 ? 0 : fail_fd(c, rec, "cannot refill the pipe", -rc);
}

// Registrations of epoll instances: read at save from fdinfo ("tfd: N events: X data: Y ... ino:Z"),
// applied on restore once every descriptor is back (a registered fd may have a higher number). Static:
// save and restore may not allocate; one checkpoint or restore at a time.
namespace {
constexpr int kMaxEpollItems = 4096;
EpollItem g_items[kMaxEpollItems];
struct Pending {
  int epfd;
  EpollItem item;
};
Pending g_pending[kMaxEpollItems];
int g_npending;
char g_epoll_info[256 << 10];  // fdinfo of one epoll instance: ~80 bytes a registration
int32_t g_listed_tfd[kMaxEpollItems];  // the numbers of every registration listed so far (epoll_items)

const char* after(const char* p, const char* key) {
  p = strstr(p, key);
  return p ? p + strlen(key) : nullptr;
}

uint64_t parse_num(const char*& p, int base) {
  uint64_t v = 0;
  if (const char* end = fdinfo_parse(p, base, &v)) p = end;
  return v;
}
}  // namespace

int epoll_items(int fd, const EpollItem** items) {
  if (!fdinfo_load(fd, g_epoll_info, sizeof g_epoll_info)) return -1;
  int n = 0, listed = 0;
  for (const char* p = g_epoll_info; (p = after(p, "tfd:")) && n < kMaxEpollItems && listed < kMaxEpollItems;) {
    EpollItem it{};
    it.tfd = static_cast<int32_t>(parse_num(p, 10));
    const char* q = after(p, "events:");
    const char* r = q ? after(q, "data:") : nullptr;
    const char* s = r ? after(r, "ino:") : nullptr;
    if (!s) return -1;
    it.events = static_cast<uint32_t>(parse_num(q, 16));
    it.data = parse_num(r, 16);
    uint64_t ino = parse_num(s, 16);
    // The number it was registered under may since name another file (dup2, close): skip those. The
    // inode does not tell an anonymous-inode file (eventfd, timerfd, signalfd, epoll) from another, and
    // an instance shared across fork lists the targets every holder registered: a process whose own
    // eventfd has the number of another holder's target would register its file in the one instance
    // at restore. kcmp(KCMP_EPOLL_TFD) compares the very file (`toff`: which of the registrations under
    // that number); where it is unavailable the inode decides, as before.
    struct stat st;
    bool ours = fstat(it.tfd, &st) == 0 && st.st_ino == ino;
    g_listed_tfd[listed++] = it.tfd;
    if (ours) {
      uint32_t toff = 0;  // the kernel's order is fdinfo's: every registration listed before, ours or not
      for (int k = 0; k + 1 < listed; ++k) toff += g_listed_tfd[k] == it.tfd;
      struct kcmp_epoll_slot slot = {static_cast<uint32_t>(fd), static_cast<uint32_t>(it.tfd), toff};
      const long self = syscall(SYS_getpid);
      const int e = errno;
      const long r = syscall(SYS_kcmp, self, self, KCMP_EPOLL_TFD, it.tfd, &slot);
      if (r > 0 || (r < 0 && errno == ENOENT)) ours = false;
      errno = e;
    }
    if (ours) g_items[n++] = it;
    p = s;
  }
  *items = g_items;
  return n;
}

namespace {
// The record's registrations, queued for epoll_rearm. False: the section is malformed.
bool queue_items(RestoreCtx& c, const FdRecord& rec) {
  if (rec.content_len % static_cast<int64_t>(sizeof(EpollItem)) != 0) return false;
  for (int64_t k = 0; k < rec.content_len / static_cast<int64_t>(sizeof(EpollItem)); ++k) {
    EpollItem it;
    if (!c.in.bytes(&it, sizeof it) || it.tfd < 0) return false;
    if (g_npending < kMaxEpollItems) g_pending[g_npending++] = Pending{rec.fd, it};
  }
  return true;
}
}  // namespace

int restore_epoll(RestoreCtx& c, const FdRecord& rec, const char* path) {
  if (!queue_items(c, rec)) return fail_fd(c, rec, "bad epoll registrations in the section", EINVAL);
  int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return stand_in(c, rec, path, "cannot be recreated");
  return place(c, fd, rec);
}

int restore_shared_epoll(RestoreCtx& c, const FdRecord& rec, int inherited) {
  if (!queue_items(c, rec)) return fail_fd(c, rec, "bad epoll registrations in the section", EINVAL);
  int fd = fcntl(inherited, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return fail_fd(c, rec, "cannot take the epoll instance handed over by revive restart", errno);
  return place(c, fd, rec);
}

void epoll_rearm(bool apply) {
  char line[160];
  if (!apply) g_npending = 0;  // kept after apply, for epoll_rewatch
  for (int k = 0; apply && k < g_npending; ++k) {
    const Pending& p = g_pending[k];
    struct epoll_event ev = {};
    ev.events = p.item.events;
    ev.data.u64 = p.item.data;
    if (epoll_ctl(p.epfd, EPOLL_CTL_ADD, p.item.tfd, &ev) != 0) {
      int e = errno;
      if (e == EEXIST) continue;  // a shared instance: another holder registered this file already
      // A socket the chan plugin puts back later (a listener, a connection, a socket another process
      // hands over) is still the stand-in here; chan's epoll_rewatch makes the registration then. Only
      // a descriptor that stays a stand-in is worth the warning (MPICH's UCX listeners gave five).
      if (revive_chan_restores && revive_chan_restores(p.item.tfd)) continue;
      warn(Msg(line, sizeof line).s("fd ").i(p.epfd).s(" (epoll): cannot watch fd ").i(p.item.tfd).s(" again: ").err(e)
          .c_str());
    }
  }
}

void epoll_rewatch(int fd) {
  for (int k = 0; k < g_npending; ++k) {
    const Pending& p = g_pending[k];
    if (p.item.tfd != fd) continue;
    struct epoll_event ev = {};
    ev.events = p.item.events;
    ev.data.u64 = p.item.data;
    if (epoll_ctl(p.epfd, EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST) epoll_ctl(p.epfd, EPOLL_CTL_MOD, fd, &ev);
  }
}

}  // namespace revive::plugins
