/*
 * vhpc-pingpong - MPI point-to-point latency and bandwidth between 2 ranks,
 * OSU Micro-Benchmarks methodology.
 *
 * Latency: blocking MPI_Send/MPI_Recv ping-pong; after WARMUP untimed round
 * trips, ITERS round trips are timed one by one on rank 0 and summed, as OSU 7.4
 * does (vhpc-osu.c); latency = time / (2 * ITERS).
 * Bandwidth: rank 0 posts WINDOW MPI_Isend of BW_SIZE bytes, MPI_Waitall,
 * then waits for a 1-byte ack from rank 1 (which posted WINDOW MPI_Irecv +
 * MPI_Waitall); after BW_WARMUP untimed windows, BW_ITERS windows are timed;
 * MB/s = BW_SIZE/1e6 * BW_ITERS * WINDOW / time (rank 0's clock).
 * As in OSU, all sends of a window share one send buffer and all receives
 * of a window share one receive buffer (the messages are identical), so the
 * figure is comparable with osu_bw.
 *
 * Data check: each rank fills its send buffer with a rank-specific pattern;
 * after each test the receiver checks the last message it received.
 */
#include "common.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BW_WARMUP 2 /* untimed windows before the bandwidth measurement */
#define TAG_LAT 1
#define TAG_BW 2
#define TAG_ACK 3

static const char usage[] =
    "usage: mpirun -np 2 vhpc-pingpong [-s LAT_SIZE] [-S BW_SIZE] [-i ITERS] [-w WARMUP]\n"
    "                                  [-b BW_ITERS] [-W WINDOW] [-h]\n"
    "MPI ping-pong latency and windowed bandwidth between exactly 2 ranks (OSU method).\n"
    "  -s LAT_SIZE  latency message size in bytes (default 8)\n"
    "  -S BW_SIZE   bandwidth message size in bytes (default 1048576)\n"
    "  -i ITERS     timed latency round trips (default 1000)\n"
    "  -w WARMUP    untimed latency round trips first (default 100)\n"
    "  -b BW_ITERS  timed bandwidth windows (default 20; 2 untimed windows first)\n"
    "  -W WINDOW    non-blocking sends per window (default 64)\n"
    "  -h           this help\n"
    "Result keys (rank 0): latency_us (one-way, microseconds), bandwidth_MBps (1e6 B/s),\n"
    "lat_size, bw_size, iters, warmup, bw_iters, window, valid.\n";

static void finalize_hook(void)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    vhpc_report_placement(rank);
    MPI_Finalize();
}


int main(int argc, char **argv)
{
    int rank, nranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    vhpc_set_exit_hook(finalize_hook);
    vhpc_set_quiet(rank != 0); /* rank 0 alone prints usage and errors */

    long lat_size = 8, bw_size = 1048576, iters = 1000, warmup = 100, bw_iters = 20, window = 64;
    int c;
    while ((c = vhpc_getopt(argc, argv, "s:S:i:w:b:W:", usage)) != -1) {
        switch (c) {
        case 's': lat_size = vhpc_parse_long(optarg, 's', 0, 1L << 30); break;
        case 'S': bw_size = vhpc_parse_long(optarg, 'S', 1, 1L << 30); break;
        case 'i': iters = vhpc_parse_long(optarg, 'i', 1, 1L << 30); break;
        case 'w': warmup = vhpc_parse_long(optarg, 'w', 0, 1L << 30); break;
        case 'b': bw_iters = vhpc_parse_long(optarg, 'b', 1, 1L << 30); break;
        case 'W': window = vhpc_parse_long(optarg, 'W', 1, 4096); break;
        }
    }
    if (nranks != 2)
        vhpc_usage_error("vhpc-pingpong needs exactly 2 MPI ranks, got %d; run it with mpirun -np 2",
                         nranks);

    const int peer = 1 - rank;
    size_t bufsize = (size_t)(lat_size > bw_size ? lat_size : bw_size);
    unsigned char *sbuf = vhpc_alloc(bufsize);
    unsigned char *rbuf = vhpc_alloc(bufsize);
    MPI_Request *req = malloc((size_t)window * sizeof *req);
    if (!req)
        vhpc_fatal("cannot allocate %ld MPI requests", window);
    vhpc_msg_fill(sbuf, bufsize, rank);
    int ok = 1;

    /* --- latency --- */
    memset(rbuf, 0, bufsize);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = 0.0, lat_total = 0.0;
    for (long i = 0; i < warmup + iters; i++) {
        if (rank == 0) {
            t0 = vhpc_now();
            MPI_Send(sbuf, (int)lat_size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)lat_size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (i >= warmup)
                lat_total += vhpc_now() - t0;
        } else {
            MPI_Recv(rbuf, (int)lat_size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, (int)lat_size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
        }
    }
    double lat_us = lat_total * 1e6 / (2.0 * (double)iters);
    ok &= vhpc_msg_check(rbuf, (size_t)lat_size, peer);

    /* --- bandwidth --- */
    memset(rbuf, 0, bufsize);
    unsigned char ack = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double bw_time = 0.0;
    for (long i = 0; i < BW_WARMUP + bw_iters; i++) {
        t0 = vhpc_now();
        if (rank == 0) {
            for (long w = 0; w < window; w++)
                MPI_Isend(sbuf, (int)bw_size, MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD, &req[w]);
            MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (long w = 0; w < window; w++)
                MPI_Irecv(rbuf, (int)bw_size, MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD, &req[w]);
            MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
            MPI_Send(&ack, 1, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
        }
        if (i >= BW_WARMUP) /* each window timed on its own and summed (OSU 7.4) */
            bw_time += vhpc_now() - t0;
    }
    double bw_mbps = (double)bw_size / 1e6 * (double)bw_iters * (double)window / bw_time;
    if (rank == 1)
        ok &= vhpc_msg_check(rbuf, (size_t)bw_size, peer);

    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

    if (rank == 0) {
        printf("latency   %ld B: %.3f us (%ld iterations, %ld warm-up)\n", lat_size, lat_us, iters,
               warmup);
        printf("bandwidth %ld B: %.2f MB/s (%ld x window %ld)\n", bw_size, bw_mbps, bw_iters,
               window);
        printf("data check: %s\n", all_ok ? "passed" : "FAILED");
        vhpc_result_begin();
        vhpc_result_num("latency_us", lat_us);
        vhpc_result_num("bandwidth_MBps", bw_mbps);
        vhpc_result_int("lat_size", lat_size);
        vhpc_result_int("bw_size", bw_size);
        vhpc_result_int("iters", iters);
        vhpc_result_int("warmup", warmup);
        vhpc_result_int("bw_iters", bw_iters);
        vhpc_result_int("window", window);
        vhpc_result_int("valid", all_ok);
        vhpc_result_end();
    }

    free(req);
    free(sbuf);
    free(rbuf);
    vhpc_exit(all_ok ? VHPC_EXIT_OK : VHPC_EXIT_INVALID);
}
