/* verbs_many: one process with many RC QPs and a large registered region, for the checkpoint/restart
 * figures of the verbs plugin (bench/rdma/run.py).
 *
 *   verbs_many [--qps N] [--mem-mb M] [--seconds S] [--size B] [--ib-dev NAME] [--no-verbs]
 *
 * Allocates M MiB (default 1024) and fills every byte with a non-zero pseudo-random pattern (xorshift64:
 * touched and incompressible), opens the device (the first one, or --ib-dev), registers the whole buffer
 * as ONE memory region, makes one CQ for everything (size >= every WR that can be outstanding) and N RC
 * QPs (default 1000) in N/2 loopback pairs: QP 2k and QP 2k+1 are connected to each other through the
 * port's own LID (INIT -> RTR -> RTS). Each QP has 2 receives posted. Then it loops: iteration i takes
 * pair i % (N/2) (round robin; the direction alternates every round), and the sender posts
 *   an RDMA WRITE of B bytes (default 4096) into the receiver's slot, then
 *   a SEND of 64 bytes,
 * both signaled; it polls the three completions (write, send, receive), checks that the message and the
 * written slot carry the iteration's stamp (RC ordering: the write landed before the send), and posts
 * the receive again. Every 10 ms of wall time it prints `tick <k> <unix time>` to stdout (flushed); it
 * ends after S seconds of running (default 60; time spent stopped or dead, i.e. gaps over 100 ms between
 * iterations, does not count) with `done iters <i> ticks <k>`.
 * --no-verbs is the control: the same memory, filled the same way, the same loop and ticks with a memcpy
 * of B bytes per iteration instead of the verbs, and no device at all.
 * Only classic verbs (no _ex verbs, no ibv_wr_*). Failures: `FAIL: ...` on stderr, exit 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define SLOTS 5 /* per QP: write source, write target, send source, receive 0, receive 1 */
#define MSG 64

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("FAIL: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int nqp = 1000, size = 4096, no_verbs;
static long mem_mb = 1024;
static double seconds = 60;
static const char *devname;
static char *buf;
static size_t buflen;

static char *slot(int q, int j) { return buf + ((size_t)q * SLOTS + j) * (size_t)size; }

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static struct ibv_cq *cq;
static struct ibv_qp **qps;
static uint16_t lid;

/* wr_id: kind in the top byte, QP index below (receives: the receive's slot in bit 0 of the low part) */
enum { K_WRITE = 1, K_SEND = 2, K_RECV = 3 };
static uint64_t wrid(int kind, int q, int j) { return ((uint64_t)kind << 56) | ((uint64_t)q << 1) | (uint64_t)j; }

static void post_recv(int q, int j)
{
	struct ibv_sge sge = {.addr = (uintptr_t)slot(q, 3 + j), .length = (uint32_t)size, .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wrid(K_RECV, q, j), .sg_list = &sge, .num_sge = 1}, *bad;
	int rc = ibv_post_recv(qps[q], &wr, &bad);
	if (rc)
		die("ibv_post_recv on QP %d: %s", q, strerror(rc));
}

static void setup_verbs(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n == 0)
		die("no verbs device");
	struct ibv_device *dev = NULL;
	for (int i = 0; i < n; ++i)
		if (!devname || strcmp(ibv_get_device_name(list[i]), devname) == 0) {
			dev = list[i];
			break;
		}
	if (!dev)
		die("device %s not found", devname);
	ctx = ibv_open_device(dev);
	if (!ctx)
		die("ibv_open_device: %s", strerror(errno));
	ibv_free_device_list(list);
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa))
		die("ibv_query_port: %s", strerror(errno));
	lid = pa.lid;
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 0, &gid))
		die("ibv_query_gid: %s", strerror(errno));
	struct ibv_device_attr da;
	if (ibv_query_device(ctx, &da))
		die("ibv_query_device: %s", strerror(errno));
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd: %s", strerror(errno));
	mr = ibv_reg_mr(pd, buf, buflen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("ibv_reg_mr of %zu bytes: %s", buflen, strerror(errno));
	/* everything that can be outstanding: 2 receives per QP, 2 sends per iteration (one at a time) */
	int cqe = 2 * nqp + 64;
	if (cqe > da.max_cqe)
		die("the CQ would need %d entries, the device has %d", cqe, da.max_cqe);
	cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq(%d): %s", cqe, strerror(errno));
	qps = calloc((size_t)nqp, sizeof *qps);
	for (int q = 0; q < nqp; ++q) {
		struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 0,
					      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
		qps[q] = ibv_create_qp(pd, &ia);
		if (!qps[q])
			die("ibv_create_qp %d: %s", q, strerror(errno));
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
					.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE};
		int rc = ibv_modify_qp(qps[q], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		if (rc)
			die("ibv_modify_qp %d to INIT: %s", q, strerror(rc));
	}
	for (int q = 0; q < nqp; ++q) {
		int peer = q ^ 1;
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096, .dest_qp_num = qps[peer]->qp_num,
					.rq_psn = (uint32_t)(peer * 7919 + 1) & 0xffffff, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
					.ah_attr = {.dlid = lid, .sl = 0, .src_path_bits = 0, .port_num = 1}};
		int rc = ibv_modify_qp(qps[q], &a,
				       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
		if (rc)
			die("ibv_modify_qp %d to RTR: %s", q, strerror(rc));
		struct ibv_qp_attr b = {.qp_state = IBV_QPS_RTS, .sq_psn = (uint32_t)(q * 7919 + 1) & 0xffffff, .timeout = 14,
					.retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1};
		rc = ibv_modify_qp(qps[q], &b,
				   IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					   IBV_QP_MAX_QP_RD_ATOMIC);
		if (rc)
			die("ibv_modify_qp %d to RTS: %s", q, strerror(rc));
	}
	for (int q = 0; q < nqp; ++q) {
		post_recv(q, 0);
		post_recv(q, 1);
	}
}

static void teardown_verbs(void)
{
	for (int q = 0; q < nqp; ++q)
		if (ibv_destroy_qp(qps[q]))
			die("ibv_destroy_qp %d", q);
	if (ibv_destroy_cq(cq) || ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("teardown");
	free(qps);
}

/* One iteration on the verbs: write + send from s to r, three completions, receive posted again. */
static void iterate_verbs(uint64_t it)
{
	int npairs = nqp / 2;
	int k = (int)(it % (uint64_t)npairs), dir = (int)((it / (uint64_t)npairs) & 1);
	int s = 2 * k + dir, r = 2 * k + 1 - dir;
	memcpy(slot(s, 0), &it, sizeof it);
	memcpy(slot(s, 2), &it, sizeof it);
	struct ibv_sge ws = {.addr = (uintptr_t)slot(s, 0), .length = (uint32_t)size, .lkey = mr->lkey};
	struct ibv_sge ss = {.addr = (uintptr_t)slot(s, 2), .length = MSG, .lkey = mr->lkey};
	struct ibv_send_wr send = {.wr_id = wrid(K_SEND, s, 0), .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr write = {.wr_id = wrid(K_WRITE, s, 0), .next = &send, .sg_list = &ws, .num_sge = 1,
				    .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				    .wr.rdma = {.remote_addr = (uintptr_t)slot(r, 1), .rkey = mr->rkey}};
	struct ibv_send_wr *bad;
	int rc = ibv_post_send(qps[s], &write, &bad);
	if (rc)
		die("ibv_post_send on QP %d at iteration %llu: %s", s, (unsigned long long)it, strerror(rc));
	int want = 3, got = 0;
	double t0 = mono();
	while (got < want) {
		struct ibv_wc wc[8];
		int n = ibv_poll_cq(cq, 8, wc);
		if (n < 0)
			die("ibv_poll_cq: %d", n);
		for (int i = 0; i < n; ++i) {
			if (wc[i].status != IBV_WC_SUCCESS)
				die("completion %s (wr_id 0x%llx, iteration %llu)", ibv_wc_status_str(wc[i].status),
				    (unsigned long long)wc[i].wr_id, (unsigned long long)it);
			int kind = (int)(wc[i].wr_id >> 56), q = (int)((wc[i].wr_id & 0xffffffffull) >> 1);
			if (kind == K_RECV) {
				int j = (int)(wc[i].wr_id & 1);
				uint64_t m, w;
				memcpy(&m, slot(q, 3 + j), sizeof m);
				memcpy(&w, slot(q, 1), sizeof w);
				if (q != r || wc[i].byte_len != MSG || m != it || w != it)
					die("receive on QP %d (want %d): %u bytes, message %llu, slot %llu, want %llu", q, r,
					    wc[i].byte_len, (unsigned long long)m, (unsigned long long)w,
					    (unsigned long long)it);
				post_recv(q, j);
			} else if (q != s) {
				die("send completion of QP %d, want %d", q, s);
			}
		}
		got += n;
		if (n == 0 && mono() - t0 > 30) {
			/* a checkpoint stops the process: only complain about 30 s of polling in a row */
			t0 = mono();
			fprintf(stderr, "verbs_many: still waiting for completions at iteration %llu (%d of %d)\n",
				(unsigned long long)it, got, want);
		}
	}
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; ++i) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--no-verbs"))
			no_verbs = 1;
		else if (!strcmp(a, "--qps") && v)
			nqp = atoi(v), ++i;
		else if (!strcmp(a, "--mem-mb") && v)
			mem_mb = atol(v), ++i;
		else if (!strcmp(a, "--seconds") && v)
			seconds = atof(v), ++i;
		else if (!strcmp(a, "--size") && v)
			size = atoi(v), ++i;
		else if (!strcmp(a, "--ib-dev") && v)
			devname = v, ++i;
		else {
			fprintf(stderr, "usage: %s [--qps N] [--mem-mb M] [--seconds S] [--size B] [--ib-dev NAME] [--no-verbs]\n",
				argv[0]);
			return 2;
		}
	}
	if (nqp < 2 || nqp % 2 || size < MSG || mem_mb < 1)
		die("--qps must be even and >= 2, --size >= %d, --mem-mb >= 1", MSG);
	buflen = (size_t)mem_mb << 20;
	if ((size_t)nqp * SLOTS * (size_t)size > buflen)
		die("%d QPs need %zu bytes of slots, more than --mem-mb %ld", nqp, (size_t)nqp * SLOTS * (size_t)size, mem_mb);
	buf = mmap(NULL, buflen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		die("mmap %zu: %s", buflen, strerror(errno));
	uint64_t x = 0x9e3779b97f4a7c15ull, *w = (uint64_t *)buf;
	for (size_t i = 0; i < buflen / 8; ++i) { /* xorshift64: never zero */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		w[i] = x;
	}
	if (!no_verbs)
		setup_verbs();
	printf("ready %s qps %d mem_mb %ld\n", no_verbs ? "no-verbs" : "verbs", no_verbs ? 0 : nqp, mem_mb);
	fflush(stdout);

	uint64_t it = 0, ticks = 0;
	double last = mono(), last_tick = last, ran = 0;
	while (ran < seconds) {
		if (no_verbs) {
			int npairs = nqp / 2, k = (int)(it % (uint64_t)npairs);
			memcpy(slot(2 * k, 0), &it, sizeof it);
			memcpy(slot(2 * k + 1, 1), slot(2 * k, 0), (size_t)size);
		} else {
			iterate_verbs(it);
		}
		++it;
		double now = mono(), d = now - last;
		last = now;
		ran += d < 0.1 ? d : 0; /* a longer gap: stopped (checkpoint) or dead (restart) */
		if (now - last_tick >= 0.010) {
			last_tick = now;
			printf("tick %llu %.6f\n", (unsigned long long)++ticks, wall());
			fflush(stdout);
		}
	}
	if (!no_verbs)
		teardown_verbs();
	printf("done iters %llu ticks %llu\n", (unsigned long long)it, (unsigned long long)ticks);
	return 0;
}
