/* softverbs: device, context, queries, PD, MR, CQ, completion channel, async events, SRQ, AH. */
#include "sv.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

/* verbs.h turns these names into macros around inline wrappers; the library defines the real symbols */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_query_port
#undef ibv_get_device_list

/* ---- the device ---- */
static struct ibv_device g_dev;
static pthread_once_t g_dev_once = PTHREAD_ONCE_INIT;

static void sv_atfork_child(void)
{
	sv_engine_fork_child();
}

static void sv_dev_init(void)
{
	const char *name = getenv("SOFTVERBS_DEVICE_NAME");
	if (!name || !*name || strlen(name) >= sizeof g_dev.name)
		name = "softverbs_0";
	g_dev.node_type = IBV_NODE_CA;
	g_dev.transport_type = IBV_TRANSPORT_IB;
	snprintf(g_dev.name, sizeof g_dev.name, "%s", name);
	snprintf(g_dev.dev_name, sizeof g_dev.dev_name, "uverbs0");
	snprintf(g_dev.dev_path, sizeof g_dev.dev_path, "/sys/class/infiniband_verbs/uverbs0");
	snprintf(g_dev.ibdev_path, sizeof g_dev.ibdev_path, "/sys/class/infiniband/%s", name);
	pthread_atfork(NULL, NULL, sv_atfork_child);
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

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	(void)device;
	return htobe64(sv_device_guid());
}

/* ---- context ---- */
static int sv_query_port_ex(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len);
static int sv_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t len);
static struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *a);
static int sv_query_rt_values(struct ibv_context *context, struct ibv_values_ex *v);

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	pthread_once(&g_dev_once, sv_dev_init);
	if (device != &g_dev) {
		errno = ENODEV;
		return NULL;
	}
	struct sv_context *ctx = calloc(1, sizeof *ctx);
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	int afd[2] = {-1, -1};
	ctx->cmd_fd = eventfd(0, EFD_CLOEXEC);
	if (ctx->cmd_fd < 0 || pipe2(afd, O_CLOEXEC))
		goto fail;
	fcntl(afd[1], F_SETFL, O_NONBLOCK);
	ctx->async_wfd = afd[1];
	ctx->eng = sv_engine_get();
	if (!ctx->eng) {
		errno = ENODEV;
		goto fail;
	}
	struct ibv_context *c = &ctx->vctx.context;
	c->device = device;
	c->cmd_fd = ctx->cmd_fd;
	c->async_fd = afd[0];
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->ops.poll_cq = sv_poll_cq;
	c->ops.req_notify_cq = sv_req_notify_cq;
	c->ops.post_srq_recv = sv_post_srq_recv;
	c->ops.post_send = sv_post_send;
	c->ops.post_recv = sv_post_recv;
	/* extended ops not listed stay NULL: their inline wrappers report EOPNOTSUPP */
	ctx->vctx.sz = sizeof(struct verbs_context);
	ctx->vctx.query_port = sv_query_port_ex;
	ctx->vctx.query_device_ex = sv_query_device_ex;
	ctx->vctx.create_qp_ex = sv_create_qp_ex;
	ctx->vctx.create_cq_ex = sv_create_cq_ex;
	ctx->vctx.query_rt_values = sv_query_rt_values;
	return c;
fail:
	if (ctx->cmd_fd >= 0)
		close(ctx->cmd_fd);
	if (afd[0] >= 0) {
		close(afd[0]);
		close(afd[1]);
	}
	free(ctx);
	return NULL;
}

static int sv_mr_of_ctx(void *val, void *arg)
{
	return ((struct sv_mr *)val)->mr.context == arg;
}

static int sv_cq_of_ctx(void *val, void *arg)
{
	return ((struct sv_cq *)val)->ctx == arg;
}

static int sv_qp_of_ctx(void *val, void *arg)
{
	return ((struct sv_qp *)val)->ctx == arg;
}

int ibv_close_device(struct ibv_context *context)
{
	struct sv_context *ctx = sv_ctx(context);
	struct sv_engine *e = ctx->eng;
	/* Objects the program did not destroy stay allocated (as a process' kernel objects would until
	 * exit), but the engine must not reach them any more: the context they point to is gone. */
	pthread_mutex_lock(&e->lock);
	sv_ht_remove_if(&e->mrs, sv_mr_of_ctx, context);
	sv_ht_remove_if(&e->cqs, sv_cq_of_ctx, ctx);
	sv_ht_remove_if(&e->qps, sv_qp_of_ctx, ctx);
	for (struct sv_qp **pp = &e->qp_list; *pp;) {
		if ((*pp)->ctx == ctx)
			*pp = (*pp)->next_all;
		else
			pp = &(*pp)->next_all;
	}
	pthread_mutex_unlock(&e->lock);
	sv_engine_put(e);
	close(context->async_fd);
	close(ctx->async_wfd);
	close(ctx->cmd_fd);
	while (ctx->aq_head) {
		struct sv_async *a = ctx->aq_head;
		ctx->aq_head = a->next;
		free(a);
	}
	pthread_mutex_destroy(&context->mutex);
	free(ctx);
	return 0;
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	errno = EOPNOTSUPP;
	return NULL;
}

/* ---- queries ---- */
static void sv_fill_device_attr(struct sv_engine *e, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof *a);
	snprintf(a->fw_ver, sizeof a->fw_ver, "1.0.0 softverbs");
	a->node_guid = htobe64(e->guid);
	a->sys_image_guid = htobe64(e->guid);
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
	sv_fill_device_attr(sv_ctx(context)->eng, device_attr);
	return 0;
}

static int sv_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t len)
{
	if (in && in->comp_mask)
		return EINVAL;
	struct ibv_device_attr_ex a;
	memset(&a, 0, sizeof a);
	sv_fill_device_attr(sv_ctx(c)->eng, &a.orig_attr);
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
	struct sv_engine *e = sv_ctx(c)->eng;
	if (port != 1)
		return EINVAL;
	struct ibv_port_attr a;
	memset(&a, 0, sizeof a);
	a.state = IBV_PORT_ACTIVE;
	a.max_mtu = SV_PORT_MTU;
	a.active_mtu = SV_PORT_MTU;
	a.gid_tbl_len = SV_GID_TBL_LEN;
	a.port_cap_flags = IBV_PORT_SM | IBV_PORT_CM_SUP | IBV_PORT_SYS_IMAGE_GUID_SUP;
	a.max_msg_sz = SV_MAX_MSG;
	pthread_mutex_lock(&e->lock);
	a.qkey_viol_cntr = e->qkey_viol;
	pthread_mutex_unlock(&e->lock);
	a.pkey_tbl_len = SV_PKEY_TBL_LEN;
	a.lid = e->lid;
	a.sm_lid = e->lid;
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
	*gid = sv_ctx(context)->eng->gid;
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
	entry->gid = sv_ctx(context)->eng->gid;
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

/* ---- async events ---- */
static void sv_async_push(struct sv_context *ctx, const struct ibv_async_event *ev)
{
	struct sv_async *a = malloc(sizeof *a);
	if (!a)
		return;
	a->ev = *ev;
	a->next = NULL;
	if (ctx->aq_tail)
		ctx->aq_tail->next = a;
	else
		ctx->aq_head = a;
	ctx->aq_tail = a;
	char b = 1;
	ssize_t r = write(ctx->async_wfd, &b, 1);
	(void)r;
}

void sv_async_qp(struct sv_qp *q, enum ibv_event_type t)
{
	struct ibv_async_event ev = {.element.qp = &q->ex.qp_base, .event_type = t};
	sv_async_push(q->ctx, &ev);
}

void sv_async_srq(struct sv_srq *s, enum ibv_event_type t)
{
	struct ibv_async_event ev = {.element.srq = &s->srq, .event_type = t};
	sv_async_push(s->ctx, &ev);
}

void sv_async_cq(struct sv_cq *cq, enum ibv_event_type t)
{
	struct ibv_async_event ev = {.element.cq = &cq->cq, .event_type = t};
	sv_async_push(cq->ctx, &ev);
}

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

/* drop queued (not yet returned) events of an object being destroyed */
void sv_async_forget(struct sv_context *ctx, void *obj)
{
	struct sv_async **pp = &ctx->aq_head;
	ctx->aq_tail = NULL;
	while (*pp) {
		struct sv_async *a = *pp;
		void *o = a->ev.event_type == IBV_EVENT_CQ_ERR	     ? (void *)a->ev.element.cq
			  : sv_is_qp_event(a->ev.event_type)  ? (void *)a->ev.element.qp
			  : sv_is_srq_event(a->ev.event_type) ? (void *)a->ev.element.srq
							      : NULL;
		if (o && o == obj) {
			*pp = a->next;
			free(a);
		} else {
			ctx->aq_tail = a;
			pp = &a->next;
		}
	}
}

int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct sv_context *ctx = sv_ctx(context);
	struct sv_engine *e = ctx->eng;
	for (;;) {
		char b;
		ssize_t r = read(context->async_fd, &b, 1);
		if (r != 1)
			return -1;
		pthread_mutex_lock(&e->lock);
		struct sv_async *a = ctx->aq_head;
		if (!a) {
			pthread_mutex_unlock(&e->lock);
			continue;
		}
		ctx->aq_head = a->next;
		if (!ctx->aq_head)
			ctx->aq_tail = NULL;
		*event = a->ev;
		if (event->event_type == IBV_EVENT_CQ_ERR)
			sv_cq_of(event->element.cq)->async_reported++;
		else if (sv_is_qp_event(event->event_type))
			sv_qp_of(event->element.qp)->events_reported++;
		else if (sv_is_srq_event(event->event_type))
			sv_srq_of(event->element.srq)->events_reported++;
		pthread_mutex_unlock(&e->lock);
		free(a);
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
	struct sv_engine *e = sv_ctx(context)->eng;
	struct sv_pd *pd = calloc(1, sizeof *pd);
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->pd.context = context;
	pthread_mutex_lock(&e->lock);
	pd->pd.handle = sv_new_handle(e);
	pthread_mutex_unlock(&e->lock);
	return &pd->pd;
}

int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct sv_pd *pd = sv_pd_of(ibpd);
	struct sv_engine *e = sv_ctx(ibpd->context)->eng;
	pthread_mutex_lock(&e->lock);
	if (pd->refs) {
		pthread_mutex_unlock(&e->lock);
		return EBUSY;
	}
	sv_ht_del(&e->hnds, ibpd->handle);
	pthread_mutex_unlock(&e->lock);
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
struct sv_mr *sv_mr_find(struct sv_engine *e, uint32_t key)
{
	return sv_ht_get(&e->mrs, key);
}

/* like pinning: the whole range must be mapped */
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

static struct ibv_mr *sv_reg_mr(struct ibv_pd *ibpd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	struct sv_engine *e = sv_ctx(ibpd->context)->eng;
	int err = sv_check_mr_args(addr, length, access);
	if (err) {
		errno = err;
		return NULL;
	}
	struct sv_mr *mr = calloc(1, sizeof *mr);
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr->pd = sv_pd_of(ibpd);
	mr->access = access;
	mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
	mr->host = addr;
	mr->len = length;
	mr->mr.context = ibpd->context;
	mr->mr.pd = ibpd;
	mr->mr.addr = addr;
	mr->mr.length = length;
	pthread_mutex_lock(&e->lock);
	uint32_t key;
	do
		key = sv_rand32();
	while (!key || sv_ht_get(&e->mrs, key));
	if (sv_ht_put(&e->mrs, key, mr)) {
		pthread_mutex_unlock(&e->lock);
		free(mr);
		errno = ENOMEM;
		return NULL;
	}
	mr->mr.handle = sv_new_handle(e);
	mr->mr.lkey = mr->mr.rkey = key;
	mr->pd->refs++;
	pthread_mutex_unlock(&e->lock);
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
	struct sv_mr *mr = sv_mr_of(ibmr);
	struct sv_engine *e = sv_ctx(ibmr->context)->eng;
	if (!flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	void *naddr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? addr : mr->host;
	size_t nlen = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? length : mr->len;
	unsigned nacc = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? (unsigned)access : mr->access;
	int err = sv_check_mr_args(naddr, nlen, nacc);
	if (err || ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->context != ibmr->context))) {
		errno = err ? err : EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	pthread_mutex_lock(&e->lock);
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		mr->pd->refs--;
		mr->pd = sv_pd_of(pd);
		mr->pd->refs++;
		ibmr->pd = pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->host = naddr;
		mr->len = nlen;
		mr->iova = (nacc & IBV_ACCESS_ZERO_BASED) ? 0 : (uintptr_t)naddr;
		ibmr->addr = naddr;
		ibmr->length = nlen;
	}
	mr->access = nacc;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct sv_mr *mr = sv_mr_of(ibmr);
	struct sv_engine *e = sv_ctx(ibmr->context)->eng;
	pthread_mutex_lock(&e->lock);
	sv_ht_del(&e->mrs, ibmr->lkey);
	sv_ht_del(&e->hnds, ibmr->handle);
	mr->pd->refs--;
	pthread_mutex_unlock(&e->lock);
	free(mr);
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

/* ---- completion channel ---- */
struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct sv_channel *ch = calloc(1, sizeof *ch);
	int fds[2];
	if (!ch || pipe2(fds, O_CLOEXEC)) {
		free(ch);
		errno = ENOMEM;
		return NULL;
	}
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	ch->ch.context = context;
	ch->ch.fd = fds[0];
	ch->ch.refcnt = 0;
	ch->wfd = fds[1];
	return &ch->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sv_channel *ch = (struct sv_channel *)channel;
	struct sv_engine *e = sv_ctx(channel->context)->eng;
	pthread_mutex_lock(&e->lock);
	int busy = channel->refcnt != 0;
	pthread_mutex_unlock(&e->lock);
	if (busy)
		return EBUSY;
	close(channel->fd);
	close(ch->wfd);
	free(ch);
	return 0;
}

/* ---- CQ ---- */
static struct sv_cq *sv_cq_new(struct ibv_context *context, int cqe, void *cq_context,
			       struct ibv_comp_channel *channel, int comp_vector, int with_ts)
{
	struct sv_context *ctx = sv_ctx(context);
	struct sv_engine *e = ctx->eng;
	if (cqe < 1 || cqe > SV_MAX_CQE || comp_vector < 0 || comp_vector >= context->num_comp_vectors ||
	    (channel && channel->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	struct sv_cq *cq = calloc(1, sizeof *cq);
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	uint32_t cap = 1;
	while (cap < (uint32_t)cqe + 1)
		cap <<= 1;
	cap -= 1; /* like common HCAs: a power of two minus one */
	if (cap < (uint32_t)cqe)
		cap = (uint32_t)cqe;
	cq->ring = calloc(cap, sizeof *cq->ring);
	cq->ts = with_ts ? calloc(cap, sizeof *cq->ts) : NULL;
	if (!cq->ring || (with_ts && !cq->ts)) {
		free(cq->ring);
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->cap = cap;
	cq->ctx = ctx;
	cq->chan = (struct sv_channel *)channel;
	cq->cq.context = context;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = (int)cap;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	pthread_mutex_lock(&e->lock);
	cq->cq.handle = sv_new_handle(e);
	sv_ht_put(&e->cqs, cq->cq.handle, cq);
	if (channel)
		channel->refcnt++;
	pthread_mutex_unlock(&e->lock);
	return cq;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context, struct ibv_comp_channel *channel,
			     int comp_vector)
{
	struct sv_cq *cq = sv_cq_new(context, cqe, cq_context, channel, comp_vector, 0);
	return cq ? &cq->cq : NULL;
}

/* ---- the extended CQ (ibv_create_cq_ex / ibv_start_poll ...) ---- */
static struct sv_cq *sv_cqx(struct ibv_cq_ex *x)
{
	return (struct sv_cq *)x;
}

static int sv_cqx_next(struct ibv_cq_ex *x)
{
	struct sv_cq *cq = sv_cqx(x);
	if (__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE) == 0)
		return ENOENT;
	struct sv_engine *e = cq->ctx->eng;
	pthread_mutex_lock(&e->lock);
	if (!cq->count) {
		pthread_mutex_unlock(&e->lock);
		return ENOENT;
	}
	cq->cur = cq->ring[cq->head];
	cq->cur_ts = cq->ts ? cq->ts[cq->head] : 0;
	cq->head = (cq->head + 1) % cq->cap;
	__atomic_store_n(&cq->count, cq->count - 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&e->lock);
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
	struct sv_cq *cq = sv_cq_new(context, (int)a->cqe, a->cq_context, a->channel, (int)a->comp_vector, ts);
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

int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sv_cq *cq = sv_cq_of(ibcq);
	struct sv_engine *e = sv_ctx(ibcq->context)->eng;
	if (cqe < 1 || cqe > SV_MAX_CQE)
		return EINVAL;
	pthread_mutex_lock(&e->lock);
	if ((uint32_t)cqe < cq->count) {
		pthread_mutex_unlock(&e->lock);
		return EINVAL;
	}
	struct ibv_wc *nr = calloc((size_t)cqe, sizeof *nr);
	uint64_t *nts = cq->ts ? calloc((size_t)cqe, sizeof *nts) : NULL;
	if (!nr || (cq->ts && !nts)) {
		free(nr);
		pthread_mutex_unlock(&e->lock);
		return ENOMEM;
	}
	for (uint32_t i = 0; i < cq->count; i++) {
		nr[i] = cq->ring[(cq->head + i) % cq->cap];
		if (nts)
			nts[i] = cq->ts[(cq->head + i) % cq->cap];
	}
	free(cq->ring);
	free(cq->ts);
	cq->ring = nr;
	cq->ts = nts;
	cq->head = 0;
	cq->cap = (uint32_t)cqe;
	ibcq->cqe = cqe;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, int solicited)
{
	if (cq->count == cq->cap) {
		sv_log("CQ overrun (cqe %u): completion of wr_id %llu lost", cq->cap, (unsigned long long)wc->wr_id);
		sv_async_cq(cq, IBV_EVENT_CQ_ERR);
		return;
	}
	uint32_t slot = (cq->head + cq->count) % cq->cap;
	cq->ring[slot] = *wc;
	if (cq->ts)
		cq->ts[slot] = sv_now_ns();
	__atomic_store_n(&cq->count, cq->count + 1, __ATOMIC_RELEASE);
	if (cq->armed && cq->chan && (cq->armed == 1 || solicited || wc->status != IBV_WC_SUCCESS)) {
		cq->armed = 0;
		uint32_t h = cq->cq.handle;
		ssize_t r = write(cq->chan->wfd, &h, sizeof h);
		(void)r;
	}
}

int sv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sv_cq *cq = sv_cq_of(ibcq);
	if (n <= 0)
		return n < 0 ? -1 : 0;
	if (__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE) == 0) {
		/* A busy-polling program would starve the progress thread (our "HCA") on a small host:
		 * give the CPU away now and then. Invisible to the program except as latency. */
		if ((__atomic_add_fetch(&cq->empty_polls, 1, __ATOMIC_RELAXED) & 15) == 0)
			sched_yield();
		return 0;
	}
	struct sv_engine *e = cq->ctx->eng;
	pthread_mutex_lock(&e->lock);
	uint32_t k = cq->count < (uint32_t)n ? cq->count : (uint32_t)n;
	for (uint32_t i = 0; i < k; i++) {
		wc[i] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
	}
	__atomic_store_n(&cq->count, cq->count - k, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&e->lock);
	return (int)k;
}

int sv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sv_cq *cq = sv_cq_of(ibcq);
	struct sv_engine *e = cq->ctx->eng;
	pthread_mutex_lock(&e->lock);
	if (!solicited_only)
		cq->armed = 1;
	else if (cq->armed != 1)
		cq->armed = 2;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct sv_engine *e = sv_ctx(channel->context)->eng;
	for (;;) {
		uint32_t h;
		ssize_t r = read(channel->fd, &h, sizeof h);
		if (r != (ssize_t)sizeof h)
			return -1; /* EINTR, EAGAIN (O_NONBLOCK) ... as with the kernel's event file */
		pthread_mutex_lock(&e->lock);
		struct sv_cq *c = sv_ht_get(&e->cqs, h);
		if (c && &c->chan->ch == channel) {
			c->events_read++;
			*cq = &c->cq;
			*cq_context = c->cq.cq_context;
			pthread_mutex_unlock(&e->lock);
			return 0;
		}
		pthread_mutex_unlock(&e->lock); /* event of a CQ destroyed meanwhile */
	}
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sv_cq *cq = sv_cq_of(ibcq);
	struct sv_engine *e = cq->ctx->eng;
	pthread_mutex_lock(&e->lock);
	if (cq->refs) {
		pthread_mutex_unlock(&e->lock);
		return EBUSY;
	}
	sv_ht_del(&e->cqs, ibcq->handle);
	sv_ht_del(&e->hnds, ibcq->handle);
	sv_async_forget(cq->ctx, ibcq);
	uint32_t want_comp = cq->events_read, want_async = cq->async_reported;
	if (cq->chan)
		cq->chan->ch.refcnt--;
	pthread_mutex_unlock(&e->lock);
	/* as libibverbs: wait until every event handed out was acknowledged */
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != want_comp || ibcq->async_events_completed != want_async)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	free(cq->ring);
	free(cq->ts);
	free(cq);
	return 0;
}

/* ---- receive queues ---- */
int sv_rq_init(struct sv_rq *rq, uint32_t cap, uint32_t max_sge)
{
	rq->stride = sizeof(struct sv_rwr) + (size_t)max_sge * sizeof(struct ibv_sge);
	rq->cap = cap;
	rq->max_sge = max_sge;
	rq->head = rq->count = 0;
	rq->slots = cap ? calloc(cap, rq->stride) : NULL;
	return cap && !rq->slots ? ENOMEM : 0;
}

int sv_rq_post(struct sv_rq *rq, const struct ibv_recv_wr *wr)
{
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge)
		return EINVAL;
	if (rq->count >= rq->cap)
		return ENOMEM;
	struct sv_rwr *r = (struct sv_rwr *)(rq->slots + (size_t)((rq->head + rq->count) % rq->cap) * rq->stride);
	r->wr_id = wr->wr_id;
	r->nsge = wr->num_sge;
	if (wr->num_sge)
		memcpy(r->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
	rq->count++;
	return 0;
}

struct sv_rwr *sv_rq_peek(struct sv_rq *rq)
{
	if (!rq->count)
		return NULL;
	return (struct sv_rwr *)(rq->slots + (size_t)rq->head * rq->stride);
}

void sv_rq_pop(struct sv_rq *rq)
{
	rq->head = (rq->head + 1) % rq->cap;
	rq->count--;
}

/* ---- SRQ ---- */
struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *init)
{
	struct sv_context *ctx = sv_ctx(pd->context);
	struct sv_engine *e = ctx->eng;
	if (!init->attr.max_wr || init->attr.max_wr > SV_MAX_SRQ_WR || init->attr.max_sge > SV_MAX_SGE ||
	    init->attr.srq_limit > init->attr.max_wr) {
		errno = EINVAL;
		return NULL;
	}
	struct sv_srq *s = calloc(1, sizeof *s);
	uint32_t max_sge = init->attr.max_sge ? init->attr.max_sge : 1;
	if (!s || sv_rq_init(&s->rq, init->attr.max_wr, max_sge)) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->ctx = ctx;
	s->pd = sv_pd_of(pd);
	s->srq.context = pd->context;
	s->srq.srq_context = init->srq_context;
	s->srq.pd = pd;
	pthread_mutex_init(&s->srq.mutex, NULL);
	pthread_cond_init(&s->srq.cond, NULL);
	init->attr.max_sge = max_sge;
	pthread_mutex_lock(&e->lock);
	s->srq.handle = sv_new_handle(e);
	s->pd->refs++;
	pthread_mutex_unlock(&e->lock);
	return &s->srq;
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	struct sv_srq *s = sv_srq_of(srq);
	struct sv_engine *e = s->ctx->eng;
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	pthread_mutex_lock(&e->lock);
	int err = 0;
	uint32_t new_max = (mask & IBV_SRQ_MAX_WR) ? attr->max_wr : s->rq.cap;
	if ((mask & IBV_SRQ_MAX_WR) && (attr->max_wr < s->rq.count || !attr->max_wr || attr->max_wr > SV_MAX_SRQ_WR))
		err = EINVAL;
	if (!err && (mask & IBV_SRQ_LIMIT) && attr->srq_limit > new_max)
		err = EINVAL;
	if (!err && (mask & IBV_SRQ_MAX_WR) && attr->max_wr != s->rq.cap) {
		struct sv_rq nrq;
		if (sv_rq_init(&nrq, attr->max_wr, s->rq.max_sge)) {
			err = ENOMEM;
		} else {
			for (uint32_t i = 0; i < s->rq.count; i++)
				memcpy(nrq.slots + (size_t)i * nrq.stride,
				       s->rq.slots + (size_t)((s->rq.head + i) % s->rq.cap) * s->rq.stride, s->rq.stride);
			nrq.count = s->rq.count;
			free(s->rq.slots);
			s->rq = nrq;
		}
	}
	if (!err && (mask & IBV_SRQ_LIMIT))
		s->limit = attr->srq_limit;
	pthread_mutex_unlock(&e->lock);
	return err;
}

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct sv_srq *s = sv_srq_of(srq);
	struct sv_engine *e = s->ctx->eng;
	pthread_mutex_lock(&e->lock);
	attr->max_wr = s->rq.cap;
	attr->max_sge = s->rq.max_sge;
	attr->srq_limit = s->limit;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
	struct sv_srq *s = sv_srq_of(srq);
	struct sv_engine *e = s->ctx->eng;
	pthread_mutex_lock(&e->lock);
	if (s->refs) {
		pthread_mutex_unlock(&e->lock);
		return EBUSY;
	}
	sv_async_forget(s->ctx, srq);
	sv_ht_del(&e->hnds, srq->handle);
	s->pd->refs--;
	uint32_t want = s->events_reported;
	pthread_mutex_unlock(&e->lock);
	pthread_mutex_lock(&srq->mutex);
	while (srq->events_completed != want)
		pthread_cond_wait(&srq->cond, &srq->mutex);
	pthread_mutex_unlock(&srq->mutex);
	free(s->rq.slots);
	free(s);
	return 0;
}

int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_srq *s = sv_srq_of(srq);
	struct sv_engine *e = s->ctx->eng;
	int err = 0;
	pthread_mutex_lock(&e->lock);
	for (; wr; wr = wr->next) {
		err = sv_rq_post(&s->rq, wr);
		if (err) {
			*bad = wr;
			break;
		}
	}
	sv_srq_drain(s);
	pthread_mutex_unlock(&e->lock);
	return err;
}

/* after a receive WR was taken from the SRQ: fire the armed limit event */
int sv_srq_consumed(struct sv_srq *s)
{
	if (s->limit && s->rq.count < s->limit) {
		s->limit = 0;
		sv_async_srq(s, IBV_EVENT_SRQ_LIMIT_REACHED);
		return 1;
	}
	return 0;
}

/* ---- AH ---- */
struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sv_engine *e = sv_ctx(pd->context)->eng;
	if (attr->port_num != 1 || (attr->is_global && attr->grh.sgid_index >= SV_GID_TBL_LEN)) {
		errno = EINVAL;
		return NULL;
	}
	struct sv_ah *ah = calloc(1, sizeof *ah);
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->attr = *attr;
	ah->peer = sv_resolve(e, attr); /* NULL: datagrams to it are lost, as on a fabric without that LID */
	ah->pd = sv_pd_of(pd);
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	pthread_mutex_lock(&e->lock);
	ah->ah.handle = sv_new_handle(e);
	ah->pd->refs++;
	pthread_mutex_unlock(&e->lock);
	return &ah->ah;
}

int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct sv_ah *ah = sv_ah_of(ibah);
	struct sv_engine *e = sv_ctx(ibah->context)->eng;
	pthread_mutex_lock(&e->lock);
	ah->pd->refs--;
	sv_ht_del(&e->hnds, ibah->handle);
	pthread_mutex_unlock(&e->lock);
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
