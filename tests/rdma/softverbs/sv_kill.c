/* sv_kill: a program killed with SIGKILL in the middle of a transfer. Two processes (fork) on one host,
 * RC QPs connected to each other, both streaming RDMA writes into the other's memory. The parent kills
 * the child (the victim) while writes are in flight in both directions. Then:
 *   - the survivor's next operations end in an error completion (the victim's QP vanished with its
 *     process: the daemon destroyed it, and requests to a QP that does not exist time out, as with a dead
 *     host), followed by flushes;
 *   - the daemon holds only the survivor's objects (softverbsd --stats: 1 client, 1 QP, ...).
 * Usage: sv_kill SOFTVERBSD SOCKET   (the daemon's binary and socket, for --stats) */
#include "sv_testlib.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define REGION (1u << 20)
#define CHUNK 65536u
#define DEPTH 16

struct info {
	uint16_t lid;
	uint32_t qpn;
	uint64_t addr;
	uint32_t rkey;
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint8_t *buf;
	struct ibv_mr *mr;
	struct info peer;
};

static void setup(struct side *s, int ctl)
{
	s->ctx = t_open();
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	s->buf = aligned_alloc(4096, REGION);
	T_CHECK(s->pd && s->cq && s->buf, "setup");
	memset(s->buf, 0x5a, REGION);
	s->mr = ibv_reg_mr(s->pd, s->buf, REGION, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	T_CHECK(s->mr, "reg_mr");
	struct t_qpcfg qc = {.type = IBV_QPT_RC, .max_send_wr = DEPTH * 2, .max_recv_wr = 4, .max_sge = 1};
	s->qp = t_create_qp(s->pd, s->cq, s->cq, &qc);
	struct info me = {.lid = t_lid(s->ctx), .qpn = s->qp->qp_num, .addr = (uintptr_t)s->buf, .rkey = s->mr->rkey};
	T_CHECK(write(ctl, &me, sizeof me) == (ssize_t)sizeof me, "ctl write");
	T_CHECK(read(ctl, &s->peer, sizeof s->peer) == (ssize_t)sizeof s->peer, "ctl read");
	t_to_init(s->qp, IBV_ACCESS_REMOTE_WRITE);
	struct t_path p = {.lid = s->peer.lid, .qpn = s->peer.qpn, .psn = 0x1234};
	t_to_rtr(s->qp, &p, 12);
	t_to_rts(s->qp, 0x1234, 14, 7, 7); /* transport timeout: 4.096 us * 2^14 * 8, floored by the daemon */
	/* both QPs ready to receive before anything is sent (a request to a QP not yet in RTR is dropped,
	 * and softverbs does not retransmit) */
	char b = 1;
	T_CHECK(write(ctl, &b, 1) == 1 && read(ctl, &b, 1) == 1, "barrier");
}

static void post_write(struct side *s, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + (id % (REGION / CHUNK)) * CHUNK, .length = CHUNK,
			      .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.rdma.remote_addr = s->peer.addr + (id % (REGION / CHUNK)) * CHUNK;
	wr.wr.rdma.rkey = s->peer.rkey;
	int rc = ibv_post_send(s->qp, &wr, &bad);
	if (rc)
		t_fail("post_send wr %llu: %s", (unsigned long long)id, strerror(rc));
}

/* keep DEPTH writes in flight; returns the first failed completion's status, or -1 when told to stop */
static int stream(struct side *s, uint64_t *posted, uint64_t *done, uint64_t max_done, uint64_t deadline_ms)
{
	while (t_now_ms() < deadline_ms) {
		while (*posted - *done < DEPTH)
			post_write(s, (*posted)++);
		struct ibv_wc wc[1];
		int n = ibv_poll_cq(s->cq, 1, wc); /* one at a time: what follows an error stays in the CQ */
		T_CHECK(n >= 0, "poll_cq");
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				return (int)wc[i].status;
			T_CHECK(wc[i].wr_id == *done, "completion order: wr_id %llu, expected %llu",
				(unsigned long long)wc[i].wr_id, (unsigned long long)*done);
			(*done)++;
		}
		if (max_done && *done >= max_done)
			return -1;
		if (!n)
			usleep(20);
	}
	return -2;
}

static long stat_of(const char *text, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\n%s ", key);
	const char *p = strstr(text, pat);
	return p ? strtol(p + strlen(pat), NULL, 0) : -1;
}

static void daemon_stats(const char *exe, const char *sock, char *out, size_t cap)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "'%s' --stats '%s'", exe, sock);
	FILE *f = popen(cmd, "r");
	T_CHECK(f, "popen %s", cmd);
	size_t n = fread(out + 1, 1, cap - 2, f);
	out[0] = '\n';
	out[n + 1] = '\0';
	T_CHECK(pclose(f) == 0, "%s failed", cmd);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	T_CHECK(argc == 3, "usage: sv_kill SOFTVERBSD SOCKET");
	int sp[2];
	T_CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sp), "socketpair");
	pid_t victim = fork();
	T_CHECK(victim >= 0, "fork");
	if (victim == 0) {
		t_who = "victim";
		close(sp[0]);
		struct side s;
		setup(&s, sp[1]);
		uint64_t posted = 0, done = 0;
		char go = 1;
		stream(&s, &posted, &done, 50, t_now_ms() + 20000);
		T_CHECK(write(sp[1], &go, 1) == 1, "ctl");
		stream(&s, &posted, &done, 0, t_now_ms() + 20000); /* until killed */
		_exit(3);
	}
	t_who = "survivor";
	close(sp[1]);
	struct side s;
	setup(&s, sp[0]);
	uint64_t posted = 0, done = 0;
	char go;
	T_CHECK(read(sp[0], &go, 1) == 1, "victim did not start streaming");
	int st = stream(&s, &posted, &done, 200, t_now_ms() + 20000);
	T_CHECK(st == -1, "survivor: error before the kill: %s", ibv_wc_status_str((enum ibv_wc_status)st));
	T_CHECK(!kill(victim, SIGKILL), "kill");
	int wst;
	T_CHECK(waitpid(victim, &wst, 0) == victim && WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL,
		"victim did not die of SIGKILL (status 0x%x)", wst);
	printf("victim pid %d killed with SIGKILL after %llu writes of the survivor completed\n", (int)victim,
	       (unsigned long long)done);
	uint64_t t0 = t_now_ms();
	st = stream(&s, &posted, &done, 0, t0 + 15000);
	T_CHECK(st >= 0, "no error completion within 15 s of the peer's death");
	printf("survivor: error completion %s (%d) %llu ms after the kill, %llu writes completed in all\n",
	       ibv_wc_status_str((enum ibv_wc_status)st), st, (unsigned long long)(t_now_ms() - t0),
	       (unsigned long long)done);
	T_CHECK(st == IBV_WC_RETRY_EXC_ERR, "expected IBV_WC_RETRY_EXC_ERR");
	/* the rest of the send queue is flushed, the QP is in the error state */
	struct ibv_wc wc;
	uint64_t flushed = 0;
	while (t_poll1(s.cq, &wc, 500)) {
		T_CHECK(wc.status == IBV_WC_WR_FLUSH_ERR, "after the error: %s", ibv_wc_status_str(wc.status));
		flushed++;
	}
	T_CHECK(done + 1 + flushed == posted, "completions: %llu ok + 1 error + %llu flushed != %llu posted",
		(unsigned long long)done, (unsigned long long)flushed, (unsigned long long)posted);
	T_CHECK(t_qp_state(s.qp) == IBV_QPS_ERR, "survivor's QP not in ERR");

	/* the daemon destroyed everything of the victim: what is left is the survivor's pd, cq, mr, qp */
	char text[2048];
	daemon_stats(argv[1], argv[2], text, sizeof text);
	printf("daemon:%s", text);
	T_CHECK(stat_of(text, "clients") == 1 && stat_of(text, "qps") == 1 && stat_of(text, "mrs") == 1 &&
			stat_of(text, "cqs") == 1 && stat_of(text, "pds") == 1 && stat_of(text, "objects") == 4,
		"the daemon still holds objects of the killed program");
	T_CHECK(!ibv_destroy_qp(s.qp) && !ibv_dereg_mr(s.mr) && !ibv_destroy_cq(s.cq) && !ibv_dealloc_pd(s.pd),
		"cleanup");
	T_CHECK(!ibv_close_device(s.ctx), "close");
	printf("sv_kill: PASS\n");
	return 0;
}
