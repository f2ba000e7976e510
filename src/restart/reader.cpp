// Reading the image's data pieces with several requests in flight, while the caller checksums the ones
// that arrived, in order.
//
// Why threads: a piece is read with one O_DIRECT pread straight into the restored pages. Before the
// kernel submits the I/O it faults in every destination page (zeroing it; on this VM each first touch is
// also a host fault), so with one reader the disk idles while the CPU faults and the CPU idles while the
// disk reads. Three readers on a 2-core VM read 1 GiB cold in 0.74-0.97 s where one took 1.30-1.48 s
// (docs/performance.md "Restart with several readers"). io_uring or Linux AIO would keep requests in
// flight too, but the page faults would still run on one core.
//
// The threads exist only between reader_start() and reader_finish(), after every region is mapped (so
// nothing the kernel places for them can take an address the image needs), and run on one stack mapping
// of ours that reader_finish() unmaps: glibc never caches a stack it did not allocate, so nothing of
// theirs is left in the layout hand_over() reports.
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "restart/restart.h"

namespace revive::restart {
namespace {

constexpr int kMaxReaders = 8;
constexpr size_t kStack = size_t{256} << 10;

struct Shared {
  const Piece* pieces;
  uint32_t count;
  int fd, direct_fd;
  // state[i]: 0 pending, 1 read, else 2 + errno.
  int* state;
  uint32_t next;      // the next piece nobody claimed (atomic)
  bool abort;         // the caller gave up (atomic)
  bool direct_off;    // O_DIRECT was refused once: everyone reads buffered (atomic)
  pthread_mutex_t mu;
  pthread_cond_t cv;
};

Shared g;
pthread_t g_thr[kMaxReaders];
int g_nthr;
void* g_stacks;
size_t g_stacks_len;

int read_one(const Piece& p) {
  for (uint64_t done = 0; done < p.len;) {
    const bool direct = g.direct_fd >= 0 && !__atomic_load_n(&g.direct_off, __ATOMIC_RELAXED) &&
                        ((p.len - done) & 4095) == 0 && ((p.off + done) & 4095) == 0 &&
                        (reinterpret_cast<uintptr_t>(p.dst + done) & 4095) == 0;
    ssize_t got = pread(direct ? g.direct_fd : g.fd, p.dst + done, p.len - done, off_t(p.off + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && direct && errno == EINVAL) {  // this filesystem's O_DIRECT wants something else
      __atomic_store_n(&g.direct_off, true, __ATOMIC_RELAXED);
      continue;
    }
    if (got < 0) return errno ? errno : EIO;
    if (got == 0) return EIO;  // the image is shorter than its records say
    done += uint64_t(got);
  }
  return 0;
}

void publish(uint32_t i, int value) {
  pthread_mutex_lock(&g.mu);
  __atomic_store_n(&g.state[i], value, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
}

void* reader(void*) {
  for (;;) {
    if (__atomic_load_n(&g.abort, __ATOMIC_ACQUIRE)) return nullptr;
    const uint32_t i = __atomic_fetch_add(&g.next, 1, __ATOMIC_RELAXED);
    if (i >= g.count) return nullptr;
    const int e = read_one(g.pieces[i]);
    publish(i, e ? 2 + e : 1);
  }
}

}  // namespace

int reader_count() {
  // REVIVE_RESTART_READERS=N (1-8): how many reads are in flight; 1 reads in this thread, as before.
  const char* v = getenv("REVIVE_RESTART_READERS");
  const int n = v && *v ? atoi(v) : 3;
  return n < 1 ? 1 : n > kMaxReaders ? kMaxReaders : n;
}

void reader_start(int fd, int direct_fd, const Piece* pieces, int* state, uint32_t count, int readers) {
  g.pieces = pieces;
  g.count = count;
  g.fd = fd;
  g.direct_fd = direct_fd;
  g.state = state;
  g.next = 0;
  g.abort = false;
  g.direct_off = false;
  pthread_mutex_init(&g.mu, nullptr);
  pthread_cond_init(&g.cv, nullptr);
  g_nthr = 0;
  if (readers <= 1 || count < 2) return;  // reader_wait() reads each piece itself
  g_stacks_len = kStack * size_t(readers);
  g_stacks = mmap(nullptr, g_stacks_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_stacks == MAP_FAILED) {
    g_stacks = nullptr;
    return;
  }
  for (int t = 0; t < readers; ++t) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstack(&a, static_cast<char*>(g_stacks) + kStack * size_t(t), kStack);
    if (pthread_create(&g_thr[g_nthr], &a, reader, nullptr) == 0) ++g_nthr;
    pthread_attr_destroy(&a);
  }
}

int reader_wait(uint32_t i) {
  if (g_nthr == 0) {  // no threads (one reader asked for, or none could be made): read it now
    const int e = read_one(g.pieces[i]);
    return e;
  }
  int s = __atomic_load_n(&g.state[i], __ATOMIC_ACQUIRE);
  if (s == 0) {
    pthread_mutex_lock(&g.mu);
    while ((s = __atomic_load_n(&g.state[i], __ATOMIC_ACQUIRE)) == 0) pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
  }
  return s == 1 ? 0 : s - 2;
}

void reader_finish() {
  __atomic_store_n(&g.abort, true, __ATOMIC_RELEASE);
  for (int t = 0; t < g_nthr; ++t) pthread_join(g_thr[t], nullptr);
  g_nthr = 0;
  if (g_stacks) munmap(g_stacks, g_stacks_len);
  g_stacks = nullptr;
}

}  // namespace revive::restart
