// The verbs plugin's wrappers: every ibv_* entry point that creates, uses or destroys a device object
// (docs/verbs.md). The program gets shadows; the device library gets the real objects. Runs on user
// threads (malloc allowed), each call inside one of the engine's critical sections, so a checkpoint never
// stops a thread half-way through the device library.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hooks/hooks_abi.h"
#include "inject/plugin.h"
#include "plugins/verbs/verbs.h"

#define REVIVE_EXPORT extern "C" __attribute__((visibility("default")))

namespace revive::verbs {

Real real;
State st;

namespace {

bool g_resolved;
void* g_lib = RTLD_NEXT;  // where the device library's definitions are looked up

template <typename F>
bool sym(F* f, const char* name) {
  *f = reinterpret_cast<F>(dlsym(g_lib, name));
  return *f != nullptr;
}

// A library that loaded libibverbs with dlopen(RTLD_LOCAL) (UCX's IB transport does) still calls our
// wrappers, which come first in the global scope; the definitions are then found through the library
// already loaded, not through RTLD_NEXT.
void find_library() {
  if (dlsym(RTLD_NEXT, "ibv_open_device")) return;
  if (void* h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD)) g_lib = h;
}

}  // namespace

bool resolve() {
  if (__atomic_load_n(&g_resolved, __ATOMIC_ACQUIRE)) return true;
  find_library();
  bool ok = sym(&real.get_device_list, "ibv_get_device_list") && sym(&real.free_device_list, "ibv_free_device_list") &&
            sym(&real.get_device_name, "ibv_get_device_name") && sym(&real.open_device, "ibv_open_device") &&
            sym(&real.close_device, "ibv_close_device") && sym(&real.query_device, "ibv_query_device") &&
            sym(&real.query_port, "ibv_query_port") && sym(&real.query_gid, "ibv_query_gid") &&
            sym(&real.query_pkey, "ibv_query_pkey") && sym(&real.alloc_pd, "ibv_alloc_pd") &&
            sym(&real.dealloc_pd, "ibv_dealloc_pd") && sym(&real.reg_mr, "ibv_reg_mr") &&
            sym(&real.reg_mr_iova2, "ibv_reg_mr_iova2") && sym(&real.dereg_mr, "ibv_dereg_mr") &&
            sym(&real.create_comp_channel, "ibv_create_comp_channel") &&
            sym(&real.destroy_comp_channel, "ibv_destroy_comp_channel") && sym(&real.create_cq, "ibv_create_cq") &&
            sym(&real.destroy_cq, "ibv_destroy_cq") && sym(&real.get_cq_event, "ibv_get_cq_event") &&
            sym(&real.ack_cq_events, "ibv_ack_cq_events") && sym(&real.create_srq, "ibv_create_srq") &&
            sym(&real.modify_srq, "ibv_modify_srq") && sym(&real.query_srq, "ibv_query_srq") &&
            sym(&real.destroy_srq, "ibv_destroy_srq") && sym(&real.create_qp, "ibv_create_qp") &&
            sym(&real.modify_qp, "ibv_modify_qp") && sym(&real.query_qp, "ibv_query_qp") &&
            sym(&real.destroy_qp, "ibv_destroy_qp") && sym(&real.create_ah, "ibv_create_ah") &&
            sym(&real.destroy_ah, "ibv_destroy_ah") && sym(&real.get_async_event, "ibv_get_async_event") &&
            sym(&real.ack_async_event, "ibv_ack_async_event");
  if (!ok) {
    errno = ENOSYS;
    return false;
  }
  if (!st.token) {
    uint64_t t = 0;
    while (t == 0) (void)!getrandom(&t, sizeof t, 0);
    st.token = t;
  }
  pthread_atfork(nullptr, nullptr, forked_child);
  __atomic_store_n(&g_resolved, true, __ATOMIC_RELEASE);
  return true;
}

namespace {

template <typename T>
void push(T** head, T* x) {
  lock(&st.list_lock);
  x->next = *head;
  *head = x;
  unlock(&st.list_lock);
}

template <typename T>
void unlink(T** head, T* x) {
  lock(&st.list_lock);
  for (T** p = head; *p; p = &(*p)->next)
    if (*p == x) {
      *p = x->next;
      break;
    }
  unlock(&st.list_lock);
}

// A new shadow for the device's object r, or nullptr (r destroyed, errno ENOMEM).
template <typename V, typename R>
V* shadow_for(R* r, int (*destroy)(R*)) {
  auto* v = static_cast<V*>(calloc(1, sizeof(V)));
  if (!v) {
    destroy(r);
    errno = ENOMEM;
  }
  return v;
}

// What a shadow owns besides itself: the rings of posted requests.
template <typename V>
void release(V*) {}
void release(VQp* q) {
  free(q->sends.mem);
  free(q->recvs.mem);
}
void release(VSrq* q) { free(q->recvs.mem); }

// Destroys the device's object, then its shadow (kept when the device refuses, e.g. EBUSY).
template <typename V, typename R>
int destroy_shadow(V* v, V** head, int (*destroy)(R*)) {
  int rc = destroy(v->real);
  if (rc) return rc;
  unlink(head, v);
  release(v);
  free(v);
  return 0;
}

VCtx* C(ibv_context* c) { return reinterpret_cast<VCtx*>(c); }
VPd* P(ibv_pd* p) { return reinterpret_cast<VPd*>(p); }
VCq* Q(ibv_cq* c) { return reinterpret_cast<VCq*>(c); }
VQp* QP(ibv_qp* q) { return reinterpret_cast<VQp*>(q); }
VSrq* S(ibv_srq* s) { return reinterpret_cast<VSrq*>(s); }
VChan* CH(ibv_comp_channel* c) { return reinterpret_cast<VChan*>(c); }

// Whether p is one of our shadows (else the device's own object, made through the extended verbs the
// shadows forward: it goes to the device untouched).
template <typename V>
bool ours(V* head, const void* p) {
  if (!p) return false;
  lock(&st.list_lock);
  V* v = head;
  while (v && static_cast<const void*>(&v->sh) != p) v = v->next;
  unlock(&st.list_lock);
  return v != nullptr;
}

// The shadow whose device object is r, or nullptr.
template <typename V, typename R>
V* by_real(V* head, const R* r) {
  lock(&st.list_lock);
  V* v = head;
  while (v && v->real != r) v = v->next;
  unlock(&st.list_lock);
  return v;
}

template <typename R, typename V>
R* to_real(V* head, R* p) {  // a shadow's device object, or p itself when it is the device's
  return ours(head, p) ? reinterpret_cast<V*>(p)->real : p;
}

void mark_unsupported(const char* what) {
  lock(&st.list_lock);
  if (!st.unsupported[0]) {
    const char pre[] = "the program holds ";
    const char post[] = ", which the verbs plugin cannot make again (extended verbs, docs/verbs.md)";
    const char* parts[3] = {pre, what, post};
    size_t n = 0;
    for (const char* t : parts)
      for (; *t && n + 1 < sizeof st.unsupported; ++t) st.unsupported[n++] = *t;
    st.unsupported[n] = 0;
  }
  unlock(&st.list_lock);
}

// The program's view of a port: virtual lid (the first one seen), and sm_lid likewise.
void virtual_port(VCtx* c, uint8_t port, ibv_port_attr* a) {
  if (port < 1 || port > kPorts) return;
  if (!c->vlid[port]) c->vlid[port] = c->rlid[port] = a->lid;
  if (a->lid == c->rlid[port]) a->lid = c->vlid[port];
  if (a->sm_lid == c->rlid[port]) a->sm_lid = c->vlid[port];
}

// RC/UC: the peer's virtual lid, from the address the program gave (a gid is looked up at a restart).
uint16_t peer_vlid(const ibv_ah_attr& a) { return a.is_global ? gid_vlid(a.grh.dgid) : a.dlid; }

// Translates an address vector from the program's (virtual) ids to the device's.
void real_ah_attr(const ibv_ah_attr& v, ibv_ah_attr* r) {
  *r = v;
  if (!st.remapped) return;
  if (v.is_global) gid_to_real(v.grh.dgid, &r->grh.dgid);
  if (v.dlid) r->dlid = lid_to_real(v.dlid);
}

}  // namespace

void note_ud(VQp* q, void* ah, uint32_t qpn) {
  for (int i = 0; i < q->nud; ++i)
    if (q->ud_ah[i] == ah && q->ud_qpn[i] == qpn) return;
  if (q->nud == VQp::kMaxUd) return;
  q->ud_ah[q->nud] = ah;
  q->ud_qpn[q->nud++] = qpn;
}

// ---- the ops of the shadow context (the inline verbs of <infiniband/verbs.h> call these) ----

int op_poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  VCq* c = Q(cq);
  Section s;
  int got = 0;
  if (__atomic_load_n(&c->vq_n, __ATOMIC_ACQUIRE)) {
    lock(&c->lock);
    while (got < n && c->vq_n) {
      wc[got++] = c->vq[c->vq_head];
      c->vq_head = (c->vq_head + 1) % c->vq_cap;
      --c->vq_n;
    }
    unlock(&c->lock);
  }
  while (got < n) {
    int r = ibv_poll_cq(c->real, n - got, wc + got);
    if (r < 0) return got ? got : r;
    if (r == 0) break;
    int kept = account(c, wc + got, r);
    got += kept;
    if (kept == r) break;  // none of ours: what the device had
  }
  return got;
}

int op_req_notify_cq(ibv_cq* cq, int solicited_only) {
  VCq* c = Q(cq);
  Section s;
  c->armed = true;
  c->armed_solicited = solicited_only != 0;
  return ibv_req_notify_cq(c->real, solicited_only);
}

int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  VQp* q = QP(qp);
  Section s;
  lock(&q->lock);
  int rc = 0;
  for (ibv_send_wr* w = wr; w; w = w->next) {
    rc = post_send_real(q, w);
    if (rc) {
      *bad = w;
      break;
    }
    record_send(q, w, false);
    if (q->sh.qp_type == IBV_QPT_UD) note_ud(q, w->wr.ud.ah, w->wr.ud.remote_qpn);
  }
  unlock(&q->lock);
  return rc;
}

namespace {

// Posts a chain of receives to a QP's receive queue or an SRQ, recording each the device took.
int post_recvs(VQp* q, VSrq* srq, Ring* ring, volatile int* l, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Section s;
  lock(l);
  int rc = 0;
  for (ibv_recv_wr* w = wr; w; w = w->next) {
    rc = post_recv_real(q, srq, w);
    if (rc) {
      *bad = w;
      break;
    }
    record_recv(ring, w);
  }
  unlock(l);
  return rc;
}

}  // namespace

int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  VQp* q = QP(qp);
  return post_recvs(q, nullptr, &q->recvs, &q->lock, wr, bad);
}

int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  VSrq* q = S(srq);
  return post_recvs(nullptr, q, &q->recvs, &q->lock, wr, bad);
}

// ---- extended verbs: forwarded to the device; the objects they make are the device's, not ours ----

namespace {

template <typename F>
F dev_op(ibv_context* ctx, size_t off) {  // the device context's extended op at offset off, or nullptr
  verbs_context* v = verbs_get_ctx(C(ctx)->real);
  if (!v || v->sz < sizeof(verbs_context) - off) return nullptr;
  F f;
  memcpy(&f, reinterpret_cast<char*>(v) + off, sizeof f);
  return f;
}
#define DEV_OP(ctx, op) dev_op<decltype(verbs_context::op)>(ctx, offsetof(verbs_context, op))

int fx_query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* in, ibv_device_attr_ex* a, size_t len) {
  auto f = DEV_OP(ctx, query_device_ex);
  Section s;
  return f ? f(C(ctx)->real, in, a, len) : EOPNOTSUPP;
}

int fx_query_rt_values(ibv_context* ctx, ibv_values_ex* v) {
  auto f = DEV_OP(ctx, query_rt_values);
  Section s;
  return f ? f(C(ctx)->real, v) : EOPNOTSUPP;
}

// Calls the device's extended op f (nullptr: the device has none) with the device's context; what it
// makes is the device's, and the process can no longer be checkpointed (`what` says why).
template <typename Ret, typename Attr>
Ret* forward_make(Ret* (*f)(ibv_context*, Attr*), ibv_context* ctx, Attr* a, const char* what) {
  if (!f) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  Section s;
  Ret* r = f(C(ctx)->real, a);
  if (r) mark_unsupported(what);
  return r;
}

ibv_cq_ex* fx_create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* a) {
  ibv_cq_init_attr_ex r = *a;
  r.channel = to_real(st.chans, a->channel);
  if (r.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) r.parent_domain = to_real(st.pds, a->parent_domain);
  return forward_make(DEV_OP(ctx, create_cq_ex), ctx, &r, "a CQ made with ibv_create_cq_ex");
}

ibv_qp* fx_create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* a) {
  ibv_qp_init_attr_ex r = *a;
  r.send_cq = to_real(st.cqs, a->send_cq);
  r.recv_cq = to_real(st.cqs, a->recv_cq);
  r.srq = to_real(st.srqs, a->srq);
  if (r.comp_mask & IBV_QP_INIT_ATTR_PD) r.pd = to_real(st.pds, a->pd);
  ibv_qp* qp = forward_make(DEV_OP(ctx, create_qp_ex), ctx, &r, "a QP made with ibv_create_qp_ex");
  if (qp) a->cap = r.cap;
  return qp;
}

ibv_srq* fx_create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* a) {
  ibv_srq_init_attr_ex r = *a;
  r.pd = to_real(st.pds, a->pd);
  r.cq = to_real(st.cqs, a->cq);
  return forward_make(DEV_OP(ctx, create_srq_ex), ctx, &r, "an SRQ made with ibv_create_srq_ex (XRC or tag matching)");
}

ibv_dm* fx_alloc_dm(ibv_context* ctx, ibv_alloc_dm_attr* a) {
  return forward_make(DEV_OP(ctx, alloc_dm), ctx, a, "device memory (ibv_alloc_dm)");
}

ibv_xrcd* fx_open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* a) {
  return forward_make(DEV_OP(ctx, open_xrcd), ctx, a, "an XRC domain (ibv_open_xrcd)");
}

ibv_td* fx_alloc_td(ibv_context* ctx, ibv_td_init_attr* a) {
  return forward_make(DEV_OP(ctx, alloc_td), ctx, a, "a thread domain (ibv_alloc_td)");
}

ibv_pd* fx_alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* a) {
  ibv_parent_domain_init_attr r = *a;
  r.pd = to_real(st.pds, a->pd);
  return forward_make(DEV_OP(ctx, alloc_parent_domain), ctx, &r, "a parent domain (ibv_alloc_parent_domain)");
}

// A context shadow behind its verbs_context prefix, with the forwarders above as its extended ops.
VCtx* new_ctx() {
  const size_t off = offsetof(verbs_context, context);
  auto* block = static_cast<char*>(calloc(1, off + sizeof(VCtx)));
  if (!block) return nullptr;
  auto* c = reinterpret_cast<VCtx*>(block + off);
  verbs_context* v = ctx_prefix(c);
  v->sz = sizeof(verbs_context);
  v->query_device_ex = fx_query_device_ex;
  v->query_rt_values = fx_query_rt_values;
  v->create_cq_ex = fx_create_cq_ex;
  v->create_qp_ex = fx_create_qp_ex;
  v->create_srq_ex = fx_create_srq_ex;
  v->alloc_dm = fx_alloc_dm;
  v->open_xrcd = fx_open_xrcd;
  v->alloc_td = fx_alloc_td;
  v->alloc_parent_domain = fx_alloc_parent_domain;
  return c;
}

void free_ctx(VCtx* c) { free(ctx_prefix(c)); }

}  // namespace
}  // namespace revive::verbs

using namespace revive::verbs;

// ---- device and context ----

REVIVE_EXPORT ibv_context* ibv_open_device(ibv_device* dev) {
  if (!resolve()) return nullptr;
  Section s;
  ibv_context* r = real.open_device(dev);
  if (!r) return nullptr;
  VCtx* c = new_ctx();
  if (!c) {
    real.close_device(r);
    errno = ENOMEM;
    return nullptr;
  }
  c->real = r;
  c->ordinal = __atomic_add_fetch(&st.ctx_ordinals, 1, __ATOMIC_RELAXED);
  const char* name = real.get_device_name(dev);
  strncpy(c->devname, name ? name : "", sizeof c->devname - 1);
  c->sh.device = dev;
  c->sh.cmd_fd = r->cmd_fd;
  c->sh.async_fd = r->async_fd;
  c->sh.num_comp_vectors = r->num_comp_vectors;
  pthread_mutex_init(&c->sh.mutex, nullptr);
  c->sh.abi_compat = __VERBS_ABI_IS_EXTENDED;  // the inline helpers find ctx_prefix(c)
  c->sh.ops.poll_cq = op_poll_cq;
  c->sh.ops.req_notify_cq = op_req_notify_cq;
  c->sh.ops.post_send = op_post_send;
  c->sh.ops.post_recv = op_post_recv;
  c->sh.ops.post_srq_recv = op_post_srq_recv;
  // The ids of the first run become the virtual ones (ports 1..kPorts, gid indexes 0..kGids-1).
  for (int p = 1; p <= kPorts; ++p) {
    ibv_port_attr a;
    memset(&a, 0, sizeof a);
    if (real.query_port(r, uint8_t(p), reinterpret_cast<_compat_ibv_port_attr*>(&a)) != 0) break;
    c->vlid[p] = c->rlid[p] = a.lid;
    for (int i = 0; i < kGids; ++i)
      if (real.query_gid(r, uint8_t(p), i, &c->rgid[p][i]) == 0) {
        c->vgid[p][i] = c->rgid[p][i];
        c->gid_seen[p] |= uint8_t(1u << i);
      }
  }
  push(&st.ctxs, c);
  return &c->sh;
}

REVIVE_EXPORT int ibv_close_device(ibv_context* ctx) {
  VCtx* c = C(ctx);
  Section s;
  const int cmd = c->real->cmd_fd, async = c->real->async_fd;
  lock(&st.list_lock);
  drop_kicks(nullptr, c);
  unlock(&st.list_lock);
  int rc = real.close_device(c->real);
  if (rc) return rc;
  // After a restart the numbers the program knows are copies of the device's (verbs_ckpt.cpp place_fd).
  if (c->sh.cmd_fd >= 0 && c->sh.cmd_fd != cmd) close(c->sh.cmd_fd);
  if (c->sh.async_fd >= 0 && c->sh.async_fd != async) close(c->sh.async_fd);
  unlink(&st.ctxs, c);
  free_ctx(c);
  return 0;
}

REVIVE_EXPORT int ibv_query_device(ibv_context* ctx, ibv_device_attr* a) {
  Section s;
  return real.query_device(C(ctx)->real, a);
}

REVIVE_EXPORT int ibv_query_port(ibv_context* ctx, uint8_t port, struct _compat_ibv_port_attr* a) {
  VCtx* c = C(ctx);
  Section s;
  int rc = real.query_port(c->real, port, a);
  if (rc == 0) virtual_port(c, port, reinterpret_cast<ibv_port_attr*>(a));
  return rc;
}

REVIVE_EXPORT int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  VCtx* c = C(ctx);
  Section s;
  int rc = real.query_gid(c->real, port, index, gid);
  if (rc == 0 && port >= 1 && port <= kPorts && index >= 0 && index < kGids) {
    if (!(c->gid_seen[port] & (1u << index))) {
      c->vgid[port][index] = c->rgid[port][index] = *gid;
      c->gid_seen[port] |= uint8_t(1u << index);
    } else if (memcmp(gid, &c->rgid[port][index], sizeof *gid) == 0) {
      *gid = c->vgid[port][index];
    }
  }
  return rc;
}

REVIVE_EXPORT int ibv_query_pkey(ibv_context* ctx, uint8_t port, int index, __be16* pkey) {
  Section s;
  return real.query_pkey(C(ctx)->real, port, index, pkey);
}

REVIVE_EXPORT int ibv_get_async_event(ibv_context* ctx, ibv_async_event* ev) {
  VCtx* c = C(ctx);
  // Wait outside the section (a blocked thread must not hold checkpoints back).
  int fl = fcntl(c->sh.async_fd, F_GETFL);
  if (fl >= 0 && !(fl & O_NONBLOCK)) {
    struct pollfd p = {c->sh.async_fd, POLLIN, 0};
    while (poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
  }
  Section s;
  int rc = real.get_async_event(c->real, ev);
  if (rc) return rc;
  switch (ev->event_type) {  // the device's objects made through extended verbs stay as they are
    case IBV_EVENT_CQ_ERR:
      if (VCq* q = by_real(st.cqs, ev->element.cq)) ev->element.cq = &q->sh;
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      if (VSrq* q = by_real(st.srqs, ev->element.srq)) ev->element.srq = &q->sh;
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      if (VQp* q = by_real(st.qps, ev->element.qp)) ev->element.qp = &q->sh;
      break;
    default:
      break;
  }
  return 0;
}

REVIVE_EXPORT void ibv_ack_async_event(ibv_async_event* ev) {
  Section s;
  ibv_async_event r = *ev;
  switch (ev->event_type) {
    case IBV_EVENT_CQ_ERR:
      r.element.cq = to_real(st.cqs, ev->element.cq);
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      r.element.srq = to_real(st.srqs, ev->element.srq);
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      r.element.qp = to_real(st.qps, ev->element.qp);
      break;
    default:
      break;
  }
  real.ack_async_event(&r);
}

// ---- protection domains and memory regions ----

REVIVE_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  VCtx* c = C(ctx);
  Section s;
  ibv_pd* r = real.alloc_pd(c->real);
  auto* p = r ? shadow_for<VPd>(r, real.dealloc_pd) : nullptr;
  if (!p) return nullptr;
  p->real = r;
  p->ctx = c;
  p->sh.context = &c->sh;
  p->sh.handle = r->handle;
  push(&st.pds, p);
  return &p->sh;
}

REVIVE_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  Section s;
  if (!ours(st.pds, pd)) return real.dealloc_pd(pd);  // a parent domain (extended verbs)
  return destroy_shadow(P(pd), &st.pds, real.dealloc_pd);
}

namespace {

ibv_mr* reg(ibv_pd* pd, void* addr, size_t len, uint64_t iova, int access, bool iova2) {
  VPd* p = P(pd);
  Section s;
  if (!ours(st.pds, pd))  // a parent domain: the device's
    return iova2 ? real.reg_mr_iova2(pd, addr, len, iova, unsigned(access)) : real.reg_mr(pd, addr, len, access);
  ibv_mr* r = iova2 ? real.reg_mr_iova2(p->real, addr, len, iova, unsigned(access)) : real.reg_mr(p->real, addr, len, access);
  auto* m = r ? shadow_for<VMr>(r, real.dereg_mr) : nullptr;
  if (!m) return nullptr;
  m->real = r;
  m->pd = p;
  m->iova = iova;
  m->access = access;
  m->iova2 = iova2;
  m->sh = *r;
  m->sh.context = &p->ctx->sh;
  m->sh.pd = pd;
  lock(&st.list_lock);
  const bool indexed = index_put(&st.mr_by_lkey, index_key(p->ctx, m->sh.lkey), m);
  unlock(&st.list_lock);
  if (!indexed) {
    real.dereg_mr(r);
    free(m);
    errno = ENOMEM;
    return nullptr;
  }
  push(&st.mrs, m);
  return &m->sh;
}

}  // namespace

REVIVE_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  return reg(pd, addr, len, uintptr_t(addr), access, false);
}

REVIVE_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t len, uint64_t iova, unsigned access) {
  return reg(pd, addr, len, iova, int(access), true);
}

REVIVE_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t len, uint64_t iova, int access) {
  return reg(pd, addr, len, iova, access, true);
}

REVIVE_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  Section s;
  if (!ours(st.mrs, mr)) return real.dereg_mr(mr);
  auto* m = reinterpret_cast<VMr*>(mr);
  const uint64_t key = index_key(m->pd->ctx, m->sh.lkey);
  int rc = destroy_shadow(m, &st.mrs, real.dereg_mr);
  if (rc == 0) {
    lock(&st.list_lock);
    index_del(&st.mr_by_lkey, key);
    unlock(&st.list_lock);
  }
  return rc;
}

// ---- completion channels and queues ----

REVIVE_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  VCtx* c = C(ctx);
  Section s;
  ibv_comp_channel* r = real.create_comp_channel(c->real);
  auto* ch = r ? shadow_for<VChan>(r, real.destroy_comp_channel) : nullptr;
  if (!ch) return nullptr;
  ch->real = r;
  ch->ctx = c;
  ch->sh.context = &c->sh;
  ch->sh.fd = r->fd;
  push(&st.chans, ch);
  return &ch->sh;
}

REVIVE_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* chan) {
  VChan* ch = CH(chan);
  Section s;
  const int realfd = ch->real->fd;
  int rc = real.destroy_comp_channel(ch->real);
  if (rc) return rc;
  if (ch->sh.fd != realfd) close(ch->sh.fd);
  unlink(&st.chans, ch);
  free(ch);
  return 0;
}

REVIVE_EXPORT ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* chan, int vec) {
  VCtx* c = C(ctx);
  Section s;
  auto* q = static_cast<VCq*>(calloc(1, sizeof(VCq)));
  if (!q) {
    errno = ENOMEM;
    return nullptr;
  }
  ibv_cq* r = real.create_cq(c->real, cqe, q, chan ? CH(chan)->real : nullptr, vec);
  if (!r) {
    free(q);
    return nullptr;
  }
  q->real = r;
  q->ctx = c;
  q->chan = chan ? CH(chan) : nullptr;
  q->cqe_asked = cqe;
  q->comp_vector = vec;
  q->sh.context = &c->sh;
  q->sh.channel = chan;
  q->sh.cq_context = cq_context;
  q->sh.handle = r->handle;
  q->sh.cqe = r->cqe;
  pthread_mutex_init(&q->sh.mutex, nullptr);
  pthread_cond_init(&q->sh.cond, nullptr);
  push(&st.cqs, q);
  return &q->sh;
}

REVIVE_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  VCq* q = Q(cq);
  Section s;
  if (!ours(st.cqs, cq)) return real.destroy_cq(cq);  // made with ibv_create_cq_ex
  lock(&st.list_lock);
  drop_kicks(q, nullptr);  // a restart's loopback QP on it would keep it busy
  unlock(&st.list_lock);
  int rc = real.destroy_cq(q->real);
  if (rc) return rc;
  unlink(&st.cqs, q);
  if (q->vq) munmap(q->vq, size_t(q->vq_cap) * sizeof(ibv_wc));
  free(q);
  return 0;
}

REVIVE_EXPORT int ibv_get_cq_event(ibv_comp_channel* chan, ibv_cq** cq, void** cq_context) {
  VChan* ch = CH(chan);
  int fl = fcntl(ch->sh.fd, F_GETFL);
  if (fl >= 0 && !(fl & O_NONBLOCK)) {  // wait outside the section
    struct pollfd p = {ch->sh.fd, POLLIN, 0};
    while (poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
  }
  Section s;
  ibv_cq* r = nullptr;
  void* rc_ctx = nullptr;
  int rc = real.get_cq_event(ch->real, &r, &rc_ctx);
  if (rc) return rc;
  VCq* q = by_real(st.cqs, r);
  if (!q) {  // a CQ made with ibv_create_cq_ex: the device's own
    *cq = r;
    *cq_context = rc_ctx;
    return 0;
  }
  q->armed = false;
  ++q->events_real;
  *cq = &q->sh;
  *cq_context = q->sh.cq_context;
  return 0;
}

REVIVE_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned n) {
  VCq* q = Q(cq);
  Section s;
  if (!ours(st.cqs, cq)) return real.ack_cq_events(cq, n);
  unsigned old = n < q->events_before ? n : q->events_before;
  q->events_before -= old;
  n -= old;
  if (n > q->events_real) n = q->events_real;
  q->events_real -= n;
  if (n) real.ack_cq_events(q->real, n);
}

// ---- shared receive queues ----

REVIVE_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  VPd* p = P(pd);
  Section s;
  if (!ours(st.pds, pd)) return real.create_srq(pd, attr);  // on a parent domain
  auto* q = static_cast<VSrq*>(calloc(1, sizeof(VSrq)));
  if (!q) {
    errno = ENOMEM;
    return nullptr;
  }
  q->init = *attr;
  ibv_srq_init_attr a = *attr;
  a.srq_context = q;
  ibv_srq* r = real.create_srq(p->real, &a);
  if (!r) {
    free(q);
    return nullptr;
  }
  attr->attr = a.attr;  // the device reports the sizes it gave
  if (!ring_init(&q->recvs, a.attr.max_wr + 1, recv_entry_size(a.attr.max_sge))) {
    real.destroy_srq(r);
    free(q);
    errno = ENOMEM;
    return nullptr;
  }
  q->real = r;
  q->pd = p;
  q->init.attr = a.attr;
  q->sh.context = &p->ctx->sh;
  q->sh.srq_context = attr->srq_context;
  q->sh.pd = pd;
  q->sh.handle = r->handle;
  pthread_mutex_init(&q->sh.mutex, nullptr);
  pthread_cond_init(&q->sh.cond, nullptr);
  push(&st.srqs, q);
  return &q->sh;
}

REVIVE_EXPORT int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  VSrq* q = S(srq);
  Section s;
  if (!ours(st.srqs, srq)) return real.modify_srq(srq, attr, mask);
  int rc = real.modify_srq(q->real, attr, mask);
  if (rc == 0 && (mask & IBV_SRQ_LIMIT)) q->init.attr.srq_limit = attr->srq_limit;
  return rc;
}

REVIVE_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  Section s;
  return real.query_srq(to_real(st.srqs, srq), attr);
}

REVIVE_EXPORT int ibv_destroy_srq(ibv_srq* srq) {
  Section s;
  if (!ours(st.srqs, srq)) return real.destroy_srq(srq);
  return destroy_shadow(S(srq), &st.srqs, real.destroy_srq);
}

// ---- queue pairs ----

REVIVE_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  VPd* p = P(pd);
  Section s;
  if (!ours(st.pds, pd) || (attr->send_cq && !ours(st.cqs, attr->send_cq)) ||
      (attr->recv_cq && !ours(st.cqs, attr->recv_cq)) || (attr->srq && !ours(st.srqs, attr->srq))) {
    // On an object the device made through extended verbs: the device's QP, and no checkpoint.
    ibv_qp_init_attr a = *attr;
    a.send_cq = to_real(st.cqs, attr->send_cq);
    a.recv_cq = to_real(st.cqs, attr->recv_cq);
    a.srq = to_real(st.srqs, attr->srq);
    ibv_qp* r = real.create_qp(to_real(st.pds, pd), &a);
    if (r) {
      attr->cap = a.cap;
      mark_unsupported("a QP on a CQ, SRQ or domain made with extended verbs");
    }
    return r;
  }
  auto* q = static_cast<VQp*>(calloc(1, sizeof(VQp)));
  if (!q) {
    errno = ENOMEM;
    return nullptr;
  }
  ibv_qp_init_attr a = *attr;
  a.qp_context = q;
  a.send_cq = attr->send_cq ? Q(attr->send_cq)->real : nullptr;
  a.recv_cq = attr->recv_cq ? Q(attr->recv_cq)->real : nullptr;
  a.srq = attr->srq ? S(attr->srq)->real : nullptr;
  ibv_qp* r = real.create_qp(p->real, &a);
  if (!r) {
    free(q);
    return nullptr;
  }
  attr->cap = a.cap;
  // +2: room for the checkpoint's fence write beside a full send queue
  if (!ring_init(&q->sends, a.cap.max_send_wr + 2, send_entry_size(a.cap.max_send_sge, a.cap.max_inline_data)) ||
      (!attr->srq && !ring_init(&q->recvs, a.cap.max_recv_wr + 1, recv_entry_size(a.cap.max_recv_sge)))) {
    real.destroy_qp(r);
    free(q->sends.mem);
    free(q);
    errno = ENOMEM;
    return nullptr;
  }
  q->real = r;
  q->pd = p;
  q->scq = attr->send_cq ? Q(attr->send_cq) : nullptr;
  q->rcq = attr->recv_cq ? Q(attr->recv_cq) : nullptr;
  q->srq = attr->srq ? S(attr->srq) : nullptr;
  q->init = *attr;
  q->max_inline = a.cap.max_inline_data;
  q->sh.context = &p->ctx->sh;
  q->sh.qp_context = attr->qp_context;
  q->sh.pd = pd;
  q->sh.send_cq = attr->send_cq;
  q->sh.recv_cq = attr->recv_cq;
  q->sh.srq = attr->srq;
  q->sh.handle = r->handle;
  q->sh.qp_num = r->qp_num;  // virtual from now on
  q->sh.state = r->state;
  q->sh.qp_type = r->qp_type;
  pthread_mutex_init(&q->sh.mutex, nullptr);
  pthread_cond_init(&q->sh.cond, nullptr);
  lock(&st.list_lock);
  const bool indexed = index_put(&st.qp_by_rqpn, index_key(p->ctx, r->qp_num), q);
  unlock(&st.list_lock);
  if (!indexed) {
    real.destroy_qp(r);
    free(q->sends.mem);
    free(q->recvs.mem);
    free(q);
    errno = ENOMEM;
    return nullptr;
  }
  push(&st.qps, q);
  return &q->sh;
}

REVIVE_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  VQp* q = QP(qp);
  Section s;
  if (!ours(st.qps, qp)) return real.modify_qp(qp, attr, mask);
  ibv_qp_attr a = *attr;
  if (mask & IBV_QP_AV) real_ah_attr(attr->ah_attr, &a.ah_attr);
  if ((mask & IBV_QP_DEST_QPN) && st.remapped)
    a.dest_qp_num = qpn_to_real((mask & IBV_QP_AV) ? peer_vlid(attr->ah_attr) : q->rvlid, attr->dest_qp_num);
  int rc = real.modify_qp(q->real, &a, mask);
  if (rc) return rc;
  // Remember what the program set (virtual): a restart replays it.
  lock(&q->lock);
  const ibv_qp_attr& v = *attr;
  if (mask & IBV_QP_STATE) q->attr.qp_state = v.qp_state;
  if (mask & IBV_QP_CUR_STATE) q->attr.cur_qp_state = v.cur_qp_state;
  if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) q->attr.en_sqd_async_notify = v.en_sqd_async_notify;
  if (mask & IBV_QP_ACCESS_FLAGS) q->attr.qp_access_flags = v.qp_access_flags;
  if (mask & IBV_QP_PKEY_INDEX) q->attr.pkey_index = v.pkey_index;
  if (mask & IBV_QP_PORT) q->attr.port_num = v.port_num;
  if (mask & IBV_QP_QKEY) q->attr.qkey = v.qkey;
  if (mask & IBV_QP_AV) {
    q->attr.ah_attr = v.ah_attr;
    if (!v.ah_attr.is_global) q->rvlid = v.ah_attr.dlid;
  }
  if (mask & IBV_QP_PATH_MTU) q->attr.path_mtu = v.path_mtu;
  if (mask & IBV_QP_TIMEOUT) q->attr.timeout = v.timeout;
  if (mask & IBV_QP_RETRY_CNT) q->attr.retry_cnt = v.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) q->attr.rnr_retry = v.rnr_retry;
  if (mask & IBV_QP_RQ_PSN) q->attr.rq_psn = v.rq_psn;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) q->attr.max_rd_atomic = v.max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) q->attr.min_rnr_timer = v.min_rnr_timer;
  if (mask & IBV_QP_SQ_PSN) q->attr.sq_psn = v.sq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) q->attr.max_dest_rd_atomic = v.max_dest_rd_atomic;
  if (mask & IBV_QP_DEST_QPN) q->attr.dest_qp_num = v.dest_qp_num;
  q->attr_mask |= mask;
  if (mask & IBV_QP_STATE) q->sh.state = v.qp_state;
  unlock(&q->lock);
  return 0;
}

REVIVE_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) {
  VQp* q = QP(qp);
  Section s;
  if (!ours(st.qps, qp)) return real.query_qp(qp, attr, mask, init);
  int rc = real.query_qp(q->real, attr, mask, init);
  if (rc) return rc;
  // The program sees its own (virtual) ids and objects.
  if (q->attr_mask & IBV_QP_AV) attr->ah_attr = q->attr.ah_attr;
  if (q->attr_mask & IBV_QP_DEST_QPN) attr->dest_qp_num = q->attr.dest_qp_num;
  if (init) {
    ibv_qp_cap cap = init->cap;
    *init = q->init;
    init->cap = cap;
  }
  return 0;
}

REVIVE_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  Section s;
  if (!ours(st.qps, qp)) return real.destroy_qp(qp);
  VQp* q = QP(qp);
  const uint64_t key = index_key(q->pd->ctx, q->real->qp_num);
  int rc = destroy_shadow(q, &st.qps, real.destroy_qp);
  if (rc == 0) {
    lock(&st.list_lock);
    index_del(&st.qp_by_rqpn, key);
    unlock(&st.list_lock);
  }
  return rc;
}

// ---- address handles (UD) ----

REVIVE_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  VPd* p = P(pd);
  Section s;
  if (!ours(st.pds, pd)) return real.create_ah(pd, attr);
  ibv_ah_attr a;
  real_ah_attr(*attr, &a);
  ibv_ah* r = real.create_ah(p->real, &a);
  auto* h = r ? shadow_for<VAh>(r, real.destroy_ah) : nullptr;
  if (!h) return nullptr;
  h->real = r;
  h->pd = p;
  h->attr = *attr;
  h->rvlid = attr->is_global ? 0 : attr->dlid;
  h->sh.context = &p->ctx->sh;
  h->sh.pd = pd;
  h->sh.handle = r->handle;
  push(&st.ahs, h);
  return &h->sh;
}

REVIVE_EXPORT int ibv_destroy_ah(ibv_ah* ah) {
  Section s;
  if (!ours(st.ahs, ah)) return real.destroy_ah(ah);
  return destroy_shadow(reinterpret_cast<VAh*>(ah), &st.ahs, real.destroy_ah);
}

REVIVE_EXPORT int ibv_init_ah_from_wc(ibv_context* ctx, uint8_t port, ibv_wc* wc, ibv_grh* grh, ibv_ah_attr* attr) {
  using Fn = int (*)(ibv_context*, uint8_t, ibv_wc*, ibv_grh*, ibv_ah_attr*);
  static Fn f;
  if (!f && !(f = reinterpret_cast<Fn>(dlsym(g_lib, "ibv_init_ah_from_wc")))) {
    errno = ENOSYS;
    return -1;
  }
  Section s;
  // wc carries virtual ids already (our poll); the GRH the device wrote carries real gids.
  int rc = f(C(ctx)->real, port, wc, grh, attr);
  if (rc == 0 && attr->is_global) {
    ibv_gid v;
    if (gid_to_virtual(attr->grh.dgid, &v)) attr->grh.dgid = v;
    VCtx* c = C(ctx);
    if (port >= 1 && port <= kPorts)
      for (int i = 0; i < kGids; ++i)
        if (memcmp(&attr->grh.dgid, &c->rgid[port][i], sizeof(ibv_gid)) == 0) attr->grh.dgid = c->vgid[port][i];
  }
  return rc;
}

REVIVE_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port) {
  ibv_ah_attr a;
  if (ibv_init_ah_from_wc(pd->context, port, wc, grh, &a)) return nullptr;
  return ibv_create_ah(pd, &a);
}

REVIVE_EXPORT int ibv_resize_cq(ibv_cq* cq, int cqe) {
  using Fn = int (*)(ibv_cq*, int);
  static Fn f;
  if (!f && !(f = reinterpret_cast<Fn>(dlsym(g_lib, "ibv_resize_cq")))) return ENOSYS;
  VCq* q = Q(cq);
  Section s;
  if (!ours(st.cqs, cq)) return f(cq, cqe);
  int rc = f(q->real, cqe);
  if (rc == 0) {
    q->cqe_asked = cqe;
    q->sh.cqe = q->real->cqe;
  }
  return rc;
}

// Not supported under the plugin (docs/verbs.md): fail as a device without the feature would.
REVIVE_EXPORT int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) {
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;
}
REVIVE_EXPORT int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
REVIVE_EXPORT int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
// Our QPs have no extended form; a QP made with ibv_create_qp_ex is the device's.
REVIVE_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  using Fn = ibv_qp_ex* (*)(ibv_qp*);
  static Fn f;
  if (ours(st.qps, qp) || (!f && !(f = reinterpret_cast<Fn>(dlsym(g_lib, "ibv_qp_to_qp_ex"))))) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return f(qp);
}
