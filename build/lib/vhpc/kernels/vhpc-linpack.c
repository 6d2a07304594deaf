/*
 * vhpc-linpack - dense LU solve of a random N x N system (the Linpack
 * benchmark as seed 001 Fig. 5 uses it: factor time, solve time, total time,
 * Mflops), on LAPACKE dgetrf/dgetrs from OpenBLAS.
 *
 * A and b have entries uniform in [-0.5, 0.5) from a 64-bit LCG (seed -S).
 * factor_s = time of dgetrf (LU with partial pivoting), solve_s = time of
 * dgetrs (two triangular solves), total_s = factor_s + solve_s;
 * mflops = (2/3 N^3 + 2 N^2) / total_s / 1e6 (the LINPACK operation count).
 * Verification (LINPACK's normalized residual):
 *   resid = ||A x - b||_inf / (||A||_inf * ||x||_inf * N * eps) < 16
 * with eps the double machine epsilon (2^-52) and A, b the original data.
 * Threads: OpenBLAS honours OPENBLAS_NUM_THREADS (1 = the seed's serial run).
 * The seed used N = 3000; vhpc's default N = 1000 keeps emulated runs short.
 */
#include "common.h"

#include <cblas.h>
#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS extensions (declared in its cblas.h, repeated here for other cblas.h). */
extern int openblas_get_num_threads(void);
extern char *openblas_get_config(void);

static const char usage[] =
    "usage: vhpc-linpack [-n N] [-S SEED] [-X] [-h]\n"
    "Solve a random dense N x N system with LAPACKE dgetrf + dgetrs (OpenBLAS).\n"
    "  -n N     matrix order (default 1000; seed 001 used 3000)\n"
    "  -S SEED  random seed (default 1)\n"
    "  -X       testing only: perturb the solution so verification must fail\n"
    "  -h       this help\n"
    "Threads: OPENBLAS_NUM_THREADS.\n"
    "Result keys: factor_s, solve_s, total_s (seconds), mflops ((2/3 N^3 + 2 N^2)/total/1e6),\n"
    "residual (||Ax-b||/(||A|| ||x|| N eps), valid if < 16), n, threads, valid.\n";

static uint64_t lcg_state;

static double uniform(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) * (1.0 / 9007199254740992.0) - 0.5;
}

int main(int argc, char **argv)
{
    long n = 1000, seed = 1;
    int corrupt = 0, c;
    while ((c = vhpc_getopt(argc, argv, "n:S:X", usage)) != -1) {
        switch (c) {
        case 'n': n = vhpc_parse_long(optarg, 'n', 1, 100000); break;
        case 'S': seed = vhpc_parse_long(optarg, 'S', 0, 1L << 62); break;
        case 'X': corrupt = 1; break;
        }
    }

    size_t nn = (size_t)n * (size_t)n;
    double *a = vhpc_alloc(nn * sizeof(double));
    double *lu = vhpc_alloc(nn * sizeof(double));
    double *b = vhpc_alloc((size_t)n * sizeof(double));
    double *x = vhpc_alloc((size_t)n * sizeof(double));
    lapack_int *ipiv = vhpc_alloc((size_t)n * sizeof(lapack_int));

    lcg_state = (uint64_t)seed * 2654435761ULL + 12345u;
    for (size_t i = 0; i < nn; i++)
        a[i] = uniform();
    for (long i = 0; i < n; i++)
        b[i] = uniform();
    memcpy(lu, a, nn * sizeof(double));
    memcpy(x, b, (size_t)n * sizeof(double));

    double t0 = vhpc_now();
    lapack_int info = LAPACKE_dgetrf(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n, lu,
                                     (lapack_int)n, ipiv);
    double t1 = vhpc_now();
    if (info != 0)
        vhpc_fatal("dgetrf failed (info %d): the random matrix is singular; try another -S",
                   (int)info);
    info = LAPACKE_dgetrs(LAPACK_COL_MAJOR, 'N', (lapack_int)n, 1, lu, (lapack_int)n, ipiv, x,
                          (lapack_int)n);
    double t2 = vhpc_now();
    if (info != 0)
        vhpc_fatal("dgetrs failed (info %d)", (int)info);

    if (corrupt)
        x[n / 2] += 1e-3 * (fabs(x[n / 2]) + 1.0);

    /* r = A x - b (column major), norms in the infinity norm */
    double *r = lu; /* reuse: the factors are no longer needed */
    memcpy(r, b, (size_t)n * sizeof(double));
    cblas_dgemv(CblasColMajor, CblasNoTrans, (int)n, (int)n, 1.0, a, (int)n, x, 1, -1.0, r, 1);
    double rnorm = 0.0, xnorm = 0.0, anorm = 0.0;
    for (long i = 0; i < n; i++) {
        rnorm = fmax(rnorm, fabs(r[i]));
        xnorm = fmax(xnorm, fabs(x[i]));
        double row = 0.0;
        for (long j = 0; j < n; j++)
            row += fabs(a[(size_t)j * (size_t)n + (size_t)i]);
        anorm = fmax(anorm, row);
    }
    double resid = rnorm / (anorm * xnorm * (double)n * DBL_EPSILON);
    int valid = isfinite(resid) && resid < 16.0;

    double factor_s = t1 - t0, solve_s = t2 - t1, total_s = t2 - t0;
    double dn = (double)n;
    double mflops = (2.0 / 3.0 * dn * dn * dn + 2.0 * dn * dn) / total_s / 1e6;
    int threads = openblas_get_num_threads();

    printf("BLAS: %s\n", openblas_get_config());
    printf("N = %ld, %d BLAS thread(s)\n", n, threads);
    printf("factor %.6f s, solve %.6f s, total %.6f s, %.1f Mflops\n", factor_s, solve_s, total_s,
           mflops);
    printf("normalized residual %.4g (%s, threshold 16)\n", resid, valid ? "passed" : "FAILED");
    vhpc_result_begin();
    vhpc_result_num("factor_s", factor_s);
    vhpc_result_num("solve_s", solve_s);
    vhpc_result_num("total_s", total_s);
    vhpc_result_num("mflops", mflops);
    vhpc_result_num("residual", resid);
    vhpc_result_int("n", n);
    vhpc_result_int("threads", threads);
    vhpc_result_int("valid", valid);
    vhpc_result_end();

    free(a);
    free(lu);
    free(b);
    free(x);
    free(ipiv);
    vhpc_exit(valid ? VHPC_EXIT_OK : VHPC_EXIT_INVALID);
}
