// ib2tcp (docs/verbs.md "Restart over TCP"): a verbs device made of TCP sockets, inside the process,
// which a restarted program uses instead of the InfiniBand device it was checkpointed on (REVIVE_IB2TCP=1
// in the environment of `revive restart`). It provides the `Real` table the plugin calls (verbs.h), so
// the plugin's restart — making every object again, publishing and learning ids, posting the receives
// and the sends that were in flight — runs unchanged on top of it, as on another HCA.
//
// The objects take the ids the program already holds (the plugin names them before each call: next_*),
// so nothing needs translating: a QP keeps its qp_num, a port its lid, a region its keys. That is what
// lets several processes that shared one HCA's lid keep sharing it: a (lid, qp_num) pair names one QP of
// one process, and the route table maps it to that process.
//
// Transport: each process listens on one TCP port and connects once to every process it sends to; a
// connection carries requests one way and their answers come back on the peer's own connection. Each QP's
// requests are served in order (RC ordering); a send that finds no receive posted waits for one on the
// responder, like an endless RNR retry, and holds back the QP's later requests. One progress thread per
// process serves what comes in (RDMA writes and reads, atomics, sends) and completes what it sent; the
// program's own threads post and poll without system calls other than the socket writes.
//
// Not modelled: PSNs and retransmission (TCP is reliable), SRQ limit events, memory windows, UD
// multicast, solicited-only notification (every completion notifies an armed CQ), and a checkpoint of a
// process running over it (refused: save says so). QPs made after the restart talk only to QPs whose
// owner the restart learned (the peers of the checkpointed QPs).
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/common/msg.h"
#include "plugins/verbs/verbs.h"

namespace revive::verbs::tcp {

bool active;
Next next;

namespace {

constexpr uint32_t kMagic = 0x72767463;  // "rvtc"
constexpr uint32_t kMaxSge = 32;
constexpr int kMaxPeers = 1024;

enum Type : uint32_t {
  kSend = 1, kWrite, kRead, kCmpSwp, kFetchAdd, kUdSend,  // requests
  kAck = 16, kNak, kReadResp, kAtomicResp,               // answers
  kGone,  // no QP ready for it there: what IB drops silently, the requester failing after its retries
};
enum : uint32_t { kImm = 1, kGlobal = 2, kSolicited = 4 };

struct Hdr {
  uint32_t type, len;  // payload bytes that follow
  uint32_t dst_qpn, src_qpn;
  uint64_t seq;        // the requester's number for the request (answers name it)
  uint64_t addr, a1, a2;  // remote address; READ: a1 length; atomics: compare/add, swap; answers: a1 value
  uint32_t rkey, imm, flags, status;
  uint16_t slid, pad[3];
  ibv_gid sgid, dgid;
};

struct Hello {
  uint32_t magic, ip;
  uint16_t port, pad[3];
  uint64_t token;
};

int64_t now_ms() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void* zalloc(size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// ---- objects ----

struct TCtx {
  ibv_context c;
  uint16_t lid;
  ibv_gid gid[kPorts + 1][kGids];
  int async_w;
};

struct TMr {
  ibv_mr m;
  uint64_t iova;
  int access;
  bool dead;
  TMr* next;
};

struct TChan {
  ibv_comp_channel ch;
  int wfd;
};

struct TCq {
  ibv_cq cq;
  pthread_mutex_t mu;
  ibv_wc* ring;
  uint32_t cap, head, n;
  bool armed;
};

struct RWqe {
  uint64_t wr_id;
  uint32_t nsge, pad;
  ibv_sge sge[kMaxSge];
};
struct RQueue {
  RWqe* e;
  uint32_t cap, head, n;
};

struct TSrq {
  ibv_srq s;
  pthread_mutex_t mu;
  RQueue rq;
  ibv_srq_attr attr;
};

struct SWqe {
  uint64_t wr_id, seq;
  uint32_t type, len, nsge;
  bool signaled;
  ibv_sge sge[kMaxSge];  // READ and atomics: where the answer goes
};

struct Pend {  // a request waiting for a receive
  Pend* next;
  Hdr h;
  // followed by h.len bytes
};

struct TQp {
  ibv_qp q;
  pthread_mutex_t smu, rmu;  // requester side, responder side
  TCq *scq, *rcq;
  TSrq* srq;
  ibv_qp_cap cap;
  bool sig_all, dead;
  int access;
  uint32_t qkey, dest_qpn, sq_psn, rq_psn;
  uint8_t timeout, retry_cnt;  // the transport timeout: 4.096 us * 2^timeout, retry_cnt + 1 tries
  int64_t gone_at_ms;          // a kGone came for the oldest request: it fails then (0: none)
  uint16_t dlid, port;
  int peer;  // RC/UC: index in g.peers
  RQueue rq;
  SWqe* sq;
  uint32_t sq_cap, sq_head, sq_n;
  uint64_t next_seq;
  Pend *pend, *pend_tail;
  TQp* next;
};

struct TAh {
  ibv_ah ah;
  ibv_ah_attr attr;
};

struct Peer {
  uint64_t token;
  uint32_t ip;
  uint16_t port;
  int fd;  // ours to it (requests and answers we send), -1 until used
  pthread_mutex_t mu;
  uint8_t* out;  // bytes not written yet (the socket is non-blocking)
  size_t out_off, out_len, out_cap;
};

struct In {
  int fd;
  uint8_t* buf;
  size_t have, cap;
};

// u64 -> u64 map (open addressing, mmap'd, no deletion: values are cleared instead)
struct Map {
  struct E {
    uint64_t k, v;
  };
  E* e;
  uint32_t cap;
  pthread_mutex_t mu;
};

bool map_put(Map* m, uint64_t k, uint64_t v) {
  pthread_mutex_lock(&m->mu);
  if (!m->e) {
    m->cap = 1u << 16;
    m->e = static_cast<Map::E*>(zalloc(size_t(m->cap) * sizeof(Map::E)));
  }
  bool ok = false;
  if (m->e)
    for (uint32_t i = uint32_t((k * 0x9e3779b97f4a7c15ull) >> 48) & (m->cap - 1), n = 0; n < m->cap; ++n, i = (i + 1) & (m->cap - 1))
      if (m->e[i].k == k || m->e[i].k == 0) {
        m->e[i].k = k;
        __atomic_store_n(&m->e[i].v, v, __ATOMIC_RELEASE);
        ok = true;
        break;
      }
  pthread_mutex_unlock(&m->mu);
  return ok;
}

uint64_t map_get(Map* m, uint64_t k) {  // 0: none
  if (!m->e || !k) return 0;
  for (uint32_t i = uint32_t((k * 0x9e3779b97f4a7c15ull) >> 48) & (m->cap - 1), n = 0; n < m->cap; ++n, i = (i + 1) & (m->cap - 1)) {
    uint64_t kk = __atomic_load_n(&m->e[i].k, __ATOMIC_ACQUIRE);
    if (kk == 0) return 0;
    if (kk == k) return __atomic_load_n(&m->e[i].v, __ATOMIC_ACQUIRE);
  }
  return 0;
}

struct G {
  pthread_mutex_t mu;  // lists, peers, ids
  ibv_device dev;
  ibv_device* devlist[2];
  int listen_fd, wake_fd;
  uint32_t ip;
  uint16_t port;
  uint16_t lid0;
  uint32_t qpn_next, key_next;
  Peer* peers;  // [0] is this process
  int npeers;
  TMr* mrs;
  TQp* qps;
  Map qp_by_num;   // qpn -> TQp*
  Map route;       // (lid << 32 | qpn) + 1 -> peer index + 1
  bool thread_up;
  pthread_t thread;
};
G g = {PTHREAD_MUTEX_INITIALIZER, {}, {}, -1, -1, 0, 0, 0, 0, 0, nullptr, 0, nullptr, nullptr, {}, {}, false, {}};

uint64_t route_key(uint16_t lid, uint32_t qpn) { return ((uint64_t(lid) << 32) | qpn) + 1; }

void wake() {
  uint64_t one = 1;
  if (g.wake_fd >= 0) (void)!write(g.wake_fd, &one, sizeof one);
}

// ---- the listener and the peers ----

bool listen_once() {
  if (g.listen_fd >= 0) return true;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t al = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &al) != 0) {
    close(fd);
    return false;
  }
  g.port = ntohs(a.sin_port);
  g.ip = htonl(INADDR_LOOPBACK);
  // The address peers reach us at: the one the coordinator sees (inject/plugin.h coord_socket).
  sockaddr_in me = {};
  al = sizeof me;
  int cs = inject::coord_socket();
  if (cs >= 0 && getsockname(cs, reinterpret_cast<sockaddr*>(&me), &al) == 0 && me.sin_family == AF_INET)
    g.ip = me.sin_addr.s_addr;
  g.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  g.peers = static_cast<Peer*>(zalloc(sizeof(Peer) * kMaxPeers));
  if (!g.peers || g.wake_fd < 0) {
    close(fd);
    return false;
  }
  g.listen_fd = fd;
  g.npeers = 1;
  g.peers[0].token = st.token;
  g.peers[0].ip = g.ip;
  g.peers[0].port = g.port;
  g.peers[0].fd = -1;
  pthread_mutex_init(&g.peers[0].mu, nullptr);
  return true;
}

int peer_index(uint64_t token, uint32_t ip, uint16_t port) {  // adds it when new (ip 0: address unknown)
  pthread_mutex_lock(&g.mu);
  int i = 0;
  for (; i < g.npeers; ++i)
    if (g.peers[i].token == token) break;
  if (i == g.npeers) {
    if (g.npeers == kMaxPeers) {
      pthread_mutex_unlock(&g.mu);
      return -1;
    }
    Peer& p = g.peers[g.npeers];
    p.token = token;
    p.fd = -1;
    pthread_mutex_init(&p.mu, nullptr);
    ++g.npeers;
  }
  if (ip && !g.peers[i].ip) {
    g.peers[i].ip = ip;
    g.peers[i].port = port;
  }
  pthread_mutex_unlock(&g.mu);
  return i;
}

// Connects to peer p (its lock held). Blocking, bounded: the peer's listener exists since its restart.
bool peer_connect(Peer& p) {
  if (p.fd >= 0) return true;
  if (!p.ip) return false;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = p.ip;
  a.sin_port = htons(p.port);
  timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int r;
  while ((r = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a)) != 0 && errno == EINTR) {
  }
  Hello h = {kMagic, g.ip, g.port, {0, 0, 0}, st.token};
  if (r != 0 || write(fd, &h, sizeof h) != ssize_t(sizeof h)) {
    close(fd);
    return false;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  p.fd = fd;
  return true;
}

bool out_reserve(Peer& p, size_t more) {
  if (p.out_off && p.out_off == p.out_len) p.out_off = p.out_len = 0;
  if (p.out_len + more <= p.out_cap) return true;
  if (p.out_off) {  // compact first
    memmove(p.out, p.out + p.out_off, p.out_len - p.out_off);
    p.out_len -= p.out_off;
    p.out_off = 0;
    if (p.out_len + more <= p.out_cap) return true;
  }
  size_t cap = p.out_cap ? p.out_cap : 1 << 16;
  while (cap < p.out_len + more) cap *= 2;
  void* m = p.out ? mremap(p.out, p.out_cap, cap, MREMAP_MAYMOVE) : zalloc(cap);
  if (m == MAP_FAILED || !m) return false;
  p.out = static_cast<uint8_t*>(m);
  p.out_cap = cap;
  return true;
}

// Writes what the socket takes now (lock held). false: the connection is broken.
bool out_flush(Peer& p) {
  while (p.out_off < p.out_len) {
    ssize_t w = send(p.fd, p.out + p.out_off, p.out_len - p.out_off, MSG_NOSIGNAL);
    if (w > 0) {
      p.out_off += size_t(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    return w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  p.out_off = p.out_len = 0;
  return true;
}

// Queues one message to peer `pi` and writes what it can; the progress thread writes the rest.
// Payload: `n` pieces. false: no connection to it.
bool send_msg(int pi, const Hdr& h, const iovec* pieces, int n) {
  if (pi < 0 || pi >= g.npeers) return false;
  Peer& p = g.peers[pi];
  pthread_mutex_lock(&p.mu);
  bool ok = peer_connect(p) && out_reserve(p, sizeof h + h.len);
  if (ok) {
    memcpy(p.out + p.out_len, &h, sizeof h);
    p.out_len += sizeof h;
    for (int i = 0; i < n; ++i) {
      memcpy(p.out + p.out_len, pieces[i].iov_base, pieces[i].iov_len);
      p.out_len += pieces[i].iov_len;
    }
    ok = out_flush(p);
  }
  const bool rest = p.out_len > p.out_off;
  pthread_mutex_unlock(&p.mu);
  if (rest) wake();
  return ok;
}

// ---- completions ----

void push_cqe(TCq* c, const ibv_wc& wc) {
  pthread_mutex_lock(&c->mu);
  if (c->n < c->cap) {
    c->ring[(c->head + c->n) % c->cap] = wc;
    __atomic_store_n(&c->n, c->n + 1, __ATOMIC_RELEASE);  // t_poll_cq peeks at n without the lock
  }
  const bool notify = c->armed;
  c->armed = false;
  pthread_mutex_unlock(&c->mu);
  if (notify && c->cq.channel) {
    TChan* ch = reinterpret_cast<TChan*>(c->cq.channel);
    ibv_cq* p = &c->cq;
    (void)!write(ch->wfd, &p, sizeof p);
  }
}

ibv_wc_opcode wc_opcode(uint32_t type) {
  switch (type) {
    case kWrite: return IBV_WC_RDMA_WRITE;
    case kRead: return IBV_WC_RDMA_READ;
    case kCmpSwp: return IBV_WC_COMP_SWAP;
    case kFetchAdd: return IBV_WC_FETCH_ADD;
    default: return IBV_WC_SEND;
  }
}

void send_cqe(TQp* q, const SWqe& w, ibv_wc_status status) {
  ibv_wc wc = {};
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.opcode = wc_opcode(w.type);
  wc.qp_num = q->q.qp_num;
  if (w.type == kRead) wc.byte_len = w.len;
  if (w.type == kCmpSwp || w.type == kFetchAdd) wc.byte_len = 8;
  push_cqe(q->scq, wc);
}

// Flushes both queues of a QP that went to the error state (smu and rmu not held).
void flush_qp(TQp* q) {
  pthread_mutex_lock(&q->smu);
  while (q->sq_n) {
    SWqe& w = q->sq[q->sq_head];
    send_cqe(q, w, IBV_WC_WR_FLUSH_ERR);
    q->sq_head = (q->sq_head + 1) % q->sq_cap;
    --q->sq_n;
  }
  pthread_mutex_unlock(&q->smu);
  pthread_mutex_lock(&q->rmu);
  while (!q->srq && q->rq.n) {
    ibv_wc wc = {};
    wc.wr_id = q->rq.e[q->rq.head].wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = q->q.qp_num;
    push_cqe(q->rcq, wc);
    q->rq.head = (q->rq.head + 1) % q->rq.cap;
    --q->rq.n;
  }
  while (q->pend) {
    Pend* p = q->pend;
    __atomic_store_n(&q->pend, p->next, __ATOMIC_RELEASE);  // t_post_srq_recv peeks
    free(p);
  }
  q->pend_tail = nullptr;
  pthread_mutex_unlock(&q->rmu);
}

// The oldest request w (taken off the queue) failed: the QP is in error before the program sees why,
// then the rest is flushed (smu not held).
void fail_oldest(TQp* q, const SWqe& w, ibv_wc_status status) {
  const bool was = __atomic_exchange_n(&q->q.state, IBV_QPS_ERR, __ATOMIC_ACQ_REL) == IBV_QPS_ERR;
  send_cqe(q, w, status);
  if (!was) flush_qp(q);
}

void to_error(TQp* q) {
  if (__atomic_exchange_n(&q->q.state, IBV_QPS_ERR, __ATOMIC_ACQ_REL) == IBV_QPS_ERR) return;
  flush_qp(q);
}

// ---- memory ----

TMr* mr_find(uint32_t key, bool remote) {
  for (TMr* m = __atomic_load_n(&g.mrs, __ATOMIC_ACQUIRE); m; m = m->next)
    if (!m->dead && (remote ? m->m.rkey : m->m.lkey) == key) return m;
  return nullptr;
}

// The local address of [addr, addr+len) in the region named by rkey, with `access`; nullptr if not allowed.
uint8_t* remote_ptr(uint32_t rkey, uint64_t addr, uint64_t len, int access) {
  TMr* m = mr_find(rkey, true);
  if (!m || !(m->access & access) || addr < m->iova || addr - m->iova > m->m.length || len > m->m.length - (addr - m->iova))
    return nullptr;
  return static_cast<uint8_t*>(m->m.addr) + (addr - m->iova);
}

bool sge_ok(const ibv_sge& s) {
  if (!s.length) return true;
  TMr* m = mr_find(s.lkey, false);
  const uintptr_t b = uintptr_t(m ? m->m.addr : nullptr);
  return m && s.addr >= b && s.addr - b <= m->m.length && s.length <= m->m.length - (s.addr - b);
}

// Copies `len` bytes into the scatter list, `skip` bytes in. false: they do not fit.
bool scatter(const ibv_sge* sg, uint32_t n, uint32_t skip, const uint8_t* src, uint32_t len) {
  uint64_t room = 0;
  for (uint32_t i = 0; i < n; ++i) room += sg[i].length;
  if (uint64_t(skip) + len > room) return false;
  for (uint32_t i = 0; i < n && len; ++i) {
    uint32_t l = sg[i].length;
    if (skip >= l) {
      skip -= l;
      continue;
    }
    uint32_t c = l - skip < len ? l - skip : len;
    memcpy(reinterpret_cast<uint8_t*>(uintptr_t(sg[i].addr)) + skip, src, c);
    src += c;
    len -= c;
    skip = 0;
  }
  return true;
}

// ---- the responder ----

enum { kDone, kNeedRecv };

bool take_recv(TQp* q, RWqe* out) {
  if (q->srq) {
    TSrq* s = q->srq;
    pthread_mutex_lock(&s->mu);
    bool ok = s->rq.n > 0;
    if (ok) {
      *out = s->rq.e[s->rq.head];
      s->rq.head = (s->rq.head + 1) % s->rq.cap;
      --s->rq.n;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
  }
  if (!q->rq.n) return false;
  *out = q->rq.e[q->rq.head];
  q->rq.head = (q->rq.head + 1) % q->rq.cap;
  --q->rq.n;
  return true;
}

bool have_recv(TQp* q) {
  if (!q->srq) return q->rq.n > 0;
  return __atomic_load_n(&q->srq->rq.n, __ATOMIC_ACQUIRE) > 0;
}

void answer(TQp* q, int pi, const Hdr& req, uint32_t type, ibv_wc_status status, const void* data, uint32_t len,
            uint64_t value) {
  Hdr h = {};
  h.type = type;
  h.len = len;
  h.dst_qpn = req.src_qpn;
  h.src_qpn = q->q.qp_num;
  h.seq = req.seq;
  h.a1 = value;
  h.status = status;
  iovec v = {const_cast<void*>(data), len};
  send_msg(pi, h, &v, len ? 1 : 0);
}

// The receive completion of request h on QP q, taking receive r.
ibv_wc recv_wc(const TQp* q, const RWqe& r, const Hdr& h, ibv_wc_opcode op, uint32_t byte_len) {
  ibv_wc wc = {};
  wc.wr_id = r.wr_id;
  wc.opcode = op;
  wc.qp_num = q->q.qp_num;
  wc.src_qp = h.src_qpn;
  wc.byte_len = byte_len;
  wc.wc_flags = (h.flags & kImm) ? IBV_WC_WITH_IMM : 0;
  wc.imm_data = h.imm;
  return wc;
}

// One request for QP q (rmu held). pi: the peer it came from.
int respond(TQp* q, int pi, const Hdr& h, const uint8_t* data) {
  const bool ud = q->q.qp_type == IBV_QPT_UD;
  const ibv_qp_state state = __atomic_load_n(&q->q.state, __ATOMIC_ACQUIRE);
  if (state != IBV_QPS_RTR && state != IBV_QPS_RTS && state != IBV_QPS_SQD) {
    if (!ud) answer(q, pi, h, kGone, IBV_WC_RETRY_EXC_ERR, nullptr, 0, 0);
    return kDone;
  }
  if (ud) {
    if (h.type != kUdSend || (h.a1 != q->qkey)) return kDone;  // UD: dropped, as on the wire
    RWqe r;
    if (!take_recv(q, &r)) return kDone;
    uint8_t grh[40] = {};
    if (h.flags & kGlobal) {
      grh[0] = 0x60;
      grh[6] = 0x1b;  // next header: IBA transport
      memcpy(grh + 8, &h.sgid, 16);
      memcpy(grh + 24, &h.dgid, 16);
    }
    ibv_wc wc = recv_wc(q, r, h, IBV_WC_RECV, h.len + 40);
    wc.slid = h.slid;
    if (h.flags & kGlobal) wc.wc_flags |= IBV_WC_GRH;
    wc.status = scatter(r.sge, r.nsge, 0, grh, 40) && scatter(r.sge, r.nsge, 40, data, h.len) ? IBV_WC_SUCCESS : IBV_WC_LOC_LEN_ERR;
    push_cqe(q->rcq, wc);
    return kDone;
  }
  switch (h.type) {
    case kSend: {
      RWqe r;
      if (!take_recv(q, &r)) return kNeedRecv;
      ibv_wc wc = recv_wc(q, r, h, IBV_WC_RECV, h.len);
      const bool fits = scatter(r.sge, r.nsge, 0, data, h.len);
      wc.status = fits ? IBV_WC_SUCCESS : IBV_WC_LOC_LEN_ERR;
      // The answer goes into the socket before the program can see the receive: a program that exits
      // on it must not take the sender's acknowledgement with it (the kernel still sends what it holds).
      answer(q, pi, h, fits ? kAck : kNak, fits ? IBV_WC_SUCCESS : IBV_WC_REM_INV_REQ_ERR, nullptr, 0, 0);
      push_cqe(q->rcq, wc);
      return kDone;
    }
    case kWrite: {
      if ((h.flags & kImm) && !have_recv(q)) return kNeedRecv;
      uint8_t* dst = h.len ? remote_ptr(h.rkey, h.addr, h.len, IBV_ACCESS_REMOTE_WRITE) : nullptr;
      if (h.len && (!dst || !(q->access & IBV_ACCESS_REMOTE_WRITE))) {
        answer(q, pi, h, kNak, IBV_WC_REM_ACCESS_ERR, nullptr, 0, 0);
        return kDone;
      }
      if (h.len) memcpy(dst, data, h.len);
      answer(q, pi, h, kAck, IBV_WC_SUCCESS, nullptr, 0, 0);  // before the receive is seen (kSend)
      if (h.flags & kImm) {
        RWqe r;
        take_recv(q, &r);
        push_cqe(q->rcq, recv_wc(q, r, h, IBV_WC_RECV_RDMA_WITH_IMM, h.len));
      }
      return kDone;
    }
    case kRead: {
      uint8_t* src = h.a1 ? remote_ptr(h.rkey, h.addr, h.a1, IBV_ACCESS_REMOTE_READ) : nullptr;
      if (h.a1 && (!src || !(q->access & IBV_ACCESS_REMOTE_READ))) {
        answer(q, pi, h, kNak, IBV_WC_REM_ACCESS_ERR, nullptr, 0, 0);
        return kDone;
      }
      answer(q, pi, h, kReadResp, IBV_WC_SUCCESS, src, uint32_t(h.a1), 0);
      return kDone;
    }
    case kCmpSwp:
    case kFetchAdd: {
      auto* p = reinterpret_cast<uint64_t*>(remote_ptr(h.rkey, h.addr, 8, IBV_ACCESS_REMOTE_ATOMIC));
      if (!p || (h.addr & 7) || !(q->access & IBV_ACCESS_REMOTE_ATOMIC)) {
        answer(q, pi, h, kNak, IBV_WC_REM_ACCESS_ERR, nullptr, 0, 0);
        return kDone;
      }
      uint64_t old;
      if (h.type == kFetchAdd) {
        old = __atomic_fetch_add(p, h.a1, __ATOMIC_SEQ_CST);
      } else {
        old = h.a1;
        __atomic_compare_exchange_n(p, &old, h.a2, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
      }
      answer(q, pi, h, kAtomicResp, IBV_WC_SUCCESS, nullptr, 0, old);
      return kDone;
    }
    default:
      answer(q, pi, h, kNak, IBV_WC_REM_INV_REQ_ERR, nullptr, 0, 0);
      return kDone;
  }
}

// Serves the requests that waited for a receive, in order, while receives last (rmu held).
void serve_pending(TQp* q) {
  while (q->pend) {
    Pend* p = q->pend;
    if (respond(q, q->peer, p->h, reinterpret_cast<uint8_t*>(p + 1)) == kNeedRecv) return;
    __atomic_store_n(&q->pend, p->next, __ATOMIC_RELEASE);  // t_post_srq_recv peeks
    if (!q->pend) q->pend_tail = nullptr;
    free(p);
  }
}

void deliver(int pi, const Hdr& h, const uint8_t* data) {
  auto* q = reinterpret_cast<TQp*>(map_get(&g.qp_by_num, h.dst_qpn));
  if (h.type >= kAck) {  // an answer to one of q's requests
    if (!q || q->dead) return;
    pthread_mutex_lock(&q->smu);
    if (!q->sq_n || q->sq[q->sq_head].seq != h.seq) {  // flushed meanwhile
      pthread_mutex_unlock(&q->smu);
      return;
    }
    if (h.type == kGone) {  // fails when the requester's retries would have run out, not at once
      if (!q->gone_at_ms && q->timeout) {
        const uint64_t us = (uint64_t(4096) << (q->timeout < 31 ? q->timeout : 31)) / 1000 * (q->retry_cnt + 1u);
        q->gone_at_ms = now_ms() + int64_t(us < 3600000000ull ? us / 1000 + 1 : 3600000);
      }
      pthread_mutex_unlock(&q->smu);
      return;
    }
    SWqe w = q->sq[q->sq_head];
    q->sq_head = (q->sq_head + 1) % q->sq_cap;
    --q->sq_n;
    bool err = h.type == kNak;
    if (h.type == kReadResp) err = !scatter(w.sge, w.nsge, 0, data, h.len);
    if (h.type == kAtomicResp) err = !scatter(w.sge, w.nsge, 0, reinterpret_cast<const uint8_t*>(&h.a1), 8);
    if (!err && w.signaled) send_cqe(q, w, IBV_WC_SUCCESS);
    pthread_mutex_unlock(&q->smu);
    if (err) fail_oldest(q, w, h.type == kNak ? ibv_wc_status(h.status) : IBV_WC_LOC_LEN_ERR);
    return;
  }
  if (!q || q->dead) {
    if (h.type != kUdSend) {
      Hdr n = {};
      n.type = kGone;
      n.dst_qpn = h.src_qpn;
      n.seq = h.seq;
      n.status = IBV_WC_RETRY_EXC_ERR;
      send_msg(pi, n, nullptr, 0);
    }
    return;
  }
  pthread_mutex_lock(&q->rmu);
  if (q->pend || respond(q, pi, h, data) == kNeedRecv) {
    auto* p = static_cast<Pend*>(malloc(sizeof(Pend) + h.len));
    if (p) {
      p->next = nullptr;
      p->h = h;
      memcpy(p + 1, data, h.len);
      if (q->pend_tail) q->pend_tail->next = p;
      else __atomic_store_n(&q->pend, p, __ATOMIC_RELEASE);
      q->pend_tail = p;
    }
  }
  pthread_mutex_unlock(&q->rmu);
}

// ---- the progress thread ----

In* g_in;
int g_nin, g_cap_in;

void in_close(int i) {
  close(g_in[i].fd);
  free(g_in[i].buf);
  g_in[i] = g_in[--g_nin];
}

// Reads what connection i has; serves every whole message. false: closed.
bool in_read(int i, int* from) {
  In& c = g_in[i];
  for (;;) {
    if (c.cap - c.have < 65536) {
      size_t cap = c.cap ? c.cap * 2 : 1 << 17;
      auto* b = static_cast<uint8_t*>(realloc(c.buf, cap));
      if (!b) return false;
      c.buf = b;
      c.cap = cap;
    }
    ssize_t r = recv(c.fd, c.buf + c.have, c.cap - c.have, 0);
    if (r == 0) return false;
    if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.have += size_t(r);
    size_t off = 0;
    if (*from < 0) {  // the hello names the sender
      if (c.have < sizeof(Hello)) continue;
      Hello hl;
      memcpy(&hl, c.buf, sizeof hl);
      if (hl.magic != kMagic) return false;
      *from = peer_index(hl.token, hl.ip, hl.port);
      if (*from < 0) return false;
      off = sizeof hl;
    }
    while (c.have - off >= sizeof(Hdr)) {
      Hdr h;
      memcpy(&h, c.buf + off, sizeof h);
      if (c.have - off - sizeof h < h.len) {
        if (c.cap < sizeof h + h.len + 65536) {  // room for the whole message
          auto* b = static_cast<uint8_t*>(realloc(c.buf, sizeof h + h.len + 65536));
          if (!b) return false;
          c.buf = b;
          c.cap = sizeof h + h.len + 65536;
        }
        break;
      }
      deliver(*from, h, c.buf + off + sizeof h);
      off += sizeof h + h.len;
    }
    memmove(c.buf, c.buf + off, c.have - off);
    c.have -= off;
  }
}

// Fails the oldest request of each QP whose retries ran out (kGone), and flushes the rest.
void expire_gone() {
  const int64_t now = now_ms();
  for (TQp* q = __atomic_load_n(&g.qps, __ATOMIC_ACQUIRE); q; q = q->next) {
    const int64_t t = __atomic_load_n(&q->gone_at_ms, __ATOMIC_ACQUIRE);
    if (!t || t > now) continue;
    pthread_mutex_lock(&q->smu);
    q->gone_at_ms = 0;
    const bool fail = q->sq_n > 0;
    SWqe w = {};
    if (fail) {
      w = q->sq[q->sq_head];
      q->sq_head = (q->sq_head + 1) % q->sq_cap;
      --q->sq_n;
    }
    pthread_mutex_unlock(&q->smu);
    if (fail) fail_oldest(q, w, IBV_WC_RETRY_EXC_ERR);
  }
}

void* progress(void*) {
  sigset_t all;
  sigfillset(&all);
  // Only the engine's checkpoint signal may come here (a checkpoint stops every thread).
  sigdelset(&all, inject::checkpoint_signal());
  pthread_sigmask(SIG_SETMASK, &all, nullptr);
  int* from = nullptr;
  int from_cap = 0;
  pollfd* fds = nullptr;
  int fds_cap = 0;
  for (;;) {
    const int npeers = __atomic_load_n(&g.npeers, __ATOMIC_ACQUIRE);
    const int want = 2 + g_nin + npeers;
    if (want > fds_cap) {
      fds_cap = want * 2;
      fds = static_cast<pollfd*>(realloc(fds, sizeof(pollfd) * size_t(fds_cap)));
    }
    if (g_nin >= from_cap) {
      from_cap = g_nin * 2 + 16;
      from = static_cast<int*>(realloc(from, sizeof(int) * size_t(from_cap)));
    }
    int n = 0;
    fds[n++] = {g.wake_fd, POLLIN, 0};
    fds[n++] = {g.listen_fd, POLLIN, 0};
    for (int i = 0; i < g_nin; ++i) fds[n++] = {g_in[i].fd, POLLIN, 0};
    int pfirst = n;
    for (int i = 0; i < npeers; ++i) {
      Peer& p = g.peers[i];
      pthread_mutex_lock(&p.mu);
      fds[n++] = {p.fd >= 0 && p.out_len > p.out_off ? p.fd : -1, POLLOUT, 0};
      pthread_mutex_unlock(&p.mu);
    }
    // The earliest request whose retries run out (kGone): it fails then.
    int64_t next_gone = 0;
    for (TQp* q = __atomic_load_n(&g.qps, __ATOMIC_ACQUIRE); q; q = q->next) {
      const int64_t t = __atomic_load_n(&q->gone_at_ms, __ATOMIC_ACQUIRE);
      if (t && (!next_gone || t < next_gone)) next_gone = t;
    }
    const int64_t wait = next_gone ? next_gone - now_ms() : -1;
    if (poll(fds, nfds_t(n), next_gone ? int(wait > 0 ? wait : 0) : -1) < 0) continue;
    if (next_gone) expire_gone();
    if (fds[0].revents) {
      uint64_t v;
      (void)!read(g.wake_fd, &v, sizeof v);
    }
    for (int i = 0; i < npeers; ++i)
      if (fds[pfirst + i].revents) {
        Peer& p = g.peers[i];
        pthread_mutex_lock(&p.mu);
        out_flush(p);
        pthread_mutex_unlock(&p.mu);
      }
    for (int i = g_nin - 1; i >= 0; --i)
      if (fds[2 + i].revents && !in_read(i, &from[i])) {
        in_close(i);
        from[i] = from[g_nin];
      }
    if (fds[1].revents) {
      int fd;
      while ((fd = accept4(g.listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        if (g_nin == g_cap_in) {
          g_cap_in = g_cap_in ? g_cap_in * 2 : 16;
          g_in = static_cast<In*>(realloc(g_in, sizeof(In) * size_t(g_cap_in)));
        }
        if (g_nin >= from_cap) {
          from_cap = g_nin * 2 + 16;
          from = static_cast<int*>(realloc(from, sizeof(int) * size_t(from_cap)));
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        g_in[g_nin] = {fd, nullptr, 0, 0};
        from[g_nin++] = -1;
      }
    }
  }
  return nullptr;
}

// ---- the Real table ----

ibv_device** t_get_device_list(int* n) {
  if (n) *n = 1;
  g.devlist[0] = &g.dev;
  g.devlist[1] = nullptr;
  return g.devlist;
}
void t_free_device_list(ibv_device**) {}
const char* t_get_device_name(ibv_device* d) { return d->name; }

int t_poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int t_req_notify_cq(ibv_cq* cq, int solicited_only);
int t_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int t_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int t_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);

ibv_context* t_open_device(ibv_device* dev) {
  pthread_mutex_lock(&g.mu);
  bool ok = listen_once();
  pthread_mutex_unlock(&g.mu);
  auto* c = static_cast<TCtx*>(zalloc(sizeof(TCtx)));
  int ap[2];
  if (!ok || !c || pipe2(ap, O_CLOEXEC) != 0) {
    errno = ENODEV;
    return nullptr;
  }
  c->c.device = dev;
  c->c.cmd_fd = eventfd(0, EFD_CLOEXEC);
  c->c.async_fd = ap[0];
  c->async_w = ap[1];
  c->c.num_comp_vectors = 1;
  pthread_mutex_init(&c->c.mutex, nullptr);
  c->c.ops.poll_cq = t_poll_cq;
  c->c.ops.req_notify_cq = t_req_notify_cq;
  c->c.ops.post_send = t_post_send;
  c->c.ops.post_recv = t_post_recv;
  c->c.ops.post_srq_recv = t_post_srq_recv;
  // The lid and gids the program knows for this context (next.ctx: the plugin's shadow being made again).
  if (next.ctx) {
    c->lid = next.ctx->vlid[1];
    for (int p = 1; p <= kPorts; ++p)
      for (int i = 0; i < kGids; ++i)
        if (next.ctx->gid_seen[p] & (1u << i)) c->gid[p][i] = next.ctx->vgid[p][i];
  }
  if (!c->lid) c->lid = g.lid0 ? g.lid0 : uint16_t(1 + (st.token % 0xbffe));
  if (!g.lid0) g.lid0 = c->lid;
  return &c->c;
}

int t_close_device(ibv_context*) { return 0; }

int t_query_device(ibv_context* ctx, ibv_device_attr* a) {
  memset(a, 0, sizeof *a);
  const uint16_t lid = reinterpret_cast<TCtx*>(ctx)->lid;
  a->node_guid = htobe64(0x7276746300000000ull | lid);
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = ~0ull;
  a->page_size_cap = 4096;
  a->vendor_id = 0x7276;
  a->max_qp = 1 << 16;
  a->max_qp_wr = 16384;
  a->max_sge = kMaxSge;
  a->max_sge_rd = kMaxSge;
  a->max_cq = 1 << 16;
  a->max_cqe = 1 << 20;
  a->max_mr = 1 << 16;
  a->max_pd = 1 << 16;
  a->max_qp_rd_atom = 16;
  a->max_qp_init_rd_atom = 16;
  a->max_res_rd_atom = 1 << 16;
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_ah = 1 << 16;
  a->max_srq = 1 << 16;
  a->max_srq_wr = 16384;
  a->max_srq_sge = kMaxSge;
  a->max_pkeys = 1;
  a->phys_port_cnt = 1;
  return 0;
}

int t_query_port(ibv_context* ctx, uint8_t port, _compat_ibv_port_attr* out) {
  if (port != 1) return EINVAL;
  auto* a = reinterpret_cast<ibv_port_attr*>(out);  // the old ABI's struct ends before `flags`
  memset(a, 0, offsetof(ibv_port_attr, flags));
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = a->active_mtu = IBV_MTU_4096;
  a->gid_tbl_len = kGids;
  a->max_msg_sz = 1u << 31;
  a->pkey_tbl_len = 1;
  a->lid = reinterpret_cast<TCtx*>(ctx)->lid;
  a->sm_lid = a->lid;
  a->max_vl_num = 1;
  a->active_width = 1;
  a->active_speed = 1;
  a->phys_state = 5;  // LinkUp
  a->link_layer = IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

int t_query_gid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  if (port < 1 || port > kPorts || index < 0 || index >= kGids) return -1;
  TCtx* c = reinterpret_cast<TCtx*>(ctx);
  *gid = c->gid[port][index];
  if (!gid->global.interface_id && !gid->global.subnet_prefix) {
    gid->global.subnet_prefix = htobe64(0xfe80000000000000ull);
    gid->global.interface_id = htobe64(0x7276746300000000ull | c->lid);
  }
  return 0;
}

int t_query_pkey(ibv_context*, uint8_t, int index, __be16* pkey) {
  if (index != 0) return -1;
  *pkey = htobe16(0xffff);
  return 0;
}

ibv_pd* t_alloc_pd(ibv_context* ctx) {
  auto* p = static_cast<ibv_pd*>(zalloc(sizeof(ibv_pd)));
  if (!p) return nullptr;
  p->context = ctx;
  return p;
}
int t_dealloc_pd(ibv_pd*) { return 0; }

ibv_mr* t_reg_mr_iova2(ibv_pd* pd, void* addr, size_t len, uint64_t iova, unsigned access) {
  auto* m = static_cast<TMr*>(zalloc(sizeof(TMr)));
  if (!m) return nullptr;
  m->m.context = pd->context;
  m->m.pd = pd;
  m->m.addr = addr;
  m->m.length = len;
  m->iova = iova;
  m->access = int(access);
  pthread_mutex_lock(&g.mu);
  if (next.lkey || next.rkey) {
    m->m.lkey = next.lkey;
    m->m.rkey = next.rkey;
  } else {
    m->m.lkey = m->m.rkey = 0x80000000u | ++g.key_next;
  }
  m->next = g.mrs;
  __atomic_store_n(&g.mrs, m, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g.mu);
  return &m->m;
}

ibv_mr* t_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  return t_reg_mr_iova2(pd, addr, len, uintptr_t(addr), unsigned(access));
}

int t_dereg_mr(ibv_mr* mr) {
  reinterpret_cast<TMr*>(mr)->dead = true;  // kept in the list: the progress thread may be reading it
  return 0;
}

ibv_comp_channel* t_create_comp_channel(ibv_context* ctx) {
  auto* c = static_cast<TChan*>(zalloc(sizeof(TChan)));
  int p[2];
  if (!c || pipe2(p, O_CLOEXEC) != 0) return nullptr;
  c->ch.context = ctx;
  c->ch.fd = p[0];
  c->wfd = p[1];
  return &c->ch;
}

int t_destroy_comp_channel(ibv_comp_channel* ch) {
  close(ch->fd);
  close(reinterpret_cast<TChan*>(ch)->wfd);
  return 0;
}

ibv_cq* t_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* ch, int) {
  auto* c = static_cast<TCq*>(zalloc(sizeof(TCq)));
  if (!c) return nullptr;
  c->cap = uint32_t(cqe > 0 ? cqe : 1) * 2 + 64;
  c->ring = static_cast<ibv_wc*>(zalloc(sizeof(ibv_wc) * c->cap));
  if (!c->ring) return nullptr;
  pthread_mutex_init(&c->mu, nullptr);
  c->cq.context = ctx;
  c->cq.channel = ch;
  c->cq.cq_context = cq_context;
  c->cq.cqe = cqe;
  return &c->cq;
}

int t_destroy_cq(ibv_cq*) { return 0; }

int t_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** ctx) {
  ibv_cq* p = nullptr;
  ssize_t r;
  while ((r = read(ch->fd, &p, sizeof p)) < 0 && errno == EINTR) {
  }
  if (r != ssize_t(sizeof p)) return -1;
  *cq = p;
  *ctx = p->cq_context;
  return 0;
}

void t_ack_cq_events(ibv_cq*, unsigned) {}

int t_poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  TCq* c = reinterpret_cast<TCq*>(cq);
  if (!__atomic_load_n(&c->n, __ATOMIC_ACQUIRE)) return 0;
  pthread_mutex_lock(&c->mu);
  int got = 0;
  while (got < n && c->n) {
    wc[got++] = c->ring[c->head];
    c->head = (c->head + 1) % c->cap;
    __atomic_store_n(&c->n, c->n - 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&c->mu);
  return got;
}

int t_req_notify_cq(ibv_cq* cq, int) {
  TCq* c = reinterpret_cast<TCq*>(cq);
  pthread_mutex_lock(&c->mu);
  c->armed = true;
  pthread_mutex_unlock(&c->mu);
  return 0;
}

bool rq_init(RQueue* r, uint32_t cap) {
  r->cap = cap ? cap : 1;
  r->e = static_cast<RWqe*>(zalloc(sizeof(RWqe) * r->cap));
  return r->e != nullptr;
}

bool rq_push(RQueue* r, const ibv_recv_wr* w) {
  if (r->n == r->cap || uint32_t(w->num_sge) > kMaxSge) return false;
  for (int i = 0; i < w->num_sge; ++i)
    if (!sge_ok(w->sg_list[i])) return false;
  RWqe& e = r->e[(r->head + r->n) % r->cap];
  e.wr_id = w->wr_id;
  e.nsge = uint32_t(w->num_sge);
  memcpy(e.sge, w->sg_list, sizeof(ibv_sge) * e.nsge);
  ++r->n;
  return true;
}

ibv_srq* t_create_srq(ibv_pd* pd, ibv_srq_init_attr* a) {
  auto* s = static_cast<TSrq*>(zalloc(sizeof(TSrq)));
  if (!s || a->attr.max_sge > kMaxSge || !rq_init(&s->rq, a->attr.max_wr)) {
    errno = EINVAL;
    return nullptr;
  }
  pthread_mutex_init(&s->mu, nullptr);
  s->s.context = pd->context;
  s->s.srq_context = a->srq_context;
  s->s.pd = pd;
  s->attr = a->attr;
  return &s->s;
}

int t_modify_srq(ibv_srq* srq, ibv_srq_attr* a, int mask) {
  if (mask & IBV_SRQ_LIMIT) reinterpret_cast<TSrq*>(srq)->attr.srq_limit = a->srq_limit;
  return 0;
}

int t_query_srq(ibv_srq* srq, ibv_srq_attr* a) {
  *a = reinterpret_cast<TSrq*>(srq)->attr;
  return 0;
}

int t_destroy_srq(ibv_srq*) { return 0; }

ibv_qp* t_create_qp(ibv_pd* pd, ibv_qp_init_attr* a) {
  if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (a->cap.max_send_sge > kMaxSge || a->cap.max_recv_sge > kMaxSge) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = static_cast<TQp*>(zalloc(sizeof(TQp)));
  if (!q) return nullptr;
  q->sq_cap = a->cap.max_send_wr ? a->cap.max_send_wr : 1;
  q->sq = static_cast<SWqe*>(zalloc(sizeof(SWqe) * q->sq_cap));
  if (!q->sq || (!a->srq && !rq_init(&q->rq, a->cap.max_recv_wr))) {
    errno = ENOMEM;
    return nullptr;
  }
  pthread_mutex_init(&q->smu, nullptr);
  pthread_mutex_init(&q->rmu, nullptr);
  q->q.context = pd->context;
  q->q.qp_context = a->qp_context;
  q->q.pd = pd;
  q->q.send_cq = a->send_cq;
  q->q.recv_cq = a->recv_cq;
  q->q.srq = a->srq;
  q->q.qp_type = a->qp_type;
  q->q.state = IBV_QPS_RESET;
  q->scq = reinterpret_cast<TCq*>(a->send_cq);
  q->rcq = reinterpret_cast<TCq*>(a->recv_cq);
  q->srq = reinterpret_cast<TSrq*>(a->srq);
  q->cap = a->cap;
  if (q->cap.max_inline_data < 256) q->cap.max_inline_data = 256;
  a->cap.max_inline_data = q->cap.max_inline_data;
  q->sig_all = a->sq_sig_all;
  q->peer = -1;
  pthread_mutex_lock(&g.mu);
  // The number the program knows (next.qpn), else one of ours: the high range the HCAs' 24-bit numbers
  // start low in, per process (a random base) so two processes rarely pick the same.
  if (next.qpn) {
    q->q.qp_num = next.qpn;
  } else {
    if (!g.qpn_next) g.qpn_next = 0xc00000u | uint32_t((st.token >> 20) & 0x3ff) << 12;
    q->q.qp_num = g.qpn_next++ & 0xffffff;
  }
  q->next = g.qps;
  __atomic_store_n(&g.qps, q, __ATOMIC_RELEASE);  // the progress thread walks the list without g.mu
  pthread_mutex_unlock(&g.mu);
  map_put(&g.qp_by_num, q->q.qp_num, uintptr_t(q));
  map_put(&g.route, route_key(reinterpret_cast<TCtx*>(pd->context)->lid, q->q.qp_num), 1);  // peer 0 + 1
  return &q->q;
}

// The process behind (lid, qpn) (an address vector: dlid, or the lid of its gid), or -1.
int route_to(const ibv_ah_attr& ah, uint32_t qpn) {
  uint16_t lid = ah.dlid;
  if (!lid && ah.is_global) lid = gid_vlid(ah.grh.dgid);
  uint64_t v = map_get(&g.route, route_key(lid, qpn));
  return v ? int(v - 1) : -1;
}

int t_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  TQp* q = reinterpret_cast<TQp*>(qp);
  if (mask & IBV_QP_ACCESS_FLAGS) q->access = int(a->qp_access_flags);
  if (mask & IBV_QP_QKEY) q->qkey = a->qkey;
  if (mask & IBV_QP_PORT) q->port = a->port_num;
  if (mask & IBV_QP_SQ_PSN) q->sq_psn = a->sq_psn;
  if (mask & IBV_QP_RQ_PSN) q->rq_psn = a->rq_psn;
  if (mask & IBV_QP_DEST_QPN) q->dest_qpn = a->dest_qp_num;
  if (mask & IBV_QP_TIMEOUT) q->timeout = a->timeout;
  if (mask & IBV_QP_RETRY_CNT) q->retry_cnt = a->retry_cnt;
  if (mask & IBV_QP_AV) {
    q->dlid = a->ah_attr.dlid;
    int pi = route_to(a->ah_attr, q->dest_qpn);
    if (pi < 0 && q->q.qp_type != IBV_QPT_UD) {
      errno = EHOSTUNREACH;  // nobody this restart learned of owns that QP
      return EHOSTUNREACH;
    }
    q->peer = pi;
  }
  if (mask & IBV_QP_STATE) {
    const ibv_qp_state s = a->qp_state;
    if (s == IBV_QPS_ERR) {
      to_error(q);
    } else {
      if (s == IBV_QPS_RESET) {
        pthread_mutex_lock(&q->smu);
        q->sq_n = q->sq_head = 0;
        pthread_mutex_unlock(&q->smu);
        pthread_mutex_lock(&q->rmu);
        q->rq.n = q->rq.head = 0;
        pthread_mutex_unlock(&q->rmu);
      }
      __atomic_store_n(&q->q.state, s, __ATOMIC_RELEASE);
      if (s == IBV_QPS_RTS && q->peer >= 0) {  // connect now, not in the first post
        Peer& p = g.peers[q->peer];
        pthread_mutex_lock(&p.mu);
        const bool ok = peer_connect(p);
        pthread_mutex_unlock(&p.mu);
        if (!ok) {
          errno = ECONNREFUSED;
          return ECONNREFUSED;
        }
      }
    }
  }
  return 0;
}

int t_query_qp(ibv_qp* qp, ibv_qp_attr* a, int, ibv_qp_init_attr* ia) {
  TQp* q = reinterpret_cast<TQp*>(qp);
  memset(a, 0, sizeof *a);
  a->qp_state = a->cur_qp_state = __atomic_load_n(&q->q.state, __ATOMIC_ACQUIRE);
  a->sq_psn = q->sq_psn;
  a->rq_psn = q->rq_psn;
  a->qkey = q->qkey;
  a->dest_qp_num = q->dest_qpn;
  a->qp_access_flags = unsigned(q->access);
  a->cap = q->cap;
  a->port_num = uint8_t(q->port);
  a->ah_attr.dlid = q->dlid;
  if (ia) {
    memset(ia, 0, sizeof *ia);
    ia->qp_context = q->q.qp_context;
    ia->send_cq = q->q.send_cq;
    ia->recv_cq = q->q.recv_cq;
    ia->srq = q->q.srq;
    ia->cap = q->cap;
    ia->qp_type = q->q.qp_type;
    ia->sq_sig_all = q->sig_all;
  }
  return 0;
}

int t_destroy_qp(ibv_qp* qp) {
  TQp* q = reinterpret_cast<TQp*>(qp);
  q->dead = true;  // its memory stays: the progress thread may hold it
  map_put(&g.qp_by_num, q->q.qp_num, 0);
  return 0;
}

ibv_ah* t_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  auto* h = static_cast<TAh*>(zalloc(sizeof(TAh)));
  if (!h) return nullptr;
  h->ah.context = pd->context;
  h->ah.pd = pd;
  h->attr = *attr;
  return &h->ah;
}
int t_destroy_ah(ibv_ah*) { return 0; }

int t_get_async_event(ibv_context* ctx, ibv_async_event*) {
  char c;
  (void)!read(ctx->async_fd, &c, 1);  // never written: nothing asynchronous happens on this device
  errno = EAGAIN;
  return -1;
}
void t_ack_async_event(ibv_async_event*) {}

// ---- posting ----

int post_one(TQp* q, ibv_send_wr* w) {
  const bool ud = q->q.qp_type == IBV_QPT_UD;
  if (__atomic_load_n(&q->q.state, __ATOMIC_ACQUIRE) != IBV_QPS_RTS) return EINVAL;
  if (uint32_t(w->num_sge) > kMaxSge) return EINVAL;
  Hdr h = {};
  h.src_qpn = q->q.qp_num;
  iovec pieces[kMaxSge];
  int np = 0;
  uint64_t len = 0;
  const bool inl = w->send_flags & IBV_SEND_INLINE;
  for (int i = 0; i < w->num_sge; ++i) {
    if (!inl && !sge_ok(w->sg_list[i])) return EINVAL;
    len += w->sg_list[i].length;
  }
  if (len > 0xffffffffull) return EINVAL;
  SWqe e = {};
  e.wr_id = w->wr_id;
  e.signaled = q->sig_all || (w->send_flags & IBV_SEND_SIGNALED);
  auto gather = [&] {
    for (int i = 0; i < w->num_sge; ++i)
      if (w->sg_list[i].length)
        pieces[np++] = {reinterpret_cast<void*>(uintptr_t(w->sg_list[i].addr)), w->sg_list[i].length};
    h.len = uint32_t(len);
  };
  switch (w->opcode) {
    case IBV_WR_SEND_WITH_IMM:
      h.flags |= kImm;
      h.imm = w->imm_data;
      [[fallthrough]];
    case IBV_WR_SEND:
      h.type = ud ? kUdSend : kSend;
      gather();
      break;
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      h.flags |= kImm;
      h.imm = w->imm_data;
      [[fallthrough]];
    case IBV_WR_RDMA_WRITE:
      if (ud) return EINVAL;
      h.type = kWrite;
      h.addr = w->wr.rdma.remote_addr;
      h.rkey = w->wr.rdma.rkey;
      gather();
      break;
    case IBV_WR_RDMA_READ:
      if (q->q.qp_type != IBV_QPT_RC) return EINVAL;
      h.type = kRead;
      h.addr = w->wr.rdma.remote_addr;
      h.rkey = w->wr.rdma.rkey;
      h.a1 = len;
      e.nsge = uint32_t(w->num_sge);
      memcpy(e.sge, w->sg_list, sizeof(ibv_sge) * e.nsge);
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      if (q->q.qp_type != IBV_QPT_RC || len != 8) return EINVAL;
      h.type = w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? kFetchAdd : kCmpSwp;
      h.addr = w->wr.atomic.remote_addr;
      h.rkey = w->wr.atomic.rkey;
      h.a1 = w->wr.atomic.compare_add;
      h.a2 = w->wr.atomic.swap;
      e.nsge = uint32_t(w->num_sge);
      memcpy(e.sge, w->sg_list, sizeof(ibv_sge) * e.nsge);
      break;
    default:
      return EINVAL;
  }
  if (w->send_flags & IBV_SEND_SOLICITED) h.flags |= kSolicited;
  e.type = h.type;
  e.len = uint32_t(len);
  TCtx* ctx = reinterpret_cast<TCtx*>(q->q.context);
  if (ud) {
    TAh* ah = reinterpret_cast<TAh*>(w->wr.ud.ah);
    int pi = route_to(ah->attr, w->wr.ud.remote_qpn);
    h.dst_qpn = w->wr.ud.remote_qpn;
    h.a1 = w->wr.ud.remote_qkey;
    h.slid = ctx->lid;
    if (ah->attr.is_global) {
      h.flags |= kGlobal;
      h.dgid = ah->attr.grh.dgid;
      t_query_gid(&ctx->c, 1, ah->attr.grh.sgid_index, &h.sgid);
    }
    if (pi >= 0) send_msg(pi, h, pieces, np);  // a destination nobody announced: lost, as UD may be
    if (e.signaled) send_cqe(q, e, IBV_WC_SUCCESS);
    return 0;
  }
  if (q->sq_n == q->sq_cap) return ENOMEM;
  h.dst_qpn = q->dest_qpn;
  e.seq = h.seq = ++q->next_seq;
  q->sq[(q->sq_head + q->sq_n) % q->sq_cap] = e;
  ++q->sq_n;
  // A broken connection: the request is queued, and the caller flushes it with the rest (outside smu).
  return send_msg(q->peer, h, pieces, np) ? 0 : -1;
}

int t_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  TQp* q = reinterpret_cast<TQp*>(qp);
  pthread_mutex_lock(&q->smu);
  int rc = 0;
  for (ibv_send_wr* w = wr; w; w = w->next) {
    rc = post_one(q, w);
    if (rc > 0) *bad = w;
    if (rc) break;
  }
  pthread_mutex_unlock(&q->smu);
  if (rc == -1) {  // the connection broke: the request is in the queue, and completes flushed
    to_error(q);
    rc = 0;
  }
  return rc;
}

// Queues a chain of receives (the queue's lock held). 0, or the errno of the first refused (*bad).
int push_recvs(RQueue* r, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  for (ibv_recv_wr* w = wr; w; w = w->next)
    if (!rq_push(r, w)) {
      *bad = w;
      return r->n == r->cap ? ENOMEM : EINVAL;
    }
  return 0;
}

int t_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  TQp* q = reinterpret_cast<TQp*>(qp);
  if (q->srq) return EINVAL;
  pthread_mutex_lock(&q->rmu);
  const int rc = push_recvs(&q->rq, wr, bad);
  serve_pending(q);
  pthread_mutex_unlock(&q->rmu);
  return rc;
}

int t_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  TSrq* s = reinterpret_cast<TSrq*>(srq);
  pthread_mutex_lock(&s->mu);
  const int rc = push_recvs(&s->rq, wr, bad);
  pthread_mutex_unlock(&s->mu);
  // QPs on this SRQ with requests waiting for a receive
  for (TQp* q = __atomic_load_n(&g.qps, __ATOMIC_ACQUIRE); q; q = q->next)
    if (q->srq == s && !q->dead && __atomic_load_n(&q->pend, __ATOMIC_ACQUIRE)) {
      pthread_mutex_lock(&q->rmu);
      serve_pending(q);
      pthread_mutex_unlock(&q->rmu);
    }
  return rc;
}

}  // namespace

void install(Real* r) {
  active = true;
  const char* name = st.ctxs ? st.ctxs->devname : "ib2tcp_0";
  plugins::Msg(g.dev.name, sizeof g.dev.name).s(name);  // the name the program asked for
  plugins::Msg(g.dev.dev_name, sizeof g.dev.dev_name).s("ib2tcp");
  g.dev.node_type = IBV_NODE_CA;
  g.dev.transport_type = IBV_TRANSPORT_IB;
  r->get_device_list = t_get_device_list;
  r->free_device_list = t_free_device_list;
  r->get_device_name = t_get_device_name;
  r->open_device = t_open_device;
  r->close_device = t_close_device;
  r->query_device = t_query_device;
  r->query_port = t_query_port;
  r->query_gid = t_query_gid;
  r->query_pkey = t_query_pkey;
  r->alloc_pd = t_alloc_pd;
  r->dealloc_pd = t_dealloc_pd;
  r->reg_mr = t_reg_mr;
  r->reg_mr_iova2 = t_reg_mr_iova2;
  r->dereg_mr = t_dereg_mr;
  r->create_comp_channel = t_create_comp_channel;
  r->destroy_comp_channel = t_destroy_comp_channel;
  r->create_cq = t_create_cq;
  r->destroy_cq = t_destroy_cq;
  r->get_cq_event = t_get_cq_event;
  r->ack_cq_events = t_ack_cq_events;
  r->create_srq = t_create_srq;
  r->modify_srq = t_modify_srq;
  r->query_srq = t_query_srq;
  r->destroy_srq = t_destroy_srq;
  r->create_qp = t_create_qp;
  r->modify_qp = t_modify_qp;
  r->query_qp = t_query_qp;
  r->destroy_qp = t_destroy_qp;
  r->create_ah = t_create_ah;
  r->destroy_ah = t_destroy_ah;
  r->get_async_event = t_get_async_event;
  r->ack_async_event = t_ack_async_event;
}

bool address(char* out, size_t cap) {
  if (g.listen_fd < 0) return false;
  char ip[INET_ADDRSTRLEN];
  in_addr a = {g.ip};
  inet_ntop(AF_INET, &a, ip, sizeof ip);
  plugins::Msg(out, cap).s(ip).s(" ").u(g.port);
  return true;
}

bool learn(uint16_t lid, uint32_t qpn, uint64_t token) {
  int pi = peer_index(token, 0, 0);
  return pi >= 0 && map_put(&g.route, route_key(lid, qpn), uint64_t(pi) + 1);
}

bool peer_address(uint64_t token, const char* addr) {
  char ip[INET_ADDRSTRLEN] = "";
  const char* sp = strchr(addr, ' ');
  if (!sp || size_t(sp - addr) >= sizeof ip) return false;
  memcpy(ip, addr, size_t(sp - addr));
  in_addr a;
  if (inet_pton(AF_INET, ip, &a) != 1) return false;
  const long port = atol(sp + 1);
  if (port <= 0 || port > 65535) return false;
  return peer_index(token, a.s_addr, uint16_t(port)) >= 0;
}

bool start() {
  if (g.thread_up || g.listen_fd < 0) return g.thread_up || g.listen_fd < 0;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  g.thread_up = pthread_create(&g.thread, &at, progress, nullptr) == 0;
  pthread_attr_destroy(&at);
  return g.thread_up;
}

}  // namespace revive::verbs::tcp
