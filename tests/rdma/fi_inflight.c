/* fi_inflight: a deterministic, self-checking libfabric (fi_*) program with many operations in flight,
 * meant to be checkpointed at random moments, SIGKILLed and restarted by a transparent checkpointer. The
 * libfabric counterpart of verbs_inflight.c, same structure and the same stdout rules.
 *
 * Two processes, one reliable-datagram endpoint (FI_EP_RDM) each:
 *   fi_inflight --fork [opts]              fork; parent = side 0, child = side 1 (each calls fi_getinfo
 *                                          after the fork; addresses are exchanged over a socketpair)
 *   fi_inflight --server PORT [opts]       side 0, waits for the client on TCP PORT
 *   fi_inflight --client HOST PORT [opts]  side 1
 * opts: --prov NAME (tcp; also "tcp;ofi_rxm", "sockets", and "shm" for two processes on one host)
 *       --iters N (2000)  --delay-us U (200, a usleep per iteration)  --timeout S (60: fail after S seconds
 *       without progress; time the process spends stopped does not count)  --verbose (what the provider
 *       granted, on stderr)
 *
 * Setup. fi_getinfo(FI_VERSION(1,17)) with ep_type FI_EP_RDM, caps FI_MSG|FI_RMA|FI_ATOMIC (plus
 * FI_RMA_EVENT, dropped if refused), mode FI_CONTEXT (every operation gets a struct fi_context2 of ours),
 * mr_mode FI_MR_LOCAL|FI_MR_VIRT_ADDR|FI_MR_ALLOCATED|FI_MR_PROV_KEY|FI_MR_ENDPOINT, tx/rx msg_order
 * FI_ORDER_SAS|FI_ORDER_SAW (SAW dropped if refused; SAS is required), prov_name from --prov; the first
 * info returned is used, and whatever mr_mode bits it keeps are honoured:
 *   FI_MR_LOCAL      the local buffers are registered too and their fi_mr_desc passed to every operation
 *                    (otherwise the descriptors are NULL and only the remote region is registered);
 *   FI_MR_VIRT_ADDR  the peer addresses this side's region by virtual address, otherwise by offset;
 *   FI_MR_PROV_KEY   the key is fi_mr_key's, otherwise a requested one;
 *   FI_MR_ENDPOINT   the MRs are bound to the endpoint (fi_mr_bind) and enabled (fi_mr_enable).
 * Objects: fabric, domain, an AV (FI_AV_TABLE), one CQ (FI_CQ_FORMAT_DATA) bound FI_TRANSMIT|FI_RECV (no
 * selective completion: every operation completes there), a counter bound FI_WRITE|FI_READ (the local
 * completions of RMA writes, reads and fetching atomics: checked against the number issued at the end), a
 * second counter bound FI_REMOTE_WRITE|FI_REMOTE_READ if FI_RMA_EVENT was granted (the peer's operations
 * on this side's memory: checked at the end too), the endpoint, and MRs.
 * The endpoint name (fi_getname), the region's key and address and the iteration count are exchanged
 * once over the socket, the peer is inserted into the AV, a barrier byte is exchanged, and the socket is
 * closed before the first fi_* data operation: during the run the two sides talk only libfabric.
 * The run starts with a hello: each side posts its receives (the hello's first), sends a 64-byte hello
 * (fi_send, no remote CQ data) and waits for the peer's. So no message of the run reaches a side before
 * its receive is posted: the sockets provider drops the FI_REMOTE_CQ_DATA flag from the completion of a
 * message that arrived unexpected (before its receive was posted); the hello may arrive so.
 *
 * Every iteration i, both sides alike (S = own side, P = the peer):
 *   1. fi_write of 4 KiB, contents f(S,i), into slot i%64 of the peer's 256 KiB slot area;
 *   2. a 64-byte message m(S,i): fi_senddata with immediate data i if the domain carries remote CQ data
 *      (cq_data_size >= 4), fi_send otherwise. The receiver checks the message (and the data). Only if
 *      the provider grants FI_ORDER_SAW (send after write) on both sides does it also check, on receiving
 *      message i, that slot i%64 already holds f(P,i); otherwise the slots are checked at the end only;
 *   3. i%4 == 0: fi_read of a 4 KiB chunk ((i/4)%16) of the peer's static 64 KiB area (filled once with
 *      s(P), never written) and check it; then wait for the peer's message i: this keeps the two sides
 *      within four iterations of each other (so a slot is never overwritten before it is checked, and
 *      the progress lines come in a fixed order);
 *   4. i%16 == 0: fi_fetch_atomic FI_SUM FI_UINT64 of i on the 8-byte counter in the peer's region; the
 *      fetched value must be the sum of the earlier adds (only the peer adds to one's counter, and a side
 *      posts an atomic only after its previous one completed, so no atomic ordering is assumed).
 * Receives are posted K=16 messages ahead (32 receive buffers). Nothing is waited for but: at most 64
 * operations of this side outstanding, a source/destination buffer's previous operation before it is
 * reused, the previous atomic, the protocol wait of step 3, and -FI_EAGAIN (the CQ is progressed and the
 * post retried). Completions are taken by busy polling fi_cq_read (a sched_yield now and then), in any
 * order (comp_order is not relied upon); receive completions are processed in message order.
 * At the end, once all its operations completed, each side sends message N ("my operations on your memory
 * are done") and waits for the peer's; then it checks the 64 slots (each holds the last f(P,i) written
 * there), the reads and atomics done, its counter (the sum of all the peer's adds), the counter object
 * (= RMA operations issued) and the remote counter object if any (= the peer's). Then message N+1 ("bye",
 * sent once message N completed), waited for on both sides, after which nothing of either side is
 * outstanding and the endpoint may be closed.
 * A digest (FNV-1a 64) over everything received, read and fetched (four streams: the messages from the
 * hello on, in order; the read chunks in order; the fetched values in order; the slot area at the end) is
 * printed at the end, one line per side:  side S iters N digest 0x... counter C
 * plus `side S iter I` every 500 iterations, in an order the protocol fixes (side 1 prints before it posts
 * message I, side 0 after receiving it), so stdout is identical between runs with the same arguments,
 * in --fork mode too (the parent prints its final line after the child exited), and between providers.
 * Failures: `FAIL: <what> at iteration i` on stderr (with fi_strerror / fi_cq_strerror text), exit 1 (the
 * parent of --fork also when the child failed).
 * What does not depend on libfabric (contents, digest, options, sockets, --fork, failures, the --timeout
 * rule) is shared with verbs_inflight.c in inflight_common.h. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inflight_common.h" /* BLK NSLOT MSG STATIC_SZ NCHUNK K_AHEAD RQ_DEPTH PROGRESS */

#define TXQ 64u		  /* operations of this side outstanding at most */
#define CQ_DEPTH 256
#define NRD 16u		  /* read destination buffers */
#define NFAA 4u		  /* atomic operand/result buffers */
#define NAME_MAX_LEN 256u /* endpoint name */

/* remote region layout (the peer writes, reads and adds) */
#define R_SLOTS 0
#define R_STATIC (R_SLOTS + NSLOT * BLK)
#define R_FAA (R_STATIC + STATIC_SZ) /* the counter: only the peer modifies it */
#define R_SIZE (R_STATIC + STATIC_SZ + 4096)

/* local region layout (sources and destinations of this side's operations) */
#define L_WSRC 0
#define L_MSRC (L_WSRC + NSLOT * BLK)
#define L_RBUF (L_MSRC + NSLOT * MSG)
#define L_RDST (L_RBUF + RQ_DEPTH * MSG)
#define L_FOP (L_RDST + NRD * BLK) /* per atomic buffer: operand, then result */
#define L_HELLO (L_FOP + NFAA * 16) /* the hello received, the hello sent */
#define L_SIZE (((L_HELLO + 2 * MSG) + 4095) & ~(size_t)4095)
#define HELLO 0xffffffffu /* the hello's message index (contents m(S,HELLO)) */

enum optype { T_WRITE, T_SEND, T_READ, T_FAA, T_FINAL, T_BYE };
static const char *const opname[] = {"fi_write", "message", "fi_read", "fi_fetch_atomic", "final message",
				     "bye message"};

struct txent {
	struct fi_context2 ctx; /* first: the operation's context */
	uint64_t seq;
	uint32_t iter;
	uint8_t type, busy;
	uint16_t buf; /* read / atomic buffer */
};

struct rxent {
	struct fi_context2 ctx;
	uint32_t j; /* message index */
	uint8_t posted, done;
	uint64_t flags, data;
	size_t len;
};

struct info {
	uint64_t key, addr;
	uint32_t iters;
	size_t namelen;
	uint8_t name[NAME_MAX_LEN];
};

/* options of its own */
static const char *o_prov = "tcp";
static int o_verbose;
static const struct own_opt own_opts[] = {
	{"--prov", NULL, &o_prov}, {"--verbose", &o_verbose, NULL}, {NULL, NULL, NULL}};

/* state of this side (beyond inflight_common.h's) */
static struct fi_info *fi;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_cq *cq;
static struct fid_cntr *cntr, *rcntr; /* local RMA completions; the peer's RMA on this side (optional) */
static struct fid_ep *ep;
static struct fid_mr *rmr, *lmr;
static void *ldesc; /* fi_mr_desc of the local region if FI_MR_LOCAL, else NULL */
static fi_addr_t peer_fa;
static struct info me, peer;
static int use_data, saw_ordered;
static uint64_t mr_mode;

static struct txent txq[TXQ];
static struct rxent rxq[RQ_DEPTH];
static struct fi_context2 hello_rctx, hello_sctx;
static int hello_rx, hello_tx; /* the peer's hello received / this side's completed */
static uint64_t sq_next, sq_low; /* operation sequence numbers: next to post; all below sq_low are complete */
static uint64_t wsrc_seq[NSLOT], msrc_seq[NSLOT], rdst_seq[NRD]; /* +1; 0 = never used */
static uint64_t faa_seq;					  /* the last atomic, +1 */
static uint64_t rma_issued;
static uint64_t dig_slots = FNV_INIT; /* the fourth digest stream */

/* ---- deterministic contents (the rest is in inflight_common.h) ----------------------------------- */

/* RMA operations (writes, reads, atomics) a side issues in n iterations */
static inline uint64_t rma_ops(uint32_t n)
{
	return (uint64_t)n + (n + 3) / 4 + (n + 15) / 16;
}

/* ---- completions --------------------------------------------------------------------------------- */

static void post_recvs(void)
{
	static int busy; /* not re-entered from a progress call of its own */
	if (busy)
		return;
	busy = 1;
	while (recv_posted <= o_iters + 1 && recv_posted < recv_done + K_AHEAD) {
		uint32_t j = recv_posted;
		struct rxent *r = &rxq[j % RQ_DEPTH];
		if (r->posted)
			fail("receive buffer %u still in use for message %u", j % RQ_DEPTH, r->j);
		*r = (struct rxent){.j = j, .posted = 1};
		memset(lreg + L_RBUF + (j % RQ_DEPTH) * MSG, 0, MSG);
		ssize_t rc = fi_recv(ep, lreg + L_RBUF + (j % RQ_DEPTH) * MSG, MSG, ldesc, FI_ADDR_UNSPEC, &r->ctx);
		if (rc == -FI_EAGAIN) { /* retried on the next progress call */
			r->posted = 0;
			break;
		}
		if (rc)
			fail("fi_recv (message %u): %s", j, fi_strerror((int)-rc));
		recv_posted++;
	}
	busy = 0;
}

static void check_slot(uint32_t sl, uint32_t i, const char *when)
{
	const uint8_t *slot = rreg + R_SLOTS + (size_t)sl * BLK;
	long w = check(slot, BLK, K_WRITE(1 - side, i));
	if (w >= 0) {
		uint64_t v;
		memcpy(&v, slot + w * 8, 8);
		fail("fi_write of side %d, iteration %u, not in slot %u %s (word %ld is 0x%016" PRIx64 ")", 1 - side, i,
		     sl, when, w, v);
	}
}

/* message j, its completion taken: check it, fold it into the digest */
static void on_msg(uint32_t j)
{
	struct rxent *r = &rxq[j % RQ_DEPTH];
	uint32_t saved = cur_iter;
	cur_iter = j;
	if (!(r->flags & FI_RECV))
		fail("receive %u: completion flags 0x%" PRIx64 " without FI_RECV", j, r->flags);
	if (r->len != MSG)
		fail("receive %u: length %zu, expected %u", j, r->len, MSG);
	if (use_data) {
		if (!(r->flags & FI_REMOTE_CQ_DATA))
			fail("receive %u: no remote CQ data (flags 0x%" PRIx64 ")", j, r->flags);
		if (r->data != j)
			fail("receive %u: remote CQ data %" PRIu64, j, r->data);
	}
	check_msg(j, lreg + L_RBUF + (j % RQ_DEPTH) * MSG);
	if (saw_ordered && j < o_iters) /* the peer's fi_write of iteration j was posted before its message j */
		check_slot(j % NSLOT, j, "when its message arrived (FI_ORDER_SAW)");
	r->posted = 0;
	cur_iter = saved;
}

static void on_recv(struct rxent *r, const struct fi_cq_data_entry *e)
{
	if (!r->posted || r->done || r->j < recv_done || r->j >= recv_posted)
		fail("receive completion for buffer %ld not expected (message %u, posted %u, done %u)", (long)(r - rxq), r->j,
		     recv_posted, recv_done);
	r->done = 1;
	r->flags = e->flags;
	r->len = e->len;
	r->data = e->data;
	/* in message order, whatever order the completions come in */
	while (recv_done < recv_posted && rxq[recv_done % RQ_DEPTH].done) {
		on_msg(recv_done);
		recv_done++;
	}
}

static void on_send(struct txent *t, const struct fi_cq_data_entry *e)
{
	if (!t->busy)
		fail("completion for operation slot %ld, which is not in use (flags 0x%" PRIx64 ")", (long)(t - txq), e->flags);
	uint32_t saved = cur_iter, i = t->iter;
	cur_iter = i;
	static const uint64_t want[] = {FI_WRITE, FI_SEND, FI_READ, FI_ATOMIC, FI_SEND, FI_SEND};
	if (!(e->flags & want[t->type]) || (e->flags & FI_RECV))
		fail("%s completed with flags 0x%" PRIx64, opname[t->type], e->flags);
	switch (t->type) {
	case T_READ:
		check_chunk(lreg + L_RDST + (size_t)t->buf * BLK, i, "fi_read");
		break;
	case T_FAA: {
		uint64_t v;
		memcpy(&v, lreg + L_FOP + (size_t)t->buf * 16 + 8, 8);
		check_fetched(v, i, "fi_fetch_atomic");
		break;
	}
	default: break;
	}
	t->busy = 0;
	while (sq_low < sq_next && !txq[sq_low % TXQ].busy)
		sq_low++;
	cur_iter = saved;
}

static void on_hello(int recv, const struct fi_cq_data_entry *e)
{
	if (!recv) {
		if (hello_tx || !(e->flags & FI_SEND) || (e->flags & FI_RECV))
			fail("hello sent: unexpected completion (flags 0x%" PRIx64 ")", e->flags);
		hello_tx = 1;
		return;
	}
	const uint8_t *m = lreg + L_HELLO;
	if (hello_rx || !(e->flags & FI_RECV) || e->len != MSG)
		fail("hello received: unexpected completion (flags 0x%" PRIx64 ", length %zu)", e->flags, e->len);
	long w = check(m, MSG, K_MSG(1 - side, HELLO));
	if (w >= 0)
		fail("hello from side %d: word %ld wrong", 1 - side, w);
	dig_recv = fnv(dig_recv, m, MSG);
	hello_rx = 1;
}

static void on_error(void)
{
	struct fi_cq_err_entry err;
	memset(&err, 0, sizeof err);
	ssize_t rc = fi_cq_readerr(cq, &err, 0);
	if (rc < 0)
		fail("fi_cq_readerr: %s", fi_strerror((int)-rc));
	const char *what = "an unknown operation";
	char b[64];
	if (err.op_context >= (void *)txq && err.op_context < (void *)(txq + TXQ)) {
		struct txent *t = (struct txent *)err.op_context;
		cur_iter = t->iter;
		what = opname[t->type];
	} else if (err.op_context >= (void *)rxq && err.op_context < (void *)(rxq + RQ_DEPTH)) {
		struct rxent *r = (struct rxent *)err.op_context;
		cur_iter = r->j;
		snprintf(b, sizeof b, "fi_recv of message %u", r->j);
		what = b;
	} else if (err.op_context == &hello_rctx || err.op_context == &hello_sctx) {
		what = err.op_context == &hello_rctx ? "fi_recv of the hello" : "fi_send of the hello";
	}
	fail("completion error on %s: %s (%s, prov_errno %d, flags 0x%" PRIx64 ")", what, fi_strerror(err.err),
	     fi_cq_strerror(cq, err.prov_errno, err.err_data, NULL, 0), err.prov_errno, err.flags);
}

static int drain(void)
{
	struct fi_cq_data_entry e[16];
	ssize_t n = fi_cq_read(cq, e, 16);
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL)
		on_error();
	if (n < 0)
		fail("fi_cq_read: %s", fi_strerror((int)-n));
	for (ssize_t k = 0; k < n; k++) {
		void *c = e[k].op_context;
		if (c >= (void *)txq && c < (void *)(txq + TXQ))
			on_send((struct txent *)c, &e[k]);
		else if (c >= (void *)rxq && c < (void *)(rxq + RQ_DEPTH))
			on_recv((struct rxent *)c, &e[k]);
		else if (c == &hello_rctx || c == &hello_sctx)
			on_hello(c == &hello_rctx, &e[k]);
		else
			fail("completion with unknown context %p (flags 0x%" PRIx64 ")", c, e[k].flags);
	}
	if (n)
		progressed();
	return (int)n;
}

/* one round: process completions, or poll a little for some (fi_cq_read also drives the provider) */
static void progress(const char *what)
{
	int n = drain();
	post_recvs();
	if (n)
		return;
	for (int spin = 0; spin < 2048; spin++) {
		if (drain()) {
			post_recvs();
			return;
		}
		if (spin % 64 == 63)
			sched_yield();
	}
	stalled(what, "operations", sq_low, sq_next);
}

static void wait_msg(uint32_t j) /* until message j of the peer has been received and checked */
{
	while (recv_done <= j)
		progress("a message");
}

static int op_done(uint64_t s)
{
	return s < sq_low || !txq[s % TXQ].busy;
}

static void wait_seq(uint64_t s) /* until operation s has completed */
{
	while (!op_done(s))
		progress("a completion");
}

static void wait_all(void)
{
	while (sq_low < sq_next)
		progress("the completion of all operations");
}

/* ---- posting ------------------------------------------------------------------------------------- */

/* a slot for the next operation; the caller posts it with &t->ctx and calls posted() */
static struct txent *tx_slot(enum optype type, uint32_t i, uint16_t buf)
{
	while (sq_next - sq_low >= TXQ)
		progress("an operation slot");
	struct txent *t = &txq[sq_next % TXQ];
	if (t->busy)
		fail("operation slot %u busy", (unsigned)(sq_next % TXQ));
	memset(&t->ctx, 0, sizeof t->ctx);
	t->seq = sq_next;
	t->iter = i;
	t->type = (uint8_t)type;
	t->buf = buf;
	return t;
}

/* rc of the post: 1 = posted, 0 = -FI_EAGAIN (progress made, post again), else fail */
static int posted(struct txent *t, ssize_t rc, const char *call)
{
	if (rc == -FI_EAGAIN) {
		progress("room to post");
		return 0;
	}
	if (rc && !strcmp(call, opname[t->type]))
		fail("%s: %s", call, fi_strerror((int)-rc));
	if (rc)
		fail("%s (%s): %s", call, opname[t->type], fi_strerror((int)-rc));
	t->busy = 1;
	sq_next++;
	return 1;
}

static void post_write(uint32_t i)
{
	unsigned sl = i % NSLOT;
	if (wsrc_seq[sl])
		wait_seq(wsrc_seq[sl] - 1); /* the source block of iteration i-64 has been sent */
	uint8_t *src = lreg + L_WSRC + (size_t)sl * BLK;
	fill(src, BLK, K_WRITE(side, i));
	struct txent *t = tx_slot(T_WRITE, i, 0);
	while (!posted(t, fi_write(ep, src, BLK, ldesc, peer_fa, peer.addr + R_SLOTS + (uint64_t)sl * BLK, peer.key,
				   &t->ctx),
		       "fi_write"))
		;
	wsrc_seq[sl] = t->seq + 1;
	rma_issued++;
}

static void post_msg(uint32_t i, enum optype type)
{
	unsigned sl = i % NSLOT;
	if (msrc_seq[sl])
		wait_seq(msrc_seq[sl] - 1);
	uint8_t *src = lreg + L_MSRC + (size_t)sl * MSG;
	fill(src, MSG, K_MSG(side, i));
	struct txent *t = tx_slot(type, i, 0);
	if (use_data)
		while (!posted(t, fi_senddata(ep, src, MSG, ldesc, i, peer_fa, &t->ctx), "fi_senddata"))
			;
	else
		while (!posted(t, fi_send(ep, src, MSG, ldesc, peer_fa, &t->ctx), "fi_send"))
			;
	msrc_seq[sl] = t->seq + 1;
}

static void post_read(uint32_t i)
{
	unsigned b = (i / 4) % NRD;
	if (rdst_seq[b])
		wait_seq(rdst_seq[b] - 1); /* the buffer's previous read has completed and been checked */
	uint8_t *d = lreg + L_RDST + (size_t)b * BLK;
	memset(d, 0, BLK);
	unsigned c = (i / 4) % NCHUNK;
	struct txent *t = tx_slot(T_READ, i, (uint16_t)b);
	while (!posted(t, fi_read(ep, d, BLK, ldesc, peer_fa, peer.addr + R_STATIC + (uint64_t)c * BLK, peer.key,
				  &t->ctx),
		       "fi_read"))
		;
	rdst_seq[b] = t->seq + 1;
	rma_issued++;
}

static void post_faa(uint32_t i)
{
	if (faa_seq)
		wait_seq(faa_seq - 1); /* the previous add has been done (and checked) */
	unsigned b = (i / 16) % NFAA;
	uint8_t *op = lreg + L_FOP + (size_t)b * 16;
	uint64_t v = i;
	memcpy(op, &v, 8);
	memset(op + 8, 0xee, 8);
	struct txent *t = tx_slot(T_FAA, i, (uint16_t)b);
	while (!posted(t, fi_fetch_atomic(ep, op, 1, ldesc, op + 8, ldesc, peer_fa, peer.addr + R_FAA, peer.key,
					  FI_UINT64, FI_SUM, &t->ctx),
		       "fi_fetch_atomic"))
		;
	faa_seq = t->seq + 1;
	rma_issued++;
}

/* ---- setup --------------------------------------------------------------------------------------- */

#define FI_CHECK(call)                                                                                            \
	do {                                                                                                       \
		int rc_ = (int)(call);                                                                             \
		if (rc_)                                                                                           \
			die("%s: %s", #call, fi_strerror(-rc_));                                                   \
	} while (0)

#define INFO_LEN (64 + 2 * NAME_MAX_LEN)
static void exchange(int fd)
{
	char b[INFO_LEN], h[2 * NAME_MAX_LEN + 1];
	memset(b, 0, sizeof b);
	hex_put(h, me.name, me.namelen);
	snprintf(b, sizeof b, "FI1 %016" PRIx64 " %016" PRIx64 " %u %zu %s", me.key, me.addr, me.iters, me.namelen, h);
	swap_info(fd, b, sizeof b);
	uint64_t k, a;
	unsigned iters;
	size_t len;
	if (sscanf(b, "FI1 %" SCNx64 " %" SCNx64 " %u %zu %512s", &k, &a, &iters, &len, h) != 5 || len < 1 ||
	    len > NAME_MAX_LEN || strlen(h) != 2 * len)
		die("bad connection info from the peer: '%.100s'", b);
	hex_get(peer.name, h, len);
	peer.key = k, peer.addr = a, peer.iters = iters, peer.namelen = len;
	if (iters != o_iters)
		die("the peer runs %u iterations, this side %u", iters, o_iters);
}

/* fi_getinfo, dropping FI_RMA_EVENT and then FI_ORDER_SAW if no provider grants them */
static void get_info(void)
{
	static const uint64_t extra_caps[] = {FI_RMA_EVENT, FI_RMA_EVENT, 0, 0};
	static const uint64_t orders[] = {FI_ORDER_SAS | FI_ORDER_SAW, FI_ORDER_SAS, FI_ORDER_SAS | FI_ORDER_SAW,
					  FI_ORDER_SAS};
	int rc = -FI_ENODATA;
	for (unsigned k = 0; k < 4; k++) {
		struct fi_info *h = fi_allocinfo();
		if (!h)
			die("fi_allocinfo");
		h->ep_attr->type = FI_EP_RDM;
		h->caps = FI_MSG | FI_RMA | FI_ATOMIC | extra_caps[k];
		h->mode = FI_CONTEXT;
		h->addr_format = FI_FORMAT_UNSPEC;
		h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
		h->tx_attr->msg_order = orders[k];
		h->rx_attr->msg_order = orders[k];
		h->fabric_attr->prov_name = strdup(o_prov);
		rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &fi);
		fi_freeinfo(h);
		if (!rc)
			break;
		if (rc != -FI_ENODATA)
			die("fi_getinfo (provider %s): %s", o_prov, fi_strerror(-rc));
	}
	if (rc)
		die("fi_getinfo: no provider %s with FI_EP_RDM and FI_MSG|FI_RMA|FI_ATOMIC: %s", o_prov, fi_strerror(-rc));
	if (!(fi->tx_attr->msg_order & fi->rx_attr->msg_order & FI_ORDER_SAS))
		die("provider %s does not order sends (FI_ORDER_SAS)", fi->fabric_attr->prov_name);
	mr_mode = fi->domain_attr->mr_mode;
	if (mr_mode & ~(uint64_t)(FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT))
		die("provider %s wants mr_mode 0x%" PRIx64, fi->fabric_attr->prov_name, mr_mode);
	use_data = fi->domain_attr->cq_data_size >= 4;
	saw_ordered = !!(fi->tx_attr->msg_order & fi->rx_attr->msg_order & FI_ORDER_SAW);
	if (o_verbose) {
		char b[4][512];
		fi_tostr_r(b[0], sizeof b[0], &mr_mode, FI_TYPE_MR_MODE);
		fi_tostr_r(b[1], sizeof b[1], &fi->tx_attr->msg_order, FI_TYPE_MSG_ORDER);
		fi_tostr_r(b[2], sizeof b[2], &fi->rx_attr->msg_order, FI_TYPE_MSG_ORDER);
		fi_tostr_r(b[3], sizeof b[3], &fi->caps, FI_TYPE_CAPS);
		fprintf(stderr,
			"side %d: provider %s fabric %s domain %s\n  mr_mode %s\n  tx msg_order %s\n  rx msg_order %s\n"
			"  caps %s\n  mode 0x%" PRIx64 " cq_data_size %zu inject %zu tx size %zu rx size %zu progress %s\n",
			side, fi->fabric_attr->prov_name, fi->fabric_attr->name, fi->domain_attr->name, b[0], b[1], b[2],
			b[3], fi->mode, fi->domain_attr->cq_data_size, fi->tx_attr->inject_size, fi->tx_attr->size,
			fi->rx_attr->size, fi_tostr(&fi->domain_attr->data_progress, FI_TYPE_PROGRESS));
	}
}

static void reg_mr(void *buf, size_t len, uint64_t access, uint64_t req_key, struct fid_mr **mr)
{
	FI_CHECK(fi_mr_reg(domain, buf, len, access, 0, req_key, 0, mr, NULL));
	if (mr_mode & FI_MR_ENDPOINT) {
		FI_CHECK(fi_mr_bind(*mr, &ep->fid, 0));
		FI_CHECK(fi_mr_enable(*mr));
	}
}

static void setup_fabric(void)
{
	get_info();
	FI_CHECK(fi_fabric(fi->fabric_attr, &fabric, NULL));
	FI_CHECK(fi_domain(fabric, fi, &domain, NULL));
	struct fi_av_attr aa = {.type = FI_AV_TABLE, .count = 4};
	FI_CHECK(fi_av_open(domain, &aa, &av, NULL));
	struct fi_cq_attr ca = {.size = CQ_DEPTH, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
	FI_CHECK(fi_cq_open(domain, &ca, &cq, NULL));
	struct fi_cntr_attr na = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	FI_CHECK(fi_cntr_open(domain, &na, &cntr, NULL));
	if (fi->caps & FI_RMA_EVENT)
		FI_CHECK(fi_cntr_open(domain, &na, &rcntr, NULL));
	FI_CHECK(fi_endpoint(domain, fi, &ep, NULL));
	FI_CHECK(fi_ep_bind(ep, &av->fid, 0));
	FI_CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	FI_CHECK(fi_ep_bind(ep, &cntr->fid, FI_WRITE | FI_READ));
	if (rcntr)
		FI_CHECK(fi_ep_bind(ep, &rcntr->fid, FI_REMOTE_WRITE | FI_REMOTE_READ));
	FI_CHECK(fi_enable(ep));
	size_t count = 0;
	if (fi_fetch_atomicvalid(ep, FI_UINT64, FI_SUM, &count) || count < 1)
		die("provider %s has no fetching FI_SUM on FI_UINT64", fi->fabric_attr->prov_name);

	alloc_regions(R_SIZE, R_STATIC, L_SIZE);
	reg_mr(rreg, R_SIZE, FI_REMOTE_READ | FI_REMOTE_WRITE, 0x1000u + (unsigned)side * 2, &rmr);
	if (mr_mode & FI_MR_LOCAL) {
		reg_mr(lreg, L_SIZE, FI_SEND | FI_RECV | FI_READ | FI_WRITE, 0x1001u + (unsigned)side * 2, &lmr);
		ldesc = fi_mr_desc(lmr);
	}
	me.key = (mr_mode & FI_MR_PROV_KEY) ? fi_mr_key(rmr) : 0x1000u + (unsigned)side * 2;
	if (me.key == FI_KEY_NOTAVAIL)
		die("fi_mr_key: no key");
	me.addr = (mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)rreg : 0;
	me.iters = o_iters;
	me.namelen = sizeof me.name;
	FI_CHECK(fi_getname(&ep->fid, me.name, &me.namelen));
	if (o_verbose)
		fprintf(stderr, "side %d: name %zu bytes, key 0x%" PRIx64 ", region at 0x%" PRIx64 "%s%s%s\n", side,
			me.namelen, me.key, me.addr, use_data ? ", fi_senddata" : ", fi_send",
			saw_ordered ? ", slots checked on receipt" : ", slots checked at the end",
			rcntr ? ", remote counter" : "");
}

/* everything up to the first data operation: objects, exchange, AV, barrier; closes fd */
static void setup(int fd)
{
	setup_fabric();
	exchange(fd);
	int rc = fi_av_insert(av, peer.name, 1, &peer_fa, 0, NULL);
	if (rc != 1)
		die("fi_av_insert: %s", rc < 0 ? fi_strerror(-rc) : "address not inserted");
	barrier(fd); /* both sides have the other in their AV before either sends */
}

static void teardown(void)
{
	if (lmr && fi_close(&lmr->fid))
		fail("fi_close (local MR)");
	if (fi_close(&rmr->fid))
		fail("fi_close (MR)");
	if (fi_close(&ep->fid))
		fail("fi_close (endpoint)");
	if (fi_close(&av->fid))
		fail("fi_close (AV)");
	if (fi_close(&cq->fid))
		fail("fi_close (CQ)");
	if (fi_close(&cntr->fid) || (rcntr && fi_close(&rcntr->fid)))
		fail("fi_close (counter)");
	if (fi_close(&domain->fid))
		fail("fi_close (domain)");
	if (fi_close(&fabric->fid))
		fail("fi_close (fabric)");
	fi_freeinfo(fi);
	free(rreg);
	free(lreg);
}

/* ---- the run ------------------------------------------------------------------------------------- */

/* until the counter reaches want (it must not pass it) */
static void wait_cntr(struct fid_cntr *c, uint64_t want, const char *what)
{
	for (;;) {
		uint64_t v = fi_cntr_read(c), e = fi_cntr_readerr(c);
		if (e)
			fail("%s: %" PRIu64 " errors", what, e);
		if (v == want)
			return;
		if (v > want)
			fail("%s is %" PRIu64 ", expected %" PRIu64, what, v, want);
		progress(what);
	}
}

/* the hello: the receives posted, say hello, wait for the peer's */
static void hello(void)
{
	ssize_t rc;
	while ((rc = fi_recv(ep, lreg + L_HELLO, MSG, ldesc, FI_ADDR_UNSPEC, &hello_rctx)) == -FI_EAGAIN)
		progress("room to post");
	if (rc)
		fail("fi_recv (hello): %s", fi_strerror((int)-rc));
	post_recvs();
	fill(lreg + L_HELLO + MSG, MSG, K_MSG(side, HELLO));
	while ((rc = fi_send(ep, lreg + L_HELLO + MSG, MSG, ldesc, peer_fa, &hello_sctx)) == -FI_EAGAIN)
		progress("room to post");
	if (rc)
		fail("fi_send (hello): %s", fi_strerror((int)-rc));
	while (!hello_rx || !hello_tx)
		progress("the peer's hello");
}

static uint64_t run(void)
{
	const uint32_t n = o_iters;
	progressed(); /* the --timeout clock starts */
	hello();
	for (uint32_t i = 0; i < n; i++) {
		cur_iter = i;
		progress_line(1, i);
		post_write(i);
		post_msg(i, T_SEND);
		if (i % 4 == 0) {
			post_read(i);
			wait_msg(i); /* lock step: the peer is at most four iterations ahead */
		}
		progress_line(0, i);
		if (i % 16 == 0)
			post_faa(i);
		while (drain())
			;
		post_recvs();
		if (o_delay_us)
			usleep(o_delay_us);
	}
	cur_iter = n;
	wait_all();
	post_msg(n, T_FINAL);
	wait_msg(n); /* all of the peer's operations on this side's memory are done */
	uint32_t want_reads = (n + 3) / 4, want_faa = (n + 15) / 16;
	if (reads_ok != want_reads || faa_ok != want_faa)
		fail("%u reads and %u atomics checked, expected %u and %u", reads_ok, faa_ok, want_reads, want_faa);
	for (uint32_t sl = 0; sl < NSLOT; sl++) {
		if (sl < n)
			check_slot(sl, sl + NSLOT * ((n - 1 - sl) / NSLOT), "at the end");
		else
			for (size_t b = 0; b < BLK; b++)
				if (rreg[R_SLOTS + (size_t)sl * BLK + b])
					fail("slot %u written, but no iteration writes it", sl);
	}
	dig_slots = fnv(dig_slots, rreg + R_SLOTS, (size_t)NSLOT * BLK);
	uint64_t c = __atomic_load_n((uint64_t *)(rreg + R_FAA), __ATOMIC_ACQUIRE);
	if (c != faa_before(n))
		fail("the counter is %" PRIu64 ", expected %" PRIu64, c, faa_before(n));
	if (rma_issued != rma_ops(n))
		fail("%" PRIu64 " RMA operations issued, expected %" PRIu64, rma_issued, rma_ops(n));
	wait_cntr(cntr, rma_issued, "the FI_WRITE|FI_READ counter");
	if (rcntr)
		wait_cntr(rcntr, rma_ops(peer.iters), "the FI_REMOTE_WRITE|FI_REMOTE_READ counter");
	wait_all(); /* message N has completed: the peer may go once it has this side's bye */
	post_msg(n + 1, T_BYE);
	wait_msg(n + 1);
	wait_all();
	return c;
}

static void finish(uint64_t counter)
{
	uint64_t d = fnv(digest_streams(), &dig_slots, 8);
	d = fnv(d, &counter, 8);
	teardown();
	final_line(d, counter);
}

int main(int argc, char **argv)
{
	int fd = start(argc, argv, "fi_inflight",
		       "--prov NAME (tcp) --iters N (2000) --delay-us U (200) --timeout S (60) --verbose", own_opts);
	setup(fd);
	finish(run());
	return 0;
}
