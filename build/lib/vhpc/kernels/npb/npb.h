/*
 * npb.h - shared declarations of vhpc's NAS Parallel Benchmarks kernels
 * (EP, IS, CG, MG, FT), written from the NPB specification:
 *   D. Bailey et al., "The NAS Parallel Benchmarks", RNR-94-007 (1994),
 *   D. Bailey et al., "The NAS Parallel Benchmarks 2.0", NAS-95-020 (1995),
 * and the class parameters / verification values of NPB 3.3.1 / 3.4
 * (collected in /work/shared/reference/benchmarks.md).
 *
 * One source tree builds two programs:
 *   vhpc-npb-omp  shared memory, OpenMP threads (OMP_NUM_THREADS); one process
 *   vhpc-npb-mpi  compiled with -DNPB_MPI: distributed memory, one MPI rank per
 *                 process (plus OpenMP threads inside a rank only when
 *                 OMP_NUM_THREADS is set explicitly; default 1 thread per rank).
 * Every kernel is written once for P ranks x T threads; in the OpenMP build
 * P = 1 and the communication helpers below degenerate to copies / no-ops.
 */
#ifndef VHPC_NPB_H
#define VHPC_NPB_H

#include <stddef.h>
#include <stdint.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- random numbers (npb_rand.c) -------------------------------------- */

/*
 * The NPB pseudo-random generator (RNR-94-007, section 2.2):
 *     x_{k+1} = a * x_k  mod 2^46,   r_k = 2^-46 * x_k  in (0, 1),
 * with a = 5^13 = 1220703125 and an odd seed x_0.  NPB evaluates the
 * product exactly in double precision by splitting into 23-bit halves; here
 * the state is an unsigned 64-bit integer: a 64-bit wrapping product is exact
 * modulo 2^64 and therefore also modulo 2^46, so the sequence is identical.
 */
#define NPB_A 1220703125ULL /* 5^13 */
#define NPB_MASK46 ((1ULL << 46) - 1)
#define NPB_R46 (1.0 / 70368744177664.0) /* 2^-46 */

static inline uint64_t npb_lcg_mul(uint64_t a, uint64_t x) { return (a * x) & NPB_MASK46; }

/* randlc: advance *x by multiplier a, return the new value scaled to (0,1). */
static inline double npb_randlc(uint64_t *x, uint64_t a)
{
    *x = npb_lcg_mul(a, *x);
    return (double)*x * NPB_R46;
}

/* vranlc: n successive values r_1..r_n of the sequence after *x into y[],
 * *x is left at the last state (NPB's vranlc). */
void npb_vranlc(long n, uint64_t *x, uint64_t a, double *y);

/* a^n mod 2^46 by square-and-multiply (NPB's ipow46 / power). */
uint64_t npb_pow46(uint64_t a, uint64_t n);

/* ---- communication (npb_comm.c) --------------------------------------- */

void npb_comm_init(int *argc, char ***argv);
void npb_comm_finalize(void);
int npb_rank(void);
int npb_nranks(void);
int npb_is_mpi_build(void);
double npb_wtime(void);
void npb_barrier(void);
/* In-place reductions over all ranks. */
void npb_sum_d(double *buf, int n);
void npb_max_d(double *buf, int n);
void npb_sum_l(long long *buf, int n);
/* Every rank sends `bytes` bytes to every rank: send/recv hold P blocks. */
void npb_alltoall(const void *send, void *recv, size_t bytes);
/* alltoallv of int32 values (counts and displacements in elements). */
void npb_alltoallv_i32(const int32_t *send, const long *scount, const long *sdispl,
                       int32_t *recv, const long *rcount, const long *rdispl);
/* In-place allgatherv of doubles: rank r's block is buf[displ[r] .. +count[r]). */
void npb_allgatherv_d(double *buf, const long *count, const long *displ);
/* Send `n` doubles to rank `dest` and receive `n` doubles from rank `src`. */
void npb_sendrecv_d(const double *send, int dest, double *recv, int src, long n, int tag);

/* ---- kernels ------------------------------------------------------------ */

typedef struct {
    char cls;        /* S W A B C */
    int perturb;     /* -X: perturb the computation so verification must fail */
    int threads;     /* OpenMP threads per rank */
} npb_opts;

typedef struct {
    const char *name;     /* "EP", "IS", ... */
    int n1, n2, n3;       /* problem size (n2 = n3 = 0: one-dimensional) */
    int ep_log2;          /* EP: size printed as 2^(m+1) */
    int niter;            /* iterations reported by NPB */
    double time;          /* timed section, seconds (max over ranks) */
    double mops;          /* Mop/s total, NPB formula */
    int verified;         /* 1 = SUCCESSFUL */
    double rel_err;       /* largest relative error of the verification (or -1) */
    const char *optype;   /* NPB "Operation type" */
} npb_result;

/* Each returns 0 on success, or a message for an unsupported configuration
 * (e.g. a rank count that does not divide the grid): exit 2. */
const char *npb_ep(const npb_opts *o, npb_result *res);
const char *npb_is(const npb_opts *o, npb_result *res);
const char *npb_cg(const npb_opts *o, npb_result *res);
const char *npb_mg(const npb_opts *o, npb_result *res);
const char *npb_ft(const npb_opts *o, npb_result *res);

/* Class letter -> index 0..4 (S W A B C). */
int npb_class_index(char cls);

/* Allocation that exits 1 with an error line on failure (all ranks). */
void *npb_alloc(size_t bytes);

static inline int npb_is_pow2(long n) { return n > 0 && (n & (n - 1)) == 0; }
static inline int npb_ilog2(long n) { int l = 0; while ((1L << l) < n) l++; return l; }

#endif /* VHPC_NPB_H */
