/*
 * vhpc-osu - MPI micro-benchmarks after the OSU Micro-Benchmarks methodology,
 * plus the Presta Com statistics used by seed 001 (average/maximum bandwidth
 * over repeated tests and OpTime).  One binary, the test chosen with -b.
 *
 * Message sizes: 0 B (latency tests) or 1 B, then doubling up to MAX
 * (default 4 MiB point-to-point, 1 MiB collectives); -s gives an explicit
 * list.  Sizes up to LARGE (8 KiB) use ITERS / WARMUP, larger ones
 * ITERS_LARGE / WARMUP_LARGE.
 *
 * latency    2 ranks, blocking MPI_Send/MPI_Recv ping-pong;
 *            lat_<size> = time / (2 * iters) in microseconds.
 * multi-lat  2*P ranks, P pairs (rank i with rank i+P) ping-pong at once;
 *            lat_<size> = mean over pairs, max_<size> = max over pairs (us).
 * bw         2 ranks; rank 0 posts WINDOW MPI_Isend + MPI_Waitall, then
 *            waits for a 1-byte ack; rank 1 posts WINDOW MPI_Irecv +
 *            MPI_Waitall and sends the ack.  One test = ITERS timed windows
 *            after the warm-up windows; MB/s = size/1e6 * iters * window / t
 *            on rank 0's clock.
 * bibw       2 ranks, both post WINDOW MPI_Irecv and WINDOW MPI_Isend, then
 *            MPI_Waitall; MB/s counts both directions (x2).
 *            For bw and bibw every size is measured TESTS times (Presta Com):
 *            bw_avg_<size> / bw_max_<size> = mean / maximum MB/s over tests;
 *            optime_<size> = mean over tests of the longest per-operation
 *            time (us): per test, each rank's elapsed time divided by the
 *            test's operations (iters * window messages), maximum over ranks.
 * barrier, allreduce, bcast, alltoall
 *            any rank count; per iteration the call is timed and followed by
 *            an MPI_Barrier (not timed; barrier: none); per-rank mean over iterations;
 *            avg_<size> / min_<size> / max_<size> = mean / min / max of the
 *            per-rank means in us (barrier: avg, min, max).  allreduce sums
 *            MPI_FLOAT (size/4 elements, sizes multiples of 4, from 4 B),
 *            bcast from root 0, alltoall sends <size> bytes to every rank.
 *
 * Timing (as OSU 7.4): every timed iteration is timed on its own, MPI_Wtime
 * before and after it, and the per-iteration times are summed (latency and
 * multi-lat: one round trip on the initiating rank; bw and bibw: one window,
 * on every rank; collectives: one call, then an untimed MPI_Barrier, except
 * barrier itself, whose calls follow each other as in osu_barrier).  Timing
 * the whole loop once instead leaves out one clock read per iteration and
 * the loop's own gaps, which makes an 8-byte shared-memory latency look about
 * 12 % lower than osu_latency's (issue 22).
 *
 * Data check: every received buffer of the last iteration is compared with
 * the sender's pattern (allreduce: the exact sum of rank+1); any mismatch
 * gives valid=0 and exit 3.
 */
#include "common.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_DATA 1
#define TAG_ACK 2
#define MAX_SIZES 64
#define DEFAULT_LARGE 8192L

enum test { T_LATENCY, T_MULTILAT, T_BW, T_BIBW, T_BARRIER, T_ALLREDUCE, T_BCAST, T_ALLTOALL };

static const char *const test_names[] = {"latency", "multi-lat", "bw", "bibw",
                                         "barrier", "allreduce", "bcast", "alltoall"};

static const char usage[] =
    "usage: mpirun -np R vhpc-osu -b TEST [-m MAX] [-n MIN] [-s LIST] [-i ITERS] [-I ITERS_LARGE]\n"
    "                             [-w WARMUP] [-u WARMUP_LARGE] [-L LARGE] [-W WINDOW] [-T TESTS] [-h]\n"
    "MPI micro-benchmarks, OSU methodology (Presta Com statistics for bw/bibw).\n"
    "  -b TEST          latency | multi-lat | bw | bibw | barrier | allreduce | bcast | alltoall\n"
    "                   (latency, bw, bibw: 2 ranks; multi-lat: an even number of ranks)\n"
    "  -m MAX           largest message in bytes (default 4194304; collectives 1048576)\n"
    "  -n MIN           smallest message (default 0 for latency tests, 4 allreduce, else 1);\n"
    "                   sizes double from MIN (0 is followed by 1)\n"
    "  -s LIST          explicit comma-separated sizes in bytes (overrides -m and -n)\n"
    "  -i ITERS         timed iterations for sizes <= LARGE (default: latency 10000,\n"
    "                   bw/bibw 100 windows, collectives 1000)\n"
    "  -I ITERS_LARGE   timed iterations above LARGE (default: 1000, 20, 100)\n"
    "  -w WARMUP        untimed iterations first, sizes <= LARGE (default: 100, 10, 100)\n"
    "  -u WARMUP_LARGE  untimed iterations first, sizes > LARGE (default: 10, 2, 10)\n"
    "  -L LARGE         threshold between small and large messages (default 8192)\n"
    "  -W WINDOW        messages in flight per bw/bibw window (default 64)\n"
    "  -T TESTS         bw/bibw: repeated tests per size (default 1)\n"
    "  -h               this help\n"
    "Result keys (rank 0): latency: lat_<size> (us); multi-lat: lat_<size>, max_<size> (us), pairs;\n"
    "bw/bibw: bw_avg_<size>, bw_max_<size> (MB/s, 1e6 B/s), optime_<size> (us), tests, window;\n"
    "collectives: avg_<size>, min_<size>, max_<size> (us; barrier: avg, min, max);\n"
    "always: test, ranks, nsizes, valid.\n";

static void finalize_hook(void)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    vhpc_report_placement(rank);
    MPI_Finalize();
}

static int rank, nranks;

/* --- result line: common.c's, one write(2) per line (MPICH's Hydra forwards each write as it
   comes, so a line printed in pieces could take another rank's line in between) --- */

static void res_begin(void) { vhpc_result_begin(); }
static void res_word(const char *k, const char *v) { vhpc_result_word(k, v); }
static void res_int(const char *k, long long v) { vhpc_result_int(k, v); }
static void res_num(const char *prefix, long size, double v)
{
    char key[64];
    if (size < 0)
        snprintf(key, sizeof key, "%s", prefix);
    else
        snprintf(key, sizeof key, "%s_%ld", prefix, size);
    vhpc_result_num(key, v);
}
static void res_end(void) { vhpc_result_end(); }

/* Data patterns: vhpc_msg_fill / vhpc_msg_check (common.c, shared with vhpc-pingpong). */

/* --- options ---------------------------------------------------------- */

struct opts {
    enum test test;
    long sizes[MAX_SIZES];
    int nsizes;
    long iters, iters_large, warmup, warmup_large, large, window, tests;
};

static long iters_for(const struct opts *o, long size) { return size <= o->large ? o->iters : o->iters_large; }
static long warmup_for(const struct opts *o, long size) { return size <= o->large ? o->warmup : o->warmup_large; }

static void parse_list(struct opts *o, const char *arg)
{
    char *copy = strdup(arg), *save = NULL;
    if (!copy)
        vhpc_fatal("out of memory");
    o->nsizes = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == MAX_SIZES)
            vhpc_usage_error("option -s takes at most %d sizes", MAX_SIZES);
        o->sizes[o->nsizes++] = vhpc_parse_long(tok, 's', 0, 1L << 30);
    }
    free(copy);
    if (o->nsizes == 0)
        vhpc_usage_error("option -s needs at least one size, e.g. -s 8,1024");
}

static void doubling(struct opts *o, long min, long max)
{
    if (max < min)
        vhpc_usage_error("largest size -m %ld is below the smallest size -n %ld", max, min);
    o->nsizes = 0;
    for (long s = min; s <= max && o->nsizes < MAX_SIZES; s = s ? 2 * s : 1)
        o->sizes[o->nsizes++] = s;
}

/* --- point-to-point --------------------------------------------------- */

/* Ping-pong between me and peer (initiator sends first); returns one-way us, the
 * initiator's round trips timed one by one and summed (OSU 7.4). */
static double pingpong(unsigned char *sbuf, unsigned char *rbuf, long size, long iters,
                       long warmup, int peer, int initiator, MPI_Comm comm)
{
    double total = 0.0;
    for (long i = 0; i < warmup + iters; i++) {
        if (initiator) {
            double t0 = MPI_Wtime();
            MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, comm);
            MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            double t1 = MPI_Wtime();
            if (i >= warmup)
                total += t1 - t0;
        } else {
            MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, comm);
        }
    }
    return total * 1e6 / (2.0 * (double)iters);
}

static int run_latency(const struct opts *o, unsigned char *sbuf, unsigned char *rbuf,
                       double *lat, double *latmax)
{
    int ok = 1;
    int pairs = nranks / 2;
    int sender = rank < pairs;
    int peer = sender ? rank + pairs : rank - pairs;
    for (int k = 0; k < o->nsizes; k++) {
        long size = o->sizes[k];
        memset(rbuf, 0, (size_t)size);
        MPI_Barrier(MPI_COMM_WORLD);
        double us = pingpong(sbuf, rbuf, size, iters_for(o, size), warmup_for(o, size), peer,
                             sender, MPI_COMM_WORLD);
        ok &= vhpc_msg_check(rbuf, (size_t)size, peer);
        double mine = sender ? us : 0.0, sum = 0.0, max = 0.0;
        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        lat[k] = sum / pairs;
        latmax[k] = max;
    }
    return ok;
}

/* One bw/bibw test of `iters` windows; returns this rank's seconds, each window timed on
 * its own and summed (OSU 7.4). */
static double bw_windows(const struct opts *o, int bidir, unsigned char *sbuf, unsigned char *rbuf,
                         long size, long iters, MPI_Request *req)
{
    const int peer = 1 - rank;
    const int w = (int)o->window;
    unsigned char ack = 0;
    double total = 0.0;
    for (long i = 0; i < iters; i++) {
        double t0 = MPI_Wtime();
        if (bidir) {
            for (int j = 0; j < w; j++)
                MPI_Irecv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &req[j]);
            for (int j = 0; j < w; j++)
                MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &req[w + j]);
            MPI_Waitall(2 * w, req, MPI_STATUSES_IGNORE);
        } else if (rank == 0) {
            for (int j = 0; j < w; j++)
                MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &req[j]);
            MPI_Waitall(w, req, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int j = 0; j < w; j++)
                MPI_Irecv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &req[j]);
            MPI_Waitall(w, req, MPI_STATUSES_IGNORE);
            MPI_Send(&ack, 1, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
        }
        total += MPI_Wtime() - t0;
    }
    return total;
}

static int run_bw(const struct opts *o, int bidir, unsigned char *sbuf, unsigned char *rbuf,
                  double *bw_avg, double *bw_max, double *optime)
{
    MPI_Request *req = malloc(2 * (size_t)o->window * sizeof *req);
    if (!req)
        vhpc_fatal("cannot allocate %ld MPI requests", 2 * o->window);
    int ok = 1;
    const int peer = 1 - rank;
    for (int k = 0; k < o->nsizes; k++) {
        long size = o->sizes[k], iters = iters_for(o, size);
        double ops = (double)iters * (double)o->window;
        memset(rbuf, 0, (size_t)size);
        MPI_Barrier(MPI_COMM_WORLD);
        bw_windows(o, bidir, sbuf, rbuf, size, warmup_for(o, size), req);
        double sum_bw = 0.0, max_bw = 0.0, sum_op = 0.0;
        for (long t = 0; t < o->tests; t++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double mine = bw_windows(o, bidir, sbuf, rbuf, size, iters, req);
            double t_root = mine, longest = 0.0;
            MPI_Bcast(&t_root, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            MPI_Allreduce(&mine, &longest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            double mbps = (double)size / 1e6 * ops * (bidir ? 2.0 : 1.0) / t_root;
            sum_bw += mbps;
            if (mbps > max_bw)
                max_bw = mbps;
            sum_op += longest * 1e6 / ops;
        }
        if (bidir || rank == 1)
            ok &= vhpc_msg_check(rbuf, (size_t)size, peer);
        bw_avg[k] = sum_bw / (double)o->tests;
        bw_max[k] = max_bw;
        optime[k] = sum_op / (double)o->tests;
    }
    free(req);
    return ok;
}

/* --- collectives ------------------------------------------------------ */

static int coll_once(enum test t, unsigned char *sbuf, unsigned char *rbuf, long size)
{
    switch (t) {
    case T_BARRIER:
        return MPI_Barrier(MPI_COMM_WORLD);
    case T_ALLREDUCE:
        return MPI_Allreduce(sbuf, rbuf, (int)(size / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case T_BCAST:
        return MPI_Bcast(rank == 0 ? sbuf : rbuf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
    case T_ALLTOALL:
        return MPI_Alltoall(sbuf, (int)size, MPI_BYTE, rbuf, (int)size, MPI_BYTE, MPI_COMM_WORLD);
    default:
        return MPI_ERR_OTHER;
    }
}

static void coll_prepare(enum test t, unsigned char *sbuf, unsigned char *rbuf, long size)
{
    if (t == T_ALLREDUCE) {
        float *f = (float *)(void *)sbuf;
        for (long i = 0; i < size / 4; i++)
            f[i] = (float)(rank + 1);
        memset(rbuf, 0, (size_t)size);
    } else if (t == T_BCAST) {
        if (rank == 0)
            vhpc_msg_fill(sbuf, (size_t)size, 0);
        else
            memset(rbuf, 0, (size_t)size);
    } else if (t == T_ALLTOALL) {
        /* block j goes to rank j: pattern of (rank, destination) */
        for (int j = 0; j < nranks; j++)
            vhpc_msg_fill(sbuf + (size_t)j * (size_t)size, (size_t)size, rank * nranks + j);
        memset(rbuf, 0, (size_t)size * (size_t)nranks);
    }
}

static int coll_check(enum test t, const unsigned char *rbuf, long size)
{
    if (t == T_ALLREDUCE) {
        const float *f = (const float *)(const void *)rbuf;
        float want = (float)nranks * (float)(nranks + 1) / 2.0f;
        for (long i = 0; i < size / 4; i++)
            if (f[i] != want)
                return 0;
    } else if (t == T_BCAST) {
        return rank == 0 || vhpc_msg_check(rbuf, (size_t)size, 0);
    } else if (t == T_ALLTOALL) {
        for (int j = 0; j < nranks; j++)
            if (!vhpc_msg_check(rbuf + (size_t)j * (size_t)size, (size_t)size, j * nranks + rank))
                return 0;
    }
    return 1;
}

static int run_coll(const struct opts *o, unsigned char *sbuf, unsigned char *rbuf, double *avg,
                    double *min, double *max)
{
    int ok = 1;
    for (int k = 0; k < o->nsizes; k++) {
        long size = o->sizes[k], iters = iters_for(o, size), warmup = warmup_for(o, size);
        coll_prepare(o->test, sbuf, rbuf, size);
        MPI_Barrier(MPI_COMM_WORLD);
        double total = 0.0;
        for (long i = 0; i < warmup + iters; i++) {
            double t0 = MPI_Wtime();
            coll_once(o->test, sbuf, rbuf, size);
            double dt = MPI_Wtime() - t0;
            if (i >= warmup)
                total += dt;
            if (o->test != T_BARRIER) /* osu_barrier times its calls back to back */
                MPI_Barrier(MPI_COMM_WORLD);
        }
        ok &= coll_check(o->test, rbuf, size);
        double mean = total * 1e6 / (double)iters, sum = 0.0;
        MPI_Reduce(&mean, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mean, &min[k], 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mean, &max[k], 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        avg[k] = sum / nranks;
    }
    return ok;
}

/* --- main ------------------------------------------------------------- */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    vhpc_set_exit_hook(finalize_hook);
    vhpc_set_quiet(rank != 0);

    struct opts o = {.test = T_LATENCY, .large = DEFAULT_LARGE, .window = 64, .tests = 1};
    const char *list = NULL, *test = NULL;
    long max = -1, min = -1, iters = -1, iters_large = -1, warmup = -1, warmup_large = -1;
    int c;
    while ((c = vhpc_getopt(argc, argv, "b:m:n:s:i:I:w:u:L:W:T:", usage)) != -1) {
        switch (c) {
        case 'b': test = optarg; break;
        case 'm': max = vhpc_parse_long(optarg, 'm', 0, 1L << 30); break;
        case 'n': min = vhpc_parse_long(optarg, 'n', 0, 1L << 30); break;
        case 's': list = optarg; break;
        case 'i': iters = vhpc_parse_long(optarg, 'i', 1, 1L << 30); break;
        case 'I': iters_large = vhpc_parse_long(optarg, 'I', 1, 1L << 30); break;
        case 'w': warmup = vhpc_parse_long(optarg, 'w', 0, 1L << 30); break;
        case 'u': warmup_large = vhpc_parse_long(optarg, 'u', 0, 1L << 30); break;
        case 'L': o.large = vhpc_parse_long(optarg, 'L', 0, 1L << 30); break;
        case 'W': o.window = vhpc_parse_long(optarg, 'W', 1, 4096); break;
        case 'T': o.tests = vhpc_parse_long(optarg, 'T', 1, 100000); break;
        }
    }
    if (!test)
        vhpc_usage_error("option -b TEST is required: latency, multi-lat, bw, bibw, barrier, "
                         "allreduce, bcast or alltoall");
    int found = 0;
    for (int t = 0; t < (int)(sizeof test_names / sizeof *test_names); t++)
        if (strcmp(test, test_names[t]) == 0) {
            o.test = (enum test)t;
            found = 1;
        }
    if (!found)
        vhpc_usage_error("unknown test '%s' for -b: choose latency, multi-lat, bw, bibw, barrier, "
                         "allreduce, bcast or alltoall", test);

    int p2p = o.test == T_LATENCY || o.test == T_BW || o.test == T_BIBW;
    int coll = o.test >= T_BARRIER;
    if (p2p && nranks != 2)
        vhpc_usage_error("-b %s needs exactly 2 MPI ranks, got %d; run it with mpirun -np 2",
                         test, nranks);
    if (o.test == T_MULTILAT && (nranks < 2 || nranks % 2))
        vhpc_usage_error("-b multi-lat needs an even number of MPI ranks (2 per pair), got %d",
                         nranks);
    if (coll && nranks < 2)
        vhpc_usage_error("-b %s needs at least 2 MPI ranks, got %d", test, nranks);

    /* OSU defaults per test family */
    int lat = o.test == T_LATENCY || o.test == T_MULTILAT;
    int bw = o.test == T_BW || o.test == T_BIBW;
    o.iters = iters >= 0 ? iters : lat ? 10000 : bw ? 100 : 1000;
    o.iters_large = iters_large >= 0 ? iters_large : lat ? 1000 : bw ? 20 : 100;
    o.warmup = warmup >= 0 ? warmup : lat ? 100 : bw ? 10 : 100;
    o.warmup_large = warmup_large >= 0 ? warmup_large : lat ? 10 : bw ? 2 : 10;
    if (o.test == T_BARRIER) {
        o.nsizes = 1;
        o.sizes[0] = 0;
    } else if (list) {
        parse_list(&o, list);
    } else {
        long dmin = lat ? 0 : o.test == T_ALLREDUCE ? 4 : 1;
        doubling(&o, min >= 0 ? min : dmin, max >= 0 ? max : coll ? 1L << 20 : 1L << 22);
    }
    long maxsize = 0;
    for (int k = 0; k < o.nsizes; k++) {
        long s = o.sizes[k];
        if (s == 0 && (bw || o.test == T_ALLREDUCE || o.test == T_BCAST || o.test == T_ALLTOALL))
            vhpc_usage_error("-b %s needs message sizes of at least 1 byte (got 0)", test);
        if (o.test == T_ALLREDUCE && s % 4)
            vhpc_usage_error("-b allreduce sums floats: sizes must be multiples of 4 bytes, got %ld", s);
        for (int j = 0; j < k; j++)
            if (o.sizes[j] == s)
                vhpc_usage_error("size %ld is listed twice", s);
        if (s > maxsize)
            maxsize = s;
    }

    size_t bufsize = (size_t)maxsize * (o.test == T_ALLTOALL ? (size_t)nranks : 1u);
    unsigned char *sbuf = vhpc_alloc(bufsize);
    unsigned char *rbuf = vhpc_alloc(bufsize);
    if (!coll)
        vhpc_msg_fill(sbuf, bufsize, rank);
    double *r1 = calloc((size_t)o.nsizes, sizeof *r1);
    double *r2 = calloc((size_t)o.nsizes, sizeof *r2);
    double *r3 = calloc((size_t)o.nsizes, sizeof *r3);
    if (!r1 || !r2 || !r3)
        vhpc_fatal("out of memory");

    int ok;
    if (lat)
        ok = run_latency(&o, sbuf, rbuf, r1, r2);
    else if (bw)
        ok = run_bw(&o, o.test == T_BIBW, sbuf, rbuf, r1, r2, r3);
    else
        ok = run_coll(&o, sbuf, rbuf, r1, r2, r3);
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

    if (rank == 0) {
        printf("# vhpc-osu %s, %d ranks\n", test, nranks);
        for (int k = 0; k < o.nsizes; k++) {
            long s = o.sizes[k];
            if (lat)
                printf("%10ld B  %12.3f us  (max over pairs %.3f us)\n", s, r1[k], r2[k]);
            else if (bw)
                printf("%10ld B  avg %12.2f MB/s  max %12.2f MB/s  optime %10.3f us\n", s, r1[k],
                       r2[k], r3[k]);
            else
                printf("%10ld B  avg %12.3f us  min %12.3f us  max %12.3f us\n", s, r1[k], r2[k],
                       r3[k]);
        }
        printf("data check: %s\n", all_ok ? "passed" : "FAILED");
        res_begin();
        res_word("test", test);
        res_int("ranks", nranks);
        res_int("nsizes", o.nsizes);
        for (int k = 0; k < o.nsizes; k++) {
            long s = o.sizes[k];
            if (lat) {
                res_num("lat", s, r1[k]);
                if (o.test == T_MULTILAT)
                    res_num("max", s, r2[k]);
            } else if (bw) {
                res_num("bw_avg", s, r1[k]);
                res_num("bw_max", s, r2[k]);
                res_num("optime", s, r3[k]);
            } else {
                long key = o.test == T_BARRIER ? -1 : s;
                res_num("avg", key, r1[k]);
                res_num("min", key, r2[k]);
                res_num("max", key, r3[k]);
            }
        }
        if (o.test == T_MULTILAT)
            res_int("pairs", nranks / 2);
        if (bw) {
            res_int("tests", o.tests);
            res_int("window", o.window);
        }
        res_int("iters", o.iters);
        res_int("iters_large", o.iters_large);
        res_int("valid", all_ok);
        res_end();
    }
    free(r1);
    free(r2);
    free(r3);
    free(sbuf);
    free(rbuf);
    vhpc_exit(all_ok ? VHPC_EXIT_OK : VHPC_EXIT_INVALID);
}
