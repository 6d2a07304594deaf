/*
 * common.h - helpers shared by every vhpc benchmark kernel.
 *
 * Conventions every kernel follows (see README.md):
 *   exit 0  run completed and verified      (result line has valid=1)
 *   exit 1  runtime failure (out of memory, mmap failed, ...)
 *   exit 2  bad command line                (one "error: ..." line on stderr)
 *   exit 3  run completed, verification failed (result line has valid=0)
 * Exactly one machine-readable line is printed on stdout:
 *   VHPC-RESULT key=value key=value ...
 */
#ifndef VHPC_COMMON_H
#define VHPC_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h> /* getopt: optarg, optind */

enum {
    VHPC_EXIT_OK = 0,
    VHPC_EXIT_RUNTIME = 1,
    VHPC_EXIT_USAGE = 2,
    VHPC_EXIT_INVALID = 3,
};

/* Monotonic clock (CLOCK_MONOTONIC), inlined so that tight timing loops
 * (the OS-noise kernel) pay no call overhead. */
static inline uint64_t vhpc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline double vhpc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --- process exit ------------------------------------------------------ */

/* Hook run by vhpc_exit() before exit() (the MPI kernel finalizes MPI). */
void vhpc_set_exit_hook(void (*hook)(void));
/* When quiet, usage text and error lines are suppressed (non-zero MPI ranks). */
void vhpc_set_quiet(int quiet);
_Noreturn void vhpc_exit(int code);

/* One "error: ..." line on stderr, exit 2 (bad command line). */
_Noreturn void vhpc_usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* One "error: ..." line on stderr, exit 1 (runtime failure). */
_Noreturn void vhpc_fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* --- option parsing ---------------------------------------------------- */

/*
 * getopt() wrapper. optstring lists the kernel's options (no leading ':').
 * Handles -h (prints usage to stdout, exits 0), unknown options, missing
 * values and stray positional arguments (all: one error line, exit 2).
 * Returns the option character, or -1 when done.
 */
int vhpc_getopt(int argc, char **argv, const char *optstring, const char *usage);

/* Parse an option value, exit 2 with an error line unless it is a number
 * within [min, max]. */
long vhpc_parse_long(const char *arg, char opt, long min, long max);
double vhpc_parse_double(const char *arg, char opt, double min, double max);

/* --- result line ------------------------------------------------------- */

void vhpc_result_begin(void);
void vhpc_result_int(const char *key, long long value);
void vhpc_result_num(const char *key, double value); /* %.6g */
void vhpc_result_word(const char *key, const char *word);
void vhpc_result_end(void); /* prints the line and flushes stdout */

/* --- misc -------------------------------------------------------------- */

/* Page-aligned allocation, exits 1 on failure. */
void *vhpc_alloc(size_t bytes);
/* Median of n doubles (sorts the array in place); 0 if n == 0. */
double vhpc_median(double *v, size_t n);

/* Size in bytes of the last-level cache as this machine (guest or host) reports it in sysfs:
 * the largest "level" among /sys/devices/system/cpu/cpu0/cache/index* of type Data or
 * Unified, its "size" (e.g. "32768K").  0 when sysfs has no cache information.
 * (sysconf(_SC_LEVEL3_CACHE_SIZE) is not used: glibc derives it from CPUID and reported
 * 384 MiB on a host whose sysfs says 32 MiB.) */
long vhpc_llc_bytes(void);

/* MemAvailable from /proc/meminfo in bytes, 0 if unknown. */
long vhpc_mem_available(void);

/* --- message patterns (vhpc-pingpong, vhpc-osu) ------------------------ */

/* Byte i of a message from source id src: (i*131 + 17*(src+1)) ^ (i >> 9), mod 256, so that
 * a message from another source, a shifted or a truncated message is detected. */
unsigned char vhpc_msg_pattern(int src, size_t i);
/* Fill buf[0..n) with src's pattern. */
void vhpc_msg_fill(unsigned char *buf, size_t n, int src);
/* 1 if buf[0..n) holds src's pattern, else 0. */
int vhpc_msg_check(const unsigned char *buf, size_t n, int src);

/* --- placement read-back ------------------------------------------------ */

/*
 * Print one line on stdout describing where this process ran:
 *   VHPC-RANK rank=R host=NAME cpu=C cpus=LIST tasks=T [node=SLURM_NODE]
 * node: $SLURMD_NODENAME when Slurm started the rank (srun), so ranks on
 * different Slurm nodes of one host are told apart;
 * cpu: the CPU the calling thread last ran on (sched_getcpu(3));
 * cpus: the union of the affinity masks (sched_getaffinity(2)) of every thread
 * of the process (/proc/self/task), as a Linux CPU list ("0-3,8"), i.e. the
 * rank's mask even after OpenMP bound its threads to single places;
 * tasks: threads counted.  MPI kernels call it from their exit hook, once per
 * rank, so vhpc can check that ranks did not share CPUs.
 */
void vhpc_report_placement(int rank);

#endif /* VHPC_COMMON_H */
