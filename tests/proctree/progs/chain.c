/* An exec chain: `chain` runs system("<self> mid N"); mid forks a child that execve()s `<self> leaf`
 * with an environment of its own (no LD_PRELOAD, no REVIVE_*: the wrapper must put them back), waits
 * for it and exits with its status + 1; chain prints what system() returned. Every stage prints slowly. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tree_util.h"

static void work(const char* who, int n) {
  for (int i = 0; i < n; i++) {
    printf("%s %d\n", who, i);
    nap(20);
  }
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1 && strcmp(argv[1], "leaf") == 0) {
    work("leaf", argc > 2 ? atoi(argv[2]) : 80);
    return getenv("CHAIN_MARK") ? 20 : 50;  /* the program's own variable must survive too */
  }
  if (argc > 2 && strcmp(argv[1], "mid") == 0) {
    work("mid", atoi(argv[2]));
    pid_t c = fork();
    if (c == 0) {
      char* args[] = {argv[0], "leaf", NULL};
      char* env[] = {"CHAIN_MARK=1", NULL};
      execve(argv[0], args, env);  /* not /proc/self/exe: after a restore that names revive-restart */
      _exit(126);
    }
    int st = 0;
    waitpid(c, &st, 0);
    work("mid after leaf", 10);
    return WIFEXITED(st) ? WEXITSTATUS(st) + 1 : 99;
  }
  if (argc > 1 && strcmp(argv[1], "spawn") == 0) {
    /* posix_spawn with an environment stripped of LD_PRELOAD and REVIVE_*: the wrapper puts them back
     * and the spawned leaf joins the computation before posix_spawn returns. */
    extern char** environ;
    char* env[256];
    int k = 0;
    for (char** e = environ; *e && k < 255; ++e)
      if (strncmp(*e, "LD_PRELOAD=", 11) != 0 && strncmp(*e, "REVIVE_", 7) != 0) env[k++] = *e;
    env[k] = NULL;
    char* args[] = {argv[0], "leaf", "60", NULL};
    pid_t c;
    work("spawner", 5);
    if (posix_spawn(&c, argv[0], NULL, NULL, args, env) != 0) return 97;
    int st = 0;
    waitpid(c, &st, 0);
    printf("spawned leaf exited %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 6;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 98;
  self[n] = 0;
  work("top", 15);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "'%s' mid 20", self);  /* read before any checkpoint */
  int st = system(cmd);
  printf("system returned %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  work("top after", 10);
  return 5;
}
