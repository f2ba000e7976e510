/* softverbs: queue pairs. State machine, posting, the requester side (transmit, ACKs, timeouts, completion
 * order) and the responder side (PSN check, receive WR matching, RNR waits, RDMA write/read, atomics, UD). */
#include "sv.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { SV_DONE = 0, SV_BLOCKED = 1 };

static struct sv_swr *sv_slot(struct sv_qp *q, uint64_t seq)
{
	return &q->sq[seq % q->sq_cap];
}

static void sv_swr_release(struct sv_swr *w)
{
	free(w->sge);
	free(w->inl);
	w->sge = NULL;
	w->inl = NULL;
}

static enum ibv_wc_opcode sv_wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
	default: return IBV_WC_SEND;
	}
}

static uint32_t sv_npkts(uint64_t len, enum ibv_mtu mtu)
{
	uint32_t m = sv_mtu_bytes(mtu);
	return len ? (uint32_t)((len + m - 1) / m) : 1;
}

/* signed distance between 24-bit PSNs */
static int32_t sv_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

static struct sv_pd *sv_rx_pd(struct sv_qp *q)
{
	return q->srq ? q->srq->pd : q->pd;
}

/* ---------------------------------------------------------------------------------------------------- */
/* completion of send WRs, strictly in posting order                                                     */

static void sv_srq_unwait(struct sv_qp *q);
static void sv_respond(struct sv_qp *q, const struct sv_wire *req, uint8_t op, uint8_t syndrome,
		       const struct iovec *iov, int n);

static void sv_free_inq(struct sv_qp *q)
{
	if (q->inq_head && q->inq_head->announced && q->type == IBV_QPT_RC)
		sv_respond(q, &q->inq_head->h, SV_OP_RNR_END, 0, NULL, 0);
	while (q->inq_head) {
		struct sv_msg *m = q->inq_head;
		q->inq_head = m->next;
		free(m);
	}
	q->inq_tail = NULL;
	q->rnr_deadline_ns = 0;
	sv_srq_unwait(q);
}

static void sv_rq_flush(struct sv_qp *q)
{
	struct sv_rwr *r;
	while ((r = sv_rq_peek(&q->rq))) {
		struct ibv_wc wc = {.wr_id = r->wr_id, .status = IBV_WC_WR_FLUSH_ERR, .opcode = IBV_WC_RECV,
				    .qp_num = q->ex.qp_base.qp_num, .vendor_err = 0xf5};
		sv_rq_pop(&q->rq);
		sv_cq_push(q->rcq, &wc, 0);
	}
}

/* enter the error state: receive WRs are flushed now, send WRs by sv_sq_complete() */
static void sv_qp_to_err(struct sv_qp *q)
{
	if (q->state == IBV_QPS_ERR)
		return;
	sv_log("qp 0x%06x -> ERR", q->ex.qp_base.qp_num);
	q->state = IBV_QPS_ERR;
	q->rd_outstanding = 0;
	sv_free_inq(q);
	sv_rq_flush(q);
	if (q->srq)
		sv_async_qp(q, IBV_EVENT_QP_LAST_WQE_REACHED);
}

static void sv_sq_complete(struct sv_qp *q)
{
	for (;;) {
		int flushing = q->state == IBV_QPS_ERR || q->state == IBV_QPS_SQE;
		uint64_t limit = flushing ? q->sq_tail : q->sq_tx;
		if (q->sq_done >= limit)
			break;
		struct sv_swr *w = sv_slot(q, q->sq_done);
		if (w->state != SWR_DONE) {
			if (!flushing)
				break;
			w->state = SWR_DONE;
			w->status = IBV_WC_WR_FLUSH_ERR;
		}
		if (w->status != IBV_WC_SUCCESS || w->signaled) {
			struct ibv_wc wc = {.wr_id = w->wr_id,
					    .status = w->status,
					    .opcode = sv_wc_opcode(w->opcode),
					    .qp_num = q->ex.qp_base.qp_num};
			if (w->status == IBV_WC_SUCCESS &&
			    (w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
			     w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD))
				wc.byte_len = w->byte_len;
			if (w->status != IBV_WC_SUCCESS)
				wc.vendor_err = 0xf0 + (uint32_t)w->status;
			sv_cq_push(q->scq, &wc, 0);
			/* the slots of this WR and of the unsignaled ones before it are free again */
			for (uint64_t s = q->sq_head; s <= q->sq_done; s++)
				sv_swr_release(sv_slot(q, s));
			q->sq_head = q->sq_done + 1;
		}
		q->sq_done++;
		if (w->status != IBV_WC_SUCCESS && w->status != IBV_WC_WR_FLUSH_ERR) {
			if (q->type == IBV_QPT_RC)
				sv_qp_to_err(q);
			else if (q->state != IBV_QPS_ERR)
				q->state = IBV_QPS_SQE; /* UD/UC: only the send queue fails */
		}
	}
	if (q->state == IBV_QPS_ERR || q->state == IBV_QPS_SQE) {
		q->sq_tx = q->sq_tail;
		q->sq_blocked = 0;
	}
	if (q->state == IBV_QPS_SQD && q->sqd_notify && q->sq_done == q->sq_tx) {
		q->sqd_notify = 0;
		sv_async_qp(q, IBV_EVENT_SQ_DRAINED);
	}
}

/* ---------------------------------------------------------------------------------------------------- */
/* requester: transmit                                                                                   */

/* resolve a local SGE (lkey) to host memory; NULL = protection error */
static uint8_t *sv_local(struct sv_engine *e, struct sv_pd *pd, const struct ibv_sge *s, int need_write)
{
	struct sv_mr *mr = sv_mr_find(e, s->lkey);
	if (!mr || mr->pd != pd)
		return NULL;
	if (need_write && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return NULL;
	if (s->addr < mr->iova || s->addr - mr->iova > mr->len || mr->len - (s->addr - mr->iova) < s->length)
		return NULL;
	return mr->host + (s->addr - mr->iova);
}

static void sv_transmit(struct sv_qp *q, struct sv_swr *w)
{
	struct sv_engine *e = q->eng;
	struct iovec iov[SV_MAX_SGE + 1];
	int n = 0;
	uint64_t len = 0;
	enum ibv_wc_status lerr = IBV_WC_SUCCESS;

	if (w->inl) {
		iov[n].iov_base = w->inl;
		iov[n++].iov_len = w->inl_len;
		len = w->inl_len;
	} else {
		int need_write = w->is_rd;
		for (int i = 0; i < w->nsge; i++) {
			if (!w->sge[i].length)
				continue;
			uint8_t *p = sv_local(e, q->pd, &w->sge[i], need_write);
			if (!p) {
				lerr = IBV_WC_LOC_PROT_ERR;
				break;
			}
			iov[n].iov_base = p;
			iov[n++].iov_len = w->sge[i].length;
			len += w->sge[i].length;
		}
	}
	if (!lerr && len > SV_MAX_MSG)
		lerr = IBV_WC_LOC_LEN_ERR;
	if (!lerr && q->type == IBV_QPT_UD && len > sv_mtu_bytes(SV_PORT_MTU))
		lerr = IBV_WC_LOC_LEN_ERR;
	if (!lerr && (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) && len != 8)
		lerr = IBV_WC_LOC_LEN_ERR;
	w->byte_len = (uint32_t)len;
	if (lerr) {
		sv_log("qp 0x%06x: wr_id %llu local error %s", q->ex.qp_base.qp_num, (unsigned long long)w->wr_id,
		       ibv_wc_status_str(lerr));
		w->state = SWR_DONE;
		w->status = lerr;
		q->sq_blocked = 1;
		return;
	}

	struct sv_wire h;
	memset(&h, 0, sizeof h);
	h.src_qpn = q->ex.qp_base.qp_num;
	h.seq = w->seq;
	h.src_lid = e->lid;
	h.rnr_retry = q->rnr_retry;
	if (w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
		h.flags |= SV_F_IMM;
		h.imm = w->imm;
	}
	if ((w->send_flags & IBV_SEND_SOLICITED) &&
	    (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM))
		h.flags |= SV_F_SOLICITED;

	struct sv_peer *peer = q->peer;
	int payload = 1;
	if (q->type == IBV_QPT_UD) {
		h.op = SV_OP_UD_SEND;
		h.dst_qpn = w->remote_qpn;
		h.qkey = w->remote_qkey;
		h.sl = w->ah_attr.sl;
		if (w->ah_attr.is_global) {
			h.flags |= SV_F_GRH;
			memcpy(h.sgid, e->gid.raw, 16);
			memcpy(h.dgid, w->ah_attr.grh.dgid.raw, 16);
			h.flow_label = w->ah_attr.grh.flow_label;
			h.tclass = w->ah_attr.grh.traffic_class;
			h.hop_limit = w->ah_attr.grh.hop_limit;
		}
		peer = w->ud_peer;
	} else {
		h.dst_qpn = q->dest_qpn;
		h.sl = q->ah.sl;
		if (q->type == IBV_QPT_UC)
			h.flags |= SV_F_UC;
		switch (w->opcode) {
		case IBV_WR_SEND:
		case IBV_WR_SEND_WITH_IMM: h.op = SV_OP_SEND; break;
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM: h.op = SV_OP_WRITE; break;
		case IBV_WR_RDMA_READ: h.op = SV_OP_READ; payload = 0; break;
		case IBV_WR_ATOMIC_CMP_AND_SWP: h.op = SV_OP_CMP_SWP; payload = 0; break;
		case IBV_WR_ATOMIC_FETCH_AND_ADD: h.op = SV_OP_FETCH_ADD; payload = 0; break;
		default: break;
		}
		h.raddr = w->raddr;
		h.rkey = w->rkey;
		h.rlen = (uint32_t)len;
		h.cmp_add = w->cmp_add;
		h.swap = w->swap;
		h.psn = q->sq_psn;
		w->psn = q->sq_psn;
		q->sq_psn = (q->sq_psn + sv_npkts(len, q->path_mtu)) & 0xffffff;
	}
	int rc = sv_peer_send(e, peer, &h, iov, payload ? n : 0);
	if (rc)
		sv_log("qp 0x%06x: no path to the destination, wr_id %llu %s", q->ex.qp_base.qp_num,
		       (unsigned long long)w->wr_id, q->type == IBV_QPT_RC ? "will time out" : "is lost");
	if (q->type == IBV_QPT_RC) {
		w->state = SWR_SENT;
		w->deadline_ns = q->tmo_ns ? sv_now_ns() + q->tmo_ns : 0;
		if (w->is_rd)
			q->rd_outstanding++;
	} else {
		w->state = SWR_DONE; /* unreliable: complete once on the wire */
		w->status = IBV_WC_SUCCESS;
	}
}

static void sv_sq_kick(struct sv_qp *q)
{
	if (q->state == IBV_QPS_RTS) {
		unsigned max_rd = q->max_rd_atomic ? q->max_rd_atomic : 1;
		while (q->sq_tx < q->sq_tail && !q->sq_blocked) {
			struct sv_swr *w = sv_slot(q, q->sq_tx);
			if ((w->send_flags & IBV_SEND_FENCE) && q->rd_outstanding)
				break;
			if (w->is_rd && (unsigned)q->rd_outstanding >= max_rd)
				break;
			sv_transmit(q, w);
			q->sq_tx++;
		}
	}
	sv_sq_complete(q);
}

static int sv_sq_post_one(struct sv_qp *q, struct ibv_send_wr *wr)
{
	if (q->state == IBV_QPS_RESET || q->state == IBV_QPS_INIT || q->state == IBV_QPS_RTR)
		return EINVAL;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_send_sge)
		return EINVAL;
	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM: break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		if (q->type == IBV_QPT_UD)
			return EINVAL;
		break;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		if (q->type != IBV_QPT_RC)
			return EINVAL;
		break;
	default: return EINVAL; /* memory windows, send-with-invalidate, TSO: not modelled */
	}
	int is_rd = wr->opcode == IBV_WR_RDMA_READ || wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		    wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
	uint64_t total = 0;
	for (int i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if (wr->send_flags & IBV_SEND_INLINE) {
		if (is_rd || total > q->cap.max_inline_data)
			return EINVAL;
	}
	if (q->type == IBV_QPT_UD && !wr->wr.ud.ah)
		return EINVAL;
	if (q->sq_tail - q->sq_head >= q->cap.max_send_wr)
		return ENOMEM;

	struct sv_swr *w = sv_slot(q, q->sq_tail);
	sv_swr_release(w);
	memset(w, 0, sizeof *w);
	w->wr_id = wr->wr_id;
	w->seq = q->sq_tail;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags;
	w->signaled = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	w->is_rd = (uint8_t)is_rd;
	w->imm = wr->imm_data;
	if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		w->raddr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->cmp_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else if (q->type != IBV_QPT_UD) {
		w->raddr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
	} else {
		struct sv_ah *ah = sv_ah_of(wr->wr.ud.ah);
		w->ah_attr = ah->attr;
		w->ud_peer = ah->peer;
		w->remote_qpn = wr->wr.ud.remote_qpn & 0xffffff;
		w->remote_qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? q->qkey : wr->wr.ud.remote_qkey;
	}
	if (wr->send_flags & IBV_SEND_INLINE) {
		/* the buffer may be reused as soon as post returns: copy now */
		w->inl = malloc(total ? total : 1);
		if (!w->inl)
			return ENOMEM;
		size_t off = 0;
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(w->inl + off, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
		w->inl_len = (uint32_t)total;
	} else if (wr->num_sge) {
		w->sge = malloc((size_t)wr->num_sge * sizeof *w->sge);
		if (!w->sge)
			return ENOMEM;
		memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof *w->sge);
		w->nsge = wr->num_sge;
	}
	w->state = SWR_QUEUED;
	q->sq_tail++;
	return 0;
}

int sv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sv_qp *q = sv_qp_of(ibqp);
	struct sv_engine *e = q->eng;
	int err = 0;
	pthread_mutex_lock(&e->lock);
	for (; wr; wr = wr->next) {
		err = sv_sq_post_one(q, wr);
		if (err) {
			*bad = wr;
			break;
		}
	}
	sv_sq_kick(q);
	pthread_mutex_unlock(&e->lock);
	return err;
}

/* ---------------------------------------------------------------------------------------------------- */
/* requester: responses                                                                                  */

static void sv_scatter_resp(struct sv_qp *q, struct sv_swr *w, const uint8_t *data, size_t len)
{
	for (int i = 0; i < w->nsge && len; i++) {
		size_t n = w->sge[i].length < len ? w->sge[i].length : len;
		if (!n)
			continue;
		uint8_t *p = sv_local(q->eng, q->pd, &w->sge[i], 1);
		if (!p) { /* MR deregistered while the read was outstanding */
			w->status = IBV_WC_LOC_PROT_ERR;
			return;
		}
		memcpy(p, data, n);
		data += n;
		len -= n;
	}
}

static void sv_response(struct sv_engine *e, struct sv_wire *h, uint8_t *data)
{
	struct sv_qp *q = sv_ht_get(&e->qps, h->dst_qpn);
	if (!q || q->type != IBV_QPT_RC || h->src_qpn != q->dest_qpn)
		return;
	if (h->seq < q->sq_done || h->seq >= q->sq_tx)
		return; /* stale: the WR was flushed or completed already */
	struct sv_swr *w = sv_slot(q, h->seq);
	if (w->state != SWR_SENT || w->psn != h->psn)
		return;
	q->progress_ns = sv_now_ns();
	if (h->op == SV_OP_RNR_WAIT || h->op == SV_OP_RNR_END) {
		w->rnr_wait = h->op == SV_OP_RNR_WAIT;
		return;
	}
	w->state = SWR_DONE;
	w->status = IBV_WC_SUCCESS;
	switch (h->op) {
	case SV_OP_ACK: break;
	case SV_OP_READ_RESP: sv_scatter_resp(q, w, data, h->len - sizeof *h); break;
	case SV_OP_ATOMIC_RESP: sv_scatter_resp(q, w, (uint8_t *)&h->cmp_add, 8); break;
	case SV_OP_NAK:
		switch (h->syndrome) {
		case SV_NAK_REM_ACCESS: w->status = IBV_WC_REM_ACCESS_ERR; break;
		case SV_NAK_INV_REQ: w->status = IBV_WC_REM_INV_REQ_ERR; break;
		case SV_NAK_REM_OP: w->status = IBV_WC_REM_OP_ERR; break;
		case SV_NAK_RNR_EXC: w->status = IBV_WC_RNR_RETRY_EXC_ERR; break;
		default: w->status = IBV_WC_RETRY_EXC_ERR; break; /* sequence errors until retries run out */
		}
		break;
	default: break;
	}
	if (w->is_rd && q->rd_outstanding)
		q->rd_outstanding--;
	sv_sq_kick(q);
}

/* ---------------------------------------------------------------------------------------------------- */
/* responder                                                                                             */

static void sv_respond_v(struct sv_qp *q, const struct sv_wire *req, uint8_t op, uint8_t syndrome,
			 const struct iovec *iov, int n, uint64_t val)
{
	struct sv_wire h;
	memset(&h, 0, sizeof h);
	h.cmp_add = val;
	h.op = op;
	h.syndrome = syndrome;
	h.src_qpn = q->ex.qp_base.qp_num;
	h.dst_qpn = q->dest_qpn; /* responses follow this QP's own path, like on a real fabric */
	h.seq = req->seq;
	h.psn = req->psn;
	h.src_lid = q->eng->lid;
	sv_peer_send(q->eng, q->peer, &h, iov, n);
}

static void sv_respond(struct sv_qp *q, const struct sv_wire *req, uint8_t op, uint8_t syndrome,
		       const struct iovec *iov, int n)
{
	sv_respond_v(q, req, op, syndrome, iov, n, 0);
}

/* remote access check; returns host memory, or NULL on a violation */
static uint8_t *sv_remote(struct sv_qp *q, uint32_t rkey, uint64_t raddr, uint64_t len, unsigned need)
{
	if (!(q->access & need))
		return NULL;
	struct sv_mr *mr = sv_mr_find(q->eng, rkey);
	if (!mr || mr->pd != q->pd || !(mr->access & need))
		return NULL;
	if (raddr < mr->iova || raddr - mr->iova > mr->len || mr->len - (raddr - mr->iova) < len)
		return NULL;
	return mr->host + (raddr - mr->iova);
}

/* scatter into a receive WR starting at byte offset off; returns a completion status */
static enum ibv_wc_status sv_scatter(struct sv_qp *q, struct sv_rwr *r, size_t off, const uint8_t *data, size_t len)
{
	struct sv_pd *pd = sv_rx_pd(q);
	for (int i = 0; i < r->nsge && len; i++) {
		size_t sl = r->sge[i].length;
		if (off >= sl) {
			off -= sl;
			continue;
		}
		size_t n = sl - off < len ? sl - off : len;
		uint8_t *p = sv_local(q->eng, pd, &r->sge[i], 1);
		if (!p)
			return IBV_WC_LOC_PROT_ERR;
		memcpy(p + off, data, n);
		data += n;
		len -= n;
		off = 0;
	}
	return IBV_WC_SUCCESS;
}

static uint64_t sv_rwr_capacity(struct sv_rwr *r)
{
	uint64_t c = 0;
	for (int i = 0; i < r->nsge; i++)
		c += r->sge[i].length;
	return c;
}

static struct sv_rwr *sv_recv_peek(struct sv_qp *q)
{
	return sv_rq_peek(q->srq ? &q->srq->rq : &q->rq);
}

static void sv_recv_pop(struct sv_qp *q)
{
	if (q->srq) {
		sv_rq_pop(&q->srq->rq);
		sv_srq_consumed(q->srq);
	} else {
		sv_rq_pop(&q->rq);
	}
}

static void sv_srq_wait(struct sv_qp *q)
{
	if (!q->srq || q->on_srq_wait)
		return;
	q->on_srq_wait = 1;
	q->srq_wait_next = NULL;
	if (q->srq->wait_tail)
		q->srq->wait_tail->srq_wait_next = q;
	else
		q->srq->wait_head = q;
	q->srq->wait_tail = q;
}

static void sv_srq_unwait(struct sv_qp *q)
{
	if (!q->on_srq_wait)
		return;
	struct sv_srq *s = q->srq;
	struct sv_qp **pp = &s->wait_head;
	s->wait_tail = NULL;
	while (*pp) {
		if (*pp == q) {
			*pp = q->srq_wait_next;
			continue;
		}
		s->wait_tail = *pp;
		pp = &(*pp)->srq_wait_next;
	}
	q->on_srq_wait = 0;
	q->srq_wait_next = NULL;
}

/* a responder-side error that the requester learns through a NAK; both QPs end in the error state */
static void sv_resp_fatal(struct sv_qp *q, const struct sv_wire *h, uint8_t syndrome)
{
	if (q->type == IBV_QPT_RC)
		sv_respond(q, h, SV_OP_NAK, syndrome, NULL, 0);
	sv_qp_to_err(q);
	sv_sq_complete(q);
}

/* process one request in order; SV_BLOCKED = needs a receive WR that is not there yet */
static int sv_resp_one(struct sv_qp *q, const struct sv_wire *h, uint8_t *data)
{
	int rc_qp = q->type == IBV_QPT_RC;
	uint64_t plen = h->len - sizeof *h;
	uint64_t len = h->op == SV_OP_READ ? h->rlen : (h->op == SV_OP_CMP_SWP || h->op == SV_OP_FETCH_ADD) ? 8 : plen;
	uint32_t npk = sv_npkts(len, q->path_mtu);

	int32_t d = sv_psn_diff(h->psn, q->epsn);
	if (d != 0) {
		if (!rc_qp) { /* UC: drop the message, resynchronise on the next one */
			if (d > 0)
				q->epsn = (h->psn + npk) & 0xffffff;
			return SV_DONE;
		}
		if (d < 0) { /* duplicate: acknowledge again, re-execute reads, no new side effects */
			if (h->op == SV_OP_READ) {
				uint8_t *p = len ? sv_remote(q, h->rkey, h->raddr, len, IBV_ACCESS_REMOTE_READ) : NULL;
				if (len && !p)
					return SV_DONE;
				struct iovec v = {.iov_base = p, .iov_len = len};
				sv_respond(q, h, SV_OP_READ_RESP, 0, &v, len ? 1 : 0);
			} else {
				sv_respond(q, h, SV_OP_ACK, 0, NULL, 0);
			}
			return SV_DONE;
		}
		sv_log("qp 0x%06x: PSN 0x%06x, expected 0x%06x: sequence error", q->ex.qp_base.qp_num, h->psn, q->epsn);
		sv_respond(q, h, SV_OP_NAK, SV_NAK_SEQ, NULL, 0);
		return SV_DONE;
	}

	struct sv_rwr *r = NULL;
	int imm = (h->flags & SV_F_IMM) != 0;
	if (h->op == SV_OP_SEND || (h->op == SV_OP_WRITE && imm)) {
		r = sv_recv_peek(q);
		if (!r) {
			if (!rc_qp) { /* UC: no receive WR, the message is silently dropped */
				q->epsn = (q->epsn + npk) & 0xffffff;
				return SV_DONE;
			}
			return SV_BLOCKED;
		}
	}

	struct ibv_wc wc = {.qp_num = q->ex.qp_base.qp_num, .src_qp = h->src_qpn, .slid = h->src_lid, .sl = h->sl};
	switch (h->op) {
	case SV_OP_SEND: {
		enum ibv_wc_status st = sv_rwr_capacity(r) < plen ? IBV_WC_LOC_LEN_ERR : sv_scatter(q, r, 0, data, plen);
		wc.wr_id = r->wr_id;
		wc.opcode = IBV_WC_RECV;
		wc.byte_len = (uint32_t)plen;
		if (imm) {
			wc.wc_flags |= IBV_WC_WITH_IMM;
			wc.imm_data = h->imm;
		}
		sv_recv_pop(q);
		if (st != IBV_WC_SUCCESS) {
			wc.status = st;
			wc.vendor_err = 0xf0 + (uint32_t)st;
			sv_cq_push(q->rcq, &wc, 1);
			sv_resp_fatal(q, h, st == IBV_WC_LOC_LEN_ERR ? SV_NAK_INV_REQ : SV_NAK_REM_OP);
			return SV_DONE;
		}
		q->epsn = (q->epsn + npk) & 0xffffff;
		if (rc_qp)
			sv_respond(q, h, SV_OP_ACK, 0, NULL, 0);
		sv_cq_push(q->rcq, &wc, h->flags & SV_F_SOLICITED);
		return SV_DONE;
	}
	case SV_OP_WRITE: {
		uint8_t *p = NULL;
		if (len) {
			p = sv_remote(q, h->rkey, h->raddr, len, IBV_ACCESS_REMOTE_WRITE);
			if (!p) {
				sv_log("qp 0x%06x: RDMA write rkey 0x%08x addr 0x%llx len %llu: access violation",
				       q->ex.qp_base.qp_num, h->rkey, (unsigned long long)h->raddr, (unsigned long long)len);
				if (!rc_qp) { /* UC: dropped */
					q->epsn = (q->epsn + npk) & 0xffffff;
					return SV_DONE;
				}
				sv_resp_fatal(q, h, SV_NAK_REM_ACCESS);
				return SV_DONE;
			}
			memcpy(p, data, len);
		}
		q->epsn = (q->epsn + npk) & 0xffffff;
		if (rc_qp)
			sv_respond(q, h, SV_OP_ACK, 0, NULL, 0);
		if (imm) {
			wc.wr_id = r->wr_id;
			wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
			wc.byte_len = (uint32_t)len;
			wc.wc_flags = IBV_WC_WITH_IMM;
			wc.imm_data = h->imm;
			sv_recv_pop(q);
			sv_cq_push(q->rcq, &wc, h->flags & SV_F_SOLICITED);
		}
		return SV_DONE;
	}
	case SV_OP_READ: {
		uint8_t *p = NULL;
		if (len) {
			p = sv_remote(q, h->rkey, h->raddr, len, IBV_ACCESS_REMOTE_READ);
			if (!p) {
				sv_log("qp 0x%06x: RDMA read rkey 0x%08x: access violation", q->ex.qp_base.qp_num, h->rkey);
				sv_resp_fatal(q, h, SV_NAK_REM_ACCESS);
				return SV_DONE;
			}
		}
		q->epsn = (q->epsn + npk) & 0xffffff;
		struct iovec v = {.iov_base = p, .iov_len = len};
		sv_respond(q, h, SV_OP_READ_RESP, 0, &v, len ? 1 : 0);
		return SV_DONE;
	}
	case SV_OP_CMP_SWP:
	case SV_OP_FETCH_ADD: {
		if (h->raddr & 7) {
			sv_resp_fatal(q, h, SV_NAK_INV_REQ);
			return SV_DONE;
		}
		uint64_t *p = (uint64_t *)sv_remote(q, h->rkey, h->raddr, 8, IBV_ACCESS_REMOTE_ATOMIC);
		if (!p) {
			sv_resp_fatal(q, h, SV_NAK_REM_ACCESS);
			return SV_DONE;
		}
		uint64_t orig;
		if (h->op == SV_OP_CMP_SWP) {
			orig = h->cmp_add;
			__atomic_compare_exchange_n(p, &orig, h->swap, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		} else {
			orig = __atomic_fetch_add(p, h->cmp_add, __ATOMIC_SEQ_CST);
		}
		q->epsn = (q->epsn + 1) & 0xffffff;
		sv_respond_v(q, h, SV_OP_ATOMIC_RESP, 0, NULL, 0, orig);
		return SV_DONE;
	}
	default: return SV_DONE;
	}
}

static void sv_rnr_exceeded(struct sv_qp *q)
{
	struct sv_msg *m = q->inq_head;
	if (!m)
		return;
	sv_log("qp 0x%06x: RNR retries exhausted for PSN 0x%06x", q->ex.qp_base.qp_num, m->h.psn);
	sv_respond(q, &m->h, SV_OP_NAK, SV_NAK_RNR_EXC, NULL, 0);
	m->announced = 0;
	sv_free_inq(q); /* everything behind it belongs to the same, now failed, requester */
}

/* the head of the queue waits for a receive WR: tell the requester, arm the RNR deadline */
static void sv_rnr_announce(struct sv_qp *q, struct sv_msg *m)
{
	if (m->announced)
		return;
	m->announced = 1;
	sv_srq_wait(q);
	if (m->h.rnr_retry == 7) {
		q->rnr_deadline_ns = 0; /* 7 = retry forever */
	} else if (m->h.rnr_retry == 0) {
		sv_rnr_exceeded(q);
		return;
	} else {
		q->rnr_deadline_ns = sv_now_ns() + (uint64_t)m->h.rnr_retry * sv_rnr_timer_ns(q->min_rnr_timer);
	}
	sv_respond(q, &m->h, SV_OP_RNR_WAIT, 0, NULL, 0);
}

static void sv_resp_drain(struct sv_qp *q)
{
	while (q->inq_head) {
		struct sv_msg *m = q->inq_head;
		if (sv_resp_one(q, &m->h, m->data) == SV_BLOCKED) {
			sv_rnr_announce(q, m);
			return;
		}
		if (q->inq_head != m) /* the queue was dropped (error) */
			break;
		q->inq_head = m->next;
		if (!q->inq_head)
			q->inq_tail = NULL;
		free(m);
		q->rnr_deadline_ns = 0;
		if (q->state == IBV_QPS_ERR) {
			sv_free_inq(q);
			break;
		}
	}
	sv_srq_unwait(q);
}

void sv_srq_drain(struct sv_srq *s)
{
	while (s->wait_head && s->rq.count) {
		struct sv_qp *q = s->wait_head;
		sv_resp_drain(q);
		if (q->on_srq_wait && s->wait_head == q)
			break; /* still blocked although WRs are there: cannot happen, but never spin */
	}
}

static int sv_enqueue(struct sv_qp *q, const struct sv_wire *h, const uint8_t *data)
{
	size_t dl = h->len - sizeof *h;
	struct sv_msg *m = malloc(sizeof *m + dl);
	if (!m)
		return -1;
	m->next = NULL;
	m->announced = 0;
	m->h = *h;
	memcpy(m->data, data, dl);
	if (q->inq_tail)
		q->inq_tail->next = m;
	else
		q->inq_head = m;
	q->inq_tail = m;
	return 0;
}

static void sv_request(struct sv_engine *e, struct sv_wire *h, uint8_t *data)
{
	struct sv_qp *q = sv_ht_get(&e->qps, h->dst_qpn);
	enum ibv_qp_type want = (h->flags & SV_F_UC) ? IBV_QPT_UC : IBV_QPT_RC;
	/* no such QP, wrong transport, or not able to receive: the packet is dropped (the requester times out) */
	if (!q || q->type != want || q->state < IBV_QPS_RTR || q->state == IBV_QPS_ERR)
		return;
	if (q->state == IBV_QPS_RTR && !q->comm_est) {
		q->comm_est = 1;
		sv_async_qp(q, IBV_EVENT_COMM_EST);
	}
	if (q->inq_head) { /* in order behind a request that waits for a receive WR */
		sv_enqueue(q, h, data);
		return;
	}
	if (sv_resp_one(q, h, data) == SV_BLOCKED && !sv_enqueue(q, h, data))
		sv_rnr_announce(q, q->inq_tail);
}

static void sv_ud_receive(struct sv_engine *e, struct sv_wire *h, uint8_t *data)
{
	struct sv_qp *q = sv_ht_get(&e->qps, h->dst_qpn);
	if (!q || q->type != IBV_QPT_UD || q->state < IBV_QPS_RTR || q->state == IBV_QPS_ERR)
		return;
	if (h->qkey != q->qkey) {
		e->qkey_viol++;
		return;
	}
	struct sv_rwr *r = sv_recv_peek(q);
	if (!r)
		return; /* unreliable datagram: no receive WR, no delivery */
	uint64_t plen = h->len - sizeof *h;
	struct ibv_wc wc = {.wr_id = r->wr_id,
			    .opcode = IBV_WC_RECV,
			    .byte_len = (uint32_t)(plen + 40),
			    .qp_num = q->ex.qp_base.qp_num,
			    .src_qp = h->src_qpn,
			    .slid = h->src_lid,
			    .sl = h->sl};
	if (h->flags & SV_F_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = h->imm;
	}
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	if (sv_rwr_capacity(r) < plen + 40) {
		st = IBV_WC_LOC_LEN_ERR;
	} else {
		if (h->flags & SV_F_GRH) {
			struct ibv_grh g;
			memset(&g, 0, sizeof g);
			g.version_tclass_flow =
				htobe32((6u << 28) | ((uint32_t)h->tclass << 20) | (h->flow_label & 0xfffff));
			g.paylen = htobe16((uint16_t)(plen + 12 + 8 + 4)); /* BTH + DETH + ICRC, as on the wire */
			g.next_hdr = 0x1b;
			g.hop_limit = h->hop_limit;
			memcpy(g.sgid.raw, h->sgid, 16);
			memcpy(g.dgid.raw, h->dgid, 16);
			st = sv_scatter(q, r, 0, (uint8_t *)&g, sizeof g);
			wc.wc_flags |= IBV_WC_GRH;
		}
		if (st == IBV_WC_SUCCESS)
			st = sv_scatter(q, r, 40, data, plen);
	}
	wc.status = st;
	if (st != IBV_WC_SUCCESS)
		wc.vendor_err = 0xf0 + (uint32_t)st;
	sv_recv_pop(q);
	sv_cq_push(q->rcq, &wc, h->flags & SV_F_SOLICITED);
}

void sv_dispatch(struct sv_engine *e, struct sv_conn *c, struct sv_wire *h, uint8_t *data)
{
	(void)c;
	switch (h->op) {
	case SV_OP_SEND:
	case SV_OP_WRITE:
	case SV_OP_READ:
	case SV_OP_CMP_SWP:
	case SV_OP_FETCH_ADD: sv_request(e, h, data); break;
	case SV_OP_UD_SEND: sv_ud_receive(e, h, data); break;
	case SV_OP_ACK:
	case SV_OP_READ_RESP:
	case SV_OP_ATOMIC_RESP:
	case SV_OP_NAK:
	case SV_OP_RNR_WAIT:
	case SV_OP_RNR_END: sv_response(e, h, data); break;
	default: break;
	}
}

uint64_t sv_timers(struct sv_engine *e, uint64_t now, int fire)
{
	uint64_t next = 0;
	for (struct sv_qp *q = e->qp_list; q; q = q->next_all) {
		if (q->type == IBV_QPT_RC && q->sq_done < q->sq_tx && q->state != IBV_QPS_ERR) {
			struct sv_swr *w = sv_slot(q, q->sq_done);
			uint64_t due = w->deadline_ns;
			if (due && q->progress_ns + q->tmo_ns > due)
				due = q->progress_ns + q->tmo_ns;
			if (w->state == SWR_SENT && !w->rnr_wait && due) {
				if (now >= due && fire) {
					sv_log("qp 0x%06x: wr_id %llu: no response, transport retries exhausted",
					       q->ex.qp_base.qp_num, (unsigned long long)w->wr_id);
					w->state = SWR_DONE;
					w->status = IBV_WC_RETRY_EXC_ERR;
					sv_sq_complete(q);
				} else if (!next || due < next) {
					next = due;
				}
			}
		}
		if (q->inq_head && q->rnr_deadline_ns) {
			if (now >= q->rnr_deadline_ns && fire)
				sv_rnr_exceeded(q);
			else if (!next || q->rnr_deadline_ns < next)
				next = q->rnr_deadline_ns;
		}
	}
	return next;
}

void sv_qp_peer_dead(struct sv_engine *e, struct sv_peer *p)
{
	/* requests parked in an RNR wait at a vanished responder now run into the transport timeout */
	for (struct sv_qp *q = e->qp_list; q; q = q->next_all) {
		if (q->peer != p)
			continue;
		q->progress_ns = sv_now_ns();
		for (uint64_t s = q->sq_done; s < q->sq_tx; s++)
			sv_slot(q, s)->rnr_wait = 0;
	}
}

/* ---------------------------------------------------------------------------------------------------- */
/* receive posting                                                                                       */

int sv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_qp *q = sv_qp_of(ibqp);
	struct sv_engine *e = q->eng;
	int err = 0;
	pthread_mutex_lock(&e->lock);
	if (q->srq || q->state == IBV_QPS_RESET) {
		*bad = wr;
		pthread_mutex_unlock(&e->lock);
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		err = sv_rq_post(&q->rq, wr);
		if (err) {
			*bad = wr;
			break;
		}
	}
	if (q->state == IBV_QPS_ERR) {
		sv_rq_flush(q); /* posted in the error state: flushed at once */
	} else {
		sv_resp_drain(q);
	}
	pthread_mutex_unlock(&e->lock);
	return err;
}

/* ---------------------------------------------------------------------------------------------------- */
/* the ibv_qp_ex "new post send" interface                                                               */

static struct sv_qp *sv_qx(struct ibv_qp_ex *qx)
{
	return (struct sv_qp *)qx;
}

static void sv_wrb_clear(struct sv_wrb *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->lists[i]);
		free(b->inl[i]);
		b->lists[i] = NULL;
		b->inl[i] = NULL;
	}
	b->n = 0;
	b->err = 0;
}

static struct ibv_send_wr *sv_wrb_new(struct ibv_qp_ex *qx, enum ibv_wr_opcode op)
{
	struct sv_wrb *b = &sv_qx(qx)->wrb;
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 16;
		struct ibv_send_wr *w = realloc(b->wrs, nc * sizeof *w);
		struct ibv_sge *s = w ? realloc(b->sges, nc * sizeof *s) : NULL;
		struct ibv_sge **l = s ? realloc(b->lists, nc * sizeof *l) : NULL;
		uint8_t **in = l ? realloc(b->inl, nc * sizeof *in) : NULL;
		if (w)
			b->wrs = w;
		if (s)
			b->sges = s;
		if (l)
			b->lists = l;
		if (!in) {
			b->err = ENOMEM;
			return NULL;
		}
		b->inl = in;
		for (size_t i = b->cap; i < nc; i++)
			b->lists[i] = NULL, b->inl[i] = NULL;
		b->cap = nc;
	}
	struct ibv_send_wr *w = &b->wrs[b->n];
	memset(w, 0, sizeof *w);
	memset(&b->sges[b->n], 0, sizeof b->sges[b->n]);
	w->wr_id = qx->wr_id;
	w->send_flags = qx->wr_flags;
	w->opcode = op;
	b->n++;
	return w;
}

static struct ibv_send_wr *sv_wrb_cur(struct ibv_qp_ex *qx)
{
	struct sv_wrb *b = &sv_qx(qx)->wrb;
	if (!b->n) {
		b->err = EINVAL;
		return NULL;
	}
	return &b->wrs[b->n - 1];
}

static void sv_wr_start(struct ibv_qp_ex *qx)
{
	sv_wrb_clear(&sv_qx(qx)->wrb);
}

static void sv_wr_abort(struct ibv_qp_ex *qx)
{
	sv_wrb_clear(&sv_qx(qx)->wrb);
}

static int sv_wr_complete(struct ibv_qp_ex *qx)
{
	struct sv_qp *q = sv_qx(qx);
	struct sv_wrb *b = &q->wrb;
	int err = b->err;
	if (!err && b->n) {
		for (size_t i = 0; i < b->n; i++) {
			struct ibv_send_wr *w = &b->wrs[i];
			w->next = i + 1 < b->n ? &b->wrs[i + 1] : NULL;
			if (b->lists[i])
				w->sg_list = b->lists[i];
			else
				w->sg_list = &b->sges[i];
		}
		struct ibv_send_wr *bad;
		err = sv_post_send(&q->ex.qp_base, b->wrs, &bad);
	}
	sv_wrb_clear(b);
	return err;
}

static void sv_wr_send(struct ibv_qp_ex *qx)
{
	sv_wrb_new(qx, IBV_WR_SEND);
}

static void sv_wr_send_imm(struct ibv_qp_ex *qx, __be32 imm)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_SEND_WITH_IMM);
	if (w)
		w->imm_data = imm;
}

static void sv_wr_rdma_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_RDMA_WRITE);
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = raddr;
}

static void sv_wr_rdma_write_imm(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr, __be32 imm)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_RDMA_WRITE_WITH_IMM);
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = raddr, w->imm_data = imm;
}

static void sv_wr_rdma_read(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_RDMA_READ);
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = raddr;
}

static void sv_wr_cmp_swp(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr, uint64_t cmp, uint64_t swap)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_ATOMIC_CMP_AND_SWP);
	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = raddr;
		w->wr.atomic.compare_add = cmp;
		w->wr.atomic.swap = swap;
	}
}

static void sv_wr_fetch_add(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr, uint64_t add)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_ATOMIC_FETCH_AND_ADD);
	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = raddr;
		w->wr.atomic.compare_add = add;
	}
}

static void sv_wr_set_ud_addr(struct ibv_qp_ex *qx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct ibv_send_wr *w = sv_wrb_cur(qx);
	if (w)
		w->wr.ud.ah = ah, w->wr.ud.remote_qpn = qpn, w->wr.ud.remote_qkey = qkey;
}

static void sv_wr_set_sge(struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct sv_wrb *b = &sv_qx(qx)->wrb;
	struct ibv_send_wr *w = sv_wrb_cur(qx);
	if (!w)
		return;
	b->sges[b->n - 1] = (struct ibv_sge){.addr = addr, .length = length, .lkey = lkey};
	w->num_sge = 1;
}

static void sv_wr_set_sge_list(struct ibv_qp_ex *qx, size_t num, const struct ibv_sge *list)
{
	struct sv_wrb *b = &sv_qx(qx)->wrb;
	struct ibv_send_wr *w = sv_wrb_cur(qx);
	if (!w)
		return;
	if (num > SV_MAX_SGE) {
		b->err = EINVAL;
		return;
	}
	struct ibv_sge *l = malloc((num ? num : 1) * sizeof *l);
	if (!l) {
		b->err = ENOMEM;
		return;
	}
	memcpy(l, list, num * sizeof *l);
	free(b->lists[b->n - 1]);
	b->lists[b->n - 1] = l;
	w->num_sge = (int)num;
}

static void sv_wr_set_inline_list(struct ibv_qp_ex *qx, size_t num, const struct ibv_data_buf *bufs)
{
	struct sv_wrb *b = &sv_qx(qx)->wrb;
	struct ibv_send_wr *w = sv_wrb_cur(qx);
	if (!w)
		return;
	size_t total = 0;
	for (size_t i = 0; i < num; i++)
		total += bufs[i].length;
	uint8_t *d = malloc(total ? total : 1);
	if (!d) {
		b->err = ENOMEM;
		return;
	}
	size_t off = 0;
	for (size_t i = 0; i < num; i++) {
		memcpy(d + off, bufs[i].addr, bufs[i].length);
		off += bufs[i].length;
	}
	free(b->inl[b->n - 1]);
	b->inl[b->n - 1] = d;
	b->sges[b->n - 1] = (struct ibv_sge){.addr = (uintptr_t)d, .length = (uint32_t)total, .lkey = 0};
	w->num_sge = 1;
	w->send_flags |= IBV_SEND_INLINE;
}

static void sv_wr_set_inline(struct ibv_qp_ex *qx, void *addr, size_t length)
{
	struct ibv_data_buf b = {.addr = addr, .length = length};
	sv_wr_set_inline_list(qx, 1, &b);
}

static void sv_wr_unsupported_mw(struct ibv_qp_ex *qx, struct ibv_mw *mw, uint32_t rkey,
				 const struct ibv_mw_bind_info *info)
{
	(void)mw, (void)rkey, (void)info;
	sv_qx(qx)->wrb.err = EOPNOTSUPP;
}

static void sv_wr_unsupported_u32(struct ibv_qp_ex *qx, uint32_t v)
{
	(void)v;
	sv_qx(qx)->wrb.err = EOPNOTSUPP;
}

static void sv_wr_unsupported_tso(struct ibv_qp_ex *qx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr, (void)hdr_sz, (void)mss;
	sv_qx(qx)->wrb.err = EOPNOTSUPP;
}

static void sv_wr_unsupported_aw(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr, const void *wr)
{
	(void)rkey, (void)raddr, (void)wr;
	sv_qx(qx)->wrb.err = EOPNOTSUPP;
}

static void sv_qp_ex_init(struct sv_qp *q)
{
	struct ibv_qp_ex *x = &q->ex;
	x->wr_atomic_cmp_swp = sv_wr_cmp_swp;
	x->wr_atomic_fetch_add = sv_wr_fetch_add;
	x->wr_bind_mw = sv_wr_unsupported_mw;
	x->wr_local_inv = sv_wr_unsupported_u32;
	x->wr_rdma_read = sv_wr_rdma_read;
	x->wr_rdma_write = sv_wr_rdma_write;
	x->wr_rdma_write_imm = sv_wr_rdma_write_imm;
	x->wr_send = sv_wr_send;
	x->wr_send_imm = sv_wr_send_imm;
	x->wr_send_inv = sv_wr_unsupported_u32;
	x->wr_send_tso = sv_wr_unsupported_tso;
	x->wr_set_ud_addr = sv_wr_set_ud_addr;
	x->wr_set_xrc_srqn = sv_wr_unsupported_u32;
	x->wr_set_inline_data = sv_wr_set_inline;
	x->wr_set_inline_data_list = sv_wr_set_inline_list;
	x->wr_set_sge = sv_wr_set_sge;
	x->wr_set_sge_list = sv_wr_set_sge_list;
	x->wr_start = sv_wr_start;
	x->wr_complete = sv_wr_complete;
	x->wr_abort = sv_wr_abort;
	x->wr_atomic_write = sv_wr_unsupported_aw;
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct sv_qp *q = sv_qp_of(qp);
	return q->is_ex ? &q->ex : NULL;
}

/* ---------------------------------------------------------------------------------------------------- */
/* create / destroy / query / modify                                                                     */

static struct ibv_qp *sv_create_qp_common(struct ibv_context *c, struct ibv_qp_init_attr_ex *a, int is_ex)
{
	struct sv_context *ctx = sv_ctx(c);
	struct sv_engine *e = ctx->eng;
	struct ibv_qp_cap *cap = &a->cap;
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP; /* XRC, raw packet: not modelled */
		return NULL;
	}
	if (!a->pd || a->pd->context != c || !a->send_cq || !a->recv_cq || a->send_cq->context != c ||
	    a->recv_cq->context != c || (a->srq && a->srq->context != c) || cap->max_send_wr > SV_MAX_QP_WR ||
	    cap->max_send_sge > SV_MAX_SGE || cap->max_inline_data > SV_MAX_INLINE ||
	    (!a->srq && (cap->max_recv_wr > SV_MAX_QP_WR || cap->max_recv_sge > SV_MAX_SGE))) {
		errno = EINVAL;
		return NULL;
	}
	struct sv_qp *q = calloc(1, sizeof *q);
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	q->ctx = ctx;
	q->eng = e;
	q->pd = sv_pd_of(a->pd);
	q->scq = sv_cq_of(a->send_cq);
	q->rcq = sv_cq_of(a->recv_cq);
	q->srq = a->srq ? sv_srq_of(a->srq) : NULL;
	q->type = a->qp_type;
	q->state = IBV_QPS_RESET;
	q->sq_sig_all = a->sq_sig_all;
	q->is_ex = is_ex;
	q->send_ops_flags = a->send_ops_flags;
	q->path_mtu = IBV_MTU_1024;
	cap->max_send_sge = cap->max_send_sge ? cap->max_send_sge : 1;
	if (cap->max_inline_data < SV_DEF_INLINE)
		cap->max_inline_data = SV_DEF_INLINE;
	if (q->srq) {
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	} else if (!cap->max_recv_sge) {
		cap->max_recv_sge = 1;
	}
	q->cap = *cap;
	q->sq_cap = cap->max_send_wr ? cap->max_send_wr : 1;
	q->sq = calloc(q->sq_cap, sizeof *q->sq);
	if (!q->sq || (!q->srq && cap->max_recv_wr && sv_rq_init(&q->rq, cap->max_recv_wr, cap->max_recv_sge))) {
		free(q->sq);
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	if (!q->srq && !cap->max_recv_wr)
		q->rq.max_sge = cap->max_recv_sge;
	struct ibv_qp *qp = &q->ex.qp_base;
	qp->context = c;
	qp->qp_context = a->qp_context;
	qp->pd = a->pd;
	qp->send_cq = a->send_cq;
	qp->recv_cq = a->recv_cq;
	qp->srq = a->srq;
	qp->state = IBV_QPS_RESET;
	qp->qp_type = a->qp_type;
	pthread_mutex_init(&qp->mutex, NULL);
	pthread_cond_init(&qp->cond, NULL);
	if (is_ex)
		sv_qp_ex_init(q);

	pthread_mutex_lock(&e->lock);
	uint32_t qpn;
	do
		qpn = sv_rand32() & 0xffffff;
	while (qpn < 2 || sv_ht_get(&e->qps, qpn)); /* QP0/QP1 are the special management QPs */
	qp->qp_num = qpn;
	qp->handle = sv_new_handle(e);
	sv_ht_put(&e->qps, qpn, q);
	q->next_all = e->qp_list;
	e->qp_list = q;
	q->pd->refs++;
	q->scq->refs++;
	q->rcq->refs++;
	if (q->srq)
		q->srq->refs++;
	pthread_mutex_unlock(&e->lock);
	sv_log("created %s qp 0x%06x", q->type == IBV_QPT_RC ? "RC" : q->type == IBV_QPT_UC ? "UC" : "UD", qpn);
	return qp;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	struct ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof a);
	memcpy(&a, init, sizeof *init);
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	struct ibv_qp *qp = sv_create_qp_common(pd->context, &a, 0);
	if (qp)
		init->cap = a.cap;
	return qp;
}

struct ibv_qp *sv_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
	uint32_t supported = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	if ((a->comp_mask & ~supported) || ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD)) {
		errno = EINVAL;
		return NULL;
	}
	int is_ex = 0;
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		uint64_t ok = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
		if (a->qp_type != IBV_QPT_UD)
			ok |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
		if (a->qp_type == IBV_QPT_RC)
			ok |= IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
		if (a->send_ops_flags & ~ok) {
			errno = EOPNOTSUPP;
			return NULL;
		}
		is_ex = 1;
	}
	return sv_create_qp_common(c, a, is_ex);
}

static void sv_qp_reset(struct sv_qp *q)
{
	for (uint64_t s = q->sq_head; s < q->sq_tail; s++)
		sv_swr_release(sv_slot(q, s));
	q->sq_head = q->sq_done = q->sq_tx = q->sq_tail = 0;
	q->sq_blocked = 0;
	q->rd_outstanding = 0;
	q->rq.head = q->rq.count = 0;
	sv_free_inq(q);
	q->peer = NULL;
	q->comm_est = 0;
	q->sqd_notify = 0;
	q->sq_psn = q->epsn = 0;
	q->qkey = q->dest_qpn = 0;
	q->access = 0;
	memset(&q->ah, 0, sizeof q->ah);
	q->path_mtu = IBV_MTU_1024;
	q->timeout = q->retry_cnt = q->rnr_retry = q->min_rnr_timer = 0;
	q->tmo_ns = q->progress_ns = 0;
	q->max_rd_atomic = q->max_dest_rd_atomic = 0;
}

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sv_qp *q = sv_qp_of(ibqp);
	struct sv_engine *e = q->eng;
	pthread_mutex_lock(&e->lock);
	sv_ht_del(&e->qps, ibqp->qp_num);
	sv_ht_del(&e->hnds, ibqp->handle);
	for (struct sv_qp **pp = &e->qp_list; *pp; pp = &(*pp)->next_all)
		if (*pp == q) {
			*pp = q->next_all;
			break;
		}
	sv_qp_reset(q);
	q->pd->refs--;
	q->scq->refs--;
	q->rcq->refs--;
	if (q->srq)
		q->srq->refs--;
	sv_async_forget(q->ctx, ibqp);
	uint32_t want = q->events_reported;
	pthread_mutex_unlock(&e->lock);
	pthread_mutex_lock(&ibqp->mutex);
	while (ibqp->events_completed != want)
		pthread_cond_wait(&ibqp->cond, &ibqp->mutex);
	pthread_mutex_unlock(&ibqp->mutex);
	sv_wrb_clear(&q->wrb);
	free(q->wrb.wrs);
	free(q->wrb.sges);
	free(q->wrb.lists);
	free(q->wrb.inl);
	free(q->rq.slots);
	free(q->sq);
	free(q);
	return 0;
}

int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_qp_init_attr *init)
{
	(void)attr_mask; /* everything is cheap to report */
	struct sv_qp *q = sv_qp_of(ibqp);
	struct sv_engine *e = q->eng;
	pthread_mutex_lock(&e->lock);
	memset(attr, 0, sizeof *attr);
	attr->qp_state = q->state;
	attr->cur_qp_state = q->state;
	attr->path_mtu = q->path_mtu;
	attr->path_mig_state = q->mig_state;
	attr->qkey = q->qkey;
	attr->rq_psn = q->epsn;
	attr->sq_psn = q->sq_psn;
	attr->dest_qp_num = q->dest_qpn;
	attr->qp_access_flags = q->access;
	attr->cap = q->cap;
	attr->ah_attr = q->ah;
	attr->pkey_index = q->pkey_index;
	attr->en_sqd_async_notify = q->en_sqd_async_notify;
	attr->sq_draining = q->state == IBV_QPS_SQD && q->sq_done < q->sq_tx;
	attr->max_rd_atomic = q->max_rd_atomic;
	attr->max_dest_rd_atomic = q->max_dest_rd_atomic;
	attr->min_rnr_timer = q->min_rnr_timer;
	attr->port_num = q->port_num;
	attr->timeout = q->timeout;
	attr->retry_cnt = q->retry_cnt;
	attr->rnr_retry = q->rnr_retry;
	if (init) {
		memset(init, 0, sizeof *init);
		init->qp_context = ibqp->qp_context;
		init->send_cq = ibqp->send_cq;
		init->recv_cq = ibqp->recv_cq;
		init->srq = ibqp->srq;
		init->cap = q->cap;
		init->qp_type = q->type;
		init->sq_sig_all = q->sq_sig_all;
	}
	pthread_mutex_unlock(&e->lock);
	return 0;
}

/* IBA 10.3.1 / the kernel's ib_modify_qp_is_ok(): required and optional attributes per transition */
enum { T_UD, T_UC, T_RC, T_N };

struct sv_trans {
	int valid;
	int req[T_N];
	int opt[T_N];
};

static const struct sv_trans sv_table[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] =
		{
			[IBV_QPS_RESET] = {.valid = 1},
			[IBV_QPS_ERR] = {.valid = 1},
			[IBV_QPS_INIT] = {.valid = 1,
					  .req = {[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
						  [T_UC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
						  [T_RC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS}},
		},
	[IBV_QPS_INIT] =
		{
			[IBV_QPS_RESET] = {.valid = 1},
			[IBV_QPS_ERR] = {.valid = 1},
			[IBV_QPS_INIT] = {.valid = 1,
					  .opt = {[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
						  [T_UC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
						  [T_RC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS}},
			[IBV_QPS_RTR] = {.valid = 1,
					 .req = {[T_UC] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
						 [T_RC] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
							  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER},
					 .opt = {[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
						 [T_UC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
						 [T_RC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX}},
		},
	[IBV_QPS_RTR] =
		{
			[IBV_QPS_RESET] = {.valid = 1},
			[IBV_QPS_ERR] = {.valid = 1},
			[IBV_QPS_RTS] = {.valid = 1,
					 .req = {[T_UD] = IBV_QP_SQ_PSN,
						 [T_UC] = IBV_QP_SQ_PSN,
						 [T_RC] = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
							  IBV_QP_MAX_QP_RD_ATOMIC},
					 .opt = {[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,
						 [T_UC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
							  IBV_QP_PATH_MIG_STATE,
						 [T_RC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
							  IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE}},
		},
	[IBV_QPS_RTS] =
		{
			[IBV_QPS_RESET] = {.valid = 1},
			[IBV_QPS_ERR] = {.valid = 1},
			[IBV_QPS_RTS] = {.valid = 1,
					 .opt = {[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,
						 [T_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
							  IBV_QP_PATH_MIG_STATE,
						 [T_RC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
							  IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER}},
			[IBV_QPS_SQD] = {.valid = 1,
					 .opt = {[T_UD] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
						 [T_UC] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
						 [T_RC] = IBV_QP_EN_SQD_ASYNC_NOTIFY}},
		},
	[IBV_QPS_SQD] =
		{
			[IBV_QPS_RESET] = {.valid = 1},
			[IBV_QPS_ERR] = {.valid = 1},
			[IBV_QPS_RTS] = {.valid = 1,
					 .opt = {[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,
						 [T_UC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
							  IBV_QP_PATH_MIG_STATE,
						 [T_RC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
							  IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE}},
			[IBV_QPS_SQD] = {.valid = 1,
					 .opt = {[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
						 [T_UC] = IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
							  IBV_QP_PATH_MIG_STATE,
						 [T_RC] = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
							  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
							  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
							  IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE}},
		},
	[IBV_QPS_SQE] =
		{
			[IBV_QPS_RESET] = {.valid = 1},
			[IBV_QPS_ERR] = {.valid = 1},
			[IBV_QPS_RTS] = {.valid = 1,
					 .opt = {[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,
						 [T_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS}},
		},
	[IBV_QPS_ERR] =
		{
			[IBV_QPS_RESET] = {.valid = 1},
			[IBV_QPS_ERR] = {.valid = 1},
		},
};

#define SV_QP_ACCESS_OK \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static int sv_modify_check(struct sv_qp *q, const struct ibv_qp_attr *a, int mask)
{
	enum ibv_qp_state cur = q->state;
	if (mask & IBV_QP_CUR_STATE) {
		if (a->cur_qp_state != cur)
			return EINVAL;
		if (cur != IBV_QPS_RTR && cur != IBV_QPS_RTS && cur != IBV_QPS_SQD && cur != IBV_QPS_SQE)
			return EINVAL;
	}
	enum ibv_qp_state nxt = (mask & IBV_QP_STATE) ? a->qp_state : cur;
	if ((unsigned)nxt > IBV_QPS_ERR || (unsigned)cur > IBV_QPS_ERR)
		return EINVAL;
	const struct sv_trans *t = &sv_table[cur][nxt];
	int ti = q->type == IBV_QPT_UD ? T_UD : q->type == IBV_QPT_UC ? T_UC : T_RC;
	if (!t->valid)
		return EINVAL;
	if ((mask & t->req[ti]) != t->req[ti])
		return EINVAL;
	if (mask & ~(t->req[ti] | t->opt[ti] | IBV_QP_STATE))
		return EINVAL;
	if (mask & IBV_QP_ALT_PATH)
		return EINVAL; /* automatic path migration is not modelled (and not advertised) */
	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= SV_PKEY_TBL_LEN)
		return EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) && (a->qp_access_flags & ~(unsigned)SV_QP_ACCESS_OK))
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > SV_PORT_MTU))
		return EINVAL;
	if (mask & IBV_QP_AV) {
		if (a->ah_attr.port_num != 1)
			return EINVAL;
		if (a->ah_attr.is_global && a->ah_attr.grh.sgid_index >= SV_GID_TBL_LEN)
			return EINVAL;
	}
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > SV_MAX_RD_ATOM)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > SV_MAX_RD_ATOM)
		return EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		return EINVAL;
	if ((mask & IBV_QP_PATH_MIG_STATE) && a->path_mig_state > IBV_MIG_ARMED)
		return EINVAL;
	return 0;
}

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct sv_qp *q = sv_qp_of(ibqp);
	struct sv_engine *e = q->eng;
	struct sv_peer *peer = NULL;
	int err;
	int want_path = (mask & IBV_QP_AV) && q->type != IBV_QPT_UD;
	if (want_path) {
		pthread_mutex_lock(&e->lock);
		err = sv_modify_check(q, attr, mask);
		pthread_mutex_unlock(&e->lock);
		if (err)
			return err;
		peer = sv_resolve(e, &attr->ah_attr); /* may connect: outside the lock */
		if (!peer)
			sv_log("qp 0x%06x: destination lid 0x%04x unreachable", ibqp->qp_num, attr->ah_attr.dlid);
	}
	pthread_mutex_lock(&e->lock);
	err = sv_modify_check(q, attr, mask);
	if (err) {
		pthread_mutex_unlock(&e->lock);
		return err;
	}
	enum ibv_qp_state cur = q->state;
	enum ibv_qp_state nxt = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (mask & IBV_QP_ACCESS_FLAGS)
		q->access = attr->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		q->pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		q->port_num = attr->port_num;
	if (mask & IBV_QP_QKEY)
		q->qkey = attr->qkey;
	if (mask & IBV_QP_AV) {
		q->ah = attr->ah_attr;
		if (want_path)
			q->peer = peer;
	}
	if (mask & IBV_QP_PATH_MTU)
		q->path_mtu = attr->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		q->timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		q->retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		q->rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_RQ_PSN)
		q->epsn = attr->rq_psn & 0xffffff;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		q->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		q->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_SQ_PSN)
		q->sq_psn = attr->sq_psn & 0xffffff;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		q->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_PATH_MIG_STATE)
		q->mig_state = attr->path_mig_state;
	if (mask & IBV_QP_DEST_QPN)
		q->dest_qpn = attr->dest_qp_num;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		q->en_sqd_async_notify = attr->en_sqd_async_notify;
	if (mask & (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT))
		q->tmo_ns = sv_transport_timeout_ns(q->timeout, q->retry_cnt);

	if (nxt != cur || (mask & IBV_QP_STATE)) {
		switch (nxt) {
		case IBV_QPS_RESET: sv_qp_reset(q); q->state = IBV_QPS_RESET; break;
		case IBV_QPS_ERR:
			sv_qp_to_err(q);
			sv_sq_complete(q);
			break;
		case IBV_QPS_SQD:
			q->state = IBV_QPS_SQD;
			q->sqd_notify = q->en_sqd_async_notify;
			sv_sq_complete(q);
			break;
		case IBV_QPS_RTS:
			q->state = IBV_QPS_RTS;
			sv_sq_kick(q);
			break;
		default: q->state = nxt; break;
		}
	}
	pthread_mutex_unlock(&e->lock);
	if (mask & IBV_QP_STATE)
		ibqp->state = attr->qp_state;
	return 0;
}

int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)op;
	if (flags)
		return 0;
	/* the responder writes each message with one memcpy, in order, before acknowledging it */
	return qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_UC;
}

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}
