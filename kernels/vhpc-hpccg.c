/*
 * vhpc-hpccg - unpreconditioned conjugate gradient on a 27-point 3-D
 * stencil, after the HPCCG mini-application (Mantevo) as seed 004 Fig. 6
 * uses it.  MPI + OpenMP.
 *
 * Problem (weak scaling): every rank owns an nx x ny x nz block; the blocks
 * are stacked in z, so the global grid is nx x ny x (nz * ranks).  Row i of
 * the sparse matrix A couples grid point i with every point of its 3x3x3
 * neighbourhood inside the global grid: diagonal 27, off-diagonals -1.
 * The exact solution is x = 1, so b = A 1 (b_i = 27 - number of neighbours);
 * the start vector is x = 0.  A is stored in CSR with local column indices;
 * the plane below and the plane above (owned by ranks r-1 and r+1) are
 * appended to the local vector and exchanged before every product.
 *
 * CG (HPCCG's operations): r = b - A x, rtrans = r.r; then until
 * ||r||/||b|| <= TOL or MAX_ITER iterations: p = r + beta p (beta =
 * rtrans/oldrtrans, 0 in the first iteration), Ap = A p, alpha =
 * rtrans/(p.Ap), x = x + alpha p, r = r - alpha Ap, rtrans = r.r.
 * Per iteration: 1 sparsemv, 2 ddot, 3 waxpby.  Unlike HPCCG, the residual
 * is tested after the update (no extra iteration); the tolerance is relative
 * to ||b|| (HPCCG's is absolute), so it does not depend on the grid size.
 *
 * Flops, counted as Mantevo HPCCG counts them (main.cpp), so that mflops can be
 * set beside published HPCCG figures: per iteration and global row, ddot 4,
 * waxpby 6, sparsemv 2 x 27 (27 non-zeros per row, boundary rows included,
 * although they have fewer), over the iterations only (not the set-up r = b - A x).
 * mflops = all ranks' flops / slowest rank's CG time / 1e6 (HPCCG's "MFLOPS
 * Summary: Total"); ddot/waxpby/sparsemv_mflops the same with that phase's
 * time (ddot includes its MPI_Allreduce, sparsemv its halo exchange).
 * mflops_actual: the flops actually done (ddot 2n, waxpby 2n, sparsemv 2 nnz
 * per call, set-up included) over the same time; below mflops by the share of
 * missing boundary neighbours (about 0.95 for 32^3 on one rank).
 * Verification: valid iff the iteration converged (||r||/||b|| <= TOL) and
 * the explicitly recomputed residual ||b - A x||/||b|| <= 2 TOL.
 * Fixed-iteration mode (TOL = 0, as Mantevo HPCCG runs: tolerance 0 and
 * max_iter 150, i.e. 149 iterations): exactly MAX_ITER iterations; valid iff
 * the recomputed residual is <= 2 FIXED_TOL, i.e. CG converged well past the
 * default tolerance (far above the ~1e-15 round-off floor it stagnates at).
 */
#include "common.h"

#include <math.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXED_TOL 1e-9 /* tol = 0: the recomputed residual must reach this */
/* Bytes one row holds: 27 values and column indices, its row pointer, and x, b, r, p, Ap. */
#define BYTES_PER_ROW (27.0 * (sizeof(double) + sizeof(int)) + sizeof(long) + 5.0 * sizeof(double))
#define MIN_AUTO_EDGE 32L /* the former default: a run on an unknown cache stays timed */

/* Auto size, STREAM's rule as vhpc-stream applies it ("each array at least 4 times the
 * last-level cache"), for one rank: the edge of the cube every rank solves such that one
 * rank's rows hold at least 4 x llc bytes, so the CG streams from memory rather than from
 * cache.  The edge does not depend on the rank count: HPCCG's nx, ny, nz are the local grid
 * of each process and its runs scale weakly (a fixed problem per rank, the global grid
 * growing with the ranks).  At least MIN_AUTO_EDGE (llc 0: unknown). */
static long auto_edge(long llc)
{
    long edge = MIN_AUTO_EDGE;
    while ((double)edge * (double)edge * (double)edge * BYTES_PER_ROW < 4.0 * (double)llc)
        edge++;
    return edge;
}

static const char usage[] =
    "usage: mpirun -np R vhpc-hpccg [-x NX] [-y NY] [-z NZ] [-i MAX_ITER] [-t TOL]\n"
    "       [-L BYTES] [-X] [-h]\n"
    "Unpreconditioned CG on a 27-point 3-D stencil (HPCCG), MPI + OpenMP, weak scaling:\n"
    "every rank owns NX x NY x NZ points, blocks stacked in z.\n"
    "  -x NX, -y NY, -z NZ  local grid of each rank (default, or 0: auto, one cube for any\n"
    "                       rank count whose matrix and vectors fill 4x the LLC, >= 32)\n"
    "  -L BYTES             the last-level cache the auto grid sizes from, instead of\n"
    "                       sysfs's (vhpc passes the host's, so a guest solves its grid)\n"
    "  -i MAX_ITER          maximum CG iterations (default 149, HPCCG's count)\n"
    "  -t TOL               relative residual ||r||/||b|| to reach (default 0: run exactly\n"
    "                       MAX_ITER iterations as HPCCG does; valid if ||b-Ax||/||b|| <= 2e-9)\n"
    "  -X                   testing only: perturb the solution so verification must fail\n"
    "  -h                   this help\n"
    "Threads: OMP_NUM_THREADS per rank.\n"
    "Result keys: mflops, ddot_mflops, waxpby_mflops, sparsemv_mflops (1e6 flop/s, all ranks,\n"
    "flops counted as Mantevo HPCCG: 27 per row), mflops_actual (non-zeros actually used),\n"
    "time_s, iterations, residual (||r||/||b|| of the iteration), true_residual (recomputed),\n"
    "nx, ny, nz, n_auto (1: the grid was sized from the cache), llc_bytes (0: unknown), ranks,\n"
    "threads, rows (global), nnz (global), valid.\n";

static void finalize_hook(void)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    vhpc_report_placement(rank);
    MPI_Finalize();
}

struct problem {
    long nx, ny, nz, nlocal, plane, ncols; /* ncols = nlocal + 2 planes */
    long *rowptr;
    int *cols;
    double *vals;
    int below, above; /* neighbour ranks or MPI_PROC_NULL */
};

static void build(struct problem *pb, int rank, int nranks)
{
    long nx = pb->nx, ny = pb->ny, nz = pb->nz;
    long gz0 = (long)rank * nz, gnz = nz * nranks;
    pb->plane = nx * ny;
    pb->nlocal = pb->plane * nz;
    pb->ncols = pb->nlocal + 2 * pb->plane;
    pb->below = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    pb->above = rank < nranks - 1 ? rank + 1 : MPI_PROC_NULL;
    pb->rowptr = vhpc_alloc((size_t)(pb->nlocal + 1) * sizeof(long));
    pb->cols = vhpc_alloc((size_t)pb->nlocal * 27 * sizeof(int));
    pb->vals = vhpc_alloc((size_t)pb->nlocal * 27 * sizeof(double));
    long k = 0;
    for (long z = 0; z < nz; z++)
        for (long y = 0; y < ny; y++)
            for (long x = 0; x < nx; x++) {
                long row = x + nx * (y + ny * z);
                pb->rowptr[row] = k;
                for (int dz = -1; dz <= 1; dz++) {
                    long gz = gz0 + z + dz;
                    if (gz < 0 || gz >= gnz)
                        continue;
                    for (int dy = -1; dy <= 1; dy++) {
                        if (y + dy < 0 || y + dy >= ny)
                            continue;
                        for (int dx = -1; dx <= 1; dx++) {
                            if (x + dx < 0 || x + dx >= nx)
                                continue;
                            long in_plane = (x + dx) + nx * (y + dy);
                            long col;
                            if (z + dz < 0)
                                col = pb->nlocal + in_plane; /* plane from rank-1 */
                            else if (z + dz >= nz)
                                col = pb->nlocal + pb->plane + in_plane; /* from rank+1 */
                            else
                                col = in_plane + pb->plane * (z + dz);
                            pb->cols[k] = (int)col;
                            pb->vals[k] = (dx == 0 && dy == 0 && dz == 0) ? 27.0 : -1.0;
                            k++;
                        }
                    }
                }
            }
    pb->rowptr[pb->nlocal] = k;
}

static void exchange(const struct problem *pb, double *v)
{
    MPI_Request req[4];
    double *lo = v + pb->nlocal, *hi = v + pb->nlocal + pb->plane;
    MPI_Irecv(lo, (int)pb->plane, MPI_DOUBLE, pb->below, 1, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(hi, (int)pb->plane, MPI_DOUBLE, pb->above, 0, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(v, (int)pb->plane, MPI_DOUBLE, pb->below, 0, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(v + pb->nlocal - pb->plane, (int)pb->plane, MPI_DOUBLE, pb->above, 1,
              MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
}

static void sparsemv(const struct problem *pb, double *v, double *out)
{
    exchange(pb, v);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < pb->nlocal; i++) {
        double s = 0.0;
        for (long k = pb->rowptr[i]; k < pb->rowptr[i + 1]; k++)
            s += pb->vals[k] * v[pb->cols[k]];
        out[i] = s;
    }
}

static double ddot(long n, const double *a, const double *b)
{
    double local = 0.0, global = 0.0;
#pragma omp parallel for reduction(+ : local) schedule(static)
    for (long i = 0; i < n; i++)
        local += a[i] * b[i];
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return global;
}

/* w = alpha x + beta y */
static void waxpby(long n, double alpha, const double *x, double beta, const double *y, double *w)
{
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        w[i] = alpha * x[i] + beta * y[i];
}

int main(int argc, char **argv)
{
    int rank, nranks, provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    vhpc_set_exit_hook(finalize_hook);
    vhpc_set_quiet(rank != 0);

    struct problem pb = {.nx = 0, .ny = 0, .nz = 0};
    long max_iter = 149;
    double tol = 0.0;
    long llc = 0;
    int corrupt = 0, c;
    while ((c = vhpc_getopt(argc, argv, "x:y:z:i:t:L:X", usage)) != -1) {
        switch (c) {
        case 'x': pb.nx = vhpc_parse_long(optarg, 'x', 0, 4096); break;
        case 'y': pb.ny = vhpc_parse_long(optarg, 'y', 0, 4096); break;
        case 'z': pb.nz = vhpc_parse_long(optarg, 'z', 0, 4096); break;
        case 'i': max_iter = vhpc_parse_long(optarg, 'i', 1, 1000000); break;
        case 't': tol = vhpc_parse_double(optarg, 't', 0.0, 1.0); break;
        case 'L': llc = vhpc_parse_long(optarg, 'L', 1, 1L << 40); break;
        case 'X': corrupt = 1; break;
        }
    }
    if (llc == 0)
        llc = vhpc_llc_bytes();
    int n_auto = !pb.nx || !pb.ny || !pb.nz;
    if (n_auto) {
        long edge = auto_edge(llc);
        pb.nx = pb.nx ? pb.nx : edge;
        pb.ny = pb.ny ? pb.ny : edge;
        pb.nz = pb.nz ? pb.nz : edge;
    }
    if (pb.nx * pb.ny * pb.nz * 27 > 2147483647L / 2)
        vhpc_usage_error("local grid %ld x %ld x %ld is too large; use fewer points per rank",
                         pb.nx, pb.ny, pb.nz);

    build(&pb, rank, nranks);
    long n = pb.nlocal;
    double *x = vhpc_alloc((size_t)pb.ncols * sizeof(double));
    double *b = vhpc_alloc((size_t)n * sizeof(double));
    double *r = vhpc_alloc((size_t)n * sizeof(double));
    double *p = vhpc_alloc((size_t)pb.ncols * sizeof(double));
    double *ap = vhpc_alloc((size_t)n * sizeof(double));
    /* b = A 1, x = 0; first touch in parallel like the kernels */
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        b[i] = 27.0 - (double)(pb.rowptr[i + 1] - pb.rowptr[i] - 1);
        x[i] = 0.0;
        r[i] = 0.0;
        p[i] = 0.0;
        ap[i] = 0.0;
    }
    for (long i = n; i < pb.ncols; i++)
        x[i] = p[i] = 0.0;

    long nnz_local = pb.rowptr[n];
    double t_ddot = 0.0, t_waxpby = 0.0, t_spmv = 0.0;
    long n_ddot = 0, n_waxpby = 0, n_spmv = 0;

    double bnorm = sqrt(ddot(n, b, b));
    MPI_Barrier(MPI_COMM_WORLD);
    double t_start = vhpc_now(), t0;

    /* r = b - A x, p = x (x = 0 here, computed anyway as HPCCG does) */
    t0 = vhpc_now(); waxpby(n, 1.0, x, 0.0, x, p); t_waxpby += vhpc_now() - t0; n_waxpby++;
    t0 = vhpc_now(); sparsemv(&pb, p, ap); t_spmv += vhpc_now() - t0; n_spmv++;
    t0 = vhpc_now(); waxpby(n, 1.0, b, -1.0, ap, r); t_waxpby += vhpc_now() - t0; n_waxpby++;
    t0 = vhpc_now(); double rtrans = ddot(n, r, r); t_ddot += vhpc_now() - t0; n_ddot++;
    double rel = sqrt(rtrans) / bnorm;
    long iter = 0;
    double old = rtrans;
    while (iter < max_iter && rel > tol) {
        iter++;
        double beta = iter == 1 ? 0.0 : rtrans / old;
        t0 = vhpc_now(); waxpby(n, 1.0, r, beta, p, p); t_waxpby += vhpc_now() - t0; n_waxpby++;
        t0 = vhpc_now(); sparsemv(&pb, p, ap); t_spmv += vhpc_now() - t0; n_spmv++;
        t0 = vhpc_now(); double pap = ddot(n, p, ap); t_ddot += vhpc_now() - t0; n_ddot++;
        double alpha = rtrans / pap;
        t0 = vhpc_now();
        waxpby(n, 1.0, x, alpha, p, x);
        waxpby(n, 1.0, r, -alpha, ap, r);
        t_waxpby += vhpc_now() - t0;
        n_waxpby += 2;
        old = rtrans;
        t0 = vhpc_now(); rtrans = ddot(n, r, r); t_ddot += vhpc_now() - t0; n_ddot++;
        rel = sqrt(rtrans) / bnorm;
    }
    double t_cg = vhpc_now() - t_start;

    if (corrupt)
        x[n / 2] += 1.0;
    /* explicit residual: ||b - A x|| / ||b|| */
    sparsemv(&pb, x, ap);
    double local = 0.0, rr_true = 0.0;
    for (long i = 0; i < n; i++)
        local += (b[i] - ap[i]) * (b[i] - ap[i]);
    MPI_Allreduce(&local, &rr_true, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double true_rel = sqrt(rr_true) / bnorm;
    int valid = tol > 0 ? rel <= tol && true_rel <= 2.0 * tol
                        : isfinite(rel) && true_rel <= 2.0 * FIXED_TOL;

    /* flops over all ranks, time of the slowest rank */
    double times[4] = {t_cg, t_ddot, t_waxpby, t_spmv}, tmax[4];
    MPI_Allreduce(times, tmax, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long nnz = 0, rows = 0;
    MPI_Allreduce(&nnz_local, &nnz, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&n, &rows, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    double f_actual = 2.0 * (double)rows * (double)(n_ddot + n_waxpby) + 2.0 * (double)nnz * (double)n_spmv;
    double f_ddot = 4.0 * (double)rows * (double)iter; /* Mantevo HPCCG's count */
    double f_waxpby = 6.0 * (double)rows * (double)iter;
    double f_spmv = 2.0 * 27.0 * (double)rows * (double)iter;

    if (rank == 0) {
        int threads = omp_get_max_threads();
        printf("HPCCG-style CG: %d ranks x %d threads, local %ld x %ld x %ld, global rows %ld, "
               "nnz %ld\n", nranks, threads, pb.nx, pb.ny, pb.nz, rows, nnz);
        printf("%ld iterations, ||r||/||b|| = %.3e (recomputed %.3e), tolerance %.1e: %s\n", iter,
               rel, true_rel, tol, valid ? "passed" : "FAILED");
        printf("time %.4f s, %.1f MFLOPS as HPCCG counts (ddot %.1f, waxpby %.1f, sparsemv %.1f); "
               "%.1f MFLOPS actual\n", tmax[0], (f_ddot + f_waxpby + f_spmv) / tmax[0] / 1e6,
               f_ddot / tmax[1] / 1e6, f_waxpby / tmax[2] / 1e6, f_spmv / tmax[3] / 1e6,
               f_actual / tmax[0] / 1e6);
        vhpc_result_begin();
        vhpc_result_num("mflops", (f_ddot + f_waxpby + f_spmv) / tmax[0] / 1e6);
        vhpc_result_num("ddot_mflops", f_ddot / tmax[1] / 1e6);
        vhpc_result_num("waxpby_mflops", f_waxpby / tmax[2] / 1e6);
        vhpc_result_num("sparsemv_mflops", f_spmv / tmax[3] / 1e6);
        vhpc_result_num("mflops_actual", f_actual / tmax[0] / 1e6);
        vhpc_result_num("time_s", tmax[0]);
        vhpc_result_int("iterations", iter);
        vhpc_result_num("residual", rel);
        vhpc_result_num("true_residual", true_rel);
        vhpc_result_int("nx", pb.nx);
        vhpc_result_int("ny", pb.ny);
        vhpc_result_int("nz", pb.nz);
        vhpc_result_int("n_auto", n_auto);
        vhpc_result_int("llc_bytes", llc);
        vhpc_result_int("ranks", nranks);
        vhpc_result_int("threads", threads);
        vhpc_result_int("rows", rows);
        vhpc_result_int("nnz", nnz);
        vhpc_result_int("valid", valid);
        vhpc_result_end();
    }
    free(x);
    free(b);
    free(r);
    free(p);
    free(ap);
    free(pb.rowptr);
    free(pb.cols);
    free(pb.vals);
    vhpc_exit(valid ? VHPC_EXIT_OK : VHPC_EXIT_INVALID);
}
