/* Two processes talking through a named FIFO: `fifo_pair DIR writer BYTES PACE_US` creates DIR/fifo (if
 * needed) and streams BYTES of a checked sequence into it in bursts; `fifo_pair DIR reader BYTES PACE_US`
 * reads and checks them, sleeping PACE_US after every 64 KiB read so the FIFO is often full at a
 * checkpoint. Prints checksum lines (stream_util.h). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "stream_util.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: fifo_pair DIR writer|reader BYTES PACE_US\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/fifo", argv[1]);
  if (mkfifo(path, 0600) != 0 && errno != EEXIST) die("mkfifo");
  total = strtoull(argv[3], NULL, 10);
  unsigned pace = (unsigned)atoi(argv[4]);
  if (strcmp(argv[2], "writer") == 0) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) die("open for writing");
    send_stream(fd, 7, pace);
    printf("writer sent %llu bytes\n", (unsigned long long)total);
    return 0;
  }
  int fd = open(path, O_RDONLY);
  if (fd < 0) die("open for reading");
  reader_pace_us = pace;
  check_stream(fd, "reader", 7, 0);
  return 0;
}
