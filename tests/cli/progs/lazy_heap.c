/* lazy_heap ROUNDS: a 32 MiB heap filled with a pattern (64-byte blocks "LAZYHEAP" + block number + filler),
 * "ready" once filled, then ROUNDS rounds of 50 ms, then every block checked: "heap ok" (exit 0) or "heap
 * BAD: N blocks" (exit 1). tests/cli/lazy_damaged.py restarts it lazily from an intact image and from one
 * with a byte of the heap flipped. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kBytes = 32 << 20, kBlock = 64 };

static void fill_block(unsigned char* b, uint64_t i) {
  memcpy(b, "LAZYHEAP", 8);
  memcpy(b + 8, &i, 8);
  for (int k = 16; k < kBlock; ++k) b[k] = (unsigned char)(i * 31 + (uint64_t)k);
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 40;
  setvbuf(stdout, NULL, _IOLBF, 0);
  unsigned char* heap = malloc(kBytes);
  if (!heap) return 2;
  for (uint64_t i = 0; i < kBytes / kBlock; ++i) fill_block(heap + i * kBlock, i);
  printf("ready\n");
  for (int r = 0; r < rounds; ++r) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  unsigned char want[kBlock];
  uint64_t bad = 0;
  for (uint64_t i = 0; i < kBytes / kBlock; ++i) {
    fill_block(want, i);
    bad += memcmp(want, heap + i * kBlock, kBlock) != 0;
  }
  if (bad) printf("heap BAD: %llu blocks\n", (unsigned long long)bad);
  else printf("heap ok\n");
  return bad ? 1 : 0;
}
