/* Reads /proc/self/exe every round and prints its file name, then re-executes itself through
 * /proc/self/exe ("again"), which prints the name once more and exits 5. After a restart /proc/self/exe
 * must still name this program, not the restarter: otherwise the names printed differ and the re-exec
 * runs the restarter (usage error), so output and exit status differ from an uninterrupted run. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tree_util.h"

static const char* exe_name(char* buf, size_t cap) {
  ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
  if (n < 0) return "(unreadable)";
  buf[n] = 0;
  const char* slash = strrchr(buf, '/');
  return slash ? slash + 1 : buf;
}

int main(int argc, char** argv) {
  char buf[PATH_MAX];
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1 && strcmp(argv[1], "again") == 0) {
    printf("again: exe %s\n", exe_name(buf, sizeof buf));
    return 5;
  }
  int rounds = argc > 1 ? atoi(argv[1]) : 300;
  for (int i = 0; i < rounds; i++) {
    printf("round %d: exe %s\n", i, exe_name(buf, sizeof buf));
    nap(10);
  }
  char* args[] = {argv[0], (char*)"again", NULL};
  execv("/proc/self/exe", args);
  printf("re-exec through /proc/self/exe failed\n");
  return 99;
}
