/* softverbs: a software InfiniBand verbs device. Internal declarations of the daemon, softverbsd (the
 * "HCA": sv_net.c, sv_qp.c, sv_dev.c, softverbsd.c). See README.md for what is (not) modelled. */
#ifndef SOFTVERBS_SV_H
#define SOFTVERBS_SV_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <infiniband/verbs.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "sv_proto.h"

/* ---- device limits (reported by ibv_query_device and enforced) ---- */
#define SV_MAX_QP 65536
#define SV_MAX_QP_WR 16384
#define SV_MAX_SGE 32
#define SV_MAX_CQ 65536
#define SV_MAX_CQE 4194303
#define SV_MAX_MR 524288
#define SV_MAX_PD 65536
#define SV_MAX_RD_ATOM 16
#define SV_MAX_SRQ 65536
#define SV_MAX_SRQ_WR 16384
#define SV_MAX_AH 65536
#define SV_DEF_INLINE 256  /* max_inline_data reported when the QP asks for less */
#define SV_MAX_INLINE 1024 /* larger requests fail with EINVAL */
#define SV_MAX_MSG 0x80000000u
#define SV_PORT_MTU IBV_MTU_4096
#define SV_GID_TBL_LEN 1
#define SV_PKEY_TBL_LEN 1
#define SV_DEFAULT_PKEY 0xffff
#define SV_VENDOR_ID 0x5356 /* "SV" */
#define SV_VENDOR_PART 0x0001

/* ---- wire protocol (one TCP byte stream per ordered engine pair; host byte order) ---- */
enum sv_op {
	SV_OP_HELLO = 1,
	/* requests (requester -> responder) */
	SV_OP_SEND,
	SV_OP_WRITE,
	SV_OP_READ,
	SV_OP_CMP_SWP,
	SV_OP_FETCH_ADD,
	SV_OP_UD_SEND,
	/* responses (responder -> requester) */
	SV_OP_ACK,
	SV_OP_READ_RESP,
	SV_OP_ATOMIC_RESP,
	SV_OP_NAK,
	SV_OP_RNR_WAIT, /* informational: the request waits for a receive WR (suspends the transport timer) */
	SV_OP_RNR_END,  /* informational: the responder stopped waiting without answering (QP reset/error/
			 * destroyed): the transport timer runs again, as when RNR NAKs stop coming */
};

enum sv_nak {
	SV_NAK_SEQ = 1,    /* PSN sequence error */
	SV_NAK_REM_ACCESS, /* rkey / access / bounds violation */
	SV_NAK_INV_REQ,    /* invalid request (e.g. receive buffer too small, misaligned atomic) */
	SV_NAK_REM_OP,     /* remote operational error (e.g. bad lkey in the receive WR) */
	SV_NAK_RNR_EXC,    /* RNR retries exhausted */
};

#define SV_F_SOLICITED 0x01
#define SV_F_GRH 0x02
#define SV_F_IMM 0x04
#define SV_F_UC 0x10 /* request from a UC QP */

#define SV_MAGIC 0x5356u

struct sv_wire {
	uint32_t len; /* frame length including this header */
	uint8_t op;
	uint8_t flags;
	uint8_t rnr_retry;
	uint8_t syndrome;
	uint32_t src_qpn;
	uint32_t dst_qpn;
	uint32_t psn;
	uint32_t imm; /* network order, exactly as posted */
	uint32_t qkey;
	uint32_t rkey;
	uint64_t seq; /* requester WR sequence number, echoed in responses */
	uint64_t raddr;
	uint64_t cmp_add;
	uint64_t swap;
	uint32_t rlen; /* RDMA read length */
	uint32_t flow_label;
	uint16_t src_lid;
	uint8_t sl;
	uint8_t tclass;
	uint8_t hop_limit;
	uint8_t pad[3];
	uint8_t sgid[16];
	uint8_t dgid[16];
	/* HELLO */
	uint64_t guid;
	uint16_t magic;
	uint16_t lport;
	uint32_t pad2;
};

/* ---- generic u32-keyed hash table ---- */
struct sv_hent {
	uint32_t key;
	void *val;
	struct sv_hent *next;
};
struct sv_htab {
	struct sv_hent **b;
	uint32_t nb;
	uint32_t n;
};
void sv_ht_init(struct sv_htab *h);
void sv_ht_free(struct sv_htab *h);
void *sv_ht_get(struct sv_htab *h, uint32_t key);
int sv_ht_put(struct sv_htab *h, uint32_t key, void *val);
void *sv_ht_del(struct sv_htab *h, uint32_t key);
uint32_t sv_ht_remove_if(struct sv_htab *h, int (*drop)(void *val, void *arg), void *arg);

/* ---- transport ---- */
struct sv_peer;
struct sv_conn {
	int fd;
	int dead;
	int hello_done;
	int is_self_rx;
	int shut;
	struct sv_peer *peer; /* remote engine, known after HELLO */
	uint8_t *ibuf;
	size_t ilen, icap;
	uint8_t *obuf;
	size_t ooff, olen, ocap;
	struct sv_conn *next;
};

struct sv_peer {
	uint64_t guid;
	uint16_t lid;
	int dead;
	int is_self;
	struct sv_conn *tx; /* the one connection used to send to this peer (keeps order) */
	struct sv_peer *next;
};

struct sv_context;
struct sv_qp;
struct sv_cq;
struct sv_srq;

struct sv_engine {
	pthread_mutex_t lock;
	int refs;
	uint64_t guid;
	uint16_t lid;
	uint16_t port; /* TCP listening port, host order */
	uint32_t ips[16]; /* advertised IPv4 addresses, network order */
	int nips;
	union ibv_gid gid;
	int listen_fd;
	int wake_fd;
	pthread_t thread;
	int stopping;
	struct sv_htab qps;  /* qp_num -> sv_qp */
	struct sv_htab mrs;  /* lkey (== rkey) -> sv_mr */
	struct sv_htab cqs;  /* handle -> sv_cq */
	struct sv_htab hnds; /* every handle in use (pd/cq/srq/qp/ah/mr) */
	struct sv_qp *qp_list;
	struct sv_conn *conns;
	struct sv_peer *peers;
	struct sv_peer *self;
	struct sv_context *clients; /* connected programs (one per open device context) */
	int nclients;
	uint64_t nconnects;
	char regpath[PATH_MAX + 32];
	char regdir[PATH_MAX];
	uint32_t qkey_viol;
	pid_t pid;
};

/* ---- objects ---- */
/* one connected program context (the daemon-side ibv_context: objects point at vctx.context) */
struct sv_context {
	struct verbs_context vctx;
	struct sv_engine *eng;
	int fd;        /* the Unix connection to the program */
	pid_t pid;     /* the program, whose registered memory the daemon reads and writes */
	int async_wfd; /* write end of the program's async event pipe */
	int opened;
	pthread_t thread;
	struct sv_context *next;
};

struct sv_pd {
	struct ibv_pd pd;
	int refs;
};

struct sv_mr {
	struct ibv_mr mr;
	struct sv_pd *pd;
	unsigned int access;
	uint64_t iova;
	uint64_t haddr; /* address in the owning program */
	size_t len;
};

struct sv_channel {
	struct sv_context *ctx;
	uint32_t handle;
	int refs;
	int wfd; /* write end of the program's channel pipe */
};

struct sv_cq {
	struct ibv_cq cq;
	struct sv_context *ctx;
	struct sv_channel *chan;
	struct svp_cqring *ring; /* shared with the program */
	size_t ring_len;
	int memfd;
	int with_ts;
	int refs;
};

/* a posted receive WR */
struct sv_rwr {
	uint64_t wr_id;
	int nsge;
	struct ibv_sge sge[]; /* max_sge slots */
};

struct sv_rq {
	uint8_t *slots;
	size_t stride;
	uint32_t cap, max_sge, head, count;
};

struct sv_srq {
	struct ibv_srq srq;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_rq rq;
	uint32_t limit; /* armed limit, 0 = not armed */
	int refs;
	struct sv_qp *wait_head, *wait_tail; /* QPs with messages waiting for a receive WR */
	uint32_t events_reported;
};

struct sv_ah {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
	struct sv_peer *peer;
	struct sv_pd *pd;
};

/* send WR states */
enum { SWR_QUEUED = 0, SWR_SENT, SWR_DONE };

struct sv_swr {
	uint64_t wr_id;
	uint64_t seq;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;
	uint8_t signaled;
	uint8_t state;
	uint8_t rnr_wait;
	uint8_t is_rd; /* RDMA read or atomic */
	enum ibv_wc_status status;
	uint32_t byte_len;
	uint32_t imm;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t cmp_add, swap;
	/* UD destination */
	struct ibv_ah_attr ah_attr;
	struct sv_peer *ud_peer;
	uint32_t remote_qpn, remote_qkey;
	/* data: either an inline copy or a gather list resolved at transmit time */
	int nsge;
	struct ibv_sge *sge;
	uint8_t *inl;
	uint32_t inl_len;
	uint32_t psn;
	uint64_t deadline_ns; /* transport timeout; 0 = none */
};

struct sv_msg {
	struct sv_msg *next;
	int announced; /* the requester was told it waits for a receive WR (RNR) */
	struct sv_wire h;
	uint8_t data[];
};

struct sv_qp {
	struct ibv_qp_ex ex; /* ex.qp_base is the public ibv_qp */
	struct sv_context *ctx;
	struct sv_engine *eng;
	struct sv_pd *pd;
	struct sv_cq *scq, *rcq;
	struct sv_srq *srq;
	enum ibv_qp_type type;
	enum ibv_qp_state state;
	struct ibv_qp_cap cap;
	int sq_sig_all;
	int is_ex;
	uint64_t send_ops_flags;
	/* attributes */
	uint32_t qkey;
	uint32_t dest_qpn;
	unsigned int access;
	uint16_t pkey_index;
	uint8_t port_num;
	enum ibv_mtu path_mtu;
	enum ibv_mig_state mig_state;
	struct ibv_ah_attr ah;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint8_t max_rd_atomic, max_dest_rd_atomic, en_sqd_async_notify;
	uint64_t tmo_ns;      /* transport timeout (all retries), 0 = infinite */
	uint64_t progress_ns; /* last response from the responder: the ACK timer restarts there */
	uint32_t sq_psn; /* next PSN to send */
	uint32_t epsn;   /* next PSN expected */
	struct sv_peer *peer;
	/* send queue: ring indexed by seq % sq_cap */
	struct sv_swr *sq;
	uint32_t sq_cap;
	uint64_t sq_head; /* oldest slot not yet reclaimed */
	uint64_t sq_done; /* next WR to complete */
	uint64_t sq_tx;   /* next WR to transmit */
	uint64_t sq_tail; /* next free seq */
	int sq_blocked;   /* a WR failed locally: nothing after it is transmitted */
	int rd_outstanding;
	/* receive queue */
	struct sv_rq rq;
	/* responder: requests waiting for a receive WR (RNR), in arrival order */
	struct sv_msg *inq_head, *inq_tail;
	uint64_t rnr_deadline_ns; /* 0 = wait forever */
	int on_srq_wait;
	struct sv_qp *srq_wait_next;
	int comm_est;
	int sqd_notify;
	uint32_t events_reported;
	struct sv_qp *next_all;
};

/* ---- helpers ---- */
static inline struct sv_context *sv_ctx(struct ibv_context *c)
{
	return (struct sv_context *)((uint8_t *)c - offsetof(struct sv_context, vctx.context));
}
#define sv_qp_of(ibqp) ((struct sv_qp *)(ibqp))
#define sv_cq_of(ibcq) ((struct sv_cq *)(ibcq))
#define sv_pd_of(ibpd) ((struct sv_pd *)(ibpd))
#define sv_mr_of(ibmr) ((struct sv_mr *)(ibmr))
#define sv_srq_of(ibsrq) ((struct sv_srq *)(ibsrq))
#define sv_ah_of(ibah) ((struct sv_ah *)(ibah))

/* sv_util.c */
uint64_t sv_rand64(void);
uint32_t sv_rand32(void);
uint64_t sv_now_ns(void);
void sv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern int sv_debug;
/* every object is in e->hnds: handle -> struct sv_obj */
enum { SVO_PD = 1, SVO_MR, SVO_CH, SVO_CQ, SVO_SRQ, SVO_AH, SVO_QP };
struct sv_obj {
	int type;
	struct sv_context *ctx;
	void *p;
};
uint32_t sv_new_handle(struct sv_engine *e, struct sv_context *ctx, int type, void *p);
void *sv_obj_get(struct sv_context *ctx, int type, uint32_t handle);
void sv_obj_del(struct sv_engine *e, uint32_t handle);
/* the program's memory (process_vm_readv/writev); 0 = done, -1 = fault or program gone */
int sv_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int sv_mem_write(pid_t pid, uint64_t addr, const void *buf, size_t len);
/* set by sv_mem_* when the program has exited (ESRCH): its QPs are about to be destroyed, and a request
 * that needed its memory is dropped without a response, as at a dead host (e->lock held) */
extern int sv_mem_gone;
uint32_t sv_mtu_bytes(enum ibv_mtu m);
uint64_t sv_rnr_timer_ns(uint8_t code);
uint64_t sv_transport_timeout_ns(uint8_t timeout, uint8_t retry_cnt);
extern uint64_t sv_min_timeout_ns;
long sv_env_long(const char *name, long def);
const char *sv_dir(void);                /* $SOFTVERBS_DIR: LID registry and daemon sockets */
int sv_sock_path(char *buf, size_t len); /* the daemon socket of this network namespace */

/* sv_net.c */
struct sv_engine *sv_engine_get(void); /* start (or reference) the process' engine */
void sv_engine_put(struct sv_engine *e);
void sv_wake(struct sv_engine *e);
int sv_peer_send(struct sv_engine *e, struct sv_peer *p, struct sv_wire *h, const struct iovec *iov, int iovcnt);
/* Blocking (connects); call without e->lock. NULL = unreachable. Peers live until the engine stops. */
struct sv_peer *sv_resolve(struct sv_engine *e, const struct ibv_ah_attr *ah);
void sv_make_gid(struct sv_engine *e, union ibv_gid *gid);

/* sv_qp.c (called by the progress thread with e->lock held) */
void sv_dispatch(struct sv_engine *e, struct sv_conn *c, struct sv_wire *h, uint8_t *data);
/* fire = 0: only compute the next deadline (0 = none); fire = 1: also expire what is due */
uint64_t sv_timers(struct sv_engine *e, uint64_t now, int fire);
void sv_qp_peer_dead(struct sv_engine *e, struct sv_peer *p);

/* sv_dev.c */
void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, int solicited);
void sv_async_qp(struct sv_qp *q, enum ibv_event_type t);
void sv_async_srq(struct sv_srq *s, enum ibv_event_type t);
void sv_async_cq(struct sv_cq *cq, enum ibv_event_type t);
struct sv_mr *sv_mr_find(struct sv_engine *e, uint32_t key);
int sv_rq_post(struct sv_rq *rq, const struct ibv_recv_wr *wr);
struct sv_rwr *sv_rq_peek(struct sv_rq *rq);
void sv_rq_pop(struct sv_rq *rq);
int sv_rq_init(struct sv_rq *rq, uint32_t cap, uint32_t max_sge);
int sv_srq_consumed(struct sv_srq *s);
/* the calls of the protocol (sv_proto.h); with e->lock held unless noted. out: reply body; *ofd: a
 * descriptor to pass back; return 0 or an errno */
int svd_call(struct sv_context *ctx, uint32_t op, const void *in, size_t inlen, int infd, void *out,
	     size_t *outlen, int *ofd, uint32_t *idx); /* takes e->lock itself */
void svd_client_gone(struct sv_context *ctx);        /* destroys all of the context's objects */

/* sv_qp.c (with e->lock held) */
int sv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int sv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
struct ibv_qp *sv_create_qp(struct sv_context *ctx, struct ibv_qp_init_attr_ex *attr, int is_ex);
int sv_destroy_qp(struct sv_qp *q);
int sv_modify_qp_check(struct sv_qp *q, struct ibv_qp_attr *attr, int mask);
int sv_modify_qp(struct sv_qp *q, struct ibv_qp_attr *attr, int mask, struct sv_peer *peer);
void sv_query_qp(struct sv_qp *q, struct ibv_qp_attr *attr);
void sv_srq_drain(struct sv_srq *s);

#endif
