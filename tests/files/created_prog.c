/* A program of the computation creating node-local files every way the creation log must see
 * (tests/files/created_test.py): mkstemps, mkstemp, creat, open O_CREAT|O_EXCL, open O_CREAT of a new
 * file, openat O_CREAT, fopen "w", a child after exec (sh's redirection), and a file made in the working
 * directory and renamed into the node-local one. All closed again, so only
 * the launch root's walk can save them. Step K (on ctl/stepK) makes set K in DIR and writes the names to
 * DIR/../names-K; on ctl/end it prints every file of every set. Contents are fixed by name: a run killed
 * and restarted prints what an uninterrupted one does. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;
static char names[64][512];
static int nnames;

static void body(int fd, const char* tag) {
  char b[4096];
  int n = 0;
  for (int i = 0; i < 40; ++i) n += snprintf(b + n, sizeof b - n, "%s line %d\n", tag, i);
  if (write(fd, b, n) != n) { perror("write"); exit(2); }
}
static void keep(const char* path) { snprintf(names[nnames++], sizeof names[0], "%s", path); }
static void wait_for(const char* f) { while (access(f, F_OK) != 0) usleep(10000); }

static void make_set(const char* dir, int k) {
  char p[512], tag[64];
  snprintf(p, sizeof p, "%s/ms%d-XXXXXX.s", dir, k);  /* gcc's way: mkstemps */
  int fd = mkstemps(p, 2);
  if (fd < 0) { perror("mkstemps"); exit(2); }
  body(fd, "mkstemps"); close(fd); keep(p);
  snprintf(p, sizeof p, "%s/mt%d-XXXXXX", dir, k);
  fd = mkstemp(p);
  if (fd < 0) { perror("mkstemp"); exit(2); }
  body(fd, "mkstemp"); close(fd); keep(p);
  snprintf(p, sizeof p, "%s/creat%d.txt", dir, k);
  fd = creat(p, 0644);
  if (fd < 0) { perror("creat"); exit(2); }
  body(fd, "creat"); close(fd); keep(p);
  snprintf(p, sizeof p, "%s/excl%d.txt", dir, k);
  fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) { perror("open excl"); exit(2); }
  body(fd, "excl"); close(fd); keep(p);
  snprintf(p, sizeof p, "%s/new%d.txt", dir, k);
  fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0640);
  if (fd < 0) { perror("open creat"); exit(2); }
  body(fd, "open"); close(fd); keep(p);
  int d = open(dir, O_RDONLY | O_DIRECTORY);
  snprintf(tag, sizeof tag, "at%d.txt", k);
  fd = openat(d, tag, O_WRONLY | O_CREAT, 0600);  /* relative to a directory descriptor */
  if (fd < 0) { perror("openat"); exit(2); }
  body(fd, "openat"); close(fd); close(d);
  snprintf(p, sizeof p, "%s/%s", dir, tag); keep(p);
  snprintf(p, sizeof p, "%s/fopen%d.txt", dir, k);
  FILE* f = fopen(p, "w");
  if (!f) { perror("fopen"); exit(2); }
  for (int i = 0; i < 30; ++i) fprintf(f, "fopen line %d\n", i);
  fclose(f); keep(p);
  snprintf(p, sizeof p, "%s/child%d.txt", dir, k);
  pid_t c = fork();
  if (c == 0) {
    execl("/bin/sh", "sh", "-c", "printf 'child %s\\n' \"$0\" > \"$1\"", "after-exec", p, (char*)0);
    _exit(127);
  }
  int st;
  if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st)) { fprintf(stderr, "child failed\n"); exit(2); }
  keep(p);
  char here[600], cwd[400];  /* made outside the node-local directory (absolute path in the working
                                directory, same file system), renamed into it */
  if (!getcwd(cwd, sizeof cwd)) { perror("getcwd"); exit(2); }
  snprintf(here, sizeof here, "%s/moved%d.tmp", cwd, k);
  fd = open(here, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) { perror("open moved"); exit(2); }
  body(fd, "moved"); close(fd);
  snprintf(p, sizeof p, "%s/moved%d.txt", dir, k);
  if (rename(here, p) != 0) { perror("rename"); exit(2); }
  keep(p);
  snprintf(here, sizeof here, "%s/linked%d.tmp", cwd, k);  /* link(2) into it, the first name removed */
  fd = open(here, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) { perror("open linked"); exit(2); }
  body(fd, "linked"); close(fd);
  snprintf(p, sizeof p, "%s/linked%d.txt", dir, k);
  if (link(here, p) != 0 || unlink(here) != 0) { perror("link"); exit(2); }
  keep(p);
  for (int at = 0; at < 2; ++at) {  /* mknod of a regular file, then written without O_CREAT */
    snprintf(p, sizeof p, "%s/mknod%s%d.txt", dir, at ? "at" : "", k);
    if ((at ? mknodat(AT_FDCWD, p, 0600, 0) : mknod(p, S_IFREG | 0600, 0)) != 0) { perror("mknod"); exit(2); }
    fd = open(p, O_WRONLY);
    if (fd < 0) { perror("open mknod"); exit(2); }
    body(fd, at ? "mknodat" : "mknod"); close(fd);
    keep(p);
  }
  for (int sp = 0; sp < 2; ++sp) {  /* posix_spawn's O_CREAT file actions run in the child */
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    snprintf(p, sizeof p, "%s/spawn%s%d.txt", dir, sp ? "p" : "", k);
    if (sp) {  /* relative to a chdir action */
      posix_spawn_file_actions_addchdir_np(&fa, dir);
      posix_spawn_file_actions_addopen(&fa, 1, strrchr(p, '/') + 1, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    } else {
      posix_spawn_file_actions_addopen(&fa, 1, p, O_WRONLY | O_CREAT | O_EXCL, 0644);
    }
    char* av[] = {"sh", "-c", "printf 'spawned %s\\n' \"$0\"", sp ? "spawnp" : "spawn", NULL};
    pid_t c;
    int e = sp ? posix_spawnp(&c, "sh", &fa, NULL, av, environ) : posix_spawn(&c, "/bin/sh", &fa, NULL, av, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st)) { fprintf(stderr, "spawn failed\n"); exit(2); }
    keep(p);
  }
  char list[600];
  snprintf(list, sizeof list, "%s/../names-%d", dir, k);
  FILE* l = fopen(list, "w");  /* outside the node-local directory: the test reads it */
  for (int i = 0; i < nnames; ++i) fprintf(l, "%s\n", names[i]);
  fclose(l);
  printf("made %d\n", k);
  fflush(stdout);
}

int main(int argc, char** argv) {
  if (argc != 3) { fprintf(stderr, "usage: created_prog NODEDIR STEPS\n"); return 2; }
  int steps = atoi(argv[2]);
  char ctl[64];
  for (int k = 1; k <= steps; ++k) {
    snprintf(ctl, sizeof ctl, "ctl/step%d", k);
    wait_for(ctl);
    make_set(argv[1], k);
  }
  wait_for("ctl/end");
  for (int i = 0; i < nnames; ++i) {
    const char* base = strrchr(names[i], '/') + 1;
    char buf[8192];
    FILE* f = fopen(names[i], "r");
    if (!f) { printf("%s missing\n", base); continue; }
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unsigned h = 2166136261u;
    for (size_t j = 0; j < n; ++j) h = (h ^ (unsigned char)buf[j]) * 16777619u;
    printf("%s %zu %08x\n", base[0] == 'm' ? "(temp)" : base, n, h);  /* temp names are random */
  }
  return 0;
}
