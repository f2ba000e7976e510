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
 * failed). Only classic verbs are used (no _ex verbs, no ibv_wr_*). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLK 4096u	  /* RDMA write block */
#define NSLOT 64u	  /* write slots in the region */
#define MSG 64u		  /* message size */
#define STATIC_SZ 65536u  /* static area the peer reads */
#define NCHUNK (STATIC_SZ / BLK)
#define K_AHEAD 16u	  /* receives posted ahead */
#define RQ_DEPTH 32u	  /* receive queue depth, receive buffers */
#define SQ_DEPTH 128u	  /* send queue depth */
#define CQ_DEPTH 512
#define NRD 16u		  /* read destination buffers (one per read iteration) */
#define NFAA 8u		  /* fetch-and-add result buffers */
#define PROGRESS 500u	  /* progress line interval */
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

/* options */
static unsigned o_iters = 2000, o_delay_us = 200, o_timeout_s = 60;
static int o_gid, o_events;
static const char *o_dev;

/* state of this side */
static int side;
static uint32_t cur_iter;
static pid_t child_pid;	  /* --fork parent: the child (side 1), 0 once reaped */
static int child_status; /* its wait status once reaped */

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_comp_channel *chan;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static uint8_t *rreg, *lreg;
static struct ibv_mr *rmr, *lmr;
static struct info me, peer;

static uint64_t sq_next, sq_done; /* WR sequence numbers: next to post; all below sq_done are complete */
static struct sqent sq[SQ_DEPTH];
static uint64_t wsrc_seq[NSLOT], msrc_seq[NSLOT], rdst_seq[NRD], fres_seq[NFAA]; /* +1; 0 = never used */
static uint32_t recv_posted, recv_done; /* next message to post a receive for / expected next */
static uint32_t reads_ok, faa_ok;
static uint64_t dig_recv = 0xcbf29ce484222325ull, dig_read = 0xcbf29ce484222325ull,
		dig_faa = 0xcbf29ce484222325ull;
static uint64_t stall_ns, last_ns;

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	char b[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	fprintf(stderr, "FAIL: %s at iteration %u\n", b, cur_iter);
	fflush(NULL);
	if (child_pid > 0) { /* --fork parent: do not leave the child behind */
		kill(child_pid, SIGKILL);
		waitpid(child_pid, NULL, 0);
	}
	_exit(1);
}

/* ---- deterministic contents ---------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint64_t key(unsigned kind, int s, uint64_t i)
{
	return ((uint64_t)kind << 56) ^ ((uint64_t)s << 48) ^ i;
}

static inline uint64_t gen(uint64_t k, uint64_t w)
{
	return mix64(mix64(k) + w);
}

static void fill(uint8_t *p, size_t len, uint64_t k)
{
	for (size_t w = 0; w < len / 8; w++) {
		uint64_t v = gen(k, w);
		memcpy(p + w * 8, &v, 8);
	}
}

/* index of the first differing 8-byte word, -1 if equal */
static long check(const uint8_t *p, size_t len, uint64_t k)
{
	for (size_t w = 0; w < len / 8; w++) {
		uint64_t v;
		memcpy(&v, p + w * 8, 8);
		if (v != gen(k, w))
			return (long)w;
	}
	return -1;
}

#define K_WRITE(s, i) key(1, s, i)
#define K_MSG(s, i) key(2, s, i)
#define K_STATIC(s) key(3, s, 0)
static inline uint64_t prog_val(int s, uint32_t i)
{
	return gen(key(4, s, i), 0);
}
/* what a fetch-and-add of iteration i (i%16 == 0) fetches: the sum of the earlier adds */
static inline uint64_t faa_before(uint32_t i)
{
	uint64_t m = (i + 15) / 16; /* adds before i: 0, 16, ..., 16(m-1) */
	return 16 * (m * (m - 1) / 2);
}

static inline uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t j = 0; j < n; j++) {
		h ^= b[j];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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
	const uint8_t *m = lreg + L_RBUF + (j % RQ_DEPTH) * MSG;
	long w = check(m, MSG, K_MSG(1 - side, j));
	if (w >= 0)
		fail("message %u from side %d: word %ld wrong", j, 1 - side, w);
	dig_recv = fnv(dig_recv, &j, sizeof j);
	dig_recv = fnv(dig_recv, m, MSG);
	if (j < o_iters) { /* the peer's RDMA write of iteration j was posted before its message j */
		const uint8_t *slot = rreg + R_SLOTS + (j % NSLOT) * BLK;
		w = check(slot, BLK, K_WRITE(1 - side, j));
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
		const uint8_t *d = lreg + L_RDST + (size_t)e->buf * RDST_SZ;
		unsigned c = (i / 4) % NCHUNK;
		if (wc->byte_len != BLK)
			fail("RDMA read of the static area: byte_len %u", wc->byte_len);
		for (size_t w = 0; w < BLK / 8; w++) {
			uint64_t v;
			memcpy(&v, d + w * 8, 8);
			if (v != gen(K_STATIC(1 - side), c * (BLK / 8) + w))
				fail("RDMA read of side %d's static area, chunk %u: word %zu wrong", 1 - side, c, w);
		}
		dig_read = fnv(dig_read, d, BLK);
		reads_ok++;
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
		if (v != faa_before(i))
			fail("fetch-and-add on side %d's counter fetched %" PRIu64 ", expected %" PRIu64, 1 - side, v,
			     faa_before(i));
		dig_faa = fnv(dig_faa, &v, 8);
		faa_ok++;
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
	if (n) {
		stall_ns = 0;
		last_ns = now_ns();
	}
	return n;
}

/* time without progress; a process stopped (checkpoint) or descheduled for long does not count */
static void stalled(const char *what)
{
	uint64_t t = now_ns(), d = t - last_ns;
	last_ns = t;
	stall_ns += d > 200000000ull ? 200000000ull : d;
	if (stall_ns > (uint64_t)o_timeout_s * 1000000000ull)
		fail("no progress for %u s while waiting for %s (received %u messages, send queue %" PRIu64 "/%" PRIu64 ")",
		     o_timeout_s, what, recv_done, sq_done, sq_next);
	if (child_pid > 0) {
		int st;
		pid_t r = waitpid(child_pid, &st, WNOHANG);
		if (r == child_pid) {
			child_pid = 0;
			child_status = st;
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				fail("side 1 (child) failed (wait status 0x%x) while waiting for %s", st, what);
		}
	}
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
		stalled(what);
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
	stalled(what);
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

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
	char b[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	fprintf(stderr, "FAIL: %s (side %d, setup)\n", b, side);
	fflush(NULL);
	if (child_pid > 0) {
		kill(child_pid, SIGKILL);
		waitpid(child_pid, NULL, 0);
	}
	_exit(1);
}

static void xfer(int fd, void *p, size_t n, int wr)
{
	size_t off = 0;
	while (off < n) {
		ssize_t r = wr ? write(fd, (char *)p + off, n - off) : read(fd, (char *)p + off, n - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("connection to the peer: %s", r < 0 ? strerror(errno) : "closed");
		off += (size_t)r;
	}
}

#define INFO_LEN 128
static void exchange(int fd)
{
	char b[INFO_LEN], g[33];
	memset(b, 0, sizeof b);
	for (int k = 0; k < 16; k++)
		sprintf(g + 2 * k, "%02x", me.gid.raw[k]);
	snprintf(b, sizeof b, "VI1 %04x %06x %06x %s %016" PRIx64 " %08x %u", me.lid, me.qpn, me.psn, g, me.addr, me.rkey,
		 me.iters);
	xfer(fd, b, sizeof b, 1);
	xfer(fd, b, sizeof b, 0);
	b[INFO_LEN - 1] = 0;
	unsigned lid, qpn, psn, rkey, iters;
	uint64_t addr;
	if (sscanf(b, "VI1 %x %x %x %32s %" SCNx64 " %x %u", &lid, &qpn, &psn, g, &addr, &rkey, &iters) != 7 ||
	    strlen(g) != 32)
		die("bad connection info from the peer: '%.100s'", b);
	for (int k = 0; k < 16; k++) {
		unsigned v;
		sscanf(g + 2 * k, "%2x", &v);
		peer.gid.raw[k] = (uint8_t)v;
	}
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
	rreg = aligned_alloc(4096, R_SIZE);
	lreg = aligned_alloc(4096, L_SIZE);
	if (!rreg || !lreg)
		die("out of memory");
	memset(rreg, 0, R_SIZE);
	memset(lreg, 0, L_SIZE);
	fill(rreg + R_STATIC, STATIC_SZ, K_STATIC(side));
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
	char c = 'R'; /* both QPs are in RTS (so in RTR) before either side sends */
	xfer(fd, &c, 1, 1);
	xfer(fd, &c, 1, 0);
	if (c != 'R')
		die("bad barrier byte from the peer");
	close(fd);
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
	last_ns = now_ns();
	for (uint32_t i = 0; i < n; i++) {
		cur_iter = i;
		if (side == 1 && i && i % PROGRESS == 0) {
			printf("side 1 iter %u\n", i);
			fflush(stdout);
		}
		if (i % 4 == 0) {
			if (i >= 4)
				wait_msg(i - 3); /* the peer's READs of iteration i-4 have been served */
			set_prog(i);
		}
		post_write(i);
		post_msg(i, W_SEND);
		if (i % 4 == 0 || (side == 0 && i && i % PROGRESS == 0))
			wait_msg(i); /* the peer has set its progress word for iteration i */
		if (side == 0 && i && i % PROGRESS == 0) {
			printf("side 0 iter %u\n", i);
			fflush(stdout);
		}
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
	uint64_t d = 0xcbf29ce484222325ull;
	d = fnv(d, &dig_recv, 8);
	d = fnv(d, &dig_read, 8);
	d = fnv(d, &dig_faa, 8);
	d = fnv(d, &counter, 8);
	teardown();
	if (side == 0 && child_pid > 0) { /* --fork: the child's line first */
		int st;
		if (waitpid(child_pid, &st, 0) != child_pid)
			fail("waitpid: %s", strerror(errno));
		child_pid = 0;
		child_status = st;
	}
	if (side == 0 && child_status && (!WIFEXITED(child_status) || WEXITSTATUS(child_status))) {
		fprintf(stderr, "FAIL: side 1 (child) failed (wait status 0x%x) at iteration %u\n", child_status, o_iters);
		exit(1);
	}
	printf("side %d iters %u digest 0x%016llx counter %llu\n", side, o_iters, (unsigned long long)d,
	       (unsigned long long)counter);
	fflush(stdout);
}

/* ---- connections --------------------------------------------------------------------------------- */

static int tcp_server(const char *port)
{
	struct addrinfo hints = {.ai_flags = AI_PASSIVE, .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
	int rc = getaddrinfo(NULL, port, &hints, &res);
	if (rc)
		die("getaddrinfo port %s: %s", port, gai_strerror(rc));
	int ls = -1;
	for (struct addrinfo *t = res; t; t = t->ai_next) {
		/* prefer a dual-stack IPv6 socket, fall back to whatever binds */
		ls = socket(t->ai_family, t->ai_socktype, t->ai_protocol);
		if (ls < 0)
			continue;
		int one = 1, zero = 0;
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (t->ai_family == AF_INET6)
			setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
		if (!bind(ls, t->ai_addr, t->ai_addrlen) && !listen(ls, 1))
			break;
		close(ls);
		ls = -1;
	}
	freeaddrinfo(res);
	if (ls < 0)
		die("cannot listen on port %s", port);
	int fd;
	while ((fd = accept(ls, NULL, NULL)) < 0 && errno == EINTR)
		;
	if (fd < 0)
		die("accept: %s", strerror(errno));
	close(ls);
	return fd;
}

static int tcp_client(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc)
		die("getaddrinfo %s:%s: %s", host, port, gai_strerror(rc));
	for (int attempt = 0; attempt < 100; attempt++) { /* the server may not listen yet: 10 s */
		for (struct addrinfo *t = res; t; t = t->ai_next) {
			int fd = socket(t->ai_family, t->ai_socktype, t->ai_protocol);
			if (fd < 0)
				continue;
			if (!connect(fd, t->ai_addr, t->ai_addrlen)) {
				freeaddrinfo(res);
				return fd;
			}
			close(fd);
		}
		usleep(100000);
	}
	freeaddrinfo(res);
	die("cannot connect to %s:%s", host, port);
}

static void usage(void)
{
	fprintf(stderr, "usage: verbs_inflight --fork [opts]\n"
			"       verbs_inflight --server PORT [opts]\n"
			"       verbs_inflight --client HOST PORT [opts]\n"
			"opts: --iters N (2000) --delay-us U (200) --gid --events --timeout S (60) --ib-dev NAME\n");
	exit(2);
}

static unsigned num(const char *s, unsigned lo)
{
	char *e;
	unsigned long v = strtoul(s, &e, 10);
	if (!*s || *e || v < lo || v > 100000000ul)
		usage();
	return (unsigned)v;
}

int main(int argc, char **argv)
{
	enum { NONE, FORK, SERVER, CLIENT } mode = NONE;
	const char *host = NULL, *port = NULL;
	for (int k = 1; k < argc; k++) {
		const char *a = argv[k];
		if (!strcmp(a, "--fork") && mode == NONE) {
			mode = FORK;
		} else if (!strcmp(a, "--server") && mode == NONE && k + 1 < argc) {
			mode = SERVER;
			port = argv[++k];
		} else if (!strcmp(a, "--client") && mode == NONE && k + 2 < argc) {
			mode = CLIENT;
			host = argv[++k];
			port = argv[++k];
		} else if (!strcmp(a, "--iters") && k + 1 < argc) {
			o_iters = num(argv[++k], 1);
		} else if (!strcmp(a, "--delay-us") && k + 1 < argc) {
			o_delay_us = num(argv[++k], 0);
		} else if (!strcmp(a, "--timeout") && k + 1 < argc) {
			o_timeout_s = num(argv[++k], 1);
		} else if (!strcmp(a, "--ib-dev") && k + 1 < argc) {
			o_dev = argv[++k];
		} else if (!strcmp(a, "--gid")) {
			o_gid = 1;
		} else if (!strcmp(a, "--events")) {
			o_events = 1;
		} else {
			usage();
		}
	}
	if (mode == NONE)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	int fd;
	if (mode == FORK) {
		int sp[2];
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp))
			die("socketpair: %s", strerror(errno));
		fflush(NULL);
		pid_t p = fork();
		if (p < 0)
			die("fork: %s", strerror(errno));
		if (p == 0) {
			close(sp[0]);
			side = 1;
			fd = sp[1];
		} else {
			close(sp[1]);
			side = 0;
			child_pid = p;
			fd = sp[0];
		}
	} else if (mode == SERVER) {
		side = 0;
		fd = tcp_server(port);
	} else {
		side = 1;
		fd = tcp_client(host, port);
	}
	setup(fd);
	uint64_t c = run();
	finish(c);
	return 0;
}
