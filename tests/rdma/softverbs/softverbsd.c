/* softverbsd: the softverbs "HCA", one per host (network namespace). It owns the device state (LID, GID,
 * GUID, QPs, CQs, SRQs, MRs and their keys), talks TCP to the daemons of other hosts, and moves data
 * in and out of the registered memory of the programs (process_vm_readv/writev). Programs reach it
 * through the softverbs libibverbs.so.1 over a Unix socket (sv_proto.h); it is not part of their
 * process tree, so a checkpoint of a program does not contain it — like a real HCA.
 *
 *   softverbsd [--foreground] [--socket PATH] [--idle SECONDS]
 *   softverbsd --stats [PATH]     print the object counts of a running daemon
 *   softverbsd --socket-path      print the default socket path of this network namespace
 *
 * Environment: SOFTVERBS_SOCK, SOFTVERBS_DIR (socket and LID registry directory, default /tmp/softverbs),
 * SOFTVERBSD_IDLE_S (exit after that many seconds without clients, default 30; 0 = never), and the
 * engine's variables (README.md). */
#include "sv.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define SVD_MAX_REQ (256u << 20)

static int g_sigpipe[2] = {-1, -1};

static void on_signal(int sig)
{
	char b = (char)sig;
	ssize_t r = write(g_sigpipe[1], &b, 1);
	(void)r;
}

static int read_full(int fd, void *buf, size_t len)
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

/* the header of a message, with the descriptor that may come with it */
static int recv_hdr(int fd, struct svp_hdr *h, int *rfd)
{
	*rfd = -1;
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	size_t off = 0;
	while (off < sizeof *h) {
		struct iovec v = {.iov_base = (uint8_t *)h + off, .iov_len = sizeof *h - off};
		struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof cb.b};
		ssize_t r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && *rfd < 0)
				memcpy(rfd, CMSG_DATA(c), sizeof(int));
		off += (size_t)r;
	}
	return 0;
}

static int send_msg(int fd, const void *a, size_t alen, const void *b, size_t blen, int sfd)
{
	struct iovec v[2] = {{.iov_base = (void *)a, .iov_len = alen}, {.iov_base = (void *)b, .iov_len = blen}};
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	struct msghdr m = {.msg_iov = v, .msg_iovlen = blen ? 2 : 1};
	if (sfd >= 0) {
		memset(&cb, 0, sizeof cb);
		m.msg_control = cb.b;
		m.msg_controllen = sizeof cb.b;
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &sfd, sizeof(int));
	}
	size_t total = alen + blen, done = 0;
	while (done < total) {
		ssize_t r = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
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
	return 0;
}

/* one thread per connected program context: requests in order, one at a time */
static void *client_main(void *arg)
{
	struct sv_context *ctx = arg;
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint8_t out[8192];
	for (;;) {
		struct svp_hdr h;
		int fd;
		if (recv_hdr(ctx->fd, &h, &fd))
			break;
		if (h.len < sizeof h || h.len - sizeof h > SVD_MAX_REQ) {
			if (fd >= 0)
				close(fd);
			break;
		}
		size_t blen = h.len - sizeof h;
		if (blen + 8 > cap) {
			free(buf);
			cap = blen + 8 > 4096 ? blen + 8 : 4096;
			buf = aligned_alloc(16, (cap + 15) & ~(size_t)15);
			if (!buf) {
				if (fd >= 0)
					close(fd);
				break;
			}
		}
		if (blen && read_full(ctx->fd, buf, blen)) {
			if (fd >= 0)
				close(fd);
			break;
		}
		size_t olen = sizeof out;
		int ofd = -1;
		uint32_t idx = 0;
		int rc = svd_call(ctx, h.op, buf, blen, fd, out, &olen, &ofd, &idx);
		struct svp_hdr r = {.len = (uint32_t)(sizeof r + olen), .op = h.op, .rc = rc, .idx = idx};
		int bad = send_msg(ctx->fd, &r, sizeof r, out, olen, ofd);
		if (ofd >= 0)
			close(ofd);
		if (bad)
			break;
	}
	free(buf);
	svd_client_gone(ctx);
	close(ctx->fd);
	free(ctx);
	return NULL;
}

static int usage(void)
{
	fprintf(stderr, "usage: softverbsd [--foreground] [--socket PATH] [--idle SECONDS]\n"
			"       softverbsd --stats [PATH]\n"
			"       softverbsd --socket-path\n");
	return 2;
}

static int stats(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
		fprintf(stderr, "softverbsd: %s: %s\n", path, strerror(errno));
		return 1;
	}
	struct svp_hdr h = {.len = sizeof h, .op = SVP_STATS};
	struct svp_hdr r;
	int rfd;
	if (send_msg(fd, &h, sizeof h, NULL, 0, -1) || recv_hdr(fd, &r, &rfd) || r.len < sizeof r || r.rc) {
		fprintf(stderr, "softverbsd: %s: no answer\n", path);
		return 1;
	}
	size_t n = r.len - sizeof r;
	char *t = calloc(1, n + 1);
	if (!t || read_full(fd, t, n))
		return 1;
	fputs(t, stdout);
	free(t);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	int foreground = 0;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	long idle = sv_env_long("SOFTVERBSD_IDLE_S", 30);
	if (sv_sock_path(path, sizeof path)) {
		fprintf(stderr, "softverbsd: socket path too long\n");
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--foreground")) {
			foreground = 1;
		} else if (!strcmp(argv[i], "--socket") && i + 1 < argc) {
			snprintf(path, sizeof path, "%s", argv[++i]);
		} else if (!strcmp(argv[i], "--idle") && i + 1 < argc) {
			idle = strtol(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--stats")) {
			return stats(i + 1 < argc ? argv[i + 1] : path);
		} else if (!strcmp(argv[i], "--socket-path")) {
			printf("%s\n", path);
			return 0;
		} else {
			return usage();
		}
	}
	sv_debug = (int)sv_env_long("SOFTVERBS_DEBUG", 0);

	/* not a child of whoever started us, not in its session (the library starts us like this too) */
	int ready[2] = {-1, -1};
	if (!foreground) {
		if (pipe(ready))
			return 1;
		pid_t p = fork();
		if (p < 0)
			return 1;
		if (p > 0) { /* wait until the daemon listens (or gave up) */
			close(ready[1]);
			while (waitpid(p, NULL, 0) < 0 && errno == EINTR) /* the middle process, gone at once */
				;
			char b = 1;
			ssize_t r = read(ready[0], &b, 1);
			return r == 1 ? b : 1;
		}
		close(ready[0]);
		setsid();
		if (fork() > 0)
			_exit(0);
		if (chdir("/"))
			_exit(1);
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			if (!sv_debug) {
				dup2(nul, 1);
				dup2(nul, 2);
			}
			if (nul > 2)
				close(nul);
		}
	}
	/* descriptors a starting program may have leaked to us */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != ready[1])
			close(fd);
	signal(SIGPIPE, SIG_IGN);

	char dir[sizeof path];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 01777) == 0)
			chmod(dir, 01777);
	}
	/* one daemon per socket: the lock file decides, a stale socket file is replaced */
	char lockpath[sizeof path + 8];
	snprintf(lockpath, sizeof lockpath, "%s.lock", path);
	int lk = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (lk < 0 || flock(lk, LOCK_EX | LOCK_NB)) {
		if (foreground)
			fprintf(stderr, "softverbsd: %s: %s\n", lockpath, lk < 0 ? strerror(errno) : "another daemon runs");
		if (ready[1] >= 0) {
			char b = lk < 0 ? 1 : 0; /* somebody else serves this socket: fine for the starter */
			ssize_t r = write(ready[1], &b, 1);
			(void)r;
		}
		return 1;
	}
	unlink(path);
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	mode_t um = umask(0);
	int bad = ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 128);
	umask(um);
	if (bad) {
		fprintf(stderr, "softverbsd: %s: %s\n", path, strerror(errno));
		return 1;
	}
	struct sv_engine *e = sv_engine_get();
	if (!e) {
		fprintf(stderr, "softverbsd: cannot start the engine: %s\n", strerror(errno));
		unlink(path);
		return 1;
	}
	if (pipe2(g_sigpipe, O_CLOEXEC | O_NONBLOCK))
		return 1;
	struct sigaction act = {.sa_handler = on_signal};
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);
	sigaction(SIGHUP, &act, NULL);
	if (foreground)
		printf("softverbsd: pid %d lid 0x%04x socket %s\n", (int)getpid(), e->lid, path);
	fflush(stdout);
	if (ready[1] >= 0) {
		char b = 0;
		ssize_t r = write(ready[1], &b, 1);
		(void)r;
		close(ready[1]);
	}

	uint64_t idle_since = sv_now_ns();
	for (;;) {
		struct pollfd pf[2] = {{.fd = ls, .events = POLLIN}, {.fd = g_sigpipe[0], .events = POLLIN}};
		int r = poll(pf, 2, 500);
		if (r < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			break;
		if (pf[0].revents & POLLIN) {
			int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0) {
				struct ucred cr;
				socklen_t cl = sizeof cr;
				struct sv_context *ctx = calloc(1, sizeof *ctx);
				if (!ctx || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl)) {
					free(ctx);
					close(fd);
					continue;
				}
				ctx->eng = e;
				ctx->fd = fd;
				ctx->pid = cr.pid; /* in our PID namespace */
				ctx->async_wfd = -1;
				pthread_mutex_lock(&e->lock);
				ctx->next = e->clients;
				e->clients = ctx;
				e->nclients++;
				pthread_mutex_unlock(&e->lock);
				pthread_attr_t at;
				pthread_attr_init(&at);
				pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
				if (pthread_create(&ctx->thread, &at, client_main, ctx)) {
					svd_client_gone(ctx);
					close(fd);
					free(ctx);
				}
				pthread_attr_destroy(&at);
			}
		}
		pthread_mutex_lock(&e->lock);
		int n = e->nclients;
		pthread_mutex_unlock(&e->lock);
		uint64_t now = sv_now_ns();
		if (n)
			idle_since = now;
		else if (idle > 0 && now - idle_since >= (uint64_t)idle * 1000000000ull)
			break;
	}
	/* stop taking clients, then take the port down (peers see the daemon's connections close) */
	unlink(path);
	close(ls);
	sv_log("daemon exits");
	pthread_mutex_lock(&e->lock);
	int busy = e->nclients;
	pthread_mutex_unlock(&e->lock);
	if (busy) { /* stopped with programs attached: like a host going down */
		if (e->regpath[0])
			unlink(e->regpath);
		_exit(0);
	}
	sv_engine_put(e);
	return 0; /* the lock file stays: removing it would let a second daemon lock another inode */
}
