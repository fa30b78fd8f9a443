/* Two MPI ranks exchange a message and finalize, then print that they are
 * still running.  tests/integration/mpi_finalize.sh runs it with Open MPI's
 * cm PML over libfabric's verbs provider on uroce: MPI_Finalize dlclose()s
 * the components that loaded libibverbs while uroce's progress threads
 * still run (docs/memory.md, "Unloading"). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank = -1, size = 0, v = 0;

	if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
		return 2;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2)
		return 3;
	if (rank == 0) {
		v = 4242;
		MPI_Send(&v, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
		MPI_Recv(&v, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else {
		MPI_Recv(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		v++;
		MPI_Send(&v, 1, MPI_INT, 0, 8, MPI_COMM_WORLD);
	}
	printf("rank %d got %d\n", rank, v);
	fflush(stdout);
	MPI_Finalize();
	printf("rank %d still running after MPI_Finalize\n", rank);
	return 0;
}
