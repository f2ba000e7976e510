/* sv_ids: print the "hardware" identifiers a device hands out, for the check that they change from one
 * process (run) to the next. Usage: sv_ids [hold_ms]  (hold_ms: stay alive so that runs overlap) */
#include "sv_testlib.h"

#include <endian.h>

int main(int argc, char **argv)
{
	unsigned hold = argc > 1 ? (unsigned)atoi(argv[1]) : 0;
	t_who = "sv_ids";
	struct ibv_context *ctx = t_open();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	T_CHECK(pd && cq, "pd/cq");
	struct t_qpcfg qc = {.type = IBV_QPT_RC, .max_send_wr = 4, .max_recv_wr = 4, .max_sge = 1};
	struct ibv_qp *qp = t_create_qp(pd, cq, cq, &qc);
	static uint8_t buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	T_CHECK(mr, "reg_mr");
	struct ibv_device_attr da;
	T_CHECK(!ibv_query_device(ctx, &da), "query_device");
	union ibv_gid gid;
	T_CHECK(!ibv_query_gid(ctx, 1, 0, &gid), "query_gid");
	char gs[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, &gid, gs, sizeof gs);
	printf("guid=%016llx lid=0x%04x qpn=0x%06x lkey=0x%08x rkey=0x%08x pd_handle=0x%08x cq_handle=0x%08x gid=%s\n",
	       (unsigned long long)be64toh(da.node_guid), t_lid(ctx), qp->qp_num, mr->lkey, mr->rkey, pd->handle,
	       cq->handle, gs);
	fflush(stdout);
	if (hold)
		t_sleep_ms(hold);
	T_CHECK(!ibv_dereg_mr(mr) && !ibv_destroy_qp(qp) && !ibv_destroy_cq(cq) && !ibv_dealloc_pd(pd), "cleanup");
	T_CHECK(!ibv_close_device(ctx), "close");
	return 0;
}
