/* softverbs: the library that programs load as libibverbs.so.1. A thin client of the daemon softverbsd
 * (the "HCA", one per host): each device context is a Unix connection to it (sv_proto.h). Objects are
 * created and destroyed, WRs posted and QPs modified by calls to the daemon; completions are read from
 * a ring in shared memory (no system call in ibv_poll_cq); completion-channel and async events arrive
 * in pipes the daemon writes. Nothing of the device lives in the program's process. */
#include "sv.h"

#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* verbs.h turns these names into macros around inline wrappers; the library defines the real symbols */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_query_port
#undef ibv_get_device_list

extern char **environ;

/* ---- client-side objects ---- */
struct svc_ctx {
	struct verbs_context vctx; /* vctx.context is the public ibv_context */
	int sock;                  /* the connection to the daemon (also cmd_fd, like /dev/infiniband/uverbsN) */
	int fatal_sent;            /* the daemon went away: IBV_EVENT_DEVICE_FATAL was handed out */
	pthread_mutex_t call_lock;
	pthread_mutex_t map_lock;
	struct sv_htab objs; /* handle -> object, to hand out events */
	uint64_t guid;
	uint16_t lid;
	union ibv_gid gid;
	pid_t dpid;
	struct svc_ctx *next;
};

struct svc_mr {
	struct ibv_mr mr;
	unsigned access;
};

struct svc_ch {
	struct ibv_comp_channel ch;
	uint32_t handle;
};

struct svc_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex x;
	};
	struct svc_ctx *ctx;
	struct svc_ch *chan;
	struct svp_cqring *ring;
	size_t ring_len;
	pthread_mutex_t poll_lock;
	uint32_t empty_polls;
	uint32_t events_read;
	uint32_t async_reported;
	struct ibv_wc cur;
	uint64_t cur_ts;
};

struct svc_srq {
	struct ibv_srq srq;
	uint32_t events_reported;
};

/* builder for the ibv_qp_ex "new post send" API */
struct sv_wrb {
	struct ibv_send_wr *wrs;
	struct ibv_sge *sges;
	struct ibv_sge **lists;
	uint8_t **inl;
	size_t n, cap;
	int err;
};

struct svc_qp {
	struct ibv_qp_ex ex; /* ex.qp_base is the public ibv_qp */
	struct svc_ctx *ctx;
	struct ibv_qp_cap cap;
	int is_ex;
	uint32_t events_reported;
	struct sv_wrb wrb;
};

static inline struct svc_ctx *svc(struct ibv_context *c)
{
	return (struct svc_ctx *)((uint8_t *)c - offsetof(struct svc_ctx, vctx.context));
}

static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct svc_ctx *g_ctxs;

/* ---- the connection ---- */
static int svc_read_full(int fd, void *buf, size_t len)
{
	size_t off = 0;
	while (off < len) {
		ssize_t r = read(fd, (uint8_t *)buf + off, len - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		off += (size_t)r;
	}
	return 0;
}

/* one call: request (+ descriptor) -> reply (+ descriptor). Returns 0 or an errno (EIO: daemon gone). */
static int svc_call_fd(struct svc_ctx *c, uint32_t op, const void *req, size_t reqlen, int infd, void *rep,
		       size_t replen, int *ofd, uint32_t *idx)
{
	struct svp_hdr h = {.len = (uint32_t)(sizeof h + reqlen), .op = op};
	struct iovec v[2] = {{.iov_base = &h, .iov_len = sizeof h}, {.iov_base = (void *)req, .iov_len = reqlen}};
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	struct msghdr m = {.msg_iov = v, .msg_iovlen = reqlen ? 2 : 1};
	if (infd >= 0) {
		memset(&cb, 0, sizeof cb);
		m.msg_control = cb.b;
		m.msg_controllen = sizeof cb.b;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &infd, sizeof(int));
	}
	if (ofd)
		*ofd = -1;
	int err = 0;
	pthread_mutex_lock(&c->call_lock);
	size_t total = sizeof h + reqlen, done = 0;
	while (done < total) {
		ssize_t r = sendmsg(c->sock, &m, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			err = EIO;
			goto out;
		}
		done += (size_t)r;
		m.msg_control = NULL;
		m.msg_controllen = 0;
		size_t skip = (size_t)r;
		while (m.msg_iovlen && skip >= m.msg_iov[0].iov_len) {
			skip -= m.msg_iov[0].iov_len;
			m.msg_iov++;
			m.msg_iovlen--;
		}
		if (m.msg_iovlen) {
			m.msg_iov[0].iov_base = (uint8_t *)m.msg_iov[0].iov_base + skip;
			m.msg_iov[0].iov_len -= skip;
		}
	}
	struct svp_hdr r;
	size_t off = 0;
	while (off < sizeof r) {
		struct iovec rv = {.iov_base = (uint8_t *)&r + off, .iov_len = sizeof r - off};
		struct msghdr rm = {.msg_iov = &rv, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof cb.b};
		ssize_t n = recvmsg(c->sock, &rm, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = EIO;
			goto out;
		}
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&rm); cm; cm = CMSG_NXTHDR(&rm, cm)) {
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
				int fd;
				memcpy(&fd, CMSG_DATA(cm), sizeof fd);
				if (ofd && *ofd < 0)
					*ofd = fd;
				else
					close(fd);
			}
		}
		off += (size_t)n;
	}
	if (r.len < sizeof r) {
		err = EIO;
		goto out;
	}
	size_t body = r.len - sizeof r, take = body < replen ? body : replen;
	if (take && svc_read_full(c->sock, rep, take)) {
		err = EIO;
		goto out;
	}
	for (size_t left = body - take; left;) {
		char sink[256];
		size_t k = left < sizeof sink ? left : sizeof sink;
		if (svc_read_full(c->sock, sink, k)) {
			err = EIO;
			goto out;
		}
		left -= k;
	}
	if (replen > take)
		memset((uint8_t *)rep + take, 0, replen - take);
	if (idx)
		*idx = r.idx;
	err = r.rc;
out:
	pthread_mutex_unlock(&c->call_lock);
	if (err == EIO)
		sv_log("the daemon connection failed (op %u)", op);
	return err;
}

static int svc_call(struct svc_ctx *c, uint32_t op, const void *req, size_t reqlen, void *rep, size_t replen)
{
	return svc_call_fd(c, op, req, reqlen, -1, rep, replen, NULL, NULL);
}

static void svc_map_put(struct svc_ctx *c, uint32_t h, void *p)
{
	pthread_mutex_lock(&c->map_lock);
	sv_ht_put(&c->objs, h, p);
	pthread_mutex_unlock(&c->map_lock);
}

/* ---- finding and starting the daemon ---- */
static int svc_connect(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int svc_exe(char *buf, size_t len)
{
	const char *s = getenv("SOFTVERBSD");
	if (s && *s) {
		snprintf(buf, len, "%s", s);
		return access(buf, X_OK);
	}
	Dl_info di;
	if (dladdr((void *)svc_exe, &di) && di.dli_fname) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s", di.dli_fname);
		char *sl = strrchr(dir, '/');
		if (sl) {
			*sl = '\0';
			static const char *rel[] = {"softverbsd", "../softverbsd", "../sbin/softverbsd", "../bin/softverbsd"};
			for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
				snprintf(buf, len, "%s/%s", dir, rel[i]);
				if (!access(buf, X_OK))
					return 0;
			}
		}
	}
	snprintf(buf, len, "softverbsd"); /* from PATH */
	return 0;
}

/* Start the daemon of this namespace: it double-forks and setsid()s itself, so it is neither our child
 * nor in our session (softverbsd without --foreground returns once it listens). posix_spawn runs no
 * atfork handlers of the program. */
static void svc_spawn(const char *path)
{
	char exe[PATH_MAX];
	if (svc_exe(exe, sizeof exe))
		return;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (!sv_debug) {
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	}
	posix_spawnattr_init(&at);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	char *argv[] = {exe, "--socket", (char *)path, NULL};
	pid_t pid;
	int rc = strchr(exe, '/') ? posix_spawn(&pid, exe, &fa, &at, argv, environ)
				  : posix_spawnp(&pid, exe, &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (rc) {
		sv_log("cannot start %s: %s", exe, strerror(rc));
		return;
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	sv_log("started the daemon %s for %s", exe, path);
}

static int svc_open_sock(void)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	if (sv_sock_path(path, sizeof path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	uint64_t end = sv_now_ns() + 10000000000ull, next_spawn = 0;
	for (;;) {
		int fd = svc_connect(path);
		if (fd >= 0)
			return fd;
		if (errno != ENOENT && errno != ECONNREFUSED && errno != EAGAIN)
			return -1;
		uint64_t now = sv_now_ns();
		if (now >= end)
			return -1;
		if (now >= next_spawn && !sv_env_long("SOFTVERBS_NO_SPAWN", 0)) {
			svc_spawn(path);
			next_spawn = sv_now_ns() + 1000000000ull;
			continue;
		}
		struct timespec ts = {.tv_nsec = 20000000};
		nanosleep(&ts, NULL);
	}
}

/* Yama (ptrace_scope 1) lets only a declared tracer use process_vm_readv/writev on us: declare the daemon */
static void svc_allow_daemon(pid_t dpid)
{
	int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* no Yama: the classic rule (same user, dumpable) applies */
	char b = '0';
	ssize_t r = read(fd, &b, 1);
	close(fd);
	if (r == 1 && b == '1' && prctl(PR_SET_PTRACER, (unsigned long)dpid, 0, 0, 0))
		sv_log("PR_SET_PTRACER %d: %s", (int)dpid, strerror(errno));
}

/* ---- the device ---- */
static struct ibv_device g_dev;
static pthread_once_t g_dev_once = PTHREAD_ONCE_INIT;

/* A forked child must not talk on its parent's connections: it forgets them (and opens its own device). */
static void svc_atfork_child(void)
{
	for (struct svc_ctx *c = g_ctxs; c; c = c->next) {
		if (c->sock >= 0)
			close(c->sock);
		c->sock = -1;
	}
	g_ctxs = NULL;
	pthread_mutex_init(&g_ctx_lock, NULL);
}

static void sv_dev_init(void)
{
	const char *name = getenv("SOFTVERBS_DEVICE_NAME");
	if (!name || !*name || strlen(name) >= sizeof g_dev.name)
		name = "softverbs_0";
	sv_debug = (int)sv_env_long("SOFTVERBS_DEBUG", 0);
	g_dev.node_type = IBV_NODE_CA;
	g_dev.transport_type = IBV_TRANSPORT_IB;
	snprintf(g_dev.name, sizeof g_dev.name, "%s", name);
	snprintf(g_dev.dev_name, sizeof g_dev.dev_name, "uverbs0");
	snprintf(g_dev.dev_path, sizeof g_dev.dev_path, "/sys/class/infiniband_verbs/uverbs0");
	snprintf(g_dev.ibdev_path, sizeof g_dev.ibdev_path, "/sys/class/infiniband/%s", name);
	pthread_atfork(NULL, NULL, svc_atfork_child);
}

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	pthread_once(&g_dev_once, sv_dev_init);
	struct ibv_device **l = calloc(2, sizeof *l);
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	l[0] = &g_dev;
	if (num_devices)
		*num_devices = 1;
	return l;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

int ibv_get_device_index(struct ibv_device *device)
{
	return device == &g_dev ? 0 : -1;
}

/* ---- context ---- */
static int sv_query_port_ex(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len);
static int sv_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t len);
static struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *a);
static int sv_query_rt_values(struct ibv_context *context, struct ibv_values_ex *v);
static int sv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int sv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
static int svl_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int svl_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static int svl_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static struct ibv_qp *sv_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	pthread_once(&g_dev_once, sv_dev_init);
	if (device != &g_dev) {
		errno = ENODEV;
		return NULL;
	}
	struct svc_ctx *c = calloc(1, sizeof *c);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	int afd[2] = {-1, -1};
	c->sock = svc_open_sock();
	if (c->sock < 0) {
		sv_log("no daemon: %s", strerror(errno));
		errno = ENODEV;
		goto fail;
	}
	if (pipe2(afd, O_CLOEXEC))
		goto fail;
	fcntl(afd[1], F_SETFL, O_NONBLOCK);
	pthread_mutex_init(&c->call_lock, NULL);
	pthread_mutex_init(&c->map_lock, NULL);
	sv_ht_init(&c->objs);
	struct svp_open_req req = {.magic = SVP_MAGIC, .pid = (uint32_t)getpid()};
	struct svp_open_rep rep;
	int err = svc_call_fd(c, SVP_OPEN, &req, sizeof req, afd[1], &rep, sizeof rep, NULL, NULL);
	close(afd[1]);
	afd[1] = -1;
	if (err) {
		errno = ENODEV;
		goto fail;
	}
	c->guid = rep.guid;
	c->lid = rep.lid;
	memcpy(c->gid.raw, rep.gid, 16);
	c->dpid = (pid_t)rep.daemon_pid;
	svc_allow_daemon(c->dpid);

	struct ibv_context *ctx = &c->vctx.context;
	ctx->device = device;
	ctx->cmd_fd = c->sock;
	ctx->async_fd = afd[0];
	ctx->num_comp_vectors = 1;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->ops.poll_cq = sv_poll_cq;
	ctx->ops.req_notify_cq = sv_req_notify_cq;
	ctx->ops.post_srq_recv = svl_post_srq_recv;
	ctx->ops.post_send = svl_post_send;
	ctx->ops.post_recv = svl_post_recv;
	/* extended ops not listed stay NULL: their inline wrappers report EOPNOTSUPP */
	c->vctx.sz = sizeof(struct verbs_context);
	c->vctx.query_port = sv_query_port_ex;
	c->vctx.query_device_ex = sv_query_device_ex;
	c->vctx.create_qp_ex = sv_create_qp_ex;
	c->vctx.create_cq_ex = sv_create_cq_ex;
	c->vctx.query_rt_values = sv_query_rt_values;
	pthread_mutex_lock(&g_ctx_lock);
	c->next = g_ctxs;
	g_ctxs = c;
	pthread_mutex_unlock(&g_ctx_lock);
	return ctx;
fail:
	if (c->sock >= 0)
		close(c->sock);
	if (afd[0] >= 0)
		close(afd[0]);
	if (afd[1] >= 0)
		close(afd[1]);
	free(c);
	return NULL;
}

/* Closing the connection is the device close: the daemon destroys every object of the context (the
 * program's structures of objects it did not destroy stay allocated, as libibverbs leaves them). */
int ibv_close_device(struct ibv_context *context)
{
	struct svc_ctx *c = svc(context);
	pthread_mutex_lock(&g_ctx_lock);
	for (struct svc_ctx **pp = &g_ctxs; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	pthread_mutex_unlock(&g_ctx_lock);
	if (c->sock >= 0) {
		shutdown(c->sock, SHUT_WR);
		char b;
		while (read(c->sock, &b, 1) > 0) /* the daemon has cleaned up when it closes its end */
			;
		close(c->sock);
	}
	close(context->async_fd);
	sv_ht_free(&c->objs);
	pthread_mutex_destroy(&context->mutex);
	free(c);
	return 0;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	struct ibv_context *c = ibv_open_device(device);
	if (!c)
		return 0;
	uint64_t g = svc(c)->guid;
	ibv_close_device(c);
	return htobe64(g);
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	errno = EOPNOTSUPP;
	return NULL;
}

/* ---- queries ---- */
static void sv_fill_device_attr(struct svc_ctx *c, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof *a);
	snprintf(a->fw_ver, sizeof a->fw_ver, "2.0.0 softverbsd");
	a->node_guid = htobe64(c->guid);
	a->sys_image_guid = htobe64(c->guid);
	a->max_mr_size = 1ull << 40;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = SV_VENDOR_ID;
	a->vendor_part_id = SV_VENDOR_PART;
	a->hw_ver = 1;
	a->max_qp = SV_MAX_QP;
	a->max_qp_wr = SV_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR | IBV_DEVICE_CURR_QP_STATE_MOD |
			      IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE |
			      IBV_DEVICE_RESIZE_MAX_WR;
	a->max_sge = SV_MAX_SGE;
	a->max_sge_rd = SV_MAX_SGE;
	a->max_cq = SV_MAX_CQ;
	a->max_cqe = SV_MAX_CQE;
	a->max_mr = SV_MAX_MR;
	a->max_pd = SV_MAX_PD;
	a->max_qp_rd_atom = SV_MAX_RD_ATOM;
	a->max_res_rd_atom = SV_MAX_RD_ATOM * SV_MAX_QP;
	a->max_qp_init_rd_atom = SV_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ah = SV_MAX_AH;
	a->max_srq = SV_MAX_SRQ;
	a->max_srq_wr = SV_MAX_SRQ_WR;
	a->max_srq_sge = SV_MAX_SGE;
	a->max_pkeys = SV_PKEY_TBL_LEN;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
	sv_fill_device_attr(svc(context), device_attr);
	return 0;
}

static int sv_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t len)
{
	if (in && in->comp_mask)
		return EINVAL;
	struct ibv_device_attr_ex a;
	memset(&a, 0, sizeof a);
	sv_fill_device_attr(svc(c), &a.orig_attr);
	a.device_cap_flags_ex = a.orig_attr.device_cap_flags;
	a.completion_timestamp_mask = ~0ull; /* CLOCK_MONOTONIC nanoseconds */
	a.hca_core_clock = 1000000;           /* kHz: one tick per nanosecond */
	a.phys_port_cnt_ex = 1;
	if (len > sizeof a)
		memset(attr, 0, len);
	memcpy(attr, &a, len < sizeof a ? len : sizeof a);
	return 0;
}

static int sv_query_port_ex(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len)
{
	if (port != 1)
		return EINVAL;
	struct svp_port_rep rep;
	int err = svc_call(svc(c), SVP_QUERY_PORT, NULL, 0, &rep, sizeof rep);
	if (err)
		return err;
	struct ibv_port_attr a;
	memset(&a, 0, sizeof a);
	a.state = IBV_PORT_ACTIVE;
	a.max_mtu = SV_PORT_MTU;
	a.active_mtu = SV_PORT_MTU;
	a.gid_tbl_len = SV_GID_TBL_LEN;
	a.port_cap_flags = IBV_PORT_SM | IBV_PORT_CM_SUP | IBV_PORT_SYS_IMAGE_GUID_SUP;
	a.max_msg_sz = SV_MAX_MSG;
	a.qkey_viol_cntr = rep.qkey_viol;
	a.pkey_tbl_len = SV_PKEY_TBL_LEN;
	a.lid = rep.lid;
	a.sm_lid = rep.lid;
	a.lmc = 0;
	a.max_vl_num = 1;
	a.subnet_timeout = 18;
	a.active_width = 2;  /* 4x */
	a.active_speed = 32; /* EDR */
	a.phys_state = 5;    /* LinkUp */
	a.link_layer = IBV_LINK_LAYER_INFINIBAND;
	memcpy(attr, &a, len < sizeof a ? len : sizeof a);
	return 0;
}

/* the layout that binaries built before ibv_port_attr grew use (size of the exported symbol's argument) */
struct _compat_ibv_port_attr {
	enum ibv_port_state state;
	enum ibv_mtu max_mtu;
	enum ibv_mtu active_mtu;
	int gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
};

int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct _compat_ibv_port_attr *port_attr)
{
	return sv_query_port_ex(context, port_num, (struct ibv_port_attr *)port_attr, sizeof *port_attr);
}

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	if (port_num != 1 || index < 0 || index >= SV_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	*gid = svc(context)->gid;
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	if (flags || port_num != 1 || entry_size < sizeof *entry)
		return EINVAL;
	if (gid_index >= SV_GID_TBL_LEN)
		return EINVAL;
	memset(entry, 0, entry_size);
	entry->gid = svc(context)->gid;
	entry->gid_index = gid_index;
	entry->port_num = port_num;
	entry->gid_type = IBV_GID_TYPE_IB;
	return 0;
}

ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries, size_t max_entries,
			     uint32_t flags, size_t entry_size)
{
	if (flags || entry_size < sizeof *entries)
		return -EINVAL;
	if (max_entries < SV_GID_TBL_LEN)
		return -EINVAL;
	if (_ibv_query_gid_ex(context, 1, 0, entries, 0, entry_size))
		return -EINVAL;
	return SV_GID_TBL_LEN;
}

/* IBVERBS_PRIVATE_34: used by ibv_devinfo */
enum sv_gid_type_sysfs { SV_GID_TYPE_SYSFS_IB_ROCE_V1, SV_GID_TYPE_SYSFS_ROCE_V2 };
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       enum sv_gid_type_sysfs *type);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       enum sv_gid_type_sysfs *type)
{
	(void)context;
	if (port_num != 1 || index >= SV_GID_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	*type = SV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	(void)context;
	if (port_num != 1 || index < 0 || index >= SV_PKEY_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(SV_DEFAULT_PKEY);
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	(void)context;
	if (port_num != 1 || be16toh(pkey) != SV_DEFAULT_PKEY) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

/* ---- async events: svp_async records the daemon writes into async_fd ---- */
static int sv_is_qp_event(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: return 1;
	default: return 0;
	}
}

static int sv_is_srq_event(enum ibv_event_type t)
{
	return t == IBV_EVENT_SRQ_ERR || t == IBV_EVENT_SRQ_LIMIT_REACHED;
}

int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct svc_ctx *c = svc(context);
	for (;;) {
		struct svp_async a;
		ssize_t r = read(context->async_fd, &a, sizeof a);
		if (r == 0 && !__atomic_exchange_n(&c->fatal_sent, 1, __ATOMIC_SEQ_CST)) {
			/* the daemon (the "HCA") is gone: its end of the pipe closed */
			memset(event, 0, sizeof *event);
			event->event_type = IBV_EVENT_DEVICE_FATAL;
			event->element.port_num = 0;
			return 0;
		}
		if (r != (ssize_t)sizeof a)
			return -1;
		enum ibv_event_type t = (enum ibv_event_type)a.type;
		pthread_mutex_lock(&c->map_lock);
		void *o = sv_ht_get(&c->objs, a.handle);
		if (!o) { /* the object was destroyed meanwhile: its events are dropped */
			pthread_mutex_unlock(&c->map_lock);
			continue;
		}
		memset(event, 0, sizeof *event);
		event->event_type = t;
		if (t == IBV_EVENT_CQ_ERR) {
			struct svc_cq *cq = o;
			event->element.cq = &cq->cq;
			cq->async_reported++;
		} else if (sv_is_qp_event(t)) {
			struct svc_qp *q = o;
			event->element.qp = &q->ex.qp_base;
			q->events_reported++;
		} else if (sv_is_srq_event(t)) {
			struct svc_srq *s = o;
			event->element.srq = &s->srq;
			s->events_reported++;
		} else {
			event->element.port_num = 1;
		}
		pthread_mutex_unlock(&c->map_lock);
		return 0;
	}
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
	pthread_mutex_t *m = NULL;
	pthread_cond_t *cv = NULL;
	uint32_t *cnt = NULL;
	if (event->event_type == IBV_EVENT_CQ_ERR) {
		struct ibv_cq *cq = event->element.cq;
		m = &cq->mutex, cv = &cq->cond, cnt = &cq->async_events_completed;
	} else if (sv_is_qp_event(event->event_type)) {
		struct ibv_qp *qp = event->element.qp;
		m = &qp->mutex, cv = &qp->cond, cnt = &qp->events_completed;
	} else if (sv_is_srq_event(event->event_type)) {
		struct ibv_srq *srq = event->element.srq;
		m = &srq->mutex, cv = &srq->cond, cnt = &srq->events_completed;
	} else {
		return;
	}
	pthread_mutex_lock(m);
	++*cnt;
	pthread_cond_broadcast(cv);
	pthread_mutex_unlock(m);
}

/* ---- PD ---- */
struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct ibv_pd *pd = calloc(1, sizeof *pd);
	struct svp_h h;
	int err = pd ? svc_call(svc(context), SVP_ALLOC_PD, NULL, 0, &h, sizeof h) : ENOMEM;
	if (err) {
		free(pd);
		errno = err;
		return NULL;
	}
	pd->context = context;
	pd->handle = h.handle;
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct svp_h h = {.handle = pd->handle};
	int err = svc_call(svc(pd->context), SVP_DEALLOC_PD, &h, sizeof h, NULL, 0);
	if (err)
		return err;
	free(pd);
	return 0;
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	(void)context;
	(void)pd_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
}

/* ---- MR ---- */
/* like pinning: the whole range must be mapped (checked here, in the program's address space) */
static int sv_range_mapped(void *addr, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)addr & ~(uintptr_t)(pg - 1);
	uintptr_t end = (uintptr_t)addr + len;
	if (end < (uintptr_t)addr)
		return 0;
	unsigned char vec[4096];
	while (start < end) {
		size_t chunk = end - start;
		if (chunk > sizeof vec * (size_t)pg)
			chunk = sizeof vec * (size_t)pg;
		if (mincore((void *)start, chunk, vec))
			return 0;
		start += (chunk + (size_t)pg - 1) & ~(size_t)(pg - 1);
	}
	return 1;
}

#define SV_ACCESS_SUPPORTED                                                                                   \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | \
	 IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB | IBV_ACCESS_OPTIONAL_RANGE)

static int sv_check_mr_args(void *addr, size_t length, unsigned int access)
{
	if (access & ~(unsigned)SV_ACCESS_SUPPORTED) /* MW_BIND, ON_DEMAND: not supported by this device */
		return EINVAL;
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	if (length == 0 || length > (1ull << 40))
		return EINVAL;
	if (!sv_range_mapped(addr, length))
		return EFAULT;
	return 0;
}

static struct ibv_mr *sv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	int err = sv_check_mr_args(addr, length, access);
	if (err) {
		errno = err;
		return NULL;
	}
	struct svc_mr *mr = calloc(1, sizeof *mr);
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	struct svp_mr_req r = {.pd = pd->handle, .access = access, .addr = (uintptr_t)addr, .len = length, .iova = iova};
	struct svp_mr_rep rep;
	err = svc_call(svc(pd->context), SVP_REG_MR, &r, sizeof r, &rep, sizeof rep);
	if (err) {
		free(mr);
		errno = err;
		return NULL;
	}
	mr->access = access;
	mr->mr.context = pd->context;
	mr->mr.pd = pd;
	mr->mr.addr = addr;
	mr->mr.length = length;
	mr->mr.handle = rep.handle;
	mr->mr.lkey = rep.lkey;
	mr->mr.rkey = rep.rkey;
	return &mr->mr;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return sv_reg_mr(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return sv_reg_mr(pd, addr, length, iova, (unsigned)access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	return sv_reg_mr(pd, addr, length, iova, access);
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
				 int access)
{
	(void)pd, (void)offset, (void)length, (void)iova, (void)fd, (void)access;
	errno = EOPNOTSUPP;
	return NULL;
}

int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct svc_mr *mr = (struct svc_mr *)ibmr;
	if (!flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	void *naddr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? addr : ibmr->addr;
	size_t nlen = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? length : ibmr->length;
	unsigned nacc = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? (unsigned)access : mr->access;
	int err = sv_check_mr_args(naddr, nlen, nacc);
	if (err || ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->context != ibmr->context))) {
		errno = err ? err : EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	struct svp_mr_req r = {.pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd->handle : 0,
			       .access = nacc,
			       .addr = (uintptr_t)naddr,
			       .len = nlen,
			       .mr = ibmr->handle,
			       .flags = flags};
	err = svc_call(svc(ibmr->context), SVP_REREG_MR, &r, sizeof r, NULL, 0);
	if (err) {
		errno = err;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		ibmr->pd = pd;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		ibmr->addr = naddr;
		ibmr->length = nlen;
	}
	mr->access = nacc;
	return 0;
}

int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct svp_h h = {.handle = ibmr->handle};
	int err = svc_call(svc(ibmr->context), SVP_DEREG_MR, &h, sizeof h, NULL, 0);
	if (err)
		return err;
	free(ibmr);
	return 0;
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd, (void)mr_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context, (void)dm_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}

/* ---- completion channel: a pipe whose write end the daemon holds (it writes CQ handles) ---- */
struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct svc_ch *ch = calloc(1, sizeof *ch);
	int fds[2];
	if (!ch || pipe2(fds, O_CLOEXEC)) {
		free(ch);
		errno = ENOMEM;
		return NULL;
	}
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	struct svp_h h;
	int err = svc_call_fd(svc(context), SVP_CREATE_CH, NULL, 0, fds[1], &h, sizeof h, NULL, NULL);
	close(fds[1]);
	if (err) {
		close(fds[0]);
		free(ch);
		errno = err;
		return NULL;
	}
	ch->ch.context = context;
	ch->ch.fd = fds[0];
	ch->ch.refcnt = 0;
	ch->handle = h.handle;
	return &ch->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct svc_ch *ch = (struct svc_ch *)channel;
	struct svc_ctx *c = svc(channel->context);
	pthread_mutex_lock(&c->map_lock);
	int busy = channel->refcnt != 0;
	pthread_mutex_unlock(&c->map_lock);
	if (busy)
		return EBUSY;
	struct svp_h h = {.handle = ch->handle};
	int err = svc_call(c, SVP_DESTROY_CH, &h, sizeof h, NULL, 0);
	if (err)
		return err;
	close(channel->fd);
	free(ch);
	return 0;
}

/* ---- CQ: a ring in a memfd the daemon shares with us ---- */
static struct svp_cqring *svc_map_ring(int fd, uint64_t len)
{
	if (fd < 0)
		return NULL;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static struct svc_cq *sv_cq_new(struct ibv_context *context, int cqe, void *cq_context,
				struct ibv_comp_channel *channel, int comp_vector, int with_ts)
{
	struct svc_ctx *c = svc(context);
	if (cqe < 1 || cqe > SV_MAX_CQE || comp_vector < 0 || comp_vector >= context->num_comp_vectors ||
	    (channel && channel->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	struct svc_cq *cq = calloc(1, sizeof *cq);
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	struct svp_cq_req r = {.cqe = (uint32_t)cqe,
			       .channel = channel ? ((struct svc_ch *)channel)->handle : 0,
			       .with_ts = (uint32_t)with_ts};
	struct svp_cq_rep rep;
	int fd = -1;
	int err = svc_call_fd(c, SVP_CREATE_CQ, &r, sizeof r, -1, &rep, sizeof rep, &fd, NULL);
	if (!err && !(cq->ring = svc_map_ring(fd, rep.map_len))) {
		struct svp_h h = {.handle = rep.handle};
		svc_call(c, SVP_DESTROY_CQ, &h, sizeof h, NULL, 0);
		err = ENOMEM;
	} else if (err && fd >= 0) {
		close(fd);
	}
	if (err) {
		free(cq);
		errno = err;
		return NULL;
	}
	cq->ring_len = rep.map_len;
	cq->ctx = c;
	cq->chan = (struct svc_ch *)channel;
	pthread_mutex_init(&cq->poll_lock, NULL);
	cq->cq.context = context;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = (int)rep.cap;
	cq->cq.handle = rep.handle;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	pthread_mutex_lock(&c->map_lock);
	sv_ht_put(&c->objs, rep.handle, cq);
	if (channel)
		channel->refcnt++;
	pthread_mutex_unlock(&c->map_lock);
	return cq;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context, struct ibv_comp_channel *channel,
			     int comp_vector)
{
	struct svc_cq *cq = sv_cq_new(context, cqe, cq_context, channel, comp_vector, 0);
	return cq ? &cq->cq : NULL;
}

/* take up to n entries; the caller holds poll_lock */
static uint32_t svc_cq_take(struct svc_cq *cq, uint32_t n, struct ibv_wc *wc, uint64_t *ts)
{
	struct svp_cqring *r = cq->ring;
	uint64_t head = r->head;
	uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	uint64_t k = tail - head < n ? tail - head : n;
	for (uint64_t i = 0; i < k; i++) {
		const struct svp_cqe *e = &r->e[(head + i) % r->cap];
		wc[i] = e->wc;
		if (ts)
			ts[i] = e->ts;
	}
	__atomic_store_n(&r->head, head + k, __ATOMIC_RELEASE); /* the daemon may reuse the slots */
	return (uint32_t)k;
}

static int svc_cq_empty(struct svc_cq *cq)
{
	struct svp_cqring *r = cq->ring;
	return __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) == __atomic_load_n(&r->head, __ATOMIC_RELAXED);
}

static int sv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct svc_cq *cq = (struct svc_cq *)ibcq;
	if (n <= 0)
		return n < 0 ? -1 : 0;
	if (svc_cq_empty(cq)) {
		/* A busy-polling program would starve the daemon (our "HCA") on a small host: give the CPU
		 * away now and then. Invisible to the program except as latency. */
		if ((__atomic_add_fetch(&cq->empty_polls, 1, __ATOMIC_RELAXED) & 15) == 0)
			sched_yield();
		return 0;
	}
	pthread_mutex_lock(&cq->poll_lock);
	uint32_t k = svc_cq_take(cq, (uint32_t)n, wc, NULL);
	pthread_mutex_unlock(&cq->poll_lock);
	return (int)k;
}

static int sv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct svc_cq *cq = (struct svc_cq *)ibcq;
	uint32_t *armed = &cq->ring->armed;
	if (!solicited_only) {
		__atomic_store_n(armed, 1, __ATOMIC_SEQ_CST);
	} else {
		uint32_t zero = 0;
		__atomic_compare_exchange_n(armed, &zero, 2, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	}
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct svc_ctx *c = svc(channel->context);
	for (;;) {
		uint32_t h;
		ssize_t r = read(channel->fd, &h, sizeof h);
		if (r != (ssize_t)sizeof h)
			return -1; /* EINTR, EAGAIN (O_NONBLOCK) ... as with the kernel's event file */
		pthread_mutex_lock(&c->map_lock);
		struct svc_cq *x = sv_ht_get(&c->objs, h);
		if (x && x->chan && &x->chan->ch == channel) {
			x->events_read++;
			*cq = &x->cq;
			*cq_context = x->cq.cq_context;
			pthread_mutex_unlock(&c->map_lock);
			return 0;
		}
		pthread_mutex_unlock(&c->map_lock); /* event of a CQ destroyed meanwhile */
	}
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct svc_cq *cq = (struct svc_cq *)ibcq;
	if (cqe < 1 || cqe > SV_MAX_CQE)
		return EINVAL;
	pthread_mutex_lock(&cq->poll_lock); /* the daemon copies the unread entries into the new ring */
	struct svp_cq_req r = {.cq = ibcq->handle, .cqe = (uint32_t)cqe};
	struct svp_cq_rep rep;
	int fd = -1;
	int err = svc_call_fd(cq->ctx, SVP_RESIZE_CQ, &r, sizeof r, -1, &rep, sizeof rep, &fd, NULL);
	if (!err) {
		struct svp_cqring *n = svc_map_ring(fd, rep.map_len);
		if (!n) {
			err = ENOMEM; /* the daemon switched rings: this CQ cannot be read any more */
		} else {
			munmap(cq->ring, cq->ring_len);
			cq->ring = n;
			cq->ring_len = rep.map_len;
			ibcq->cqe = (int)rep.cap;
		}
	} else if (fd >= 0) {
		close(fd);
	}
	pthread_mutex_unlock(&cq->poll_lock);
	return err;
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct svc_cq *cq = (struct svc_cq *)ibcq;
	struct svc_ctx *c = cq->ctx;
	struct svp_h h = {.handle = ibcq->handle};
	int err = svc_call(c, SVP_DESTROY_CQ, &h, sizeof h, NULL, 0);
	if (err)
		return err;
	pthread_mutex_lock(&c->map_lock);
	sv_ht_del(&c->objs, ibcq->handle);
	if (cq->chan)
		cq->chan->ch.refcnt--;
	uint32_t want_comp = cq->events_read, want_async = cq->async_reported;
	pthread_mutex_unlock(&c->map_lock);
	/* as libibverbs: wait until every event handed out was acknowledged */
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != want_comp || ibcq->async_events_completed != want_async)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	munmap(cq->ring, cq->ring_len);
	free(cq);
	return 0;
}

/* ---- the extended CQ (ibv_create_cq_ex / ibv_start_poll ...) ---- */
static struct svc_cq *sv_cqx(struct ibv_cq_ex *x)
{
	return (struct svc_cq *)x;
}

static int sv_cqx_next(struct ibv_cq_ex *x)
{
	struct svc_cq *cq = sv_cqx(x);
	if (svc_cq_empty(cq))
		return ENOENT;
	pthread_mutex_lock(&cq->poll_lock);
	uint32_t k = svc_cq_take(cq, 1, &cq->cur, &cq->cur_ts);
	pthread_mutex_unlock(&cq->poll_lock);
	if (!k)
		return ENOENT;
	x->wr_id = cq->cur.wr_id;
	x->status = cq->cur.status;
	return 0;
}

static int sv_cqx_start(struct ibv_cq_ex *x, struct ibv_poll_cq_attr *attr)
{
	if (attr && attr->comp_mask)
		return EINVAL;
	int r = sv_cqx_next(x);
	if (r == ENOENT && (__atomic_add_fetch(&sv_cqx(x)->empty_polls, 1, __ATOMIC_RELAXED) & 15) == 0)
		sched_yield(); /* see sv_poll_cq */
	return r;
}

static void sv_cqx_end(struct ibv_cq_ex *x)
{
	(void)x;
}

static enum ibv_wc_opcode sv_cqx_opcode(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.opcode;
}
static uint32_t sv_cqx_vendor_err(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.vendor_err;
}
static uint32_t sv_cqx_byte_len(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.byte_len;
}
static __be32 sv_cqx_imm(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.imm_data;
}
static uint32_t sv_cqx_qp_num(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.qp_num;
}
static uint32_t sv_cqx_src_qp(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.src_qp;
}
static unsigned int sv_cqx_wc_flags(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.wc_flags;
}
static uint32_t sv_cqx_slid(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.slid;
}
static uint8_t sv_cqx_sl(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.sl;
}
static uint8_t sv_cqx_dlid_path_bits(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur.dlid_path_bits;
}
static uint64_t sv_cqx_ts(struct ibv_cq_ex *x)
{
	return sv_cqx(x)->cur_ts;
}
static uint64_t sv_cqx_wallclock(struct ibv_cq_ex *x)
{
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	uint64_t now_rt = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
	return now_rt - (sv_now_ns() - sv_cqx(x)->cur_ts);
}
static uint16_t sv_cqx_cvlan(struct ibv_cq_ex *x)
{
	(void)x;
	return 0;
}
static uint32_t sv_cqx_flow_tag(struct ibv_cq_ex *x)
{
	(void)x;
	return 0;
}
static void sv_cqx_tm_info(struct ibv_cq_ex *x, struct ibv_wc_tm_info *tm)
{
	(void)x;
	memset(tm, 0, sizeof *tm);
}

#define SV_CQX_WC_FLAGS                                                                                  \
	(IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

static struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *a)
{
	/* supported: the standard fields and timestamps; not: CVLAN, flow tag, tag matching, parent domains */
	if ((a->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS) || (a->wc_flags & ~(uint64_t)SV_CQX_WC_FLAGS) ||
	    ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     (a->flags & ~(uint32_t)(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->cqe > SV_MAX_CQE || a->comp_vector > INT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	int ts = (a->wc_flags & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)) != 0;
	struct svc_cq *cq = sv_cq_new(context, (int)a->cqe, a->cq_context, a->channel, (int)a->comp_vector, ts);
	if (!cq)
		return NULL;
	struct ibv_cq_ex *x = &cq->x;
	x->comp_mask = 0;
	x->start_poll = sv_cqx_start;
	x->next_poll = sv_cqx_next;
	x->end_poll = sv_cqx_end;
	x->read_opcode = sv_cqx_opcode;
	x->read_vendor_err = sv_cqx_vendor_err;
	x->read_byte_len = sv_cqx_byte_len;
	x->read_imm_data = sv_cqx_imm;
	x->read_qp_num = sv_cqx_qp_num;
	x->read_src_qp = sv_cqx_src_qp;
	x->read_wc_flags = sv_cqx_wc_flags;
	x->read_slid = sv_cqx_slid;
	x->read_sl = sv_cqx_sl;
	x->read_dlid_path_bits = sv_cqx_dlid_path_bits;
	x->read_completion_ts = sv_cqx_ts;
	x->read_cvlan = sv_cqx_cvlan;
	x->read_flow_tag = sv_cqx_flow_tag;
	x->read_tm_info = sv_cqx_tm_info;
	x->read_completion_wallclock_ns = sv_cqx_wallclock;
	return x;
}

/* the device clock is CLOCK_MONOTONIC in nanoseconds */
static int sv_query_rt_values(struct ibv_context *context, struct ibv_values_ex *v)
{
	(void)context;
	if (v->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (v->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		uint64_t ns = sv_now_ns();
		v->raw_clock.tv_sec = (time_t)(ns / 1000000000ull);
		v->raw_clock.tv_nsec = (long)(ns % 1000000000ull);
	}
	return 0;
}

/* ---- posting receive WRs (QP and SRQ) ---- */
static int svc_post_recv_list(struct svc_ctx *c, uint32_t op, uint32_t obj, struct ibv_recv_wr *wr,
			      struct ibv_recv_wr **bad)
{
	size_t len = sizeof(struct svp_post_req);
	uint32_t n = 0;
	int cerr = 0;
	struct ibv_recv_wr *cbad = NULL;
	for (struct ibv_recv_wr *w = wr; w; w = w->next) {
		if (w->num_sge < 0 || w->num_sge > SV_MAX_SGE) {
			cerr = EINVAL;
			cbad = w;
			break;
		}
		len += sizeof(struct svp_rwr) + (size_t)w->num_sge * sizeof(struct ibv_sge);
		n++;
	}
	int err = 0;
	if (n) {
		uint8_t *buf = malloc(len);
		if (!buf) {
			*bad = wr;
			return ENOMEM;
		}
		struct svp_post_req *pr = (void *)buf;
		pr->obj = obj;
		pr->n = n;
		size_t off = sizeof *pr;
		struct ibv_recv_wr *w = wr;
		for (uint32_t i = 0; i < n; i++, w = w->next) {
			struct svp_rwr r = {.wr_id = w->wr_id, .num_sge = w->num_sge};
			memcpy(buf + off, &r, sizeof r);
			off += sizeof r;
			memcpy(buf + off, w->sg_list, (size_t)w->num_sge * sizeof(struct ibv_sge));
			off += (size_t)w->num_sge * sizeof(struct ibv_sge);
		}
		uint32_t idx = 0;
		err = svc_call_fd(c, op, buf, len, -1, NULL, 0, NULL, &idx);
		free(buf);
		if (err) {
			w = wr;
			for (uint32_t i = 0; i < idx && w->next; i++)
				w = w->next;
			*bad = w;
			return err;
		}
	}
	if (cerr)
		*bad = cbad;
	return cerr;
}

static int svl_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct svc_qp *q = (struct svc_qp *)qp;
	return svc_post_recv_list(q->ctx, SVP_POST_RECV, qp->handle, wr, bad);
}

static int svl_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return svc_post_recv_list(svc(srq->context), SVP_POST_SRQ_RECV, srq->handle, wr, bad);
}

/* ---- SRQ ---- */
struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *init)
{
	struct svc_ctx *c = svc(pd->context);
	struct svc_srq *s = calloc(1, sizeof *s);
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	struct svp_srq_req r = {.pd = pd->handle,
				.max_wr = init->attr.max_wr,
				.max_sge = init->attr.max_sge,
				.srq_limit = init->attr.srq_limit};
	struct svp_srq_rep rep;
	int err = svc_call(c, SVP_CREATE_SRQ, &r, sizeof r, &rep, sizeof rep);
	if (err) {
		free(s);
		errno = err;
		return NULL;
	}
	s->srq.context = pd->context;
	s->srq.srq_context = init->srq_context;
	s->srq.pd = pd;
	s->srq.handle = rep.handle;
	pthread_mutex_init(&s->srq.mutex, NULL);
	pthread_cond_init(&s->srq.cond, NULL);
	init->attr.max_sge = rep.max_sge;
	svc_map_put(c, rep.handle, s);
	return &s->srq;
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	struct svp_srq_req r = {.srq = srq->handle, .max_wr = attr->max_wr, .srq_limit = attr->srq_limit, .mask = mask};
	return svc_call(svc(srq->context), SVP_MODIFY_SRQ, &r, sizeof r, NULL, 0);
}

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct svp_h h = {.handle = srq->handle};
	struct svp_srq_rep rep;
	int err = svc_call(svc(srq->context), SVP_QUERY_SRQ, &h, sizeof h, &rep, sizeof rep);
	if (err)
		return err;
	attr->max_wr = rep.max_wr;
	attr->max_sge = rep.max_sge;
	attr->srq_limit = rep.srq_limit;
	return 0;
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
	struct svc_srq *s = (struct svc_srq *)srq;
	struct svc_ctx *c = svc(srq->context);
	struct svp_h h = {.handle = srq->handle};
	int err = svc_call(c, SVP_DESTROY_SRQ, &h, sizeof h, NULL, 0);
	if (err)
		return err;
	pthread_mutex_lock(&c->map_lock);
	sv_ht_del(&c->objs, srq->handle);
	uint32_t want = s->events_reported;
	pthread_mutex_unlock(&c->map_lock);
	pthread_mutex_lock(&srq->mutex);
	while (srq->events_completed != want)
		pthread_cond_wait(&srq->cond, &srq->mutex);
	pthread_mutex_unlock(&srq->mutex);
	free(s);
	return 0;
}

/* ---- AH ---- */
struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibv_ah *ah = calloc(1, sizeof *ah);
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	struct svp_ah_req r;
	memset(&r, 0, sizeof r);
	r.pd = pd->handle;
	r.attr = *attr;
	struct svp_h h;
	int err = svc_call(svc(pd->context), SVP_CREATE_AH, &r, sizeof r, &h, sizeof h);
	if (err) {
		free(ah);
		errno = err;
		return NULL;
	}
	ah->context = pd->context;
	ah->pd = pd;
	ah->handle = h.handle;
	return ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	struct svp_h h = {.handle = ah->handle};
	int err = svc_call(svc(ah->context), SVP_DESTROY_AH, &h, sizeof h, NULL, 0);
	if (err)
		return err;
	free(ah);
	return 0;
}

int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *ah_attr)
{
	memset(ah_attr, 0, sizeof *ah_attr);
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (wc->wc_flags & IBV_WC_GRH) {
		union ibv_gid mine;
		if (ibv_query_gid(context, port_num, 0, &mine) || memcmp(&mine, &grh->dgid, sizeof mine)) {
			errno = EINVAL;
			return -1;
		}
		uint32_t flow = be32toh(grh->version_tclass_flow);
		ah_attr->is_global = 1;
		ah_attr->grh.dgid = grh->sgid;
		ah_attr->grh.flow_label = flow & 0xfffff;
		ah_attr->grh.sgid_index = 0;
		ah_attr->grh.hop_limit = 0xff;
		ah_attr->grh.traffic_class = (uint8_t)(flow >> 20);
	}
	return 0;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr a;
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a))
		return NULL;
	return ibv_create_ah(pd, &a);
}

int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr, uint8_t eth_mac[6],
				uint16_t *vid)
{
	(void)context, (void)attr, (void)eth_mac, (void)vid;
	return EINVAL; /* an InfiniBand port has no Ethernet L2 address */
}

/* UD multicast is not modelled */
int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp, (void)gid, (void)lid;
	return EOPNOTSUPP;
}

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp, (void)gid, (void)lid;
	return EOPNOTSUPP;
}

/* ---- QP: posting send WRs ---- */
static int svl_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct svc_qp *q = (struct svc_qp *)ibqp;
	size_t len = sizeof(struct svp_post_req);
	uint32_t n = 0;
	int cerr = 0;
	struct ibv_send_wr *cbad = NULL;
	/* what must be known to copy the WR (and its inline data, copied now: the buffer is free on return) */
	for (struct ibv_send_wr *w = wr; w; w = w->next) {
		uint64_t total = 0;
		if (w->num_sge < 0 || (uint32_t)w->num_sge > q->cap.max_send_sge) {
			cerr = EINVAL;
			cbad = w;
			break;
		}
		for (int i = 0; i < w->num_sge; i++)
			total += w->sg_list[i].length;
		if ((w->send_flags & IBV_SEND_INLINE) && total > q->cap.max_inline_data) {
			cerr = EINVAL;
			cbad = w;
			break;
		}
		len += sizeof(struct svp_swr) + (size_t)w->num_sge * sizeof(struct ibv_sge);
		if (w->send_flags & IBV_SEND_INLINE)
			len += (total + 7) & ~7ull;
		n++;
	}
	if (n) {
		uint8_t stackbuf[4096];
		uint8_t *buf = len <= sizeof stackbuf ? stackbuf : malloc(len);
		if (!buf) {
			*bad = wr;
			return ENOMEM;
		}
		struct svp_post_req pr = {.obj = ibqp->handle, .n = n};
		memcpy(buf, &pr, sizeof pr);
		size_t off = sizeof pr;
		struct ibv_send_wr *w = wr;
		for (uint32_t i = 0; i < n; i++, w = w->next) {
			struct svp_swr s;
			memset(&s, 0, sizeof s);
			s.wr_id = w->wr_id;
			s.opcode = w->opcode;
			s.send_flags = w->send_flags;
			s.imm = w->imm_data;
			s.num_sge = w->num_sge;
			if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
				s.raddr = w->wr.atomic.remote_addr;
				s.rkey = w->wr.atomic.rkey;
				s.cmp_add = w->wr.atomic.compare_add;
				s.swap = w->wr.atomic.swap;
			} else if (ibqp->qp_type == IBV_QPT_UD) {
				s.ah = w->wr.ud.ah ? w->wr.ud.ah->handle : 0;
				s.remote_qpn = w->wr.ud.remote_qpn;
				s.remote_qkey = w->wr.ud.remote_qkey;
			} else {
				s.raddr = w->wr.rdma.remote_addr;
				s.rkey = w->wr.rdma.rkey;
			}
			size_t sl = (size_t)w->num_sge * sizeof(struct ibv_sge);
			memcpy(buf + off + sizeof s, w->sg_list, sl);
			uint64_t total = 0;
			if (w->send_flags & IBV_SEND_INLINE) {
				uint8_t *d = buf + off + sizeof s + sl;
				for (int k = 0; k < w->num_sge; k++) {
					memcpy(d + total, (void *)(uintptr_t)w->sg_list[k].addr, w->sg_list[k].length);
					total += w->sg_list[k].length;
				}
				s.inl_len = (uint32_t)total;
				memset(d + total, 0, ((total + 7) & ~7ull) - total);
				total = (total + 7) & ~7ull;
			}
			memcpy(buf + off, &s, sizeof s);
			off += sizeof s + sl + total;
		}
		uint32_t idx = 0;
		int err = svc_call_fd(q->ctx, SVP_POST_SEND, buf, len, -1, NULL, 0, NULL, &idx);
		if (buf != stackbuf)
			free(buf);
		if (err) {
			w = wr;
			for (uint32_t i = 0; i < idx && w->next; i++)
				w = w->next;
			*bad = w;
			return err;
		}
	}
	if (cerr)
		*bad = cbad;
	return cerr;
}

/* ---- the ibv_qp_ex "new post send" interface: WRs are collected, then posted as a list ---- */
static struct svc_qp *sv_qx(struct ibv_qp_ex *qx)
{
	return (struct svc_qp *)qx;
}

static void sv_wrb_clear(struct sv_wrb *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->lists[i]);
		free(b->inl[i]);
		b->lists[i] = NULL;
		b->inl[i] = NULL;
	}
	b->n = 0;
	b->err = 0;
}

static struct ibv_send_wr *sv_wrb_new(struct ibv_qp_ex *qx, enum ibv_wr_opcode op)
{
	struct sv_wrb *b = &sv_qx(qx)->wrb;
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 16;
		struct ibv_send_wr *w = realloc(b->wrs, nc * sizeof *w);
		struct ibv_sge *s = w ? realloc(b->sges, nc * sizeof *s) : NULL;
		struct ibv_sge **l = s ? realloc(b->lists, nc * sizeof *l) : NULL;
		uint8_t **in = l ? realloc(b->inl, nc * sizeof *in) : NULL;
		if (w)
			b->wrs = w;
		if (s)
			b->sges = s;
		if (l)
			b->lists = l;
		if (!in) {
			b->err = ENOMEM;
			return NULL;
		}
		b->inl = in;
		for (size_t i = b->cap; i < nc; i++)
			b->lists[i] = NULL, b->inl[i] = NULL;
		b->cap = nc;
	}
	struct ibv_send_wr *w = &b->wrs[b->n];
	memset(w, 0, sizeof *w);
	memset(&b->sges[b->n], 0, sizeof b->sges[b->n]);
	w->wr_id = qx->wr_id;
	w->send_flags = qx->wr_flags;
	w->opcode = op;
	b->n++;
	return w;
}

static struct ibv_send_wr *sv_wrb_cur(struct ibv_qp_ex *qx)
{
	struct sv_wrb *b = &sv_qx(qx)->wrb;
	if (!b->n) {
		b->err = EINVAL;
		return NULL;
	}
	return &b->wrs[b->n - 1];
}

static void sv_wr_start(struct ibv_qp_ex *qx)
{
	sv_wrb_clear(&sv_qx(qx)->wrb);
}

static void sv_wr_abort(struct ibv_qp_ex *qx)
{
	sv_wrb_clear(&sv_qx(qx)->wrb);
}

static int sv_wr_complete(struct ibv_qp_ex *qx)
{
	struct svc_qp *q = sv_qx(qx);
	struct sv_wrb *b = &q->wrb;
	int err = b->err;
	if (!err && b->n) {
		for (size_t i = 0; i < b->n; i++) {
			struct ibv_send_wr *w = &b->wrs[i];
			w->next = i + 1 < b->n ? &b->wrs[i + 1] : NULL;
			if (b->lists[i])
				w->sg_list = b->lists[i];
			else
				w->sg_list = &b->sges[i];
		}
		struct ibv_send_wr *bad;
		err = svl_post_send(&q->ex.qp_base, b->wrs, &bad);
	}
	sv_wrb_clear(b);
	return err;
}

static void sv_wr_send(struct ibv_qp_ex *qx)
{
	sv_wrb_new(qx, IBV_WR_SEND);
}

static void sv_wr_send_imm(struct ibv_qp_ex *qx, __be32 imm)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_SEND_WITH_IMM);
	if (w)
		w->imm_data = imm;
}

static void sv_wr_rdma_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_RDMA_WRITE);
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = raddr;
}

static void sv_wr_rdma_write_imm(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr, __be32 imm)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_RDMA_WRITE_WITH_IMM);
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = raddr, w->imm_data = imm;
}

static void sv_wr_rdma_read(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_RDMA_READ);
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = raddr;
}

static void sv_wr_cmp_swp(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr, uint64_t cmp, uint64_t swap)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_ATOMIC_CMP_AND_SWP);
	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = raddr;
		w->wr.atomic.compare_add = cmp;
		w->wr.atomic.swap = swap;
	}
}

static void sv_wr_fetch_add(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr, uint64_t add)
{
	struct ibv_send_wr *w = sv_wrb_new(qx, IBV_WR_ATOMIC_FETCH_AND_ADD);
	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = raddr;
		w->wr.atomic.compare_add = add;
	}
}

static void sv_wr_set_ud_addr(struct ibv_qp_ex *qx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct ibv_send_wr *w = sv_wrb_cur(qx);
	if (w)
		w->wr.ud.ah = ah, w->wr.ud.remote_qpn = qpn, w->wr.ud.remote_qkey = qkey;
}

static void sv_wr_set_sge(struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct sv_wrb *b = &sv_qx(qx)->wrb;
	struct ibv_send_wr *w = sv_wrb_cur(qx);
	if (!w)
		return;
	b->sges[b->n - 1] = (struct ibv_sge){.addr = addr, .length = length, .lkey = lkey};
	w->num_sge = 1;
}

static void sv_wr_set_sge_list(struct ibv_qp_ex *qx, size_t num, const struct ibv_sge *list)
{
	struct sv_wrb *b = &sv_qx(qx)->wrb;
	struct ibv_send_wr *w = sv_wrb_cur(qx);
	if (!w)
		return;
	if (num > SV_MAX_SGE) {
		b->err = EINVAL;
		return;
	}
	struct ibv_sge *l = malloc((num ? num : 1) * sizeof *l);
	if (!l) {
		b->err = ENOMEM;
		return;
	}
	memcpy(l, list, num * sizeof *l);
	free(b->lists[b->n - 1]);
	b->lists[b->n - 1] = l;
	w->num_sge = (int)num;
}

static void sv_wr_set_inline_list(struct ibv_qp_ex *qx, size_t num, const struct ibv_data_buf *bufs)
{
	struct sv_wrb *b = &sv_qx(qx)->wrb;
	struct ibv_send_wr *w = sv_wrb_cur(qx);
	if (!w)
		return;
	size_t total = 0;
	for (size_t i = 0; i < num; i++)
		total += bufs[i].length;
	uint8_t *d = malloc(total ? total : 1);
	if (!d) {
		b->err = ENOMEM;
		return;
	}
	size_t off = 0;
	for (size_t i = 0; i < num; i++) {
		memcpy(d + off, bufs[i].addr, bufs[i].length);
		off += bufs[i].length;
	}
	free(b->inl[b->n - 1]);
	b->inl[b->n - 1] = d;
	b->sges[b->n - 1] = (struct ibv_sge){.addr = (uintptr_t)d, .length = (uint32_t)total, .lkey = 0};
	w->num_sge = 1;
	w->send_flags |= IBV_SEND_INLINE;
}

static void sv_wr_set_inline(struct ibv_qp_ex *qx, void *addr, size_t length)
{
	struct ibv_data_buf b = {.addr = addr, .length = length};
	sv_wr_set_inline_list(qx, 1, &b);
}

static void sv_wr_unsupported_mw(struct ibv_qp_ex *qx, struct ibv_mw *mw, uint32_t rkey,
				 const struct ibv_mw_bind_info *info)
{
	(void)mw, (void)rkey, (void)info;
	sv_qx(qx)->wrb.err = EOPNOTSUPP;
}

static void sv_wr_unsupported_u32(struct ibv_qp_ex *qx, uint32_t v)
{
	(void)v;
	sv_qx(qx)->wrb.err = EOPNOTSUPP;
}

static void sv_wr_unsupported_tso(struct ibv_qp_ex *qx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr, (void)hdr_sz, (void)mss;
	sv_qx(qx)->wrb.err = EOPNOTSUPP;
}

static void sv_wr_unsupported_aw(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t raddr, const void *wr)
{
	(void)rkey, (void)raddr, (void)wr;
	sv_qx(qx)->wrb.err = EOPNOTSUPP;
}

static void sv_qp_ex_init(struct svc_qp *q)
{
	struct ibv_qp_ex *x = &q->ex;
	x->wr_atomic_cmp_swp = sv_wr_cmp_swp;
	x->wr_atomic_fetch_add = sv_wr_fetch_add;
	x->wr_bind_mw = sv_wr_unsupported_mw;
	x->wr_local_inv = sv_wr_unsupported_u32;
	x->wr_rdma_read = sv_wr_rdma_read;
	x->wr_rdma_write = sv_wr_rdma_write;
	x->wr_rdma_write_imm = sv_wr_rdma_write_imm;
	x->wr_send = sv_wr_send;
	x->wr_send_imm = sv_wr_send_imm;
	x->wr_send_inv = sv_wr_unsupported_u32;
	x->wr_send_tso = sv_wr_unsupported_tso;
	x->wr_set_ud_addr = sv_wr_set_ud_addr;
	x->wr_set_xrc_srqn = sv_wr_unsupported_u32;
	x->wr_set_inline_data = sv_wr_set_inline;
	x->wr_set_inline_data_list = sv_wr_set_inline_list;
	x->wr_set_sge = sv_wr_set_sge;
	x->wr_set_sge_list = sv_wr_set_sge_list;
	x->wr_start = sv_wr_start;
	x->wr_complete = sv_wr_complete;
	x->wr_abort = sv_wr_abort;
	x->wr_atomic_write = sv_wr_unsupported_aw;
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct svc_qp *q = (struct svc_qp *)qp;
	return q->is_ex ? &q->ex : NULL;
}

/* ---------------------------------------------------------------------------------------------------- */
/* create / destroy / query / modify                                                                     */

/* ---- QP: create / destroy / query / modify ---- */
static struct ibv_qp *sv_create_qp_common(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a, int is_ex)
{
	struct svc_ctx *c = svc(ctx);
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP; /* XRC, raw packet: not modelled */
		return NULL;
	}
	if (!a->pd || a->pd->context != ctx || !a->send_cq || !a->recv_cq || a->send_cq->context != ctx ||
	    a->recv_cq->context != ctx || (a->srq && a->srq->context != ctx)) {
		errno = EINVAL;
		return NULL;
	}
	struct svc_qp *q = calloc(1, sizeof *q);
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	struct svp_qp_req r = {.pd = a->pd->handle,
			       .scq = a->send_cq->handle,
			       .rcq = a->recv_cq->handle,
			       .srq = a->srq ? a->srq->handle : 0,
			       .type = a->qp_type,
			       .sq_sig_all = a->sq_sig_all,
			       .is_ex = (uint32_t)is_ex,
			       .send_ops_flags = a->send_ops_flags,
			       .cap = a->cap};
	struct svp_qp_rep rep;
	int err = svc_call(c, SVP_CREATE_QP, &r, sizeof r, &rep, sizeof rep);
	if (err) {
		free(q);
		errno = err;
		return NULL;
	}
	a->cap = rep.cap;
	q->ctx = c;
	q->cap = rep.cap;
	q->is_ex = is_ex;
	struct ibv_qp *qp = &q->ex.qp_base;
	qp->context = ctx;
	qp->qp_context = a->qp_context;
	qp->pd = a->pd;
	qp->send_cq = a->send_cq;
	qp->recv_cq = a->recv_cq;
	qp->srq = a->srq;
	qp->state = IBV_QPS_RESET;
	qp->qp_type = a->qp_type;
	qp->qp_num = rep.qpn;
	qp->handle = rep.handle;
	pthread_mutex_init(&qp->mutex, NULL);
	pthread_cond_init(&qp->cond, NULL);
	if (is_ex)
		sv_qp_ex_init(q);
	svc_map_put(c, rep.handle, q);
	return qp;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	struct ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof a);
	memcpy(&a, init, sizeof *init);
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	struct ibv_qp *qp = sv_create_qp_common(pd->context, &a, 0);
	if (qp)
		init->cap = a.cap;
	return qp;
}

static struct ibv_qp *sv_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
	uint32_t supported = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	if ((a->comp_mask & ~supported) || ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD)) {
		errno = EINVAL;
		return NULL;
	}
	int is_ex = 0;
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		uint64_t ok = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
		if (a->qp_type != IBV_QPT_UD)
			ok |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
		if (a->qp_type == IBV_QPT_RC)
			ok |= IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
		if (a->send_ops_flags & ~ok) {
			errno = EOPNOTSUPP;
			return NULL;
		}
		is_ex = 1;
	}
	return sv_create_qp_common(c, a, is_ex);
}

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct svc_qp *q = (struct svc_qp *)ibqp;
	struct svc_ctx *c = q->ctx;
	struct svp_h h = {.handle = ibqp->handle};
	int err = svc_call(c, SVP_DESTROY_QP, &h, sizeof h, NULL, 0);
	if (err)
		return err;
	pthread_mutex_lock(&c->map_lock);
	sv_ht_del(&c->objs, ibqp->handle);
	uint32_t want = q->events_reported;
	pthread_mutex_unlock(&c->map_lock);
	pthread_mutex_lock(&ibqp->mutex);
	while (ibqp->events_completed != want)
		pthread_cond_wait(&ibqp->cond, &ibqp->mutex);
	pthread_mutex_unlock(&ibqp->mutex);
	sv_wrb_clear(&q->wrb);
	free(q->wrb.wrs);
	free(q->wrb.sges);
	free(q->wrb.lists);
	free(q->wrb.inl);
	free(q);
	return 0;
}

int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_qp_init_attr *init)
{
	(void)attr_mask; /* everything is cheap to report */
	struct svp_h h = {.handle = ibqp->handle};
	struct svp_query_qp_rep rep;
	int err = svc_call(svc(ibqp->context), SVP_QUERY_QP, &h, sizeof h, &rep, sizeof rep);
	if (err)
		return err;
	*attr = rep.attr;
	if (init) {
		memset(init, 0, sizeof *init);
		init->qp_context = ibqp->qp_context;
		init->send_cq = ibqp->send_cq;
		init->recv_cq = ibqp->recv_cq;
		init->srq = ibqp->srq;
		init->cap = rep.attr.cap;
		init->qp_type = (enum ibv_qp_type)rep.type;
		init->sq_sig_all = rep.sq_sig_all;
	}
	return 0;
}

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct svp_modify_req r;
	memset(&r, 0, sizeof r);
	r.qp = ibqp->handle;
	r.mask = mask;
	r.attr = *attr;
	int err = svc_call(svc(ibqp->context), SVP_MODIFY_QP, &r, sizeof r, NULL, 0);
	if (err)
		return err;
	if (mask & IBV_QP_STATE)
		ibqp->state = attr->qp_state;
	return 0;
}

int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)op;
	if (flags)
		return 0;
	/* the responder places each message with one write, in order, before acknowledging it */
	return qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_UC;
}

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}
