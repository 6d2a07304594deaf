/*
 * is.c - NPB IS (integer sort), RNR-94-007 section 2.5 / NAS-95-020, NPB 3.x rules.
 *
 * Keys: TOTAL_KEYS keys in [0, MAX_KEY), key_i = floor(MAX_KEY/4 * (r_{4i+1} + r_{4i+2}
 * + r_{4i+3} + r_{4i+4})) from the NPB generator (seed 314159265, a = 5^13), i.e.
 * four consecutive uniforms per key (an approximately Gaussian distribution).
 *
 * Ranking (10 timed iterations, after one untimed warm-up with iteration 1):
 * iteration `it` first sets key[it] = it and key[it + 10] = MAX_KEY - it, then
 * computes for every key value k the number of keys <= k (the rank pointer).
 * Partial verification, inside each iteration: for the 5 test indices, with
 * k = key[test_index[i]] read before ranking, the rank of key k-1 must equal
 * test_rank[i] shifted by the iteration number according to the class-specific
 * rule of NPB 3.x (table below).  Full verification (untimed): every key is
 * placed at the position its rank pointer gives (decrementing pointers); all
 * slots must be filled exactly once and the result sorted.  Success needs
 * 5 * 10 + 1 = 51 passed checks.  Mop/s = 10 * TOTAL_KEYS / t / 1e6.
 *
 * Algorithm (own design following NPB's bucket idea): keys are grouped by
 * bucket (key >> (log2 MAX_KEY - log2 NUM_BUCKETS)) with a per-thread counting
 * pass and a scatter pass.  With MPI, every rank holds TOTAL_KEYS/P keys;
 * global bucket sizes are summed (allreduce), contiguous bucket ranges are
 * assigned to ranks so each receives about TOTAL_KEYS/P keys, the keys are
 * exchanged with an all-to-all(v) (NPB's MPI IS does the same), and every rank
 * ranks the keys of its buckets.  Rank pointers are global because the
 * number of keys in all lower buckets is known from the bucket sizes.
 *
 * -X: after key generation one of the largest keys (at an index that is not a
 * test index and not one of the keys overwritten per iteration) is set to 0,
 * so the rank of every test key above it grows by one and partial checks fail.
 */
#include "npb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IS_ITER 10
#define IS_NTEST 5
#define IS_SEED 314159265ULL

typedef int32_t key_t;
/* Bucket counters and slot offsets: 32-bit, as NPB's INT_TYPE for classes up to C (every
 * count is below TOTAL_KEYS <= 2^27, offsets below a rank's key count); 64-bit ones widen
 * the counting, scatter and ranking loops' memory traffic (issue 22: 0.89 of NPB). */
typedef uint32_t count_t;

static const int is_log_keys[5] = {16, 20, 23, 25, 27};
static const int is_log_max[5] = {11, 16, 19, 21, 23};
static const int is_log_buckets[5] = {9, 10, 10, 10, 10};

static const long is_test_index[5][IS_NTEST] = {
    {48427, 17148, 23627, 62548, 4431},
    {357773, 934767, 875723, 898999, 404505},
    {2112377, 662041, 5336171, 3642833, 4250760},
    {41869, 812306, 5102857, 18232239, 26860214},
    {44172927, 72999161, 74326391, 129606274, 21736814},
};
static const long is_test_rank[5][IS_NTEST] = {
    {0, 18, 346, 64917, 65463},
    {1249, 11698, 1039987, 1043896, 1048018},
    {104, 17523, 123928, 8288932, 8388264},
    {33422937, 10244, 59149, 33135281, 99},
    {61147, 882988, 266290, 133997595, 133525895},
};

/* Expected rank of key k-1 for test i in iteration it (NPB 3.x partial verification):
 *   S: i <= 2: +it, else -it        W: i < 2: +(it-2), else -it
 *   A: i <= 2: +(it-1), else -(it-1) B: i in {1,2,4}: +it, else -it
 *   C: i <= 2: +it, else -it */
static long expected_rank(int ci, int i, int it)
{
    long r = is_test_rank[ci][i];
    switch ("SWABC"[ci]) {
    case 'S': return i <= 2 ? r + it : r - it;
    case 'W': return i < 2 ? r + (it - 2) : r - it;
    case 'A': return i <= 2 ? r + (it - 1) : r - (it - 1);
    case 'B': return (i == 1 || i == 2 || i == 4) ? r + it : r - it;
    default: return i <= 2 ? r + it : r - it;
    }
}

typedef struct {
    int ci, shift, nb, nthreads, rank, nranks;
    long total, maxkey, nloc, off; /* off: global index of the first local key */
    key_t *keys;                   /* nloc local keys */
    key_t *grouped1;               /* local keys grouped by bucket */
    key_t *recv, *grouped;         /* received keys (MPI), regrouped by bucket */
    long cap;                      /* capacity of recv / grouped */
    long nmine;                    /* keys this rank ranks */
    key_t *ptr;                    /* MAX_KEY rank pointers (own key range valid) */
    count_t *cnt, *offs;           /* per-thread bucket counts / offsets: nthreads x nb */
    long long *lb, *gb;            /* local / global bucket sizes */
    long *gstart;                  /* global number of keys in buckets below b */
    int *bfirst;                   /* rank r owns buckets [bfirst[r], bfirst[r+1]) */
    long *scount, *sdispl, *rcount, *rdispl;
    long long passed;
} is_state;

/* Group n keys of `in` (all in buckets [blo, bhi)) by bucket into `out`, stable
 * within a thread's chunk.  Returns per-bucket totals in tot[0 .. bhi-blo).
 * The per-thread counters and offsets are rows of nb indexed by the bucket number itself
 * (only [blo, bhi) used), and keys (never negative) are shifted as unsigned: the counting
 * and scatter loops run at a few cycles per key, and a "- blo" and a sign extension per key
 * made counting 12 % slower than NPB's same loop (issue 22). */
static void bucket_group(is_state *s, const key_t *in, long n, key_t *out, int blo, int bhi,
                         long long *tot)
{
    int nb = s->nb, shift = s->shift;
    count_t *cnt = s->cnt, *offs = s->offs;
    int used = 1;
#pragma omp parallel num_threads(s->nthreads)
    {
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        nt = omp_get_num_threads();
#endif
#pragma omp single
        used = nt;
        long i0 = n * t / nt, i1 = n * (t + 1) / nt;
        count_t *c = cnt + (size_t)t * nb;
        memset(c + blo, 0, sizeof(count_t) * (size_t)(bhi - blo));
        for (long i = i0; i < i1; i++)
            c[(uint32_t)in[i] >> shift]++;
#pragma omp barrier
        /* this thread's first slot in bucket b: keys of lower buckets, then of
         * lower-numbered threads in bucket b */
        count_t *o = offs + (size_t)t * nb, run = 0;
        for (int b = blo; b < bhi; b++) {
            count_t before = 0, all = 0;
            for (int u = 0; u < nt; u++) {
                count_t cu = cnt[(size_t)u * nb + b];
                if (u < t)
                    before += cu;
                all += cu;
            }
            o[b] = run + before;
            run += all;
        }
        for (long i = i0; i < i1; i++) {
            key_t k = in[i];
            out[o[(uint32_t)k >> shift]++] = k;
        }
    }
    for (int b = blo; b < bhi; b++) {
        long long sum = 0;
        for (int u = 0; u < used; u++)
            sum += cnt[(size_t)u * nb + b];
        tot[b - blo] = sum;
    }
}

static void ensure_cap(is_state *s, long n)
{
    if (n <= s->cap)
        return;
    free(s->recv);
    free(s->grouped);
    s->cap = n + n / 8 + 1024;
    s->recv = npb_alloc(sizeof(key_t) * (size_t)s->cap);
    s->grouped = npb_alloc(sizeof(key_t) * (size_t)s->cap);
}

/* Owner of key value k: the rank whose bucket range contains it. */
static int key_owner(const is_state *s, long k)
{
    int b = (int)(k >> s->shift);
    for (int r = 0; r < s->nranks; r++)
        if (b >= s->bfirst[r] && b < s->bfirst[r + 1])
            return r;
    return -1;
}

static void rank_keys(is_state *s, int it, int count_checks)
{
    int P = s->nranks, me = s->rank, nb = s->nb;
    /* 1. the two keys NPB modifies in every iteration (global indices it, it+10) */
    if (it >= s->off && it < s->off + s->nloc)
        s->keys[it - s->off] = it;
    if (it + IS_ITER >= s->off && it + IS_ITER < s->off + s->nloc)
        s->keys[it + IS_ITER - s->off] = (key_t)(s->maxkey - it);
    /* 2. the test keys, read before ranking (owner contributes, others add 0) */
    long long vals[IS_NTEST] = {0};
    for (int i = 0; i < IS_NTEST; i++) {
        long g = is_test_index[s->ci][i];
        if (g >= s->off && g < s->off + s->nloc)
            vals[i] = s->keys[g - s->off];
    }
    npb_sum_l(vals, IS_NTEST);

    /* 3. local keys grouped by bucket; global bucket sizes */
    bucket_group(s, s->keys, s->nloc, s->grouped1, 0, nb, s->lb);
    memcpy(s->gb, s->lb, sizeof(long long) * (size_t)nb);
    npb_sum_l(s->gb, nb);
    long run = 0;
    for (int b = 0; b < nb; b++) {
        s->gstart[b] = run;
        run += (long)s->gb[b];
    }

    /* 4. contiguous bucket ranges, about total/P keys per rank */
    int r = 0;
    long cum = 0;
    s->bfirst[0] = 0;
    for (int b = 0; b < nb; b++) {
        cum += (long)s->gb[b];
        while (r < P - 1 && cum >= s->total / P * (r + 1)) {
            s->bfirst[++r] = b + 1;
        }
    }
    while (r < P)
        s->bfirst[++r] = nb;
    int blo = s->bfirst[me], bhi = s->bfirst[me + 1];

    const key_t *mine;
    if (P == 1) {
        mine = s->grouped1;
        s->nmine = s->nloc;
    } else {
        /* 5. exchange: keys of rank q's buckets go to q */
        long long sc[P], rc[P];
        long d = 0;
        for (int q = 0; q < P; q++) {
            long c = 0;
            for (int b = s->bfirst[q]; b < s->bfirst[q + 1]; b++)
                c += (long)s->lb[b];
            s->scount[q] = c;
            s->sdispl[q] = d;
            sc[q] = c;
            d += c;
        }
        npb_alltoall(sc, rc, sizeof(long long));
        long n = 0;
        for (int q = 0; q < P; q++) {
            s->rcount[q] = (long)rc[q];
            s->rdispl[q] = n;
            n += (long)rc[q];
        }
        ensure_cap(s, n);
        npb_alltoallv_i32(s->grouped1, s->scount, s->sdispl, s->recv, s->rcount, s->rdispl);
        /* 6. received runs are grouped per sender: regroup by bucket */
        long long *tmp = s->lb; /* local counts are no longer needed */
        if (bhi > blo)
            bucket_group(s, s->recv, n, s->grouped, blo, bhi, tmp);
        mine = s->grouped;
        s->nmine = n;
    }

    /* 7. rank pointers of the own key range, bucket by bucket in parallel:
     *    ptr[k] = number of keys (all ranks) with value <= k */
    key_t *ptr = s->ptr;
    long seg0 = s->gstart[blo];
    int shift = s->shift;
    long bkeys = 1L << shift;
#pragma omp parallel for schedule(dynamic) num_threads(s->nthreads)
    for (int b = blo; b < bhi; b++) {
        long k0 = (long)b * bkeys, k1 = k0 + bkeys;
        for (long k = k0; k < k1; k++)
            ptr[k] = 0;
        const key_t *seg = mine + (s->gstart[b] - seg0);
        long n = (long)s->gb[b];
        for (long i = 0; i < n; i++)
            ptr[seg[i]]++;
        ptr[k0] += (key_t)s->gstart[b];
        for (long k = k0 + 1; k < k1; k++)
            ptr[k] += ptr[k - 1];
    }

    /* 8. partial verification by the owner of key k-1 */
    if (count_checks) {
        for (int i = 0; i < IS_NTEST; i++) {
            long k = (long)vals[i];
            if (k > 0 && k <= s->total - 1 && key_owner(s, k - 1) == me) {
                if ((long)ptr[k - 1] == expected_rank(s->ci, i, it))
                    s->passed++;
                else
                    printf(" Failed partial verification: iteration %d, test key %d (rank %d)\n", it, i,
                           me);
            }
        }
    }
}

/* Untimed: place every key at --ptr[key]; every slot must be hit once, sorted. */
static int full_verify(is_state *s)
{
    int me = s->rank, P = s->nranks;
    int blo = s->bfirst[me], bhi = s->bfirst[me + 1];
    const key_t *mine = P == 1 ? s->grouped1 : s->grouped;
    long n = s->nmine, base = blo < s->nb ? s->gstart[blo] : s->total;
    key_t *sorted = npb_alloc(sizeof(key_t) * (size_t)(n > 0 ? n : 1));
    for (long i = 0; i < n; i++)
        sorted[i] = -1;
    long bad = 0;
    long klo = (long)blo << s->shift, khi = (long)bhi << s->shift;
    for (long i = 0; i < n; i++) {
        key_t k = mine[i];
        if (k < klo || k >= khi) {
            bad++;
            continue;
        }
        long pos = (long)(--s->ptr[k]) - base;
        if (pos < 0 || pos >= n || sorted[pos] != -1)
            bad++;
        else
            sorted[pos] = k;
    }
    for (long i = 0; i < n; i++)
        if (sorted[i] < 0 || (i > 0 && sorted[i - 1] > sorted[i]))
            bad++;
    /* across ranks: counts add up and rank q's keys are not above rank q+1's */
    long long info[3 * 64 + 2];
    int np = P <= 64 ? P : 64;
    memset(info, 0, sizeof info);
    info[0] = bad;
    info[1] = n;
    if (me < np && n > 0) {
        info[2 + 3 * me] = 1;
        info[3 + 3 * me] = sorted[0];
        info[4 + 3 * me] = sorted[n - 1];
    }
    npb_sum_l(info, 2 + 3 * np);
    long long last = -1;
    for (int q = 0; q < np; q++) {
        if (!info[2 + 3 * q])
            continue;
        if (info[3 + 3 * q] < last)
            info[0]++;
        last = info[4 + 3 * q];
    }
    free(sorted);
    if (info[0] != 0 || info[1] != s->total) {
        if (me == 0)
            printf(" Full_verify: %lld keys out of place, %lld keys in total\n", info[0], info[1]);
        return 0;
    }
    return 1;
}

const char *npb_is(const npb_opts *o, npb_result *res)
{
    is_state st, *s = &st;
    memset(s, 0, sizeof st);
    s->ci = npb_class_index(o->cls);
    s->rank = npb_rank();
    s->nranks = npb_nranks();
    s->nthreads = o->threads;
    s->total = 1L << is_log_keys[s->ci];
    s->maxkey = 1L << is_log_max[s->ci];
    s->nb = 1 << is_log_buckets[s->ci];
    s->shift = is_log_max[s->ci] - is_log_buckets[s->ci];
    int P = s->nranks;
    if (s->total / P < 64 || s->nb < P)
        return "IS: too many MPI ranks for this class";
    s->nloc = s->total / P;
    s->off = s->nloc * s->rank;

    s->keys = npb_alloc(sizeof(key_t) * (size_t)s->nloc);
    s->grouped1 = npb_alloc(sizeof(key_t) * (size_t)s->nloc);
    s->ptr = npb_alloc(sizeof(key_t) * (size_t)s->maxkey);
    s->cnt = npb_alloc(sizeof(count_t) * (size_t)s->nb * (size_t)s->nthreads);
    s->offs = npb_alloc(sizeof(count_t) * (size_t)s->nb * (size_t)s->nthreads);
    s->lb = npb_alloc(sizeof(long long) * (size_t)s->nb);
    s->gb = npb_alloc(sizeof(long long) * (size_t)s->nb);
    s->gstart = npb_alloc(sizeof(long) * (size_t)s->nb);
    s->bfirst = npb_alloc(sizeof(int) * (size_t)(P + 1));
    s->scount = npb_alloc(sizeof(long) * 4 * (size_t)P);
    s->sdispl = s->scount + P;
    s->rcount = s->scount + 2 * P;
    s->rdispl = s->scount + 3 * P;
    if (P > 1)
        ensure_cap(s, s->nloc + s->nloc / 4);

    /* key generation: key i uses r_{4i+1..4i+4}; thread chunks jump ahead */
    double kscale = (double)(s->maxkey / 4);
    key_t *keys = s->keys;
    long nloc = s->nloc, off = s->off;
#pragma omp parallel num_threads(s->nthreads)
    {
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        nt = omp_get_num_threads();
#endif
        long i0 = nloc * t / nt, i1 = nloc * (t + 1) / nt;
        uint64_t x = npb_lcg_mul(npb_pow46(NPB_A, 4 * (uint64_t)(off + i0)), IS_SEED);
        for (long i = i0; i < i1; i++) {
            double v = npb_randlc(&x, NPB_A);
            v += npb_randlc(&x, NPB_A);
            v += npb_randlc(&x, NPB_A);
            v += npb_randlc(&x, NPB_A);
            keys[i] = (key_t)(kscale * v);
        }
    }
    if (o->perturb && s->rank == 0) {
        long best = -1;
        for (long i = 2 * IS_ITER + 1; i < nloc; i++) {
            int is_test = 0;
            for (int j = 0; j < IS_NTEST; j++)
                if (is_test_index[s->ci][j] == i)
                    is_test = 1;
            if (!is_test && (best < 0 || keys[i] > keys[best]))
                best = i;
        }
        keys[best] = 0;
    }

    rank_keys(s, 1, 0); /* untimed warm-up, as NPB */
    npb_barrier();
    double t0 = npb_wtime();
    for (int it = 1; it <= IS_ITER; it++)
        rank_keys(s, it, 1);
    double t = npb_wtime() - t0;
    npb_max_d(&t, 1);

    long long passed = s->passed;
    npb_sum_l(&passed, 1);
    if (full_verify(s))
        passed++;
    int ok = passed == 5 * IS_ITER + 1;
    if (s->rank == 0)
        printf("\n IS: %lld of %d checks passed (5 partial per iteration + full sort)\n", passed,
               5 * IS_ITER + 1);

    res->name = "IS";
    res->n1 = (int)s->total;
    res->niter = IS_ITER;
    res->time = t;
    res->mops = 1e-6 * (double)s->total * IS_ITER / t;
    res->verified = ok;
    res->rel_err = (double)(5 * IS_ITER + 1 - passed) / (5 * IS_ITER + 1); /* failed share */
    res->optype = "keys ranked";

    free(s->keys);
    free(s->grouped1);
    free(s->ptr);
    free(s->cnt);
    free(s->offs);
    free(s->lb);
    free(s->gb);
    free(s->gstart);
    free(s->bfirst);
    free(s->scount);
    free(s->recv);
    free(s->grouped);
    return NULL;
}
