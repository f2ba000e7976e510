/* verbs_ud_dests: a deterministic, self-checking UD verbs program whose destination changes mid-run, to
 * a QP it has never sent to: meant to be checkpointed before the change, SIGKILLed and restarted, so that
 * the first send to the new destination (and the address handle made for it) comes after the restart.
 * A transparent checkpointer must then translate a destination QP number the program got out of band
 * before the checkpoint but never used (docs/verbs.md, "UD destinations").
 *
 *   verbs_ud_dests --fork [opts]              fork; parent = side 0, child = side 1
 *   verbs_ud_dests --server PORT [opts]       side 0
 *   verbs_ud_dests --client HOST PORT [opts]  side 1
 * opts: --iters N (2000) --delay-us U (200) --switch-at S (iters/2) --timeout S (60) --ib-dev NAME
 *
 * Side 0 has one UD QP, A; side 1 has two, B1 and B2, on one CQ. Their numbers (and lids) are exchanged
 * once over the socket, which is closed before the first work request. Iteration i: side 0 sends a
 * 64-byte message m(0,i) to B1 while i < S, to B2 from S on (the address handle for B2 is created at
 * iteration S, not before), and waits for side 1's acknowledgement m(1,i); side 1 checks that message i
 * arrived on the QP it was sent to with the right contents, then sends m(1,i) back to A. Stop-and-wait,
 * so nothing is lost on a device that loses nothing (softverbs). stdout: `side S iter I` every 500
 * iterations (side 1 before its acknowledgement, side 0 after receiving it: a fixed order) and one final
 * line per side with a digest over everything received. Failures: `FAIL: ...` on stderr, exit 1. */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <sched.h>

#pragma GCC diagnostic ignored "-Wunused-function" /* the shared helpers this program does not use */
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "inflight_common.h"

#define UD_MSG 64u
#define GRH 40u /* a UD receive buffer starts with room for the GRH */
#define RECV_SZ (GRH + UD_MSG)
#define NRECV 8u /* receives posted per QP */
#define QKEY 0x11111111u

static const char *o_dev, *o_switch;
static unsigned switch_at;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *mr;
static uint8_t *buf; /* [0, 2*NRECV) receive slots per QP (side 1: B1 then B2; side 0: A), then the send buffer */
static struct ibv_qp *qps[2];
static int nqp;
static uint16_t my_lid, peer_lid;
static uint32_t peer_qpn[2];
static struct ibv_ah *ah[2]; /* side 0: to B1 (made at start), to B2 (made at iteration switch_at) */

static uint8_t *slot(int q, unsigned k) { return buf + ((size_t)q * NRECV + k) * RECV_SZ; }
static uint8_t *sendbuf(void) { return buf + (size_t)2 * NRECV * RECV_SZ; }

static void post_recv(int q, unsigned k)
{
	struct ibv_sge sg = {.addr = (uintptr_t)slot(q, k), .length = RECV_SZ, .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = ((uint64_t)q << 32) | k, .sg_list = &sg, .num_sge = 1}, *bad;
	if (ibv_post_recv(qps[q], &wr, &bad))
		die("ibv_post_recv on QP %d: %s", q, strerror(errno));
}

static struct ibv_ah *make_ah(uint16_t lid)
{
	struct ibv_ah_attr a = {.dlid = lid, .port_num = 1};
	struct ibv_ah *h = ibv_create_ah(pd, &a);
	if (!h)
		die("ibv_create_ah for lid %u: %s", lid, strerror(errno));
	return h;
}

static void send_to(struct ibv_ah *h, uint32_t qpn, uint32_t i)
{
	fill(sendbuf(), UD_MSG, K_MSG(side, i));
	struct ibv_sge sg = {.addr = (uintptr_t)sendbuf(), .length = UD_MSG, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = i, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED};
	wr.wr.ud.ah = h;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = QKEY;
	struct ibv_send_wr *bad;
	if (ibv_post_send(qps[0], &wr, &bad))
		die("ibv_post_send of message %u to QP %u: %s", i, qpn, strerror(errno));
}

/* Completions in any order: a receive may complete before the send that preceded it did (side 1's
 * acknowledgement i completes after side 0's message i+1 arrived, over some transports). */
static uint32_t sends_done; /* send completions seen, in order (wr_id = message number) */
static int pending_q = -1;  /* the QP message recv_done arrived on and was checked, not yet taken */

static void completion(const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS)
		fail("completion %s (opcode %d, wr_id 0x%llx)", ibv_wc_status_str(wc->status), wc->opcode,
		     (unsigned long long)wc->wr_id);
	if (wc->opcode == IBV_WC_SEND) {
		if (wc->wr_id != sends_done)
			fail("send completion for message %llu, want %u", (unsigned long long)wc->wr_id, sends_done);
		sends_done++;
		return;
	}
	int q = (int)(wc->wr_id >> 32);
	unsigned s = (unsigned)(wc->wr_id & 0xffffffffu);
	if (wc->opcode != IBV_WC_RECV || pending_q >= 0 || q >= nqp || s >= NRECV)
		fail("unexpected completion (opcode %d, wr_id 0x%llx)", wc->opcode, (unsigned long long)wc->wr_id);
	if (wc->byte_len != GRH + UD_MSG)
		fail("message of %u bytes, want %u", wc->byte_len, GRH + UD_MSG);
	if (wc->qp_num != qps[q]->qp_num)
		fail("completion names QP %u, the receive was posted on QP %u", wc->qp_num, qps[q]->qp_num);
	uint8_t *m = slot(q, s) + GRH;
	long bad = check(m, UD_MSG, K_MSG(1 - side, recv_done));
	if (bad >= 0)
		fail("message %u differs at word %ld", recv_done, bad);
	dig_recv = fnv(dig_recv, m, UD_MSG);
	post_recv(q, s);
	pending_q = q;
}

/* Polls until the next message has arrived (want_msg; returns the QP index it came on) and the sends up
 * to message `sent` have completed (-1: none). */
static int wait_for(int want_msg, long sent)
{
	progressed();
	while ((want_msg && pending_q < 0) || (long)sends_done <= sent) {
		struct ibv_wc wc[4];
		int n = ibv_poll_cq(cq, 4, wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (n == 0) {
			stalled(want_msg && pending_q < 0 ? "a message" : "a send completion", "sends", sends_done,
				(uint64_t)(sent + 1));
			sched_yield();
			continue;
		}
		for (int k = 0; k < n; k++)
			completion(&wc[k]);
	}
	int q = pending_q;
	if (want_msg) {
		pending_q = -1;
		recv_done++;
	}
	return q;
}

static void to_rts(struct ibv_qp *q)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = QKEY};
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("INIT: %s", strerror(errno));
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE))
		die("RTR: %s", strerror(errno));
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x100u;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("RTS: %s", strerror(errno));
}

static void setup(int fd)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || n < 1)
		die("no verbs device");
	struct ibv_device *dev = l[0];
	for (int k = 0; o_dev && k < n; k++)
		dev = !strcmp(ibv_get_device_name(l[k]), o_dev) ? l[k] : dev;
	ctx = ibv_open_device(dev);
	if (!ctx)
		die("ibv_open_device: %s", strerror(errno));
	ibv_free_device_list(l);
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa) || pa.state != IBV_PORT_ACTIVE)
		die("port 1 is not active");
	my_lid = pa.lid;
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
	size_t len = ((size_t)2 * NRECV * RECV_SZ + UD_MSG + 4095) & ~(size_t)4095;
	buf = aligned_alloc(4096, len);
	memset(buf, 0, len);
	mr = cq ? ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr)
		die("pd/cq/mr: %s", strerror(errno));
	nqp = side == 0 ? 1 : 2;
	for (int q = 0; q < nqp; q++) {
		struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
					      .cap = {.max_send_wr = 4, .max_recv_wr = NRECV, .max_send_sge = 1, .max_recv_sge = 1}};
		qps[q] = ibv_create_qp(pd, &ia);
		if (!qps[q])
			die("ibv_create_qp (UD): %s", strerror(errno));
		to_rts(qps[q]);
		for (unsigned k = 0; k < NRECV; k++)
			post_recv(q, k);
	}
	char line[96];
	memset(line, 0, sizeof line);
	snprintf(line, sizeof line, "%u %u %u %u", my_lid, qps[0]->qp_num, nqp > 1 ? qps[1]->qp_num : 0, o_iters);
	swap_info(fd, line, sizeof line);
	unsigned lid, q0, q1, iters;
	if (sscanf(line, "%u %u %u %u", &lid, &q0, &q1, &iters) != 4)
		die("bad connection info from the peer: %s", line);
	if (iters != o_iters)
		die("the peer runs %u iterations, this side %u", iters, o_iters);
	peer_lid = (uint16_t)lid, peer_qpn[0] = q0, peer_qpn[1] = q1;
	ah[0] = make_ah(peer_lid); /* side 0: to B1; side 1: to A */
	barrier(fd);
}

int main(int argc, char **argv)
{
	static const struct own_opt own[] = {{"--ib-dev", NULL, &o_dev}, {"--switch-at", NULL, &o_switch}, {NULL, NULL, NULL}};
	int fd = start(argc, argv, "verbs_ud_dests", "--iters N (2000) --delay-us U (200) --switch-at S (iters/2) "
				   "--timeout S (60) --ib-dev NAME", own);
	switch_at = o_switch ? num(o_switch, 0) : o_iters / 2;
	setup(fd);
	for (uint32_t i = 0; i < o_iters; i++) {
		cur_iter = i;
		if (side == 0) {
			int to = i < switch_at ? 0 : 1;
			if (to == 1 && !ah[1])
				ah[1] = make_ah(peer_lid); /* made now: after a restart, if one came before the switch */
			send_to(ah[to], peer_qpn[to], i);
			wait_for(1, (long)i);
			progress_line(0, i);
		} else {
			int on = wait_for(1, (long)i - 1);
			if (on != (i < switch_at ? 0 : 1))
				fail("message %u arrived on QP B%d", i, on + 1);
			progress_line(1, i);
			send_to(ah[0], peer_qpn[0], i);
		}
		if (o_delay_us)
			usleep(o_delay_us);
	}
	if (side == 1)
		wait_for(0, (long)o_iters - 1);
	for (int q = 0; q < nqp; q++)
		ibv_destroy_qp(qps[q]);
	for (int k = 0; k < 2; k++)
		if (ah[k])
			ibv_destroy_ah(ah[k]);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	final_line(dig_recv, recv_done);
	return 0;
}
