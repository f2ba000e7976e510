/* A connected Unix stream socket held by two processes, in a state the original process rebuilds at
 * resume (docs/channels.md): the parent P and its child R hold the same end (inherited across fork), a
 * third process S holds the other. R reads the first half of S's stream, then hands over to P (a token
 * on a pipe), which reads the second half and the end of file. Whichever of P and R the coordinator elects
 * to rebuild the socket, the other holder reads it too, so a holder left with the old socket reads an
 * early end of file (or waits for bytes that went to the new one).
 *   shared_rebuild half BYTES CBYTES PACE_US [PORT]   (a Unix socketpair, or TCP on 127.0.0.1:PORT) P sends CBYTES and shuts its writing side at once; S reads
 *       them PACE_US apart per 4 KiB (so the connection is half-closed with bytes in flight for a
 *       while), sends BYTES at the same pace and, after the client's end of file, a trailer.
 *   shared_rebuild backlog PATH|PORT BYTES CBYTES WAIT_MS   S listens on PATH (or TCP 127.0.0.1:PORT) and
 *       accepts only after WAIT_MS;
 *       P connects and sends CBYTES meanwhile (the connection waits in S's backlog, held by P and R).
 * Only P prints (S and R report through their exit status): the output does not depend on scheduling. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "net_util.h"

static const char kTrailer[] = "served+eof\n";
static uint64_t cbytes;
static unsigned pace_us;

/* S: reads the client's CBYTES (seed 21), PACE_US after each 4 KiB, then expects the end of file. */
static void read_client(int fd, int want_eof) {
  static uint8_t buf[4096];
  for (uint64_t got = 0; got < cbytes || want_eof;) {
    size_t room = want_eof ? sizeof buf : (size_t)(cbytes - got < sizeof buf ? cbytes - got : sizeof buf);
    int r = read_some(fd, buf, room);
    if (r == 0) {
      if (got == cbytes) return;
      fprintf(stderr, "server: end of file after %llu of %llu bytes\n", (unsigned long long)got,
              (unsigned long long)cbytes);
      _exit(3);
    }
    for (int i = 0; i < r; ++i, ++got)
      if (got >= cbytes || buf[i] != seq_byte(21, got)) {
        fprintf(stderr, "server: client byte %llu wrong or too many\n", (unsigned long long)got);
        _exit(4);
      }
    usleep(pace_us);
  }
}

/* S: sends BYTES (seed 22) in 4 KiB writes, PACE_US apart. */
static void send_paced(int fd) {
  static uint8_t buf[4096];
  for (uint64_t off = 0; off < total;) {
    size_t n = total - off < sizeof buf ? (size_t)(total - off) : sizeof buf;
    for (size_t i = 0; i < n; ++i) buf[i] = seq_byte(22, off + i);
    write_all(fd, buf, n);
    off += n;
    usleep(pace_us);
  }
}

/* Reads S's stream from byte `from` to `to`; exits with `code` on a wrong byte or early end of file. */
static uint64_t read_part(int fd, uint64_t from, uint64_t to, const char* who, int code) {
  static uint8_t buf[4096];
  uint64_t sum = 0;
  for (uint64_t got = from; got < to;) {
    size_t room = to - got < sizeof buf ? (size_t)(to - got) : sizeof buf;
    int r = read_some(fd, buf, room);
    if (r == 0) {
      fprintf(stderr, "%s: end of file at byte %llu of %llu\n", who, (unsigned long long)got,
              (unsigned long long)to);
      exit(code);
    }
    for (int i = 0; i < r; ++i, ++got) {
      if (buf[i] != seq_byte(22, got)) {
        fprintf(stderr, "%s: byte %llu wrong\n", who, (unsigned long long)got);
        exit(code);
      }
      sum = sum * 31 + buf[i];
    }
  }
  return sum;
}

static int wait_status(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) die("waitpid");
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* P and R share `fd`. R reads the first half, hands over, and keeps holding the socket until P is done. */
static void both_read(int fd, pid_t server) {
  int token[2], done[2];
  if (pipe(token) != 0 || pipe(done) != 0) die("pipe");
  fflush(stdout);
  pid_t r = fork();
  if (r < 0) die("fork");
  if (r == 0) {
    if (!freopen("/dev/null", "w", stdout)) die("freopen");
    read_part(fd, 0, total / 2, "second holder", 5);
    char t = 't';
    if (write(token[1], &t, 1) != 1) _exit(6);
    if (read(done[0], &t, 1) != 1) _exit(7);  /* P is done: only now let go of the socket */
    _exit(0);
  }
  char t;
  if (read(token[0], &t, 1) != 1) die("token");
  uint64_t sum = read_part(fd, total / 2, total, "first holder", 1);
  printf("first holder: bytes %llu..%llu checksum %llu\n", (unsigned long long)(total / 2),
         (unsigned long long)total, (unsigned long long)sum);
  char got[sizeof kTrailer];
  read_trailer(fd, got, sizeof kTrailer - 1, "first holder");
  printf("first holder: trailer %sfirst holder: end of file\n", got);
  if (write(done[1], &t, 1) != 1) die("done");
  printf("second holder exit %d\nserver exit %d\n", wait_status(r), wait_status(server));
}

static void serve(int fd, int want_eof) {
  read_client(fd, want_eof);
  send_paced(fd);
  write_all(fd, (const uint8_t*)kTrailer, sizeof kTrailer - 1);
  close(fd);
}

int main(int argc, char** argv) {
  if ((argc == 5 || argc == 6) && strcmp(argv[1], "half") == 0) {
    total = strtoull(argv[2], NULL, 10);
    cbytes = strtoull(argv[3], NULL, 10);
    pace_us = (unsigned)atoi(argv[4]);
    int sv[2], l = -1;
    if (argc == 6) {  /* TCP on 127.0.0.1:PORT: S connects, P accepts */
      l = listen_loopback(atoi(argv[5]), 1);
    } else if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
      die("socketpair");
    }
    fflush(stdout);
    pid_t s = fork();
    if (s < 0) die("fork");
    if (s == 0) {
      if (l >= 0) {
        close(l);
        sv[1] = connect_loopback(atoi(argv[5]));
      } else {
        close(sv[0]);
      }
      if (!freopen("/dev/null", "w", stdout)) die("freopen");
      /* The client's bytes first (slowly: they stay in flight), then the stream: sending it at once
       * would let it pile up before the first checkpoint. The two could overlap; sequential is enough. */
      pace_us /= 2;
      read_client(sv[1], 1);
      pace_us *= 2;
      send_paced(sv[1]);
      write_all(sv[1], (const uint8_t*)kTrailer, sizeof kTrailer - 1);
      _exit(0);
    }
    if (l >= 0) {
      sv[0] = accept(l, NULL, NULL);
      if (sv[0] < 0) die("accept");
      close(l);
    } else {
      close(sv[1]);
    }
    int big = 1 << 21;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    uint8_t* p = malloc(cbytes);
    for (uint64_t i = 0; i < cbytes; ++i) p[i] = seq_byte(21, i);
    write_all(sv[0], p, cbytes);
    free(p);
    if (shutdown(sv[0], SHUT_WR) != 0) die("shutdown");
    printf("client: %llu bytes sent, writing side shut\n", (unsigned long long)cbytes);
    both_read(sv[0], s);
    return 0;
  }
  if (argc == 6 && strcmp(argv[1], "backlog") == 0) {
    const char* path = argv[2];
    total = strtoull(argv[3], NULL, 10);
    cbytes = strtoull(argv[4], NULL, 10);
    int wait_ms = atoi(argv[5]);
    pace_us = 10000;  /* S streams its answer for about a second: the run outlasts the checkpoints */
    /* PATH all digits: TCP on 127.0.0.1:PATH instead of a Unix socket. */
    const int port = path[strspn(path, "0123456789")] == 0 ? atoi(path) : 0;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int l;
    if (port) {
      l = listen_loopback(port, 4);
    } else {
      unlink(path);
      l = socket(AF_UNIX, SOCK_STREAM, 0);
      if (l < 0 || bind(l, (struct sockaddr*)&a, sizeof a) != 0 || listen(l, 4) != 0) die("listen");
    }
    fflush(stdout);
    pid_t s = fork();
    if (s < 0) die("fork");
    if (s == 0) {
      if (!freopen("/dev/null", "w", stdout)) die("freopen");
      usleep((unsigned)wait_ms * 1000u);  /* checkpoints come meanwhile: the client waits in the backlog */
      int c = accept(l, NULL, NULL);
      if (c < 0) _exit(8);
      serve(c, 0);
      _exit(0);
    }
    close(l);
    int c = port ? connect_loopback(port) : socket(AF_UNIX, SOCK_STREAM, 0);
    if (c < 0 || (!port && connect(c, (struct sockaddr*)&a, sizeof a) != 0)) die("connect");
    uint8_t* p = malloc(cbytes);
    for (uint64_t i = 0; i < cbytes; ++i) p[i] = seq_byte(21, i);
    write_all(c, p, cbytes);
    free(p);
    printf("client: %llu bytes sent into the backlog\n", (unsigned long long)cbytes);
    both_read(c, s);
    if (!port) unlink(path);
    return 0;
  }
  fprintf(stderr, "usage: shared_rebuild half BYTES CBYTES PACE_US [PORT] | backlog PATH|PORT BYTES CBYTES WAIT_MS\n");
  return 2;
}
