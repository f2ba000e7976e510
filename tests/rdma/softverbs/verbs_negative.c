/* verbs_negative: error semantics, in one process with QPs connected to each other through the device's
 * own LID (the loopback path runs through the same engine and wire protocol as remote traffic).
 * Each case prints "ok: ..."; any deviation exits non-zero. */
#include "sv_testlib.h"

#include <sys/mman.h>

#define BUF 65536

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cqa, *cqb;
static uint8_t *abuf, *bbuf;
static struct ibv_mr *amr, *bmr;
static uint16_t lid;
static int ncase;

#define ALL_REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static void ok(const char *what)
{
	ncase++;
	printf("ok: %s\n", what);
}

struct pair {
	struct ibv_qp *a, *b;
	uint32_t apsn, bpsn;
};

struct pcfg {
	unsigned b_access;
	uint8_t a_rnr_retry;
	uint8_t b_min_rnr;
	uint8_t a_timeout, a_retry;
	int b_psn_skew;      /* B expects A's PSN + skew */
	uint32_t a_dest_qpn; /* 0 = B */
	uint32_t a_max_send_wr;
	int a_sig_all;
	struct ibv_srq *b_srq;
};

static void make_pair(struct pair *p, const struct pcfg *c)
{
	struct t_qpcfg qa = {.type = IBV_QPT_RC, .max_send_wr = c->a_max_send_wr ? c->a_max_send_wr : 64,
			     .max_recv_wr = 64, .max_sge = 2, .max_inline = 0, .sq_sig_all = c->a_sig_all};
	struct t_qpcfg qb = {.type = IBV_QPT_RC, .max_send_wr = 64, .max_recv_wr = 64, .max_sge = 2, .srq = c->b_srq};
	p->a = t_create_qp(pd, cqa, cqa, &qa);
	p->b = t_create_qp(pd, cqb, cqb, &qb);
	p->apsn = 0x100 + (uint32_t)ncase * 0x1000;
	p->bpsn = 0x800000 + (uint32_t)ncase;
	t_to_init(p->a, ALL_REMOTE);
	t_to_init(p->b, c->b_access);
	struct t_path to_b = {.lid = lid, .qpn = c->a_dest_qpn ? c->a_dest_qpn : p->b->qp_num, .psn = p->bpsn};
	struct t_path to_a = {.lid = lid, .qpn = p->a->qp_num, .psn = (p->apsn + (uint32_t)c->b_psn_skew) & 0xffffff};
	t_to_rtr(p->a, &to_b, 12);
	t_to_rtr(p->b, &to_a, c->b_min_rnr ? c->b_min_rnr : 12);
	t_to_rts(p->a, p->apsn, c->a_timeout ? c->a_timeout : 14, c->a_retry ? c->a_retry : 7, c->a_rnr_retry);
	t_to_rts(p->b, p->bpsn, 14, 7, 7);
}

static void free_pair(struct pair *p)
{
	T_CHECK(!ibv_destroy_qp(p->a) && !ibv_destroy_qp(p->b), "destroy_qp");
	struct ibv_wc wc;
	while (ibv_poll_cq(cqa, 1, &wc) > 0)
		;
	while (ibv_poll_cq(cqb, 1, &wc) > 0)
		;
}

static int post(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *local, uint32_t len, uint32_t lkey,
		uint64_t raddr, uint32_t rkey, unsigned flags)
{
	struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = flags}, *bad = NULL;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	int rc = ibv_post_send(qp, &wr, &bad);
	if (rc)
		T_CHECK(bad == &wr, "bad_wr not set on failure");
	return rc;
}

static void post_ok(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *local, uint32_t len, uint32_t lkey,
		    uint64_t raddr, uint32_t rkey)
{
	int rc = post(qp, id, op, local, len, lkey, raddr, rkey, IBV_SEND_SIGNALED);
	if (rc)
		t_fail("post_send wr_id %llu: %s", (unsigned long long)id, strerror(rc));
}

static void recv_ok(struct ibv_qp *qp, uint64_t id, void *buf, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
	int rc = ibv_post_recv(qp, &wr, &bad);
	if (rc)
		t_fail("post_recv: %s", strerror(rc));
}

static void case_bad_rkey(void)
{
	struct pair p;
	struct pcfg c = {.b_access = ALL_REMOTE, .a_rnr_retry = 7};
	make_pair(&p, &c);
	memset(bbuf, 0x5a, BUF);
	memset(abuf, 0x11, BUF);
	recv_ok(p.b, 100, bbuf + 4096, 4096, bmr->lkey);
	struct ibv_sge s1 = {.addr = (uintptr_t)abuf, .length = 512, .lkey = amr->lkey};
	struct ibv_sge s2 = {.addr = (uintptr_t)abuf, .length = 16, .lkey = amr->lkey};
	struct ibv_send_wr w2 = {.wr_id = 2, .sg_list = &s2, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr w1 = {.wr_id = 1, .next = &w2, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED};
	w1.wr.rdma.remote_addr = (uintptr_t)bbuf;
	w1.wr.rdma.rkey = bmr->rkey ^ 0x00010000; /* not a valid key */
	struct ibv_send_wr *bad;
	T_CHECK(!ibv_post_send(p.a, &w1, &bad), "post");
	t_expect(cqa, 1, IBV_WC_REM_ACCESS_ERR, "write with bad rkey");
	t_expect(cqa, 2, IBV_WC_WR_FLUSH_ERR, "WR behind the failed one");
	T_CHECK(t_qp_state(p.a) == IBV_QPS_ERR, "requester not in ERR");
	t_expect(cqb, 100, IBV_WC_WR_FLUSH_ERR, "responder receive after access error");
	T_CHECK(t_qp_state(p.b) == IBV_QPS_ERR, "responder not in ERR");
	for (int i = 0; i < 4096; i++)
		T_CHECK(bbuf[i] == 0x5a, "memory written through a bad rkey");
	/* posting to a QP in the error state completes at once with flush errors */
	post_ok(p.a, 3, IBV_WR_SEND, abuf, 8, amr->lkey, 0, 0);
	t_expect(cqa, 3, IBV_WC_WR_FLUSH_ERR, "post in ERR");
	free_pair(&p);
	ok("RDMA write with a bad rkey -> IBV_WC_REM_ACCESS_ERR, later WR flushed, both QPs in ERR");
}

static void case_access(void)
{
	struct pair p;
	struct pcfg c = {.b_access = IBV_ACCESS_REMOTE_WRITE, .a_rnr_retry = 7};
	make_pair(&p, &c);
	post_ok(p.a, 1, IBV_WR_RDMA_READ, abuf, 64, amr->lkey, (uintptr_t)bbuf, bmr->rkey);
	t_expect(cqa, 1, IBV_WC_REM_ACCESS_ERR, "read without IBV_ACCESS_REMOTE_READ on the QP");
	free_pair(&p);
	ok("RDMA read on a QP without remote-read access -> IBV_WC_REM_ACCESS_ERR");

	uint8_t *ro = aligned_alloc(4096, 4096);
	struct ibv_mr *romr = ibv_reg_mr(pd, ro, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	T_CHECK(romr, "reg_mr");
	c.b_access = ALL_REMOTE;
	make_pair(&p, &c);
	post_ok(p.a, 1, IBV_WR_RDMA_WRITE, abuf, 64, amr->lkey, (uintptr_t)ro, romr->rkey);
	t_expect(cqa, 1, IBV_WC_REM_ACCESS_ERR, "write into an MR without IBV_ACCESS_REMOTE_WRITE");
	free_pair(&p);
	make_pair(&p, &c);
	post_ok(p.a, 1, IBV_WR_RDMA_WRITE, abuf, 128, amr->lkey, (uintptr_t)bbuf + BUF - 64, bmr->rkey);
	t_expect(cqa, 1, IBV_WC_REM_ACCESS_ERR, "write past the end of the MR");
	free_pair(&p);
	make_pair(&p, &c);
	post_ok(p.a, 1, IBV_WR_RDMA_READ, abuf, 64, amr->lkey, (uintptr_t)ro, romr->rkey);
	t_expect(cqa, 1, IBV_WC_SUCCESS, "read from a remote-read MR");
	free_pair(&p);
	T_CHECK(!ibv_dereg_mr(romr), "dereg");
	free(ro);
	ok("MR without remote write / out of bounds -> IBV_WC_REM_ACCESS_ERR; allowed read succeeds");
}

static void case_len(void)
{
	struct pair p;
	struct pcfg c = {.b_access = ALL_REMOTE, .a_rnr_retry = 7};
	make_pair(&p, &c);
	recv_ok(p.b, 55, bbuf, 16, bmr->lkey);
	post_ok(p.a, 1, IBV_WR_SEND, abuf, 100, amr->lkey, 0, 0);
	t_expect(cqb, 55, IBV_WC_LOC_LEN_ERR, "receive buffer too small");
	t_expect(cqa, 1, IBV_WC_REM_INV_REQ_ERR, "sender of the too long message");
	free_pair(&p);
	ok("receive buffer too small -> IBV_WC_LOC_LEN_ERR (receiver), IBV_WC_REM_INV_REQ_ERR (sender)");
}

static void case_rnr(void)
{
	struct pair p;
	struct pcfg c = {.b_access = ALL_REMOTE, .a_rnr_retry = 0};
	make_pair(&p, &c);
	post_ok(p.a, 1, IBV_WR_SEND, abuf, 10, amr->lkey, 0, 0);
	t_expect(cqa, 1, IBV_WC_RNR_RETRY_EXC_ERR, "send with rnr_retry 0 and no receive");
	free_pair(&p);
	c.a_rnr_retry = 3;
	c.b_min_rnr = 1; /* 0.01 ms */
	make_pair(&p, &c);
	post_ok(p.a, 1, IBV_WR_SEND, abuf, 10, amr->lkey, 0, 0);
	t_expect(cqa, 1, IBV_WC_RNR_RETRY_EXC_ERR, "send with rnr_retry 3 and no receive");
	free_pair(&p);
	/* rnr_retry 7 waits forever, unless the responder goes away: then the transport timeout applies */
	c.a_rnr_retry = 7;
	c.a_timeout = 4;
	c.a_retry = 1;
	make_pair(&p, &c);
	post_ok(p.a, 1, IBV_WR_SEND, abuf, 10, amr->lkey, 0, 0);
	t_nothing(cqa, 300, "send waiting for a receive WR (rnr_retry 7)");
	struct ibv_qp_attr ea = {.qp_state = IBV_QPS_ERR};
	T_CHECK(!ibv_modify_qp(p.b, &ea, IBV_QP_STATE), "responder to ERR");
	t_expect(cqa, 1, IBV_WC_RETRY_EXC_ERR, "RNR-waiting send after the responder went to ERR");
	free_pair(&p);
	ok("no receive WR: finite rnr_retry -> IBV_WC_RNR_RETRY_EXC_ERR; rnr_retry 7 waits (> 300 ms) until the "
	   "responder fails");
}

static void case_timeout(void)
{
	struct ibv_qp *gone;
	struct t_qpcfg qc = {.type = IBV_QPT_RC, .max_send_wr = 4, .max_recv_wr = 4, .max_sge = 1};
	gone = t_create_qp(pd, cqb, cqb, &qc);
	uint32_t dead_qpn = gone->qp_num;
	T_CHECK(!ibv_destroy_qp(gone), "destroy");
	struct pair p;
	struct pcfg c = {.b_access = ALL_REMOTE, .a_rnr_retry = 7, .a_timeout = 4, .a_retry = 1, .a_dest_qpn = dead_qpn};
	make_pair(&p, &c);
	uint64_t t0 = t_now_ms();
	post_ok(p.a, 1, IBV_WR_SEND, abuf, 10, amr->lkey, 0, 0);
	t_expect(cqa, 1, IBV_WC_RETRY_EXC_ERR, "send to a QP that does not exist");
	printf("   (transport retries ran out after %llu ms)\n", (unsigned long long)(t_now_ms() - t0));
	free_pair(&p);
	ok("destination QP missing -> IBV_WC_RETRY_EXC_ERR after the transport timeout");
}

static void case_psn(void)
{
	struct pair p;
	struct pcfg c = {.b_access = ALL_REMOTE, .a_rnr_retry = 7, .b_psn_skew = -1000};
	make_pair(&p, &c); /* B expects an older PSN: A's packets are "ahead" */
	recv_ok(p.b, 9, bbuf, 64, bmr->lkey);
	post_ok(p.a, 1, IBV_WR_SEND, abuf, 10, amr->lkey, 0, 0);
	t_expect(cqa, 1, IBV_WC_RETRY_EXC_ERR, "send with a PSN ahead of the responder");
	t_nothing(cqb, 50, "responder after a PSN sequence error");
	free_pair(&p);
	c.b_psn_skew = 1000;
	make_pair(&p, &c); /* B expects a newer PSN: A's packets look like duplicates */
	recv_ok(p.b, 9, bbuf, 64, bmr->lkey);
	post_ok(p.a, 1, IBV_WR_SEND, abuf, 10, amr->lkey, 0, 0);
	t_expect(cqa, 1, IBV_WC_SUCCESS, "duplicate is acknowledged");
	t_nothing(cqb, 50, "responder must drop a duplicate");
	free_pair(&p);
	ok("PSN ahead -> IBV_WC_RETRY_EXC_ERR; PSN behind -> acknowledged as duplicate, not delivered");
}

static void case_local(void)
{
	struct t_qpcfg qc = {.type = IBV_QPT_RC, .max_send_wr = 4, .max_recv_wr = 4, .max_sge = 1, .max_inline = 64};
	struct ibv_qp *q = t_create_qp(pd, cqa, cqa, &qc);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
	T_CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE) == EINVAL, "RESET->RTR accepted");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_INIT, .port_num = 1};
	T_CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT) == EINVAL,
		"RESET->INIT without access flags accepted");
	T_CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_SQ_PSN) ==
			EINVAL,
		"RESET->INIT with an attribute not allowed there accepted");
	a.port_num = 2;
	T_CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == EINVAL,
		"port 2 accepted");
	T_CHECK(t_qp_state(q) == IBV_QPS_RESET, "failed modify changed the state");
	struct ibv_sge sge = {.addr = (uintptr_t)abuf, .length = 8, .lkey = amr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *rbad;
	T_CHECK(ibv_post_recv(q, &rw, &rbad) == EINVAL, "post_recv in RESET accepted");
	t_to_init(q, 0);
	T_CHECK(post(q, 1, IBV_WR_SEND, abuf, 8, amr->lkey, 0, 0, IBV_SEND_SIGNALED) == EINVAL, "post_send in INIT accepted");
	T_CHECK(!ibv_post_recv(q, &rw, &rbad), "post_recv in INIT refused");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = q->qp_num,
				 .ah_attr = {.dlid = lid, .port_num = 1}};
	T_CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN) == EINVAL,
		"INIT->RTR without MAX_DEST_RD_ATOMIC/MIN_RNR_TIMER accepted");
	a.qp_state = IBV_QPS_RTS;
	T_CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE) == EINVAL, "INIT->RTS accepted");
	struct t_path self = {.lid = lid, .qpn = q->qp_num, .psn = 0};
	t_to_rtr(q, &self, 12);
	t_to_rts(q, 0, 14, 7, 7);
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_INIT};
	T_CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE) == EINVAL, "RTS->INIT accepted");
	uint8_t big[2000] = {0};
	T_CHECK(post(q, 2, IBV_WR_SEND, big, sizeof big, 0, 0, 0, IBV_SEND_INLINE) == EINVAL, "oversized inline accepted");
	T_CHECK(post(q, 2, IBV_WR_ATOMIC_CMP_AND_SWP, abuf, 8, amr->lkey, 0, 0, IBV_SEND_INLINE) == EINVAL,
		"inline atomic accepted");
	post_ok(q, 3, IBV_WR_SEND, abuf, 8, amr->lkey ^ 0x100, 0, 0);
	t_expect(cqa, 3, IBV_WC_LOC_PROT_ERR, "send with a bad lkey");
	T_CHECK(t_qp_state(q) == IBV_QPS_ERR, "QP not in ERR after a local protection error");
	t_expect(cqa, 1, IBV_WC_WR_FLUSH_ERR, "receive flushed");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RESET};
	T_CHECK(!ibv_modify_qp(q, &a, IBV_QP_STATE), "ERR->RESET refused");
	T_CHECK(t_qp_state(q) == IBV_QPS_RESET && q->state == IBV_QPS_RESET, "not in RESET");
	T_CHECK(!ibv_destroy_qp(q), "destroy");
	ok("QP state machine: wrong transitions and attribute masks -> EINVAL; posting rules; bad lkey -> LOC_PROT_ERR");

	/* send queue depth: a full SQ refuses more; unsignaled WRs keep their slots until a signaled one completes */
	struct pair p;
	struct pcfg c = {.b_access = ALL_REMOTE, .a_rnr_retry = 7, .a_max_send_wr = 4};
	make_pair(&p, &c);
	for (int i = 0; i < 4; i++)
		T_CHECK(!post(p.a, (uint64_t)i, IBV_WR_RDMA_WRITE, abuf, 64, amr->lkey, (uintptr_t)bbuf, bmr->rkey, 0),
			"post %d", i);
	t_sleep_ms(50);
	T_CHECK(post(p.a, 4, IBV_WR_RDMA_WRITE, abuf, 64, amr->lkey, (uintptr_t)bbuf, bmr->rkey, 0) == ENOMEM,
		"a 5th WR fit into max_send_wr 4 without any completion");
	t_nothing(cqa, 20, "unsignaled writes");
	free_pair(&p);
	ok("max_send_wr enforced, unsignaled WRs hold their slots -> ENOMEM");

	/* unsupported or invalid requests */
	struct ibv_cq_init_attr_ex cqx = {.cqe = 8, .wc_flags = IBV_WC_EX_WITH_CVLAN};
	errno = 0;
	T_CHECK(!ibv_create_cq_ex(ctx, &cqx) && errno == EOPNOTSUPP, "create_cq_ex with CVLAN");
	errno = 0;
	T_CHECK(!ibv_alloc_mw(pd, IBV_MW_TYPE_1) && errno == EOPNOTSUPP, "alloc_mw");
	struct ibv_xrcd_init_attr xa = {0};
	errno = 0;
	T_CHECK(!ibv_open_xrcd(ctx, &xa) && errno == EOPNOTSUPP, "open_xrcd");
	union ibv_gid g;
	T_CHECK(ibv_query_gid(ctx, 1, 1, &g) == -1, "gid index 1 exists");
	struct ibv_port_attr pa;
	T_CHECK(ibv_query_port(ctx, 2, &pa) != 0, "port 2 exists");
	void *hole = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(hole, 8192);
	errno = 0;
	T_CHECK(!ibv_reg_mr(pd, hole, 8192, IBV_ACCESS_LOCAL_WRITE) && errno == EFAULT, "reg_mr of unmapped memory");
	errno = 0;
	T_CHECK(!ibv_reg_mr(pd, abuf, 64, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL,
		"remote write without local write accepted");
	T_CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd with MRs");
	struct ibv_qp *held = t_create_qp(pd, cqa, cqa, &qc);
	T_CHECK(ibv_destroy_cq(cqa) == EBUSY, "destroy_cq with a QP on it");
	T_CHECK(!ibv_destroy_qp(held), "destroy");
	ok("unsupported verbs -> EOPNOTSUPP; EBUSY/EFAULT/EINVAL on resource misuse");
}

static void case_ud(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct t_qpcfg qc = {.type = IBV_QPT_UD, .max_send_wr = 8, .max_recv_wr = 8, .max_sge = 1};
	struct ibv_qp *u1 = t_create_qp(pd, cq, cq, &qc), *u2 = t_create_qp(pd, cq, cq, &qc);
	t_to_init(u1, 0x1111);
	t_to_init(u2, 0x2222);
	struct t_path none = {0};
	t_to_rtr(u1, &none, 0);
	t_to_rtr(u2, &none, 0);
	t_to_rts(u1, 0, 0, 0, 0);
	t_to_rts(u2, 0, 0, 0, 0);
	struct ibv_ah_attr aa = {.dlid = lid, .port_num = 1};
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	T_CHECK(ah, "create_ah");
	struct ibv_ah_attr ga = {.is_global = 1, .dlid = lid, .port_num = 1};
	T_CHECK(!ibv_query_gid(ctx, 1, 0, &ga.grh.dgid), "gid");
	ga.grh.hop_limit = 1;
	struct ibv_ah *gah = ibv_create_ah(pd, &ga);
	T_CHECK(gah, "create_ah (global)");
	struct ibv_port_attr pa0, pa1;
	T_CHECK(!ibv_query_port(ctx, 1, &pa0), "port");

	uint8_t *rb = bbuf;
	for (int i = 0; i < 100; i++)
		abuf[i] = (uint8_t)(i + 1);
	struct ibv_sge s = {.addr = (uintptr_t)abuf, .length = 100, .lkey = amr->lkey};
	struct ibv_send_wr w = {.wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = u2->qp_num;
	w.wr.ud.remote_qkey = 0x1111; /* wrong key for u2 */
	recv_ok(u2, 50, rb, 140, bmr->lkey);
	T_CHECK(!ibv_post_send(u1, &w, &bad), "post");
	t_expect(cq, 1, IBV_WC_SUCCESS, "UD send (wrong qkey) completes locally");
	t_nothing(cq, 50, "datagram with a wrong Q_Key must be dropped");
	T_CHECK(!ibv_query_port(ctx, 1, &pa1) && pa1.qkey_viol_cntr == pa0.qkey_viol_cntr + 1, "qkey_viol_cntr");

	w.wr_id = 2;
	w.wr.ud.remote_qkey = 0x2222;
	T_CHECK(!ibv_post_send(u1, &w, &bad), "post");
	t_expect(cq, 2, IBV_WC_SUCCESS, "UD send");
	struct ibv_wc wc = t_expect(cq, 50, IBV_WC_SUCCESS, "UD receive");
	T_CHECK(wc.byte_len == 140 && wc.src_qp == u1->qp_num && wc.slid == lid && !(wc.wc_flags & IBV_WC_GRH) &&
			!memcmp(rb + 40, abuf, 100),
		"UD receive: len %u src_qp 0x%x slid 0x%x flags 0x%x", wc.byte_len, wc.src_qp, wc.slid, wc.wc_flags);

	w.wr_id = 3;
	w.wr.ud.ah = gah;
	recv_ok(u2, 51, rb, 140, bmr->lkey);
	T_CHECK(!ibv_post_send(u1, &w, &bad), "post");
	t_expect(cq, 3, IBV_WC_SUCCESS, "UD send with GRH");
	wc = t_expect(cq, 51, IBV_WC_SUCCESS, "UD receive with GRH");
	struct ibv_grh *grh = (struct ibv_grh *)rb;
	T_CHECK((wc.wc_flags & IBV_WC_GRH) && !memcmp(&grh->sgid, &ga.grh.dgid, 16) && !memcmp(rb + 40, abuf, 100),
		"GRH missing or wrong");
	struct ibv_ah_attr back;
	T_CHECK(!ibv_init_ah_from_wc(ctx, 1, &wc, grh, &back) && back.is_global && back.dlid == lid, "init_ah_from_wc");

	w.wr_id = 4;
	recv_ok(u2, 52, rb, 100, bmr->lkey); /* no room for the 40-byte GRH area */
	T_CHECK(!ibv_post_send(u1, &w, &bad), "post");
	t_expect(cq, 4, IBV_WC_SUCCESS, "UD send");
	t_expect(cq, 52, IBV_WC_LOC_LEN_ERR, "UD receive buffer without GRH room");

	s.length = 5000; /* > MTU */
	w.wr_id = 5;
	T_CHECK(!ibv_post_send(u1, &w, &bad), "post");
	t_expect(cq, 5, IBV_WC_LOC_LEN_ERR, "UD send larger than the MTU");
	T_CHECK(t_qp_state(u1) == IBV_QPS_SQE, "UD QP not in SQE after a send error");
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS};
	T_CHECK(!ibv_modify_qp(u1, &a, IBV_QP_STATE), "SQE->RTS");
	s.length = 100;
	w.wr_id = 6;
	recv_ok(u2, 53, rb, 140, bmr->lkey);
	T_CHECK(!ibv_post_send(u1, &w, &bad), "post");
	t_expect(cq, 6, IBV_WC_SUCCESS, "UD send after SQE->RTS");
	t_expect(cq, 53, IBV_WC_SUCCESS, "UD receive after SQE->RTS");

	T_CHECK(!ibv_destroy_ah(ah) && !ibv_destroy_ah(gah), "destroy_ah");
	T_CHECK(!ibv_destroy_qp(u1) && !ibv_destroy_qp(u2), "destroy_qp");
	T_CHECK(!ibv_destroy_cq(cq), "destroy_cq");
	ok("UD: Q_Key check, 40-byte GRH area and IBV_WC_GRH, MTU limit -> LOC_LEN_ERR, SQE state");
}

static int wait_async(enum ibv_event_type t, void *elem, unsigned ms)
{
	struct pollfd pf = {.fd = ctx->async_fd, .events = POLLIN};
	uint64_t end = t_now_ms() + ms;
	while (t_now_ms() < end) {
		if (poll(&pf, 1, (int)(end - t_now_ms())) <= 0)
			break;
		struct ibv_async_event ev;
		if (ibv_get_async_event(ctx, &ev))
			t_fail("ibv_get_async_event");
		int hit = ev.event_type == t && (ev.element.qp == elem || (void *)ev.element.srq == elem);
		ibv_ack_async_event(&ev);
		if (hit)
			return 1;
	}
	return 0;
}

static void case_srq_events(void)
{
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	T_CHECK(srq, "create_srq");
	for (int i = 0; i < 8; i++) {
		struct ibv_sge sge = {.addr = (uintptr_t)bbuf + (size_t)i * 256, .length = 256, .lkey = bmr->lkey};
		struct ibv_recv_wr rw = {.wr_id = (uint64_t)(200 + i), .sg_list = &sge, .num_sge = 1}, *bad;
		T_CHECK(!ibv_post_srq_recv(srq, &rw, &bad), "post_srq_recv");
	}
	struct ibv_srq_attr lim = {.srq_limit = 6};
	T_CHECK(!ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT), "arm srq limit");
	struct pair p;
	struct pcfg c = {.b_access = ALL_REMOTE, .a_rnr_retry = 7, .b_srq = srq};
	make_pair(&p, &c);
	for (int i = 0; i < 3; i++) {
		post_ok(p.a, (uint64_t)i, IBV_WR_SEND, abuf, 32, amr->lkey, 0, 0);
		t_expect(cqa, (uint64_t)i, IBV_WC_SUCCESS, "send to SRQ QP");
		struct ibv_wc wc = t_expect(cqb, (uint64_t)(200 + i), IBV_WC_SUCCESS, "SRQ receive");
		T_CHECK(wc.qp_num == p.b->qp_num, "SRQ completion qp_num");
	}
	T_CHECK(wait_async(IBV_EVENT_SRQ_LIMIT_REACHED, srq, 2000), "no IBV_EVENT_SRQ_LIMIT_REACHED");
	struct ibv_srq_attr q;
	T_CHECK(!ibv_query_srq(srq, &q) && q.srq_limit == 0, "limit not disarmed after the event");
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	T_CHECK(!ibv_modify_qp(p.b, &a, IBV_QP_STATE), "to ERR");
	T_CHECK(wait_async(IBV_EVENT_QP_LAST_WQE_REACHED, p.b, 2000), "no IBV_EVENT_QP_LAST_WQE_REACHED");
	T_CHECK(ibv_destroy_srq(srq) == EBUSY, "destroy_srq with a QP attached");
	free_pair(&p);
	T_CHECK(!ibv_destroy_srq(srq), "destroy_srq");
	ok("SRQ limit event, LAST_WQE_REACHED on error, async event fd");
}

static void case_solicited(void)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, (void *)0x1234, ch, 0);
	T_CHECK(ch && cq, "channel/cq");
	struct t_qpcfg qc = {.type = IBV_QPT_RC, .max_send_wr = 8, .max_recv_wr = 8, .max_sge = 1};
	struct ibv_qp *a = t_create_qp(pd, cqa, cqa, &qc), *b = t_create_qp(pd, cq, cq, &qc);
	t_to_init(a, ALL_REMOTE);
	t_to_init(b, ALL_REMOTE);
	struct t_path pa = {.lid = lid, .qpn = b->qp_num, .psn = 5}, pb = {.lid = lid, .qpn = a->qp_num, .psn = 9};
	t_to_rtr(a, &pa, 12);
	t_to_rtr(b, &pb, 12);
	t_to_rts(a, 9, 14, 7, 7);
	t_to_rts(b, 5, 14, 7, 7);
	recv_ok(b, 1, bbuf, 64, bmr->lkey);
	recv_ok(b, 2, bbuf + 64, 64, bmr->lkey);
	T_CHECK(!ibv_req_notify_cq(cq, 1), "arm solicited-only");
	post_ok(a, 1, IBV_WR_SEND, abuf, 8, amr->lkey, 0, 0);
	t_expect(cqa, 1, IBV_WC_SUCCESS, "unsolicited send");
	struct pollfd pf = {.fd = ch->fd, .events = POLLIN};
	T_CHECK(poll(&pf, 1, 100) == 0, "event for an unsolicited completion");
	T_CHECK(!post(a, 2, IBV_WR_SEND, abuf, 8, amr->lkey, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED), "post");
	t_expect(cqa, 2, IBV_WC_SUCCESS, "solicited send");
	T_CHECK(poll(&pf, 1, 2000) == 1, "no event for a solicited completion");
	struct ibv_cq *ecq;
	void *ectx;
	T_CHECK(!ibv_get_cq_event(ch, &ecq, &ectx) && ecq == cq && ectx == (void *)0x1234, "get_cq_event");
	T_CHECK(ibv_destroy_comp_channel(ch) == EBUSY, "destroying a channel in use");
	t_expect(cq, 1, IBV_WC_SUCCESS, "recv 1");
	t_expect(cq, 2, IBV_WC_SUCCESS, "recv 2");
	ibv_ack_cq_events(cq, 1);
	T_CHECK(!ibv_destroy_qp(a) && !ibv_destroy_qp(b), "destroy");
	T_CHECK(!ibv_destroy_cq(cq) && !ibv_destroy_comp_channel(ch), "destroy cq/channel");
	ok("completion channel: solicited-only arming, readable fd, get/ack events");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	t_who = "negative";
	ctx = t_open();
	pd = ibv_alloc_pd(ctx);
	cqa = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	cqb = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	abuf = aligned_alloc(4096, BUF);
	bbuf = aligned_alloc(4096, BUF);
	T_CHECK(pd && cqa && cqb && abuf && bbuf, "setup");
	amr = ibv_reg_mr(pd, abuf, BUF, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	bmr = ibv_reg_mr(pd, bbuf, BUF, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	T_CHECK(amr && bmr, "reg_mr");
	lid = t_lid(ctx);

	case_bad_rkey();
	case_access();
	case_len();
	case_rnr();
	case_timeout();
	case_psn();
	case_local();
	case_ud();
	case_srq_events();
	case_solicited();

	T_CHECK(!ibv_dereg_mr(amr) && !ibv_dereg_mr(bmr), "dereg");
	T_CHECK(!ibv_destroy_cq(cqa) && !ibv_destroy_cq(cqb), "destroy_cq");
	T_CHECK(!ibv_dealloc_pd(pd), "dealloc_pd");
	T_CHECK(!ibv_close_device(ctx), "close");
	free(abuf);
	free(bbuf);
	printf("verbs_negative: PASS (%d cases)\n", ncase);
	return 0;
}
