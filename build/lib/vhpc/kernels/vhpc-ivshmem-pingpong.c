/*
 * vhpc-ivshmem-pingpong - ping-pong latency and streaming bandwidth between 2 processes over
 * a shared-memory region, OSU Micro-Benchmarks methodology (warm-up, then timed iterations,
 * for each message size of a doubling series).
 *
 * Region (transport):
 *   ivshmem  BAR 2 of the ivshmem PCI device (vendor 0x1af4, device 0x1110), mapped from
 *            /sys/bus/pci/devices/<dev>/resource2: QEMU's ivshmem-plain shares one host file
 *            between guests, so the two ranks may run in two different VMs.
 *   shm      a POSIX shared-memory object /vhpc-ivpp-<job> (shm_open(3)): natively or in one VM.
 *   auto     ivshmem when such a device exists, else shm.
 * The two processes are started by an MPI launcher (mpirun -np 2) but use no MPI: the role
 * comes from OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK.
 *
 * Protocol: a control page (job hash, ready/ack, two message counters on their own cache
 * lines) and two message buffers of MAX_SIZE bytes.  Rank 0 clears the counters and publishes
 * the job hash (-j JOB, unique per run, so a region left over from an earlier run is never
 * mistaken for this one); rank 1 answers with the same hash.  Latency: rank 0 copies a message
 * into buffer 0 and bumps its counter, rank 1 waits for it, copies it out, copies its reply
 * into buffer 1 and bumps its counter; one-way latency = time / (2 x iterations).  Bandwidth:
 * rank 0 streams WINDOW x iterations messages through the two buffers used as a 2-slot ring,
 * rank 1 copies each out and frees the slot; MB/s = bytes / time (1e6 B/s).
 * Data check: every message carries its sequence number in its first and last 8 bytes (checked
 * on every receive) and a fixed pattern, checked in full on the last message of each size.
 */
#include "common.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTL 4096
#define LINE 64

static const char usage[] =
    "usage: mpirun -np 2 vhpc-ivshmem-pingpong [-t auto|shm|ivshmem] [-m MAX_SIZE] [-i ITERS]\n"
    "                                          [-I ITERS_LARGE] [-W WINDOW] [-j JOB] [-h]\n"
    "Shared-memory ping-pong latency and bandwidth between 2 processes (OSU method), over\n"
    "an ivshmem PCI BAR (processes in two VMs) or POSIX shared memory (one host or VM).\n"
    "  -t T      transport: auto (default), shm, ivshmem\n"
    "  -m MAX    largest message in bytes; sizes double from 8 up to it (default 4194304)\n"
    "  -i ITERS  timed iterations for sizes <= 8 KiB (default 1000; warm-up ITERS/10)\n"
    "  -I ITERS  timed iterations for sizes > 8 KiB (default 100; warm-up ITERS/10)\n"
    "  -W WINDOW messages per bandwidth iteration (default 64, as osu_bw)\n"
    "  -j JOB    identifier shared by both processes of one run (default: from the launcher)\n"
    "Result keys (rank 0): lat_<size> (one-way, us), bw_<size> (MB/s), transport, valid.\n";

struct ctl {
    volatile uint64_t ready; char pad0[LINE - 8];
    volatile uint64_t ack; char pad1[LINE - 8];
    volatile uint64_t sent0; char pad2[LINE - 8]; /* messages rank 0 -> 1 so far */
    volatile uint64_t sent1; char pad3[LINE - 8]; /* messages rank 1 -> 0 so far */
    volatile uint64_t bad; char pad4[LINE - 8];   /* rank 1's failed checks */
};

static struct ctl *ctl;
static unsigned char *slot[2];
static size_t max_size = 4u << 20;
static uint64_t bad = 0;

static uint64_t load(volatile uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store(volatile uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static void wait_ge(volatile uint64_t *p, uint64_t v) { while (load(p) < v) __builtin_ia32_pause(); }

static unsigned char pattern(size_t i, int from) { return (unsigned char)(i * 7u + 13u * (unsigned)from + (i >> 8)); }

static void fill(unsigned char *b, size_t n, int from) {
    for (size_t i = 0; i < n; i++) b[i] = pattern(i, from);
}

/* Stamp the sequence number into the first and last 8 bytes (when they fit). */
static void stamp(unsigned char *b, size_t n, uint64_t seq) {
    if (n >= 8) memcpy(b, &seq, 8);
    if (n >= 16) memcpy(b + n - 8, &seq, 8);
}

static void check(const unsigned char *b, size_t n, uint64_t seq, int from, int full) {
    uint64_t v;
    if (n >= 8) { memcpy(&v, b, 8); if (v != seq) bad++; }
    if (n >= 16) { memcpy(&v, b + n - 8, 8); if (v != seq) bad++; }
    if (full)
        for (size_t i = n >= 16 ? 8 : (n >= 8 ? 8 : 0); i + (n >= 16 ? 8 : 0) < n; i++)
            if (b[i] != pattern(i, from)) { bad++; break; }
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h | 1; /* never 0: 0 means "not ready" */
}

static void *map_ivshmem(size_t *len) {
    DIR *d = opendir("/sys/bus/pci/devices");
    struct dirent *e;
    char path[512], buf[32];
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        unsigned vendor = 0, device = 0;
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/vendor", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) vendor = (unsigned)strtoul(buf, NULL, 16);
        fclose(f);
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/device", e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) device = (unsigned)strtoul(buf, NULL, 16);
        fclose(f);
        if (vendor != 0x1af4 || device != 0x1110) continue;
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/resource2", e->d_name);
        closedir(d);
        int fd = open(path, O_RDWR | O_SYNC);
        if (fd < 0) vhpc_fatal("cannot open %s (run as root)", path);
        struct stat st;
        if (fstat(fd, &st) < 0) vhpc_fatal("cannot stat %s", path);
        *len = (size_t)st.st_size;
        void *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p == MAP_FAILED) vhpc_fatal("cannot map %s", path);
        return p;
    }
    if (d) closedir(d);
    return NULL;
}

static void *map_shm(const char *name, size_t len) {
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    if (fd < 0) vhpc_fatal("shm_open %s failed", name);
    if (ftruncate(fd, (off_t)len) < 0) vhpc_fatal("ftruncate %s failed", name);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) vhpc_fatal("cannot map %s", name);
    return p;
}

static int env_rank(void) {
    const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        if (v) return atoi(v);
    }
    return -1;
}

static uint64_t count = 0; /* messages per direction so far: the same in both processes */

static double latency(int rank, size_t n, long iters, long warm, unsigned char *msg, unsigned char *in) {
    double t0 = 0;
    for (long k = 0; k < warm + iters; k++) {
        if (k == warm) t0 = vhpc_now();
        uint64_t seq = ++count;
        int last = k == warm + iters - 1;
        if (rank == 0) {
            stamp(msg, n, seq);
            memcpy(slot[0], msg, n);
            store(&ctl->sent0, seq);
            wait_ge(&ctl->sent1, seq);
            memcpy(in, slot[1], n);
            check(in, n, seq, 1, last);
        } else {
            wait_ge(&ctl->sent0, seq);
            memcpy(in, slot[0], n);
            check(in, n, seq, 0, last);
            stamp(msg, n, seq);
            memcpy(slot[1], msg, n);
            store(&ctl->sent1, seq);
        }
    }
    return (vhpc_now() - t0) / (2.0 * (double)iters) * 1e6;
}

/* Rank 0 streams messages through slot[0], slot[1] (a 2-slot ring); rank 1 copies each out
 * and frees its slot by advancing its counter.  Returns MB/s on rank 0's clock. */
static double bandwidth(int rank, size_t n, long iters, long warm, long window, unsigned char *msg, unsigned char *in) {
    long total = (warm + iters) * window;
    uint64_t base = count;
    double t0 = vhpc_now();
    for (long m = 0; m < total; m++) {
        uint64_t seq = base + (uint64_t)m + 1;
        if (rank == 0) {
            if (m == warm * window) t0 = vhpc_now();
            if (m >= 2) wait_ge(&ctl->sent1, seq - 2); /* the slot's previous message was read */
            stamp(msg, n, seq);
            memcpy(slot[m & 1], msg, n);
            store(&ctl->sent0, seq);
        } else {
            wait_ge(&ctl->sent0, seq);
            memcpy(in, slot[m & 1], n);
            check(in, n, seq, 0, m == total - 1);
            store(&ctl->sent1, seq);
        }
    }
    count = base + (uint64_t)total;
    if (rank == 0) wait_ge(&ctl->sent1, count);
    return (double)n * (double)iters * (double)window / (vhpc_now() - t0) / 1e6;
}

static void wait_eq_timeout(volatile uint64_t *p, uint64_t v, const char *what) {
    double t0 = vhpc_now();
    while (load(p) != v) {
        if (vhpc_now() - t0 > 120.0) vhpc_fatal("the other process did not %s within 120 s", what);
        usleep(100);
    }
}

int main(int argc, char **argv) {
    const char *transport = "auto", *job = NULL;
    long iters = 1000, iters_large = 100, window = 64;
    int c;
    while ((c = vhpc_getopt(argc, argv, "t:m:i:I:W:j:", usage)) != -1) {
        switch (c) {
        case 't': transport = optarg; break;
        case 'm': max_size = (size_t)vhpc_parse_long(optarg, 'm', 8, 1L << 28); break;
        case 'i': iters = vhpc_parse_long(optarg, 'i', 1, 1L << 30); break;
        case 'I': iters_large = vhpc_parse_long(optarg, 'I', 1, 1L << 30); break;
        case 'W': window = vhpc_parse_long(optarg, 'W', 1, 1L << 20); break;
        case 'j': job = optarg; break;
        }
    }
    if (strcmp(transport, "auto") && strcmp(transport, "shm") && strcmp(transport, "ivshmem"))
        vhpc_usage_error("-t %s: use auto, shm or ivshmem", transport);
    int rank = env_rank();
    if (rank < 0 || rank > 1)
        vhpc_usage_error("run 2 processes with an MPI launcher (mpirun -np 2 %s)", argv[0]);
    vhpc_set_quiet(rank != 0);
    if (!job) job = getenv("PMIX_NAMESPACE");
    if (!job) job = getenv("PMI_KVSNAME");
    if (!job) vhpc_usage_error("give -j JOB (an identifier both processes share)");
    size_t need = CTL + 2 * max_size, len = need;
    void *region = NULL;
    char shm_name[128] = "";
    if (strcmp(transport, "shm") != 0) {
        region = map_ivshmem(&len);
        if (!region && !strcmp(transport, "ivshmem"))
            vhpc_fatal("no ivshmem PCI device (1af4:1110) in this machine");
        if (region) transport = "ivshmem";
    }
    if (!region) {
        transport = "shm";
        snprintf(shm_name, sizeof shm_name, "/vhpc-ivpp-%016llx", (unsigned long long)fnv1a(job));
        region = map_shm(shm_name, need);
    }
    if (len < need)
        vhpc_usage_error("-m %zu needs %zu bytes of shared memory, the region has %zu: lower -m",
                         max_size, need, len);
    ctl = region;
    slot[0] = (unsigned char *)region + CTL;
    slot[1] = slot[0] + max_size;
    uint64_t h = fnv1a(job);
    if (rank == 0) {
        store(&ctl->ready, 0);
        store(&ctl->ack, 0);
        store(&ctl->sent0, 0);
        store(&ctl->sent1, 0);
        store(&ctl->bad, 0);
        store(&ctl->ready, h);
        wait_eq_timeout(&ctl->ack, h, "attach");
    } else {
        wait_eq_timeout(&ctl->ready, h, "publish the region");
        store(&ctl->ack, h);
    }
    unsigned char *msg = vhpc_alloc(max_size), *in = vhpc_alloc(max_size);
    fill(msg, max_size, rank);
    size_t nsizes = 0, sizes[64];
    for (size_t s = 8; s <= max_size && nsizes < 64; s *= 2) sizes[nsizes++] = s;
    double lat[64], bw[64];
    if (rank == 0) printf("# vhpc-ivshmem-pingpong over %s (job %s)\n", transport, job);
    for (size_t k = 0; k < nsizes; k++) {
        long it = sizes[k] <= 8192 ? iters : iters_large, warm = it / 10 > 0 ? it / 10 : 1;
        fill(msg, sizes[k], rank); /* undo the stamps of the previous size */
        lat[k] = latency(rank, sizes[k], it, warm, msg, in);
        bw[k] = bandwidth(rank, sizes[k], it / 10 > 0 ? it / 10 : 1, 1, window, msg, in);
        if (rank == 0) printf("%10zu B  %12.3f us  %12.2f MB/s\n", sizes[k], lat[k], bw[k]);
    }
    if (rank == 1) {
        store(&ctl->bad, bad);
        store(&ctl->ack, h + 1);
        return bad ? VHPC_EXIT_INVALID : VHPC_EXIT_OK;
    }
    wait_eq_timeout(&ctl->ack, h + 1, "finish");
    uint64_t total_bad = bad + load(&ctl->bad);
    if (shm_name[0]) shm_unlink(shm_name);
    printf("data check: %s\n", total_bad ? "FAILED" : "passed");
    vhpc_result_begin();
    vhpc_result_word("transport", transport);
    for (size_t k = 0; k < nsizes; k++) {
        char key[40];
        snprintf(key, sizeof key, "lat_%zu", sizes[k]);
        vhpc_result_num(key, lat[k]);
        snprintf(key, sizeof key, "bw_%zu", sizes[k]);
        vhpc_result_num(key, bw[k]);
    }
    vhpc_result_int("max_size", (long long)max_size);
    vhpc_result_int("iters", iters);
    vhpc_result_int("valid", total_bad == 0);
    vhpc_result_end();
    return total_bad ? VHPC_EXIT_INVALID : VHPC_EXIT_OK;
}
