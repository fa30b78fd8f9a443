/* XRC domains (IBTA 11.2.? / Annex A14).
 *
 * An XRC domain groups XRC SRQs and XRC_RECV QPs: a packet for an XRC_RECV
 * QP may only name (in its XRCETH) an SRQ of the same domain.  Opening with
 * a file descriptor shares one domain between every open of the same file
 * (in this process: uroce has no kernel object to share across processes);
 * fd -1 makes a private domain.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "uroce.h"
#include "verbs/verbs_ops.h"

struct uroce_xdom {
	dev_t dev;
	ino_t ino;
	bool shared;
	int opens; /* ibv_xrcd handles open on it */
	struct uroce_xdom *next;
};

struct uroce_xrcd {
	struct ibv_xrcd ibxrcd;
	struct uroce_xdom *dom;
	atomic_uint users; /* XRC SRQs and QPs */
};

static pthread_mutex_t xdom_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uroce_xdom *xdoms;

static struct uroce_xrcd *to_uxrcd(struct ibv_xrcd *x)
{
	return container_of(x, struct uroce_xrcd, ibxrcd);
}

bool uroce_xrcd_same(struct ibv_xrcd *a, struct ibv_xrcd *b)
{
	return a && b && to_uxrcd(a)->dom == to_uxrcd(b)->dom;
}

void uroce_xrcd_get(struct ibv_xrcd *x)
{
	atomic_fetch_add(&to_uxrcd(x)->users, 1);
}

void uroce_xrcd_put(struct ibv_xrcd *x)
{
	atomic_fetch_sub(&to_uxrcd(x)->users, 1);
}

struct ibv_xrcd *uroce_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr)
{
	struct uroce_xdom *dom = NULL;
	struct uroce_xrcd *x;
	struct stat st;
	int fd = -1;

	if (attr->comp_mask & ~(uint32_t)(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)) {
		ur_dbg("open_xrcd: unknown comp_mask 0x%x", attr->comp_mask);
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & IBV_XRCD_INIT_ATTR_FD)
		fd = attr->fd;
	if (fd >= 0 && fstat(fd, &st)) {
		ur_dbg("open_xrcd: fd %d: %m", fd);
		errno = EBADF;
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		ur_dbg("open_xrcd: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&xdom_lock);
	if (fd >= 0)
		for (dom = xdoms; dom; dom = dom->next)
			if (dom->shared && dom->dev == st.st_dev && dom->ino == st.st_ino)
				break;
	if (dom && (attr->oflags & O_CREAT) && (attr->oflags & O_EXCL)) {
		pthread_mutex_unlock(&xdom_lock);
		free(x);
		ur_dbg("open_xrcd: O_EXCL and a domain exists for this file");
		errno = EEXIST;
		return NULL;
	}
	if (!dom && fd >= 0 && !(attr->oflags & O_CREAT)) {
		pthread_mutex_unlock(&xdom_lock);
		free(x);
		ur_dbg("open_xrcd: no domain for this file and no O_CREAT");
		errno = ENOENT;
		return NULL;
	}
	if (!dom) {
		dom = calloc(1, sizeof(*dom));
		if (!dom) {
			pthread_mutex_unlock(&xdom_lock);
			free(x);
			ur_dbg("open_xrcd: out of memory");
			errno = ENOMEM;
			return NULL;
		}
		if (fd >= 0) {
			dom->shared = true;
			dom->dev = st.st_dev;
			dom->ino = st.st_ino;
		}
		dom->next = xdoms;
		xdoms = dom;
	}
	dom->opens++;
	pthread_mutex_unlock(&xdom_lock);
	x->dom = dom;
	x->ibxrcd.context = context;
	return &x->ibxrcd;
}

int uroce_close_xrcd(struct ibv_xrcd *ibx)
{
	struct uroce_xrcd *x = to_uxrcd(ibx);
	struct uroce_xdom **pp;

	if (atomic_load(&x->users)) {
		ur_dbg("close_xrcd: %u XRC SRQ(s)/QP(s) still use it", atomic_load(&x->users));
		errno = EBUSY;
		return EBUSY;
	}
	pthread_mutex_lock(&xdom_lock);
	if (--x->dom->opens == 0)
		for (pp = &xdoms; *pp; pp = &(*pp)->next)
			if (*pp == x->dom) {
				*pp = x->dom->next;
				free(x->dom);
				break;
			}
	pthread_mutex_unlock(&xdom_lock);
	free(x);
	return 0;
}

/* ibv_open_qp: another handle on an XRC_RECV QP of this context, by number. */
struct ibv_qp *uroce_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr)
{
	struct uroce_ctx *ctx = to_uctx(context);
	struct ibv_qp *found = NULL;

	if (attr->qp_type != IBV_QPT_XRC_RECV || !attr->xrcd ||
	    (attr->comp_mask &
	     (IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE)) !=
		(IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE)) {
		ur_dbg("open_qp: needs qp_num, an XRC domain and type XRC_RECV");
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&ctx->lock);
	for (int i = 0; i < ctx->nqps; i++) {
		struct uroce_qp *qp = ctx->qps[i];

		if (qp->ibqp.qp_base.qp_num == attr->qp_num && qp->xrcd &&
		    uroce_xrcd_same(qp->xrcd, attr->xrcd))
			found = &qp->ibqp.qp_base;
	}
	pthread_mutex_unlock(&ctx->lock);
	if (!found) {
		ur_dbg("open_qp: no XRC_RECV QP 0x%06x in this XRC domain", attr->qp_num);
		errno = ENOENT;
	}
	return found;
}
