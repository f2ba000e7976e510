/* Shared by the channels test programs: a deterministic byte sequence per stream, checked reading with
 * checksum lines at every MiB (so a run's output is the same however it was checkpointed and restarted),
 * and I/O that retries on EINTR. Any mismatch or error exits 1 with a message. */
#pragma once
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t total;
static unsigned reader_pace_us; /* sleep after each read in check_stream (0: none) */

/* Byte i of stream `seed`: one 64-bit mix per 8 bytes, cached per thread (sender and checker run
 * at full speed, so the checking must not be what limits the stream). */
static uint8_t seq_byte(uint64_t seed, uint64_t i) {
  static __thread uint64_t word = ~0ull, wseed, x;
  if (i / 8 != word || seed != wseed) {
    word = i / 8;
    wseed = seed;
    x = (word + 1 + seed * 0x100000001B3ull) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
  }
  return (uint8_t)(x >> (8 * (i % 8)));
}

static void die(const char* what) {
  fprintf(stderr, "%s: %s\n", what, strerror(errno));
  exit(1);
}

static int read_some(int fd, uint8_t* buf, size_t n) {
  for (;;) {
    ssize_t r = read(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) die("read");
    return (int)r;
  }
}

static void write_all(int fd, const uint8_t* p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("write");
    p += w;
    n -= (size_t)w;
  }
}

/* Reads exactly `total` bytes of stream `seed`, checks each, prints checksums; echo: writes them back. */
__attribute__((unused)) static void check_stream(int fd, const char* who, uint64_t seed, int echo) {
  static uint8_t buf[1 << 16];
  uint64_t got = 0, sum = 0, next_report = 1 << 20;
  while (got < total) {
    size_t want = sizeof buf < total - got ? sizeof buf : (size_t)(total - got);
    int r = read_some(fd, buf, want);
    if (r == 0) {
      fprintf(stderr, "%s: connection closed after %llu of %llu bytes\n", who,
              (unsigned long long)got, (unsigned long long)total);
      exit(1);
    }
    for (int i = 0; i < r; ++i) {
      if (buf[i] != seq_byte(seed, got + (uint64_t)i)) {
        fprintf(stderr, "%s: byte %llu is %u, want %u\n", who, (unsigned long long)(got + (uint64_t)i),
                buf[i], seq_byte(seed, got + (uint64_t)i));
        exit(1);
      }
      sum = sum * 31 + buf[i];
    }
    if (echo) write_all(fd, buf, (size_t)r);
    if (reader_pace_us) usleep(reader_pace_us);
    got += (uint64_t)r;
    while (got >= next_report) {
      printf("%s %llu MiB ok\n", who, (unsigned long long)(next_report >> 20));
      fflush(stdout);
      next_report += 1 << 20;
    }
  }
  printf("%s done %llu bytes checksum %llu\n", who, (unsigned long long)got, (unsigned long long)sum);
  fflush(stdout);
}

/* Writes `total` bytes of stream `seed` in chunks of varying size, sleeping pace_us after each. */
__attribute__((unused)) static void send_stream(int fd, uint64_t seed, unsigned pace_us) {
  static uint8_t buf[1 << 16];
  uint64_t sent = 0;
  unsigned k = 0;
  while (sent < total) {
    size_t n = 1000 + (k++ * 7919) % (sizeof buf - 1000);
    if (n > total - sent) n = (size_t)(total - sent);
    for (size_t i = 0; i < n; ++i) buf[i] = seq_byte(seed, sent + i);
    write_all(fd, buf, n);
    sent += n;
    if (pace_us) usleep(pace_us);
  }
}
