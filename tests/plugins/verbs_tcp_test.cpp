// ib2tcp's device (src/plugins/verbs/verbs_tcp.cpp) on its own, in one process: two RC QPs connected to
// each other over the process's own TCP listener, served by its progress thread. Checks the semantics a
// verbs program relies on (RDMA write/read, send with immediate, atomics, ordering, a send that waits for
// its receive, access errors and the flush that follows, UD with its GRH space, completion channels),
// and runs under ASan/UBSan and TSan (the progress thread against the posting threads).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <string.h>

#include <chrono>
#include <thread>
#include <vector>

#include "plugins/verbs/verbs.h"

namespace revive::verbs {
Real real;  // verbs_wrap.cpp's in the injected library
State st;
uint16_t gid_vlid(const ibv_gid&) { return 0; }  // verbs_ids.cpp's: no gids here
}  // namespace revive::verbs

namespace revive::inject {
int coord_socket() { return -1; }  // no coordinator: the device advertises 127.0.0.1
int checkpoint_signal() { return SIGRTMAX - 2; }
}  // namespace revive::inject

using namespace revive::verbs;

namespace {

constexpr size_t kBuf = 1 << 16;

struct Dev {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* ch = nullptr;
  ibv_cq* cq = nullptr;
  uint16_t lid = 0;
};

Dev g_dev;

class Ib2tcp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    st.token = 0x1234abcd5678ef01ull;
    tcp::install(&real);
    int n = 0;
    ibv_device** l = real.get_device_list(&n);
    ASSERT_EQ(n, 1);
    g_dev.ctx = real.open_device(l[0]);
    ASSERT_NE(g_dev.ctx, nullptr);
    ibv_port_attr pa;
    ASSERT_EQ(real.query_port(g_dev.ctx, 1, reinterpret_cast<_compat_ibv_port_attr*>(&pa)), 0);
    g_dev.lid = pa.lid;
    ASSERT_NE(g_dev.lid, 0);
    g_dev.pd = real.alloc_pd(g_dev.ctx);
    g_dev.ch = real.create_comp_channel(g_dev.ctx);
    g_dev.cq = real.create_cq(g_dev.ctx, 4096, nullptr, g_dev.ch, 0);
    ASSERT_NE(g_dev.cq, nullptr);
    char addr[64];
    ASSERT_TRUE(tcp::address(addr, sizeof addr));
    ASSERT_TRUE(tcp::start());
  }

  std::vector<uint8_t> a = std::vector<uint8_t>(kBuf), b = std::vector<uint8_t>(kBuf);
  ibv_mr *ma = nullptr, *mb = nullptr;

  void SetUp() override {
    ibv_wc left[16];  // a failed test's completions are not the next one's
    while (ibv_poll_cq(g_dev.cq, 16, left) > 0) {
    }
    const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    ma = real.reg_mr(g_dev.pd, a.data(), kBuf, acc);
    mb = real.reg_mr(g_dev.pd, b.data(), kBuf, acc);
    ASSERT_NE(ma, nullptr);
    ASSERT_NE(mb, nullptr);
  }
  void TearDown() override {
    real.dereg_mr(ma);
    real.dereg_mr(mb);
  }

  ibv_qp* qp(ibv_qp_type type = IBV_QPT_RC, uint32_t max_send = 256) {
    ibv_qp_init_attr ia = {};
    ia.send_cq = ia.recv_cq = g_dev.cq;
    ia.qp_type = type;
    ia.cap.max_send_wr = max_send;
    ia.cap.max_recv_wr = 256;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
    ibv_qp* q = real.create_qp(g_dev.pd, &ia);
    EXPECT_NE(q, nullptr);
    ibv_qp_attr at = {};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qkey = 0x11111111;
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    EXPECT_EQ(real.modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY), 0);
    return q;
  }

  void connect(ibv_qp* q, uint32_t dest) {
    ibv_qp_attr at = {};
    at.qp_state = IBV_QPS_RTR;
    at.dest_qp_num = dest;
    at.ah_attr.dlid = g_dev.lid;
    at.ah_attr.port_num = 1;
    ASSERT_EQ(real.modify_qp(q, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN), 0);
    at = {};
    at.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(real.modify_qp(q, &at, IBV_QP_STATE), 0);
  }

  std::pair<ibv_qp*, ibv_qp*> pair() {
    ibv_qp* x = qp();
    ibv_qp* y = qp();
    connect(x, y->qp_num);
    connect(y, x->qp_num);
    return {x, y};
  }

  static int post(ibv_qp* q, ibv_wr_opcode op, uint64_t id, void* local, uint32_t len, uint32_t lkey,
                  uint64_t raddr = 0, uint32_t rkey = 0, uint64_t add = 0) {
    ibv_sge s = {uintptr_t(local), len, lkey};
    ibv_send_wr w = {}, *bad = nullptr;
    w.wr_id = id;
    w.opcode = op;
    w.sg_list = &s;
    w.num_sge = 1;
    w.send_flags = IBV_SEND_SIGNALED;
    w.imm_data = uint32_t(id);
    if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      w.wr.atomic.remote_addr = raddr;
      w.wr.atomic.rkey = rkey;
      w.wr.atomic.compare_add = add;
    } else {
      w.wr.rdma.remote_addr = raddr;
      w.wr.rdma.rkey = rkey;
    }
    return ibv_post_send(q, &w, &bad);
  }

  static int recv(ibv_qp* q, uint64_t id, void* buf, uint32_t len, uint32_t lkey) {
    ibv_sge s = {uintptr_t(buf), len, lkey};
    ibv_recv_wr w = {}, *bad = nullptr;
    w.wr_id = id;
    w.sg_list = &s;
    w.num_sge = 1;
    return ibv_post_recv(q, &w, &bad);
  }

  // The next n completions of the shared CQ (fails after 10 s).
  static std::vector<ibv_wc> wait(int n) {
    std::vector<ibv_wc> out;
    for (int spins = 0; int(out.size()) < n && spins < 1000000; ++spins) {
      ibv_wc wc[16];
      int r = ibv_poll_cq(g_dev.cq, 16, wc);
      out.insert(out.end(), wc, wc + (r > 0 ? r : 0));
      if (r <= 0) usleep(10);
    }
    EXPECT_EQ(int(out.size()), n);
    return out;
  }
};

TEST_F(Ib2tcp, WriteSendReadAtomicInOrder) {
  auto [x, y] = pair();
  for (size_t i = 0; i < kBuf; ++i) a[i] = uint8_t(i * 7);
  ASSERT_EQ(recv(y, 100, b.data() + 8192, 64, mb->lkey), 0);
  ASSERT_EQ(post(x, IBV_WR_RDMA_WRITE, 1, a.data(), 4096, ma->lkey, uintptr_t(b.data()), mb->rkey), 0);
  ASSERT_EQ(post(x, IBV_WR_SEND_WITH_IMM, 2, a.data() + 4096, 64, ma->lkey), 0);
  auto wc = wait(3);
  // the receive's completion may come before the sender's; each is checked by wr_id
  int seen = 0;
  for (auto& c : wc) {
    EXPECT_EQ(c.status, IBV_WC_SUCCESS) << c.wr_id;
    if (c.wr_id == 100) {
      EXPECT_EQ(c.opcode, IBV_WC_RECV);
      EXPECT_EQ(c.byte_len, 64u);
      EXPECT_TRUE(c.wc_flags & IBV_WC_WITH_IMM);
      EXPECT_EQ(c.imm_data, 2u);
      EXPECT_EQ(c.qp_num, y->qp_num);
      EXPECT_EQ(c.src_qp, x->qp_num);
      // RC order: the write before the send is in memory when the send's receive completes
      EXPECT_EQ(memcmp(b.data(), a.data(), 4096), 0);
      EXPECT_EQ(memcmp(b.data() + 8192, a.data() + 4096, 64), 0);
    }
    seen |= 1 << (c.wr_id == 100 ? 0 : c.wr_id);
  }
  EXPECT_EQ(seen, 7);
  // READ back into another place, and fetch-and-add on the peer's word
  uint64_t* word = reinterpret_cast<uint64_t*>(b.data() + 16384);
  *word = 40;
  ASSERT_EQ(post(x, IBV_WR_RDMA_READ, 3, a.data() + 32768, 4096, ma->lkey, uintptr_t(b.data()), mb->rkey), 0);
  ASSERT_EQ(post(x, IBV_WR_ATOMIC_FETCH_AND_ADD, 4, a.data() + 40960, 8, ma->lkey, uintptr_t(word), mb->rkey, 2), 0);
  wc = wait(2);
  EXPECT_EQ(wc[0].wr_id, 3u);  // a QP's completions come in posting order
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc[0].byte_len, 4096u);
  EXPECT_EQ(wc[1].wr_id, 4u);
  EXPECT_EQ(wc[1].opcode, IBV_WC_FETCH_ADD);
  EXPECT_EQ(memcmp(a.data() + 32768, b.data(), 4096), 0);
  uint64_t fetched;
  memcpy(&fetched, a.data() + 40960, 8);
  EXPECT_EQ(fetched, 40u);
  EXPECT_EQ(*word, 42u);
}

TEST_F(Ib2tcp, SendWaitsForItsReceiveAndHoldsBackLaterRequests) {
  auto [x, y] = pair();
  memset(a.data(), 0x5a, 4096);
  ASSERT_EQ(post(x, IBV_WR_SEND, 1, a.data(), 100, ma->lkey), 0);
  ASSERT_EQ(post(x, IBV_WR_RDMA_WRITE, 2, a.data(), 4096, ma->lkey, uintptr_t(b.data()), mb->rkey), 0);
  usleep(100000);
  ibv_wc none[4];
  EXPECT_EQ(ibv_poll_cq(g_dev.cq, 4, none), 0);  // no receive: the send waits, the write behind it too
  EXPECT_EQ(b[0], 0);
  ASSERT_EQ(recv(y, 9, b.data() + 8192, 128, mb->lkey), 0);
  auto wc = wait(3);
  for (auto& c : wc) EXPECT_EQ(c.status, IBV_WC_SUCCESS);
  EXPECT_EQ(b[0], 0x5a);
  EXPECT_EQ(b[8192], 0x5a);
}

TEST_F(Ib2tcp, BadRkeyFailsAndFlushesWhatFollows) {
  auto [x, y] = pair();
  ASSERT_EQ(recv(x, 50, a.data() + 60000, 64, ma->lkey), 0);  // flushed with the QP
  // One post with both: posted one by one, the second could find the QP already in error (the NAK is quick).
  ibv_sge sg = {uintptr_t(a.data()), 64, ma->lkey};
  ibv_send_wr w[2] = {}, *bad = nullptr;
  for (int i = 0; i < 2; ++i) {
    w[i].wr_id = uint64_t(i + 1);
    w[i].opcode = IBV_WR_RDMA_WRITE;
    w[i].sg_list = &sg;
    w[i].num_sge = 1;
    w[i].send_flags = IBV_SEND_SIGNALED;
    w[i].wr.rdma.remote_addr = uintptr_t(b.data());
    w[i].wr.rdma.rkey = i == 0 ? mb->rkey ^ 0x777 : mb->rkey;
  }
  w[0].next = &w[1];
  ASSERT_EQ(ibv_post_send(x, w, &bad), 0);
  auto wc = wait(3);
  int access = 0, flushed = 0;
  for (auto& c : wc) {
    if (c.wr_id == 1) access += c.status == IBV_WC_REM_ACCESS_ERR;
    if (c.wr_id == 2 || c.wr_id == 50) flushed += c.status == IBV_WC_WR_FLUSH_ERR;
  }
  EXPECT_EQ(access, 1);
  EXPECT_EQ(flushed, 2);
  EXPECT_EQ(x->state, IBV_QPS_ERR);
  EXPECT_NE(post(x, IBV_WR_SEND, 3, a.data(), 8, ma->lkey), 0);  // an errored QP takes no more
  // out of bounds of a valid region: refused as well
  auto [p, q] = pair();
  ASSERT_EQ(post(p, IBV_WR_RDMA_WRITE, 4, a.data(), 64, ma->lkey, uintptr_t(b.data()) + kBuf - 8, mb->rkey), 0);
  wc = wait(1);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  (void)y;
  (void)q;
}

// A request to a QP that is gone is dropped there, as on IB: the requester fails it with
// IBV_WC_RETRY_EXC_ERR when its retries would have run out (timeout 14: 67 ms x (retry_cnt 1 + 1)), not
// at once (ibv_srq_pingpong over ib2tcp failed on the immediate error: its last, extra sends raced the
// peer's exit).
TEST_F(Ib2tcp, RequestToAGoneQpFailsAfterTheRetries) {
  auto [x, y] = pair();
  ibv_qp_attr at = {};
  at.timeout = 14;
  at.retry_cnt = 1;
  ASSERT_EQ(real.modify_qp(x, &at, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT), 0);
  ASSERT_EQ(real.destroy_qp(y), 0);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(post(x, IBV_WR_SEND, 5, a.data(), 8, ma->lkey), 0);
  usleep(30000);
  ibv_wc none[2];
  EXPECT_EQ(ibv_poll_cq(g_dev.cq, 2, none), 0);
  auto wc = wait(1);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(wc[0].wr_id, 5u);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_GE(ms, 120);
  EXPECT_EQ(x->state, IBV_QPS_ERR);
}

TEST_F(Ib2tcp, UdReceiveHasGrhSpace) {
  ibv_qp* u1 = qp(IBV_QPT_UD);
  ibv_qp* u2 = qp(IBV_QPT_UD);
  for (ibv_qp* u : {u1, u2}) {
    ibv_qp_attr at = {};
    at.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(real.modify_qp(u, &at, IBV_QP_STATE), 0);
    at.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(real.modify_qp(u, &at, IBV_QP_STATE), 0);
  }
  ibv_ah_attr ah = {};
  ah.dlid = g_dev.lid;
  ah.port_num = 1;
  ibv_ah* h = real.create_ah(g_dev.pd, &ah);
  ASSERT_EQ(recv(u2, 7, b.data(), 40 + 32, mb->lkey), 0);
  memcpy(a.data(), "ud datagram payload, 32 bytes..", 32);
  ibv_sge s = {uintptr_t(a.data()), 32, ma->lkey};
  ibv_send_wr w = {}, *bad = nullptr;
  w.wr_id = 8;
  w.opcode = IBV_WR_SEND;
  w.sg_list = &s;
  w.num_sge = 1;
  w.send_flags = IBV_SEND_SIGNALED;
  w.wr.ud.ah = h;
  w.wr.ud.remote_qpn = u2->qp_num;
  w.wr.ud.remote_qkey = 0x11111111;
  ASSERT_EQ(ibv_post_send(u1, &w, &bad), 0);
  w.wr.ud.remote_qkey = 0x22222222;  // wrong Q_Key: dropped by the receiver, no completion there
  w.wr_id = 9;
  ASSERT_EQ(ibv_post_send(u1, &w, &bad), 0);
  auto wc = wait(3);
  int got = 0;
  for (auto& c : wc)
    if (c.wr_id == 7) {
      ++got;
      EXPECT_EQ(c.byte_len, 72u);
      EXPECT_EQ(c.src_qp, u1->qp_num);
      EXPECT_EQ(c.slid, g_dev.lid);
      EXPECT_EQ(memcmp(b.data() + 40, a.data(), 32), 0);
    }
  EXPECT_EQ(got, 1);
  ibv_wc more[2];
  usleep(50000);
  EXPECT_EQ(ibv_poll_cq(g_dev.cq, 2, more), 0);
}

TEST_F(Ib2tcp, ArmedCqRaisesAChannelEvent) {
  auto [x, y] = pair();
  ASSERT_EQ(ibv_req_notify_cq(g_dev.cq, 0), 0);
  ASSERT_EQ(post(x, IBV_WR_RDMA_WRITE, 1, a.data(), 16, ma->lkey, uintptr_t(b.data()), mb->rkey), 0);
  pollfd p = {g_dev.ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1);
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  ASSERT_EQ(real.get_cq_event(g_dev.ch, &cq, &ctx), 0);
  EXPECT_EQ(cq, g_dev.cq);
  wait(1);
  (void)y;
}

// Several threads post on their own QPs while the progress thread serves all of them (TSan's case).
TEST_F(Ib2tcp, ThreadsPostConcurrently) {
  constexpr int kThreads = 4, kOps = 300;
  std::vector<std::pair<ibv_qp*, ibv_qp*>> qps;
  for (int t = 0; t < kThreads; ++t) qps.push_back(pair());
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        const size_t off = size_t(t) * 8192 + size_t(i % 8) * 1024;
        while (post(qps[size_t(t)].first, IBV_WR_RDMA_WRITE, uint64_t(t) << 32 | uint32_t(i), a.data() + off, 1024,
                    ma->lkey, uintptr_t(b.data()) + off, mb->rkey) == ENOMEM)
          usleep(100);  // the send queue is full until completions come
      }
    });
  auto wc = wait(kThreads * kOps);
  for (auto& t : ts) t.join();
  std::vector<int> next(kThreads, 0);
  for (auto& c : wc) {
    EXPECT_EQ(c.status, IBV_WC_SUCCESS);
    const int t = int(c.wr_id >> 32), i = int(uint32_t(c.wr_id));
    EXPECT_EQ(i, next[size_t(t)]++) << "thread " << t;  // each QP in its posting order
  }
}

}  // namespace
