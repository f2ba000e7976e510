/* verbs_stress: two processes (fork), one RC QP each, many work requests in flight.
 *   1. RDMA write (1 and 2 SGEs, mostly unsignaled) then RDMA write with immediate; the target checks
 *      that every byte written before the immediate is there when the immediate completes.
 *   2. RDMA read of the whole region, more reads in flight than max_rd_atomic.
 *   3. send/recv: sizes 0..8 KiB, with immediate, inline (the inline source is clobbered right after
 *      posting), solicited; receive completions in posting order with the right length/imm/data;
 *      the initiator waits through a completion channel.
 *   4. RNR: sends posted before any receive wait (rnr_retry 7) and complete once receives are posted.
 *   5. atomics: fetch-and-add in order, compare-and-swap hit and miss.
 * Completion order is checked everywhere (signaled wr_ids strictly in posting order).
 * Usage: verbs_stress [--gid]   (--gid: address the peer by GID instead of LID) */
#include "sv_testlib.h"

#include <sys/socket.h>
#include <sys/wait.h>

#define REGION (4u << 20)
#define RSLOT 8192u
#define NSEND 600
#define NRNR 40
#define NATOM 500

enum { READY1 = 1, OK1, DONE2, READY3, OK3, READY4, GO4, OK4, READY5, DONE5, OK5, BYE };

struct info {
	uint16_t lid;
	uint32_t qpn, psn;
	union ibv_gid gid;
	uint64_t addr;
	uint32_t rkey;
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint8_t *buf, *rbuf, *sbuf;
	struct ibv_mr *mr, *rmr, *smr;
	int nevents;
	struct info peer;
};

static int ctl = -1;

static void ctl_put(uint32_t tag, uint64_t val)
{
	uint64_t m[2] = {tag, val};
	if (write(ctl, m, sizeof m) != (ssize_t)sizeof m)
		t_fail("control channel write");
}

static uint64_t ctl_get(uint32_t tag)
{
	uint64_t m[2];
	size_t off = 0;
	while (off < sizeof m) {
		ssize_t r = read(ctl, (uint8_t *)m + off, sizeof m - off);
		if (r <= 0)
			t_fail("control channel closed while waiting for step %u (the other side failed)", tag);
		off += (size_t)r;
	}
	if (m[0] != tag)
		t_fail("control step %llu, expected %u", (unsigned long long)m[0], tag);
	return m[1];
}

static uint8_t pat(size_t off, int phase)
{
	return (uint8_t)(((off * 2654435761u) >> 7) + (unsigned)phase * 31u + (off >> 10));
}

static uint8_t cbyte(int i, size_t j)
{
	return (uint8_t)(i * 7 + j * 13);
}

static uint32_t msg_size(int i)
{
	return (i % 50 == 0) ? 0 : (uint32_t)(i * 977) % RSLOT;
}

/* poll, and when the CQ is empty sleep on the completion channel (if any) */
static int wait_cq(struct side *s, struct ibv_wc *wc, int max, unsigned ms)
{
	uint64_t end = t_now_ms() + ms;
	for (;;) {
		int n = ibv_poll_cq(s->cq, max, wc);
		if (n < 0)
			t_fail("ibv_poll_cq: %d", n);
		if (n)
			return n;
		if (t_now_ms() >= end)
			return 0;
		if (!s->ch)
			continue;
		if (ibv_req_notify_cq(s->cq, 0))
			t_fail("ibv_req_notify_cq");
		n = ibv_poll_cq(s->cq, max, wc);
		if (n)
			return n;
		uint64_t now = t_now_ms();
		struct pollfd p = {.fd = s->ch->fd, .events = POLLIN};
		if (poll(&p, 1, now >= end ? 0 : (int)(end - now)) <= 0)
			return 0;
		struct ibv_cq *ecq;
		void *ectx;
		if (ibv_get_cq_event(s->ch, &ecq, &ectx))
			t_fail("ibv_get_cq_event");
		T_CHECK(ecq == s->cq, "event for a foreign CQ");
		ibv_ack_cq_events(ecq, 1);
		s->nevents++;
	}
}

static void setup(struct side *s, int with_channel)
{
	s->ctx = t_open();
	s->pd = ibv_alloc_pd(s->ctx);
	T_CHECK(s->pd, "alloc_pd");
	if (with_channel) {
		s->ch = ibv_create_comp_channel(s->ctx);
		T_CHECK(s->ch, "create_comp_channel");
	}
	s->cq = ibv_create_cq(s->ctx, 4096, NULL, s->ch, 0);
	T_CHECK(s->cq, "create_cq");
	struct t_qpcfg cfg = {.type = IBV_QPT_RC, .max_send_wr = 256, .max_recv_wr = 1024, .max_sge = 4,
			      .max_inline = 256};
	s->qp = t_create_qp(s->pd, s->cq, s->cq, &cfg);
	s->buf = aligned_alloc(4096, REGION);
	s->rbuf = aligned_alloc(4096, (size_t)NSEND * RSLOT);
	s->sbuf = aligned_alloc(4096, (size_t)NSEND * RSLOT);
	T_CHECK(s->buf && s->rbuf && s->sbuf, "alloc");
	memset(s->buf, 0, REGION);
	memset(s->rbuf, 0, (size_t)NSEND * RSLOT);
	memset(s->sbuf, 0, (size_t)NSEND * RSLOT);
	unsigned all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
	s->mr = ibv_reg_mr(s->pd, s->buf, REGION, all);
	s->rmr = ibv_reg_mr(s->pd, s->rbuf, (size_t)NSEND * RSLOT, IBV_ACCESS_LOCAL_WRITE);
	s->smr = ibv_reg_mr(s->pd, s->sbuf, (size_t)NSEND * RSLOT, IBV_ACCESS_LOCAL_WRITE);
	T_CHECK(s->mr && s->rmr && s->smr, "reg_mr: %s", strerror(errno));
	t_to_init(s->qp, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
}

static void connect_sides(struct side *s, int use_gid)
{
	struct info me = {.lid = t_lid(s->ctx), .qpn = s->qp->qp_num, .psn = (uint32_t)(getpid() * 2654435761u) & 0xffffff,
			  .addr = (uintptr_t)s->buf, .rkey = s->mr->rkey};
	if (ibv_query_gid(s->ctx, 1, 0, &me.gid))
		t_fail("ibv_query_gid");
	if (write(ctl, &me, sizeof me) != (ssize_t)sizeof me || read(ctl, &s->peer, sizeof s->peer) != (ssize_t)sizeof s->peer)
		t_fail("exchanging QP info");
	struct t_path p = {.lid = s->peer.lid, .qpn = s->peer.qpn, .psn = s->peer.psn, .gid = s->peer.gid, .use_gid = use_gid};
	t_to_rtr(s->qp, &p, 12);
	t_to_rts(s->qp, me.psn, 14, 7, 7);
	printf("[%s] lid 0x%04x qpn 0x%06x rkey 0x%08x <-> peer lid 0x%04x qpn 0x%06x\n", t_who, me.lid, me.qpn, me.rkey,
	       s->peer.lid, s->peer.qpn);
}

static void post_send(struct side *s, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int rc = ibv_post_send(s->qp, wr, &bad);
	if (rc)
		t_fail("ibv_post_send (wr_id %llu): %s", (unsigned long long)wr->wr_id, strerror(rc));
}

/* run n WRs through the send queue with at most qd outstanding; sig(i) says which are signaled;
 * checks that the signaled completions come back in posting order */
static void pipeline(struct side *s, int n, int qd, int (*sig)(int, int), void (*build)(struct side *, int, struct ibv_send_wr *, struct ibv_sge *),
		     enum ibv_wc_opcode opc, uint32_t (*len_of)(int))
{
	int posted = 0, done = -1;
	while (done < n - 1) {
		while (posted < n && posted - (done + 1) < qd) {
			struct ibv_send_wr wr;
			struct ibv_sge sge[4];
			memset(&wr, 0, sizeof wr);
			build(s, posted, &wr, sge);
			wr.wr_id = (uint64_t)posted;
			if (sig(posted, n))
				wr.send_flags |= IBV_SEND_SIGNALED;
			post_send(s, &wr);
			posted++;
		}
		struct ibv_wc wc[32];
		int k = wait_cq(s, wc, 32, 20000);
		if (!k)
			t_fail("no completion after %d of %d WRs (posted %d)", done + 1, n, posted);
		for (int i = 0; i < k; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				t_fail("wr_id %llu: %s", (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
			int next = done + 1;
			while (!sig(next, n))
				next++;
			if ((int)wc[i].wr_id != next)
				t_fail("completion order: got wr_id %llu, expected %d", (unsigned long long)wc[i].wr_id, next);
			if (wc[i].opcode != opc)
				t_fail("wr_id %d: opcode %d, expected %d", next, wc[i].opcode, opc);
			if (len_of && wc[i].byte_len != len_of(next))
				t_fail("wr_id %d: byte_len %u, expected %u", next, wc[i].byte_len, len_of(next));
			done = next;
		}
	}
}

static int sig_every16(int i, int n)
{
	return i % 16 == 15 || i == n - 1;
}
static int sig_all(int i, int n)
{
	(void)i, (void)n;
	return 1;
}
static int sig_every8(int i, int n)
{
	return i % 8 == 7 || i == n - 1;
}

#define NW 2048
#define NR 1024
static void build_write(struct side *s, int i, struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	size_t ch = REGION / NW, off = (size_t)i * ch;
	wr->opcode = IBV_WR_RDMA_WRITE;
	wr->wr.rdma.remote_addr = s->peer.addr + off;
	wr->wr.rdma.rkey = s->peer.rkey;
	wr->sg_list = sge;
	if (i % 2) { /* gather from two SGEs */
		sge[0] = (struct ibv_sge){.addr = (uintptr_t)s->buf + off, .length = (uint32_t)ch / 2, .lkey = s->mr->lkey};
		sge[1] = (struct ibv_sge){.addr = (uintptr_t)s->buf + off + ch / 2, .length = (uint32_t)ch / 2, .lkey = s->mr->lkey};
		wr->num_sge = 2;
	} else {
		sge[0] = (struct ibv_sge){.addr = (uintptr_t)s->buf + off, .length = (uint32_t)ch, .lkey = s->mr->lkey};
		wr->num_sge = 1;
	}
}

static uint32_t read_len(int i)
{
	(void)i;
	return REGION / NR;
}

static void build_read(struct side *s, int i, struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	size_t ch = REGION / NR, off = (size_t)i * ch;
	wr->opcode = IBV_WR_RDMA_READ;
	wr->wr.rdma.remote_addr = s->peer.addr + off;
	wr->wr.rdma.rkey = s->peer.rkey;
	sge[0] = (struct ibv_sge){.addr = (uintptr_t)s->buf + off, .length = (uint32_t)ch, .lkey = s->mr->lkey};
	wr->sg_list = sge;
	wr->num_sge = 1;
}

static uint8_t inl_tmp[256];
static void build_send(struct side *s, int i, struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	uint32_t sz = msg_size(i);
	uint8_t *src = s->sbuf + (size_t)i * RSLOT;
	for (uint32_t j = 0; j < sz; j++)
		src[j] = cbyte(i, j);
	wr->opcode = (i % 3 == 0) ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr->imm_data = htonl((uint32_t)i ^ 0xa5a5u);
	if (i % 10 == 0)
		wr->send_flags |= IBV_SEND_SOLICITED;
	wr->sg_list = sge;
	wr->num_sge = sz ? 1 : 0;
	sge[0] = (struct ibv_sge){.addr = (uintptr_t)src, .length = sz, .lkey = s->smr->lkey};
	if (sz <= 200 && i % 2 == 0) {
		memcpy(inl_tmp, src, sz);
		sge[0].addr = (uintptr_t)inl_tmp;
		sge[0].lkey = 0; /* inline data needs no key */
		wr->send_flags |= IBV_SEND_INLINE;
	}
}

static void build_rnr_send(struct side *s, int i, struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	uint8_t *src = s->sbuf + (size_t)i * RSLOT;
	for (uint32_t j = 0; j < 1024; j++)
		src[j] = cbyte(i + 1000, j);
	wr->opcode = IBV_WR_SEND;
	sge[0] = (struct ibv_sge){.addr = (uintptr_t)src, .length = 1024, .lkey = s->smr->lkey};
	wr->sg_list = sge;
	wr->num_sge = 1;
}

static void build_fadd(struct side *s, int i, struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	wr->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr->wr.atomic.remote_addr = s->peer.addr;
	wr->wr.atomic.rkey = s->peer.rkey;
	wr->wr.atomic.compare_add = 3;
	sge[0] = (struct ibv_sge){.addr = (uintptr_t)s->sbuf + (size_t)i * 8, .length = 8, .lkey = s->smr->lkey};
	wr->sg_list = sge;
	wr->num_sge = 1;
}

static uint32_t eight(int i)
{
	(void)i;
	return 8;
}

static void one_op(struct side *s, struct ibv_send_wr *wr, enum ibv_wc_opcode opc)
{
	wr->send_flags |= IBV_SEND_SIGNALED;
	post_send(s, wr);
	struct ibv_wc wc;
	if (!wait_cq(s, &wc, 1, 20000))
		t_fail("no completion for wr_id %llu", (unsigned long long)wr->wr_id);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != wr->wr_id || wc.opcode != opc)
		t_fail("wr_id %llu: %s opcode %d", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode);
}

static void initiator(int use_gid)
{
	t_who = "initiator";
	struct side s = {0};
	setup(&s, 1);
	connect_sides(&s, use_gid);
	uint64_t t0 = t_now_ms();

	/* 1: RDMA write, then write-with-immediate as the "doorbell" */
	for (size_t o = 0; o < REGION; o++)
		s.buf[o] = pat(o, 1);
	ctl_get(READY1);
	pipeline(&s, NW, 200, sig_every16, build_write, IBV_WC_RDMA_WRITE, NULL);
	{
		struct ibv_sge sge = {.addr = (uintptr_t)s.buf, .length = 64, .lkey = s.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 9001, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					 .imm_data = htonl(0x5157ab1e)};
		wr.wr.rdma.remote_addr = s.peer.addr;
		wr.wr.rdma.rkey = s.peer.rkey;
		one_op(&s, &wr, IBV_WC_RDMA_WRITE);
	}
	T_CHECK(ctl_get(OK1) == 1, "target saw wrong data");
	printf("[%s] 1: %d RDMA writes (+1 with immediate), %u bytes: ok\n", t_who, NW, REGION);

	/* 2: RDMA read back */
	memset(s.buf, 0, REGION);
	pipeline(&s, NR, 64, sig_all, build_read, IBV_WC_RDMA_READ, read_len);
	for (size_t o = 0; o < REGION; o++)
		if (s.buf[o] != pat(o, 1))
			t_fail("RDMA read: byte %zu is 0x%02x, expected 0x%02x", o, s.buf[o], pat(o, 1));
	ctl_put(DONE2, 0);
	printf("[%s] 2: %d RDMA reads (64 posted at a time, max_rd_atomic 16): ok\n", t_who, NR);

	/* 3: send/recv with immediate, inline, zero-length */
	ctl_get(READY3);
	pipeline(&s, NSEND, 128, sig_every8, build_send, IBV_WC_SEND, NULL);
	T_CHECK(ctl_get(OK3) == 1, "receiver saw wrong messages");
	printf("[%s] 3: %d sends (imm, inline, 0..8K): ok\n", t_who, NSEND);

	/* 4: RNR: nothing may complete before the receiver posts receives */
	ctl_get(READY4);
	for (int i = 0; i < NRNR; i++) {
		struct ibv_send_wr wr;
		struct ibv_sge sge;
		memset(&wr, 0, sizeof wr);
		build_rnr_send(&s, i, &wr, &sge);
		wr.wr_id = (uint64_t)i;
		wr.send_flags = IBV_SEND_SIGNALED;
		post_send(&s, &wr);
	}
	struct ibv_wc wc[64];
	if (wait_cq(&s, wc, 64, 300))
		t_fail("a send completed although no receive was posted (status %s)", ibv_wc_status_str(wc[0].status));
	ctl_put(GO4, 0);
	for (int got = 0; got < NRNR;) {
		int k = wait_cq(&s, wc, 64, 20000);
		T_CHECK(k > 0, "RNR sends never completed");
		for (int i = 0; i < k; i++, got++)
			T_CHECK(wc[i].status == IBV_WC_SUCCESS && (int)wc[i].wr_id == got, "rnr send %d: %s wr_id %llu", got,
				ibv_wc_status_str(wc[i].status), (unsigned long long)wc[i].wr_id);
	}
	T_CHECK(ctl_get(OK4) == 1, "receiver saw wrong RNR messages");
	printf("[%s] 4: %d sends waited for receives (RNR) and completed in order: ok\n", t_who, NRNR);

	/* 5: atomics */
	ctl_get(READY5);
	pipeline(&s, NATOM, 16, sig_all, build_fadd, IBV_WC_FETCH_ADD, eight);
	for (int i = 0; i < NATOM; i++) {
		uint64_t v;
		memcpy(&v, s.sbuf + (size_t)i * 8, 8);
		T_CHECK(v == (uint64_t)i * 3, "fetch_add %d returned %llu", i, (unsigned long long)v);
	}
	uint64_t *res = (uint64_t *)(s.sbuf + 65536);
	struct ibv_sge sge = {.addr = (uintptr_t)res, .length = 8, .lkey = s.smr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_CMP_AND_SWP};
	wr.wr.atomic.remote_addr = s.peer.addr;
	wr.wr.atomic.rkey = s.peer.rkey;
	wr.wr.atomic.compare_add = NATOM * 3;
	wr.wr.atomic.swap = 42;
	one_op(&s, &wr, IBV_WC_COMP_SWAP);
	T_CHECK(*res == NATOM * 3, "cmp_swp (hit) returned %llu", (unsigned long long)*res);
	wr.wr_id = 2;
	wr.wr.atomic.compare_add = 0;
	wr.wr.atomic.swap = 7;
	one_op(&s, &wr, IBV_WC_COMP_SWAP);
	T_CHECK(*res == 42, "cmp_swp (miss) returned %llu", (unsigned long long)*res);
	*res = 0;
	struct ibv_send_wr rd = {.wr_id = 3, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ};
	rd.wr.rdma.remote_addr = s.peer.addr;
	rd.wr.rdma.rkey = s.peer.rkey;
	one_op(&s, &rd, IBV_WC_RDMA_READ);
	T_CHECK(*res == 42, "counter read back as %llu", (unsigned long long)*res);
	ctl_put(DONE5, 0);
	T_CHECK(ctl_get(OK5) == 1, "target counter wrong");
	printf("[%s] 5: %d fetch_add in order, cmp_swp hit/miss: ok\n", t_who, NATOM);

	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	T_CHECK(!ibv_query_qp(s.qp, &qa, IBV_QP_STATE, &qia) && qa.qp_state == IBV_QPS_RTS, "QP not in RTS at the end");
	T_CHECK(s.nevents > 0, "completion channel never used");
	ctl_put(BYE, 0);
	ctl_get(BYE);
	T_CHECK(!ibv_destroy_qp(s.qp), "destroy_qp");
	T_CHECK(!ibv_destroy_cq(s.cq), "destroy_cq");
	T_CHECK(!ibv_destroy_comp_channel(s.ch), "destroy_comp_channel");
	T_CHECK(!ibv_dereg_mr(s.mr) && !ibv_dereg_mr(s.rmr) && !ibv_dereg_mr(s.smr), "dereg_mr");
	T_CHECK(!ibv_dealloc_pd(s.pd), "dealloc_pd");
	T_CHECK(!ibv_close_device(s.ctx), "close_device");
	free(s.buf), free(s.rbuf), free(s.sbuf);
	printf("[%s] all phases ok in %llu ms (%d completion events)\n", t_who, (unsigned long long)(t_now_ms() - t0),
	       s.nevents);
}

static void post_recv(struct side *s, uint64_t id, uint8_t *buf, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = s->rmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = len ? 1 : 0}, *bad;
	int rc = ibv_post_recv(s->qp, &wr, &bad);
	if (rc)
		t_fail("ibv_post_recv: %s", strerror(rc));
}

static struct ibv_wc recv1(struct side *s, const char *what)
{
	struct ibv_wc wc;
	if (!t_poll1(s->cq, &wc, 20000))
		t_fail("%s: no receive completion", what);
	if (wc.status != IBV_WC_SUCCESS)
		t_fail("%s: %s", what, ibv_wc_status_str(wc.status));
	T_CHECK(wc.qp_num == s->qp->qp_num, "%s: qp_num", what);
	return wc;
}

static void target(int use_gid)
{
	t_who = "target";
	struct side s = {0};
	setup(&s, 0);
	connect_sides(&s, use_gid);

	/* 1 */
	struct ibv_recv_wr wr0 = {.wr_id = 7777, .sg_list = NULL, .num_sge = 0}, *bad;
	T_CHECK(!ibv_post_recv(s.qp, &wr0, &bad), "post_recv");
	ctl_put(READY1, 0);
	struct ibv_wc wc = recv1(&s, "write with immediate");
	T_CHECK(wc.wr_id == 7777 && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc.wc_flags & IBV_WC_WITH_IMM) &&
			ntohl(wc.imm_data) == 0x5157ab1e && wc.byte_len == 64,
		"write-imm completion: opcode %d flags 0x%x imm 0x%x len %u", wc.opcode, wc.wc_flags, ntohl(wc.imm_data),
		wc.byte_len);
	int ok = 1;
	for (size_t o = 0; o < REGION && ok; o++)
		if (s.buf[o] != pat(o, 1)) {
			fprintf(stderr, "[target] byte %zu is 0x%02x, expected 0x%02x\n", o, s.buf[o], pat(o, 1));
			ok = 0;
		}
	ctl_put(OK1, (uint64_t)ok);

	/* 2: passive */
	ctl_get(DONE2);

	/* 3 */
	for (int i = 0; i < NSEND; i++)
		post_recv(&s, (uint64_t)i, s.rbuf + (size_t)i * RSLOT, RSLOT);
	ctl_put(READY3, 0);
	ok = 1;
	for (int i = 0; i < NSEND; i++) {
		wc = recv1(&s, "send");
		uint32_t sz = msg_size(i);
		if ((int)wc.wr_id != i || wc.opcode != IBV_WC_RECV || wc.byte_len != sz) {
			fprintf(stderr, "[target] recv %d: wr_id %llu opcode %d len %u (expected %u)\n", i,
				(unsigned long long)wc.wr_id, wc.opcode, wc.byte_len, sz);
			ok = 0;
			break;
		}
		int has_imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
		if (has_imm != (i % 3 == 0) || (has_imm && ntohl(wc.imm_data) != ((uint32_t)i ^ 0xa5a5u))) {
			fprintf(stderr, "[target] recv %d: immediate flag %d value 0x%x\n", i, has_imm, ntohl(wc.imm_data));
			ok = 0;
			break;
		}
		const uint8_t *d = s.rbuf + (size_t)i * RSLOT;
		for (uint32_t j = 0; j < sz; j++)
			if (d[j] != cbyte(i, j)) {
				fprintf(stderr, "[target] recv %d byte %u: 0x%02x, expected 0x%02x\n", i, j, d[j], cbyte(i, j));
				ok = 0;
				break;
			}
		if (!ok)
			break;
	}
	ctl_put(OK3, (uint64_t)ok);

	/* 4: no receive posted until the initiator has seen its sends wait */
	ctl_put(READY4, 0);
	ctl_get(GO4);
	for (int i = 0; i < NRNR; i++)
		post_recv(&s, (uint64_t)i, s.rbuf + (size_t)i * RSLOT, RSLOT);
	ok = 1;
	for (int i = 0; i < NRNR && ok; i++) {
		wc = recv1(&s, "rnr send");
		const uint8_t *d = s.rbuf + (size_t)i * RSLOT;
		if ((int)wc.wr_id != i || wc.byte_len != 1024)
			ok = 0;
		for (uint32_t j = 0; j < 1024 && ok; j++)
			if (d[j] != cbyte(i + 1000, j))
				ok = 0;
	}
	ctl_put(OK4, (uint64_t)ok);

	/* 5 */
	uint64_t zero = 0;
	memcpy(s.buf, &zero, 8);
	ctl_put(READY5, 0);
	ctl_get(DONE5);
	uint64_t v;
	memcpy(&v, s.buf, 8);
	ctl_put(OK5, v == 42);

	ctl_get(BYE);
	ctl_put(BYE, 0);
	T_CHECK(!ibv_destroy_qp(s.qp), "destroy_qp");
	T_CHECK(!ibv_destroy_cq(s.cq), "destroy_cq");
	T_CHECK(!ibv_dereg_mr(s.mr) && !ibv_dereg_mr(s.rmr) && !ibv_dereg_mr(s.smr), "dereg_mr");
	T_CHECK(!ibv_dealloc_pd(s.pd), "dealloc_pd");
	T_CHECK(!ibv_close_device(s.ctx), "close_device");
	free(s.buf), free(s.rbuf), free(s.sbuf);
}

int main(int argc, char **argv)
{
	int use_gid = argc > 1 && !strcmp(argv[1], "--gid");
	setvbuf(stdout, NULL, _IOLBF, 0);
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp))
		t_fail("socketpair");
	pid_t pid = fork();
	if (pid < 0)
		t_fail("fork");
	if (pid == 0) {
		close(sp[0]);
		ctl = sp[1];
		target(use_gid);
		_exit(0);
	}
	close(sp[1]);
	ctl = sp[0];
	initiator(use_gid);
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		t_fail("target process failed (status 0x%x)", st);
	printf("verbs_stress: PASS\n");
	return 0;
}
