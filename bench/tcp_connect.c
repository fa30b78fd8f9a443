/* The peer of bench/cm_rate.sh: N TCP connections set up and torn down on
 * loopback, one after another (connect, accept, close both), as cmtime does
 * with rdma_cm ids.  Prints "tcp_connect N conns T ms R conns/s".
 *   tcp_connect N [PORT] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int lfd, n;

static void *acceptor(void *arg)
{
	(void)arg;
	for (int i = 0; i < n; i++) {
		int c = accept(lfd, NULL, NULL);

		if (c < 0) {
			perror("accept");
			exit(1);
		}
		close(c);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	struct timespec t0, t1;
	pthread_t t;
	int one = 1;
	double ms;

	n = argc > 1 ? atoi(argv[1]) : 1000;
	a.sin_port = htons(argc > 2 ? (uint16_t)atoi(argv[2]) : 0);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 4096) ||
	    getsockname(lfd, (struct sockaddr *)&a, &al)) {
		perror("listen");
		return 1;
	}
	pthread_create(&t, NULL, acceptor, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		struct linger l = {1, 0}; /* RST: no TIME_WAIT pile-up */

		if (connect(c, (struct sockaddr *)&a, sizeof(a))) {
			perror("connect");
			return 1;
		}
		setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
		close(c);
	}
	pthread_join(t, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	printf("tcp_connect %d conns %.1f ms %.0f conns/s\n", n, ms, n / ms * 1e3);
	return 0;
}
