/* mpi_pingpong SIZE ITERS: ranks 0 and 1 bounce a SIZE-byte message ITERS
 * times (after ITERS/10 warm-up rounds) and rank 0 prints
 *   size=S iters=N lat_us=L bw_MBps=B
 * lat_us: half the median round trip; bw_MBps: SIZE / that half, 10^6 B/s.
 * bench/run.sh runs it with Open MPI over UCX, on uroce and over TCP. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rank, size, len, iters, warm;
	double *rtt;
	char *buf;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc != 3 || size < 2 || (len = atoi(argv[1])) < 1 || (iters = atoi(argv[2])) < 1) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -np 2 %s SIZE ITERS\n", argv[0]);
		MPI_Finalize();
		return 2;
	}
	warm = iters / 10 + 1;
	buf = malloc((size_t)len);
	rtt = malloc(sizeof(*rtt) * (size_t)iters);
	if (!buf || !rtt)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(buf, rank, (size_t)len);
	MPI_Barrier(MPI_COMM_WORLD);
	for (int i = -warm; i < iters && rank < 2; i++) {
		double t0 = MPI_Wtime();

		if (rank == 0) {
			MPI_Send(buf, len, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
			MPI_Recv(buf, len, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(buf, len, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(buf, len, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
		}
		if (i >= 0)
			rtt[i] = MPI_Wtime() - t0;
	}
	if (rank == 0) {
		double half;

		qsort(rtt, (size_t)iters, sizeof(*rtt), cmp);
		half = rtt[iters / 2] / 2;
		printf("size=%d iters=%d lat_us=%.3f bw_MBps=%.1f\n", len, iters, half * 1e6,
		       len / half / 1e6);
	}
	free(rtt);
	free(buf);
	MPI_Finalize();
	return 0;
}
