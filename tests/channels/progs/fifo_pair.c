/* Two processes talking through a named FIFO (DIR "-": through stdout/stdin, i.e. a shell pipe): `fifo_pair DIR writer BYTES PACE_US` creates DIR/fifo (if
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
  total = strtoull(argv[3], NULL, 10);
  unsigned pace = (unsigned)atoi(argv[4]);
  if (strcmp(argv[1], "-") == 0) { /* anonymous pipe: `fifo_pair - writer ... | fifo_pair - reader ...` */
    if (strcmp(argv[2], "writer") == 0) {
      send_stream(1, 7, pace);
      return 0;
    }
    reader_pace_us = pace;
    check_stream(0, "reader", 7, 0);
    return 0;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/fifo", argv[1]);
  if (mkfifo(path, 0600) != 0 && errno != EEXIST) die("mkfifo");
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
