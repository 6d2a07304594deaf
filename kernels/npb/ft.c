/*
 * ft.c - NPB FT (3-D FFT PDE solver), RNR-94-007 section 2.7 / benchmark 7, NPB 3.x.
 *
 * Solves du/dt = alpha laplace(u) (alpha = 1e-6) on a periodic NX x NY x NZ grid
 * spectrally:
 *   u0(x,y,z)  = complex random numbers: element (x, y, z) (x fastest) gets
 *                (r_{2e+1}, r_{2e+2}) with e = x + NX (y + NY z), from the NPB
 *                generator (seed 314159265, a = 5^13)
 *   V          = forward 3-D DFT of u0
 *   iteration t = 1..niter:
 *       V(k) <- V(k) * exp(-4 alpha pi^2 |kbar|^2)    (cumulative, i.e. time t)
 *       W      = inverse 3-D DFT of V (unnormalised)
 *       checksum_t = sum_{j=1..1024} W(j mod NX, 3j mod NY, 5j mod NZ) / (NX NY NZ)
 * with kbar_i = i for i < n/2 and i - n otherwise in each dimension.  Forward
 * and inverse transforms have opposite signs and are not normalised (NPB).
 * Verification: |checksum_t - ref_t| / |ref_t| <= 1e-12 for every iteration.
 * Mop/s = 1e-6 NTOTAL (14.8157 + 7.19641 ln NTOTAL
 *                      + (5.23518 + 7.21113 ln NTOTAL) niter) / t.
 * Timed (as NPB): the exponent table, the initial condition, the FFT set-up, the
 * forward transform and all iterations with their checksums; everything is run
 * once untimed first.
 *
 * Our FFT: radix-2 Stockham autosort FFT (no bit reversal) applied to blocks of
 * 16 lines at once (the line data gathered into a contiguous buffer, so the
 * butterfly loops run over unit-stride memory).  NPB gathers 32 lines; with
 * the padded rows below, 16 measured 2-3 % faster here (class A, one thread:
 * the four buffers of a block, 4 x 256 x 16 doubles, stay in L2), 64 10 % slower.
 * Layout (as NPB's x(d1+1, d2, d3)): every x row holds NX + 1 complex numbers,
 * the last one padding, so rows, planes and the lines gathered across them do
 * not lie a power of two apart (a stride of 2^k bytes maps every gathered
 * element to the same cache sets).  The pad element stays 0 and is never read
 * into a transform or a checksum.
 * MPI: 1-D slab decomposition.  Physical space: each rank owns NZ/P z-planes
 * (x, y transforms local).  A global transpose (all-to-all) gives each rank NY/P
 * y-planes with all z (layout (y, z, x)), where the z transform, the evolution
 * and the inverse z transform run; a second all-to-all returns to z-slabs.
 * With one rank the z transform runs in place, without transpose.
 *
 * -X: 1e-6 is added to the real part of u0 at (1, 3, 5), the first checksum point.
 */
#include "npb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FT_SEED 314159265ULL
#define FT_ALPHA 1.0e-6
#ifndef FT_BLOCK
#define FT_BLOCK 16 /* lines per gathered block (NPB's fftblock is 32; see the header) */
#endif
#define FT_MAXITER 20
/* Doubles between the four scratch arrays of a block, past their n x FT_BLOCK: 576 bytes, so
 * that the arrays start 9 cache lines apart modulo 4 KiB.  Laid end to end they would be a
 * multiple of 4 KiB apart, and a butterfly's stores into one pair and the next loads from the
 * other would share their low 12 address bits ("4K aliasing", a false store-to-load
 * dependence).  NPB pads its scratch lines to fftblock + 2 complex numbers. */
#define FT_SCRATCH_PAD 72

static const int ft_nx[5] = {64, 128, 256, 512, 512};
static const int ft_ny[5] = {64, 128, 256, 256, 512};
static const int ft_nz[5] = {64, 32, 128, 256, 512};
static const int ft_niter[5] = {6, 6, 6, 20, 20};

/* Reference checksums (real, imaginary) per iteration, NPB 3.x FT verify. */
static const double ft_ref[5][FT_MAXITER][2] = {
    {{5.546087004964e+02, 4.845363331978e+02}, {5.546385409189e+02, 4.865304269511e+02},
     {5.546148406171e+02, 4.883910722336e+02}, {5.545423607415e+02, 4.901273169046e+02},
     {5.544255039624e+02, 4.917475857993e+02}, {5.542683411902e+02, 4.932597244941e+02}},
    {{5.673612178944e+02, 5.293246849175e+02}, {5.631436885271e+02, 5.282149986629e+02},
     {5.594024089970e+02, 5.270996558037e+02}, {5.560698047020e+02, 5.260027904925e+02},
     {5.530898991250e+02, 5.249400845633e+02}, {5.504159734538e+02, 5.239212247086e+02}},
    {{5.046735008193e+02, 5.114047905510e+02}, {5.059412319734e+02, 5.098809666433e+02},
     {5.069376896287e+02, 5.098144042213e+02}, {5.077892868474e+02, 5.101336130759e+02},
     {5.085233095391e+02, 5.104914655194e+02}, {5.091487099959e+02, 5.107917842803e+02}},
    {{5.177643571579e+02, 5.077803458597e+02}, {5.154521291263e+02, 5.088249431599e+02},
     {5.146409228649e+02, 5.096208912659e+02}, {5.142378756213e+02, 5.101023387619e+02},
     {5.139626667737e+02, 5.103976610617e+02}, {5.137423460082e+02, 5.105948019802e+02},
     {5.135547056878e+02, 5.107404165783e+02}, {5.133910925466e+02, 5.108576573661e+02},
     {5.132470705390e+02, 5.109577278523e+02}, {5.131197729984e+02, 5.110460304483e+02},
     {5.130070319283e+02, 5.111252433800e+02}, {5.129070537032e+02, 5.111968077718e+02},
     {5.128182883502e+02, 5.112616233064e+02}, {5.127393733383e+02, 5.113203605551e+02},
     {5.126691062020e+02, 5.113735928093e+02}, {5.126064276004e+02, 5.114218460548e+02},
     {5.125504076570e+02, 5.114656139760e+02}, {5.125002331720e+02, 5.115053595966e+02},
     {5.124551951846e+02, 5.115415130407e+02}, {5.124146770029e+02, 5.115744692211e+02}},
    {{5.195078707457e+02, 5.149019699238e+02}, {5.155422171134e+02, 5.127578201997e+02},
     {5.144678022222e+02, 5.122251847514e+02}, {5.140150594328e+02, 5.121090289018e+02},
     {5.137550426810e+02, 5.121143685824e+02}, {5.135811056728e+02, 5.121496764568e+02},
     {5.134569343165e+02, 5.121870921893e+02}, {5.133651975661e+02, 5.122193250322e+02},
     {5.132955192805e+02, 5.122454735794e+02}, {5.132410471738e+02, 5.122663649603e+02},
     {5.131971141679e+02, 5.122830879827e+02}, {5.131605205716e+02, 5.122965869718e+02},
     {5.131290734194e+02, 5.123075927445e+02}, {5.131012720314e+02, 5.123166486553e+02},
     {5.130760908195e+02, 5.123241541685e+02}, {5.130528295923e+02, 5.123304037599e+02},
     {5.130310107773e+02, 5.123356167976e+02}, {5.130103090133e+02, 5.123399592211e+02},
     {5.129905029333e+02, 5.123435588985e+02}, {5.129714421109e+02, 5.123465164008e+02}},
};

/* Roots of unity for a length-n transform: cos/sin(2 pi k / n), k < n/2. */
typedef struct {
    int n;
    double *c, *s;
} ft_plan;

typedef struct {
    int nx, ny, nz, P, rank;
    int nxp;     /* row length in complex elements: nx + 1 (padding, as NPB) */
    int nzl, z0; /* physical layout: planes z0 .. z0+nzl-1, index (zl, y, x) */
    int nyl, y0; /* spectral layout for P > 1: index (yl, z, x) */
    size_t nloc; /* complex elements per rank, padding included */
    ft_plan px, py, pz;
    double *u0, *u1, *tw, *sbuf, *rbuf;
} ft_state;

static void plan_init(ft_plan *p, int n)
{
    p->n = n;
    for (int k = 0; k < n / 2; k++) {
        double t = 2.0 * M_PI * (double)k / (double)n;
        p->c[k] = cos(t);
        p->s[k] = sin(t);
    }
}

/*
 * B lines of length n at once: element j of line b is re/im[j*B + b].
 * Stockham radix-2 (decimation in frequency): stage with half-length h and
 * stride s maps x[q + s p], x[q + s (p+h)] to y[q + 2 s p] = a + b and
 * y[q + s (2p+1)] = (a - b) w^p, w = exp(-+2 pi i / (2h)), natural order output.
 * dir = +1: forward (exp(-i...)), -1: inverse (exp(+i...)).  Returns the
 * buffer pair holding the result (the data or the scratch pair).
 */
static int fft_lines(const ft_plan *p, int B, double *re, double *im, double *tre, double *tim, int dir)
{
    int n = p->n, which = 0;
    double *ir = re, *ii = im, *or_ = tre, *oi = tim;
    for (long len = n, s = 1; len > 1; len /= 2, s *= 2) {
        long h = len / 2, sb = s * B;
        for (long q = 0; q < h; q++) {
            double wr = p->c[q * s], wi = -dir * p->s[q * s];
            const double *ar = ir + q * sb, *ai = ii + q * sb;
            const double *br = ir + (q + h) * sb, *bi = ii + (q + h) * sb;
            double *y0r = or_ + 2 * q * sb, *y0i = oi + 2 * q * sb;
            double *y1r = y0r + sb, *y1i = y0i + sb;
            for (long t = 0; t < sb; t++) {
                double xr = ar[t], xi = ai[t], zr = br[t], zi = bi[t];
                y0r[t] = xr + zr;
                y0i[t] = xi + zi;
                double dr = xr - zr, di = xi - zi;
                y1r[t] = dr * wr - di * wi;
                y1i[t] = dr * wi + di * wr;
            }
        }
        double *tr = ir, *ti = ii;
        ir = or_;
        ii = oi;
        or_ = tr;
        oi = ti;
        which ^= 1;
    }
    return which;
}

/* The calling thread's scratch block of at least `doubles` doubles, allocated on its first use
 * and kept for the program's life (NPB's y1, y2 are private arrays on each thread's stack):
 * allocating it in every transform costs page faults each time, as a block of 128 KiB or more
 * is mapped and unmapped by malloc. */
static double *ft_scratch(size_t doubles)
{
    static _Thread_local double *block;
    static _Thread_local size_t size;
    if (doubles > size) {
        free(block);
        block = npb_alloc(sizeof(double) * doubles);
        size = doubles;
    }
    return block;
}

/*
 * Transform all lines of one dimension of a local 3-D complex array (interleaved
 * re/im).  Lines: for o < nouter, b < ninner: start o*ostride + b*istride, element
 * j at start + j*estride (complex units).  Reads src, writes dst (may be equal).
 */
static void fft_dim(const ft_plan *p, const double *src, double *dst, long nouter, long ostride,
                    long ninner, long istride, long estride, int dir)
{
    int n = p->n;
    const int B = FT_BLOCK;
    long nblk = ninner / B, ntask = nouter * nblk;
#pragma omp parallel
    {
        size_t part = (size_t)n * B + FT_SCRATCH_PAD;
        double *re = ft_scratch(4 * part), *im = re + part, *tre = im + part, *tim = tre + part;
#pragma omp for schedule(static)
        for (long task = 0; task < ntask; task++) {
            long o = task / nblk, b0 = (task % nblk) * B;
            long base = o * ostride + b0 * istride;
            for (long j = 0; j < n; j++) {
                const double *sp = src + 2 * (base + j * estride);
                for (int b = 0; b < B; b++) {
                    re[j * B + b] = sp[2 * b * istride];
                    im[j * B + b] = sp[2 * b * istride + 1];
                }
            }
            int w = fft_lines(p, B, re, im, tre, tim, dir);
            const double *rr = w ? tre : re, *ri = w ? tim : im;
            for (long j = 0; j < n; j++) {
                double *dp = dst + 2 * (base + j * estride);
                for (int b = 0; b < B; b++) {
                    dp[2 * b * istride] = rr[j * B + b];
                    dp[2 * b * istride + 1] = ri[j * B + b];
                }
            }
        }
    }
}

/* z-slabs (zl, y, x) of a -> y-slabs (yl, z, x) of b, through the all-to-all. */
static void transpose_zy(ft_state *s, const double *a, double *b)
{
    int P = s->P, nx = s->nx, nxp = s->nxp, nyl = s->nyl, nzl = s->nzl;
    size_t blk = (size_t)nzl * nyl * nx; /* complex elements per rank pair (rows unpadded) */
#pragma omp parallel for collapse(2) schedule(static)
    for (int q = 0; q < P; q++)
        for (int zl = 0; zl < nzl; zl++)
            for (int yl = 0; yl < nyl; yl++)
                memcpy(s->sbuf + 2 * (q * blk + ((size_t)zl * nyl + yl) * nx),
                       a + 2 * (((size_t)zl * s->ny + (size_t)q * nyl + yl) * nxp), sizeof(double) * 2 * nx);
    npb_alltoall(s->sbuf, s->rbuf, sizeof(double) * 2 * blk);
#pragma omp parallel for collapse(2) schedule(static)
    for (int q = 0; q < P; q++)
        for (int zl = 0; zl < nzl; zl++)
            for (int yl = 0; yl < nyl; yl++)
                memcpy(b + 2 * (((size_t)yl * s->nz + (size_t)q * nzl + zl) * nxp),
                       s->rbuf + 2 * (q * blk + ((size_t)zl * nyl + yl) * nx), sizeof(double) * 2 * nx);
}

/* y-slabs (yl, z, x) of b -> z-slabs (zl, y, x) of a. */
static void transpose_yz(ft_state *s, const double *b, double *a)
{
    int P = s->P, nx = s->nx, nxp = s->nxp, nyl = s->nyl, nzl = s->nzl;
    size_t blk = (size_t)nzl * nyl * nx;
#pragma omp parallel for collapse(2) schedule(static)
    for (int q = 0; q < P; q++)
        for (int yl = 0; yl < nyl; yl++)
            for (int zl = 0; zl < nzl; zl++)
                memcpy(s->sbuf + 2 * (q * blk + ((size_t)yl * nzl + zl) * nx),
                       b + 2 * (((size_t)yl * s->nz + (size_t)q * nzl + zl) * nxp), sizeof(double) * 2 * nx);
    npb_alltoall(s->sbuf, s->rbuf, sizeof(double) * 2 * blk);
#pragma omp parallel for collapse(2) schedule(static)
    for (int q = 0; q < P; q++)
        for (int yl = 0; yl < nyl; yl++)
            for (int zl = 0; zl < nzl; zl++)
                memcpy(a + 2 * (((size_t)zl * s->ny + (size_t)q * nyl + yl) * nxp),
                       s->rbuf + 2 * (q * blk + ((size_t)yl * nzl + zl) * nx), sizeof(double) * 2 * nx);
}

/* forward 3-D FFT: physical src (destroyed) -> spectral dst */
static void fft_forward(ft_state *s, double *src, double *dst)
{
    long nx = s->nx, nxp = s->nxp, ny = s->ny, nz = s->nz;
    fft_dim(&s->px, src, src, s->nzl, nxp * ny, ny, nxp, 1, 1); /* x lines over (zl, y) */
    fft_dim(&s->py, src, src, s->nzl, nxp * ny, nx, 1, nxp, 1); /* y lines over (zl, x) */
    if (s->P == 1) {
        fft_dim(&s->pz, src, dst, ny, nxp, nx, 1, nxp * ny, 1); /* z lines over (y, x) */
    } else {
        transpose_zy(s, src, dst);
        fft_dim(&s->pz, dst, dst, s->nyl, nz * nxp, nx, 1, nxp, 1); /* z lines over (yl, x) */
    }
}

/* inverse 3-D FFT in place: spectral -> physical */
static void fft_inverse(ft_state *s, double *u)
{
    long nx = s->nx, nxp = s->nxp, ny = s->ny, nz = s->nz;
    if (s->P == 1) {
        fft_dim(&s->pz, u, u, ny, nxp, nx, 1, nxp * ny, -1);
    } else {
        fft_dim(&s->pz, u, u, s->nyl, nz * nxp, nx, 1, nxp, -1);
        transpose_yz(s, u, u);
    }
    fft_dim(&s->py, u, u, s->nzl, nxp * ny, nx, 1, nxp, -1);
    fft_dim(&s->px, u, u, s->nzl, nxp * ny, ny, nxp, 1, -1);
}

/* exp(-4 alpha pi^2 |kbar|^2) in the spectral layout */
static void compute_twiddle(ft_state *s)
{
    double ap = -4.0 * FT_ALPHA * M_PI * M_PI;
    int nx = s->nx, ny = s->ny, nz = s->nz;
    long n_outer = s->P == 1 ? nz : s->nyl, n_mid = s->P == 1 ? ny : nz;
#pragma omp parallel for collapse(2) schedule(static)
    for (long o = 0; o < n_outer; o++)
        for (long m = 0; m < n_mid; m++) {
            long y = s->P == 1 ? m : s->y0 + o, z = s->P == 1 ? o : m;
            long ky = (y + ny / 2) % ny - ny / 2, kz = (z + nz / 2) % nz - nz / 2;
            double *t = s->tw + (o * n_mid + m) * s->nxp;
            for (long x = 0; x < nx; x++) {
                long kx = (x + nx / 2) % nx - nx / 2;
                t[x] = exp(ap * (double)(kx * kx + ky * ky + kz * kz));
            }
            t[nx] = 0.0; /* the pad element */
        }
}

/* u0 row by row: the random stream runs over x, y, z without the pad elements. */
static void initial_conditions(ft_state *s, double *u, int perturb)
{
    size_t plane = (size_t)s->nx * s->ny, row = (size_t)s->nxp;
#pragma omp parallel for schedule(static)
    for (int zl = 0; zl < s->nzl; zl++) {
        uint64_t x = npb_lcg_mul(npb_pow46(NPB_A, 2 * plane * (uint64_t)(s->z0 + zl)), FT_SEED);
        for (int y = 0; y < s->ny; y++)
            npb_vranlc(2L * s->nx, &x, NPB_A, u + 2 * row * ((size_t)zl * s->ny + y));
    }
    if (perturb && 5 % s->nz >= s->z0 && 5 % s->nz < s->z0 + s->nzl)
        u[2 * (((size_t)(5 % s->nz - s->z0) * s->ny + 3 % s->ny) * row + 1 % s->nx)] += 1e-6;
}

static void evolve(ft_state *s)
{
    size_t n = s->nloc;
    double *u0 = s->u0, *u1 = s->u1, *tw = s->tw;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        u0[2 * i] *= tw[i];
        u0[2 * i + 1] *= tw[i];
        u1[2 * i] = u0[2 * i];
        u1[2 * i + 1] = u0[2 * i + 1];
    }
}

static void checksum(ft_state *s, const double *u, double out[2])
{
    double sum[2] = {0.0, 0.0};
    for (int j = 1; j <= 1024; j++) {
        int x = j % s->nx, y = (3 * j) % s->ny, z = (5 * j) % s->nz;
        if (z >= s->z0 && z < s->z0 + s->nzl) {
            size_t k = ((size_t)(z - s->z0) * s->ny + y) * s->nxp + x;
            sum[0] += u[2 * k];
            sum[1] += u[2 * k + 1];
        }
    }
    npb_sum_d(sum, 2);
    double ntotal = (double)s->nx * s->ny * s->nz;
    out[0] = sum[0] / ntotal;
    out[1] = sum[1] / ntotal;
}

const char *npb_ft(const npb_opts *o, npb_result *res)
{
    int ci = npb_class_index(o->cls);
    ft_state st, *s = &st;
    memset(s, 0, sizeof st);
    s->nx = ft_nx[ci];
    s->ny = ft_ny[ci];
    s->nz = ft_nz[ci];
    s->P = npb_nranks();
    s->rank = npb_rank();
    int niter = ft_niter[ci];
    if (s->nz % s->P || s->ny % s->P)
        return "FT: the number of MPI ranks must divide both ny and nz of the class";
    s->nzl = s->nz / s->P;
    s->z0 = s->rank * s->nzl;
    s->nyl = s->ny / s->P;
    s->y0 = s->rank * s->nyl;
    s->nxp = s->nx + 1;
    s->nloc = (size_t)s->nxp * s->ny * s->nzl;
    s->u0 = npb_alloc(sizeof(double) * 2 * s->nloc);
    s->u1 = npb_alloc(sizeof(double) * 2 * s->nloc);
    s->tw = npb_alloc(sizeof(double) * s->nloc);
    if (s->P > 1) {
        s->sbuf = npb_alloc(sizeof(double) * 2 * s->nloc);
        s->rbuf = npb_alloc(sizeof(double) * 2 * s->nloc);
    }
    ft_plan *plans[3] = {&s->px, &s->py, &s->pz};
    int dims[3] = {s->nx, s->ny, s->nz};
    for (int d = 0; d < 3; d++) {
        plans[d]->c = npb_alloc(sizeof(double) * (size_t)dims[d]);
        plans[d]->s = plans[d]->c + dims[d] / 2;
    }
    /* touch everything once, untimed, by the threads and in the static schedule of the loops
     * that use it (NPB's init_ui) */
    double *u0 = s->u0, *u1 = s->u1;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < 2 * s->nloc; i++)
        u0[i] = u1[i] = 0.0;
    compute_twiddle(s);
    initial_conditions(s, s->u1, o->perturb);
    for (int d = 0; d < 3; d++)
        plan_init(plans[d], dims[d]);
    fft_forward(s, s->u1, s->u0);

    double sums[FT_MAXITER][2];
    npb_barrier();
    double t0 = npb_wtime();
    compute_twiddle(s);
    initial_conditions(s, s->u1, o->perturb);
    for (int d = 0; d < 3; d++)
        plan_init(plans[d], dims[d]);
    fft_forward(s, s->u1, s->u0);
    for (int it = 0; it < niter; it++) {
        evolve(s);
        fft_inverse(s, s->u1);
        checksum(s, s->u1, sums[it]);
    }
    double t = npb_wtime() - t0;
    npb_max_d(&t, 1);

    int ok = 1;
    double worst = 0.0;
    for (int it = 0; it < niter; it++) {
        const double *r = ft_ref[ci][it];
        double err = hypot(sums[it][0] - r[0], sums[it][1] - r[1]) / hypot(r[0], r[1]);
        if (!(err <= 1e-12))
            ok = 0;
        if (err > worst || isnan(err))
            worst = err;
        if (s->rank == 0)
            printf(" T = %5d     Checksum = %22.12e %22.12e   rel. error %.2e\n", it + 1, sums[it][0],
                   sums[it][1], err);
    }
    if (s->rank == 0)
        printf(" Verification %s (tolerance 1e-12)\n", ok ? "passed" : "FAILED");

    double ntotal = (double)s->nx * s->ny * s->nz;
    res->name = "FT";
    res->n1 = s->nx;
    res->n2 = s->ny;
    res->n3 = s->nz;
    res->niter = niter;
    res->time = t;
    res->mops = 1e-6 * ntotal *
                (14.8157 + 7.19641 * log(ntotal) + (5.23518 + 7.21113 * log(ntotal)) * niter) / t;
    res->verified = ok;
    res->rel_err = worst;
    res->optype = "floating point";
    free(s->u0);
    free(s->u1);
    free(s->tw);
    free(s->sbuf);
    free(s->rbuf);
    for (int d = 0; d < 3; d++)
        free(plans[d]->c);
    return NULL;
}
