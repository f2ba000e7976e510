/* softverbs: the "HCA" engine of the daemon softverbsd (one per host / network namespace): a TCP listening
 * socket, a registry entry (lid -> ip:port), a progress thread that plays the remote side of RDMA
 * operations, and one ordered byte stream per peer engine (daemon). */
#include "sv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t g_eng_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sv_engine *g_eng;

void sv_wake(struct sv_engine *e)
{
	uint64_t one = 1;
	ssize_t r = write(e->wake_fd, &one, sizeof one);
	(void)r;
}

static int sv_is_progress_thread(struct sv_engine *e)
{
	return pthread_equal(pthread_self(), e->thread);
}

/* ---- connections ---- */
static struct sv_conn *sv_conn_new(struct sv_engine *e, int fd)
{
	struct sv_conn *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->fd = fd;
	c->next = e->conns;
	e->conns = c;
	return c;
}

static void sv_conn_kill(struct sv_engine *e, struct sv_conn *c)
{
	if (c->dead)
		return;
	c->dead = 1;
	sv_log("connection fd %d to lid 0x%x closed", c->fd, c->peer ? c->peer->lid : 0);
	struct sv_peer *p = c->peer;
	if (p && !p->is_self) {
		if (p->tx == c)
			p->tx = NULL;
		p->dead = 1;
		sv_qp_peer_dead(e, p);
	}
}

static int sv_obuf_append(struct sv_conn *c, const struct iovec *iov, int n, size_t skip)
{
	size_t need = 0;
	for (int i = 0; i < n; i++)
		need += iov[i].iov_len;
	need -= skip;
	if (c->ooff && c->ooff == c->olen)
		c->ooff = c->olen = 0;
	if (c->olen + need > c->ocap) {
		if (c->ooff) {
			memmove(c->obuf, c->obuf + c->ooff, c->olen - c->ooff);
			c->olen -= c->ooff;
			c->ooff = 0;
		}
		if (c->olen + need > c->ocap) {
			size_t ncap = c->ocap ? c->ocap : 65536;
			while (ncap < c->olen + need)
				ncap *= 2;
			uint8_t *nb = realloc(c->obuf, ncap);
			if (!nb)
				return -1;
			c->obuf = nb;
			c->ocap = ncap;
		}
	}
	for (int i = 0; i < n; i++) {
		size_t l = iov[i].iov_len;
		const uint8_t *b = iov[i].iov_base;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		memcpy(c->obuf + c->olen, b + skip, l - skip);
		c->olen += l - skip;
		skip = 0;
	}
	return 0;
}

static void sv_conn_flush(struct sv_engine *e, struct sv_conn *c)
{
	while (!c->dead && c->ooff < c->olen) {
		ssize_t r = send(c->fd, c->obuf + c->ooff, c->olen - c->ooff, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				sv_conn_kill(e, c);
			return;
		}
		c->ooff += (size_t)r;
	}
	if (c->ooff == c->olen) {
		c->ooff = c->olen = 0;
		if (c->ocap > (4u << 20)) {
			free(c->obuf);
			c->obuf = NULL;
			c->ocap = 0;
		}
	}
}

static int sv_conn_write(struct sv_engine *e, struct sv_conn *c, const struct iovec *iov, int n)
{
	if (c->dead)
		return -1;
	size_t total = 0, done = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (c->ooff == c->olen) {
		struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
		ssize_t r;
		do
			r = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (r < 0 && errno == EINTR);
		if (r < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				sv_conn_kill(e, c);
				return -1;
			}
			r = 0;
		}
		done = (size_t)r;
	}
	if (done < total) {
		if (sv_obuf_append(c, iov, n, done)) {
			sv_conn_kill(e, c);
			return -1;
		}
		if (!sv_is_progress_thread(e))
			sv_wake(e);
	}
	return 0;
}

int sv_peer_send(struct sv_engine *e, struct sv_peer *p, struct sv_wire *h, const struct iovec *iov, int iovcnt)
{
	if (!p || p->dead || !p->tx || p->tx->dead)
		return -1;
	struct iovec v[SV_MAX_SGE + 2];
	size_t len = sizeof *h;
	if (iovcnt > SV_MAX_SGE + 1)
		return -1;
	v[0].iov_base = h;
	v[0].iov_len = sizeof *h;
	for (int i = 0; i < iovcnt; i++) {
		v[i + 1] = iov[i];
		len += iov[i].iov_len;
	}
	h->len = (uint32_t)len;
	return sv_conn_write(e, p->tx, v, iovcnt + 1);
}

/* ---- peers ---- */
static struct sv_peer *sv_peer_by_guid(struct sv_engine *e, uint64_t guid)
{
	for (struct sv_peer *p = e->peers; p; p = p->next)
		if (p->guid == guid)
			return p;
	return NULL;
}

static struct sv_peer *sv_live_peer_by_lid(struct sv_engine *e, uint16_t lid)
{
	for (struct sv_peer *p = e->peers; p; p = p->next)
		if (p->lid == lid && !p->dead && p->tx && !p->tx->dead)
			return p;
	return NULL;
}

static struct sv_peer *sv_peer_new(struct sv_engine *e, uint64_t guid, uint16_t lid)
{
	struct sv_peer *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->guid = guid;
	p->lid = lid;
	p->next = e->peers;
	e->peers = p;
	return p;
}

static void sv_hello_fill(struct sv_engine *e, struct sv_wire *h)
{
	memset(h, 0, sizeof *h);
	h->len = sizeof *h;
	h->op = SV_OP_HELLO;
	h->magic = SV_MAGIC;
	h->guid = e->guid;
	h->src_lid = e->lid;
	h->lport = e->port;
}

static void sv_conn_frame(struct sv_engine *e, struct sv_conn *c, struct sv_wire *h, uint8_t *data)
{
	if (!c->hello_done) {
		if (h->op != SV_OP_HELLO || h->magic != SV_MAGIC || h->len != sizeof *h) {
			sv_conn_kill(e, c);
			return;
		}
		struct sv_peer *p = sv_peer_by_guid(e, h->guid);
		if (!p)
			p = sv_peer_new(e, h->guid, h->src_lid);
		if (!p) {
			sv_conn_kill(e, c);
			return;
		}
		c->peer = p;
		c->hello_done = 1;
		if (!p->tx || p->tx->dead) {
			p->tx = c;
			p->dead = 0;
		}
		struct sv_wire r;
		sv_hello_fill(e, &r);
		struct iovec v = {.iov_base = &r, .iov_len = sizeof r};
		sv_conn_write(e, c, &v, 1);
		sv_log("accepted engine lid 0x%x guid %016llx", h->src_lid, (unsigned long long)h->guid);
		return;
	}
	if (h->op == SV_OP_HELLO)
		return;
	sv_dispatch(e, c, h, data);
}

static void sv_conn_readable(struct sv_engine *e, struct sv_conn *c)
{
	size_t budget = 8u << 20;
	while (!c->dead) {
		if (c->icap - c->ilen < 65536) {
			size_t ncap = c->icap ? c->icap * 2 : 262144;
			while (ncap - c->ilen < 65536)
				ncap *= 2;
			uint8_t *nb = realloc(c->ibuf, ncap);
			if (!nb) {
				sv_conn_kill(e, c);
				return;
			}
			c->ibuf = nb;
			c->icap = ncap;
		}
		ssize_t r = recv(c->fd, c->ibuf + c->ilen, c->icap - c->ilen, MSG_DONTWAIT);
		if (r == 0) {
			sv_conn_kill(e, c);
			return;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				sv_conn_kill(e, c);
			break;
		}
		c->ilen += (size_t)r;
		size_t off = 0;
		while (!c->dead && c->ilen - off >= sizeof(struct sv_wire)) {
			struct sv_wire h;
			memcpy(&h, c->ibuf + off, sizeof h);
			if (h.len < sizeof h || h.len > SV_MAX_MSG + sizeof h) {
				sv_conn_kill(e, c);
				return;
			}
			if (c->ilen - off < h.len) {
				if (h.len > c->icap) {
					uint8_t *nb = realloc(c->ibuf, h.len + 65536);
					if (!nb) {
						sv_conn_kill(e, c);
						return;
					}
					c->ibuf = nb;
					c->icap = h.len + 65536;
				}
				break;
			}
			sv_conn_frame(e, c, &h, c->ibuf + off + sizeof h);
			off += h.len;
		}
		if (off) {
			memmove(c->ibuf, c->ibuf + off, c->ilen - off);
			c->ilen -= off;
		}
		if ((size_t)r >= budget)
			break;
		budget -= (size_t)r;
	}
	if (!c->dead && c->ilen == 0 && c->icap > (4u << 20)) {
		free(c->ibuf);
		c->ibuf = NULL;
		c->icap = 0;
	}
}

static void sv_conn_free(struct sv_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->ibuf);
	free(c->obuf);
	free(c);
}

static void sv_reap(struct sv_engine *e)
{
	struct sv_conn **pp = &e->conns;
	while (*pp) {
		struct sv_conn *c = *pp;
		if (c->dead) {
			*pp = c->next;
			for (struct sv_peer *p = e->peers; p; p = p->next)
				if (p->tx == c)
					p->tx = NULL;
			sv_conn_free(c);
		} else {
			pp = &c->next;
		}
	}
}

static void sv_accept(struct sv_engine *e)
{
	for (;;) {
		int fd = accept4(e->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (!sv_conn_new(e, fd))
			close(fd);
	}
}

static void *sv_progress(void *arg)
{
	struct sv_engine *e = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);

	struct pollfd *pfd = NULL;
	struct sv_conn **pc = NULL;
	size_t cap = 0;

	pthread_mutex_lock(&e->lock);
	while (!e->stopping) {
		size_t n = 2;
		for (struct sv_conn *c = e->conns; c; c = c->next)
			n++;
		if (n > cap) {
			cap = n * 2;
			pfd = realloc(pfd, cap * sizeof *pfd);
			pc = realloc(pc, cap * sizeof *pc);
			if (!pfd || !pc)
				abort();
		}
		pfd[0] = (struct pollfd){.fd = e->wake_fd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = e->listen_fd, .events = POLLIN};
		n = 2;
		for (struct sv_conn *c = e->conns; c; c = c->next) {
			pfd[n].fd = c->fd;
			pfd[n].events = POLLIN | (c->ooff < c->olen ? POLLOUT : 0);
			pfd[n].revents = 0;
			pc[n] = c;
			n++;
		}
		uint64_t now = sv_now_ns();
		uint64_t next = sv_timers(e, now, 0);
		int tmo = -1;
		if (next)
			tmo = next <= now ? 0 : (int)((next - now + 999999) / 1000000);
		pthread_mutex_unlock(&e->lock);
		int r = poll(pfd, n, tmo);
		pthread_mutex_lock(&e->lock);
		if (r < 0)
			continue;
		if (pfd[0].revents & POLLIN) {
			uint64_t v;
			ssize_t rr = read(e->wake_fd, &v, sizeof v);
			(void)rr;
		}
		if (pfd[1].revents & POLLIN)
			sv_accept(e);
		for (size_t i = 2; i < n; i++) {
			struct sv_conn *c = pc[i];
			if (c->dead)
				continue;
			if (pfd[i].revents & POLLOUT)
				sv_conn_flush(e, c);
			if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
				sv_conn_readable(e, c);
		}
		/* timeouts only after everything that had arrived was processed (a late-scheduled thread must not
		 * fail a WR whose ACK is already waiting in the socket) */
		sv_timers(e, sv_now_ns(), 1);
		sv_reap(e);
	}
	pthread_mutex_unlock(&e->lock);
	free(pfd);
	free(pc);
	return NULL;
}

/* ---- addresses and the lid registry ---- */
static void sv_collect_ips(struct sv_engine *e)
{
	const char *s = getenv("SOFTVERBS_IP");
	if (s && *s) {
		char buf[512];
		snprintf(buf, sizeof buf, "%s", s);
		char *save = NULL;
		for (char *t = strtok_r(buf, ", ", &save); t && e->nips < 16; t = strtok_r(NULL, ", ", &save)) {
			struct in_addr a;
			if (inet_pton(AF_INET, t, &a) == 1)
				e->ips[e->nips++] = a.s_addr;
		}
		if (e->nips)
			return;
	}
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) == 0) {
		for (int pass = 0; pass < 2; pass++) {
			for (struct ifaddrs *i = ifa; i && e->nips < 15; i = i->ifa_next) {
				if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
					continue;
				int lo = (i->ifa_flags & IFF_LOOPBACK) != 0;
				if (lo != pass)
					continue;
				e->ips[e->nips++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
			}
		}
		freeifaddrs(ifa);
	}
	if (!e->nips)
		e->ips[e->nips++] = htonl(INADDR_LOOPBACK);
}


static void sv_register(struct sv_engine *e)
{
	snprintf(e->regdir, sizeof e->regdir, "%s", sv_dir());
	if (mkdir(e->regdir, 01777) == 0)
		chmod(e->regdir, 01777);
	char tmp[PATH_MAX + 64];
	snprintf(tmp, sizeof tmp, "%s/.tmp-%d-%016llx", e->regdir, (int)getpid(), (unsigned long long)e->guid);
	int fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	int have_tmp = 0;
	if (fd >= 0) {
		char buf[1024];
		size_t n = 0;
		for (int i = 0; i < e->nips; i++) {
			char ip[INET_ADDRSTRLEN];
			inet_ntop(AF_INET, &e->ips[i], ip, sizeof ip);
			n += (size_t)snprintf(buf + n, sizeof buf - n, "%s:%u\n", ip, e->port);
		}
		n += (size_t)snprintf(buf + n, sizeof buf - n, "guid %016llx\npid %d\n", (unsigned long long)e->guid,
				      (int)getpid());
		have_tmp = write(fd, buf, n) == (ssize_t)n;
		close(fd);
	} else {
		sv_log("registry %s not writable (%s): peers can reach this device only through its GID", e->regdir,
		       strerror(errno));
	}
	for (int tries = 0; tries < 4096; tries++) {
		e->lid = (uint16_t)(1 + sv_rand32() % 0xbfffu); /* unicast LID range 0x0001-0xbfff */
		if (!have_tmp)
			break;
		snprintf(e->regpath, sizeof e->regpath, "%s/lid-%04x", e->regdir, e->lid);
		if (link(tmp, e->regpath) == 0)
			break;
		e->regpath[0] = '\0';
		if (errno != EEXIST)
			break;
	}
	if (have_tmp)
		unlink(tmp);
}

void sv_make_gid(struct sv_engine *e, union ibv_gid *gid)
{
	/* link-local subnet prefix; interface id = IPv4 address, TCP port and LID of this engine, so that a
	 * peer can reach the engine from the GID alone (ibv_*_pingpong -g). */
	memset(gid, 0, sizeof *gid);
	gid->raw[0] = 0xfe;
	gid->raw[1] = 0x80;
	memcpy(&gid->raw[8], &e->ips[0], 4);
	gid->raw[12] = (uint8_t)(e->port >> 8);
	gid->raw[13] = (uint8_t)e->port;
	gid->raw[14] = (uint8_t)(e->lid >> 8);
	gid->raw[15] = (uint8_t)e->lid;
}

/* The engine's connections and peer entries, freed (start's failure path and stop). */
static void sv_engine_free_lists(struct sv_engine *e)
{
	while (e->conns) {
		struct sv_conn *c = e->conns;
		e->conns = c->next;
		sv_conn_free(c);
	}
	while (e->peers) {
		struct sv_peer *p = e->peers;
		e->peers = p->next;
		free(p);
	}
}

/* ---- engine lifetime ---- */
static struct sv_engine *sv_engine_start(void)
{
	struct sv_engine *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	sv_debug = (int)sv_env_long("SOFTVERBS_DEBUG", 0);
	sv_min_timeout_ns = (uint64_t)sv_env_long("SOFTVERBS_MIN_TIMEOUT_MS", 2000) * 1000000ull;
	pthread_mutex_init(&e->lock, NULL);
	e->pid = getpid();
	while (!e->guid)
		e->guid = sv_rand64(); /* node GUID: random per daemon (per "host" boot) */
	e->listen_fd = e->wake_fd = -1;
	sv_ht_init(&e->qps);
	sv_ht_init(&e->mrs);
	sv_ht_init(&e->cqs);
	sv_ht_init(&e->hnds);

	e->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (e->listen_fd < 0)
		goto fail;
	int one = 1;
	setsockopt(e->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY), .sin_port = 0};
	if (bind(e->listen_fd, (struct sockaddr *)&sa, sizeof sa))
		goto fail;
	if (listen(e->listen_fd, 128))
		goto fail;
	socklen_t sl = sizeof sa;
	if (getsockname(e->listen_fd, (struct sockaddr *)&sa, &sl))
		goto fail;
	e->port = ntohs(sa.sin_port);
	e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e->wake_fd < 0)
		goto fail;
	sv_collect_ips(e);
	sv_register(e);
	sv_make_gid(e, &e->gid);

	/* loopback path: a socketpair, so that traffic to our own LID takes the same route as remote traffic */
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp))
		goto fail;
	struct sv_peer *self = sv_peer_new(e, e->guid, e->lid);
	struct sv_conn *tx = sv_conn_new(e, sp[0]);
	struct sv_conn *rx = sv_conn_new(e, sp[1]);
	if (!self || !tx || !rx)
		goto fail;
	self->is_self = 1;
	self->tx = tx;
	tx->peer = rx->peer = self;
	tx->hello_done = rx->hello_done = 1;
	rx->is_self_rx = 1;
	e->self = self;

	if (pthread_create(&e->thread, NULL, sv_progress, e))
		goto fail;
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &e->ips[0], ip, sizeof ip);
	sv_log("engine up: lid 0x%04x guid %016llx %s:%u registry %s", e->lid, (unsigned long long)e->guid, ip,
	       e->port, e->regpath[0] ? e->regpath : "(none)");
	return e;
fail:
	sv_log("engine start failed: %s", strerror(errno));
	if (e->regpath[0])
		unlink(e->regpath);
	if (e->listen_fd >= 0)
		close(e->listen_fd);
	if (e->wake_fd >= 0)
		close(e->wake_fd);
	sv_engine_free_lists(e);
	free(e);
	return NULL;
}

struct sv_engine *sv_engine_get(void)
{
	pthread_mutex_lock(&g_eng_lock);
	if (!g_eng)
		g_eng = sv_engine_start();
	struct sv_engine *e = g_eng;
	if (e)
		e->refs++;
	pthread_mutex_unlock(&g_eng_lock);
	return e;
}

/* On close: deliver what is queued (so the peer sees our last ACKs), send FIN, and read until the peer
 * closes too, so that no unread data turns our close into a reset. */
static void sv_engine_drain(struct sv_engine *e)
{
	uint64_t deadline = sv_now_ns() + 500000000ull;
	while (sv_now_ns() < deadline) {
		struct pollfd pfd[256];
		struct sv_conn *pc[256];
		nfds_t n = 0;
		for (struct sv_conn *c = e->conns; c && n < 256; c = c->next) {
			if (c->dead || (c->peer && c->peer->is_self))
				continue;
			short ev = POLLIN;
			if (c->ooff < c->olen) {
				ev |= POLLOUT;
			} else if (!c->shut) {
				shutdown(c->fd, SHUT_WR);
				c->shut = 1;
			}
			pfd[n] = (struct pollfd){.fd = c->fd, .events = ev};
			pc[n++] = c;
		}
		if (!n)
			break;
		if (poll(pfd, n, 50) <= 0)
			continue;
		for (nfds_t i = 0; i < n; i++) {
			struct sv_conn *c = pc[i];
			if (pfd[i].revents & POLLOUT)
				sv_conn_flush(e, c);
			if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				char buf[65536];
				ssize_t r = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
				if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
					c->dead = 1;
			}
		}
	}
}

void sv_engine_put(struct sv_engine *e)
{
	pthread_mutex_lock(&g_eng_lock);
	if (--e->refs > 0) {
		pthread_mutex_unlock(&g_eng_lock);
		return;
	}
	if (g_eng == e)
		g_eng = NULL;
	pthread_mutex_unlock(&g_eng_lock);

	pthread_mutex_lock(&e->lock);
	e->stopping = 1;
	pthread_mutex_unlock(&e->lock);
	sv_wake(e);
	pthread_join(e->thread, NULL);
	if (e->regpath[0])
		unlink(e->regpath);
	sv_engine_drain(e);
	close(e->listen_fd);
	close(e->wake_fd);
	sv_engine_free_lists(e);
	sv_ht_free(&e->qps);
	sv_ht_free(&e->mrs);
	sv_ht_free(&e->cqs);
	sv_ht_free(&e->hnds);
	pthread_mutex_destroy(&e->lock);
	sv_log("engine down: lid 0x%04x", e->lid);
	free(e);
}

/* ---- connecting to a peer engine (blocking, without e->lock) ---- */
static int sv_wait_fd(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		uint64_t now = sv_now_ns();
		if (now >= deadline)
			return -1;
		struct pollfd p = {.fd = fd, .events = ev};
		int r = poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

static struct sv_peer *sv_try_connect(struct sv_engine *e, uint32_t ip, uint16_t port, uint16_t want_lid)
{
	long tmo_ms = sv_env_long("SOFTVERBS_CONNECT_TIMEOUT_MS", 2000);
	uint64_t deadline = sv_now_ns() + (uint64_t)tmo_ms * 1000000ull;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = ip, .sin_port = htons(port)};
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) && errno != EINPROGRESS)
		goto fail;
	if (sv_wait_fd(fd, POLLOUT, deadline))
		goto fail;
	int err = 0;
	socklen_t el = sizeof err;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err)
		goto fail;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	struct sv_wire h;
	sv_hello_fill(e, &h);
	size_t off = 0;
	while (off < sizeof h) {
		ssize_t r = send(fd, (uint8_t *)&h + off, sizeof h - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0) {
			if (errno != EAGAIN && errno != EINTR)
				goto fail;
			if (sv_wait_fd(fd, POLLOUT, deadline))
				goto fail;
			continue;
		}
		off += (size_t)r;
	}
	struct sv_wire rep;
	off = 0;
	while (off < sizeof rep) {
		ssize_t r = recv(fd, (uint8_t *)&rep + off, sizeof rep - off, MSG_DONTWAIT);
		if (r == 0)
			goto fail;
		if (r < 0) {
			if (errno != EAGAIN && errno != EINTR)
				goto fail;
			if (sv_wait_fd(fd, POLLIN, deadline))
				goto fail;
			continue;
		}
		off += (size_t)r;
	}
	if (rep.op != SV_OP_HELLO || rep.magic != SV_MAGIC || rep.len != sizeof rep ||
	    (want_lid && rep.src_lid != want_lid) || rep.guid == e->guid)
		goto fail;

	pthread_mutex_lock(&e->lock);
	struct sv_peer *p = sv_peer_by_guid(e, rep.guid);
	if (p && !p->dead && p->tx && !p->tx->dead) {
		/* an inbound connection from that engine won the race: use it, keep ours for receiving only */
		struct sv_conn *c = sv_conn_new(e, fd);
		if (c) {
			c->peer = p;
			c->hello_done = 1;
			fd = -1;
		}
		pthread_mutex_unlock(&e->lock);
		if (fd >= 0)
			close(fd);
		sv_wake(e);
		return p;
	}
	if (!p)
		p = sv_peer_new(e, rep.guid, rep.src_lid);
	struct sv_conn *c = p ? sv_conn_new(e, fd) : NULL;
	if (!c) {
		pthread_mutex_unlock(&e->lock);
		goto fail;
	}
	c->peer = p;
	c->hello_done = 1;
	p->tx = c;
	p->dead = 0;
	p->lid = rep.src_lid;
	pthread_mutex_unlock(&e->lock);
	sv_wake(e);
	char ips[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &ip, ips, sizeof ips);
	sv_log("connected to engine lid 0x%04x at %s:%u", rep.src_lid, ips, port);
	return p;
fail:
	close(fd);
	return NULL;
}

struct sv_peer *sv_resolve(struct sv_engine *e, const struct ibv_ah_attr *ah)
{
	struct sv_peer *p;
	if (ah->is_global) {
		const uint8_t *g = ah->grh.dgid.raw;
		if (!memcmp(g, e->gid.raw, 16))
			return e->self;
		static const uint8_t ll[8] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0};
		if (!memcmp(g, ll, 8)) {
			uint32_t ip;
			memcpy(&ip, g + 8, 4);
			uint16_t port = (uint16_t)(g[12] << 8 | g[13]);
			uint16_t lid = (uint16_t)(g[14] << 8 | g[15]);
			pthread_mutex_lock(&e->lock);
			p = sv_live_peer_by_lid(e, lid);
			pthread_mutex_unlock(&e->lock);
			if (p)
				return p;
			p = sv_try_connect(e, ip, port, lid);
			if (p)
				return p;
		}
		/* not a softverbs GID (or not reachable through it): route by the DLID like a subnet would */
	}
	uint16_t lid = ah->dlid;
	if (!lid)
		return NULL;
	if (lid == e->lid)
		return e->self;
	pthread_mutex_lock(&e->lock);
	p = sv_live_peer_by_lid(e, lid);
	pthread_mutex_unlock(&e->lock);
	if (p)
		return p;
	char path[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/lid-%04x", sv_dir(), lid);
	FILE *f = fopen(path, "re");
	if (!f) {
		sv_log("lid 0x%04x: no registry entry %s", lid, path);
		return NULL;
	}
	char line[256];
	uint32_t ips[16];
	uint16_t ports[16];
	int n = 0;
	while (n < 16 && fgets(line, sizeof line, f)) {
		char *colon = strchr(line, ':');
		if (!colon || !strncmp(line, "guid", 4) || !strncmp(line, "pid", 3))
			continue;
		*colon = '\0';
		struct in_addr a;
		if (inet_pton(AF_INET, line, &a) != 1)
			continue;
		ips[n] = a.s_addr;
		ports[n] = (uint16_t)strtoul(colon + 1, NULL, 10);
		n++;
	}
	fclose(f);
	for (int i = 0; i < n; i++) {
		p = sv_try_connect(e, ips[i], ports[i], lid);
		if (p)
			return p;
	}
	sv_log("lid 0x%04x: unreachable", lid);
	return NULL;
}
