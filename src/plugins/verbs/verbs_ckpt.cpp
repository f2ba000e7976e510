// The verbs plugin's checkpoint and restart events (docs/verbs.md).
//   drain (every process suspended): a signaled zero-length RDMA write fences each RC/UC send queue whose
//     last request is unsignaled; the completion queues are emptied into the shadows' virtual queues until
//     every send is complete or nothing moves any more (a send waiting for a receive the suspended peer
//     has not posted); the current PSNs and states are read.
//   save (every process has drained): takes the completions of what peers sent us before their sends
//     completed; refuses the checkpoint while the drain could not finish cleanly (taken again later).
//   restore: memory is back, shadows and rings included; nothing can be made yet.
//   reconnect: open the device again, make every object again (same addresses and sizes), bring QPs to
//     INIT, post the receives that were outstanding, publish the new ids under the virtual ones.
//   refill: look up the peers' new ids, bring the QPs to RTR/RTS at the PSNs of the checkpoint, make the
//     address handles again.
//   restored (coordinator's resume: every peer is ready to receive): post the sends that were in flight.
// Runs with user threads held: no malloc of ours (the device library's own calls are the exception the
// plugin exists for; the engine never stops a thread inside a verbs call, see Section).
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/random.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "inject/plugin.h"
#include "plugins/common/msg.h"
#include "plugins/common/section_io.h"
#include "plugins/plugins.h"
#include "plugins/verbs/verbs.h"

namespace revive::verbs {
namespace {

constexpr uint64_t kProbeId = 0x72767666656e6365ull;  // "rvvfence"
long g_drain_ms = 3000;    // REVIVE_VERBS_DRAIN_MS: longest drain
long g_quiet_ms = 500;     // REVIVE_VERBS_QUIET_MS: no progress for this long ends it (a send waits for a
                           // receive its suspended peer has not posted: it goes again after a restart)
long g_lookup_ms = 20000;  // a peer's publication must come within this

using plugins::Msg;

long now_ms() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void nap_ms(long ms) {
  struct timespec ts = {0, ms * 1000000};
  nanosleep(&ts, nullptr);
}

bool signaled(const VQp* q, const SendRec* r) { return q->init.sq_sig_all || (r->flags & IBV_SEND_SIGNALED) || r->probe; }

// A signaled zero-length RDMA write (no rkey needed: the IB spec checks none for zero bytes); w is the
// request as posted. 0 or errno.
int post_fence(ibv_qp* qp, ibv_send_wr* w) {
  memset(w, 0, sizeof *w);
  w->wr_id = kProbeId;
  w->opcode = IBV_WR_RDMA_WRITE;
  w->send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, w, &bad);
}

int init() {
  if (const char* v = getenv("REVIVE_VERBS_DRAIN_MS")) g_drain_ms = atol(v);
  if (const char* v = getenv("REVIVE_VERBS_QUIET_MS")) g_quiet_ms = atol(v);
  if (const char* v = getenv("REVIVE_VERBS_LOOKUP_MS")) g_lookup_ms = atol(v);
  return 0;
}

void busy(const char* why) {
  st.drain_busy = true;
  Msg(st.busy_why, sizeof st.busy_why).s(why);
}

// Moves what the device has completed into the CQ's virtual queue. Returns how many.
int pull(VCq* c) {
  if (!c->vq) {
    uint32_t cap = uint32_t(c->sh.cqe) * 2 + 16;
    void* p = mmap(nullptr, size_t(cap) * sizeof(ibv_wc), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      busy("no memory for a completion queue's drained entries");
      return 0;
    }
    c->vq = static_cast<ibv_wc*>(p);
    c->vq_cap = cap;
    c->vq_head = c->vq_n = 0;
  }
  int moved = 0;
  for (;;) {
    ibv_wc wc[16];
    int room = int(c->vq_cap - c->vq_n);
    if (room <= 0) {
      busy("a completion queue holds more completions than twice its size (the program does not poll it)");
      return moved;
    }
    int r = ibv_poll_cq(c->real, room < 16 ? room : 16, wc);
    if (r <= 0) return moved;
    int kept = account(c, wc, r);
    for (int i = 0; i < kept; ++i) c->vq[(c->vq_head + c->vq_n++) % c->vq_cap] = wc[i];
    moved += r;
  }
}

bool sends_done() {
  for (VQp* q = st.qps; q; q = q->next) {
    if (q->sh.qp_type == IBV_QPT_UD) {  // only signaled UD sends wait for a completion
      for (uint32_t i = 0; i < q->sends.n; ++i)
        if (signaled(q, static_cast<SendRec*>(q->sends.at(i)))) return false;
    } else if (q->sends.n) {
      return false;
    }
  }
  return true;
}

constexpr char kTcpRefusal[] =
    "this process runs its verbs over TCP since its restart (REVIVE_IB2TCP): it cannot be checkpointed again "
    "(docs/verbs.md)";

int drain(uint64_t, char* msg, size_t cap) {
  st.drain_busy = false;
  st.busy_why[0] = 0;
  if (!st.ctxs) return 0;
  if (tcp::active) {
    Msg(msg, cap).s(kTcpRefusal);
    return -ENOTSUP;
  }
  // Fence every connected send queue whose last request will never report its own completion.
  for (VQp* q = st.qps; q; q = q->next) {
    if ((q->sh.qp_type != IBV_QPT_RC && q->sh.qp_type != IBV_QPT_UC) || q->sh.state != IBV_QPS_RTS || !q->sends.n) continue;
    if (signaled(q, static_cast<SendRec*>(q->sends.at(q->sends.n - 1)))) continue;
    ibv_send_wr w;
    if (post_fence(q->real, &w) == 0) record_send(q, &w, true);
  }
  const long start = now_ms();
  long last_progress = start;
  for (;;) {
    int moved = 0;
    for (VCq* c = st.cqs; c; c = c->next) moved += pull(c);
    const long now = now_ms();
    if (moved) last_progress = now;
    if (st.drain_busy || sends_done() || now - last_progress >= g_quiet_ms || now - start >= g_drain_ms) break;
    nap_ms(1);
  }
  // An event the device raised that the program has not read yet is lost with the device at a restart.
  for (VChan* ch = st.chans; ch; ch = ch->next) {
    struct pollfd p = {ch->real->fd, POLLIN, 0};
    ch->event_pending = poll(&p, 1, 0) > 0;
  }
  // The last restart's kicks have been polled by now (or just were, into the virtual queues).
  drop_kicks(nullptr, nullptr);
  for (VQp* q = st.qps; q; q = q->next) {
    ibv_qp_attr a;
    ibv_qp_init_attr ia;
    memset(&a, 0, sizeof a);
    if (real.query_qp(q->real, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia) != 0) {
      Msg(msg, cap).s("cannot query QP ").u(q->sh.qp_num);
      return -EIO;
    }
    q->ckpt_state = a.qp_state;
    q->ckpt_sq_psn = a.sq_psn;
    q->ckpt_rq_psn = a.rq_psn;
  }
  return 0;
}

int save(inject::SectionWriter& w) {
  if (st.ctxs && tcp::active) {
    inject::plugin_refusal(kTcpRefusal);
    return -ENOTSUP;
  }
  if (st.unsupported[0]) {
    inject::plugin_refusal(st.unsupported);
    return -ENOTSUP;
  }
  if (st.ctxs && !inject::coord_configured()) {
    inject::plugin_refusal("a program with open verbs devices is checkpointed only under a coordinator (revive launch)");
    return -ENOTSUP;
  }
  // Every process has drained now (the write phase follows the drain phase's barrier): what peers sent
  // us before their sends completed has its completions in our queues. Take them too, so none is lost
  // with the device while its sender counts it as done.
  for (VCq* c = st.cqs; c; c = c->next) pull(c);
  if (st.drain_busy) {
    inject::plugin_refusal(st.busy_why);
    return -EAGAIN;
  }
  uint32_t nctx = 0, nqp = 0;
  for (VCtx* c = st.ctxs; c; c = c->next) ++nctx;
  for (VQp* q = st.qps; q; q = q->next) ++nqp;
  plugins::Out o(w);
  o.tag("RVIB");
  o.u32(nctx);
  o.u32(nqp);
  return o.ok() ? 0 : -ENOMEM;
}

void resume(bool) { st.drain_busy = false; }

int restore(inject::SectionReader& r, char* msg, size_t cap) {
  plugins::In in(r);
  const bool tagged = in.tag("RVIB");
  const uint32_t nctx = in.u32(), nqp = in.u32();
  if (!tagged || !in.ok()) {
    Msg(msg, cap).s("verbs section truncated or foreign");
    return -EINVAL;
  }
  uint32_t c = 0, q = 0;
  for (VCtx* x = st.ctxs; x; x = x->next) ++c;
  for (VQp* x = st.qps; x; x = x->next) ++q;
  if (c != nctx || q != nqp) {
    Msg(msg, cap).s("verbs section names ").u(nctx).s(" contexts and ").u(nqp).s(" QPs, memory holds ").u(c).s(" and ").u(q);
    return -EINVAL;
  }
  if (nctx) {
    st.restored = true;
    st.remapped = true;
    // ib2tcp: the restart asks for TCP instead of the device (every process of the restart alike).
    const char* v = inject::restart_env("REVIVE_IB2TCP");
    if (v && *v == '1') tcp::install(&real);
  }
  return 0;
}

// ---- publication: keys ibv.<gen>.<kind>.<...> in the coordinator's table ----

void hex(Msg& m, const void* p, size_t n) {
  static const char d[] = "0123456789abcdef";
  const auto* b = static_cast<const uint8_t*>(p);
  char s[3] = {0, 0, 0};
  for (size_t i = 0; i < n; ++i) {
    s[0] = d[b[i] >> 4];
    s[1] = d[b[i] & 15];
    m.s(s);
  }
}

void x64(Msg& m, uint64_t v) {
  static const char d[] = "0123456789abcdef";
  char s[17];
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = d[v & 15];
  s[16] = 0;
  m.s(s);
}

bool unhex(const char* s, void* out, size_t n) {
  auto* b = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < n; ++i) {
    int v = 0;
    for (int k = 0; k < 2; ++k) {
      char c = s[2 * i + k];
      int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (x < 0) return false;
      v = v * 16 + x;
    }
    b[i] = uint8_t(v);
  }
  return true;
}

uint64_t parse_u(const char*& p, int base) {
  uint64_t v = 0;
  for (;; ++p) {
    char c = *p;
    int x = c >= '0' && c <= '9' ? c - '0' : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (x < 0) break;
    v = v * uint64_t(base) + uint64_t(x);
  }
  return v;
}

uint64_t g_gen;

// Keys: [a-z0-9_.], at most 64 characters (the gid's is 7 + 20 + 32).
void k_lid(char* k, size_t n, uint16_t vlid) { Msg(k, n).s("ibv.").u(g_gen).s(".l.").u(vlid); }
void k_gid(char* k, size_t n, const ibv_gid& g) {
  Msg m(k, n);
  m.s("ibv.").u(g_gen).s(".g.");
  hex(m, &g, sizeof g);
}
void k_qp(char* k, size_t n, uint16_t vlid, uint32_t vqpn) { Msg(k, n).s("ibv.").u(g_gen).s(".q.").u(vlid).s(".").u(vqpn); }
// A UD QP (value empty): its peers learn every UD QP of the computation at restart, not only those
// their sends named before the checkpoint (a destination first used after the restart).
void k_ud(char* k, size_t n, uint16_t vlid, uint32_t vqpn) { Msg(k, n).s("ibv.").u(g_gen).s(".u.").u(vlid).s(".").u(vqpn); }
void k_tab(char* k, size_t n, uint64_t token) {
  Msg m(k, n);
  m.s("ibv.").u(g_gen).s(".t.");
  x64(m, token);
}
void k_addr(char* k, size_t n, uint64_t token) {  // ib2tcp: where the process listens
  Msg m(k, n);
  m.s("ibv.").u(g_gen).s(".a.");
  x64(m, token);
}

bool lookup(const char* key, char* val, size_t cap, char* msg, size_t mcap, const char* what) {
  int rc = inject::coord_lookup(key, true, int(g_lookup_ms), val, cap);
  if (rc == 1) return true;
  Msg(msg, mcap).s(what).s(" (").s(key).s(rc == 0 ? ") was not published: that peer is not part of the restarted computation" : ") cannot be looked up: no coordinator");
  return false;
}

// The numbers the program knows for the device's descriptors were not in the image (fd_owned_by_plugin),
// so anything opened since the restore may sit there, the device library's own new descriptors included
// (a new command socket on the old event pipe's number). They are held with /dev/null first (hold_fds),
// then each new descriptor is copied onto its old number (place_fd) and the rest let go (release_fds).
constexpr int kMaxHeld = 256;
int g_held[kMaxHeld];
int g_nheld;

bool hold_fd(int want, char* msg, size_t cap) {
  if (want < 0) return true;
  if (inject::fd_reserved(want)) inject::fd_move_reserved(want);  // the engine's new coordinator socket
  if (fcntl(want, F_GETFD) >= 0) {
    char link[64], target[128] = "";
    Msg(link, sizeof link).s("/proc/self/fd/").i(want);
    ssize_t n = readlink(link, target, sizeof target - 1);
    target[n > 0 ? n : 0] = 0;
    Msg(msg, cap).s("the device's descriptor ").i(want).s(" cannot come back: the number is taken (by ").s(target).s(")");
    return false;
  }
  int z = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (z < 0 || g_nheld == kMaxHeld || (z != want && dup3(z, want, O_CLOEXEC) < 0)) {
    Msg(msg, cap).s("cannot hold descriptor ").i(want).s(": ").err(errno);
    if (z >= 0) close(z);
    return false;
  }
  if (z != want) close(z);
  g_held[g_nheld++] = want;
  return true;
}

bool held(int fd) {
  for (int i = 0; i < g_nheld; ++i)
    if (g_held[i] == fd) {
      g_held[i] = g_held[--g_nheld];
      return true;
    }
  return false;
}

void release_fds() {
  while (g_nheld) close(g_held[--g_nheld]);
}

bool hold_fds(char* msg, size_t cap) {
  g_nheld = 0;
  for (VCtx* c = st.ctxs; c; c = c->next)
    if (!hold_fd(c->sh.cmd_fd, msg, cap) || (c->sh.async_fd != c->sh.cmd_fd && !hold_fd(c->sh.async_fd, msg, cap)))
      return false;
  for (VChan* ch = st.chans; ch; ch = ch->next)
    if (!hold_fd(ch->sh.fd, msg, cap)) return false;
  return true;
}

// Puts `realfd` (the new object's) at the number the program knows, which hold_fds kept free for it.
bool place_fd(int realfd, int want, char* msg, size_t cap, const char* what) {
  if (want < 0 || !held(want)) return true;  // not held: already placed (the same number twice)
  if (dup3(realfd, want, O_CLOEXEC) < 0) {
    Msg(msg, cap).s("the device's ").s(what).s(": dup3 to fd ").i(want).s(": ").err(errno);
    return false;
  }
  return true;
}

uint16_t ctx_vlid(const VCtx* c, int port) { return c->vlid[port >= 1 && port <= kPorts ? port : 1]; }

bool reopen(VCtx* c, char* msg, size_t cap) {
  int n = 0;
  ibv_device** devs = real.get_device_list(&n);
  ibv_device* dev = nullptr;
  for (int i = 0; devs && i < n; ++i) {
    const char* name = real.get_device_name(devs[i]);
    if ((name && strcmp(name, c->devname) == 0) || tcp::active) dev = devs[i];
  }
  tcp::next.ctx = c;
  ibv_context* r = dev ? real.open_device(dev) : nullptr;
  tcp::next.ctx = nullptr;
  if (devs) real.free_device_list(devs);
  if (!r) {
    Msg(msg, cap).s("device ").s(c->devname).s(dev ? " cannot be opened: " : " is not on this host").err(dev ? errno : ENODEV);
    return false;
  }
  c->real = r;
  c->sh.device = dev;
  if (!place_fd(r->cmd_fd, c->sh.cmd_fd, msg, cap, "command descriptor") ||
      !place_fd(r->async_fd, c->sh.async_fd, msg, cap, "event descriptor"))
    return false;
  for (int p = 1; p <= kPorts; ++p) {
    if (!c->vlid[p]) continue;
    ibv_port_attr a;
    memset(&a, 0, sizeof a);
    if (real.query_port(r, uint8_t(p), reinterpret_cast<_compat_ibv_port_attr*>(&a)) != 0) {
      Msg(msg, cap).s("device ").s(c->devname).s(" has no port ").i(p).s(" any more");
      return false;
    }
    c->rlid[p] = a.lid;
    ids_put_lid(c->vlid[p], a.lid);
    char key[80], val[32];
    k_lid(key, sizeof key, c->vlid[p]);
    Msg(val, sizeof val).u(a.lid);
    inject::coord_publish(key, val);
    for (int i = 0; i < kGids; ++i) {
      if (!(c->gid_seen[p] & (1u << i))) continue;
      if (real.query_gid(r, uint8_t(p), i, &c->rgid[p][i]) != 0) continue;
      ids_put_gid(c->vgid[p][i], c->rgid[p][i], c->vlid[p]);
      char gval[96];
      Msg gm(gval, sizeof gval);
      gm.u(c->vlid[p]).s(" ");
      hex(gm, &c->rgid[p][i], sizeof(ibv_gid));
      k_gid(key, sizeof key, c->vgid[p][i]);
      inject::coord_publish(key, gval);
    }
  }
  return true;
}

int make_again(char* msg, size_t cap);

int to_init(VQp* q, char* msg, size_t cap) {
  ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = q->attr.pkey_index;
  a.port_num = q->attr.port_num ? q->attr.port_num : 1;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (q->sh.qp_type == IBV_QPT_UD) {
    a.qkey = q->attr.qkey;
    mask |= IBV_QP_QKEY;
  } else {
    a.qp_access_flags = q->attr.qp_access_flags;
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  if (real.modify_qp(q->real, &a, mask) != 0) {
    Msg(msg, cap).s("QP ").u(q->sh.qp_num).s(": INIT failed: ").err(errno);
    return -EIO;
  }
  return 0;
}

int reconnect(uint64_t gen, char* msg, size_t cap) {
  if (!st.ctxs || !st.restored) return 0;
  g_gen = gen;
  ids_clear();
  int rc = hold_fds(msg, cap) ? make_again(msg, cap) : -EIO;
  release_fds();
  return rc;
}

int make_again(char* msg, size_t cap) {
  for (VCtx* c = st.ctxs; c; c = c->next)
    if (!reopen(c, msg, cap)) return -EIO;
  for (VPd* p = st.pds; p; p = p->next)
    if (!(p->real = real.alloc_pd(p->ctx->real))) {
      Msg(msg, cap).s("cannot allocate a protection domain: ").err(errno);
      return -EIO;
    }
  // Each process's memory regions: virtual rkey -> new rkey, as one value under the process's token.
  size_t tab_cap = 64;
  for (VMr* m = st.mrs; m; m = m->next) tab_cap += 40;
  char* tab = static_cast<char*>(mmap(nullptr, tab_cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (tab == MAP_FAILED) {
    Msg(msg, cap).s("no memory");
    return -ENOMEM;
  }
  Msg tm(tab, tab_cap);
  for (VMr* m = st.mrs; m; m = m->next) {
    tcp::next.lkey = m->sh.lkey;
    tcp::next.rkey = m->sh.rkey;
    ibv_mr* r = m->iova2 ? real.reg_mr_iova2(m->pd->real, m->sh.addr, m->sh.length, m->iova, unsigned(m->access))
                         : real.reg_mr(m->pd->real, m->sh.addr, m->sh.length, m->access);
    tcp::next.lkey = tcp::next.rkey = 0;
    if (!r) {
      Msg(msg, cap).s("cannot register memory at ").u(uintptr_t(m->sh.addr)).s(" (").u(m->sh.length).s(" bytes): ").err(errno);
      munmap(tab, tab_cap);
      return -EIO;
    }
    m->real = r;
    x64(tm, m->sh.rkey);
    tm.s(":");
    x64(tm, r->rkey);
    tm.s(",");
  }
  char key[96];
  k_tab(key, sizeof key, st.token);
  inject::coord_publish(key, tab);
  munmap(tab, tab_cap);
  if (tcp::active) {
    char addr[64];
    if (!tcp::address(addr, sizeof addr)) {
      Msg(msg, cap).s("ib2tcp: cannot listen for the peers' connections");
      return -EIO;
    }
    k_addr(key, sizeof key, st.token);
    inject::coord_publish(key, addr);
  }
  for (VChan* ch = st.chans; ch; ch = ch->next) {
    if (!(ch->real = real.create_comp_channel(ch->ctx->real))) {
      Msg(msg, cap).s("cannot create a completion channel: ").err(errno);
      return -EIO;
    }
    if (!place_fd(ch->real->fd, ch->sh.fd, msg, cap, "completion channel")) return -EIO;
  }
  for (VCq* q = st.cqs; q; q = q->next) {
    q->real = real.create_cq(q->ctx->real, q->cqe_asked, q, q->chan ? q->chan->real : nullptr, q->comp_vector);
    if (!q->real) {
      Msg(msg, cap).s("cannot create a completion queue of ").i(q->cqe_asked).s(" entries: ").err(errno);
      return -EIO;
    }
    q->events_before += q->events_real;
    q->events_real = 0;
    if (q->armed) ibv_req_notify_cq(q->real, q->armed_solicited);
  }
  for (VSrq* s = st.srqs; s; s = s->next) {
    ibv_srq_init_attr a = s->init;
    a.srq_context = s;
    a.attr.srq_limit = 0;
    if (!(s->real = real.create_srq(s->pd->real, &a))) {
      Msg(msg, cap).s("cannot create a shared receive queue: ").err(errno);
      return -EIO;
    }
    for (uint32_t i = 0; i < s->recvs.n; ++i)
      if (repost_recv(nullptr, s, s->recvs.at(i)) != 0) {
        Msg(msg, cap).s("cannot post a receive to a shared receive queue again");
        return -EIO;
      }
    if (s->init.attr.srq_limit) {
      ibv_srq_attr la = s->init.attr;
      real.modify_srq(s->real, &la, IBV_SRQ_LIMIT);
    }
  }
  for (VQp* q = st.qps; q; q = q->next) {
    ibv_qp_init_attr a = q->init;
    a.qp_context = q;
    a.send_cq = q->scq ? q->scq->real : nullptr;
    a.recv_cq = q->rcq ? q->rcq->real : nullptr;
    a.srq = q->srq ? q->srq->real : nullptr;
    tcp::next.qpn = q->sh.qp_num;
    q->real = real.create_qp(q->pd->real, &a);
    tcp::next.qpn = 0;
    if (!q->real) {
      Msg(msg, cap).s("cannot create QP ").u(q->sh.qp_num).s(" again: ").err(errno);
      return -EIO;
    }
    if (q->ckpt_state == IBV_QPS_RESET) continue;
    if (to_init(q, msg, cap) != 0) return -EIO;
    if (!q->srq)
      for (uint32_t i = 0; i < q->recvs.n; ++i)
        if (repost_recv(q, nullptr, q->recvs.at(i)) != 0) {
          Msg(msg, cap).s("QP ").u(q->sh.qp_num).s(": cannot post a receive again");
          return -EIO;
        }
    const uint16_t vl = ctx_vlid(q->pd->ctx, q->attr.port_num);
    const uint16_t rl = lid_to_real(vl);
    ids_put_qpn(vl, q->sh.qp_num, rl, q->real->qp_num);
    char val[64];
    Msg vm(val, sizeof val);
    vm.u(rl).s(" ").u(q->real->qp_num).s(" ");
    x64(vm, st.token);
    vm.s(" ").u(q->ckpt_rq_psn);
    if (tcp::active) vm.s(" t");  // over TCP: its peers must be too
    k_qp(key, sizeof key, vl, q->sh.qp_num);
    inject::coord_publish(key, val);
    if (q->sh.qp_type == IBV_QPT_UD) {
      k_ud(key, sizeof key, vl, q->sh.qp_num);
      inject::coord_publish(key, "");
    }
  }
  // Completions name the new QP numbers now.
  index_clear(&st.qp_by_rqpn);
  for (VQp* q = st.qps; q; q = q->next)
    if (!index_refill(&st.qp_by_rqpn, index_key(q->pd->ctx, q->real->qp_num), q)) {
      Msg(msg, cap).s("the QP index is full");
      return -ENOMEM;
    }
  return 0;
}

void kick_owed();

// The tokens whose MR tables are in, so each is fetched once.
constexpr int kMaxTokens = 1024;
uint64_t g_tokens[kMaxTokens];
int g_ntokens;

// Learns a peer's lid (and gid), QP and memory keys. vl: the peer's virtual lid (0: from the gid).
// psn_out (may be null): the PSN the peer's QP expected next at the checkpoint.
int learn_peer(const ibv_ah_attr& ah, uint32_t vqpn, uint16_t* vl_out, uint32_t* psn_out, char* msg, size_t cap) {
  static char val[1 << 20];  // a table of memory keys (one value of the coordinator: at most 1 MiB)
  char key[96];
  uint16_t vl = ah.is_global ? 0 : ah.dlid;
  if (ah.is_global) {
    k_gid(key, sizeof key, ah.grh.dgid);
    if (!lookup(key, val, sizeof val, msg, cap, "the peer's gid")) return -EIO;
    const char* p = val;
    vl = uint16_t(parse_u(p, 10));
    ibv_gid rg;
    if (*p != ' ' || !unhex(p + 1, &rg, sizeof rg)) {
      Msg(msg, cap).s("malformed value of ").s(key);
      return -EPROTO;
    }
    ids_put_gid(ah.grh.dgid, rg, vl);
  }
  *vl_out = vl;
  k_lid(key, sizeof key, vl);
  if (!lookup(key, val, sizeof val, msg, cap, "the peer's lid")) return -EIO;
  const char* p = val;
  ids_put_lid(vl, uint16_t(parse_u(p, 10)));
  if (vqpn == 0) return 0;
  k_qp(key, sizeof key, vl, vqpn);
  if (!lookup(key, val, sizeof val, msg, cap, "the peer's QP")) return -EIO;
  p = val;
  const uint16_t rl = uint16_t(parse_u(p, 10));
  if (*p++ != ' ') return -EPROTO;
  const uint32_t rq = uint32_t(parse_u(p, 10));
  if (*p++ != ' ') return -EPROTO;
  const uint64_t token = parse_u(p, 16);
  if (*p++ != ' ') return -EPROTO;
  const uint32_t psn = uint32_t(parse_u(p, 10));
  if (psn_out) *psn_out = psn;
  const bool peer_tcp = p[0] == ' ' && p[1] == 't';
  if (peer_tcp != tcp::active) {
    Msg(msg, cap).s("the peer's QP (").s(key).s(") was restarted ").s(peer_tcp ? "over TCP" : "on a verbs device")
        .s(" and this process ").s(tcp::active ? "over TCP" : "on a verbs device")
        .s(": every process of a restart must have REVIVE_IB2TCP alike");
    return -EPROTO;
  }
  ids_put_qpn(vl, vqpn, rl, rq);
  if (tcp::active && !tcp::learn(rl, rq, token)) {
    Msg(msg, cap).s("ib2tcp: too many peers");
    return -ENOMEM;
  }
  for (int i = 0; i < g_ntokens; ++i)
    if (g_tokens[i] == token) return 0;
  if (g_ntokens < kMaxTokens) g_tokens[g_ntokens++] = token;
  if (tcp::active) {
    k_addr(key, sizeof key, token);
    if (!lookup(key, val, sizeof val, msg, cap, "the peer's TCP address (ib2tcp)")) return -EIO;
    if (!tcp::peer_address(token, val)) {
      Msg(msg, cap).s("malformed value of ").s(key).s(": ").s(val);
      return -EPROTO;
    }
  }
  k_tab(key, sizeof key, token);
  if (!lookup(key, val, sizeof val, msg, cap, "the peer's memory keys")) return -EIO;
  for (p = val; *p;) {
    uint32_t vk = uint32_t(parse_u(p, 16));
    if (*p++ != ':') break;
    uint32_t rk = uint32_t(parse_u(p, 16));
    if (!ids_put_rkey(vl, vk, rk)) {
      Msg(msg, cap).s("too many memory keys");
      return -ENOMEM;
    }
    if (*p == ',') ++p;
  }
  return 0;
}

// A process with a UD QP may send to any UD QP of the computation after the restart, including one it
// never named before the checkpoint (its number came out of band, its address handle is made later):
// it learns every published UD QP, and every published gid (an address handle by GID), walking the
// coordinator's keys. Bounded by what the computation published; only restarts of UD programs pay it.
int learn_ud_peers(char* msg, size_t cap) {
  char prefix[64], at[128], val[8];
  for (int pass = 0; pass < 2; ++pass) {
    Msg(prefix, sizeof prefix).s("ibv.").u(g_gen).s(pass == 0 ? ".u." : ".g.");
    const size_t pn = strlen(prefix);
    memcpy(at, prefix, pn + 1);
    for (;;) {
      int r = inject::coord_next(prefix, at, int(g_lookup_ms), at, sizeof at, val, sizeof val);
      if (r == 0) break;
      if (r < 0) {
        Msg(msg, cap).s("cannot list the computation's UD QPs and gids (").s(prefix).s("): coordinator lost");
        return -EIO;
      }
      ibv_ah_attr ah;
      memset(&ah, 0, sizeof ah);
      uint32_t vqpn = 0;
      const char* p = at + pn;
      if (pass == 0) {
        ah.dlid = uint16_t(parse_u(p, 10));
        if (*p++ != '.') continue;
        vqpn = uint32_t(parse_u(p, 10));
        if (*p) continue;
      } else {
        ah.is_global = 1;
        if (!unhex(p, &ah.grh.dgid, sizeof ah.grh.dgid)) continue;
      }
      uint16_t vl = 0;
      if (learn_peer(ah, vqpn, &vl, nullptr, msg, cap) != 0) return -EIO;
    }
  }
  return 0;
}

int refill(uint64_t gen, char* msg, size_t cap) {
  if (!st.ctxs || !st.restored) return 0;
  g_gen = gen;
  g_ntokens = 0;
  for (VQp* q = st.qps; q; q = q->next) {
    if (q->ckpt_state == IBV_QPS_RESET || q->ckpt_state == IBV_QPS_INIT) continue;
    const bool ud = q->sh.qp_type == IBV_QPT_UD;
    // Sends start again where the peer's receive side stopped: every send it had not received is in our
    // ring and goes again (restored()), so the first of them must carry the PSN the peer expects.
    uint32_t peer_psn = q->ckpt_sq_psn;
    ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    int mask = IBV_QP_STATE;
    a.qp_state = IBV_QPS_RTR;
    if (!ud) {
      uint16_t vl = 0;
      if (learn_peer(q->attr.ah_attr, q->attr.dest_qp_num, &vl, &peer_psn, msg, cap) != 0) return -EIO;
      q->rvlid = vl;
      a.ah_attr = q->attr.ah_attr;
      if (a.ah_attr.is_global) gid_to_real(q->attr.ah_attr.grh.dgid, &a.ah_attr.grh.dgid);
      if (a.ah_attr.dlid) a.ah_attr.dlid = lid_to_real(a.ah_attr.dlid);
      a.dest_qp_num = qpn_to_real(vl, q->attr.dest_qp_num);
      a.path_mtu = q->attr.path_mtu;
      a.rq_psn = q->ckpt_rq_psn;
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      if (q->sh.qp_type == IBV_QPT_RC) {
        a.max_dest_rd_atomic = q->attr.max_dest_rd_atomic;
        a.min_rnr_timer = q->attr.min_rnr_timer;
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      }
    }
    if (real.modify_qp(q->real, &a, mask) != 0) {
      Msg(msg, cap).s("QP ").u(q->sh.qp_num).s(": RTR failed: ").err(errno);
      return -EIO;
    }
    if (q->ckpt_state == IBV_QPS_RTR) continue;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = ud ? q->ckpt_sq_psn : peer_psn;
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (q->sh.qp_type == IBV_QPT_RC) {
      a.timeout = q->attr.timeout;
      a.retry_cnt = q->attr.retry_cnt;
      a.rnr_retry = q->attr.rnr_retry;
      a.max_rd_atomic = q->attr.max_rd_atomic;
      mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    if (real.modify_qp(q->real, &a, mask) != 0) {
      Msg(msg, cap).s("QP ").u(q->sh.qp_num).s(": RTS failed: ").err(errno);
      return -EIO;
    }
    if (q->ckpt_state == IBV_QPS_ERR || q->ckpt_state == IBV_QPS_SQE) {
      memset(&a, 0, sizeof a);
      a.qp_state = IBV_QPS_ERR;
      real.modify_qp(q->real, &a, IBV_QP_STATE);
    }
  }
  // Address handles (UD), and the QPs their sends named before the checkpoint.
  for (VAh* h = st.ahs; h; h = h->next) {
    uint16_t vl = 0;
    if (learn_peer(h->attr, 0, &vl, nullptr, msg, cap) != 0) return -EIO;
    h->rvlid = vl;
    ibv_ah_attr a = h->attr;
    if (a.is_global) gid_to_real(h->attr.grh.dgid, &a.grh.dgid);
    if (a.dlid) a.dlid = lid_to_real(a.dlid);
    if (!(h->real = real.create_ah(h->pd->real, &a))) {
      Msg(msg, cap).s("cannot create an address handle for lid ").u(vl).s(": ").err(errno);
      return -EIO;
    }
  }
  bool any_ud = false;
  for (VQp* q = st.qps; q; q = q->next) {
    if (q->sh.qp_type != IBV_QPT_UD) continue;
    any_ud = true;
    for (int i = 0; i < q->nud; ++i) {
      VAh* h = static_cast<VAh*>(q->ud_ah[i]);
      uint16_t vl = 0;
      if (learn_peer(h->attr, q->ud_qpn[i], &vl, nullptr, msg, cap) != 0) return -EIO;
    }
  }
  if (any_ud && learn_ud_peers(msg, cap) != 0) return -EIO;
  kick_owed();
  return 0;
}

// Raises a completion event on c's new CQ: a program blocked on its channel was owed one (an unread
// event at the checkpoint, or completions that came while it was armed and now wait in the virtual
// queue). A QP of ours connected to itself writes zero bytes with a signaled RDMA write; the poll
// wrappers drop its completion. Zero-length RDMA writes check no rkey (IB spec), so none is needed.
void kick(VCq* c) {
  if (st.nkick == State::kMaxKicks) return;
  VCtx* x = c->ctx;
  ibv_pd* pd = real.alloc_pd(x->real);
  if (!pd) return;
  ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = ia.recv_cq = c->real;
  ia.qp_type = IBV_QPT_RC;
  ia.sq_sig_all = 1;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = real.create_qp(pd, &ia);
  if (!qp) {
    real.dealloc_pd(pd);
    return;
  }
  st.kick_cq[st.nkick] = c;
  st.kick_qp[st.nkick] = qp;
  st.kick_pd[st.nkick] = pd;
  st.kick_qpn[st.nkick++] = qp->qp_num;
  ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (real.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = qp->qp_num;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = 1;
  a.ah_attr.dlid = x->rlid[1];
  if (!a.ah_attr.dlid) {  // no LID (RoCE): by the port's gid
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = x->rgid[1][0];
    a.ah_attr.grh.hop_limit = 1;
  }
  if (real.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (real.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
    return;
  ibv_req_notify_cq(c->real, 0);
  ibv_send_wr w;
  post_fence(qp, &w);
}

void kick_owed() {
  for (VChan* ch = st.chans; ch; ch = ch->next) {
    VCq* pick = nullptr;  // the channel's unread event: for the CQ with completions waiting, else its first
    for (VCq* c = st.cqs; c; c = c->next)
      if (c->chan == ch && (!pick || (!pick->vq_n && c->vq_n))) pick = c;
    bool kicked = false;
    for (VCq* c = st.cqs; c; c = c->next) {
      if (c->chan != ch) continue;
      if ((ch->event_pending && c == pick) || (c->armed && c->vq_n)) {
        kick(c);
        kicked = true;
      }
    }
    ch->event_pending = ch->event_pending && !kicked;
  }
}

// Every peer is in RTR with its receives posted: the sends that were in flight go again, in order.
void restored(uint64_t) {
  if (!st.restored) return;
  st.restored = false;
  if (tcp::active && !tcp::start())
    plugins::warn("verbs: ib2tcp: cannot start the progress thread; nothing will arrive over TCP");
  for (VQp* q = st.qps; q; q = q->next) {
    Ring& r = q->sends;
    uint32_t keep = 0;
    const uint32_t n = r.n;
    for (uint32_t i = 0; i < n; ++i) {  // compact: drop our fences and UD sends nobody waits for
      auto* e = static_cast<SendRec*>(r.at(i));
      if (e->probe || (q->sh.qp_type == IBV_QPT_UD && !signaled(q, e))) continue;
      if (keep != i) memcpy(r.at(keep), e, r.entry);
      ++keep;
    }
    r.n = keep;
    if (q->ckpt_state != IBV_QPS_RTS) continue;
    for (uint32_t i = 0; i < keep; ++i)
      if (repost_send(q, static_cast<SendRec*>(r.at(i))) != 0) {
        char line[160];
        plugins::warn(Msg(line, sizeof line).s("verbs: QP ").u(q->sh.qp_num).s(": a send in flight at the checkpoint could not be posted again").c_str());
        break;
      }
  }
}

}  // namespace

// A forked child holds none of its parent's device objects (the device library forgets them too, or
// must not be used on them): it starts with no shadows and a token of its own. Registered by resolve(),
// so only processes that opened a device pay for it at fork. The engine's checkpoint writer is made with
// a raw clone and runs no fork handlers.
void forked_child() {
  st = State{};
  while (st.token == 0) (void)!getrandom(&st.token, sizeof st.token, 0);
}

}  // namespace revive::verbs

namespace revive::inject {

using namespace revive::verbs;

// The engine's (checkpoint.cpp); this default serves builds without it.
__attribute__((weak)) const char* restart_env(const char*) { return nullptr; }
__attribute__((weak)) int coord_next(const char*, const char*, int, char*, size_t, char*, size_t) { return -1; }

bool fd_owned_by_plugin(int fd) {
  if (fd < 0) return false;
  for (VCtx* c = st.ctxs; c; c = c->next)
    if (fd == c->sh.cmd_fd || fd == c->sh.async_fd || (c->real && (fd == c->real->cmd_fd || fd == c->real->async_fd)))
      return true;
  for (VChan* ch = st.chans; ch; ch = ch->next)
    if (fd == ch->sh.fd || (ch->real && fd == ch->real->fd)) return true;
  return false;
}

extern const Plugin kVerbsPlugin = {.name = "verbs",
                                    .version = 1,
                                    .init = verbs::init,
                                    .save = verbs::save,
                                    .resume = verbs::resume,
                                    .restore = verbs::restore,
                                    .drain = verbs::drain,
                                    .reconnect = verbs::reconnect,
                                    .refill = verbs::refill,
                                    .restored = verbs::restored};

}  // namespace revive::inject
