/* Process trees spread over hosts, one role per copy of `revive launch --hosts ... -n 3`:
 *   tree_hosts SERVER_ADDR PORT BYTES PACE_US OUTDIR     (role = REVIVE_LAUNCH_INDEX, 0..2)
 * 0: a TCP server (listens on the wildcard address, so it can listen again on whichever host it is
 *    restored on); checks and echoes the stream it receives.
 * 1: a tree: the parent streams over a socketpair to its child, which relays to the server over TCP
 *    (another host) and relays the echo back; the parent checks the echo, reaps the child, prints its status.
 * 2: a tree: the parent streams over a pipe to its child, which checks it; the parent prints the child's
 *    exit status.
 * Each process writes its own file OUTDIR/out-<role>[-child] (only checksum lines, so the output is the
 * same however the run was checkpointed, killed and restarted), and OUTDIR/pids-<role> = "parent child"
 * (for the test driver, not compared). A root exits with the number in OUTDIR/exit-<role> if that file
 * exists when it ends (read at the end, so a test can set it after a checkpoint), else 0. Children check getppid() against the parent's pid, so a tree not
 * rebuilt with its pids shows in the output. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stream_util.h"
#include "hosts_util.h"

static unsigned pace_us;

static void* sender(void* arg) {
  send_stream(*(int*)arg, 1, pace_us);
  return NULL;
}

/* Copies exactly `total` bytes from fds[0] to fds[1]. */
static void* relay(void* arg) {
  const int* fds = (const int*)arg;
  uint8_t buf[1 << 16];
  for (uint64_t done = 0; done < total;) {
    size_t want = sizeof buf < total - done ? sizeof buf : (size_t)(total - done);
    int r = read_some(fds[0], buf, want);
    if (r == 0) {
      fprintf(stderr, "relay: closed after %llu bytes\n", (unsigned long long)done);
      exit(1);
    }
    write_all(fds[1], buf, (size_t)r);
    done += (uint64_t)r;
  }
  return NULL;
}

static void out_to(const char* dir, const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (!freopen(path, "w", stdout)) die(path);
}

static void write_pids(const char* dir, int role, pid_t parent, pid_t child) {
  char path[4096];
  snprintf(path, sizeof path, "%s/pids-%d", dir, role);
  FILE* f = fopen(path, "w");
  if (!f) die(path);
  fprintf(f, "%d %d\n", (int)parent, (int)child);
  fclose(f);
}

static int reap(pid_t child) {
  int st = 0;
  if (waitpid(child, &st, 0) != child) die("waitpid");
  printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  return 0;
}

/* The root's exit status: OUTDIR/exit-<role>, read now (the test writes it while we are stopped). */
static int exit_code(const char* dir, int role) {
  char path[4096];
  snprintf(path, sizeof path, "%s/exit-%d", dir, role);
  FILE* f = fopen(path, "r");
  int code = 0;
  if (f) {
    if (fscanf(f, "%d", &code) != 1) code = 99;
    fclose(f);
  }
  return code;
}

int main(int argc, char** argv) {
  const char* idx = getenv("REVIVE_LAUNCH_INDEX");
  if (argc != 6 || !idx) {
    fprintf(stderr, "usage: REVIVE_LAUNCH_INDEX=0..2 tree_hosts SERVER_ADDR PORT BYTES PACE_US OUTDIR\n");
    return 2;
  }
  int role = atoi(idx);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)atoi(argv[2]));
  total = strtoull(argv[3], NULL, 10);
  pace_us = (unsigned)atoi(argv[4]);
  const char* dir = argv[5];
  char name[64];
  snprintf(name, sizeof name, "out-%d", role);
  out_to(dir, name);
  if (role == 0) {
    write_pids(dir, role, getpid(), 0);
    check_stream(accept_one(&a), "server", 1, 1);
    fflush(stdout);
    return exit_code(dir, role);
  }
  int sv[2];
  if (role == 1 ? socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 : pipe(sv) != 0) die("socketpair/pipe");
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) {
    snprintf(name, sizeof name, "out-%d-child", role);
    out_to(dir, name);
    if (role == 2) {
      close(sv[1]);
      check_stream(sv[0], "pipe child", 1, 0);
    } else {
      close(sv[0]);
      if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) die("server address");
      int s = connect_retrying(&a);
      int up[2] = {sv[1], s}, down[2] = {s, sv[1]};  /* parent -> server, echo -> parent */
      pthread_t t;
      pthread_create(&t, NULL, relay, up);
      relay(down);
      pthread_join(t, NULL);
    }
    printf("child sees its parent: %s\n", getppid() == parent ? "yes" : "NO");
    fflush(stdout);
    _exit(role == 1 ? 3 : 4);
  }
  write_pids(dir, role, parent, child);
  if (role == 2) {
    close(sv[0]);
    send_stream(sv[1], 1, pace_us);
    close(sv[1]);
    return reap(child) + exit_code(dir, role);
  }
  close(sv[1]);
  pthread_t t;
  pthread_create(&t, NULL, sender, &sv[0]);
  check_stream(sv[0], "parent", 1, 0);
  pthread_join(t, NULL);
  return reap(child) + exit_code(dir, role);
}
