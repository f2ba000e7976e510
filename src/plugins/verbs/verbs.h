// The verbs plugin (issue 12, docs/verbs.md): InfiniBand verbs programs under transparent checkpointing,
// after DMTCP's InfiniBand plugin. The program never holds a device object: every ibv_* call that
// creates one returns a shadow (the structs below, whose first member is the libibverbs struct the
// program reads), and the shadows keep what is needed to make the object again after a restart. Ids the
// program can see or send to a peer (lid, gid, qp_num, lkey/rkey) are virtual: the values of the first
// run, translated to the current device's at every call.
#pragma once

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "plugins/common/engine_section.h"

// <infiniband/verbs.h> turns these into inline helpers; the plugin defines the real symbols.
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_get_device_list

namespace revive::verbs {

// The next definitions (libibverbs, or the softverbs test device), resolved at the first open.
struct Real {
  ibv_device** (*get_device_list)(int*);
  void (*free_device_list)(ibv_device**);
  const char* (*get_device_name)(ibv_device*);
  ibv_context* (*open_device)(ibv_device*);
  int (*close_device)(ibv_context*);
  int (*query_device)(ibv_context*, ibv_device_attr*);
  int (*query_port)(ibv_context*, uint8_t, struct _compat_ibv_port_attr*);
  int (*query_gid)(ibv_context*, uint8_t, int, ibv_gid*);
  int (*query_pkey)(ibv_context*, uint8_t, int, __be16*);
  ibv_pd* (*alloc_pd)(ibv_context*);
  int (*dealloc_pd)(ibv_pd*);
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int);
  ibv_mr* (*reg_mr_iova2)(ibv_pd*, void*, size_t, uint64_t, unsigned);
  int (*dereg_mr)(ibv_mr*);
  ibv_comp_channel* (*create_comp_channel)(ibv_context*);
  int (*destroy_comp_channel)(ibv_comp_channel*);
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int);
  int (*destroy_cq)(ibv_cq*);
  int (*get_cq_event)(ibv_comp_channel*, ibv_cq**, void**);
  void (*ack_cq_events)(ibv_cq*, unsigned);
  ibv_srq* (*create_srq)(ibv_pd*, ibv_srq_init_attr*);
  int (*modify_srq)(ibv_srq*, ibv_srq_attr*, int);
  int (*query_srq)(ibv_srq*, ibv_srq_attr*);
  int (*destroy_srq)(ibv_srq*);
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*);
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int);
  int (*query_qp)(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*);
  int (*destroy_qp)(ibv_qp*);
  ibv_ah* (*create_ah)(ibv_pd*, ibv_ah_attr*);
  int (*destroy_ah)(ibv_ah*);
  int (*get_async_event)(ibv_context*, ibv_async_event*);
  void (*ack_async_event)(ibv_async_event*);
};
extern Real real;
bool resolve();  // false: no verbs library behind us (errno ENOSYS)
void forked_child();  // pthread_atfork child handler (verbs_ckpt.cpp)

constexpr int kPorts = 2;    // ports 1..2 are virtualised (lid, gid indexes below)
constexpr int kGids = 4;

// Allocated behind a verbs_context prefix (ctx_prefix(): the extended ops the inline helpers find in front
// of an ibv_context): they forward to the device and mark the process as holding an object the plugin
// cannot restart (State::unsupported).
struct VCtx {
  ibv_context sh;  // the program's context: ops are ours, abi_compat extended
  ibv_context* real;
  uint32_t ordinal;  // 1, 2...: this process's contexts, the high half of the index keys
  char devname[64];
  uint16_t vlid[kPorts + 1], rlid[kPorts + 1];  // per port, 0 = not seen
  ibv_gid vgid[kPorts + 1][kGids], rgid[kPorts + 1][kGids];
  uint8_t gid_seen[kPorts + 1];  // bit i: vgid[port][i] valid
  VCtx* next;
};

struct VPd {
  ibv_pd sh;
  ibv_pd* real;
  VCtx* ctx;
  VPd* next;
};

struct VMr {
  ibv_mr sh;  // lkey/rkey virtual
  ibv_mr* real;
  VPd* pd;
  uint64_t iova;
  int access;
  bool iova2;
  VMr* next;
};

struct VChan {
  ibv_comp_channel sh;  // fd: the number the program knows
  ibv_comp_channel* real;
  VCtx* ctx;
  bool event_pending;  // at the last drain: an event the program had not read (lost with the device)
  VChan* next;
};

struct VCq {
  ibv_cq sh;
  ibv_cq* real;
  VCtx* ctx;
  VChan* chan;
  int cqe_asked, comp_vector;
  // Completions taken out of the device at a checkpoint, handed to the program before the device's.
  ibv_wc* vq;
  uint32_t vq_head, vq_n, vq_cap;
  volatile int lock;
  unsigned events_real;    // events got from the current real CQ, not acked yet
  unsigned events_before;  // events got before a restart, not acked yet (acks consume these first)
  bool armed, armed_solicited;
  VCq* next;
};

// A posted work request as the program gave it (virtual keys, shadow AH), with copies of its SGEs and
// inline data: what a restart posts again. Entries live in a ring per queue.
struct SendRec {
  uint64_t wr_id;
  uint32_t opcode, flags, imm, num_sge;
  uint64_t remote_addr, compare_add, swap;
  uint32_t rkey;
  void* ah;  // VAh*
  uint32_t remote_qpn, remote_qkey;
  uint32_t inline_len;
  bool probe;  // ours (a checkpoint's fence), never the program's
  // followed by num_sge ibv_sge, then inline_len bytes
};

struct Ring {
  uint8_t* mem;
  uint32_t entry, cap, head, n;
  void* at(uint32_t i) const { return mem + size_t((head + i) % cap) * entry; }
};

struct VSrq {
  ibv_srq sh;
  ibv_srq* real;
  VPd* pd;
  ibv_srq_init_attr init;
  Ring recvs;
  volatile int lock;
  VSrq* next;
};

struct VQp {
  ibv_qp sh;  // qp_num virtual
  ibv_qp* real;
  VPd* pd;
  VCq *scq, *rcq;
  VSrq* srq;
  ibv_qp_init_attr init;   // as the program asked (shadow pointers)
  ibv_qp_attr attr;        // every attribute the program set, virtual ids
  int attr_mask;           // union of the masks it set
  ibv_qp_state ckpt_state; // at the last drain
  uint32_t ckpt_sq_psn, ckpt_rq_psn;
  uint16_t rvlid;          // the peer's virtual lid (RC/UC; from dlid or the gid)
  uint32_t max_inline;
  Ring sends, recvs;
  volatile int lock;
  // UD: the destinations (AH, QPN) its sends named, so a restart learns their new QPNs.
  static constexpr int kMaxUd = 32;
  void* ud_ah[kMaxUd];
  uint32_t ud_qpn[kMaxUd];
  int nud;
  VQp* next;
};

struct VAh {
  ibv_ah sh;
  ibv_ah* real;
  VPd* pd;
  ibv_ah_attr attr;  // virtual
  uint16_t rvlid;
  VAh* next;
};

// u64 -> pointer, read without a lock (verbs_index.cpp). Key 0 is never used.
struct IdTable {
  IdTable* older;  // the table this one replaced (kept: a reader may still be in it)
  uint32_t cap, pad;
  struct Slot {
    uint64_t key;
    void* val;
  } s[];
};
struct Index {
  IdTable* t;
  uint32_t used;  // live entries + tombstones
};
void* index_get(const Index& x, uint64_t key);
bool index_put(Index* x, uint64_t key, void* val);  // user threads only (may allocate)
void index_del(Index* x, uint64_t key);
void index_clear(Index* x);                          // keeps the table: for index_refill
bool index_refill(Index* x, uint64_t key, void* val); // no allocation; false when it would need to grow
void index_free(Index* x);                           // every table (no reader may be left: tests)
inline uint64_t index_key(const VCtx* c, uint32_t id) { return (uint64_t(c ? c->ordinal : 0) << 32) | id; }

struct State {
  VCtx* ctxs;
  VPd* pds;
  VMr* mrs;
  VChan* chans;
  VCq* cqs;
  VSrq* srqs;
  VQp* qps;
  VAh* ahs;
  volatile int list_lock;
  Index qp_by_rqpn;  // (context, device QP number) -> VQp
  Index mr_by_lkey;  // (context, program's lkey) -> VMr
  uint32_t ctx_ordinals;
  uint64_t token;    // this process's name in the coordinator's table (random, kept across restarts)
  bool remapped;     // a restart happened: ids must be translated
  bool restored;     // set by restore, cleared once the objects are made again
  bool drain_busy;   // the drain could not finish: refuse this checkpoint (save says so)
  char unsupported[200];  // the first object the plugin cannot make again (extended verbs): no checkpoint
  // Loopback QPs a restart made to raise a completion event the program was owed (verbs_ckpt.cpp kick);
  // their completions are never the program's. Destroyed at the next drain.
  static constexpr int kMaxKicks = 64;
  ibv_qp* kick_qp[kMaxKicks];
  ibv_pd* kick_pd[kMaxKicks];
  uint32_t kick_qpn[kMaxKicks];
  VCq* kick_cq[kMaxKicks];
  int nkick;
  char busy_why[200];
};
extern State st;

// Spin lock for the short lists and rings (user threads only; the checkpoint runs with none held,
// because it waits for every thread to leave the plugin's critical sections).
inline void lock(volatile int* l) {
  while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE)) __builtin_ia32_pause();
}
inline void unlock(volatile int* l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

// A critical section of the engine's (inject/plugin.h internal_sections): a checkpoint never stops a
// thread inside the device library.
using Section = plugins::EngineSection;

inline verbs_context* ctx_prefix(VCtx* c) {
  return reinterpret_cast<verbs_context*>(reinterpret_cast<char*>(&c->sh) - offsetof(verbs_context, context));
}

// ids (verbs_ids.cpp): translation tables, filled at a restart from the peers' publications
uint16_t lid_to_real(uint16_t vlid);
uint16_t lid_to_virtual(uint16_t rlid);
uint32_t qpn_to_real(uint16_t vlid, uint32_t vqpn);
uint32_t qpn_to_virtual(uint16_t rlid, uint32_t rqpn);
uint32_t rkey_to_real(uint16_t vlid, uint32_t vrkey);
bool gid_to_real(const ibv_gid& v, ibv_gid* r);
bool gid_to_virtual(const ibv_gid& r, ibv_gid* v);
uint16_t gid_vlid(const ibv_gid& vgid);  // 0: unknown
void ids_clear();
bool ids_put_lid(uint16_t vlid, uint16_t rlid);
bool ids_put_gid(const ibv_gid& v, const ibv_gid& r, uint16_t vlid);
bool ids_put_qpn(uint16_t vlid, uint32_t vqpn, uint16_t rlid, uint32_t rqpn);
bool ids_put_rkey(uint16_t vlid, uint32_t vrkey, uint32_t rrkey);

// queues (verbs_queue.cpp)
bool ring_init(Ring* r, uint32_t cap, uint32_t entry);
uint32_t send_entry_size(uint32_t max_sge, uint32_t max_inline);
uint32_t recv_entry_size(uint32_t max_sge);
void record_send(VQp* q, const ibv_send_wr* wr, bool probe);
void record_recv(Ring* r, const ibv_recv_wr* wr);
// Accounts completions taken from the device (pops the rings), translates their ids; drops ours.
// Returns the number kept (compacted in place).
int account(VCq* c, ibv_wc* wc, int n);
VQp* qp_by_real(const VCtx* c, uint32_t rqpn);
bool is_kick(uint32_t rqpn);
// Destroys the kick QPs on CQ c (nullptr: on every CQ of context x; both nullptr: all).
void drop_kicks(VCq* c, VCtx* x);
// Posts one recorded/program WR to the real QP, translating keys and ids. 0 or errno.
int post_send_real(VQp* q, const ibv_send_wr* wr);
int post_recv_real(VQp* q, VSrq* s, const ibv_recv_wr* wr);
int repost_send(VQp* q, const SendRec* r);
int repost_recv(VQp* q, VSrq* s, const void* rec);

// ib2tcp (verbs_tcp.cpp): a device over TCP sockets that a restart uses instead of the HCA
// (REVIVE_IB2TCP=1 in the restart's environment). Its objects take the ids the program knows: the plugin
// names them in `next` before it makes each object again.
namespace tcp {
extern bool active;
struct Next {
  const VCtx* ctx;
  uint32_t qpn, lkey, rkey;
};
extern Next next;
void install(Real* r);                      // `real` is this device from now on
bool address(char* out, size_t cap);        // "ip port" of this process's listener
bool learn(uint16_t lid, uint32_t qpn, uint64_t token);  // QP (lid, qpn) belongs to process `token`
bool peer_address(uint64_t token, const char* addr);     // where process `token` listens ("ip port")
bool start();                               // the progress thread (when user threads may run again)
}  // namespace tcp

// ops on the shadow context (verbs_wrap.cpp)
int op_poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int op_req_notify_cq(ibv_cq* cq, int solicited_only);
int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);

}  // namespace revive::verbs
