/* An MPI program that checks what it moves, for tests/integration/mpi.sh:
 * built there with each MPI's mpicc (Open MPI, MPICH), run on uroce.
 *
 *   1. ping-pong between rank 2k and 2k+1, 1 B .. 4 MiB (powers of 4),
 *      every byte of every message checked;
 *   2. MPI_Allreduce (sum) of a vector, checked against the closed form;
 *   3. one-sided: each rank MPI_Puts into, MPI_Gets from and
 *      MPI_Accumulates into a window of its right neighbour, with fences.
 *
 * Prints "mpi_check: OK ..." on rank 0 and exits 0 only if every rank
 * passed every check; a failure names the check, the rank and the offset.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MSG (4u << 20)
#define ITERS	4
#define VEC	4096
#define WIN	1024

static int rank, size;

static unsigned char pattern(size_t i, int round, int from)
{
	return (unsigned char)(i * 131u + (unsigned)round * 17u + (unsigned)from * 7u + 1u);
}

static int fail(const char *what, size_t at)
{
	fprintf(stderr, "mpi_check: rank %d: %s wrong at %zu\n", rank, what, at);
	return 1;
}

static int pingpong(void)
{
	unsigned char *buf = malloc(MAX_MSG);
	int peer = rank ^ 1, bad = 0;

	if (!buf)
		return fail("malloc", 0);
	if (peer >= size) {
		free(buf);
		return 0; /* odd rank count: the last rank sits this one out */
	}
	for (size_t len = 1; len <= MAX_MSG && !bad; len *= 4) { /* 4^11 = 4 MiB */
		for (int it = 0; it < ITERS && !bad; it++) {
			if (rank < peer) {
				for (size_t i = 0; i < len; i++)
					buf[i] = pattern(i, it, rank);
				MPI_Send(buf, (int)len, MPI_BYTE, peer, it, MPI_COMM_WORLD);
				memset(buf, 0, len);
				MPI_Recv(buf, (int)len, MPI_BYTE, peer, it, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				for (size_t i = 0; i < len && !bad; i++)
					if (buf[i] != (unsigned char)(pattern(i, it, rank) ^ 0xff))
						bad = fail("ping-pong reply", i);
			} else {
				MPI_Recv(buf, (int)len, MPI_BYTE, peer, it, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				for (size_t i = 0; i < len && !bad; i++) {
					if (buf[i] != pattern(i, it, peer))
						bad = fail("ping-pong request", i);
					buf[i] ^= 0xff;
				}
				MPI_Send(buf, (int)len, MPI_BYTE, peer, it, MPI_COMM_WORLD);
			}
		}
	}
	free(buf);
	return bad;
}

static int allreduce(void)
{
	static long in[VEC], out[VEC];

	for (int i = 0; i < VEC; i++)
		in[i] = (long)(rank + 1) * (i + 1);
	MPI_Allreduce(in, out, VEC, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i < VEC; i++)
		if (out[i] != (long)size * (size + 1) / 2 * (i + 1))
			return fail("allreduce", (size_t)i);
	return 0;
}

static int onesided(void)
{
	int64_t *base, got[WIN], mine[WIN];
	int right = (rank + 1) % size, left = (rank + size - 1) % size, bad = 0;
	MPI_Win win;

	MPI_Alloc_mem(2 * WIN * sizeof(int64_t), MPI_INFO_NULL, &base);
	for (int i = 0; i < 2 * WIN; i++)
		base[i] = -1;
	MPI_Win_create(base, 2 * WIN * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
		       MPI_COMM_WORLD, &win);

	/* Put: my values into the first half of my right neighbour's window. */
	for (int i = 0; i < WIN; i++)
		mine[i] = (int64_t)rank * 1000000 + i;
	MPI_Win_fence(0, win);
	MPI_Put(mine, WIN, MPI_INT64_T, right, 0, WIN, MPI_INT64_T, win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < WIN && !bad; i++)
		if (base[i] != (int64_t)left * 1000000 + i)
			bad = fail("MPI_Put target", (size_t)i);

	/* Get: read back what I put there. */
	memset(got, 0, sizeof(got));
	MPI_Get(got, WIN, MPI_INT64_T, right, 0, WIN, MPI_INT64_T, win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < WIN && !bad; i++)
		if (got[i] != mine[i])
			bad = fail("MPI_Get", (size_t)i);

	/* Accumulate: every rank adds rank+1 to every slot of the second half
	 * of every rank's window (-1 initially). */
	for (int i = 0; i < WIN; i++)
		mine[i] = rank + 1;
	for (int t = 0; t < size; t++)
		MPI_Accumulate(mine, WIN, MPI_INT64_T, t, WIN, WIN, MPI_INT64_T, MPI_SUM, win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < WIN && !bad; i++)
		if (base[WIN + i] != -1 + (int64_t)size * (size + 1) / 2)
			bad = fail("MPI_Accumulate", (size_t)i);

	MPI_Win_free(&win);
	MPI_Free_mem(base);
	return bad;
}

int main(int argc, char **argv)
{
	int bad = 0, any = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	bad |= pingpong();
	bad |= allreduce();
	bad |= onesided();
	MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_check: %s: %d ranks, ping-pong 1 B..4 MiB, allreduce, "
		       "put/get/accumulate\n",
		       any ? "FAILED" : "OK", size);
	MPI_Finalize();
	return any ? 1 : 0;
}
