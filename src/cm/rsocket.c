/* rsockets (rsocket(7)): not implemented on uroce yet.
 *
 * The symbols exist so that every consumer loads (they are all linked
 * BIND_NOW, librspreload.so included); each call fails with ENOSYS, except
 * rpoll and rselect, which on descriptors that are not rsockets are poll(2)
 * and select(2) - rdma-core's examples (rping, ucmatose, cmtime, ...) call
 * rpoll on ordinary descriptors.  README.md lists this.
 */
#include <errno.h>
#include <poll.h>
#include <sys/select.h>

#include <rdma/rsocket.h>

#include "uroce_export.h"

#define NOSYS(ret) (errno = ENOSYS, (ret))

UROCE_EXPORT int rsocket(int domain, int type, int protocol)
{
	(void)domain, (void)type, (void)protocol;
	return NOSYS(-1);
}

UROCE_EXPORT int rbind(int s, const struct sockaddr *a, socklen_t l)
{
	(void)s, (void)a, (void)l;
	return NOSYS(-1);
}

UROCE_EXPORT int rlisten(int s, int backlog)
{
	(void)s, (void)backlog;
	return NOSYS(-1);
}

UROCE_EXPORT int raccept(int s, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)a, (void)l;
	return NOSYS(-1);
}

UROCE_EXPORT int rconnect(int s, const struct sockaddr *a, socklen_t l)
{
	(void)s, (void)a, (void)l;
	return NOSYS(-1);
}

UROCE_EXPORT int rshutdown(int s, int how)
{
	(void)s, (void)how;
	return NOSYS(-1);
}

UROCE_EXPORT int rclose(int s)
{
	(void)s;
	return NOSYS(-1);
}

UROCE_EXPORT ssize_t rrecv(int s, void *b, size_t n, int f)
{
	(void)s, (void)b, (void)n, (void)f;
	return NOSYS(-1);
}

UROCE_EXPORT ssize_t rrecvfrom(int s, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)b, (void)n, (void)f, (void)a, (void)l;
	return NOSYS(-1);
}

UROCE_EXPORT ssize_t rrecvmsg(int s, struct msghdr *m, int f)
{
	(void)s, (void)m, (void)f;
	return NOSYS(-1);
}

UROCE_EXPORT ssize_t rsend(int s, const void *b, size_t n, int f)
{
	(void)s, (void)b, (void)n, (void)f;
	return NOSYS(-1);
}

UROCE_EXPORT ssize_t rsendto(int s, const void *b, size_t n, int f, const struct sockaddr *a,
			     socklen_t l)
{
	(void)s, (void)b, (void)n, (void)f, (void)a, (void)l;
	return NOSYS(-1);
}

UROCE_EXPORT ssize_t rsendmsg(int s, const struct msghdr *m, int f)
{
	(void)s, (void)m, (void)f;
	return NOSYS(-1);
}

UROCE_EXPORT ssize_t rread(int s, void *b, size_t n)
{
	(void)s, (void)b, (void)n;
	return NOSYS(-1);
}

UROCE_EXPORT ssize_t rreadv(int s, const struct iovec *v, int n)
{
	(void)s, (void)v, (void)n;
	return NOSYS(-1);
}

UROCE_EXPORT ssize_t rwrite(int s, const void *b, size_t n)
{
	(void)s, (void)b, (void)n;
	return NOSYS(-1);
}

UROCE_EXPORT ssize_t rwritev(int s, const struct iovec *v, int n)
{
	(void)s, (void)v, (void)n;
	return NOSYS(-1);
}

UROCE_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return poll(fds, nfds, timeout);
}

UROCE_EXPORT int rselect(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	return select(nfds, r, w, e, t);
}

UROCE_EXPORT int rgetpeername(int s, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)a, (void)l;
	return NOSYS(-1);
}

UROCE_EXPORT int rgetsockname(int s, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)a, (void)l;
	return NOSYS(-1);
}

UROCE_EXPORT int rsetsockopt(int s, int level, int name, const void *v, socklen_t l)
{
	(void)s, (void)level, (void)name, (void)v, (void)l;
	return NOSYS(-1);
}

UROCE_EXPORT int rgetsockopt(int s, int level, int name, void *v, socklen_t *l)
{
	(void)s, (void)level, (void)name, (void)v, (void)l;
	return NOSYS(-1);
}

UROCE_EXPORT int rfcntl(int s, int cmd, ...)
{
	(void)s, (void)cmd;
	return NOSYS(-1);
}

UROCE_EXPORT off_t riomap(int s, void *b, size_t n, int prot, int flags, off_t off)
{
	(void)s, (void)b, (void)n, (void)prot, (void)flags, (void)off;
	return NOSYS((off_t)-1);
}

UROCE_EXPORT int riounmap(int s, void *b, size_t n)
{
	(void)s, (void)b, (void)n;
	return NOSYS(-1);
}

UROCE_EXPORT size_t riowrite(int s, const void *b, size_t n, off_t off, int flags)
{
	(void)s, (void)b, (void)n, (void)off, (void)flags;
	return NOSYS((size_t)0);
}
