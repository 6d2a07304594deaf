/*
 * vhpc-stream - STREAM-style sustainable memory bandwidth (OpenMP).
 *
 * Follows McCalpin's rules (and stream.c as GCC compiles it: Copy is a memcpy per thread,
 * see copy_kernel): Copy c=a, Scale b=s*c, Add c=a+b, Triad a=b+s*c
 * (s = 3); each kernel is timed separately in every iteration, the first
 * iteration is not counted, and the reported rate is bytes / minimum time.
 * The arrays are first touched by the same threads, with the same static
 * schedule, as the timed loops (NUMA placement). The final arrays are
 * validated against a scalar replay: the mean absolute error of each array,
 * relative to the expected value, must be <= 1e-13.
 */
#include "common.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NTIMES 250 /* a grows as 15^ntimes: 15^262 overflows a double */
#define EPSILON 1e-13
#define MIN_AUTO_N 2000000L /* the default before the LLC rule: keeps tiny-cache runs timed */

/* STREAM's rule (stream.c, "each array must be at least 4 times the size of the available
 * cache memory"): n = 4 LLC / 8 bytes, rounded up to a multiple of 1000, at least MIN_AUTO_N,
 * capped so that the 3 arrays take at most half of MemAvailable. */
static long auto_n(long llc)
{
    long n = (4 * llc / (long)sizeof(double) + 999) / 1000 * 1000;
    if (n < MIN_AUTO_N)
        n = MIN_AUTO_N;
    long avail = vhpc_mem_available();
    long cap = avail / 2 / 3 / (long)sizeof(double);
    if (avail > 0 && n > cap)
        n = cap;
    return n;
}

static const char usage[] =
    "usage: vhpc-stream [-n ELEMENTS] [-t NTIMES] [-L BYTES] [-X] [-h]\n"
    "STREAM Copy/Scale/Add/Triad memory bandwidth (OpenMP; threads from OMP_NUM_THREADS).\n"
    "  -n ELEMENTS  doubles per array (default: STREAM's rule, each array >= 4x the\n"
    "               last-level cache that sysfs reports, at least 2000000, at most what\n"
    "               half of MemAvailable holds)\n"
    "  -t NTIMES    iterations, the first is not counted (default 10, 2..250)\n"
    "  -L BYTES     the last-level cache the rule sizes from, instead of sysfs's (vhpc\n"
    "               passes the host's, so a guest's emulated cache sizes nothing)\n"
    "  -X           testing only: corrupt one element after the timed loop,\n"
    "               so that validation must fail (valid=0, exit 3)\n"
    "  -h           this help\n"
    "Result keys: copy_bw scale_bw add_bw triad_bw (GB/s, 1e9 bytes/s), n, ntimes,\n"
    "threads, max_rel_err, llc_bytes (last-level cache size, 0 if unknown), n_auto (1: n\n"
    "chosen by the rule), in_cache (1: an array is smaller than 4x the LLC), valid.\n";

enum { COPY, SCALE, ADD, TRIAD, NKERNELS };
static const char *const names[NKERNELS] = {"copy_bw", "scale_bw", "add_bw", "triad_bw"};
static const double words[NKERNELS] = {2, 2, 3, 3}; /* doubles moved per element */

/* Copy c = a: each thread copies its static-schedule chunk with memcpy(3).  This is what GCC
 * makes of stream.c's Copy loop (its arrays are distinct globals, so -O2/-O3 loop distribution
 * turns the loop into a memcpy call; glibc's memcpy then uses non-temporal stores or rep movsb
 * for large chunks), while a plain loop over pointers stays a vector loop: that was the 1.19x
 * Copy rate against stream.c (issue 12).  Same chunks as schedule(static). */
static void copy_kernel(double *c, const double *a, long n)
{
#pragma omp parallel
    {
        long nt = omp_get_num_threads(), id = omp_get_thread_num();
        long q = n / nt, r = n % nt;
        long lo = id * q + (id < r ? id : r), len = q + (id < r ? 1 : 0);
        memcpy(c + lo, a + lo, (size_t)len * sizeof(double));
    }
}

/* Mean |x[j] - expect| / |expect| over the array. */
static double rel_error(const double *x, long n, double expect)
{
    double sum = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (long j = 0; j < n; j++)
        sum += fabs(x[j] - expect);
    return fabs(sum / (double)n / expect);
}

int main(int argc, char **argv)
{
    long n = 0; /* 0: auto_n() */
    long llc = 0; /* 0: sysfs's */
    int ntimes = 10;
    int corrupt = 0;
    int c;

    while ((c = vhpc_getopt(argc, argv, "n:t:L:X", usage)) != -1) {
        switch (c) {
        case 'n': n = vhpc_parse_long(optarg, 'n', 1, 1L << 36); break;
        case 't': ntimes = (int)vhpc_parse_long(optarg, 't', 2, MAX_NTIMES); break;
        case 'L': llc = vhpc_parse_long(optarg, 'L', 1, 1L << 40); break;
        case 'X': corrupt = 1; break;
        }
    }
    if (llc == 0)
        llc = vhpc_llc_bytes();
    int n_auto = n == 0;
    if (n_auto)
        n = auto_n(llc);

    /* One block, the arrays back to back in the order stream.c's static a[N], b[N], c[N] end
     * up in memory with GCC (nm -n of the reference build: c lowest, then b, then a), so the
     * copy c = a writes below its source as in the reference: their relative placement
     * (mod 4 KiB) changes the rates of memcpy and of the vector loops (store-to-load 4K
     * aliasing). */
    double *cc = vhpc_alloc(3 * (size_t)n * sizeof(double));
    double *b = cc + n;
    double *a = b + n;
    double *times = vhpc_alloc((size_t)NKERNELS * (size_t)ntimes * sizeof(double));

    int threads = 1;
#pragma omp parallel
    {
#pragma omp master
        threads = omp_get_num_threads();
    }

    /* First touch: same threads, same static schedule as the kernels. */
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        cc[j] = 0.0;
    }

    volatile double scalar_v = 3.0; /* keep the scalar opaque to the compiler */
    const double scalar = scalar_v;

    for (int k = 0; k < ntimes; k++) {
        double t;
        t = vhpc_now();
        copy_kernel(cc, a, n);
        times[COPY * ntimes + k] = vhpc_now() - t;

        t = vhpc_now();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++)
            b[j] = scalar * cc[j];
        times[SCALE * ntimes + k] = vhpc_now() - t;

        t = vhpc_now();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++)
            cc[j] = a[j] + b[j];
        times[ADD * ntimes + k] = vhpc_now() - t;

        t = vhpc_now();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++)
            a[j] = b[j] + scalar * cc[j];
        times[TRIAD * ntimes + k] = vhpc_now() - t;
    }

    if (corrupt)
        a[n / 2] = 2.0 * a[n / 2] + 1.0;

    /* Expected values: replay the four kernels on scalars. */
    double aj = 1.0, bj = 2.0, cj = 0.0;
    for (int k = 0; k < ntimes; k++) {
        cj = aj;
        bj = scalar * cj;
        cj = aj + bj;
        aj = bj + scalar * cj;
    }
    double err_a = rel_error(a, n, aj);
    double err_b = rel_error(b, n, bj);
    double err_c = rel_error(cc, n, cj);
    double max_err = fmax(err_a, fmax(err_b, err_c));
    int valid = err_a <= EPSILON && err_b <= EPSILON && err_c <= EPSILON;

    /* STREAM wants each array >= 4x the last-level cache; otherwise say so. */
    int in_cache = llc > 0 && (double)n * sizeof(double) < 4.0 * (double)llc;
    if (in_cache)
        printf("note: each array (%.1f MiB) is smaller than 4x the last-level cache (%.1f MiB):"
               " rates include cache bandwidth; raise -n (or omit it) for memory bandwidth\n",
               (double)n * sizeof(double) / 1048576.0, (double)llc / 1048576.0);

    double bw[NKERNELS];
    printf("%-9s %12s %12s %12s %12s\n", "Function", "Best GB/s", "Avg time s", "Min time s",
           "Max time s");
    for (int f = 0; f < NKERNELS; f++) {
        double tmin = INFINITY, tmax = 0.0, tsum = 0.0;
        for (int k = 1; k < ntimes; k++) { /* first iteration not counted */
            double t = times[f * ntimes + k];
            tmin = fmin(tmin, t);
            tmax = fmax(tmax, t);
            tsum += t;
        }
        double bytes = words[f] * (double)sizeof(double) * (double)n;
        bw[f] = tmin > 0 ? bytes / tmin * 1e-9 : 0.0;
        printf("%-9s %12.3f %12.6f %12.6f %12.6f\n", names[f], bw[f], tsum / (ntimes - 1), tmin,
               tmax);
    }
    printf("validation: relative errors a=%.3g b=%.3g c=%.3g (limit %.0e): %s\n", err_a, err_b,
           err_c, EPSILON, valid ? "passed" : "FAILED");

    vhpc_result_begin();
    for (int f = 0; f < NKERNELS; f++)
        vhpc_result_num(names[f], bw[f]);
    vhpc_result_int("n", n);
    vhpc_result_int("ntimes", ntimes);
    vhpc_result_int("threads", threads);
    vhpc_result_num("max_rel_err", max_err);
    vhpc_result_int("llc_bytes", llc);
    vhpc_result_int("n_auto", n_auto);
    vhpc_result_int("in_cache", in_cache);
    vhpc_result_int("valid", valid);
    vhpc_result_end();

    free(cc);
    free(times);
    return valid ? VHPC_EXIT_OK : VHPC_EXIT_INVALID;
}
