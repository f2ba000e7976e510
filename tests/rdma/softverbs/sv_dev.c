/* softverbs (daemon): the device objects of connected programs (PD, MR, completion channel, CQ, SRQ, AH,
 * QP handles), the calls of the library<->daemon protocol (sv_proto.h), and the cleanup when a program
 * disconnects (dies). */
#include "sv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- handles ---- */
uint32_t sv_new_handle(struct sv_engine *e, struct sv_context *ctx, int type, void *p)
{
	struct sv_obj *o = malloc(sizeof *o);
	if (!o)
		abort();
	o->type = type;
	o->ctx = ctx;
	o->p = p;
	for (;;) { /* random: a re-created object never gets its old handle back by construction */
		uint32_t h = sv_rand32();
		if (h && !sv_ht_get(&e->hnds, h)) {
			if (sv_ht_put(&e->hnds, h, o))
				abort();
			return h;
		}
	}
}

void *sv_obj_get(struct sv_context *ctx, int type, uint32_t handle)
{
	struct sv_obj *o = handle ? sv_ht_get(&ctx->eng->hnds, handle) : NULL;
	return o && o->type == type && o->ctx == ctx ? o->p : NULL;
}

void sv_obj_del(struct sv_engine *e, uint32_t handle)
{
	free(sv_ht_del(&e->hnds, handle));
}

/* ---- the program's memory ---- */
int sv_mem_gone;

int sv_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		struct iovec l = {.iov_base = (uint8_t *)buf + done, .iov_len = len - done};
		struct iovec r = {.iov_base = (void *)(uintptr_t)(addr + done), .iov_len = len - done};
		ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0 && errno == ESRCH)
				sv_mem_gone = 1;
			sv_log("process_vm_readv pid %d addr 0x%llx len %zu: %s", (int)pid, (unsigned long long)addr, len,
			       n < 0 ? strerror(errno) : "short");
			return -1;
		}
		done += (size_t)n;
	}
	return 0;
}

int sv_mem_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		struct iovec l = {.iov_base = (uint8_t *)buf + done, .iov_len = len - done};
		struct iovec r = {.iov_base = (void *)(uintptr_t)(addr + done), .iov_len = len - done};
		ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0 && errno == ESRCH)
				sv_mem_gone = 1;
			sv_log("process_vm_writev pid %d addr 0x%llx len %zu: %s", (int)pid, (unsigned long long)addr, len,
			       n < 0 ? strerror(errno) : "short");
			return -1;
		}
		done += (size_t)n;
	}
	return 0;
}

/* ---- async events: svp_async records in the program's async pipe ---- */
static void sv_async_push(struct sv_context *ctx, enum ibv_event_type t, uint32_t handle)
{
	struct svp_async a = {.type = (uint32_t)t, .handle = handle};
	if (ctx->async_wfd < 0)
		return;
	if (write(ctx->async_wfd, &a, sizeof a) != (ssize_t)sizeof a)
		sv_log("async event %d for handle 0x%08x lost (pipe full?)", (int)t, handle);
}

void sv_async_qp(struct sv_qp *q, enum ibv_event_type t)
{
	sv_async_push(q->ctx, t, q->ex.qp_base.handle);
}

void sv_async_srq(struct sv_srq *s, enum ibv_event_type t)
{
	sv_async_push(s->ctx, t, s->srq.handle);
}

void sv_async_cq(struct sv_cq *cq, enum ibv_event_type t)
{
	sv_async_push(cq->ctx, t, cq->cq.handle);
}

/* ---- PD ---- */
static int svd_alloc_pd(struct sv_context *ctx, uint32_t *handle)
{
	struct sv_pd *pd = calloc(1, sizeof *pd);
	if (!pd)
		return ENOMEM;
	pd->pd.context = &ctx->vctx.context;
	pd->pd.handle = *handle = sv_new_handle(ctx->eng, ctx, SVO_PD, pd);
	return 0;
}

static int svd_dealloc_pd(struct sv_pd *pd, int force)
{
	if (pd->refs && !force)
		return EBUSY;
	sv_obj_del(sv_ctx(pd->pd.context)->eng, pd->pd.handle);
	free(pd);
	return 0;
}

/* ---- MR ---- */
struct sv_mr *sv_mr_find(struct sv_engine *e, uint32_t key)
{
	return sv_ht_get(&e->mrs, key);
}

/* the library checked the arguments (flags, and that the range is mapped, in the program) */
static int svd_reg_mr(struct sv_context *ctx, const struct svp_mr_req *r, struct svp_mr_rep *rep)
{
	struct sv_engine *e = ctx->eng;
	struct sv_pd *pd = sv_obj_get(ctx, SVO_PD, r->pd);
	if (!pd)
		return EINVAL;
	struct sv_mr *mr = calloc(1, sizeof *mr);
	if (!mr)
		return ENOMEM;
	mr->pd = pd;
	mr->access = r->access;
	mr->iova = (r->access & IBV_ACCESS_ZERO_BASED) ? 0 : r->iova;
	mr->haddr = r->addr;
	mr->len = r->len;
	mr->mr.context = &ctx->vctx.context;
	mr->mr.pd = &pd->pd;
	uint32_t key;
	do /* keys are random: a re-registered buffer (a restarted program) gets new ones */
		key = sv_rand32();
	while (!key || sv_ht_get(&e->mrs, key));
	if (sv_ht_put(&e->mrs, key, mr)) {
		free(mr);
		return ENOMEM;
	}
	mr->mr.handle = sv_new_handle(e, ctx, SVO_MR, mr);
	mr->mr.lkey = mr->mr.rkey = key;
	pd->refs++;
	rep->handle = mr->mr.handle;
	rep->lkey = rep->rkey = key;
	return 0;
}

static int svd_rereg_mr(struct sv_context *ctx, const struct svp_mr_req *r)
{
	struct sv_mr *mr = sv_obj_get(ctx, SVO_MR, r->mr);
	if (!mr)
		return EINVAL;
	struct sv_pd *npd = NULL;
	if (r->flags & IBV_REREG_MR_CHANGE_PD) {
		npd = sv_obj_get(ctx, SVO_PD, r->pd);
		if (!npd)
			return EINVAL;
	}
	if (npd) {
		mr->pd->refs--;
		mr->pd = npd;
		npd->refs++;
		mr->mr.pd = &npd->pd;
	}
	unsigned nacc = (r->flags & IBV_REREG_MR_CHANGE_ACCESS) ? r->access : mr->access;
	if (r->flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->haddr = r->addr;
		mr->len = r->len;
		mr->iova = (nacc & IBV_ACCESS_ZERO_BASED) ? 0 : r->addr;
	}
	mr->access = nacc;
	return 0;
}

static int svd_dereg_mr(struct sv_mr *mr)
{
	struct sv_engine *e = sv_ctx(mr->mr.context)->eng;
	sv_ht_del(&e->mrs, mr->mr.lkey);
	sv_obj_del(e, mr->mr.handle);
	mr->pd->refs--;
	free(mr);
	return 0;
}

/* ---- completion channel ---- */
static int svd_create_ch(struct sv_context *ctx, int wfd, uint32_t *handle)
{
	if (wfd < 0)
		return EINVAL;
	struct sv_channel *ch = calloc(1, sizeof *ch);
	if (!ch)
		return ENOMEM;
	ch->ctx = ctx;
	ch->wfd = wfd;
	ch->handle = *handle = sv_new_handle(ctx->eng, ctx, SVO_CH, ch);
	return 0;
}

static int svd_destroy_ch(struct sv_channel *ch, int force)
{
	if (ch->refs && !force)
		return EBUSY;
	sv_obj_del(ch->ctx->eng, ch->handle);
	close(ch->wfd);
	free(ch);
	return 0;
}

/* ---- CQ ---- */
/* a ring of cap entries in a new memfd, mapped here; returns the fd (the program maps it too) */
static int sv_ring_new(uint32_t cap, struct svp_cqring **ring, size_t *len)
{
	size_t l = svp_ring_len(cap);
	int fd = memfd_create("softverbs-cq", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)l)) {
		close(fd);
		return -1;
	}
	void *p = mmap(NULL, l, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -1;
	}
	*ring = p;
	(*ring)->cap = cap;
	*len = l;
	return fd;
}

static int svd_create_cq(struct sv_context *ctx, const struct svp_cq_req *r, struct svp_cq_rep *rep, int *ofd)
{
	struct sv_channel *ch = NULL;
	if (r->cqe < 1 || r->cqe > SV_MAX_CQE)
		return EINVAL;
	if (r->channel && !(ch = sv_obj_get(ctx, SVO_CH, r->channel)))
		return EINVAL;
	struct sv_cq *cq = calloc(1, sizeof *cq);
	if (!cq)
		return ENOMEM;
	uint32_t cap = 1;
	while (cap < r->cqe + 1)
		cap <<= 1;
	cap -= 1; /* like common HCAs: a power of two minus one */
	if (cap < r->cqe)
		cap = r->cqe;
	int fd = sv_ring_new(cap, &cq->ring, &cq->ring_len);
	if (fd < 0) {
		free(cq);
		return ENOMEM;
	}
	cq->ctx = ctx;
	cq->chan = ch;
	cq->with_ts = r->with_ts != 0;
	cq->cq.context = &ctx->vctx.context;
	cq->cq.cqe = (int)cap;
	cq->cq.handle = sv_new_handle(ctx->eng, ctx, SVO_CQ, cq);
	if (ch)
		ch->refs++;
	rep->handle = cq->cq.handle;
	rep->cap = cap;
	rep->map_len = cq->ring_len;
	*ofd = fd;
	return 0;
}

static int svd_resize_cq(struct sv_context *ctx, const struct svp_cq_req *r, struct svp_cq_rep *rep, int *ofd)
{
	struct sv_cq *cq = sv_obj_get(ctx, SVO_CQ, r->cq);
	if (!cq)
		return EINVAL;
	if (r->cqe < 1 || r->cqe > SV_MAX_CQE)
		return EINVAL;
	struct svp_cqring *o = cq->ring;
	uint64_t head = __atomic_load_n(&o->head, __ATOMIC_ACQUIRE); /* the program holds its poll lock */
	uint64_t count = o->tail - head;
	if (r->cqe < count)
		return EINVAL;
	struct svp_cqring *n;
	size_t nlen;
	int fd = sv_ring_new(r->cqe, &n, &nlen);
	if (fd < 0)
		return ENOMEM;
	for (uint64_t i = 0; i < count; i++)
		n->e[i] = o->e[(head + i) % o->cap];
	n->tail = count;
	n->head = 0;
	n->armed = __atomic_load_n(&o->armed, __ATOMIC_SEQ_CST);
	munmap(o, cq->ring_len);
	cq->ring = n;
	cq->ring_len = nlen;
	cq->cq.cqe = (int)r->cqe;
	rep->handle = cq->cq.handle;
	rep->cap = r->cqe;
	rep->map_len = nlen;
	*ofd = fd;
	return 0;
}

static int svd_destroy_cq(struct sv_cq *cq, int force)
{
	if (cq->refs && !force)
		return EBUSY;
	if (cq->chan)
		cq->chan->refs--;
	sv_obj_del(cq->ctx->eng, cq->cq.handle);
	munmap(cq->ring, cq->ring_len);
	free(cq);
	return 0;
}

void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, int solicited)
{
	struct svp_cqring *r = cq->ring;
	uint64_t tail = r->tail;
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	if (tail - head >= r->cap) {
		sv_log("CQ overrun (cqe %u): completion of wr_id %llu lost", r->cap, (unsigned long long)wc->wr_id);
		sv_async_cq(cq, IBV_EVENT_CQ_ERR);
		return;
	}
	struct svp_cqe *e = &r->e[tail % r->cap];
	e->wc = *wc;
	e->ts = cq->with_ts ? sv_now_ns() : 0;
	__atomic_store_n(&r->tail, tail + 1, __ATOMIC_SEQ_CST);
	if (!cq->chan)
		return;
	/* the program arms by storing r->armed (seq_cst) and then polls: either it sees this entry or we see
	 * its arming */
	uint32_t a = __atomic_load_n(&r->armed, __ATOMIC_SEQ_CST);
	if (a && (a == 1 || solicited || wc->status != IBV_WC_SUCCESS) &&
	    __atomic_compare_exchange_n(&r->armed, &a, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		uint32_t h = cq->cq.handle;
		if (write(cq->chan->wfd, &h, sizeof h) != (ssize_t)sizeof h)
			sv_log("completion event of cq 0x%08x lost", h);
	}
}

/* ---- receive queues ---- */
int sv_rq_init(struct sv_rq *rq, uint32_t cap, uint32_t max_sge)
{
	rq->stride = sizeof(struct sv_rwr) + (size_t)max_sge * sizeof(struct ibv_sge);
	rq->cap = cap;
	rq->max_sge = max_sge;
	rq->head = rq->count = 0;
	rq->slots = cap ? calloc(cap, rq->stride) : NULL;
	return cap && !rq->slots ? ENOMEM : 0;
}

int sv_rq_post(struct sv_rq *rq, const struct ibv_recv_wr *wr)
{
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge)
		return EINVAL;
	if (rq->count >= rq->cap)
		return ENOMEM;
	struct sv_rwr *r = (struct sv_rwr *)(rq->slots + (size_t)((rq->head + rq->count) % rq->cap) * rq->stride);
	r->wr_id = wr->wr_id;
	r->nsge = wr->num_sge;
	if (wr->num_sge)
		memcpy(r->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
	rq->count++;
	return 0;
}

struct sv_rwr *sv_rq_peek(struct sv_rq *rq)
{
	if (!rq->count)
		return NULL;
	return (struct sv_rwr *)(rq->slots + (size_t)rq->head * rq->stride);
}

void sv_rq_pop(struct sv_rq *rq)
{
	rq->head = (rq->head + 1) % rq->cap;
	rq->count--;
}

/* ---- SRQ ---- */
static int svd_create_srq(struct sv_context *ctx, const struct svp_srq_req *r, struct svp_srq_rep *rep)
{
	struct sv_pd *pd = sv_obj_get(ctx, SVO_PD, r->pd);
	if (!pd)
		return EINVAL;
	if (!r->max_wr || r->max_wr > SV_MAX_SRQ_WR || r->max_sge > SV_MAX_SGE || r->srq_limit > r->max_wr)
		return EINVAL;
	struct sv_srq *s = calloc(1, sizeof *s);
	uint32_t max_sge = r->max_sge ? r->max_sge : 1;
	if (!s || sv_rq_init(&s->rq, r->max_wr, max_sge)) {
		free(s);
		return ENOMEM;
	}
	s->ctx = ctx;
	s->pd = pd;
	s->srq.context = &ctx->vctx.context;
	s->srq.pd = &pd->pd;
	s->srq.handle = sv_new_handle(ctx->eng, ctx, SVO_SRQ, s);
	pd->refs++;
	rep->handle = s->srq.handle;
	rep->max_wr = r->max_wr;
	rep->max_sge = max_sge;
	rep->srq_limit = r->srq_limit;
	return 0;
}

static int svd_modify_srq(struct sv_srq *s, const struct svp_srq_req *r)
{
	int mask = r->mask;
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	uint32_t new_max = (mask & IBV_SRQ_MAX_WR) ? r->max_wr : s->rq.cap;
	if ((mask & IBV_SRQ_MAX_WR) && (r->max_wr < s->rq.count || !r->max_wr || r->max_wr > SV_MAX_SRQ_WR))
		return EINVAL;
	if ((mask & IBV_SRQ_LIMIT) && r->srq_limit > new_max)
		return EINVAL;
	if ((mask & IBV_SRQ_MAX_WR) && r->max_wr != s->rq.cap) {
		struct sv_rq nrq;
		if (sv_rq_init(&nrq, r->max_wr, s->rq.max_sge))
			return ENOMEM;
		for (uint32_t i = 0; i < s->rq.count; i++)
			memcpy(nrq.slots + (size_t)i * nrq.stride,
			       s->rq.slots + (size_t)((s->rq.head + i) % s->rq.cap) * s->rq.stride, s->rq.stride);
		nrq.count = s->rq.count;
		free(s->rq.slots);
		s->rq = nrq;
	}
	if (mask & IBV_SRQ_LIMIT)
		s->limit = r->srq_limit;
	return 0;
}

static int svd_destroy_srq(struct sv_srq *s, int force)
{
	if (s->refs && !force)
		return EBUSY;
	sv_obj_del(s->ctx->eng, s->srq.handle);
	s->pd->refs--;
	free(s->rq.slots);
	free(s);
	return 0;
}

int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_srq *s = sv_srq_of(srq);
	int err = 0;
	for (; wr; wr = wr->next) {
		err = sv_rq_post(&s->rq, wr);
		if (err) {
			*bad = wr;
			break;
		}
	}
	sv_srq_drain(s);
	return err;
}

/* after a receive WR was taken from the SRQ: fire the armed limit event */
int sv_srq_consumed(struct sv_srq *s)
{
	if (s->limit && s->rq.count < s->limit) {
		s->limit = 0;
		sv_async_srq(s, IBV_EVENT_SRQ_LIMIT_REACHED);
		return 1;
	}
	return 0;
}

/* ---- AH ---- */
static int svd_destroy_ah(struct sv_ah *ah)
{
	ah->pd->refs--;
	sv_obj_del(sv_ctx(ah->ah.context)->eng, ah->ah.handle);
	free(ah);
	return 0;
}

/* ---- posting: decode the WR lists of the protocol ---- */
static int svd_post_send(struct sv_context *ctx, const uint8_t *in, size_t inlen, uint32_t *idx)
{
	const struct svp_post_req *pr = (const void *)in;
	struct sv_qp *q = sv_obj_get(ctx, SVO_QP, pr->obj);
	if (!q)
		return EINVAL;
	if (!pr->n)
		return 0;
	if (pr->n > SV_MAX_QP_WR * 4u)
		return ENOMEM;
	struct ibv_send_wr *wrs = calloc(pr->n, sizeof *wrs);
	if (!wrs)
		return ENOMEM;
	size_t off = sizeof *pr;
	int err = 0;
	for (uint32_t i = 0; i < pr->n; i++) {
		struct svp_swr w;
		if (inlen - off < sizeof w) {
			err = EINVAL;
			break;
		}
		memcpy(&w, in + off, sizeof w);
		off += sizeof w;
		if (w.num_sge < 0 || w.num_sge > SV_MAX_SGE || inlen - off < (size_t)w.num_sge * sizeof(struct ibv_sge)) {
			err = EINVAL;
			break;
		}
		struct ibv_send_wr *x = &wrs[i];
		x->wr_id = w.wr_id;
		x->opcode = (enum ibv_wr_opcode)w.opcode;
		x->send_flags = w.send_flags;
		x->imm_data = w.imm;
		x->num_sge = w.num_sge;
		x->sg_list = (struct ibv_sge *)(uintptr_t)(in + off); /* 8-aligned in the receive buffer */
		off += (size_t)w.num_sge * sizeof(struct ibv_sge);
		if (w.send_flags & IBV_SEND_INLINE) {
			size_t pad = ((size_t)w.inl_len + 7) & ~(size_t)7;
			if (inlen - off < pad) {
				err = EINVAL;
				break;
			}
			/* the data the program copied at post time replaces the SGE addresses */
			uint64_t d = (uintptr_t)(in + off), left = w.inl_len;
			for (int k = 0; k < w.num_sge; k++) {
				uint32_t l = x->sg_list[k].length;
				if (l > left) {
					err = EINVAL;
					break;
				}
				x->sg_list[k].addr = d;
				d += l;
				left -= l;
			}
			off += pad;
		}
		if (x->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || x->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			x->wr.atomic.remote_addr = w.raddr;
			x->wr.atomic.rkey = w.rkey;
			x->wr.atomic.compare_add = w.cmp_add;
			x->wr.atomic.swap = w.swap;
		} else if (q->type == IBV_QPT_UD) {
			struct sv_ah *ah = sv_obj_get(ctx, SVO_AH, w.ah);
			x->wr.ud.ah = ah ? &ah->ah : NULL;
			x->wr.ud.remote_qpn = w.remote_qpn;
			x->wr.ud.remote_qkey = w.remote_qkey;
		} else {
			x->wr.rdma.remote_addr = w.raddr;
			x->wr.rdma.rkey = w.rkey;
		}
		x->next = i + 1 < pr->n ? &wrs[i + 1] : NULL;
	}
	if (!err) {
		struct ibv_send_wr *bad = NULL;
		err = sv_post_send(&q->ex.qp_base, wrs, &bad);
		if (err && bad)
			*idx = (uint32_t)(bad - wrs);
	}
	free(wrs);
	return err;
}

static int svd_post_recv(struct sv_context *ctx, uint32_t op, const uint8_t *in, size_t inlen, uint32_t *idx)
{
	const struct svp_post_req *pr = (const void *)in;
	struct sv_qp *q = NULL;
	struct sv_srq *s = NULL;
	if (op == SVP_POST_RECV ? !(q = sv_obj_get(ctx, SVO_QP, pr->obj)) : !(s = sv_obj_get(ctx, SVO_SRQ, pr->obj)))
		return EINVAL;
	if (!pr->n)
		return 0;
	if (pr->n > SV_MAX_QP_WR * 4u)
		return ENOMEM;
	struct ibv_recv_wr *wrs = calloc(pr->n, sizeof *wrs);
	if (!wrs)
		return ENOMEM;
	size_t off = sizeof *pr;
	int err = 0;
	for (uint32_t i = 0; i < pr->n; i++) {
		struct svp_rwr w;
		if (inlen - off < sizeof w) {
			err = EINVAL;
			break;
		}
		memcpy(&w, in + off, sizeof w);
		off += sizeof w;
		if (w.num_sge < 0 || w.num_sge > SV_MAX_SGE || inlen - off < (size_t)w.num_sge * sizeof(struct ibv_sge)) {
			err = EINVAL;
			break;
		}
		wrs[i].wr_id = w.wr_id;
		wrs[i].num_sge = w.num_sge;
		wrs[i].sg_list = (struct ibv_sge *)(uintptr_t)(in + off);
		off += (size_t)w.num_sge * sizeof(struct ibv_sge);
		wrs[i].next = i + 1 < pr->n ? &wrs[i + 1] : NULL;
	}
	if (!err) {
		struct ibv_recv_wr *bad = NULL;
		err = q ? sv_post_recv(&q->ex.qp_base, wrs, &bad) : sv_post_srq_recv(&s->srq, wrs, &bad);
		if (err && bad)
			*idx = (uint32_t)(bad - wrs);
	}
	free(wrs);
	return err;
}

/* ---- statistics (softverbsd --stats) ---- */
struct sv_count {
	uint32_t n[SVO_QP + 1];
};

static int sv_count_obj(void *val, void *arg)
{
	struct sv_obj *o = val;
	struct sv_count *c = arg;
	if (o->type > 0 && o->type <= SVO_QP)
		c->n[o->type]++;
	return 0;
}

static size_t svd_stats(struct sv_engine *e, char *out, size_t cap)
{
	struct sv_count c;
	memset(&c, 0, sizeof c);
	sv_ht_remove_if(&e->hnds, sv_count_obj, &c);
	int opened = 0; /* programs with the device open (not this query) */
	for (struct sv_context *x = e->clients; x; x = x->next)
		opened += x->opened;
	int n = snprintf(out, cap,
			 "pid %d\nlid 0x%04x\nguid %016llx\nclients %d\nopens %llu\nobjects %u\npds %u\nmrs %u\n"
			 "channels %u\ncqs %u\nsrqs %u\nahs %u\nqps %u\n",
			 (int)getpid(), e->lid, (unsigned long long)e->guid, opened, (unsigned long long)e->nconnects,
			 e->hnds.n, c.n[SVO_PD], c.n[SVO_MR], c.n[SVO_CH], c.n[SVO_CQ], c.n[SVO_SRQ], c.n[SVO_AH],
			 c.n[SVO_QP]);
	return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}

/* ---- the program went away (closed the device or died): destroy everything it had ---- */
struct sv_collect {
	struct sv_context *ctx;
	struct sv_obj *v;
	size_t n, cap;
};

static int sv_collect_obj(void *val, void *arg)
{
	struct sv_obj *o = val;
	struct sv_collect *c = arg;
	if (o->ctx != c->ctx)
		return 0;
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 64;
		struct sv_obj *nv = realloc(c->v, nc * sizeof *nv);
		if (!nv)
			abort();
		c->v = nv;
		c->cap = nc;
	}
	c->v[c->n++] = *o;
	return 0;
}

void svd_client_gone(struct sv_context *ctx)
{
	struct sv_engine *e = ctx->eng;
	pthread_mutex_lock(&e->lock);
	struct sv_collect c = {.ctx = ctx};
	sv_ht_remove_if(&e->hnds, sv_collect_obj, &c);
	static const int order[] = {SVO_QP, SVO_AH, SVO_SRQ, SVO_MR, SVO_CQ, SVO_CH, SVO_PD};
	uint32_t n = 0;
	for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
		for (size_t i = 0; i < c.n; i++) {
			if (c.v[i].type != order[k])
				continue;
			void *p = c.v[i].p;
			switch (order[k]) {
			case SVO_QP: sv_destroy_qp(p); break; /* peers see a vanished QP: their requests time out */
			case SVO_AH: svd_destroy_ah(p); break;
			case SVO_SRQ: svd_destroy_srq(p, 1); break;
			case SVO_MR: svd_dereg_mr(p); break;
			case SVO_CQ: svd_destroy_cq(p, 1); break;
			case SVO_CH: svd_destroy_ch(p, 1); break;
			case SVO_PD: svd_dealloc_pd(p, 1); break;
			}
			n++;
		}
	}
	free(c.v);
	for (struct sv_context **pp = &e->clients; *pp; pp = &(*pp)->next)
		if (*pp == ctx) {
			*pp = ctx->next;
			e->nclients--;
			break;
		}
	if (ctx->async_wfd >= 0)
		close(ctx->async_wfd);
	ctx->async_wfd = -1;
	pthread_mutex_unlock(&e->lock);
	sv_log("client pid %d gone: %u objects destroyed", (int)ctx->pid, n);
}

/* ---- the protocol ---- */
#define NEED(T)                          \
	do {                             \
		if (inlen < sizeof(T)) { \
			err = EINVAL;    \
			goto out;        \
		}                        \
	} while (0)
#define REPLY(T, v)                           \
	do {                                  \
		memcpy(out, &(v), sizeof(T)); \
		*outlen = sizeof(T);          \
	} while (0)

int svd_call(struct sv_context *ctx, uint32_t op, const void *in, size_t inlen, int infd, void *out, size_t *outlen,
	     int *ofd, uint32_t *idx)
{
	struct sv_engine *e = ctx->eng;
	int err = 0;
	size_t cap = *outlen;
	*outlen = 0;
	*ofd = -1;
	*idx = 0;

	/* the calls that may connect to another daemon resolve the path without the lock */
	if (op == SVP_CREATE_AH) {
		if (inlen < sizeof(struct svp_ah_req))
			return EINVAL;
		const struct svp_ah_req *r = in;
		if (r->attr.port_num != 1 || (r->attr.is_global && r->attr.grh.sgid_index >= SV_GID_TBL_LEN))
			return EINVAL;
		/* NULL: datagrams to it are lost, as on a fabric without that LID */
		struct sv_peer *peer = sv_resolve(e, &r->attr);
		pthread_mutex_lock(&e->lock);
		struct sv_pd *pd = sv_obj_get(ctx, SVO_PD, r->pd);
		struct sv_ah *ah = pd ? calloc(1, sizeof *ah) : NULL;
		if (!ah) {
			pthread_mutex_unlock(&e->lock);
			return pd ? ENOMEM : EINVAL;
		}
		ah->attr = r->attr;
		ah->peer = peer;
		ah->pd = pd;
		ah->ah.context = &ctx->vctx.context;
		ah->ah.pd = &pd->pd;
		ah->ah.handle = sv_new_handle(e, ctx, SVO_AH, ah);
		pd->refs++;
		struct svp_h h = {.handle = ah->ah.handle};
		REPLY(struct svp_h, h);
		pthread_mutex_unlock(&e->lock);
		return 0;
	}
	if (op == SVP_MODIFY_QP) {
		if (inlen < sizeof(struct svp_modify_req))
			return EINVAL;
		struct svp_modify_req r;
		memcpy(&r, in, sizeof r);
		struct sv_peer *peer = NULL;
		pthread_mutex_lock(&e->lock);
		struct sv_qp *q = sv_obj_get(ctx, SVO_QP, r.qp);
		if (!q) {
			pthread_mutex_unlock(&e->lock);
			return EINVAL;
		}
		int want_path = (r.mask & IBV_QP_AV) && q->type != IBV_QPT_UD;
		if (want_path) {
			err = sv_modify_qp_check(q, &r.attr, r.mask);
			pthread_mutex_unlock(&e->lock);
			if (err)
				return err;
			peer = sv_resolve(e, &r.attr.ah_attr); /* may connect: outside the lock */
			if (!peer)
				sv_log("qp 0x%06x: destination lid 0x%04x unreachable", q->ex.qp_base.qp_num,
				       r.attr.ah_attr.dlid);
			pthread_mutex_lock(&e->lock); /* q stays: only this connection's thread destroys it */
		}
		err = sv_modify_qp(q, &r.attr, r.mask, peer);
		pthread_mutex_unlock(&e->lock);
		return err;
	}

	pthread_mutex_lock(&e->lock);
	switch (op) {
	case SVP_OPEN: {
		NEED(struct svp_open_req);
		const struct svp_open_req *r = in;
		if (r->magic != SVP_MAGIC || ctx->opened || infd < 0) {
			err = EPROTO;
			break;
		}
		ctx->async_wfd = infd;
		infd = -1;
		ctx->opened = 1;
		e->nconnects++;
		struct svp_open_rep rep = {.guid = e->guid, .lid = e->lid, .daemon_pid = (uint32_t)getpid()};
		memcpy(rep.gid, e->gid.raw, 16);
		REPLY(struct svp_open_rep, rep);
		sv_log("client pid %d opened the device", (int)ctx->pid);
		break;
	}
	case SVP_STATS: *outlen = svd_stats(e, out, cap); break;
	case SVP_QUERY_PORT: {
		struct svp_port_rep rep = {.qkey_viol = e->qkey_viol, .lid = e->lid};
		REPLY(struct svp_port_rep, rep);
		break;
	}
	case SVP_ALLOC_PD: {
		struct svp_h h = {0};
		err = svd_alloc_pd(ctx, &h.handle);
		REPLY(struct svp_h, h);
		break;
	}
	case SVP_DEALLOC_PD: {
		NEED(struct svp_h);
		struct sv_pd *pd = sv_obj_get(ctx, SVO_PD, ((const struct svp_h *)in)->handle);
		err = pd ? svd_dealloc_pd(pd, 0) : EINVAL;
		break;
	}
	case SVP_REG_MR: {
		NEED(struct svp_mr_req);
		struct svp_mr_rep rep = {0};
		err = svd_reg_mr(ctx, in, &rep);
		REPLY(struct svp_mr_rep, rep);
		break;
	}
	case SVP_REREG_MR: NEED(struct svp_mr_req); err = svd_rereg_mr(ctx, in); break;
	case SVP_DEREG_MR: {
		NEED(struct svp_h);
		struct sv_mr *mr = sv_obj_get(ctx, SVO_MR, ((const struct svp_h *)in)->handle);
		err = mr ? svd_dereg_mr(mr) : EINVAL;
		break;
	}
	case SVP_CREATE_CH: {
		struct svp_h h = {0};
		err = svd_create_ch(ctx, infd, &h.handle);
		if (!err)
			infd = -1;
		REPLY(struct svp_h, h);
		break;
	}
	case SVP_DESTROY_CH: {
		NEED(struct svp_h);
		struct sv_channel *ch = sv_obj_get(ctx, SVO_CH, ((const struct svp_h *)in)->handle);
		err = ch ? svd_destroy_ch(ch, 0) : EINVAL;
		break;
	}
	case SVP_CREATE_CQ:
	case SVP_RESIZE_CQ: {
		NEED(struct svp_cq_req);
		struct svp_cq_rep rep = {0};
		err = op == SVP_CREATE_CQ ? svd_create_cq(ctx, in, &rep, ofd) : svd_resize_cq(ctx, in, &rep, ofd);
		REPLY(struct svp_cq_rep, rep);
		break;
	}
	case SVP_DESTROY_CQ: {
		NEED(struct svp_h);
		struct sv_cq *cq = sv_obj_get(ctx, SVO_CQ, ((const struct svp_h *)in)->handle);
		err = cq ? svd_destroy_cq(cq, 0) : EINVAL;
		break;
	}
	case SVP_CREATE_SRQ: {
		NEED(struct svp_srq_req);
		struct svp_srq_rep rep = {0};
		err = svd_create_srq(ctx, in, &rep);
		REPLY(struct svp_srq_rep, rep);
		break;
	}
	case SVP_MODIFY_SRQ: {
		NEED(struct svp_srq_req);
		const struct svp_srq_req *r = in;
		struct sv_srq *s = sv_obj_get(ctx, SVO_SRQ, r->srq);
		err = s ? svd_modify_srq(s, r) : EINVAL;
		break;
	}
	case SVP_QUERY_SRQ: {
		NEED(struct svp_h);
		struct sv_srq *s = sv_obj_get(ctx, SVO_SRQ, ((const struct svp_h *)in)->handle);
		if (!s) {
			err = EINVAL;
			break;
		}
		struct svp_srq_rep rep = {.handle = s->srq.handle, .max_wr = s->rq.cap, .max_sge = s->rq.max_sge,
					  .srq_limit = s->limit};
		REPLY(struct svp_srq_rep, rep);
		break;
	}
	case SVP_DESTROY_SRQ: {
		NEED(struct svp_h);
		struct sv_srq *s = sv_obj_get(ctx, SVO_SRQ, ((const struct svp_h *)in)->handle);
		err = s ? svd_destroy_srq(s, 0) : EINVAL;
		break;
	}
	case SVP_DESTROY_AH: {
		NEED(struct svp_h);
		struct sv_ah *ah = sv_obj_get(ctx, SVO_AH, ((const struct svp_h *)in)->handle);
		err = ah ? svd_destroy_ah(ah) : EINVAL;
		break;
	}
	case SVP_CREATE_QP: {
		NEED(struct svp_qp_req);
		const struct svp_qp_req *r = in;
		struct sv_pd *pd = sv_obj_get(ctx, SVO_PD, r->pd);
		struct sv_cq *scq = sv_obj_get(ctx, SVO_CQ, r->scq), *rcq = sv_obj_get(ctx, SVO_CQ, r->rcq);
		struct sv_srq *srq = r->srq ? sv_obj_get(ctx, SVO_SRQ, r->srq) : NULL;
		if (!pd || !scq || !rcq || (r->srq && !srq)) {
			err = EINVAL;
			break;
		}
		struct ibv_qp_init_attr_ex a;
		memset(&a, 0, sizeof a);
		a.pd = &pd->pd;
		a.send_cq = &scq->cq;
		a.recv_cq = &rcq->cq;
		a.srq = srq ? &srq->srq : NULL;
		a.qp_type = (enum ibv_qp_type)r->type;
		a.sq_sig_all = r->sq_sig_all;
		a.cap = r->cap;
		a.send_ops_flags = r->send_ops_flags;
		struct ibv_qp *qp = sv_create_qp(ctx, &a, (int)r->is_ex);
		if (!qp) {
			err = errno ? errno : ENOMEM;
			break;
		}
		struct svp_qp_rep rep = {.handle = qp->handle, .qpn = qp->qp_num, .cap = a.cap};
		REPLY(struct svp_qp_rep, rep);
		break;
	}
	case SVP_QUERY_QP: {
		NEED(struct svp_h);
		struct sv_qp *q = sv_obj_get(ctx, SVO_QP, ((const struct svp_h *)in)->handle);
		if (!q) {
			err = EINVAL;
			break;
		}
		struct svp_query_qp_rep rep;
		memset(&rep, 0, sizeof rep);
		sv_query_qp(q, &rep.attr);
		rep.type = q->type;
		rep.sq_sig_all = q->sq_sig_all;
		REPLY(struct svp_query_qp_rep, rep);
		break;
	}
	case SVP_DESTROY_QP: {
		NEED(struct svp_h);
		struct sv_qp *q = sv_obj_get(ctx, SVO_QP, ((const struct svp_h *)in)->handle);
		err = q ? sv_destroy_qp(q) : EINVAL;
		break;
	}
	case SVP_POST_SEND: NEED(struct svp_post_req); err = svd_post_send(ctx, in, inlen, idx); break;
	case SVP_POST_RECV:
	case SVP_POST_SRQ_RECV: NEED(struct svp_post_req); err = svd_post_recv(ctx, op, in, inlen, idx); break;
	default: err = EOPNOTSUPP; break;
	}
out:
	pthread_mutex_unlock(&e->lock);
	if (infd >= 0)
		close(infd);
	return err;
}
