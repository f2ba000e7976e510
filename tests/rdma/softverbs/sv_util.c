/* softverbs: utilities (library and daemon) and the small exported helpers of the verbs API (strings, rates,
 * fork, sysfs). */
#include "sv.h"

#include <errno.h>
#include <fcntl.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int sv_debug;

static void sv_fill_random(void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* no getrandom: fall back to /dev/urandom, then to the clock */
			int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				n = read(fd, p, len);
				close(fd);
			}
			if (n <= 0) {
				uint64_t t = sv_now_ns() ^ ((uint64_t)getpid() << 32);
				for (size_t i = 0; i < len; i++) {
					t = t * 6364136223846793005ull + 1442695040888963407ull;
					p[i] = (uint8_t)(t >> 56);
				}
				return;
			}
		}
		p += n;
		len -= (size_t)n;
	}
}

uint64_t sv_rand64(void)
{
	uint64_t v;
	sv_fill_random(&v, sizeof v);
	return v;
}

uint32_t sv_rand32(void)
{
	uint32_t v;
	sv_fill_random(&v, sizeof v);
	return v;
}

uint64_t sv_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sv_log(const char *fmt, ...)
{
	if (!sv_debug)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof buf)
		n = sizeof buf - 1;
	fprintf(stderr, "softverbs[%d]: %s\n", (int)getpid(), buf);
}

/* the daemon's socket: $SOFTVERBS_SOCK, else $SOFTVERBS_DIR (default /tmp/softverbs)/netns-<inode of this
 * network namespace>.sock: one daemon ("host") per network namespace */
int sv_sock_path(char *buf, size_t len)
{
	const char *s = getenv("SOFTVERBS_SOCK");
	int n;
	if (s && *s) {
		n = snprintf(buf, len, "%s", s);
	} else {
		struct stat st;
		const char *d = sv_dir();
		if (stat("/proc/self/ns/net", &st) == 0) {
			n = snprintf(buf, len, "%s/netns-%llu.sock", d, (unsigned long long)st.st_ino);
		} else {
			char h[128] = "localhost";
			gethostname(h, sizeof h - 1);
			n = snprintf(buf, len, "%s/host-%s.sock", d, h);
		}
	}
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

const char *sv_dir(void)
{
	const char *d = getenv("SOFTVERBS_DIR");
	return d && *d ? d : "/tmp/softverbs";
}

long sv_env_long(const char *name, long def)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	long v = strtol(s, &end, 0);
	return *end ? def : v;
}

uint32_t sv_mtu_bytes(enum ibv_mtu m)
{
	switch (m) {
	case IBV_MTU_256: return 256;
	case IBV_MTU_512: return 512;
	case IBV_MTU_1024: return 1024;
	case IBV_MTU_2048: return 2048;
	case IBV_MTU_4096: return 4096;
	default: return 1024;
	}
}

/* IBA table 45: encoded RNR NAK timer values, in units of 10 us */
uint64_t sv_rnr_timer_ns(uint8_t code)
{
	static const uint32_t t10us[32] = {
		65536, 1,    2,    3,    4,    6,    8,    12,   16,   24,   32,
		48,    64,   96,   128,  192,  256,  384,  512,  768,  1024, 1536,
		2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
	};
	return (uint64_t)t10us[code & 31] * 10000ull;
}

/* local ACK timeout 4.096 us * 2^timeout, tried retry_cnt + 1 times; 0 = infinite.
 * SOFTVERBS_MIN_TIMEOUT_MS (default 2000) sets a floor, because the peer's "HCA" is a thread that a
 * loaded host can deschedule for longer than a real HCA ever stalls. */
uint64_t sv_min_timeout_ns = 2000000000ull;

uint64_t sv_transport_timeout_ns(uint8_t timeout, uint8_t retry_cnt)
{
	if (timeout == 0)
		return 0;
	uint64_t one = 4096ull << (timeout > 31 ? 31 : timeout);
	uint64_t total = one * (uint64_t)(retry_cnt + 1);
	return total < sv_min_timeout_ns ? sv_min_timeout_ns : total;
}

/* removes (and returns the number of) entries for which drop(val, arg) is true */
uint32_t sv_ht_remove_if(struct sv_htab *h, int (*drop)(void *val, void *arg), void *arg)
{
	uint32_t n = 0;
	for (uint32_t i = 0; h->b && i < h->nb; i++) {
		struct sv_hent **pp = &h->b[i];
		while (*pp) {
			struct sv_hent *x = *pp;
			if (drop(x->val, arg)) {
				*pp = x->next;
				free(x);
				h->n--;
				n++;
			} else {
				pp = &x->next;
			}
		}
	}
	return n;
}

/* ---- hash table ---- */
void sv_ht_init(struct sv_htab *h)
{
	h->nb = 256;
	h->n = 0;
	h->b = calloc(h->nb, sizeof *h->b);
}

void sv_ht_free(struct sv_htab *h)
{
	for (uint32_t i = 0; h->b && i < h->nb; i++) {
		struct sv_hent *x = h->b[i];
		while (x) {
			struct sv_hent *n = x->next;
			free(x);
			x = n;
		}
	}
	free(h->b);
	h->b = NULL;
	h->n = h->nb = 0;
}

static uint32_t sv_hash(uint32_t k)
{
	k ^= k >> 16;
	k *= 0x7feb352du;
	k ^= k >> 15;
	k *= 0x846ca68bu;
	k ^= k >> 16;
	return k;
}

void *sv_ht_get(struct sv_htab *h, uint32_t key)
{
	if (!h->b)
		return NULL;
	for (struct sv_hent *x = h->b[sv_hash(key) & (h->nb - 1)]; x; x = x->next)
		if (x->key == key)
			return x->val;
	return NULL;
}

int sv_ht_put(struct sv_htab *h, uint32_t key, void *val)
{
	if (h->n + 1 > h->nb * 2) {
		uint32_t nnb = h->nb * 4;
		struct sv_hent **nb = calloc(nnb, sizeof *nb);
		if (nb) {
			for (uint32_t i = 0; i < h->nb; i++) {
				struct sv_hent *x = h->b[i];
				while (x) {
					struct sv_hent *n = x->next;
					uint32_t j = sv_hash(x->key) & (nnb - 1);
					x->next = nb[j];
					nb[j] = x;
					x = n;
				}
			}
			free(h->b);
			h->b = nb;
			h->nb = nnb;
		}
	}
	struct sv_hent *x = malloc(sizeof *x);
	if (!x)
		return ENOMEM;
	uint32_t j = sv_hash(key) & (h->nb - 1);
	x->key = key;
	x->val = val;
	x->next = h->b[j];
	h->b[j] = x;
	h->n++;
	return 0;
}

void *sv_ht_del(struct sv_htab *h, uint32_t key)
{
	if (!h->b)
		return NULL;
	struct sv_hent **pp = &h->b[sv_hash(key) & (h->nb - 1)];
	for (; *pp; pp = &(*pp)->next) {
		if ((*pp)->key == key) {
			struct sv_hent *x = *pp;
			void *v = x->val;
			*pp = x->next;
			free(x);
			h->n--;
			return v;
		}
	}
	return NULL;
}

/* ---- exported helpers ---- */
const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	switch (node_type) {
	case IBV_NODE_CA: return "InfiniBand channel adapter";
	case IBV_NODE_SWITCH: return "InfiniBand switch";
	case IBV_NODE_ROUTER: return "InfiniBand router";
	case IBV_NODE_RNIC: return "iWARP NIC";
	case IBV_NODE_USNIC: return "usNIC";
	case IBV_NODE_USNIC_UDP: return "usNIC UDP";
	case IBV_NODE_UNSPECIFIED: return "unspecified";
	default: return "unknown";
	}
}

const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	switch (port_state) {
	case IBV_PORT_NOP: return "no state change (NOP)";
	case IBV_PORT_DOWN: return "down";
	case IBV_PORT_INIT: return "init";
	case IBV_PORT_ARMED: return "armed";
	case IBV_PORT_ACTIVE: return "active";
	case IBV_PORT_ACTIVE_DEFER: return "active defer";
	default: return "unknown";
	}
}

const char *ibv_event_type_str(enum ibv_event_type event)
{
	switch (event) {
	case IBV_EVENT_CQ_ERR: return "CQ error";
	case IBV_EVENT_QP_FATAL: return "local work queue catastrophic error";
	case IBV_EVENT_QP_REQ_ERR: return "invalid request local work queue error";
	case IBV_EVENT_QP_ACCESS_ERR: return "local access violation work queue error";
	case IBV_EVENT_COMM_EST: return "communication established";
	case IBV_EVENT_SQ_DRAINED: return "send queue drained";
	case IBV_EVENT_PATH_MIG: return "path migrated";
	case IBV_EVENT_PATH_MIG_ERR: return "path migration request error";
	case IBV_EVENT_DEVICE_FATAL: return "local catastrophic error";
	case IBV_EVENT_PORT_ACTIVE: return "port active";
	case IBV_EVENT_PORT_ERR: return "port error";
	case IBV_EVENT_LID_CHANGE: return "LID change";
	case IBV_EVENT_PKEY_CHANGE: return "P_Key change";
	case IBV_EVENT_SM_CHANGE: return "SM change";
	case IBV_EVENT_SRQ_ERR: return "SRQ catastrophic error";
	case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ limit reached";
	case IBV_EVENT_QP_LAST_WQE_REACHED: return "last WQE reached";
	case IBV_EVENT_CLIENT_REREGISTER: return "client reregistration";
	case IBV_EVENT_GID_CHANGE: return "GID table change";
	case IBV_EVENT_WQ_FATAL: return "WQ fatal";
	default: return "unknown";
	}
}

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	switch (status) {
	case IBV_WC_SUCCESS: return "success";
	case IBV_WC_LOC_LEN_ERR: return "local length error";
	case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
	case IBV_WC_LOC_EEC_OP_ERR: return "local EE context operation error";
	case IBV_WC_LOC_PROT_ERR: return "local protection error";
	case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
	case IBV_WC_MW_BIND_ERR: return "memory management operation error";
	case IBV_WC_BAD_RESP_ERR: return "bad response error";
	case IBV_WC_LOC_ACCESS_ERR: return "local access error";
	case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
	case IBV_WC_REM_ACCESS_ERR: return "remote access error";
	case IBV_WC_REM_OP_ERR: return "remote operation error";
	case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
	case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
	case IBV_WC_LOC_RDD_VIOL_ERR: return "local RDD violation error";
	case IBV_WC_REM_INV_RD_REQ_ERR: return "remote invalid RD request";
	case IBV_WC_REM_ABORT_ERR: return "aborted error";
	case IBV_WC_INV_EECN_ERR: return "invalid EE context number";
	case IBV_WC_INV_EEC_STATE_ERR: return "invalid EE context state";
	case IBV_WC_FATAL_ERR: return "fatal error";
	case IBV_WC_RESP_TIMEOUT_ERR: return "response timeout error";
	case IBV_WC_GENERAL_ERR: return "general error";
	case IBV_WC_TM_ERR: return "TM error";
	case IBV_WC_TM_RNDV_INCOMPLETE: return "TM software rendezvous";
	default: return "unknown";
	}
}

static const struct {
	enum ibv_rate rate;
	int mult;
	int mbps;
} sv_rates[] = {
	{IBV_RATE_2_5_GBPS, 1, 2500},       {IBV_RATE_5_GBPS, 2, 5000},
	{IBV_RATE_10_GBPS, 4, 10000},       {IBV_RATE_20_GBPS, 8, 20000},
	{IBV_RATE_30_GBPS, 12, 30000},      {IBV_RATE_40_GBPS, 16, 40000},
	{IBV_RATE_60_GBPS, 24, 60000},      {IBV_RATE_80_GBPS, 32, 80000},
	{IBV_RATE_120_GBPS, 48, 120000},    {IBV_RATE_14_GBPS, -1, 14062},
	{IBV_RATE_56_GBPS, -1, 56250},      {IBV_RATE_112_GBPS, -1, 112500},
	{IBV_RATE_168_GBPS, -1, 168750},    {IBV_RATE_25_GBPS, -1, 25781},
	{IBV_RATE_100_GBPS, -1, 103125},    {IBV_RATE_200_GBPS, -1, 206250},
	{IBV_RATE_300_GBPS, -1, 309375},    {IBV_RATE_28_GBPS, 11, 28125},
	{IBV_RATE_50_GBPS, 20, 53125},      {IBV_RATE_400_GBPS, 160, 425000},
	{IBV_RATE_600_GBPS, 240, 637500},   {IBV_RATE_800_GBPS, 320, 850000},
	{IBV_RATE_1200_GBPS, 480, 1275000},
};
#define SV_NRATES (sizeof sv_rates / sizeof sv_rates[0])

int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < SV_NRATES; i++)
		if (sv_rates[i].rate == rate)
			return sv_rates[i].mult;
	return -1;
}

enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (size_t i = 0; i < SV_NRATES; i++)
		if (sv_rates[i].mult == mult && mult > 0)
			return sv_rates[i].rate;
	return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < SV_NRATES; i++)
		if (sv_rates[i].rate == rate)
			return sv_rates[i].mbps;
	return -1;
}

enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < SV_NRATES; i++)
		if (sv_rates[i].mbps == mbps)
			return sv_rates[i].rate;
	return IBV_RATE_MAX;
}

/* There is no DMA into pinned pages here, so fork needs no protection. */
int ibv_fork_init(void)
{
	return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

/* There is no sysfs device: these behave as on a host whose sysfs lacks the attribute. */
const char *ibv_get_sysfs_path(void);
const char *ibv_get_sysfs_path(void)
{
	return "/sys";
}

int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[PATH_MAX];
	if (!dir || !file || !buf || !size)
		return -1;
	if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size);
	close(fd);
	if (n <= 0)
		return -1;
	if ((size_t)n < size)
		buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return (int)n;
}

/* marshalling helpers kept in the ABI for other rdma-core libraries */
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid);
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

#define SV_PATH_FIELDS(X)                                                                          \
	X(dlid) X(slid) X(raw_traffic) X(flow_label) X(hop_limit) X(traffic_class) X(reversible)  \
	X(numb_path) X(pkey) X(sl) X(mtu_selector) X(mtu) X(rate_selector) X(rate)                 \
	X(packet_life_time) X(preference) X(packet_life_time_selector)

void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid);
	memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid);
#define X(f) dst->f = src->f;
	SV_PATH_FIELDS(X)
#undef X
}

void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof src->dgid);
	memcpy(dst->sgid, src->sgid.raw, sizeof src->sgid);
#define X(f) dst->f = src->f;
	SV_PATH_FIELDS(X)
#undef X
}
