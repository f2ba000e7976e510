// The verbs plugin's bookkeeping without a device (src/plugins/verbs/verbs_queue.cpp, verbs_ids.cpp):
// which posted requests a completion covers, the fence's completion kept from the program, receives
// taken by wr_id, inline bytes kept for a repost, and the translation of keys and ids after a restart.
// The "device" is a context whose post_send/post_recv ops record what reaches them.
#include <gtest/gtest.h>
#include <string.h>

#include <vector>

#include "plugins/verbs/verbs.h"

namespace revive::verbs {
Real real;  // defined by verbs_wrap.cpp in the injected library; unused here
State st;
}  // namespace revive::verbs

using namespace revive::verbs;

namespace {

struct Posted {
  ibv_send_wr wr;
  std::vector<ibv_sge> sge;
  std::vector<uint8_t> data;  // the bytes the SGEs named at post time
};
std::vector<Posted> g_sent;
std::vector<ibv_recv_wr> g_recvd;

int fake_post_send(ibv_qp*, ibv_send_wr* wr, ibv_send_wr**) {
  Posted p;
  p.wr = *wr;
  for (int i = 0; i < wr->num_sge; ++i) {
    p.sge.push_back(wr->sg_list[i]);
    auto* b = reinterpret_cast<const uint8_t*>(uintptr_t(wr->sg_list[i].addr));
    p.data.insert(p.data.end(), b, b + wr->sg_list[i].length);
  }
  g_sent.push_back(p);
  return 0;
}

int fake_post_recv(ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr**) {
  g_recvd.push_back(*wr);
  return 0;
}

class Verbs : public ::testing::Test {
 protected:
  ibv_context dev{};
  ibv_qp rqp{};
  VQp q{};
  VPd pd{};
  VCtx ctx{};
  VCq cq{};

  void SetUp() override {
    st = State{};
    g_sent.clear();
    g_recvd.clear();
    dev.ops.post_send = fake_post_send;
    dev.ops.post_recv = fake_post_recv;
    rqp.context = &dev;
    rqp.qp_num = 0x4242;
    q.real = &rqp;
    q.sh.qp_num = 0x1111;  // virtual
    q.sh.qp_type = IBV_QPT_RC;
    q.pd = &pd;
    pd.ctx = &ctx;
    ctx.ordinal = 1;
    cq.ctx = &ctx;
    q.max_inline = 64;
    ASSERT_TRUE(ring_init(&q.sends, 16, send_entry_size(4, q.max_inline)));
    ASSERT_TRUE(ring_init(&q.recvs, 16, recv_entry_size(4)));
    st.qps = &q;
    ASSERT_TRUE(index_put(&st.qp_by_rqpn, index_key(&ctx, rqp.qp_num), &q));
    ids_clear();
  }
  void TearDown() override {
    free(q.sends.mem);
    free(q.recvs.mem);
    index_free(&st.qp_by_rqpn);
    index_free(&st.mr_by_lkey);
  }

  void send(uint64_t id, bool signaled, int opcode = IBV_WR_SEND) {
    ibv_sge s{0x1000, 8, 0x11};
    ibv_send_wr w{};
    w.wr_id = id;
    w.opcode = ibv_wr_opcode(opcode);
    w.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    w.sg_list = &s;
    w.num_sge = 1;
    record_send(&q, &w, false);
  }
  ibv_wc wc(uint64_t id, ibv_wc_opcode op = IBV_WC_SEND, ibv_wc_status status = IBV_WC_SUCCESS) {
    ibv_wc w{};
    w.wr_id = id;
    w.opcode = op;
    w.status = status;
    w.qp_num = rqp.qp_num;
    return w;
  }
};

TEST_F(Verbs, SignaledCompletionCoversEarlierUnsignaledSends) {
  send(1, false);
  send(2, false);
  send(3, true);
  send(4, false);
  ibv_wc w = wc(3);
  ASSERT_EQ(account(&cq, &w, 1), 1);
  EXPECT_EQ(w.qp_num, 0x1111u) << "the program sees its virtual QP number";
  EXPECT_EQ(q.sends.n, 1u) << "sends 1-3 are done, 4 is not";
  EXPECT_EQ(static_cast<SendRec*>(q.sends.at(0))->wr_id, 4u);
}

TEST_F(Verbs, ErrorCompletionCoversExactlyOne) {
  send(1, false);
  send(2, false);
  ibv_wc w = wc(1, IBV_WC_SEND, IBV_WC_WR_FLUSH_ERR);
  ASSERT_EQ(account(&cq, &w, 1), 1);
  EXPECT_EQ(q.sends.n, 1u);
}

TEST_F(Verbs, TheFenceCompletionIsNotTheProgramsAndSendsAllSignaledCountEach) {
  send(1, false);
  ibv_send_wr fence{};
  fence.wr_id = 0x72767666656e6365ull;
  fence.opcode = IBV_WR_RDMA_WRITE;
  fence.send_flags = IBV_SEND_SIGNALED;
  record_send(&q, &fence, true);
  ibv_wc w[2] = {wc(0x72767666656e6365ull, IBV_WC_RDMA_WRITE), wc(7, IBV_WC_RECV)};
  EXPECT_EQ(account(&cq, w, 2), 1) << "the fence's completion is dropped, the receive kept";
  EXPECT_EQ(w[0].wr_id, 7u);
  EXPECT_EQ(q.sends.n, 0u);
  q.init.sq_sig_all = 1;
  send(5, false);
  send(6, false);
  ibv_wc a = wc(5);
  account(&cq, &a, 1);
  EXPECT_EQ(q.sends.n, 1u) << "with sq_sig_all every send reports its own completion";
}

TEST_F(Verbs, ReceivesAreTakenByWrIdAndPostedAgainInOrder) {
  for (uint64_t id = 10; id < 14; ++id) {
    ibv_sge s{0x2000 + id, 64, 0x11};
    ibv_recv_wr r{};
    r.wr_id = id;
    r.sg_list = &s;
    r.num_sge = 1;
    record_recv(&q.recvs, &r);
  }
  ibv_wc w[2] = {wc(10, IBV_WC_RECV), wc(12, IBV_WC_RECV)};  // 12 before 11: an SRQ shared by QPs
  ASSERT_EQ(account(&cq, w, 2), 2);
  ASSERT_EQ(q.recvs.n, 2u);
  for (uint32_t i = 0; i < q.recvs.n; ++i) ASSERT_EQ(repost_recv(&q, nullptr, q.recvs.at(i)), 0);
  ASSERT_EQ(g_recvd.size(), 2u);
  EXPECT_EQ(g_recvd[0].wr_id, 11u);
  EXPECT_EQ(g_recvd[1].wr_id, 13u);
}

TEST_F(Verbs, InlineBytesAreKeptForARepost) {
  char buf[32] = "the bytes at post time";
  ibv_sge s{uintptr_t(buf), uint32_t(strlen(buf)), 0};
  ibv_send_wr w{};
  w.wr_id = 9;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  w.sg_list = &s;
  w.num_sge = 1;
  record_send(&q, &w, false);
  memset(buf, 'x', sizeof buf - 1);  // the program reuses the buffer once the post returned
  ASSERT_EQ(repost_send(&q, static_cast<SendRec*>(q.sends.at(0))), 0);
  ASSERT_EQ(g_sent.size(), 1u);
  EXPECT_EQ(std::string(g_sent[0].data.begin(), g_sent[0].data.end()), "the bytes at post time");
  EXPECT_TRUE(g_sent[0].wr.send_flags & IBV_SEND_INLINE);
}

TEST_F(Verbs, AfterARestartKeysAndIdsAreTranslatedBothWays) {
  VMr mr{};
  ibv_mr rmr{};
  mr.sh.lkey = 0x11;
  rmr.lkey = 0x22;
  mr.real = &rmr;
  mr.pd = &pd;
  st.mrs = &mr;
  ASSERT_TRUE(index_put(&st.mr_by_lkey, index_key(&ctx, mr.sh.lkey), &mr));
  st.remapped = true;
  q.rvlid = 5;
  ASSERT_TRUE(ids_put_lid(5, 9));
  ASSERT_TRUE(ids_put_qpn(5, 0x100, 9, 0x200));
  ASSERT_TRUE(ids_put_rkey(5, 0xaaa, 0xbbb));
  uint64_t target = 0;
  ibv_sge s{uintptr_t(&target), 8, 0x11};
  ibv_send_wr w{};
  w.opcode = IBV_WR_RDMA_WRITE;
  w.wr.rdma.rkey = 0xaaa;
  w.sg_list = &s;
  w.num_sge = 1;
  ASSERT_EQ(post_send_real(&q, &w), 0);
  ASSERT_EQ(g_sent.size(), 1u);
  EXPECT_EQ(g_sent[0].sge[0].lkey, 0x22u);
  EXPECT_EQ(g_sent[0].wr.wr.rdma.rkey, 0xbbbu);
  EXPECT_EQ(w.wr.rdma.rkey, 0xaaau) << "the program's request is left as it was";
  EXPECT_EQ(rkey_to_real(5, 0xccc), 0xcccu) << "an unknown key is its own translation";
  EXPECT_EQ(lid_to_real(5), 9);
  EXPECT_EQ(lid_to_virtual(9), 5);
  EXPECT_EQ(qpn_to_virtual(9, 0x200), 0x100u);

  // UD: the AH's real handle and the destination QPN of its peer.
  q.sh.qp_type = IBV_QPT_UD;
  VAh ah{};
  ibv_ah rah{};
  ah.real = &rah;
  ah.rvlid = 5;
  ibv_send_wr u{};
  u.opcode = IBV_WR_SEND;
  u.wr.ud.ah = &ah.sh;
  u.wr.ud.remote_qpn = 0x100;
  u.sg_list = &s;
  u.num_sge = 1;
  ASSERT_EQ(post_send_real(&q, &u), 0);
  EXPECT_EQ(g_sent[1].wr.wr.ud.ah, &rah);
  EXPECT_EQ(g_sent[1].wr.wr.ud.remote_qpn, 0x200u);
  // A UD receive: the sender's lid and QP come back virtual.
  ibv_wc r = wc(1, IBV_WC_RECV);
  r.slid = 9;
  r.src_qp = 0x200;
  account(&cq, &r, 1);
  EXPECT_EQ(r.slid, 5);
  EXPECT_EQ(r.src_qp, 0x100u);
}

TEST_F(Verbs, GidsMapToTheirLid) {
  ibv_gid v{}, r{}, out{};
  v.raw[15] = 1;
  r.raw[15] = 2;
  ASSERT_TRUE(ids_put_gid(v, r, 77));
  EXPECT_EQ(gid_vlid(v), 77);
  ASSERT_TRUE(gid_to_real(v, &out));
  EXPECT_EQ(memcmp(&out, &r, sizeof r), 0);
  ASSERT_TRUE(gid_to_virtual(r, &out));
  EXPECT_EQ(memcmp(&out, &v, sizeof v), 0);
  EXPECT_FALSE(gid_to_real(r, &out));
}

TEST_F(Verbs, TablesRefuseRatherThanOverflow) {
  int put = 0;
  for (uint32_t k = 0; k < 70000; ++k) put += ids_put_rkey(1, k, k + 1) ? 1 : 0;
  EXPECT_GT(put, 30000);
  EXPECT_LT(put, 70000) << "a full table says so (the restart fails naming it)";
  EXPECT_EQ(rkey_to_real(1, 5), 6u);
}

TEST_F(Verbs, IndexGrowsKeepsOldTablesAndRefillsInPlace) {
  Index x{};
  std::vector<int> vals(5000);
  for (uint32_t i = 0; i < vals.size(); ++i) ASSERT_TRUE(index_put(&x, index_key(&ctx, i + 1), &vals[i]));
  for (uint32_t i = 0; i < vals.size(); ++i) ASSERT_EQ(index_get(x, index_key(&ctx, i + 1)), &vals[i]);
  EXPECT_EQ(index_get(x, index_key(nullptr, 1)), nullptr) << "another context's id is another key";
  index_del(&x, index_key(&ctx, 7));
  EXPECT_EQ(index_get(x, index_key(&ctx, 7)), nullptr);
  EXPECT_EQ(index_get(x, index_key(&ctx, 8)), &vals[7]) << "found past the tombstone";
  const IdTable* before = x.t;
  index_clear(&x);
  for (uint32_t i = 0; i < 100; ++i) ASSERT_TRUE(index_refill(&x, index_key(&ctx, 9000 + i), &vals[i]));
  EXPECT_EQ(x.t, before) << "a restart refills the table it has";
  EXPECT_EQ(index_get(x, index_key(&ctx, 9050)), &vals[50]);
  EXPECT_EQ(index_get(x, index_key(&ctx, 50)), nullptr);
  EXPECT_NE(before->older, nullptr) << "the tables it grew out of are kept";
  index_free(&x);
}

}  // namespace
