/*
 * npb_comm.c - the few collective operations the kernels need.
 * With -DNPB_MPI they map onto MPI (MPI_COMM_WORLD); without it there is a
 * single rank and they are copies or no-ops, so the kernels have one code path.
 */
#include "npb.h"
#include "../common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef NPB_MPI
#include <mpi.h>

static int g_rank, g_size;

static void finalize_hook(void)
{
    vhpc_report_placement(g_rank);
    MPI_Finalize();
}

void npb_comm_init(int *argc, char ***argv)
{
    int provided;
    /* MPI is only ever called outside OpenMP parallel regions. */
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    vhpc_set_exit_hook(finalize_hook);
    vhpc_set_quiet(g_rank != 0);
}
void npb_comm_finalize(void) { MPI_Finalize(); }
int npb_rank(void) { return g_rank; }
int npb_nranks(void) { return g_size; }
int npb_is_mpi_build(void) { return 1; }
double npb_wtime(void) { return MPI_Wtime(); }
void npb_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }
void npb_sum_d(double *buf, int n) { MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); }
void npb_max_d(double *buf, int n) { MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); }
void npb_sum_l(long long *buf, int n) { MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD); }

/* MPI counts are int: split large all-to-all blocks into chunks that fit. */
void npb_alltoall(const void *send, void *recv, size_t bytes)
{
    if (g_size == 1) {
        memmove(recv, send, bytes);
        return;
    }
    if (bytes < (size_t)1 << 31) {
        MPI_Alltoall(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
        return;
    }
    if (bytes % sizeof(double) == 0 && bytes / sizeof(double) < (size_t)1 << 31) {
        MPI_Alltoall(send, (int)(bytes / sizeof(double)), MPI_DOUBLE, recv,
                     (int)(bytes / sizeof(double)), MPI_DOUBLE, MPI_COMM_WORLD);
        return;
    }
    vhpc_fatal("all-to-all block of %zu bytes is too large", bytes);
}

void npb_alltoallv_i32(const int32_t *send, const long *scount, const long *sdispl,
                       int32_t *recv, const long *rcount, const long *rdispl)
{
    int p = g_size;
    int *sc = malloc(4 * sizeof(int) * (size_t)p);
    if (!sc)
        vhpc_fatal("out of memory");
    int *sd = sc + p, *rc = sc + 2 * p, *rd = sc + 3 * p;
    for (int i = 0; i < p; i++) {
        if (sdispl[i] + scount[i] > 2147483647L || rdispl[i] + rcount[i] > 2147483647L)
            vhpc_fatal("alltoallv counts exceed the MPI int range");
        sc[i] = (int)scount[i];
        sd[i] = (int)sdispl[i];
        rc[i] = (int)rcount[i];
        rd[i] = (int)rdispl[i];
    }
    MPI_Alltoallv(send, sc, sd, MPI_INT32_T, recv, rc, rd, MPI_INT32_T, MPI_COMM_WORLD);
    free(sc);
}

void npb_allgatherv_d(double *buf, const long *count, const long *displ)
{
    int p = g_size;
    if (p == 1)
        return;
    int *c = malloc(2 * sizeof(int) * (size_t)p);
    if (!c)
        vhpc_fatal("out of memory");
    int *d = c + p;
    for (int i = 0; i < p; i++) {
        if (displ[i] + count[i] > 2147483647L)
            vhpc_fatal("allgatherv counts exceed the MPI int range");
        c[i] = (int)count[i];
        d[i] = (int)displ[i];
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, c, d, MPI_DOUBLE, MPI_COMM_WORLD);
    free(c);
}

void npb_sendrecv_d(const double *send, int dest, double *recv, int src, long n, int tag)
{
    MPI_Sendrecv(send, (int)n, MPI_DOUBLE, dest, tag, recv, (int)n, MPI_DOUBLE, src, tag,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

#else /* single process */

void npb_comm_init(int *argc, char ***argv) { (void)argc; (void)argv; }
void npb_comm_finalize(void) {}
int npb_rank(void) { return 0; }
int npb_nranks(void) { return 1; }
int npb_is_mpi_build(void) { return 0; }
double npb_wtime(void) { return vhpc_now(); }
void npb_barrier(void) {}
void npb_sum_d(double *buf, int n) { (void)buf; (void)n; }
void npb_max_d(double *buf, int n) { (void)buf; (void)n; }
void npb_sum_l(long long *buf, int n) { (void)buf; (void)n; }
void npb_alltoall(const void *send, void *recv, size_t bytes) { memmove(recv, send, bytes); }
void npb_alltoallv_i32(const int32_t *send, const long *scount, const long *sdispl,
                       int32_t *recv, const long *rcount, const long *rdispl)
{
    (void)rcount;
    memmove(recv + rdispl[0], send + sdispl[0], sizeof(int32_t) * (size_t)scount[0]);
}
void npb_allgatherv_d(double *buf, const long *count, const long *displ)
{
    (void)buf; (void)count; (void)displ;
}
void npb_sendrecv_d(const double *send, int dest, double *recv, int src, long n, int tag)
{
    (void)dest; (void)src; (void)tag;
    memmove(recv, send, sizeof(double) * (size_t)n);
}
#endif

void *npb_alloc(size_t bytes) { return vhpc_alloc(bytes); }
