/*
 * npb_main.c - command line, dispatch and the NPB-style report of
 * vhpc-npb-omp / vhpc-npb-mpi.
 *
 *   vhpc-npb-omp -k KERNEL [-c CLASS] [-X]
 *   mpirun -np N vhpc-npb-mpi -k KERNEL [-c CLASS] [-X]
 *
 * Output: the NPB report block (field layout of NPB's print_results) and one
 * machine-readable line
 *   VHPC-RESULT kernel=cg class=S time_s=.. mops=.. verified=1 valid=1 threads=T ranks=P ...
 * Exit 0 verified, 3 verification failed, 2 bad command line, 1 runtime error.
 */
#include "npb.h"
#include "../common.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef NPB_MPI
#define PROG "mpirun -np N vhpc-npb-mpi"
#else
#define PROG "vhpc-npb-omp"
#endif

static const char usage[] =
    "usage: " PROG " -k KERNEL [-c CLASS] [-X] [-h]\n"
    "NAS Parallel Benchmarks kernels (vhpc's implementation of the NPB 3.x specification).\n"
    "  -k KERNEL  ep | is | cg | mg | ft\n"
    "  -c CLASS   S | W | A | B | C (default S)\n"
    "  -X         testing only: perturb the computation slightly; verification must fail\n"
    "  -h         this help\n"
#ifdef NPB_MPI
    "MPI ranks: a power of two (FT: dividing both ny and nz; MG: at most the grid size).\n"
    "One OpenMP thread per rank unless OMP_NUM_THREADS is set.\n"
#else
    "Threads: OMP_NUM_THREADS (default: all CPUs).\n"
#endif
    "Prints the NPB report block and one line\n"
    "VHPC-RESULT kernel class time_s mops verified valid threads ranks niter rel_err\n"
    "Exit status: 0 verified, 3 verification failed, 2 bad options, 1 runtime error.\n";

typedef const char *(*kernel_fn)(const npb_opts *, npb_result *);

static const struct {
    const char *name;
    kernel_fn fn;
} kernels[] = {
    {"ep", npb_ep}, {"is", npb_is}, {"cg", npb_cg}, {"mg", npb_mg}, {"ft", npb_ft},
};

int npb_class_index(char cls)
{
    const char *p = strchr("SWABC", cls);
    return (cls && p) ? (int)(p - "SWABC") : -1;
}

/* One "label = value" line: label padded to 16 columns, value right-aligned
 * in 25 columns after '=' (the layout of NPB's print_results). */
static void field(const char *label, const char *value) { printf(" %-16s=%25s\n", label, value); }

static void report(const npb_result *r, char cls, int threads, int ranks)
{
    char buf[64];
    printf("\n\n %s Benchmark Completed.\n", r->name);
    snprintf(buf, sizeof buf, "%c", cls);
    field("Class", buf);
    if (r->ep_log2 > 0)
        snprintf(buf, sizeof buf, "%.0f", (double)(1ULL << r->ep_log2));
    else if (r->n2 == 0 && r->n3 == 0)
        snprintf(buf, sizeof buf, "%d", r->n1);
    else
        snprintf(buf, sizeof buf, "%4dx%4dx%4d", r->n1, r->n2, r->n3);
    field("Size", buf);
    snprintf(buf, sizeof buf, "%d", r->niter);
    field("Iterations", buf);
    snprintf(buf, sizeof buf, "%.2f", r->time);
    field("Time in seconds", buf);
    if (npb_is_mpi_build()) {
        snprintf(buf, sizeof buf, "%d", ranks);
        field("Total processes", buf);
        field("Compiled procs", buf);
        snprintf(buf, sizeof buf, "%.2f", r->mops);
        field("Mop/s total", buf);
        snprintf(buf, sizeof buf, "%.2f", r->mops / ranks);
        field("Mop/s/process", buf);
    } else {
        snprintf(buf, sizeof buf, "%d", threads);
        field("Total threads", buf);
        field("Avail threads", buf);
        snprintf(buf, sizeof buf, "%.2f", r->mops);
        field("Mop/s total", buf);
        snprintf(buf, sizeof buf, "%.2f", r->mops / threads);
        field("Mop/s/thread", buf);
    }
    field("Operation type", r->optype);
    field("Verification", r->verified ? "SUCCESSFUL" : "UNSUCCESSFUL");
    field("Version", "3.4-vhpc");
    printf("\n");
}

int main(int argc, char **argv)
{
    npb_comm_init(&argc, &argv);

    const char *kname = NULL;
    char cls = 'S';
    int perturb = 0, c;
    while ((c = vhpc_getopt(argc, argv, "k:c:X", usage)) != -1) {
        switch (c) {
        case 'k': kname = optarg; break;
        case 'c':
            if (strlen(optarg) != 1 || npb_class_index((char)toupper((unsigned char)optarg[0])) < 0)
                vhpc_usage_error("option -c expects a class S, W, A, B or C, got '%s'", optarg);
            cls = (char)toupper((unsigned char)optarg[0]);
            break;
        case 'X': perturb = 1; break;
        default: vhpc_usage_error("unhandled option -%c", c);
        }
    }
    if (!kname)
        vhpc_usage_error("option -k KERNEL is required (ep, is, cg, mg or ft)");
    kernel_fn fn = NULL;
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (strcmp(kname, kernels[i].name) == 0)
            fn = kernels[i].fn;
    if (!fn)
        vhpc_usage_error("unknown kernel '%s': choose ep, is, cg, mg or ft", kname);

#ifdef _OPENMP
#ifdef NPB_MPI
    /* Pure MPI by default: one thread per rank unless the user asks for more. */
    if (!getenv("OMP_NUM_THREADS"))
        omp_set_num_threads(1);
#endif
    int threads = omp_get_max_threads();
#else
    int threads = 1;
#endif
    int ranks = npb_nranks();
    if (npb_is_mpi_build() && !npb_is_pow2(ranks))
        vhpc_usage_error("the number of MPI ranks must be a power of two, got %d", ranks);

    npb_opts opts = {.cls = cls, .perturb = perturb, .threads = threads};
    npb_result res;
    memset(&res, 0, sizeof res);
    res.rel_err = -1;
    const char *err = fn(&opts, &res);
    if (err)
        vhpc_usage_error("%s", err);

    if (npb_rank() == 0) {
        report(&res, cls, threads, ranks);
        char lower[8];
        snprintf(lower, sizeof lower, "%s", res.name);
        for (char *p = lower; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        char cbuf[2] = {cls, 0};
        vhpc_result_begin();
        vhpc_result_word("kernel", lower);
        vhpc_result_word("class", cbuf);
        vhpc_result_num("time_s", res.time);
        vhpc_result_num("mops", res.mops);
        vhpc_result_int("verified", res.verified);
        vhpc_result_int("valid", res.verified);
        vhpc_result_int("threads", threads);
        vhpc_result_int("ranks", ranks);
        vhpc_result_int("niter", res.niter);
        vhpc_result_num("rel_err", res.rel_err);
        vhpc_result_int("perturbed", perturb);
        vhpc_result_end();
    }
    vhpc_exit(res.verified ? VHPC_EXIT_OK : VHPC_EXIT_INVALID);
}
