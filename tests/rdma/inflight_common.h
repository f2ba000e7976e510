/* inflight_common.h: the part of verbs_inflight.c (InfiniBand verbs) and fi_inflight.c (libfabric) that does
 * not depend on the RDMA API. The two programs run the same protocol with the same stdout, so that a run
 * under a checkpointer can be compared with a native one; what makes that output and decides pass or fail
 * is kept here once, so that the two cannot drift apart:
 *   - the deterministic contents: f(S,i) written to the slots, m(S,i) the messages, s(S) the static area,
 *     the values a fetching add sees, and their checks (message, read chunk, fetched value);
 *   - the digest (FNV-1a 64) and its three common streams (messages, reads, fetched values), the progress
 *     lines and the final line;
 *   - failure reports (fail during the run, die during the setup) and the --timeout rule: time without
 *     progress counts, time the process spends stopped (a checkpoint) does not;
 *   - the common options (--fork, --server PORT, --client HOST PORT, --iters, --delay-us, --timeout), the
 *     socket for the one-time connection-info exchange (a socketpair in --fork mode, TCP otherwise), the
 *     barrier that closes it, and the --fork parent/child flow (the parent reaps the child, fails if it
 *     failed, and prints its final line after the child's).
 * Each program keeps its objects, posting, completions, setup and teardown, the run loop, and its own
 * options (a table of struct own_opt) with their line of the usage text.
 *
 * Header-only for a one-file program: static functions and the state they share with the program (options,
 * this side, the current iteration, the --fork child, receive/read/atomic counts and digests, the stall
 * clock). Include it once, with _GNU_SOURCE defined before any system header. */
#ifndef INFLIGHT_COMMON_H
#define INFLIGHT_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* sizes of the protocol, the same with both APIs */
#define BLK 4096u	 /* RDMA write block, read chunk */
#define NSLOT 64u	 /* write slots in the region */
#define MSG 64u		 /* message size */
#define STATIC_SZ 65536u /* static area the peer reads */
#define NCHUNK (STATIC_SZ / BLK)
#define K_AHEAD 16u	 /* receives posted ahead */
#define RQ_DEPTH 32u	 /* receive buffers (verbs: the receive queue depth) */
#define PROGRESS 500u	 /* progress line interval */

#define FNV_INIT 0xcbf29ce484222325ull /* FNV-1a 64 offset basis */

/* common options */
static unsigned o_iters = 2000, o_delay_us = 200, o_timeout_s = 60;

/* state of this side */
static int side;
static uint32_t cur_iter;
static pid_t child_pid;	 /* --fork parent: the child (side 1), 0 once reaped */
static int child_status; /* its wait status once reaped */
static uint8_t *rreg, *lreg; /* the region the peer accesses; the local one (sources, destinations) */
static uint32_t recv_posted, recv_done; /* next message to post a receive for / expected next */
static uint32_t reads_ok, faa_ok;
static uint64_t dig_recv = FNV_INIT, dig_read = FNV_INIT, dig_faa = FNV_INIT;
static uint64_t stall_ns, last_ns; /* the --timeout clock */

/* ---- failures ------------------------------------------------------------------------------------ */

/* `FAIL: <what> at iteration i` (during the run) or `FAIL: <what> (side S, setup)` on stderr, exit 1; the
 * --fork parent does not leave the child behind. <what> is cut at 767 characters, at 511 in the setup. */
__attribute__((format(printf, 2, 0), noreturn)) static void vfail(int setup, const char *fmt, va_list ap)
{
	char b[768];
	vsnprintf(b, setup ? 512 : sizeof b, fmt, ap);
	if (setup)
		fprintf(stderr, "FAIL: %s (side %d, setup)\n", b, side);
	else
		fprintf(stderr, "FAIL: %s at iteration %u\n", b, cur_iter);
	fflush(NULL);
	if (child_pid > 0) {
		kill(child_pid, SIGKILL);
		waitpid(child_pid, NULL, 0);
	}
	_exit(1);
}

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(0, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(1, fmt, ap);
	va_end(ap);
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

#define K_WRITE(s, i) key(1, s, i) /* f(S,i) */
#define K_MSG(s, i) key(2, s, i)   /* m(S,i) */
#define K_STATIC(s) key(3, s, 0)   /* s(S) */
/* what a fetching add of iteration i (i%16 == 0) fetches: the sum of the earlier adds */
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

/* both regions, page aligned and zeroed; the remote one's static area (at static_off) holds s(S) */
static void alloc_regions(size_t rsize, size_t static_off, size_t lsize)
{
	rreg = aligned_alloc(4096, rsize);
	lreg = aligned_alloc(4096, lsize);
	if (!rreg || !lreg)
		die("out of memory");
	memset(rreg, 0, rsize);
	memset(lreg, 0, lsize);
	fill(rreg + static_off, STATIC_SZ, K_STATIC(side));
}

/* message j of the peer, at m: m(P,j); its index and contents go into the message digest */
static void check_msg(uint32_t j, const uint8_t *m)
{
	long w = check(m, MSG, K_MSG(1 - side, j));
	if (w >= 0)
		fail("message %u from side %d: word %ld wrong", j, 1 - side, w);
	dig_recv = fnv(dig_recv, &j, sizeof j);
	dig_recv = fnv(dig_recv, m, MSG);
}

/* the chunk ((i/4)%16) of the peer's static area that op read at iteration i, at d: s(P) there */
static void check_chunk(const uint8_t *d, uint32_t i, const char *op)
{
	unsigned c = (i / 4) % NCHUNK;
	for (size_t w = 0; w < BLK / 8; w++) {
		uint64_t v;
		memcpy(&v, d + w * 8, 8);
		if (v != gen(K_STATIC(1 - side), c * (BLK / 8) + w))
			fail("%s of side %d's static area, chunk %u: word %zu wrong", op, 1 - side, c, w);
	}
	dig_read = fnv(dig_read, d, BLK);
	reads_ok++;
}

/* the value op (a fetching add of iteration i) fetched from the peer's counter */
static void check_fetched(uint64_t v, uint32_t i, const char *op)
{
	if (v != faa_before(i))
		fail("%s on side %d's counter fetched %" PRIu64 ", expected %" PRIu64, op, 1 - side, v, faa_before(i));
	dig_faa = fnv(dig_faa, &v, 8);
	faa_ok++;
}

/* the digest of the final line starts with the three common streams; the program adds the rest */
static uint64_t digest_streams(void)
{
	uint64_t d = FNV_INIT;
	d = fnv(d, &dig_recv, 8);
	d = fnv(d, &dig_read, 8);
	d = fnv(d, &dig_faa, 8);
	return d;
}

/* ---- time ---------------------------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* progress was made (or the run starts): the --timeout clock starts again */
static void progressed(void)
{
	stall_ns = 0;
	last_ns = now_ns();
}

/* time without progress; a process stopped (checkpoint) or descheduled for long does not count. The
 * failure names the queue and its completed/posted counts. A --fork parent also notices a failed child. */
static void stalled(const char *what, const char *queue, uint64_t done, uint64_t posted)
{
	uint64_t t = now_ns(), d = t - last_ns;
	last_ns = t;
	stall_ns += d > 200000000ull ? 200000000ull : d;
	if (stall_ns > (uint64_t)o_timeout_s * 1000000000ull)
		fail("no progress for %u s while waiting for %s (received %u messages, %s %" PRIu64 "/%" PRIu64 ")",
		     o_timeout_s, what, recv_done, queue, done, posted);
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

/* ---- stdout -------------------------------------------------------------------------------------- */

/* `side S iter I` every PROGRESS iterations, if this is side s (side 1 calls it before posting message
 * i, side 0 after receiving it: that fixes the order of the lines) */
static void progress_line(int s, uint32_t i)
{
	if (side == s && i && i % PROGRESS == 0) {
		printf("side %d iter %u\n", s, i);
		fflush(stdout);
	}
}

/* `side S iters N digest 0x... counter C`, once this side's objects are gone; the --fork parent waits for
 * the child first (its line comes first) and fails if the child failed */
static void final_line(uint64_t digest, uint64_t counter)
{
	if (side == 0 && child_pid > 0) {
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
	printf("side %d iters %u digest 0x%016llx counter %llu\n", side, o_iters, (unsigned long long)digest,
	       (unsigned long long)counter);
	fflush(stdout);
}

/* ---- the connection-info socket ------------------------------------------------------------------ */

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

/* the connection info: this side's line out, the peer's in (len bytes each way), NUL-terminated */
static void swap_info(int fd, char *b, size_t len)
{
	xfer(fd, b, len, 1);
	xfer(fd, b, len, 0);
	b[len - 1] = 0;
}

/* n bytes as 2n hex digits and a NUL, and back (the caller has checked the 2n digits) */
static void hex_put(char *h, const uint8_t *p, size_t n)
{
	for (size_t k = 0; k < n; k++)
		sprintf(h + 2 * k, "%02x", p[k]);
	h[2 * n] = 0;
}

static void hex_get(uint8_t *p, const char *h, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		unsigned v;
		sscanf(h + 2 * k, "%2x", &v);
		p[k] = (uint8_t)v;
	}
}

/* the end of the setup: a byte each way (the caller says what both sides are ready for), then the socket
 * is closed: from here on the two sides talk only through the RDMA API */
static void barrier(int fd)
{
	char c = 'R';
	xfer(fd, &c, 1, 1);
	xfer(fd, &c, 1, 0);
	if (c != 'R')
		die("bad barrier byte from the peer");
	close(fd);
}

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

/* ---- options and the two sides ------------------------------------------------------------------- */

static const char *prog_name, *prog_opts; /* for the usage text */

__attribute__((noreturn)) static void usage(void)
{
	fprintf(stderr,
		"usage: %s --fork [opts]\n"
		"       %s --server PORT [opts]\n"
		"       %s --client HOST PORT [opts]\n"
		"opts: %s\n",
		prog_name, prog_name, prog_name, prog_opts);
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

/* an option of the program's own: a flag, set to 1, or an option with an argument, which is kept; a
 * table of them ends with a NULL name */
struct own_opt {
	const char *name;
	int *flag;
	const char **arg;
};

/* main up to the setup: the options, common and own (if they are wrong: the usage text, made of the
 * program's name and its opts line, on stderr, and exit 2), then the two sides: --fork forks (parent =
 * side 0, which keeps the child's pid; child = side 1; a socketpair between them), --server PORT accepts
 * side 1 on TCP (side 0), --client HOST PORT connects to it (side 1). Returns the socket for the
 * connection info. */
static int start(int argc, char **argv, const char *name, const char *opts, const struct own_opt *own)
{
	enum { NONE, FORK, SERVER, CLIENT } mode = NONE;
	const char *host = NULL, *port = NULL;
	prog_name = name;
	prog_opts = opts;
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
		} else {
			const struct own_opt *o = own;
			while (o->name && strcmp(a, o->name))
				o++;
			if (o->name && o->flag)
				*o->flag = 1;
			else if (o->name && k + 1 < argc)
				*o->arg = argv[++k];
			else
				usage();
		}
	}
	if (mode == NONE)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	if (mode == SERVER) {
		side = 0;
		return tcp_server(port);
	}
	if (mode == CLIENT) {
		side = 1;
		return tcp_client(host, port);
	}
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
		return sp[1];
	}
	close(sp[1]);
	side = 0;
	child_pid = p;
	return sp[0];
}

#endif /* INFLIGHT_COMMON_H */
