/* common.c - implementation of the helpers declared in common.h. */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void (*exit_hook)(void);
static int quiet;

void vhpc_set_exit_hook(void (*hook)(void)) { exit_hook = hook; }
void vhpc_set_quiet(int q) { quiet = q; }

_Noreturn void vhpc_exit(int code)
{
    fflush(stdout);
    if (exit_hook)
        exit_hook();
    exit(code);
}

static void verror(const char *fmt, va_list ap)
{
    if (quiet)
        return;
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
}

_Noreturn void vhpc_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(fmt, ap);
    va_end(ap);
    vhpc_exit(VHPC_EXIT_USAGE);
}

_Noreturn void vhpc_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(fmt, ap);
    va_end(ap);
    vhpc_exit(VHPC_EXIT_RUNTIME);
}

int vhpc_getopt(int argc, char **argv, const char *optstring, const char *usage)
{
    char spec[128];
    /* Leading ':' makes getopt report a missing value as ':' and stay silent. */
    snprintf(spec, sizeof spec, ":%sh", optstring);
    opterr = 0;
    int c = getopt(argc, argv, spec);
    switch (c) {
    case 'h':
        if (!quiet)
            fputs(usage, stdout);
        vhpc_exit(VHPC_EXIT_OK);
    case '?':
        if (optopt == '-')
            vhpc_usage_error("long options are not supported; run with -h for the list of options");
        if (optopt)
            vhpc_usage_error("unknown option -%c; run with -h for the list of options", optopt);
        vhpc_usage_error("unknown option %s; run with -h for the list of options", argv[optind - 1]);
    case ':':
        vhpc_usage_error("option -%c needs a value; run with -h for usage", optopt);
    case -1:
        if (optind < argc)
            vhpc_usage_error("unexpected argument '%s'; this kernel takes options only (see -h)",
                             argv[optind]);
        return -1;
    default:
        return c;
    }
}

long vhpc_parse_long(const char *arg, char opt, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end != '\0')
        vhpc_usage_error("option -%c expects an integer, got '%s'", opt, arg);
    if (v < min || v > max)
        vhpc_usage_error("option -%c must be between %ld and %ld, got %ld", opt, min, max, v);
    return v;
}

double vhpc_parse_double(const char *arg, char opt, double min, double max)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end != '\0' || !isfinite(v))
        vhpc_usage_error("option -%c expects a number, got '%s'", opt, arg);
    if (v < min || v > max)
        vhpc_usage_error("option -%c must be between %g and %g, got %g", opt, min, max, v);
    return v;
}

/* The result line, grown as needed (vhpc-osu's can hold hundreds of sizes), written by
   vhpc_result_end() in one write(2). */
static char *result_line;
static size_t result_len, result_cap;

static void result_append(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void result_append(const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        if (result_len + (size_t)n + 2 > result_cap) { /* + newline and NUL */
            size_t cap = 2 * (result_len + (size_t)n + 2);
            char *grown = realloc(result_line, cap);
            if (!grown)
                vhpc_fatal("cannot allocate %zu bytes for the result line", cap);
            result_line = grown;
            result_cap = cap;
        }
        vsnprintf(result_line + result_len, result_cap - result_len, fmt, again);
        result_len += (size_t)n;
    }
    va_end(again);
}

void vhpc_result_begin(void)
{
    result_len = 0;
    result_append("VHPC-RESULT");
}

void vhpc_result_int(const char *key, long long value) { result_append(" %s=%lld", key, value); }

void vhpc_result_num(const char *key, double value)
{
    if (isfinite(value))
        result_append(" %s=%.6g", key, value);
    else
        result_append(" %s=nan", key);
}

void vhpc_result_word(const char *key, const char *word) { result_append(" %s=%s", key, word); }

void vhpc_result_end(void)
{
    /* one write(2) with its newline, so no other rank's output can come in between: MPICH's
       Hydra leaves the ranks' stdout unbuffered, where stdio writes a line in pieces */
    if (!result_line)
        return;
    result_line[result_len++] = '\n';
    fflush(stdout);
    for (size_t done = 0; done < result_len;) {
        ssize_t w = write(STDOUT_FILENO, result_line + done, result_len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    result_len = 0;
}

void *vhpc_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = 1;
    if (posix_memalign(&p, 4096, bytes) != 0)
        vhpc_fatal("cannot allocate %zu bytes; use a smaller size option", bytes);
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double vhpc_median(double *v, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Append CPU list "a-b,c" of set to buf (size len). */
static void cpulist(const cpu_set_t *set, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, set))
            continue;
        int last = cpu;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        int n = last > cpu ? snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", cpu, last)
                           : snprintf(buf + used, len - used, "%s%d", used ? "," : "", cpu);
        if (n < 0 || (size_t)n >= len - used)
            return;
        used += (size_t)n;
        cpu = last;
    }
}

void vhpc_report_placement(int rank)
{
    cpu_set_t all, one;
    CPU_ZERO(&all);
    int tasks = 0;
    DIR *dir = opendir("/proc/self/task");
    struct dirent *de;
    while (dir && (de = readdir(dir)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        pid_t tid = (pid_t)atoi(de->d_name);
        if (sched_getaffinity(tid, sizeof one, &one) == 0) {
            CPU_OR(&all, &all, &one);
            tasks++;
        }
    }
    if (dir)
        closedir(dir);
    if (tasks == 0 && sched_getaffinity(0, sizeof all, &all) == 0)
        tasks = 1;
    char host[256] = "unknown", list[1024];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    for (char *h = host; *h; h++)
        if (*h == ' ' || *h == '=')
            *h = '_';
    cpulist(&all, list, sizeof list);
    /* the Slurm node when started by srun (several slurmd may share one host name) */
    char node[128] = "";
    const char *sn = getenv("SLURMD_NODENAME");
    if (sn && *sn) {
        snprintf(node, sizeof node, " node=%s", sn);
        for (char *h = node + 6; *h; h++)
            if (*h == ' ' || *h == '=')
                *h = '_';
    }
    printf("VHPC-RANK rank=%d host=%s cpu=%d cpus=%s tasks=%d%s\n", rank, host, sched_getcpu(),
           list[0] ? list : "none", tasks, node);
    fflush(stdout);
}

/* First line of a small sysfs/procfs file into buf; 0 on success. */
static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

long vhpc_llc_bytes(void)
{
    long best_level = 0, best_size = 0;
    for (int i = 0; i < 16; i++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (read_line(path, buf, sizeof buf) != 0)
            continue;
        if (strncmp(buf, "Data", 4) != 0 && strncmp(buf, "Unified", 7) != 0)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (read_line(path, buf, sizeof buf) != 0)
            continue;
        long level = atol(buf);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (read_line(path, buf, sizeof buf) != 0)
            continue;
        char *end;
        long size = strtol(buf, &end, 10);
        if (*end == 'K')
            size *= 1024L;
        else if (*end == 'M')
            size *= 1024L * 1024L;
        else if (*end == 'G')
            size *= 1024L * 1024L * 1024L;
        if (level > best_level || (level == best_level && size > best_size)) {
            best_level = level;
            best_size = size;
        }
    }
    return best_size;
}

long vhpc_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib * 1024L;
}

unsigned char vhpc_msg_pattern(int src, size_t i)
{
    return (unsigned char)((i * 131u + 17u * (unsigned)(src + 1)) ^ (i >> 9));
}

void vhpc_msg_fill(unsigned char *buf, size_t n, int src)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = vhpc_msg_pattern(src, i);
}

int vhpc_msg_check(const unsigned char *buf, size_t n, int src)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != vhpc_msg_pattern(src, i))
            return 0;
    return 1;
}
