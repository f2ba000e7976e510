/* Every kind of mapping the image treats differently, mutated while the program runs and hashed at the
 * end: shared anonymous memory, a POSIX shm file, a private file mapping with some pages modified, a
 * shared mapping of a deleted file, and a PROT_NONE region holding data. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static uint64_t hash(uint64_t h, const void* p, size_t n) {
  const unsigned char* c = p;
  for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char** argv) {
  long steps = argc > 1 ? atol(argv[1]) : 400;
  const size_t kSh = 4 << 20, kShm = 1 << 20, kFile = 256 << 10, kDel = 128 << 10, kNone = 64 << 10;
  unsigned char* sh = mmap(NULL, kSh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  char shm_name[64];
  snprintf(shm_name, sizeof shm_name, "/revive-eng-test-%d", (int)getpid());
  int sfd = shm_open(shm_name, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (sfd < 0 || ftruncate(sfd, (off_t)kShm) != 0) return 90;
  unsigned char* shm = mmap(NULL, kShm, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
  int ffd = open("input.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
  for (size_t i = 0; i < kFile; i += 4096) {
    unsigned char page[4096];
    memset(page, (int)(i / 4096), sizeof page);
    if (write(ffd, page, sizeof page) != (ssize_t)sizeof page) return 91;
  }
  unsigned char* priv = mmap(NULL, kFile, PROT_READ | PROT_WRITE, MAP_PRIVATE, ffd, 0);
  int dfd = open("deleted.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (ftruncate(dfd, (off_t)kDel) != 0) return 92;
  unsigned char* del = mmap(NULL, kDel, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
  unlink("deleted.bin");
  close(dfd);
  unsigned char* none = mmap(NULL, kNone, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memset(none, 0x5a, kNone);
  mprotect(none, kNone, PROT_NONE);
  if (sh == MAP_FAILED || shm == MAP_FAILED || priv == MAP_FAILED || del == MAP_FAILED || none == MAP_FAILED) return 93;
  for (long s = 0; s < steps; ++s) {
    sh[(size_t)(s * 4099) % kSh] += (unsigned char)s;
    shm[(size_t)(s * 577) % kShm] ^= (unsigned char)(s + 1);
    if (s % 3 == 0) priv[(size_t)(s * 8192 + 7) % kFile] += 1;  /* dirties every other page, some twice */
    del[(size_t)(s * 131) % kDel] += 3;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  mprotect(none, kNone, PROT_READ);
  uint64_t h = 1469598103934665603ull;
  h = hash(h, sh, kSh);
  h = hash(h, shm, kShm);
  h = hash(h, priv, kFile);
  h = hash(h, del, kDel);
  h = hash(h, none, kNone);
  shm_unlink(shm_name);
  printf("steps=%ld h=%016llx\n", steps, (unsigned long long)h);
  return 0;
}
