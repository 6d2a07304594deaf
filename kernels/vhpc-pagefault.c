/*
 * vhpc-pagefault - page-fault latency (lmbench lat_pagefault style).
 *
 * For each mapping kind (private anonymous, MAP_SHARED anonymous, and
 * MAP_SHARED of a file or device given with -f) and each repetition:
 *   full = time( mmap + madvise(MADV_NOHUGEPAGE) + touch every page + munmap )
 *   base = time( mmap + madvise(MADV_NOHUGEPAGE)                    + munmap ),
 *          the fastest of BASE_CYCLES such cycles
 *   per-fault latency = (full - base) / pages
 * so the figure covers fault handling plus releasing the populated page at
 * unmap time. "Touch" is a write access to one byte per page, done as an
 * atomic OR with 0: it is a write fault (anonymous pages are really
 * allocated, no zero-page + copy-on-write pair) but leaves the contents of a
 * user-supplied file unchanged. MADV_NOHUGEPAGE keeps THP from replacing 512
 * small faults by one 2 MiB fault.
 *
 * Minor faults are counted with getrusage(RUSAGE_SELF) around the touch
 * loop; a repetition with fewer faults than 90% of the pages means that the
 * kernel did not fault page by page (THP, prefaulting, fault-around) and
 * the run is reported invalid.  So is one whose median latency is not above
 * zero: timing noise larger than the faults themselves.
 *
 * The baseline is the fastest of a few untouched cycles: a preemption or an
 * interrupt only lengthens a cycle, and under load one preempted baseline
 * (a single one per repetition) once took longer than the whole touch cycle
 * of a 2 MiB tmpfs file (file_us = -6.5 with -r 1 in a full make test).
 *
 * One untimed warm-up pass per kind precedes the repetitions (page cache of
 * the file, allocator state). The reported latency is the MEDIAN over the
 * repetitions; the reported fault count is the minimum over them.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: vhpc-pagefault [-m MIB] [-r REPS] [-f FILE] [-h]\n"
    "Page-fault latency: time writing one byte per page of a fresh mapping, minus a\n"
    "map/unmap-only baseline (the fastest of 3), per page (THP disabled on the region).\n"
    "  -m MIB   region size in MiB (default 64)\n"
    "  -r REPS  repetitions; the median is reported (default 3)\n"
    "  -f FILE  also map this existing file or device MAP_SHARED (its contents are\n"
    "           preserved; a regular file shorter than the region limits the size).\n"
    "           Files whose page cache holds large folios (e.g. written through ext4/xfs\n"
    "           on recent kernels) map several pages per fault and are reported\n"
    "           invalid; tmpfs files (/dev/shm) and PCI BARs fault page by page.\n"
    "  -h       this help\n"
    "Result keys: private_us shared_us [file_us] (microseconds per fault, median),\n"
    "pages [file_pages], private_faults shared_faults [file_faults] (minimum over\n"
    "repetitions), reps, valid (0 if faults < 90% of pages, or a median time per fault\n"
    "not above zero: timing noise larger than the faults).\n";

enum kind { PRIVATE_ANON, SHARED_ANON, SHARED_FILE, NKINDS };
/* untouched map/unmap cycles per repetition; the fastest is the baseline */
enum { BASE_CYCLES = 3 };
static const char *const kind_name[NKINDS] = {"private", "shared", "file"};

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* One map [+ touch] + unmap cycle; returns its duration in ns and stores
 * the minor faults seen during the touch loop in *faults. */
static uint64_t cycle(enum kind kind, int fd, size_t bytes, size_t page, int touch, long *faults)
{
    int flags = kind == PRIVATE_ANON ? MAP_PRIVATE | MAP_ANONYMOUS
              : kind == SHARED_ANON  ? MAP_SHARED | MAP_ANONYMOUS
                                     : MAP_SHARED;
    uint64_t t0 = vhpc_now_ns();
    unsigned char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags,
                            kind == SHARED_FILE ? fd : -1, 0);
    if (p == MAP_FAILED)
        vhpc_fatal("mmap of %zu bytes (%s) failed: %s", bytes, kind_name[kind], strerror(errno));
    /* EINVAL means a kernel without THP: nothing to disable. */
    (void)madvise(p, bytes, MADV_NOHUGEPAGE);
    long f0 = minor_faults(); /* called in both variants: same overhead */
    if (touch)
        for (size_t off = 0; off < bytes; off += page)
            __atomic_fetch_or(p + off, (unsigned char)0, __ATOMIC_RELAXED);
    long f1 = minor_faults();
    munmap(p, bytes);
    uint64_t t1 = vhpc_now_ns();
    *faults = f1 - f0;
    return t1 - t0;
}

struct outcome {
    double us;   /* median per-fault latency */
    long faults; /* minimum over repetitions */
};

static struct outcome measure(enum kind kind, int fd, size_t bytes, size_t page, int reps)
{
    size_t pages = bytes / page;
    double *lat = vhpc_alloc((size_t)reps * sizeof *lat);
    long faults, min_faults = -1;

    cycle(kind, fd, bytes, page, 1, &faults); /* warm-up */
    for (int r = 0; r < reps; r++) {
        long dummy;
        uint64_t base = UINT64_MAX;
        for (int b = 0; b < BASE_CYCLES; b++) {
            uint64_t t = cycle(kind, fd, bytes, page, 0, &dummy);
            base = t < base ? t : base;
        }
        uint64_t full = cycle(kind, fd, bytes, page, 1, &faults);
        lat[r] = ((double)full - (double)base) * 1e-3 / (double)pages;
        if (min_faults < 0 || faults < min_faults)
            min_faults = faults;
    }
    struct outcome o = {vhpc_median(lat, (size_t)reps), min_faults};
    free(lat);
    return o;
}

int main(int argc, char **argv)
{
    long mib = 64;
    int reps = 3;
    const char *file = NULL;
    int c;

    while ((c = vhpc_getopt(argc, argv, "m:r:f:", usage)) != -1) {
        switch (c) {
        case 'm': mib = vhpc_parse_long(optarg, 'm', 1, 1L << 20); break;
        case 'r': reps = (int)vhpc_parse_long(optarg, 'r', 1, 1000); break;
        case 'f': file = optarg; break;
        }
    }

    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t bytes = (size_t)mib << 20;
    size_t file_bytes = 0;
    int fd = -1;
    if (file) {
        struct stat st;
        fd = open(file, O_RDWR);
        if (fd < 0 || fstat(fd, &st) != 0)
            vhpc_usage_error("-f %s: cannot open read-write (%s); give an existing file or device",
                             file, strerror(errno));
        file_bytes = bytes;
        if (S_ISREG(st.st_mode) && (size_t)st.st_size < bytes)
            file_bytes = (size_t)st.st_size / page * page;
        if (file_bytes == 0)
            vhpc_usage_error("-f %s: file is smaller than one page; give a larger file", file);
    }

    struct outcome res[NKINDS];
    size_t kind_pages[NKINDS] = {bytes / page, bytes / page, file_bytes / page};
    int nkinds = file ? 3 : 2;
    int valid = 1;
    for (int k = 0; k < nkinds; k++) {
        size_t b = k == SHARED_FILE ? file_bytes : bytes;
        res[k] = measure((enum kind)k, fd, b, page, reps);
        if ((double)res[k].faults < 0.9 * (double)kind_pages[k])
            valid = 0;
        if (!(res[k].us > 0.0)) {
            valid = 0;
            printf("%s: the touch cycles were not slower than the untouched ones: timing noise "
                   "larger than the faults, figures invalid\n", kind_name[k]);
        }
        printf("%-8s %zu pages: %.3f us/fault (median of %d), %ld minor faults\n", kind_name[k],
               kind_pages[k], res[k].us, reps, res[k].faults);
    }
    if (!valid)
        printf("fewer faults than 90%% of the pages: THP or prefaulting is active, figures invalid\n");
    if (fd >= 0)
        close(fd);

    vhpc_result_begin();
    vhpc_result_num("private_us", res[PRIVATE_ANON].us);
    vhpc_result_num("shared_us", res[SHARED_ANON].us);
    if (file)
        vhpc_result_num("file_us", res[SHARED_FILE].us);
    vhpc_result_int("pages", (long long)(bytes / page));
    if (file)
        vhpc_result_int("file_pages", (long long)(file_bytes / page));
    vhpc_result_int("private_faults", res[PRIVATE_ANON].faults);
    vhpc_result_int("shared_faults", res[SHARED_ANON].faults);
    if (file)
        vhpc_result_int("file_faults", res[SHARED_FILE].faults);
    vhpc_result_int("page_size", (long long)page);
    vhpc_result_int("reps", reps);
    vhpc_result_int("valid", valid);
    vhpc_result_end();
    return valid ? VHPC_EXIT_OK : VHPC_EXIT_INVALID;
}
