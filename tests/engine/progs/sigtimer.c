/* Signal handlers and an interval timer: SIGALRM from setitimer(ITIMER_REAL) counts ticks, SIGUSR1 is
 * raised by the program itself every 10 ticks; the program runs until a fixed number of ticks, so the
 * output is deterministic only if dispositions, mask and the timer come back after restart. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t ticks, usr1;

static void on_alarm(int sig) { (void)sig; ++ticks; }
static void on_usr1(int sig, siginfo_t* si, void* uc) { (void)sig; (void)uc; usr1 += si->si_code == SI_TKILL || si->si_code == SI_USER; }

static char altstack[65536];

int main(int argc, char** argv) {
  int want = argc > 1 ? atoi(argv[1]) : 150;
  /* An alternate signal stack: handlers (the engine's too) run on it; it must still be set afterwards. */
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  struct sigaction sa = {0};
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART | SA_ONSTACK;
  sigaction(SIGALRM, &sa, NULL);
  struct sigaction su = {0};
  su.sa_sigaction = on_usr1;
  su.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGUSR1, &su, NULL);
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);  /* a mask that must survive */
  sigprocmask(SIG_BLOCK, &block, NULL);
  struct itimerval it = {{0, 10000}, {0, 10000}};
  setitimer(ITIMER_REAL, &it, NULL);
  int last = 0;
  while (ticks < want) {
    pause();
    if (ticks / 10 != last / 10) raise(SIGUSR1);
    last = ticks;
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  sigset_t now;
  sigprocmask(SIG_BLOCK, NULL, &now);
  stack_t cur;
  sigaltstack(NULL, &cur);
  printf("ticks>=%d usr1>=%d usr2_blocked=%d altstack=%d\n", want, usr1 >= want / 10 - 1, sigismember(&now, SIGUSR2),
         cur.ss_sp == altstack && cur.ss_size == sizeof altstack && !(cur.ss_flags & SS_DISABLE));
  return 0;
}
