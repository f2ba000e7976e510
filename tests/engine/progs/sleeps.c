/* Sleeps and waits under checkpoints (src/plugins/signal/wait_wrappers.cpp): each round sleeps in every
 * interposed call for a fixed time and checks, with CLOCK_MONOTONIC, that it did not end early and
 * returned what an uninterrupted run returns; then each call is interrupted by the program's own signal
 * (SIGUSR1 from a helper thread, repeated until the sleeper is back) and must report EINTR as without
 * revive. The output names each call and its verdict only, so it is identical in every run; the driver
 * checkpoints it every 100 ms (sleep_driver.py) or kills and restarts it mid-sleep (cr_driver.py).
 * With a third argument `sockets`: also a read and a recv on a socket with a receive timeout (SO_RCVTIMEO),
 * which the kernel ends with EINTR even under SA_RESTART (src/plugins/signal/io_wrappers.cpp):
 * uninterrupted they time out (EAGAIN). Checkpoints only: a standalone restart (no coordinator) brings
 * the in-process socketpair back with its peer closed, and a socket made again has no timeout.
 * Usage: eng_sleeps ROUNDS [MS [sockets]] */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int g_ms = 150;
static int g_epfd, g_pipe[2], g_sock[2];
static volatile sig_atomic_t g_usr1;
static volatile int g_sleeping;  /* 1 while the main thread waits for its own signal */
static pthread_t g_main;

static long long now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static void on_usr1(int sig) {
  (void)sig;
  g_usr1 = 1;
}

/* Each call waits `ms` milliseconds (nothing becomes ready); returns its result, errno in *err. */
static long wait_in(int k, int ms, int* err) {
  long rc = 0;
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  struct pollfd pf = {g_pipe[0], POLLIN, 0};
  struct epoll_event ev;
  fd_set r;
  sigset_t none;
  sigemptyset(&none);
  FD_ZERO(&r);
  FD_SET(g_pipe[0], &r);
  errno = 0;
  switch (k) {
    case 0: rc = nanosleep(&ts, NULL); break;
    case 1: rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL); if (rc) errno = (int)rc, rc = -1; break;
    case 2: {
      struct timespec end;
      clock_gettime(CLOCK_REALTIME, &end);
      end.tv_sec += ts.tv_sec;
      end.tv_nsec += ts.tv_nsec;
      if (end.tv_nsec >= 1000000000L) end.tv_sec++, end.tv_nsec -= 1000000000L;
      rc = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &end, NULL);
      if (rc) errno = (int)rc, rc = -1;
      break;
    }
    case 3: rc = usleep((useconds_t)ms * 1000); break;
    case 4: rc = poll(&pf, 1, ms); break;
    case 5: rc = ppoll(&pf, 1, &ts, &none); break;
    case 6: rc = select(g_pipe[0] + 1, &r, NULL, NULL, &tv); break;
    case 7: rc = pselect(g_pipe[0] + 1, &r, NULL, NULL, &ts, &none); break;
    case 8: rc = epoll_wait(g_epfd, &ev, 1, ms); break;
    case 9: rc = epoll_pwait(g_epfd, &ev, 1, ms, &none); break;
    case 10:
    case 11: {
      char c;
      setsockopt(g_sock[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      rc = k == 10 ? read(g_sock[0], &c, 1) : recv(g_sock[0], &c, 1, 0);
      if (rc == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) rc = 0;  /* timed out: what it should do */
      break;
    }
  }
  *err = errno;
  return rc;
}

static const char* const kNames[] = {"nanosleep", "clock_nanosleep", "clock_nanosleep_abs", "usleep",
                                     "poll", "ppoll", "select", "pselect", "epoll_wait", "epoll_pwait",
                                     "read_rcvtimeo", "recv_rcvtimeo"};
static int kCalls = 10;  /* 12 with `sockets` */

static void* kicker(void* arg) {
  (void)arg;
  for (;;) {
    if (__atomic_load_n(&g_sleeping, __ATOMIC_ACQUIRE)) pthread_kill(g_main, SIGUSR1);
    usleep(20000);  /* interposed too: must not end early either */
  }
  return NULL;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  if (argc > 2) g_ms = atoi(argv[2]);
  if (argc > 3 && strcmp(argv[3], "sockets") == 0) kCalls = 12;
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);  /* no SA_RESTART; it would not matter for these calls anyway */
  if (pipe(g_pipe) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, g_sock) != 0) return 2;
  g_epfd = epoll_create1(0);
  struct epoll_event ev = {EPOLLIN, {0}};
  epoll_ctl(g_epfd, EPOLL_CTL_ADD, g_pipe[0], &ev);
  g_main = pthread_self();
  pthread_t t;
  pthread_create(&t, NULL, kicker, NULL);
  int bad = 0;
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < kCalls; ++k) {
      int err;
      long long t0 = now_us();
      long rc = wait_in(k, g_ms, &err);
      long long took = now_us() - t0;
      /* The kernel never ends these early; 1 ms slack for the absolute sleep's realtime clock. */
      int ok = rc == 0 && took >= g_ms * 1000LL - 1000;
      if (!ok) {
        ++bad;
        printf("round %d %s: EARLY OR FAILED rc=%ld errno=%s after %lld us of %d ms\n", round, kNames[k], rc,
               strerror(err), took, g_ms);
      } else {
        printf("round %d %s: slept\n", round, kNames[k]);
      }
    }
    /* The program's own signal still interrupts (a long wait that must end early with EINTR). */
    for (int k = 0; k < kCalls; ++k) {
      if (k == 2) continue;  /* an absolute clock_nanosleep reports EINTR the same way; tested above */
      int err;
      g_usr1 = 0;
      __atomic_store_n(&g_sleeping, 1, __ATOMIC_RELEASE);
      long long t0 = now_us();
      long rc = wait_in(k, 4000, &err);  /* usleep takes at most 4294 s in microseconds */
      long long took = now_us() - t0;
      __atomic_store_n(&g_sleeping, 0, __ATOMIC_RELEASE);
      if (rc == -1 && err == EINTR && g_usr1 && took < 3900000LL) {
        printf("round %d %s: EINTR by own signal\n", round, kNames[k]);
      } else {
        ++bad;
        printf("round %d %s: own signal NOT reported: rc=%ld errno=%s usr1=%d after %lld us\n", round, kNames[k], rc,
               strerror(err), (int)g_usr1, took);
      }
    }
  }
  /* sleep() in whole seconds: a full one, then one interrupted by the program's signal it returns the seconds not slept. */
  long long t0 = now_us();
  unsigned full = sleep(1);
  long long took = now_us() - t0;
  printf("sleep(1): %s\n", full == 0 && took >= 999000 ? "slept" : "EARLY");
  if (!(full == 0 && took >= 999000)) ++bad;
  g_usr1 = 0;
  __atomic_store_n(&g_sleeping, 1, __ATOMIC_RELEASE);
  unsigned left = sleep(20);
  __atomic_store_n(&g_sleeping, 0, __ATOMIC_RELEASE);
  printf("sleep(20) interrupted by own signal: %s\n", left > 0 && left <= 20 && g_usr1 ? "returns seconds left" : "WRONG");
  if (!(left > 0 && left <= 20 && g_usr1)) ++bad;
  printf("done: %d bad\n", bad);
  return bad ? 1 : 0;
}
