/* verbs_inflight: a deterministic, self-checking RC verbs program with many operations in flight, meant
 * to be checkpointed at random moments, SIGKILLed and restarted by a transparent checkpointer.
 *
 * Two processes, one RC QP each, connected to each other:
 *   verbs_inflight --fork [opts]              fork; parent = side 0, child = side 1 (each opens the device
 *                                             after the fork; connection info over a socketpair)
 *   verbs_inflight --server PORT [opts]       side 0, waits for the client on TCP PORT
 *   verbs_inflight --client HOST PORT [opts]  side 1
 * opts: --iters N (2000)  --delay-us U (200, a usleep per iteration)  --gid (address the peer by GID)
 *       --events (wait through a completion channel instead of busy polling)  --timeout S (60: fail
 *       after S seconds without progress; time the process spends stopped does not count)
 *       --ib-dev NAME (default: the first device)
 * The connection info (lid, qpn, psn, gid, region address, rkey, iterations) is exchanged once over the
 * socket, which is closed before the first work request: during the run the two sides talk only verbs.
 *
 * Every iteration i, both sides alike (S = own side, P = the peer):
 *   1. RDMA WRITE of 4 KiB, contents f(S,i), into slot i%64 of the peer's region (signaled every 8th);
 *   2. SEND WITH IMMEDIATE (imm = i) of 64 bytes m(S,i), unsignaled. The receiver checks, on the receive
 *      completion of message i, the message and that slot i%64 already holds f(P,i) (RC ordering);
 *   3. i%4 == 0: two RDMA READs: a 4 KiB chunk ((i/4)%16) of the peer's static 64 KiB area (filled once
 *      with s(P)), and the peer's 8-byte progress word, which the peer sets to h(P,i) at iteration i.
 *      That value is well defined by the protocol: the peer sets h(P,i) before posting its message i, the
 *      reader posts the READs only after receiving message i, and the peer sets h(P,i+4) only after
 *      receiving the reader's message i+1, which the reader posts after the READs (the responder executes
 *      a QP's requests in order, so the READs have been served by then);
 *   4. i%16 == 0: FETCH_AND_ADD of i on an 8-byte counter in the peer's region; the fetched value and
 *      the final counter are checked (only the peer adds to one's counter).
 * Receives are posted K=16 messages ahead (receive queue 32). Sends are not waited for: the program
 * waits only to stay within the send queue (128 WRs; an unsignaled WR holds its slot until a later
 * signaled one completes), to reuse a source/destination buffer, and for the protocol waits of step 3
 * (which also keep the two sides within a few iterations of each other). At the end each side sends a
 * final message N (signaled) and waits for the peer's: after it, all of the peer's operations on one's
 * memory are done, so the counter is final.
 * A digest (FNV-1a 64) over everything received, read and fetched (three streams, each in its order)
 * is printed at the end, one line per side:  side S iters N digest 0x... counter C
 * plus `side S iter I` every 500 iterations, in an order the protocol fixes (side 1 prints before it
 * posts message I, side 0 after receiving it), so stdout is identical between runs with the same
 * arguments, in --fork mode too (the parent prints its final line after the child exited).
 * Failures: `FAIL: <what> at iteration i` on stderr, exit 1 (the parent of --fork also when the child
 * failed). Only classic verbs are used (no _ex verbs, no ibv_wr_*).
 * What does not depend on verbs (contents, digest, options, sockets, --fork, failures, the --timeout
 * rule) is shared with fi_inflight.c in inflight_common.h. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inflight_common.h" /* BLK NSLOT MSG STATIC_SZ NCHUNK K_AHEAD RQ_DEPTH PROGRESS */

#define SQ_DEPTH 128u	  /* send queue depth */
#define CQ_DEPTH 512
#define NRD 16u		  /* read destination buffers (one per read iteration) */
#define NFAA 8u		  /* fetch-and-add result buffers */
#define RECV_TAG (1ull << 63)

/* remote region layout (all remote access) */
#define R_SLOTS 0
#define R_STATIC (R_SLOTS + NSLOT * BLK)
#define R_PROG (R_STATIC + STATIC_SZ) /* progress word: set by its owner, read by the peer */
#define R_FAA (R_PROG + 64)	      /* fetch-and-add counter: only the peer modifies it */
#define R_SIZE (R_STATIC + STATIC_SZ + 4096)

/* local region layout (local write only) */
#define L_WSRC 0
#define L_MSRC (L_WSRC + NSLOT * BLK)
#define L_RBUF (L_MSRC + NSLOT * MSG)
#define L_RDST (L_RBUF + RQ_DEPTH * MSG)
#define RDST_SZ (BLK + 64) /* chunk + progress word */
#define L_FRES (L_RDST + NRD * RDST_SZ)
#define L_SIZE (((L_FRES + NFAA * 8) + 4095) & ~(size_t)4095)

enum wrtype { W_WRITE, W_SEND, W_READ_CHUNK, W_READ_PROG, W_FAA, W_FINAL };
static const char *const wrname[] = {"RDMA_WRITE", "SEND_WITH_IMM", "RDMA_READ", "RDMA_READ", "ATOMIC_FETCH_AND_ADD",
				     "SEND_WITH_IMM"};

struct info {
	uint16_t lid;
	uint32_t qpn, psn;
	union ibv_gid gid;
	uint64_t addr;
	uint32_t rkey;
	uint32_t iters;
};

struct sqent {
	uint32_t iter;
	uint8_t type, signaled;
	uint16_t buf; /* read/FAA destination buffer */
};

/* options of its own */
static int o_gid, o_events;
static const char *o_dev;
static const struct own_opt own_opts[] = {
	{"--gid", &o_gid, NULL}, {"--events", &o_events, NULL}, {"--ib-dev", NULL, &o_dev}, {NULL, NULL, NULL}};

/* state of this side (beyond inflight_common.h's) */
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_comp_channel *chan;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *rmr, *lmr;
static struct info me, peer;

static uint64_t sq_next, sq_done; /* WR sequence numbers: next to post; all below sq_done are complete */
static struct sqent sq[SQ_DEPTH];
static uint64_t wsrc_seq[NSLOT], msrc_seq[NSLOT], rdst_seq[NRD], fres_seq[NFAA]; /* +1; 0 = never used */

/* ---- deterministic contents (the rest is in inflight_common.h) ----------------------------------- */

static inline uint64_t prog_val(int s, uint32_t i) /* h(S,i) */
{
	return gen(key(4, s, i), 0);
}

/* ---- completions --------------------------------------------------------------------------------- */

static void post_recv(uint32_t j)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(lreg + L_RBUF + (j % RQ_DEPTH) * MSG), .length = MSG,
			      .lkey = lmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = RECV_TAG | j, .sg_list = &sge, .num_sge = 1}, *bad;
	int rc = ibv_post_recv(qp, &wr, &bad);
	if (rc)
		fail("ibv_post_recv (message %u): %s", j, strerror(rc));
}

static void post_recvs(void)
{
	while (recv_posted <= o_iters && recv_posted < recv_done + K_AHEAD)
		post_recv(recv_posted++);
}

static void on_recv(const struct ibv_wc *wc)
{
	uint32_t j = (uint32_t)(wc->wr_id & ~RECV_TAG);
	if (wc->status != IBV_WC_SUCCESS) {
		cur_iter = j;
		fail("completion status %s opcode RECV (message %u, vendor_err 0x%x)", ibv_wc_status_str(wc->status), j,
		     wc->vendor_err);
	}
	if (j != recv_done)
		fail("receive completion for message %u, expected %u", j, recv_done);
	cur_iter = j;
	if (wc->opcode != IBV_WC_RECV || !(wc->wc_flags & IBV_WC_WITH_IMM))
		fail("receive %u: opcode %d flags 0x%x, expected RECV with immediate", j, wc->opcode, wc->wc_flags);
	if (ntohl(wc->imm_data) != j)
		fail("receive %u: immediate %u", j, ntohl(wc->imm_data));
	if (wc->byte_len != MSG)
		fail("receive %u: byte_len %u, expected %u", j, wc->byte_len, MSG);
	if (wc->qp_num != qp->qp_num)
		fail("receive %u: completion for another QP", j);
	check_msg(j, lreg + L_RBUF + (j % RQ_DEPTH) * MSG);
	if (j < o_iters) { /* the peer's RDMA write of iteration j was posted before its message j */
		const uint8_t *slot = rreg + R_SLOTS + (j % NSLOT) * BLK;
		long w = check(slot, BLK, K_WRITE(1 - side, j));
		if (w >= 0)
			fail("RDMA write of side %d, iteration %u, not visible when its message arrived (slot %u word %ld)",
			     1 - side, j, j % NSLOT, w);
		dig_recv = fnv(dig_recv, slot, BLK);
	}
	recv_done++;
	post_recvs();
}

static void on_send(const struct ibv_wc *wc)
{
	uint64_t seq = wc->wr_id;
	if (seq >= sq_next || seq < sq_done) {
		fail("send completion with unknown wr_id %" PRIu64 " (status %s, posted %" PRIu64 ", done %" PRIu64 ")", seq,
		     ibv_wc_status_str(wc->status), sq_next, sq_done);
	}
	struct sqent *e = &sq[seq % SQ_DEPTH];
	cur_iter = e->iter;
	if (wc->status != IBV_WC_SUCCESS)
		fail("completion status %s opcode %s (vendor_err 0x%x)", ibv_wc_status_str(wc->status), wrname[e->type],
		     wc->vendor_err);
	/* completions in posting order: everything between the last one and this one was unsignaled */
	for (uint64_t s = sq_done; s < seq; s++)
		if (sq[s % SQ_DEPTH].signaled) {
			cur_iter = sq[s % SQ_DEPTH].iter;
			fail("completion order: %s of iteration %u (seq %" PRIu64 ") completed before signaled %s (seq %" PRIu64 ")",
			     wrname[e->type], e->iter, seq, wrname[sq[s % SQ_DEPTH].type], s);
		}
	if (!e->signaled)
		fail("completion for unsignaled %s", wrname[e->type]);
	static const enum ibv_wc_opcode want[] = {IBV_WC_RDMA_WRITE, IBV_WC_SEND,     IBV_WC_RDMA_READ,
						  IBV_WC_RDMA_READ,  IBV_WC_FETCH_ADD, IBV_WC_SEND};
	if (wc->opcode != want[e->type])
		fail("%s completed with opcode %d", wrname[e->type], wc->opcode);
	uint32_t i = e->iter;
	switch (e->type) {
	case W_READ_CHUNK: {
		if (wc->byte_len != BLK)
			fail("RDMA read of the static area: byte_len %u", wc->byte_len);
		check_chunk(lreg + L_RDST + (size_t)e->buf * RDST_SZ, i, "RDMA read");
		break;
	}
	case W_READ_PROG: {
		uint64_t v;
		memcpy(&v, lreg + L_RDST + (size_t)e->buf * RDST_SZ + BLK, 8);
		if (wc->byte_len != 8)
			fail("RDMA read of the progress word: byte_len %u", wc->byte_len);
		if (v != prog_val(1 - side, i)) {
			uint32_t k;
			for (k = 0; k < o_iters + 8; k += 4)
				if (v == prog_val(1 - side, k))
					break;
			if (k < o_iters + 8)
				fail("RDMA read of side %d's progress word gave iteration %u's value, expected %u's", 1 - side, k,
				     i);
			fail("RDMA read of side %d's progress word: 0x%016" PRIx64 ", expected 0x%016" PRIx64, 1 - side, v,
			     prog_val(1 - side, i));
		}
		dig_read = fnv(dig_read, &v, 8);
		reads_ok++;
		break;
	}
	case W_FAA: {
		uint64_t v;
		memcpy(&v, lreg + L_FRES + (size_t)e->buf * 8, 8);
		if (wc->byte_len != 8)
			fail("fetch-and-add: byte_len %u", wc->byte_len);
		check_fetched(v, i, "fetch-and-add");
		break;
	}
	default: break;
	}
	sq_done = seq + 1;
}

static void on_wc(const struct ibv_wc *wc)
{
	uint32_t saved = cur_iter;
	if (wc->wr_id & RECV_TAG)
		on_recv(wc);
	else
		on_send(wc);
	cur_iter = saved;
}

static int drain(void)
{
	struct ibv_wc wc[16];
	int n = ibv_poll_cq(cq, 16, wc);
	if (n < 0)
		fail("ibv_poll_cq returned %d", n);
	for (int k = 0; k < n; k++)
		on_wc(&wc[k]);
	if (n)
		progressed();
	return n;
}

/* one round: process completions, or wait a little for some */
static void progress(const char *what)
{
	if (drain())
		return;
	if (!o_events) {
		for (int spin = 0; spin < 2048; spin++) {
			if (drain())
				return;
			if (spin % 64 == 63)
				sched_yield();
		}
		stalled(what, "send queue", sq_done, sq_next);
		return;
	}
	if (ibv_req_notify_cq(cq, 0))
		fail("ibv_req_notify_cq");
	if (drain())
		return;
	struct pollfd p = {.fd = chan->fd, .events = POLLIN};
	int r = poll(&p, 1, 100);
	if (r < 0 && errno != EINTR)
		fail("poll on the completion channel: %s", strerror(errno));
	if (r > 0) {
		struct ibv_cq *ecq;
		void *ectx;
		if (ibv_get_cq_event(chan, &ecq, &ectx))
			fail("ibv_get_cq_event");
		if (ecq != cq)
			fail("completion event for an unknown CQ");
		ibv_ack_cq_events(ecq, 1);
		return; /* the next round drains */
	}
	stalled(what, "send queue", sq_done, sq_next);
}

static void wait_msg(uint32_t j) /* until message j of the peer has been received and checked */
{
	while (recv_done <= j)
		progress("a message");
}

static void wait_seq(uint64_t s) /* until send WR s has completed */
{
	while (sq_done <= s)
		progress("a send completion");
}

/* ---- posting ------------------------------------------------------------------------------------- */

static uint64_t post(enum wrtype t, uint32_t i, int signaled, uint16_t buf, struct ibv_send_wr *wr)
{
	while (sq_next - sq_done >= SQ_DEPTH)
		progress("a send queue slot");
	uint64_t seq = sq_next;
	sq[seq % SQ_DEPTH] = (struct sqent){.iter = i, .type = (uint8_t)t, .signaled = (uint8_t)signaled, .buf = buf};
	wr->wr_id = seq;
	wr->next = NULL;
	if (signaled)
		wr->send_flags |= IBV_SEND_SIGNALED;
	struct ibv_send_wr *bad;
	int rc = ibv_post_send(qp, wr, &bad);
	if (rc)
		fail("ibv_post_send %s: %s", wrname[t], strerror(rc));
	sq_next++;
	return seq;
}

static void post_write(uint32_t i)
{
	unsigned sl = i % NSLOT;
	if (wsrc_seq[sl])
		wait_seq(wsrc_seq[sl] - 1); /* the source block of iteration i-64 has been sent */
	uint8_t *src = lreg + L_WSRC + (size_t)sl * BLK;
	fill(src, BLK, K_WRITE(side, i));
	struct ibv_sge sge = {.addr = (uintptr_t)src, .length = BLK, .lkey = lmr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};
	wr.wr.rdma.remote_addr = peer.addr + R_SLOTS + (uint64_t)sl * BLK;
	wr.wr.rdma.rkey = peer.rkey;
	wsrc_seq[sl] = post(W_WRITE, i, i % 8 == 7, 0, &wr) + 1;
}

static void post_msg(uint32_t i, enum wrtype t)
{
	unsigned sl = i % NSLOT;
	if (msrc_seq[sl])
		wait_seq(msrc_seq[sl] - 1);
	uint8_t *src = lreg + L_MSRC + (size_t)sl * MSG;
	fill(src, MSG, K_MSG(side, i));
	struct ibv_sge sge = {.addr = (uintptr_t)src, .length = MSG, .lkey = lmr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM, .imm_data = htonl(i)};
	msrc_seq[sl] = post(t, i, t == W_FINAL, 0, &wr) + 1;
}

static void post_reads(uint32_t i)
{
	unsigned b = (i / 4) % NRD;
	if (rdst_seq[b])
		wait_seq(rdst_seq[b] - 1); /* the buffer's previous reads have completed and been checked */
	uint8_t *d = lreg + L_RDST + (size_t)b * RDST_SZ;
	memset(d, 0, RDST_SZ);
	unsigned c = (i / 4) % NCHUNK;
	struct ibv_sge s1 = {.addr = (uintptr_t)d, .length = BLK, .lkey = lmr->lkey};
	struct ibv_send_wr w1 = {.sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_RDMA_READ};
	w1.wr.rdma.remote_addr = peer.addr + R_STATIC + (uint64_t)c * BLK;
	w1.wr.rdma.rkey = peer.rkey;
	post(W_READ_CHUNK, i, 1, (uint16_t)b, &w1);
	struct ibv_sge s2 = {.addr = (uintptr_t)(d + BLK), .length = 8, .lkey = lmr->lkey};
	struct ibv_send_wr w2 = {.sg_list = &s2, .num_sge = 1, .opcode = IBV_WR_RDMA_READ};
	w2.wr.rdma.remote_addr = peer.addr + R_PROG;
	w2.wr.rdma.rkey = peer.rkey;
	rdst_seq[b] = post(W_READ_PROG, i, 1, (uint16_t)b, &w2) + 1;
}

static void post_faa(uint32_t i)
{
	unsigned b = (i / 16) % NFAA;
	if (fres_seq[b])
		wait_seq(fres_seq[b] - 1);
	uint8_t *d = lreg + L_FRES + (size_t)b * 8;
	memset(d, 0xee, 8);
	struct ibv_sge sge = {.addr = (uintptr_t)d, .length = 8, .lkey = lmr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD};
	wr.wr.atomic.remote_addr = peer.addr + R_FAA;
	wr.wr.atomic.rkey = peer.rkey;
	wr.wr.atomic.compare_add = i;
	fres_seq[b] = post(W_FAA, i, 1, (uint16_t)b, &wr) + 1;
}

/* ---- setup --------------------------------------------------------------------------------------- */

#define INFO_LEN 128
static void exchange(int fd)
{
	char b[INFO_LEN], g[33];
	memset(b, 0, sizeof b);
	hex_put(g, me.gid.raw, 16);
	snprintf(b, sizeof b, "VI1 %04x %06x %06x %s %016" PRIx64 " %08x %u", me.lid, me.qpn, me.psn, g, me.addr, me.rkey,
		 me.iters);
	swap_info(fd, b, sizeof b);
	unsigned lid, qpn, psn, rkey, iters;
	uint64_t addr;
	if (sscanf(b, "VI1 %x %x %x %32s %" SCNx64 " %x %u", &lid, &qpn, &psn, g, &addr, &rkey, &iters) != 7 ||
	    strlen(g) != 32)
		die("bad connection info from the peer: '%.100s'", b);
	hex_get(peer.gid.raw, g, 16);
	peer.lid = (uint16_t)lid, peer.qpn = qpn, peer.psn = psn, peer.addr = addr, peer.rkey = rkey, peer.iters = iters;
	if (iters != o_iters)
		die("the peer runs %u iterations, this side %u", iters, o_iters);
}

static void setup_device(void)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || n < 1)
		die("no verbs device");
	struct ibv_device *dev = l[0];
	if (o_dev) {
		dev = NULL;
		for (int k = 0; k < n; k++)
			if (!strcmp(ibv_get_device_name(l[k]), o_dev))
				dev = l[k];
		if (!dev)
			die("no device %s", o_dev);
	}
	ctx = ibv_open_device(dev);
	if (!ctx)
		die("ibv_open_device %s: %s", ibv_get_device_name(dev), strerror(errno));
	ibv_free_device_list(l);
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa))
		die("ibv_query_port");
	if (pa.state != IBV_PORT_ACTIVE)
		die("port 1 is not active");
	me.lid = pa.lid;
	if (ibv_query_gid(ctx, 1, 0, &me.gid))
		die("ibv_query_gid");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd: %s", strerror(errno));
	alloc_regions(R_SIZE, R_STATIC, L_SIZE);
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	rmr = ibv_reg_mr(pd, rreg, R_SIZE, acc);
	lmr = ibv_reg_mr(pd, lreg, L_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!rmr || !lmr)
		die("ibv_reg_mr: %s", strerror(errno));
	if (o_events) {
		chan = ibv_create_comp_channel(ctx);
		if (!chan)
			die("ibv_create_comp_channel: %s", strerror(errno));
	}
	cq = ibv_create_cq(ctx, CQ_DEPTH, NULL, chan, 0);
	if (!cq)
		die("ibv_create_cq: %s", strerror(errno));
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = {.max_send_wr = SQ_DEPTH, .max_recv_wr = RQ_DEPTH, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = acc};
	int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		die("ibv_modify_qp to INIT: %s", strerror(rc));
	me.qpn = qp->qp_num;
	/* fixed PSNs close to the 24-bit wrap: a run crosses it (4 KiB writes are 4 packets at MTU 1024) */
	me.psn = 0xfff000u + (unsigned)side * 0x400u;
	me.addr = (uintptr_t)rreg;
	me.rkey = rmr->rkey;
	me.iters = o_iters;
}

static void connect_qp(void)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer.qpn,
		.rq_psn = peer.psn,
		.max_dest_rd_atomic = 4,
		.min_rnr_timer = 12,
		.ah_attr = {.dlid = peer.lid, .sl = 0, .src_path_bits = 0, .port_num = 1},
	};
	if (o_gid) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = peer.gid;
		a.ah_attr.grh.sgid_index = 0;
		a.ah_attr.grh.hop_limit = 1;
	}
	int rc = ibv_modify_qp(qp, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		die("ibv_modify_qp to RTR: %s", strerror(rc));
	struct ibv_qp_attr b = {.qp_state = IBV_QPS_RTS,
				.sq_psn = me.psn,
				.timeout = 14,
				.retry_cnt = 7,
				.rnr_retry = 7,
				.max_rd_atomic = 4};
	rc = ibv_modify_qp(qp, &b,
			   IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				   IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		die("ibv_modify_qp to RTS: %s", strerror(rc));
}

/* everything up to the first work request: device, objects, exchange, RTR/RTS, barrier; closes fd */
static void setup(int fd)
{
	setup_device();
	post_recvs(); /* receives may be posted in INIT: ready before the peer can send */
	exchange(fd);
	connect_qp();
	barrier(fd); /* both QPs are in RTS (so in RTR) before either side sends */
}

static void teardown(void)
{
	if (ibv_destroy_qp(qp))
		fail("ibv_destroy_qp");
	if (ibv_destroy_cq(cq))
		fail("ibv_destroy_cq");
	if (chan && ibv_destroy_comp_channel(chan))
		fail("ibv_destroy_comp_channel");
	if (ibv_dereg_mr(rmr) || ibv_dereg_mr(lmr))
		fail("ibv_dereg_mr");
	if (ibv_dealloc_pd(pd))
		fail("ibv_dealloc_pd");
	if (ibv_close_device(ctx))
		fail("ibv_close_device");
	free(rreg);
	free(lreg);
}

/* ---- the run ------------------------------------------------------------------------------------- */

static void set_prog(uint32_t i)
{
	uint64_t v = prog_val(side, i);
	__atomic_store_n((uint64_t *)(rreg + R_PROG), v, __ATOMIC_RELEASE);
}

static uint64_t run(void)
{
	const uint32_t n = o_iters;
	progressed(); /* the --timeout clock starts */
	for (uint32_t i = 0; i < n; i++) {
		cur_iter = i;
		progress_line(1, i);
		if (i % 4 == 0) {
			if (i >= 4)
				wait_msg(i - 3); /* the peer's READs of iteration i-4 have been served */
			set_prog(i);
		}
		post_write(i);
		post_msg(i, W_SEND);
		if (i % 4 == 0 || (side == 0 && i && i % PROGRESS == 0))
			wait_msg(i); /* the peer has set its progress word for iteration i */
		progress_line(0, i);
		if (i % 4 == 0)
			post_reads(i);
		if (i % 16 == 0)
			post_faa(i);
		while (drain())
			;
		if (o_delay_us)
			usleep(o_delay_us);
	}
	cur_iter = n;
	post_msg(n, W_FINAL);
	wait_msg(n);		/* all of the peer's operations on this side's memory are done */
	wait_seq(sq_next - 1);	/* all of this side's operations are done */
	uint32_t want_reads = 2 * ((n + 3) / 4), want_faa = (n + 15) / 16;
	if (reads_ok != want_reads || faa_ok != want_faa)
		fail("%u reads and %u fetch-and-adds checked, expected %u and %u", reads_ok, faa_ok, want_reads, want_faa);
	uint64_t c;
	memcpy(&c, rreg + R_FAA, 8);
	if (c != faa_before(n))
		fail("the counter is %" PRIu64 ", expected %" PRIu64, c, faa_before(n));
	return c;
}

static void finish(uint64_t counter)
{
	uint64_t d = fnv(digest_streams(), &counter, 8);
	teardown();
	final_line(d, counter);
}

int main(int argc, char **argv)
{
	int fd = start(argc, argv, "verbs_inflight",
		       "--iters N (2000) --delay-us U (200) --gid --events --timeout S (60) --ib-dev NAME", own_opts);
	setup(fd);
	finish(run());
	return 0;
}
