/* A small librpma program (Debian's librpma 1.2) for the rdma_cm tests
 * (cm_consumers.sh, lib_cm.sh's cm_suite): librpma connects through
 * rdma_cm, so this runs on uroce's librdmacm.so.1 and libibverbs.so.1.
 *
 *   cm_rpma server ADDR PORT   registers 4 KiB, sends its descriptor in the
 *                              connection's private data, waits for the
 *                              client to close, then checks what it wrote
 *   cm_rpma client ADDR PORT   rpma_write a pattern, rpma_flush (visibility),
 *                              rpma_read it back, compares
 * Exit 0 when the data is what was written.
 */
#include <librpma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE 4096

static const char pattern[] = "librpma over uroce: rpma_write, rpma_flush, rpma_read";

#define CHECK(call)                                                                                \
	do {                                                                                       \
		int ret_ = (call);                                                                 \
		if (ret_) {                                                                        \
			fprintf(stderr, "cm_rpma: %s: %s\n", #call, rpma_err_2str(ret_));          \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static void wait_event(struct rpma_conn *conn, enum rpma_conn_event want)
{
	enum rpma_conn_event ev;

	CHECK(rpma_conn_next_event(conn, &ev));
	if (ev != want) {
		fprintf(stderr, "cm_rpma: event %s, expected %s\n", rpma_utils_conn_event_2str(ev),
			rpma_utils_conn_event_2str(want));
		exit(1);
	}
}

static void complete(struct rpma_conn *conn, const char *what)
{
	struct rpma_cq *cq;
	struct ibv_wc wc;
	int n = 0;

	CHECK(rpma_conn_get_cq(conn, &cq));
	CHECK(rpma_cq_wait(cq));
	CHECK(rpma_cq_get_wc(cq, 1, &wc, &n));
	if (n != 1 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "cm_rpma: %s: %s\n", what, ibv_wc_status_str(wc.status));
		exit(1);
	}
	printf("%s completed\n", what);
}

static int server(const char *addr, const char *port)
{
	struct ibv_context *dev;
	struct rpma_peer *peer;
	struct rpma_ep *ep;
	struct rpma_conn_req *req;
	struct rpma_conn *conn;
	struct rpma_mr_local *mr;
	struct rpma_conn_private_data pd;
	char desc[64];
	size_t dsize;
	char *mem = calloc(1, SIZE);

	CHECK(rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev));
	CHECK(rpma_peer_new(dev, &peer));
	CHECK(rpma_mr_reg(peer, mem, SIZE,
			  RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC |
			      RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
			  &mr));
	CHECK(rpma_mr_get_descriptor_size(mr, &dsize));
	if (dsize > sizeof(desc))
		return 1;
	CHECK(rpma_mr_get_descriptor(mr, desc));
	pd.ptr = desc;
	pd.len = (uint8_t)dsize;
	CHECK(rpma_ep_listen(peer, addr, port, &ep));
	printf("listening\n");
	fflush(stdout);
	CHECK(rpma_ep_next_conn_req(ep, NULL, &req));
	CHECK(rpma_conn_req_connect(&req, &pd, &conn));
	wait_event(conn, RPMA_CONN_ESTABLISHED);
	printf("established\n");
	wait_event(conn, RPMA_CONN_CLOSED);
	CHECK(rpma_conn_disconnect(conn));
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_ep_shutdown(&ep));
	printf("server memory: %s\n", mem);
	if (strcmp(mem, pattern))
		return 1;
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_peer_delete(&peer));
	free(mem);
	return 0;
}

static int client(const char *addr, const char *port)
{
	struct ibv_context *dev;
	struct rpma_peer *peer;
	struct rpma_conn_req *req;
	struct rpma_conn *conn;
	struct rpma_mr_local *mr;
	struct rpma_mr_remote *rmr;
	struct rpma_conn_private_data pd;
	char *src = calloc(1, SIZE), *dst = calloc(1, SIZE);

	strcpy(src, pattern);
	CHECK(rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev));
	CHECK(rpma_peer_new(dev, &peer));
	CHECK(rpma_mr_reg(peer, src, SIZE, RPMA_MR_USAGE_WRITE_SRC, &mr));
	CHECK(rpma_conn_req_new(peer, addr, port, NULL, &req));
	CHECK(rpma_conn_req_connect(&req, NULL, &conn));
	wait_event(conn, RPMA_CONN_ESTABLISHED);
	CHECK(rpma_conn_get_private_data(conn, &pd));
	CHECK(rpma_mr_remote_from_descriptor(pd.ptr, pd.len, &rmr));
	CHECK(rpma_write(conn, rmr, 0, mr, 0, sizeof(pattern), RPMA_F_COMPLETION_ALWAYS, NULL));
	complete(conn, "rpma_write");
	CHECK(rpma_flush(conn, rmr, 0, sizeof(pattern), RPMA_FLUSH_TYPE_VISIBILITY,
			 RPMA_F_COMPLETION_ALWAYS, NULL));
	complete(conn, "rpma_flush");
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_mr_reg(peer, dst, SIZE, RPMA_MR_USAGE_READ_DST, &mr));
	CHECK(rpma_read(conn, mr, 0, rmr, 0, sizeof(pattern), RPMA_F_COMPLETION_ALWAYS, NULL));
	complete(conn, "rpma_read");
	printf("read back: %s\n", dst);
	CHECK(rpma_conn_disconnect(conn));
	wait_event(conn, RPMA_CONN_CLOSED);
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_mr_remote_delete(&rmr));
	CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_peer_delete(&peer));
	return strcmp(dst, pattern) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: cm_rpma server|client ADDR PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	return !strcmp(argv[1], "server") ? server(argv[2], argv[3]) : client(argv[2], argv[3]);
}
