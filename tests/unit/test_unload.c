/* The library can be unloaded while objects are open (issue 11, section 4).
 *
 * A child process dlopen()s the built libibverbs.so.1 by path, opens a
 * device, creates a QP, brings it to RTS aimed at a QPN nobody owns and
 * posts a WRITE, so that the context's progress thread keeps running its
 * retransmission timer; then it dlclose()s the library without closing
 * anything and keeps running for a while, as Open MPI does at MPI_Finalize
 * when its components unload the chain that loaded libibverbs.  The child
 * must exit 0 (a progress thread in unmapped code is a SIGSEGV), the
 * library must still be mapped (it is linked -z nodelete: docs/memory.md
 * says why), and a second dlopen() must give the same, working library.
 *
 * Nothing here links libibverbs: every verb is looked up with dlsym().
 */
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static char lib_path[PATH_MAX];

static void find_lib(void)
{
	const char *bd = getenv("UROCE_BUILD_DIR");
	char exe[PATH_MAX - 64];
	ssize_t n;

	if (bd) {
		snprintf(lib_path, sizeof(lib_path), "%s/lib/libibverbs.so.1", bd);
		return;
	}
	/* a manual run: the binary is in <build>/tests */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	if (strrchr(exe, '/'))
		*strrchr(exe, '/') = 0;
	snprintf(lib_path, sizeof(lib_path), "%s/../lib/libibverbs.so.1", exe);
}

/* The verbs the child calls, from the dlopen()ed library. */
struct verbs {
	struct ibv_device **(*get_device_list)(int *);
	struct ibv_context *(*open_device)(struct ibv_device *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *,
				    int);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
};

static int load(void **h, struct verbs *v)
{
	*h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
	if (!*h) {
		printf("dlopen %s: %s\n", lib_path, dlerror());
		return -1;
	}
	/* versioned like rdma-core: the default version of each name */
	*(void **)&v->get_device_list = dlsym(*h, "ibv_get_device_list");
	*(void **)&v->open_device = dlsym(*h, "ibv_open_device");
	*(void **)&v->alloc_pd = dlsym(*h, "ibv_alloc_pd");
	*(void **)&v->reg_mr = dlsym(*h, "ibv_reg_mr");
	*(void **)&v->create_cq = dlsym(*h, "ibv_create_cq");
	*(void **)&v->create_qp = dlsym(*h, "ibv_create_qp");
	*(void **)&v->modify_qp = dlsym(*h, "ibv_modify_qp");
	*(void **)&v->query_gid = dlsym(*h, "ibv_query_gid");
	if (!v->get_device_list || !v->open_device || !v->alloc_pd || !v->reg_mr || !v->create_cq ||
	    !v->create_qp || !v->modify_qp || !v->query_gid) {
		printf("dlsym: a verb is missing\n");
		return -1;
	}
	return 0;
}

/* Open everything and leave a WRITE retransmitting; 0 on success. */
static int open_and_send(const struct verbs *v, char *buf)
{
	struct ibv_qp_init_attr ia = {
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC};
	struct ibv_qp_attr a;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
	int n = 0;

	list = v->get_device_list(&n);
	if (!list || n < 1 || !(ctx = v->open_device(list[0])))
		return printf("no device to open\n"), -1;
	/* the list is not freed either */
	pd = v->alloc_pd(ctx);
	mr = pd ? v->reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	cq = v->create_cq(ctx, 16, NULL, NULL, 0);
	ia.send_cq = ia.recv_cq = cq;
	qp = pd && cq ? v->create_qp(pd, &ia) : NULL;
	if (!mr || !qp || v->query_gid(ctx, 1, 0, &gid))
		return printf("pd/mr/cq/qp: %s\n", strerror(errno)), -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (v->modify_qp(qp, &a,
			 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return printf("INIT failed\n"), -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 0x00ff01; /* UDP port 255: nobody answers */
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (v->modify_qp(qp, &a,
			 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return printf("RTR failed\n"), -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 10; /* 4 ms: the timer fires many times after dlclose */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (v->modify_qp(qp, &a,
			 IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return printf("RTS failed\n"), -1;
	sge = (struct ibv_sge){.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
	wr = (struct ibv_send_wr){.sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED};
	wr.wr.rdma.remote_addr = 4096;
	wr.wr.rdma.rkey = 0x1234;
	/* ibv_post_send is inline: it calls the context's ops */
	if (ibv_post_send(qp, &wr, &bad))
		return printf("post_send failed\n"), -1;
	return 0;
}

/* The child: 0 when everything went as it should. */
static int child(void)
{
	static char buf[4096];
	struct timespec pause_ts = {.tv_sec = 0, .tv_nsec = 100 * 1000000};
	struct verbs v, v2;
	void *h, *h2;
	int n = 0;

	if (load(&h, &v) || open_and_send(&v, buf))
		return 2;
	if (dlclose(h))
		return printf("dlclose: %s\n", dlerror()), 3;
	/* The progress thread retransmits (timeout 4 ms, 7 retries) and then
	 * completes the WRITE with an error: in code that is still mapped. */
	for (int i = 0; i < 15; i++)
		nanosleep(&pause_ts, NULL);
	if (!dlopen(lib_path, RTLD_NOW | RTLD_NOLOAD))
		return printf("the library was unloaded (no -z nodelete)\n"), 4;
	/* a second dlopen: the same library, still working */
	if (load(&h2, &v2))
		return 5;
	if (v2.get_device_list != v.get_device_list)
		return printf("a second copy of the library was loaded\n"), 6;
	if (!v2.get_device_list(&n) || n < 1)
		return printf("get_device_list after reload\n"), 7;
	dlclose(h2);
	return 0;
}

int main(void)
{
	int status = 0;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	find_lib();
	alarm(100);
	pid = fork();
	if (pid == 0)
		_exit(child());
	CHECK(pid > 0, "fork");
	if (pid > 0) {
		CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the child that dlclose()d the library with a QP open: %s %d",
		      WIFSIGNALED(status) ? "killed by signal" : "exit status",
		      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	}
	printf("test_unload: %u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
