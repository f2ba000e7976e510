/* softverbs (daemon): queue pairs. State machine, posting, the requester side (transmit, ACKs, timeouts,
 * completion order) and the responder side (PSN check, receive WR matching, RNR waits, RDMA write/read,
 * atomics, UD). The program's memory is read and written with process_vm_readv/writev (sv_mem_*). */
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

static pid_t sv_mr_pid(struct sv_mr *mr)
{
	return sv_ctx(mr->mr.context)->pid;
}

/* resolve a local SGE (lkey) to the program's memory; -1 = protection error */
static int sv_local(struct sv_engine *e, struct sv_pd *pd, const struct ibv_sge *s, int need_write, pid_t *pid,
		    uint64_t *addr)
{
	struct sv_mr *mr = sv_mr_find(e, s->lkey);
	if (!mr || mr->pd != pd)
		return -1;
	if (need_write && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return -1;
	if (s->addr < mr->iova || s->addr - mr->iova > mr->len || mr->len - (s->addr - mr->iova) < s->length)
		return -1;
	*pid = sv_mr_pid(mr);
	*addr = mr->haddr + (s->addr - mr->iova);
	return 0;
}

static void sv_transmit(struct sv_qp *q, struct sv_swr *w)
{
	struct sv_engine *e = q->eng;
	struct iovec iov[1];
	int n = 0;
	uint64_t len = 0;
	enum ibv_wc_status lerr = IBV_WC_SUCCESS;
	uint8_t *gather = NULL;

	if (w->inl) {
		iov[n].iov_base = w->inl;
		iov[n++].iov_len = w->inl_len;
		len = w->inl_len;
	} else {
		/* gather now (the "DMA read" of the source buffers), from the program's memory */
		int need_write = w->is_rd;
		for (int i = 0; i < w->nsge; i++)
			len += w->sge[i].length;
		int payload = !w->is_rd;
		if (payload && len && len <= SV_MAX_MSG && !(gather = malloc(len)))
			lerr = IBV_WC_LOC_LEN_ERR;
		uint64_t off = 0;
		for (int i = 0; i < w->nsge && !lerr; i++) {
			if (!w->sge[i].length)
				continue;
			pid_t pid;
			uint64_t a;
			if (sv_local(e, q->pd, &w->sge[i], need_write, &pid, &a) ||
			    (gather && sv_mem_read(pid, a, gather + off, w->sge[i].length))) {
				lerr = IBV_WC_LOC_PROT_ERR;
				break;
			}
			off += w->sge[i].length;
		}
		if (gather) {
			iov[n].iov_base = gather;
			iov[n++].iov_len = len;
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
		free(gather);
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
	free(gather);
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
	int err = 0;
	for (; wr; wr = wr->next) {
		err = sv_sq_post_one(q, wr);
		if (err) {
			*bad = wr;
			break;
		}
	}
	sv_sq_kick(q);
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
		pid_t pid;
		uint64_t a;
		if (sv_local(q->eng, q->pd, &w->sge[i], 1, &pid, &a) || sv_mem_write(pid, a, data, n)) {
			w->status = IBV_WC_LOC_PROT_ERR; /* MR deregistered (or unmapped) while the read was outstanding */
			return;
		}
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

/* remote access check: the program's memory (pid, address), or -1 on a violation */
static int sv_remote(struct sv_qp *q, uint32_t rkey, uint64_t raddr, uint64_t len, unsigned need, pid_t *pid,
		     uint64_t *addr)
{
	if (!(q->access & need))
		return -1;
	struct sv_mr *mr = sv_mr_find(q->eng, rkey);
	if (!mr || mr->pd != q->pd || !(mr->access & need))
		return -1;
	if (raddr < mr->iova || raddr - mr->iova > mr->len || mr->len - (raddr - mr->iova) < len)
		return -1;
	*pid = sv_mr_pid(mr);
	*addr = mr->haddr + (raddr - mr->iova);
	return 0;
}

/* an RDMA read's data, from the program's memory; -1 = violation or fault */
static int sv_read_remote(struct sv_qp *q, const struct sv_wire *h, uint64_t len, uint8_t **buf)
{
	pid_t pid;
	uint64_t a;
	*buf = NULL;
	if (!len)
		return 0;
	if (sv_remote(q, h->rkey, h->raddr, len, IBV_ACCESS_REMOTE_READ, &pid, &a))
		return -1;
	*buf = malloc(len);
	if (!*buf || sv_mem_read(pid, a, *buf, len)) {
		free(*buf);
		*buf = NULL;
		return -1;
	}
	return 0;
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
		pid_t pid;
		uint64_t a;
		if (sv_local(q->eng, pd, &r->sge[i], 1, &pid, &a) || sv_mem_write(pid, a + off, data, n))
			return IBV_WC_LOC_PROT_ERR;
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

/* the responder's program has exited and its memory is gone (its QPs are being destroyed): the QP drops
 * this and every later request, like a dead host; the requester runs into its transport timeout */
static int sv_resp_gone(struct sv_qp *q)
{
	sv_log("qp 0x%06x: the program is gone, request dropped", q->ex.qp_base.qp_num);
	sv_qp_to_err(q);
	sv_sq_complete(q);
	return SV_DONE;
}

/* process one request in order; SV_BLOCKED = needs a receive WR that is not there yet */
static int sv_resp_one(struct sv_qp *q, const struct sv_wire *h, uint8_t *data)
{
	int rc_qp = q->type == IBV_QPT_RC;
	uint64_t plen = h->len - sizeof *h;
	uint64_t len = h->op == SV_OP_READ ? h->rlen : (h->op == SV_OP_CMP_SWP || h->op == SV_OP_FETCH_ADD) ? 8 : plen;
	uint32_t npk = sv_npkts(len, q->path_mtu);
	sv_mem_gone = 0;

	int32_t d = sv_psn_diff(h->psn, q->epsn);
	if (d != 0) {
		if (!rc_qp) { /* UC: drop the message, resynchronise on the next one */
			if (d > 0)
				q->epsn = (h->psn + npk) & 0xffffff;
			return SV_DONE;
		}
		if (d < 0) { /* duplicate: acknowledge again, re-execute reads, no new side effects */
			if (h->op == SV_OP_READ) {
				uint8_t *p;
				if (sv_read_remote(q, h, len, &p))
					return SV_DONE;
				struct iovec v = {.iov_base = p, .iov_len = len};
				sv_respond(q, h, SV_OP_READ_RESP, 0, &v, len ? 1 : 0);
				free(p);
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
		if (sv_mem_gone)
			return sv_resp_gone(q);
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
		if (len) {
			pid_t pid;
			uint64_t a;
			if (sv_remote(q, h->rkey, h->raddr, len, IBV_ACCESS_REMOTE_WRITE, &pid, &a) ||
			    sv_mem_write(pid, a, data, len)) {
				if (sv_mem_gone)
					return sv_resp_gone(q);
				sv_log("qp 0x%06x: RDMA write rkey 0x%08x addr 0x%llx len %llu: access violation",
				       q->ex.qp_base.qp_num, h->rkey, (unsigned long long)h->raddr, (unsigned long long)len);
				if (!rc_qp) { /* UC: dropped */
					q->epsn = (q->epsn + npk) & 0xffffff;
					return SV_DONE;
				}
				sv_resp_fatal(q, h, SV_NAK_REM_ACCESS);
				return SV_DONE;
			}
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
		uint8_t *p;
		if (sv_read_remote(q, h, len, &p)) {
			if (sv_mem_gone)
				return sv_resp_gone(q);
			sv_log("qp 0x%06x: RDMA read rkey 0x%08x: access violation", q->ex.qp_base.qp_num, h->rkey);
			sv_resp_fatal(q, h, SV_NAK_REM_ACCESS);
			return SV_DONE;
		}
		q->epsn = (q->epsn + npk) & 0xffffff;
		struct iovec v = {.iov_base = p, .iov_len = len};
		sv_respond(q, h, SV_OP_READ_RESP, 0, &v, len ? 1 : 0);
		free(p);
		return SV_DONE;
	}
	case SV_OP_CMP_SWP:
	case SV_OP_FETCH_ADD: {
		if (h->raddr & 7) {
			sv_resp_fatal(q, h, SV_NAK_INV_REQ);
			return SV_DONE;
		}
		/* read-modify-write of the program's memory: atomic with respect to every other atomic of this
		 * device (the daemon executes them one at a time under its lock), not to the program's CPU accesses:
		 * exactly IBV_ATOMIC_HCA */
		pid_t pid;
		uint64_t a, orig;
		if (sv_remote(q, h->rkey, h->raddr, 8, IBV_ACCESS_REMOTE_ATOMIC, &pid, &a) || sv_mem_read(pid, a, &orig, 8)) {
			if (sv_mem_gone)
				return sv_resp_gone(q);
			sv_resp_fatal(q, h, SV_NAK_REM_ACCESS);
			return SV_DONE;
		}
		uint64_t nv = h->op == SV_OP_CMP_SWP ? (orig == h->cmp_add ? h->swap : orig) : orig + h->cmp_add;
		if (nv != orig && sv_mem_write(pid, a, &nv, 8)) {
			if (sv_mem_gone)
				return sv_resp_gone(q);
			sv_resp_fatal(q, h, SV_NAK_REM_ACCESS);
			return SV_DONE;
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
	sv_mem_gone = 0;
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
	if (sv_mem_gone)
		return; /* the receiving program is gone */
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
	int err = 0;
	if (q->srq || q->state == IBV_QPS_RESET) {
		*bad = wr;
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
	return err;
}

/* ---------------------------------------------------------------------------------------------------- */
/* create / destroy / query / modify                                                                     */

/* create a QP of ctx; the caller checked type and comp_mask and resolved pd/cq/srq handles to daemon objects.
 * errno on failure. */
struct ibv_qp *sv_create_qp(struct sv_context *ctx, struct ibv_qp_init_attr_ex *a, int is_ex)
{
	struct ibv_context *c = &ctx->vctx.context;
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
	qp->pd = a->pd;
	qp->send_cq = a->send_cq;
	qp->recv_cq = a->recv_cq;
	qp->srq = a->srq;
	qp->state = IBV_QPS_RESET;
	qp->qp_type = a->qp_type;

	uint32_t qpn;
	do /* QP numbers are random per QP: a re-created QP (a restarted program) gets a new one */
		qpn = sv_rand32() & 0xffffff;
	while (qpn < 2 || sv_ht_get(&e->qps, qpn)); /* QP0/QP1 are the special management QPs */
	qp->qp_num = qpn;
	qp->handle = sv_new_handle(e, ctx, SVO_QP, q);
	sv_ht_put(&e->qps, qpn, q);
	q->next_all = e->qp_list;
	e->qp_list = q;
	q->pd->refs++;
	q->scq->refs++;
	q->rcq->refs++;
	if (q->srq)
		q->srq->refs++;
	sv_log("created %s qp 0x%06x for pid %d", q->type == IBV_QPT_RC ? "RC" : q->type == IBV_QPT_UC ? "UC" : "UD", qpn,
	       (int)ctx->pid);
	return qp;
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

int sv_destroy_qp(struct sv_qp *q)
{
	struct sv_engine *e = q->eng;
	struct ibv_qp *ibqp = &q->ex.qp_base;
	sv_ht_del(&e->qps, ibqp->qp_num);
	sv_obj_del(e, ibqp->handle);
	for (struct sv_qp **pp = &e->qp_list; *pp; pp = &(*pp)->next_all)
		if (*pp == q) {
			*pp = q->next_all;
			break;
		}
	sv_qp_reset(q);
	sv_srq_unwait(q);
	q->pd->refs--;
	q->scq->refs--;
	q->rcq->refs--;
	if (q->srq)
		q->srq->refs--;
	free(q->rq.slots);
	free(q->sq);
	free(q);
	return 0;
}

void sv_query_qp(struct sv_qp *q, struct ibv_qp_attr *attr)
{
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

int sv_modify_qp_check(struct sv_qp *q, struct ibv_qp_attr *attr, int mask)
{
	return sv_modify_check(q, attr, mask);
}

/* peer: the resolved path when mask has IBV_QP_AV (resolved by the caller without e->lock) */
int sv_modify_qp(struct sv_qp *q, struct ibv_qp_attr *attr, int mask, struct sv_peer *peer)
{
	int want_path = (mask & IBV_QP_AV) && q->type != IBV_QPT_UD;
	int err = sv_modify_check(q, attr, mask);
	if (err)
		return err;
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
	if (mask & IBV_QP_STATE)
		q->ex.qp_base.state = attr->qp_state;
	return 0;
}

