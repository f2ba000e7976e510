#include "scenarios.h"

#include <fcntl.h>
#include <linux/io_uring.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "inject/plugin.h"

namespace revive::plugins::test {
namespace {

[[noreturn]] void die(const char* what) {
  perror(what);
  exit(2);
}

// Moves fd out of the way (>= 100), so that placing one end of a pair cannot close the other.
int high(int fd) {
  int h = fcntl(fd, F_DUPFD, 100);
  if (h < 0) die("F_DUPFD");
  close(fd);
  return h;
}

void put_at(int fd, int want) {
  if (fd < 0) die("open");
  if (fd == want) return;
  if (dup2(fd, want) != want) die("dup2");
  close(fd);
}

// dup2 drops O_CLOEXEC; the fd plugin must keep whichever the program had.
void put_cloexec_at(int fd, int want) {
  put_at(fd, want);
  fcntl(want, F_SETFD, FD_CLOEXEC);
}

void write_all(int fd, const std::string& s) {
  if (write(fd, s.data(), s.size()) != static_cast<ssize_t>(s.size())) die("write");
}

std::string pattern(size_t n, char base) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(base + i % 26);
  return s;
}

std::string read_n(int fd, size_t n) {
  std::string s(n, '\0');
  ssize_t got = read(fd, s.data(), n);
  s.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return s;
}

std::string file_contents(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return "(missing)";
  std::string s;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  fclose(f);
  return s;
}

void setup_fd(const std::string& dir) {
  std::string data = dir + "/data.txt";
  int fd = open(data.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  write_all(fd, pattern(10000, 'a'));
  close(fd);
  put_at(open(data.c_str(), O_RDONLY), 3);
  lseek(3, 1234, SEEK_SET);
  put_cloexec_at(open((dir + "/log.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0640), 5);
  for (int i = 0; i < 10; ++i) write_all(5, "line " + std::to_string(i) + "...\n");
  put_at(open((dir + "/rw.bin").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600), 6);
  write_all(6, pattern(500, 'A'));
  lseek(6, 77, SEEK_SET);
  int p[2];
  if (pipe2(p, O_NONBLOCK) != 0) die("pipe");
  p[0] = high(p[0]);
  p[1] = high(p[1]);
  put_at(p[0], 7);
  put_at(p[1], 8);
  write_all(8, "hello-pipe");  // buffered in the pipe at the checkpoint
  put_cloexec_at(open(dir.c_str(), O_RDONLY | O_DIRECTORY), 9);
  put_at(open("/dev/null", O_WRONLY), 10);
  std::string gone = dir + "/gone.bin";
  put_at(open(gone.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600), 11);
  write_all(11, pattern(5000, 'k'));
  unlink(gone.c_str());
  lseek(11, 300, SEEK_SET);
  put_at(memfd_create("revive-test", 0), 12);
  write_all(12, pattern(3000, 'm'));
  lseek(12, 10, SEEK_SET);
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) die("socketpair");
  sp[0] = high(sp[0]);
  sp[1] = high(sp[1]);
  put_at(sp[0], 13);
  put_at(sp[1], 14);
  put_cloexec_at(eventfd(0, 0), 15);
  uint64_t five = 5;
  if (write(15, &five, 8) != 8) die("eventfd write");
  put_at(timerfd_create(CLOCK_MONOTONIC, 0), 16);
  itimerspec armed = {{2, 0}, {100, 250000000}};
  timerfd_settime(16, 0, &armed, nullptr);
  put_at(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK), 17);
  itimerspec once = {{0, 0}, {0, 1000000}};
  timerfd_settime(17, 0, &once, nullptr);
  usleep(20000);  // expired once, not read: one pending expiration
  int lone[2];
  if (pipe(lone) != 0) die("pipe");
  put_at(high(lone[0]), 27);  // the write end is not ours: a pipe to "another process"
  close(lone[1]);
  // An event loop's epoll: the pipe and the eventfd (both restored) and a socket (a stand-in).
  put_at(epoll_create1(0), 28);
  epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = 0x1234;
  epoll_ctl(28, EPOLL_CTL_ADD, 7, &ev);
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = 77;
  epoll_ctl(28, EPOLL_CTL_ADD, 15, &ev);
  ev.events = EPOLLIN;
  ev.data.u64 = 13;
  epoll_ctl(28, EPOLL_CTL_ADD, 13, &ev);
  sigset_t urg;
  sigemptyset(&urg);
  sigaddset(&urg, SIGURG);
  sigaddset(&urg, SIGWINCH);
  put_cloexec_at(signalfd(-1, &urg, SFD_NONBLOCK), 29);
  put_at(open(data.c_str(), O_RDONLY | O_NONBLOCK), 20);
  lseek(20, 99, SEEK_SET);
  // Shared open file descriptions (dup, 2>&1): one offset for both numbers, before and after restore.
  put_cloexec_at(dup(6), 21);
  put_at(dup(11), 22);
  put_at(dup(8), 23);
  put_at(open("/proc/self/status", O_RDONLY), 24);  // readlink says /proc/<pid>/status
  // A second description of deleted gone.bin (11), its own offset: after restore, the same inode again.
  put_at(open("/proc/self/fd/11", O_RDONLY), 25);
  lseek(25, 40, SEEK_SET);
}

std::string exercise_fd(const std::string& dir) {
  std::string out;
  out += "fd3 reads " + read_n(3, 10) + "\n";
  out += "fd20 reads " + read_n(20, 10) + "\n";
  out += "fd11 reads " + read_n(11, 10) + "\n";
  out += "fd12 reads " + read_n(12, 10) + "\n";
  write_all(5, "after\n");
  write_all(6, "XY");
  write_all(21, "Z");
  out += "rw.bin offset after writes through fds 6 and 21: " + std::to_string(lseek(6, 0, SEEK_CUR)) + "\n";
  out += "fd22 reads " + read_n(22, 4) + " (right after fd11's read)\n";
  out += "fd25 reads " + read_n(25, 5) + "\n";
  char got[4] = {};
  bool one_inode = pwrite(11, "NEW", 3, 4000) == 3 && pread(25, got, 3, 4000) == 3 && memcmp(got, "NEW", 3) == 0;
  out += "fd25 sees fd11's write: " + std::to_string(one_inode) + "\n";
  epoll_event evs[8];
  int ready = epoll_wait(28, evs, 8, 0);
  std::vector<std::string> seen;
  for (int k = 0; k < ready; ++k)
    seen.push_back(std::to_string(evs[k].data.u64) + "/" + std::to_string(evs[k].events));
  std::sort(seen.begin(), seen.end());
  out += "epoll ready:";
  for (auto& x : seen) out += " " + x;
  out += "\n";
  out += "fd7 (pipe) reads " + read_n(7, 64) + "\n";
  write_all(23, "via-dup");
  out += "fd7 then reads " + read_n(7, 64) + "\n";
  uint64_t v = 0;
  out += "eventfd reads " + std::to_string(read(15, &v, 8) == 8 ? v : 0) + "\n";
  itimerspec its{};
  timerfd_gettime(16, &its);
  out += "timerfd 16 interval " + std::to_string(its.it_interval.tv_sec) + "s value~" +
         std::to_string(its.it_value.tv_sec + (its.it_value.tv_nsec >= 500000000)) + "s\n";
  v = 0;
  out += "timerfd 17 expirations " + std::to_string(read(17, &v, 8) == 8 ? v : 0) + "\n";
  sigset_t urg;
  sigemptyset(&urg);
  sigaddset(&urg, SIGURG);
  pthread_sigmask(SIG_BLOCK, &urg, nullptr);
  raise(SIGURG);
  signalfd_siginfo si{};
  out += "signalfd reads signal " + std::to_string(read(29, &si, sizeof si) == sizeof si ? si.ssi_signo : 0) + "\n";
  std::string status = read_n(24, 4096);
  out += "fd24 is this process's status: " + std::to_string(status.find("\nPid:\t" + std::to_string(getpid()) + "\n") != std::string::npos) + "\n";
  out += "log.txt is [" + file_contents(dir + "/log.txt") + "]\n";
  out += "rw.bin is [" + file_contents(dir + "/rw.bin") + "]\n";
  return out;
}

volatile sig_atomic_t g_usr1;
volatile sig_atomic_t g_rt_value;
volatile sig_atomic_t g_alarms;

void on_usr1(int) { g_usr1 = g_usr1 + 1; }
void on_rt(int, siginfo_t* info, void*) { g_rt_value = info->si_value.sival_int; }
void on_alarm(int) { g_alarms = g_alarms + 1; }

void block_signal_scenario_mask() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR2);
  sigaddset(&s, SIGRTMIN + 3);
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
}

void setup_signal() {
  struct sigaction sa = {};
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGUSR2);
  sigaction(SIGUSR1, &sa, nullptr);
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  sigaction(SIGHUP, &sa, nullptr);
  struct sigaction rt = {};
  rt.sa_sigaction = on_rt;
  rt.sa_flags = SA_SIGINFO;
  sigaction(SIGRTMIN + 1, &rt, nullptr);
  signal(SIGINT, SIG_IGN);
  block_signal_scenario_mask();
  kill(getpid(), SIGUSR2);  // process-wide pending
  sigqueue(getpid(), SIGRTMIN + 3, sigval{7});
  sigqueue(getpid(), SIGRTMIN + 3, sigval{8});
}

std::string exercise_signal() {
  std::string out;
  kill(getpid(), SIGUSR1);
  out += "usr1 handled " + std::to_string(g_usr1) + "\n";
  sigqueue(getpid(), SIGRTMIN + 1, sigval{42});
  out += "rt handler got " + std::to_string(g_rt_value) + "\n";
  kill(getpid(), SIGINT);
  out += "survived SIGINT (ignored)\n";
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR2);
  timespec zero = {0, 0};
  out += "sigtimedwait USR2 -> " + std::to_string(sigtimedwait(&s, nullptr, &zero) == SIGUSR2) + "\n";
  sigemptyset(&s);
  sigaddset(&s, SIGRTMIN + 3);
  for (int k = 0; k < 3; ++k) {
    siginfo_t info;
    int got = sigtimedwait(&s, &info, &zero);
    out += "queued RTMIN+3 -> " + (got > 0 ? std::to_string(info.si_value.sival_int) : std::string("none")) + "\n";
  }
  return out;
}

void set_itimer(int which, long sec, long usec, long isec, long iusec) {
  itimerval v = {{isec, iusec}, {sec, usec}};
  if (setitimer(which, &v, nullptr) != 0) die("setitimer");
}

void setup_timer() {
  // x.25 s: the dump rounds to the nearest second, so up to 0.75 s may pass between save and restore
  // (a loaded machine running tests in parallel) without changing it.
  set_itimer(ITIMER_REAL, 100, 250000, 0, 0);
  set_itimer(ITIMER_VIRTUAL, 50, 250000, 2, 250000);
  set_itimer(ITIMER_PROF, 30, 250000, 1, 0);
}

void setup_alarm() {
  struct sigaction sa = {};
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, nullptr);
  set_itimer(ITIMER_REAL, 1, 250000, 0, 0);
}

double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// The re-armed alarm must fire with its remaining time (~1.25 s), neither at once nor never (wide
// bounds: tests run in parallel on a loaded machine).
std::string exercise_alarm() {
  double t0 = now();
  while (!g_alarms && now() - t0 < 6) usleep(5000);
  double dt = now() - t0;
  if (g_alarms == 1 && dt > 0.3 && dt < 4) return "alarm fired once after its remaining time\n";
  return "alarm: fired " + std::to_string(g_alarms) + " times after " + std::to_string(dt) + " s\n";
}

volatile sig_atomic_t g_ptimer_fired;
void on_ptimer(int, siginfo_t* info, void*) {
  if (info->si_value.sival_int == 55) g_ptimer_fired = g_ptimer_fired + 1;
}
void on_thread_timer(sigval) {}

timer_t make_timer(clockid_t clock, int notify, int signo, int value) {
  sigevent sev = {};
  sev.sigev_notify = notify;
  sev.sigev_signo = signo;
  sev.sigev_value.sival_int = value;
  timer_t t;
  if (timer_create(clock, &sev, &t) != 0) die("timer_create");
  return t;
}

void arm(timer_t t, long sec, long nsec, long isec, long insec) {
  itimerspec its = {{isec, insec}, {sec, nsec}};
  if (timer_settime(t, 0, &its, nullptr) != 0) die("timer_settime");
}

// The program's timer handles, kept in a file so the exercise can use them in the restored helper too
// (a real restore brings them back with the program's memory).
std::string handles_file(const std::string& dir) { return dir + "/timer-handles"; }

void setup_posix_timers(const std::string& dir) {
  struct sigaction sa = {};
  sa.sa_sigaction = on_ptimer;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGRTMIN + 5, &sa, nullptr);
  timer_t a = make_timer(CLOCK_MONOTONIC, SIGEV_SIGNAL, SIGRTMIN + 4, 99);
  arm(a, 100, 250000000, 1, 500000000);
  timer_t b = make_timer(CLOCK_REALTIME, SIGEV_NONE, 0, 0);
  arm(b, 50, 250000000, 0, 0);
  timer_t gone;
  if (timer_create(CLOCK_MONOTONIC, nullptr, &gone) != 0 || timer_delete(gone) != 0) die("timer_delete");
  timer_t c = make_timer(CLOCK_MONOTONIC, SIGEV_SIGNAL, SIGRTMIN + 5, 55);
  arm(c, 1, 250000000, 0, 0);
  sigevent th = {};
  th.sigev_notify = SIGEV_THREAD;
  th.sigev_notify_function = on_thread_timer;
  timer_t d;
  if (timer_create(CLOCK_MONOTONIC, &th, &d) != 0) die("timer_create SIGEV_THREAD");
  FILE* f = fopen(handles_file(dir).c_str(), "w");
  fprintf(f, "%ld %ld\n", (long)(intptr_t)a, (long)(intptr_t)c);
  fclose(f);
}

std::string exercise_posix_timers(const std::string& dir) {
  long a = -1, c = -1;
  FILE* f = fopen(handles_file(dir).c_str(), "r");
  if (!f || fscanf(f, "%ld %ld", &a, &c) != 2) die("timer handles");
  fclose(f);
  std::string out;
  itimerspec its = {};
  int rc = timer_gettime(reinterpret_cast<timer_t>(static_cast<intptr_t>(a)), &its);
  out += "timer A: gettime rc " + std::to_string(rc) + " interval " + std::to_string(its.it_interval.tv_sec) + "." +
         std::to_string(its.it_interval.tv_nsec) + "\n";
  double t0 = now();
  while (!g_ptimer_fired && now() - t0 < 6) usleep(5000);
  double dt = now() - t0;
  if (g_ptimer_fired == 1 && dt > 0.3 && dt < 4) return out + "timer C fired once after its remaining time\n";
  return out + "timer C: fired " + std::to_string(g_ptimer_fired) + " times after " + std::to_string(dt) + " s\n";
}

void setup_proc(const std::string& dir) {
  std::string sub = dir + "/work dir";
  mkdir(sub.c_str(), 0755);
  if (chdir(sub.c_str()) != 0) die("chdir");
  umask(027);
  rlimit l = {512, 4096};
  setrlimit(RLIMIT_NOFILE, &l);
  l = {0, RLIM_INFINITY};
  setrlimit(RLIMIT_CORE, &l);
  l = {100000, 200000};
  setrlimit(RLIMIT_MSGQUEUE, &l);
  l = {1 << 30, RLIM_INFINITY};
  setrlimit(RLIMIT_AS, &l);
}

bool is(const std::string& name, const char* prefix) { return name.rfind(prefix, 0) == 0; }

}  // namespace

bool known_scenario(const std::string& n) {
  return is(n, "fd") || n == "signal" || n == "timer" || n == "alarm" || n == "posix-timer" || is(n, "proc") ||
         n == "all";
}

void setup(const std::string& n, const std::string& dir) {
  if (is(n, "fd") || n == "all") setup_fd(dir);
  if (n == "fd-unrestorable") {  // an anonymous inode revive cannot restore: an io_uring instance
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int ring = static_cast<int>(syscall(SYS_io_uring_setup, 4, &p));
    if (ring < 0) die("io_uring_setup");
    put_at(ring, 40);
  }
  if (n == "signal" || n == "all") setup_signal();
  if (n == "timer" || n == "all") setup_timer();
  if (n == "alarm") setup_alarm();
  if (n == "posix-timer") setup_posix_timers(dir);
  if (is(n, "proc") || n == "all") setup_proc(dir);
}

void engine_side(const std::string& n) {
  if (n == "signal" || n == "all") block_signal_scenario_mask();
}

std::string exercise(const std::string& n, const std::string& dir) {
  std::string out;
  if (is(n, "fd") || n == "all") out += exercise_fd(dir);
  if (n == "signal" || n == "all") out += exercise_signal();
  if (n == "alarm") out += exercise_alarm();
  if (n == "posix-timer") out += exercise_posix_timers(dir);
  return out;
}

void after_checkpoint(const std::string& n, const std::string& dir) {
  if (n == "fd" || n == "all") {  // the log grows after the checkpoint: restore must cut it back
    int fd = open((dir + "/log.txt").c_str(), O_WRONLY | O_APPEND);
    write_all(fd, "written after the checkpoint, lost with the process\n");
    close(fd);
  }
  if (n == "fd-vanished") unlink((dir + "/data.txt").c_str());
  if (n == "fd-shrank") truncate((dir + "/rw.bin").c_str(), 10);
  if (n == "proc-cwd-vanished") {
    if (chdir("/") != 0 || rmdir((dir + "/work dir").c_str()) != 0) die("rmdir");
  }
}

}  // namespace revive::plugins::test
