/* Small helpers shared by the softverbs test programs (plain verbs API; nothing softverbs-specific). */
#ifndef SV_TESTLIB_H
#define SV_TESTLIB_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *t_who = "test";

__attribute__((format(printf, 1, 2), noreturn)) static void t_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "FAIL [%s]: ", t_who);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	fflush(NULL);
	_exit(1);
}

#define T_CHECK(cond, ...)                                                                   \
	do {                                                                                 \
		if (!(cond))                                                                 \
			t_fail("%s:%d: %s: %s", __FILE__, __LINE__, #cond, t_fmt(__VA_ARGS__)); \
	} while (0)

__attribute__((format(printf, 1, 2))) static const char *t_fmt(const char *fmt, ...)
{
	static __thread char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return buf;
}

static inline uint64_t t_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void t_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* open the first device; insist that it is softverbs so that a test never passes on the wrong library */
static inline struct ibv_context *t_open(void)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || n < 1)
		t_fail("no verbs device (is LD_LIBRARY_PATH pointing at softverbs?)");
	if (strncmp(ibv_get_device_name(l[0]), "softverbs", 9) && !getenv("SV_TEST_ANY_DEVICE"))
		t_fail("first device is %s, not softverbs", ibv_get_device_name(l[0]));
	struct ibv_context *c = ibv_open_device(l[0]);
	if (!c)
		t_fail("ibv_open_device: %s", strerror(errno));
	ibv_free_device_list(l);
	return c;
}

struct t_qpcfg {
	enum ibv_qp_type type;
	uint32_t max_send_wr, max_recv_wr, max_sge, max_inline;
	struct ibv_srq *srq;
	int sq_sig_all;
};

static inline struct ibv_qp *t_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, const struct t_qpcfg *c)
{
	struct ibv_qp_init_attr a = {
		.send_cq = scq,
		.recv_cq = rcq,
		.srq = c->srq,
		.cap = {.max_send_wr = c->max_send_wr,
			.max_recv_wr = c->max_recv_wr,
			.max_send_sge = c->max_sge,
			.max_recv_sge = c->max_sge,
			.max_inline_data = c->max_inline},
		.qp_type = c->type,
		.sq_sig_all = c->sq_sig_all,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (!qp)
		t_fail("ibv_create_qp: %s", strerror(errno));
	return qp;
}

static inline void t_to_init(struct ibv_qp *qp, unsigned access)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = access};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = access; /* for UD the caller passes the qkey here */
		mask |= IBV_QP_QKEY;
	} else {
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	int rc = ibv_modify_qp(qp, &a, mask);
	if (rc)
		t_fail("modify to INIT: %s", strerror(rc));
}

struct t_path {
	uint16_t lid;
	uint32_t qpn;
	uint32_t psn;
	union ibv_gid gid;
	int use_gid;
};

static inline void t_to_rtr(struct ibv_qp *qp, const struct t_path *p, uint8_t min_rnr_timer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = p->qpn,
		.rq_psn = p->psn,
		.max_dest_rd_atomic = 16,
		.min_rnr_timer = min_rnr_timer,
		.ah_attr = {.dlid = p->lid, .sl = 0, .src_path_bits = 0, .port_num = 1},
	};
	if (p->use_gid) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = p->gid;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.grh.sgid_index = 0;
	}
	int mask = IBV_QP_STATE;
	if (qp->qp_type != IBV_QPT_UD) {
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (qp->qp_type == IBV_QPT_RC)
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	int rc = ibv_modify_qp(qp, &a, mask);
	if (rc)
		t_fail("modify to RTR: %s", strerror(rc));
}

static inline void t_to_rts(struct ibv_qp *qp, uint32_t sq_psn, uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS,
				.sq_psn = sq_psn,
				.timeout = timeout,
				.retry_cnt = retry_cnt,
				.rnr_retry = rnr_retry,
				.max_rd_atomic = 16};
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	int rc = ibv_modify_qp(qp, &a, mask);
	if (rc)
		t_fail("modify to RTS: %s", strerror(rc));
}

static inline uint16_t t_lid(struct ibv_context *c)
{
	struct ibv_port_attr pa;
	if (ibv_query_port(c, 1, &pa))
		t_fail("ibv_query_port");
	return pa.lid;
}

static inline enum ibv_qp_state t_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		t_fail("ibv_query_qp");
	return a.qp_state;
}

/* wait for exactly one completion, at most ms milliseconds; 0 = none arrived */
static inline int t_poll1(struct ibv_cq *cq, struct ibv_wc *wc, unsigned ms)
{
	uint64_t end = t_now_ms() + ms;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			t_fail("ibv_poll_cq returned %d", n);
		if (n == 1)
			return 1;
		if (t_now_ms() >= end)
			return 0;
		usleep(50);
	}
}

static inline struct ibv_wc t_expect(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st, const char *what)
{
	struct ibv_wc wc;
	if (!t_poll1(cq, &wc, 10000))
		t_fail("%s: no completion for wr_id %llu", what, (unsigned long long)wr_id);
	if (wc.wr_id != wr_id || wc.status != st)
		t_fail("%s: got wr_id %llu status %s (%d), expected wr_id %llu status %s", what,
		       (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.status, (unsigned long long)wr_id,
		       ibv_wc_status_str(st));
	return wc;
}

static inline void t_nothing(struct ibv_cq *cq, unsigned ms, const char *what)
{
	struct ibv_wc wc;
	if (t_poll1(cq, &wc, ms))
		t_fail("%s: unexpected completion wr_id %llu status %s", what, (unsigned long long)wc.wr_id,
		       ibv_wc_status_str(wc.status));
}

#endif
