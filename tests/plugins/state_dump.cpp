#include "state_dump.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "inject/plugin.h"

namespace revive::plugins::test {
namespace {

std::string fmt(const char* f, auto... args) {
  char buf[PATH_MAX + 256];
  snprintf(buf, sizeof buf, f, args...);
  return buf;
}

const char* kind(mode_t m) {
  if (S_ISREG(m)) return "reg";
  if (S_ISDIR(m)) return "dir";
  if (S_ISCHR(m)) return "chr";
  if (S_ISFIFO(m)) return "fifo";
  if (S_ISSOCK(m)) return "sock";
  return "anon";
}

// Deleted files come back under another name: describe them by contents instead.
std::string deleted_contents(int fd, off_t size) {
  std::string s(static_cast<size_t>(size), '\0');
  if (pread(fd, s.data(), s.size(), 0) != size) return "unreadable";
  unsigned long h = 5381;
  for (unsigned char c : s) h = h * 33 + c;
  return fmt("%lx", h);
}

void dump_fds(std::string& out) {
  std::vector<int> fds;
  DIR* d = opendir("/proc/self/fd");
  for (dirent* e; (e = readdir(d));)
    if (e->d_name[0] != '.') fds.push_back(atoi(e->d_name));
  int self = dirfd(d);
  std::sort(fds.begin(), fds.end());
  for (int fd : fds) {
    if (fd == self) continue;
    struct stat st;
    if (fstat(fd, &st) != 0) continue;
    char path[PATH_MAX] = {};
    readlink(fmt("/proc/self/fd/%d", fd).c_str(), path, sizeof path - 1);
    int fl = fcntl(fd, F_GETFL) & (O_ACCMODE | O_APPEND | O_NONBLOCK | O_SYNC | O_DIRECT | O_NOATIME | O_PATH);
    int cloexec = fcntl(fd, F_GETFD) & FD_CLOEXEC;
    if (fd <= 2 && !S_ISREG(st.st_mode)) {  // the test harness's pipes: their identity differs per run
      out += fmt("fd %d %s\n", fd, kind(st.st_mode));
      continue;
    }
    std::string name = path;
    if (name.find(":[") != std::string::npos && name.rfind("anon_inode:", 0) != 0)
      name = name.substr(0, name.find(":["));  // pipe:[ino], socket:[ino]: the inode differs per run
    if (S_ISREG(st.st_mode) && st.st_nlink == 0) {
      bool memfd = name.rfind("/memfd:", 0) == 0;
      name = std::string(memfd ? "memfd" : "deleted") + ":" + deleted_contents(fd, st.st_size);
    }
    bool seekable = S_ISREG(st.st_mode) || S_ISCHR(st.st_mode);
    long long off = seekable ? static_cast<long long>(lseek(fd, 0, SEEK_CUR)) : -1;
    out += fmt("fd %d %s %s flags=%#o cloexec=%d off=%lld size=%lld mode=%o\n", fd, kind(st.st_mode), name.c_str(), fl,
               cloexec, off, S_ISREG(st.st_mode) ? (long long)st.st_size : 0LL, (unsigned)(st.st_mode & 07777));
  }
  closedir(d);
}

struct KSigaction {
  void* handler;
  unsigned long flags;
  void* restorer;
  unsigned long mask;
};

void dump_signals(std::string& out) {
  int ckpt = inject::checkpoint_signal();
  for (int sig = 1; sig <= 64; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP || sig == ckpt) continue;
    KSigaction a{};
    syscall(SYS_rt_sigaction, sig, nullptr, &a, 8);
    if (!a.handler && !a.flags && !a.mask) continue;  // default, as in any fresh process
    out += fmt("sig %d handler=%p flags=%#lx mask=%#lx restorer=%p\n", sig, a.handler, a.flags, a.mask, a.restorer);
  }
  unsigned long pend = 0;
  syscall(SYS_rt_sigpending, &pend, 8);
  for (int sig = 1; sig <= 64; ++sig)
    if (pend & (1UL << (sig - 1))) out += fmt("pending %d\n", sig);
}

void dump_timers(std::string& out) {
  for (int w = 0; w < 3; ++w) {
    itimerval v{};
    getitimer(w, &v);
    long secs = v.it_value.tv_sec + (v.it_value.tv_usec >= 500000 ? 1 : 0);
    out += fmt("itimer %d value~%lds interval=%ld.%06ld\n", w, secs, (long)v.it_interval.tv_sec, (long)v.it_interval.tv_usec);
  }
}

// POSIX timers as the kernel lists them (ID, signal/value, notify kind, clock), with their times.
void dump_posix_timers(std::string& out) {
  std::ifstream f("/proc/self/timers");
  std::string key, val;
  for (std::string line; std::getline(f, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    key = line.substr(0, colon);
    val = line.substr(colon + 2);
    if (key == "ID") {
      int id = std::stoi(val);
      itimerspec its{};
      syscall(SYS_timer_gettime, id, &its);
      long secs = its.it_value.tv_sec + (its.it_value.tv_nsec >= 500000000 ? 1 : 0);
      out += fmt("ptimer %d value~%lds interval=%ld.%09ld", id, secs, (long)its.it_interval.tv_sec,
                 (long)its.it_interval.tv_nsec);
    } else if (key == "notify") {
      out += " notify=" + val.substr(0, val.find('/'));  // drop "/pid.N": pids differ
    } else if (key == "ClockID") {
      out += " clock=" + val + "\n";
    } else {
      out += " " + key + "=" + val;
    }
  }
}

void dump_proc(std::string& out) {
  for (int r = 0; r < RLIM_NLIMITS; ++r) {
    rlimit l{};
    getrlimit(static_cast<__rlimit_resource>(r), &l);
    out += fmt("rlimit %d %llu %llu\n", r, (unsigned long long)l.rlim_cur, (unsigned long long)l.rlim_max);
  }
  char cwd[PATH_MAX];
  out += fmt("cwd %s\n", getcwd(cwd, sizeof cwd) ? cwd : "(none)");
  mode_t m = umask(0);
  umask(m);
  out += fmt("umask %04o\n", (unsigned)m);
}

}  // namespace

std::string dump_state() {
  std::string out;
  dump_fds(out);
  dump_signals(out);
  dump_timers(out);
  dump_posix_timers(out);
  dump_proc(out);
  return out;
}

}  // namespace revive::plugins::test
