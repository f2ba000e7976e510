// Work requests the device has not completed yet, per queue, as the program posted them: a restart posts
// them again to the re-created queue (receives always; sends that no completion has covered). And the
// translation of a work request's keys and ids from the program's (virtual) values to the device's.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/verbs/verbs.h"

namespace revive::verbs {

bool ring_init(Ring* r, uint32_t cap, uint32_t entry) {
  r->mem = static_cast<uint8_t*>(calloc(cap, entry));
  r->entry = entry;
  r->cap = cap;
  r->head = r->n = 0;
  return r->mem != nullptr;
}

uint32_t send_entry_size(uint32_t max_sge, uint32_t max_inline) {
  return uint32_t((sizeof(SendRec) + max_sge * sizeof(ibv_sge) + max_inline + 15) & ~size_t(15));
}

namespace {

struct RecvRec {
  uint64_t wr_id;
  uint32_t num_sge, pad;
  // followed by num_sge ibv_sge
};

ibv_sge* send_sges(SendRec* r) { return reinterpret_cast<ibv_sge*>(r + 1); }
const ibv_sge* send_sges(const SendRec* r) { return reinterpret_cast<const ibv_sge*>(r + 1); }
ibv_sge* recv_sges(RecvRec* r) { return reinterpret_cast<ibv_sge*>(r + 1); }
const ibv_sge* recv_sges(const RecvRec* r) { return reinterpret_cast<const ibv_sge*>(r + 1); }

// A ring is sized by the queue's capacity; a full one means the program posted beyond it (the device
// refused that post already) or completions were lost: the oldest entry is the one to give up.
void* ring_push(Ring* r) {
  if (r->n == r->cap) {
    r->head = (r->head + 1) % r->cap;
    --r->n;
  }
  void* e = r->mem + size_t((r->head + r->n) % r->cap) * r->entry;
  ++r->n;
  return e;
}

void ring_pop(Ring* r) {
  r->head = (r->head + 1) % r->cap;
  --r->n;
}

// Removes entry i (rare: a completion not for the oldest entry).
void ring_remove(Ring* r, uint32_t i) {
  for (uint32_t k = i; k > 0; --k) memcpy(r->at(k), r->at(k - 1), r->entry);
  ring_pop(r);
}

uint32_t lkey_real(const VCtx* c, uint32_t vkey) {
  if (!st.remapped) return vkey;
  auto* m = static_cast<VMr*>(index_get(st.mr_by_lkey, index_key(c, vkey)));
  return m ? m->real->lkey : vkey;
}

}  // namespace

uint32_t recv_entry_size(uint32_t max_sge) {
  return uint32_t((sizeof(RecvRec) + max_sge * sizeof(ibv_sge) + 15) & ~size_t(15));
}

void record_send(VQp* q, const ibv_send_wr* wr, bool probe) {
  auto* r = static_cast<SendRec*>(ring_push(&q->sends));
  r->wr_id = wr->wr_id;
  r->opcode = wr->opcode;
  r->flags = wr->send_flags;
  r->imm = wr->imm_data;
  r->probe = probe;
  r->rkey = 0;
  r->remote_addr = r->compare_add = r->swap = 0;
  r->ah = nullptr;
  r->remote_qpn = r->remote_qkey = 0;
  switch (wr->opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
      r->remote_addr = wr->wr.rdma.remote_addr;
      r->rkey = wr->wr.rdma.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      r->remote_addr = wr->wr.atomic.remote_addr;
      r->rkey = wr->wr.atomic.rkey;
      r->compare_add = wr->wr.atomic.compare_add;
      r->swap = wr->wr.atomic.swap;
      break;
    default:
      break;
  }
  if (q->sh.qp_type == IBV_QPT_UD) {
    r->ah = wr->wr.ud.ah;
    r->remote_qpn = wr->wr.ud.remote_qpn;
    r->remote_qkey = wr->wr.ud.remote_qkey;
  }
  const uint32_t max_sge = (q->sends.entry - sizeof(SendRec) - q->max_inline) / sizeof(ibv_sge);
  r->num_sge = uint32_t(wr->num_sge) < max_sge ? uint32_t(wr->num_sge) : max_sge;
  r->inline_len = 0;
  if ((wr->send_flags & IBV_SEND_INLINE) && !probe) {
    // The program may reuse an inline buffer as soon as the post returns: keep the bytes.
    auto* dst = reinterpret_cast<uint8_t*>(send_sges(r) + max_sge);
    uint32_t len = 0;
    for (int i = 0; i < wr->num_sge; ++i) {
      uint32_t l = wr->sg_list[i].length;
      if (len + l > q->max_inline) l = q->max_inline - len;
      memcpy(dst + len, reinterpret_cast<const void*>(uintptr_t(wr->sg_list[i].addr)), l);
      len += l;
    }
    r->inline_len = len;
    r->num_sge = 0;
  } else {
    for (uint32_t i = 0; i < r->num_sge; ++i) send_sges(r)[i] = wr->sg_list[i];
  }
}

void record_recv(Ring* ring, const ibv_recv_wr* wr) {
  auto* r = static_cast<RecvRec*>(ring_push(ring));
  const uint32_t max_sge = (ring->entry - sizeof(RecvRec)) / sizeof(ibv_sge);
  r->wr_id = wr->wr_id;
  r->num_sge = uint32_t(wr->num_sge) < max_sge ? uint32_t(wr->num_sge) : max_sge;
  for (uint32_t i = 0; i < r->num_sge; ++i) recv_sges(r)[i] = wr->sg_list[i];
}

VQp* qp_by_real(const VCtx* c, uint32_t rqpn) { return static_cast<VQp*>(index_get(st.qp_by_rqpn, index_key(c, rqpn))); }

namespace {

// A receive completion consumed the oldest receive of its queue (the device takes them in order); a
// completion naming another wr_id takes that one.
void pop_recv(Ring* r, volatile int* l, uint64_t wr_id) {
  lock(l);
  for (uint32_t i = 0; i < r->n; ++i)
    if (static_cast<RecvRec*>(r->at(i))->wr_id == wr_id) {
      if (i == 0) ring_pop(r);
      else ring_remove(r, i);
      break;
    }
  unlock(l);
}

// A successful send completion covers every earlier unsignaled request of the queue (they complete in
// order); an error or flush completion stands for exactly one request. Returns whether it was ours.
bool pop_send(VQp* q, const ibv_wc& wc) {
  bool ours = false;
  lock(&q->lock);
  const bool all = q->init.sq_sig_all != 0;
  while (q->sends.n) {
    auto* r = static_cast<SendRec*>(q->sends.at(0));
    const bool signaled = all || (r->flags & IBV_SEND_SIGNALED) || r->probe;
    if (wc.status != IBV_WC_SUCCESS || signaled) {
      ours = r->probe && r->wr_id == wc.wr_id;
      ring_pop(&q->sends);
      break;
    }
    ring_pop(&q->sends);
  }
  unlock(&q->lock);
  return ours;
}

}  // namespace

bool is_kick(uint32_t rqpn) {
  for (int i = 0; i < st.nkick; ++i)
    if (st.kick_qpn[i] == rqpn) return true;
  return false;
}

void drop_kicks(VCq* c, VCtx* x) {
  int keep = 0;
  for (int i = 0; i < st.nkick; ++i) {
    VCq* k = st.kick_cq[i];
    if ((c && k != c) || (x && k->ctx != x)) {
      st.kick_qp[keep] = st.kick_qp[i];
      st.kick_pd[keep] = st.kick_pd[i];
      st.kick_qpn[keep] = st.kick_qpn[i];
      st.kick_cq[keep++] = k;
      continue;
    }
    real.destroy_qp(st.kick_qp[i]);
    real.dealloc_pd(st.kick_pd[i]);
  }
  st.nkick = keep;
}

int account(VCq* c, ibv_wc* wc, int n) {
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    ibv_wc w = wc[i];
    VQp* q = qp_by_real(c->ctx, w.qp_num);
    if (!q && is_kick(w.qp_num)) continue;  // a restart's event kick
    if (q) {
      w.qp_num = q->sh.qp_num;
      if (w.opcode & IBV_WC_RECV) {
        if (q->srq) pop_recv(&q->srq->recvs, &q->srq->lock, w.wr_id);
        else pop_recv(&q->recvs, &q->lock, w.wr_id);
      } else if (pop_send(q, w)) {
        continue;  // the checkpoint's fence: not the program's
      }
    }
    if (st.remapped && (w.opcode & IBV_WC_RECV)) {
      if (w.slid) {
        uint16_t rl = w.slid;
        w.slid = lid_to_virtual(rl);
        if (q && q->sh.qp_type == IBV_QPT_UD) w.src_qp = qpn_to_virtual(rl, w.src_qp);
      }
      if (q && q->sh.qp_type != IBV_QPT_UD && q->attr_mask & IBV_QP_DEST_QPN) w.src_qp = q->attr.dest_qp_num;
    }
    wc[kept++] = w;
  }
  return kept;
}

namespace {

// Builds the device's form of one request: lkeys, rkey (of the queue's peer), AH and remote QPN.
int post_one(VQp* q, ibv_send_wr* w, const ibv_sge* sg, int nsge, ibv_sge* tmp) {
  for (int i = 0; i < nsge; ++i) {
    tmp[i] = sg[i];
    tmp[i].lkey = lkey_real(q->pd->ctx, sg[i].lkey);
  }
  w->sg_list = tmp;
  w->num_sge = nsge;
  w->next = nullptr;
  if (st.remapped) {
    switch (w->opcode) {
      case IBV_WR_RDMA_WRITE:
      case IBV_WR_RDMA_WRITE_WITH_IMM:
      case IBV_WR_RDMA_READ:
        w->wr.rdma.rkey = rkey_to_real(q->rvlid, w->wr.rdma.rkey);
        break;
      case IBV_WR_ATOMIC_CMP_AND_SWP:
      case IBV_WR_ATOMIC_FETCH_AND_ADD:
        w->wr.atomic.rkey = rkey_to_real(q->rvlid, w->wr.atomic.rkey);
        break;
      default:
        break;
    }
  }
  if (q->sh.qp_type == IBV_QPT_UD) {
    VAh* h = reinterpret_cast<VAh*>(w->wr.ud.ah);
    if (!h) return EINVAL;
    w->wr.ud.ah = h->real;
    if (st.remapped) {
      uint16_t vl = h->rvlid ? h->rvlid : gid_vlid(h->attr.grh.dgid);
      w->wr.ud.remote_qpn = qpn_to_real(vl, w->wr.ud.remote_qpn);
    }
  }
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(q->real, w, &bad);
}

constexpr int kMaxSge = 64;

}  // namespace

int post_send_real(VQp* q, const ibv_send_wr* wr) {
  if (wr->num_sge < 0 || wr->num_sge > kMaxSge) return EINVAL;
  ibv_send_wr w = *wr;
  ibv_sge tmp[kMaxSge];
  return post_one(q, &w, wr->sg_list, wr->num_sge, tmp);
}

int repost_send(VQp* q, const SendRec* r) {
  ibv_send_wr w;
  memset(&w, 0, sizeof w);
  w.wr_id = r->wr_id;
  w.opcode = ibv_wr_opcode(r->opcode);
  w.send_flags = r->flags;
  w.imm_data = r->imm;
  switch (w.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
      w.wr.rdma.remote_addr = r->remote_addr;
      w.wr.rdma.rkey = r->rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      w.wr.atomic.remote_addr = r->remote_addr;
      w.wr.atomic.rkey = r->rkey;
      w.wr.atomic.compare_add = r->compare_add;
      w.wr.atomic.swap = r->swap;
      break;
    default:
      break;
  }
  if (q->sh.qp_type == IBV_QPT_UD) {
    w.wr.ud.ah = static_cast<ibv_ah*>(r->ah);
    w.wr.ud.remote_qpn = r->remote_qpn;
    w.wr.ud.remote_qkey = r->remote_qkey;
  }
  ibv_sge tmp[kMaxSge];
  if (r->inline_len) {  // the bytes kept at the original post (posted inline again: no key is read)
    const uint32_t max_sge = (q->sends.entry - sizeof(SendRec) - q->max_inline) / sizeof(ibv_sge);
    ibv_sge s;
    s.addr = uintptr_t(reinterpret_cast<const uint8_t*>(send_sges(r) + max_sge));
    s.length = r->inline_len;
    s.lkey = 0;
    return post_one(q, &w, &s, 1, tmp);
  }
  return post_one(q, &w, send_sges(r), int(r->num_sge), tmp);
}

int post_recv_real(VQp* q, VSrq* s, const ibv_recv_wr* wr) {
  if (wr->num_sge < 0 || wr->num_sge > kMaxSge) return EINVAL;
  ibv_sge tmp[kMaxSge];
  for (int i = 0; i < wr->num_sge; ++i) {
    tmp[i] = wr->sg_list[i];
    tmp[i].lkey = lkey_real((q ? q->pd : s->pd)->ctx, wr->sg_list[i].lkey);
  }
  ibv_recv_wr w = *wr;
  w.sg_list = tmp;
  w.next = nullptr;
  ibv_recv_wr* bad = nullptr;
  return s ? ibv_post_srq_recv(s->real, &w, &bad) : ibv_post_recv(q->real, &w, &bad);
}

int repost_recv(VQp* q, VSrq* s, const void* rec) {
  const auto* r = static_cast<const RecvRec*>(rec);
  ibv_recv_wr w;
  memset(&w, 0, sizeof w);
  w.wr_id = r->wr_id;
  w.sg_list = const_cast<ibv_sge*>(recv_sges(r));
  w.num_sge = int(r->num_sge);
  return post_recv_real(q, s, &w);
}

}  // namespace revive::verbs
