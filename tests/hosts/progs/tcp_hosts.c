/* A TCP pair that can span hosts: `tcp_hosts server PORT BYTES PACE_US` listens on the wildcard address
 * (so it can listen again on whatever host it is restored on), accepts one client and echoes and checks
 * its stream; `tcp_hosts client ADDR PORT BYTES PACE_US` connects to ADDR, streams BYTES and checks the
 * echo. The stream and checksum lines are the channels tests' (tests/channels/progs/stream_util.h), so the
 * output is the same however the pair was checkpointed, killed and restarted, on whichever hosts. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stream_util.h"
#include "hosts_util.h"

static unsigned pace_us;

static void* sender(void* arg) {
  send_stream(*(int*)arg, 0, pace_us);
  return NULL;
}

int main(int argc, char** argv) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  if (argc == 5 && strcmp(argv[1], "server") == 0) {
    a.sin_port = htons((uint16_t)atoi(argv[2]));
    total = strtoull(argv[3], NULL, 10);
    check_stream(accept_one(&a), "server", 0, 1);
    return 0;
  }
  if (argc != 6 || strcmp(argv[1], "client") != 0 || inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) {
    fprintf(stderr, "usage: tcp_hosts server PORT BYTES PACE_US | client ADDR PORT BYTES PACE_US\n");
    return 2;
  }
  a.sin_port = htons((uint16_t)atoi(argv[3]));
  total = strtoull(argv[4], NULL, 10);
  pace_us = (unsigned)atoi(argv[5]);
  int s = connect_retrying(&a);
  pthread_t t;
  pthread_create(&t, NULL, sender, &s);
  check_stream(s, "client", 0, 0);
  pthread_join(t, NULL);
  return 0;
}
