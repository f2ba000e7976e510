/* `outside_peer PORT N`: connects to an echo server that is NOT part of the computation, then N times
 * pings it (writes 8 bytes, reads the echo) and prints the iteration, 50 ms apart. When the peer is gone
 * it prints "peer closed: ..." and exits 0 — what the channels plugin's policy promises after a restart
 * (the connection comes back closed: EOF or EPIPE, never a hang). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)atoi(argv[1]));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(s, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("connect");
    return 1;
  }
  int n = atoi(argv[2]);
  for (int i = 0; i < n; ++i) {
    char out[8], in[8];
    memset(out, 'a' + i % 26, sizeof out);
    ssize_t w = send(s, out, sizeof out, MSG_NOSIGNAL);
    size_t got = 0;
    while (w == (ssize_t)sizeof out && got < sizeof in) {
      ssize_t r = read(s, in + got, sizeof in - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    if (w != (ssize_t)sizeof out || got != sizeof in) {
      printf("peer closed: %s\n", w < 0 ? strerror(errno) : "end of file");
      return 0;
    }
    if (memcmp(in, out, sizeof in) != 0) {
      printf("wrong echo at %d\n", i);
      return 1;
    }
    printf("ping %d\n", i);
    fflush(stdout);
    usleep(50000);
  }
  printf("all pings answered\n");
  return 0;
}
