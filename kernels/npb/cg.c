/*
 * cg.c - NPB CG (conjugate gradient), RNR-94-007 section 2.4 / benchmark 5, NPB 3.x.
 *
 * Inverse power method for the smallest eigenvalue of a random sparse symmetric
 * positive definite matrix A (order na):
 *     x = [1, ..., 1]
 *     niter times:  solve A z = x with 25 unpreconditioned CG iterations,
 *                   zeta = shift + 1 / (x . z),   x = z / ||z||
 * Verification: |zeta - zeta_ref| / zeta_ref <= 1e-10 (zeta_ref per class).
 * Mop/s = 2 niter na (3 + nz(nz+1) + 25 (5 + nz(nz+1)) + 3) / t / 1e6, nz = nonzer.
 * Timed: the niter outer iterations, after one untimed iteration and a reset of x.
 *
 * Matrix (NPB "makea"): with the NPB generator (seed 314159265, a = 5^13; one value
 * is drawn and discarded first), for i = 1..na a sparse vector v_i gets nonzer
 * distinct random positions: each candidate uses two draws, value = first, position
 * = int(nn1 * second) + 1 with nn1 the smallest power of two >= na, rejected when
 * > na or already present.  Then element i of v_i is set to 0.5 (appended if absent).
 *     A = sum_i  ratio^(i-1) v_i v_i^T  + (rcond - shift) I,  ratio = rcond^(1/na),
 * rcond = 0.1, the diagonal term being added together with the i-th outer product
 * (NPB "sparse").  Duplicates are summed in the order of i, as in NPB.
 * Our construction: per row, a list of (vector, position) contributions, a marker
 * array to merge duplicate columns, columns sorted ascending (CSR).
 *
 * Parallelisation: rows split in contiguous blocks over MPI ranks (every rank
 * generates the same vectors and keeps its rows), threads share a rank's rows.
 * All vectors have full length on every rank; a rank updates its rows, dot
 * products are summed with an allreduce and the search direction p (and z before
 * the residual) is completed with an allgather before each multiply.
 *
 * -X: 1e-6 is added to every diagonal element of A (an eigenvalue shift of 1e-6,
 * a relative change of zeta far above the 1e-10 tolerance).
 */
#include "npb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CG_RCOND 0.1
#define CG_CGITMAX 25
#define CG_SEED 314159265ULL

static const int cg_na[5] = {1400, 7000, 14000, 75000, 150000};
static const int cg_nonzer[5] = {7, 8, 11, 13, 15};
static const int cg_niter[5] = {15, 15, 15, 75, 75};
static const double cg_shift[5] = {10.0, 12.0, 20.0, 60.0, 110.0};
static const double cg_zeta[5] = {8.5971775078648, 10.362595087124, 17.130235054029,
                                  22.712745482631, 28.973605592845};

typedef struct {
    int na, r0, r1, nranks;
    long *rowstr;   /* CSR over own rows, index j - r0 */
    int *colidx;
    double *a;
    long *cnt, *displ; /* allgatherv layout of a vector */
} cg_matrix;

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* NPB makea/sprnvc/vecset: vectors stored as vcol[i*w + k] (0-based), vval, vcnt[i]. */
static void make_vectors(int na, int nonzer, int *vcol, double *vval, int *vcnt)
{
    int w = nonzer + 1;
    uint64_t tran = CG_SEED;
    long nn1 = 1;
    do
        nn1 *= 2;
    while (nn1 < na);
    (void)npb_randlc(&tran, NPB_A); /* NPB main draws zeta once before makea */
    for (int i = 0; i < na; i++) {
        int *iv = vcol + (size_t)i * w;
        double *v = vval + (size_t)i * w;
        int nzv = 0;
        while (nzv < nonzer) {
            double vecelt = npb_randlc(&tran, NPB_A);
            double vecloc = npb_randlc(&tran, NPB_A);
            int pos = (int)((double)nn1 * vecloc); /* 0-based; NPB: int(nn1*x)+1 */
            if (pos >= na)
                continue;
            int dup = 0;
            for (int k = 0; k < nzv; k++)
                if (iv[k] == pos)
                    dup = 1;
            if (dup)
                continue;
            v[nzv] = vecelt;
            iv[nzv] = pos;
            nzv++;
        }
        int set = 0;
        for (int k = 0; k < nzv; k++)
            if (iv[k] == i) {
                v[k] = 0.5;
                set = 1;
            }
        if (!set) {
            v[nzv] = 0.5;
            iv[nzv] = i;
            nzv++;
        }
        vcnt[i] = nzv;
    }
}

static void make_matrix(cg_matrix *m, int nonzer, double shift, int nthreads)
{
    int na = m->na, w = nonzer + 1, r0 = m->r0, nrows = m->r1 - m->r0;
    int *vcol = npb_alloc(sizeof(int) * (size_t)na * w);
    double *vval = npb_alloc(sizeof(double) * (size_t)na * w);
    int *vcnt = npb_alloc(sizeof(int) * (size_t)na);
    make_vectors(na, nonzer, vcol, vval, vcnt);

    /* size_i = ratio^i by repeated multiplication, as NPB */
    double *sz = npb_alloc(sizeof(double) * (size_t)na);
    double ratio = pow(CG_RCOND, 1.0 / (double)na), size = 1.0;
    for (int i = 0; i < na; i++) {
        sz[i] = size;
        size *= ratio;
    }

    /* contributions to each own row j: (vector i, position k) with vcol = j, i ascending */
    long *lstart = npb_alloc(sizeof(long) * (size_t)(nrows + 1));
    memset(lstart, 0, sizeof(long) * (size_t)(nrows + 1));
    for (int i = 0; i < na; i++)
        for (int k = 0; k < vcnt[i]; k++) {
            int j = vcol[(size_t)i * w + k];
            if (j >= r0 && j < m->r1)
                lstart[j - r0 + 1]++;
        }
    for (int j = 0; j < nrows; j++)
        lstart[j + 1] += lstart[j];
    long ntot = lstart[nrows];
    int *lvec = npb_alloc(sizeof(int) * (size_t)(ntot > 0 ? ntot : 1));
    int *lpos = npb_alloc(sizeof(int) * (size_t)(ntot > 0 ? ntot : 1));
    long *fill = npb_alloc(sizeof(long) * (size_t)(nrows + 1));
    memcpy(fill, lstart, sizeof(long) * (size_t)(nrows + 1));
    for (int i = 0; i < na; i++)
        for (int k = 0; k < vcnt[i]; k++) {
            int j = vcol[(size_t)i * w + k];
            if (j >= r0 && j < m->r1) {
                long f = fill[j - r0]++;
                lvec[f] = i;
                lpos[f] = k;
            }
        }
    free(fill);

    /* pass 1: number of distinct columns per row */
    m->rowstr = npb_alloc(sizeof(long) * (size_t)(nrows + 1));
    m->rowstr[0] = 0;
#pragma omp parallel num_threads(nthreads)
    {
        int *stamp = npb_alloc(sizeof(int) * (size_t)na);
        for (int c = 0; c < na; c++)
            stamp[c] = -1;
#pragma omp for schedule(static)
        for (int jl = 0; jl < nrows; jl++) {
            long n = 0;
            for (long l = lstart[jl]; l < lstart[jl + 1]; l++) {
                int i = lvec[l];
                for (int q = 0; q < vcnt[i]; q++) {
                    int c = vcol[(size_t)i * w + q];
                    if (stamp[c] != jl) {
                        stamp[c] = jl;
                        n++;
                    }
                }
            }
            m->rowstr[jl + 1] = n;
        }
        free(stamp);
    }
    for (int jl = 0; jl < nrows; jl++)
        m->rowstr[jl + 1] += m->rowstr[jl];
    long nnz = m->rowstr[nrows];
    m->colidx = npb_alloc(sizeof(int) * (size_t)(nnz > 0 ? nnz : 1));
    m->a = npb_alloc(sizeof(double) * (size_t)(nnz > 0 ? nnz : 1));

    /* pass 2: sorted columns, then values summed in the order of i (NPB "sparse").  Static
     * schedule, as matvec's: each thread first writes the rows it multiplies (first touch). */
#pragma omp parallel num_threads(nthreads)
    {
        int *stamp = npb_alloc(sizeof(int) * (size_t)na);
        long *where = npb_alloc(sizeof(long) * (size_t)na);
        for (int c = 0; c < na; c++)
            stamp[c] = -1;
#pragma omp for schedule(static)
        for (int jl = 0; jl < nrows; jl++) {
            int j = jl + r0;
            long base = m->rowstr[jl], n = 0;
            for (long l = lstart[jl]; l < lstart[jl + 1]; l++) {
                int i = lvec[l];
                for (int q = 0; q < vcnt[i]; q++) {
                    int c = vcol[(size_t)i * w + q];
                    if (stamp[c] != jl) {
                        stamp[c] = jl;
                        m->colidx[base + n++] = c;
                    }
                }
            }
            qsort(m->colidx + base, (size_t)n, sizeof(int), cmp_int);
            for (long e = 0; e < n; e++) {
                where[m->colidx[base + e]] = base + e;
                m->a[base + e] = 0.0;
            }
            for (long l = lstart[jl]; l < lstart[jl + 1]; l++) {
                int i = lvec[l], k = lpos[l];
                double scale = sz[i] * vval[(size_t)i * w + k];
                for (int q = 0; q < vcnt[i]; q++) {
                    int c = vcol[(size_t)i * w + q];
                    double va = vval[(size_t)i * w + q] * scale;
                    if (c == j && j == i)
                        va = va + CG_RCOND - shift;
                    m->a[where[c]] += va;
                }
            }
        }
        free(stamp);
        free(where);
    }
    free(lstart);
    free(lvec);
    free(lpos);
    free(vcol);
    free(vval);
    free(vcnt);
    free(sz);
}

/* y[j] = (A v)[j] for own rows: a worksharing loop (static schedule, NPB's "!$omp do"), to be
 * called by every thread of a parallel region (or outside one, by one thread). */
static void matvec(const cg_matrix *m, const double *v, double *y)
{
    int nrows = m->r1 - m->r0, r0 = m->r0;
    const long *rowstr = m->rowstr;
    const int *colidx = m->colidx;
    const double *a = m->a;
#pragma omp for schedule(static)
    for (int jl = 0; jl < nrows; jl++) {
        double s = 0.0;
        for (long k = rowstr[jl]; k < rowstr[jl + 1]; k++)
            s += a[k] * v[colidx[k]];
        y[r0 + jl] = s;
    }
}

/* Inside a parallel region: sum `n` values over the MPI ranks (one thread calls MPI, as
 * MPI_THREAD_FUNNELED asks) and complete vector `v` (NULL: none); the others wait.  With one
 * rank nothing is exchanged and no barrier is spent. */
static void team_exchange(const cg_matrix *m, double *buf, int n, double *v)
{
    if (m->nranks == 1)
        return;
#pragma omp master
    {
        if (n > 0)
            npb_sum_d(buf, n);
        if (v)
            npb_allgatherv_d(v, m->cnt, m->displ);
    }
#pragma omp barrier
}

/* 25 CG iterations on A z = x; returns ||x - A z||.  One parallel region with worksharing
 * loops, as NPB 3.4-OMP's conj_grad: the threads stay in the team across the iterations, and
 * the shared scalars are reset by the master thread between barriers (NPB's "!$omp master"). */
static double conj_grad(const cg_matrix *m, const double *x, double *z, double *p, double *q,
                        double *r)
{
    int r0 = m->r0, r1 = m->r1;
    double rho = 0.0, rho0 = 0.0, d = 0.0, sum = 0.0;
#pragma omp parallel default(shared)
    {
#pragma omp for schedule(static) reduction(+ : rho)
        for (int j = r0; j < r1; j++) {
            q[j] = 0.0;
            z[j] = 0.0;
            r[j] = x[j];
            p[j] = x[j];
            rho += x[j] * x[j];
        }
        team_exchange(m, &rho, 1, p);
        for (int it = 0; it < CG_CGITMAX; it++) {
#pragma omp master
            {
                rho0 = rho;
                d = 0.0;
                rho = 0.0;
            }
#pragma omp barrier
            matvec(m, p, q);
#pragma omp for schedule(static) reduction(+ : d)
            for (int j = r0; j < r1; j++)
                d += p[j] * q[j];
            team_exchange(m, &d, 1, NULL);
            double alpha = rho0 / d;
#pragma omp for schedule(static) reduction(+ : rho)
            for (int j = r0; j < r1; j++) {
                z[j] += alpha * p[j];
                r[j] -= alpha * q[j];
                rho += r[j] * r[j];
            }
            team_exchange(m, &rho, 1, NULL);
            double beta = rho / rho0;
#pragma omp for schedule(static)
            for (int j = r0; j < r1; j++)
                p[j] = r[j] + beta * p[j];
            team_exchange(m, NULL, 0, p);
        }
        team_exchange(m, NULL, 0, z);
        matvec(m, z, r);
#pragma omp for schedule(static) reduction(+ : sum)
        for (int j = r0; j < r1; j++) {
            double dlt = x[j] - r[j];
            sum += dlt * dlt;
        }
    }
    npb_sum_d(&sum, 1);
    return sqrt(sum);
}

/* One outer step: returns zeta and normalises x = z / ||z||. */
static double outer_step(const cg_matrix *m, double shift, double *x, double *z, double *p,
                         double *q, double *r, double *rnorm)
{
    int r0 = m->r0, r1 = m->r1;
    *rnorm = conj_grad(m, x, z, p, q, r);
    double n12[2] = {0.0, 0.0};
    double n1 = 0.0, n2 = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : n1, n2)
    for (int j = r0; j < r1; j++) {
        n1 += x[j] * z[j];
        n2 += z[j] * z[j];
    }
    n12[0] = n1;
    n12[1] = n2;
    npb_sum_d(n12, 2);
    double inv = 1.0 / sqrt(n12[1]);
#pragma omp parallel for schedule(static)
    for (int j = r0; j < r1; j++)
        x[j] = inv * z[j];
    return shift + 1.0 / n12[0];
}

const char *npb_cg(const npb_opts *o, npb_result *res)
{
    int ci = npb_class_index(o->cls);
    int na = cg_na[ci], nonzer = cg_nonzer[ci], niter = cg_niter[ci];
    double shift = cg_shift[ci];
    int rank = npb_rank(), P = npb_nranks();
    if (na < P)
        return "CG: more MPI ranks than matrix rows";

    cg_matrix m;
    m.na = na;
    m.nranks = P;
    m.r0 = (int)((long)na * rank / P);
    m.r1 = (int)((long)na * (rank + 1) / P);
    m.cnt = npb_alloc(sizeof(long) * 2 * (size_t)P);
    m.displ = m.cnt + P;
    for (int q = 0; q < P; q++) {
        m.displ[q] = (long)na * q / P;
        m.cnt[q] = (long)na * (q + 1) / P - m.displ[q];
    }
    make_matrix(&m, nonzer, shift, o->threads);
    if (o->perturb) {
        for (int jl = 0; jl < m.r1 - m.r0; jl++)
            for (long k = m.rowstr[jl]; k < m.rowstr[jl + 1]; k++)
                if (m.colidx[k] == jl + m.r0)
                    m.a[k] += 1e-6;
    }

    /* The five vectors in one block, vector v starting v x 576 bytes (9 cache lines) past a
     * 4 KiB boundary: page-aligned vectors would share their low 12 address bits element by
     * element, and the loads of one and the stores to another in the same loop (z += alpha p,
     * r -= alpha q, p = r + beta p) then stall on the false dependence CPUs assume between
     * them ("4K aliasing"); NPB's vectors come from malloc's heap at unrelated offsets. */
    size_t stride = (sizeof(double) * (size_t)(na + 1) + 4095) / 4096 * 4096 + 576;
    char *vecs = npb_alloc(5 * stride);
    double *x = (double *)vecs, *z = (double *)(vecs + stride), *p = (double *)(vecs + 2 * stride),
           *q = (double *)(vecs + 3 * stride), *r = (double *)(vecs + 4 * stride);
#pragma omp parallel for schedule(static) /* first touch as the loops that use them */
    for (int j = 0; j <= na; j++) {
        x[j] = 1.0;
        z[j] = p[j] = q[j] = r[j] = 0.0;
    }
    double rnorm, zeta;
    (void)outer_step(&m, shift, x, z, p, q, r, &rnorm); /* untimed, as NPB */
#pragma omp parallel for schedule(static)
    for (int j = 0; j <= na; j++)
        x[j] = 1.0;

    npb_barrier();
    double t0 = npb_wtime();
    zeta = 0.0;
    for (int it = 1; it <= niter; it++) {
        zeta = outer_step(&m, shift, x, z, p, q, r, &rnorm);
        if (rank == 0) {
            if (it == 1)
                printf("\n   iteration           ||r||                 zeta\n");
            printf("    %5d       %20.14e%20.13f\n", it, rnorm, zeta);
        }
    }
    double t = npb_wtime() - t0;
    npb_max_d(&t, 1);

    double err = fabs(zeta - cg_zeta[ci]) / cg_zeta[ci];
    int ok = err <= 1e-10; /* false for NaN */
    if (rank == 0)
        printf("\n Zeta is %20.13e, reference %20.13e, relative error %.3e (tolerance 1e-10)\n",
               zeta, cg_zeta[ci], err);

    double nz = nonzer;
    res->name = "CG";
    res->n1 = na;
    res->niter = niter;
    res->time = t;
    res->mops = 1e-6 * 2 * niter * (double)na *
                (3.0 + nz * (nz + 1) + 25.0 * (5.0 + nz * (nz + 1)) + 3.0) / t;
    res->verified = ok;
    res->rel_err = err;
    res->optype = "floating point";
    free(vecs);
    free(m.rowstr);
    free(m.colidx);
    free(m.a);
    free(m.cnt);
    return NULL;
}
