/* softverbs: the protocol between the library in a program (libibverbs.so.1, the "verbs provider") and the
 * per-host daemon softverbsd (the "HCA"). Both ends run on one host: host byte order, fixed layouts.
 *
 * A context is one Unix stream connection. Every call is a request (struct svp_hdr + body, at most one
 * file descriptor attached with SCM_RIGHTS) answered by one reply (same header, rc = 0 or an errno, body,
 * at most one descriptor). Completions do not use the socket: each CQ is a ring in a memfd shared by
 * both (the daemon produces, the program consumes, no system call), completion-channel events are CQ
 * handles the daemon writes into the channel's pipe, async events are svp_async records written into
 * the context's async pipe. */
#ifndef SOFTVERBS_SV_PROTO_H
#define SOFTVERBS_SV_PROTO_H

#include <infiniband/verbs.h>
#include <stdint.h>

#define SVP_MAGIC 0x53565031u /* "SVP1" */

enum svp_op {
	SVP_OPEN = 1,	 /* fd: write end of the async pipe -> svp_open_rep */
	SVP_QUERY_PORT,	 /* -> svp_port_rep */
	SVP_ALLOC_PD,	 /* -> svp_h */
	SVP_DEALLOC_PD,	 /* svp_h */
	SVP_REG_MR,	 /* svp_mr_req -> svp_mr_rep */
	SVP_REREG_MR,	 /* svp_mr_req */
	SVP_DEREG_MR,	 /* svp_h */
	SVP_CREATE_CH,	 /* fd: write end of the channel pipe -> svp_h */
	SVP_DESTROY_CH,	 /* svp_h */
	SVP_CREATE_CQ,	 /* svp_cq_req -> svp_cq_rep + fd (memfd of the ring) */
	SVP_RESIZE_CQ,	 /* svp_cq_req -> svp_cq_rep + fd */
	SVP_DESTROY_CQ,	 /* svp_h */
	SVP_CREATE_SRQ,	 /* svp_srq_req -> svp_srq_rep */
	SVP_MODIFY_SRQ,	 /* svp_srq_req */
	SVP_QUERY_SRQ,	 /* svp_h -> svp_srq_rep */
	SVP_DESTROY_SRQ, /* svp_h */
	SVP_CREATE_AH,	 /* svp_ah_req -> svp_h */
	SVP_DESTROY_AH,	 /* svp_h */
	SVP_CREATE_QP,	 /* svp_qp_req -> svp_qp_rep */
	SVP_MODIFY_QP,	 /* svp_modify_req */
	SVP_QUERY_QP,	 /* svp_h -> svp_query_qp_rep */
	SVP_DESTROY_QP,	 /* svp_h */
	SVP_POST_SEND,	 /* svp_post_req + n x (svp_swr, sges, inline data) -> idx = first failed WR */
	SVP_POST_RECV,	 /* svp_post_req + n x (svp_rwr, sges) */
	SVP_POST_SRQ_RECV,
	SVP_STATS, /* -> text */
};

struct svp_hdr {
	uint32_t len; /* including this header */
	uint32_t op;
	int32_t rc;   /* reply: 0 or a positive errno */
	uint32_t idx; /* reply to a post: index of the WR that failed */
};

struct svp_open_req {
	uint32_t magic;
	uint32_t pid;
};

struct svp_open_rep {
	uint64_t guid;
	uint16_t lid;
	uint16_t pad;
	uint32_t daemon_pid;
	uint8_t gid[16];
};

struct svp_port_rep {
	uint32_t qkey_viol;
	uint16_t lid;
	uint16_t pad;
};

struct svp_h {
	uint32_t handle;
	uint32_t pad;
};

struct svp_mr_req {
	uint32_t pd;
	uint32_t access;
	uint64_t addr;
	uint64_t len;
	uint64_t iova;
	uint32_t mr;    /* rereg */
	int32_t flags;  /* rereg */
};

struct svp_mr_rep {
	uint32_t handle, lkey, rkey, pad;
};

struct svp_cq_req {
	uint32_t cq; /* resize */
	uint32_t cqe;
	uint32_t channel; /* 0 = none */
	uint32_t with_ts;
};

struct svp_cq_rep {
	uint32_t handle;
	uint32_t cap;
	uint64_t map_len;
};

struct svp_srq_req {
	uint32_t pd;
	uint32_t srq;
	uint32_t max_wr, max_sge, srq_limit;
	int32_t mask;
};

struct svp_srq_rep {
	uint32_t handle, max_wr, max_sge, srq_limit;
};

struct svp_ah_req {
	uint32_t pd;
	uint32_t pad;
	struct ibv_ah_attr attr;
};

struct svp_qp_req {
	uint32_t pd, scq, rcq, srq;
	uint32_t type;
	int32_t sq_sig_all;
	uint32_t is_ex;
	uint32_t pad;
	uint64_t send_ops_flags;
	struct ibv_qp_cap cap;
};

struct svp_qp_rep {
	uint32_t handle;
	uint32_t qpn;
	struct ibv_qp_cap cap;
};

struct svp_modify_req {
	uint32_t qp;
	int32_t mask;
	struct ibv_qp_attr attr;
};

struct svp_query_qp_rep {
	struct ibv_qp_attr attr;
	uint32_t type;
	int32_t sq_sig_all;
};

struct svp_post_req {
	uint32_t obj; /* QP or SRQ handle */
	uint32_t n;
};

/* a send WR; followed by num_sge struct ibv_sge, then (IBV_SEND_INLINE) the data of all SGEs, padded to 8 */
struct svp_swr {
	uint64_t wr_id;
	uint32_t opcode;
	uint32_t send_flags;
	uint32_t imm; /* network order, as posted */
	int32_t num_sge;
	uint64_t raddr;
	uint32_t rkey;
	uint32_t ah;
	uint64_t cmp_add, swap;
	uint32_t remote_qpn, remote_qkey;
	uint32_t inl_len;
	uint32_t pad;
};

/* a receive WR; followed by num_sge struct ibv_sge */
struct svp_rwr {
	uint64_t wr_id;
	int32_t num_sge;
	uint32_t pad;
};

/* an async event, written by the daemon into the context's async pipe */
struct svp_async {
	uint32_t type; /* enum ibv_event_type */
	uint32_t handle;
};

/* ---- the CQ ring, in a memfd mapped by both (daemon: producer, program: consumer) ---- */
struct svp_cqe {
	struct ibv_wc wc;
	uint64_t ts; /* completion time, CLOCK_MONOTONIC ns */
};

struct svp_cqring {
	uint32_t cap;   /* entries */
	uint32_t armed; /* 0, 1 = next completion, 2 = next solicited completion; set by the program, cleared by
			 * the daemon when it writes the event */
	uint64_t tail;	/* next entry the daemon writes (release) */
	uint8_t pad0[48];
	uint64_t head; /* next entry the program reads (release) */
	uint8_t pad1[56];
	struct svp_cqe e[];
};

static inline uint64_t svp_ring_len(uint32_t cap)
{
	return sizeof(struct svp_cqring) + (uint64_t)cap * sizeof(struct svp_cqe);
}

#endif
