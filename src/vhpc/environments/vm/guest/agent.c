/*
 * vhpc guest agent: runs as the guest's init (PID 1) after switch_root into the host's root.
 * Statically linked and shipped in vhpc's initramfs, so a boot does not have to page an
 * interpreter in over virtio-9p before the guest is ready (that cost ~1.3 s under TCG).
 *
 * Protocol over the virtio-serial port named "vhpc.agent" (text headers, binary payloads):
 *   agent -> host  READY <uptime_s> <ncpus> <kernel-release>\n
 *   host  -> agent RUN <id> <timeout_ms> <nargs> <nenv> <payload_len>\n<payload>
 *                  payload = nargs argv strings, nenv "K=V" strings, then the cwd, each NUL-terminated
 *   agent -> host  DONE <id> <rc> <timed_out> <elapsed_s> <user_s> <sys_s> <minflt> <majflt>
 *                       <nvcsw> <nivcsw> <out_len> <err_len>\n<stdout><stderr>
 *   host  -> agent READ <id> <path_len>\n<path>
 *   agent -> host  DATA <id> <ok> <len>\n<bytes>      (ok=0: bytes are an error message)
 * rc is the exit status, or 128+signal; a command past its timeout has its process group
 * killed (SIGKILL) and timed_out=1, and processes still holding its output pipes a second
 * later (started in sessions of their own) are killed too, so the reply comes within seconds
 * of the timeout.  Output beyond OUTPUT_LIMIT bytes per stream is dropped.
 *
 * vcluster guests (kernel command line vhpc.ip=A.B.C.D) also run peer.c's exec service on
 * A.B.C.D:PEER_PORT, the remote-start path for MPI launchers across guests; the same binary
 * is the launcher (called as vhpc-rsh) and the per-rank recorder (called as vhpc-rank).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "peer.c"

#define OUTPUT_LIMIT (4u << 20)

static int port = -1;
static char rbuf[65536];
static size_t rlen = 0, rpos = 0;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Read one byte from the port; waits (the host may not be connected yet). */
static int get_byte(void) {
    while (rpos == rlen) {
        ssize_t n = read(port, rbuf, sizeof rbuf);
        if (n > 0) {
            rlen = (size_t)n;
            rpos = 0;
        } else if (n == 0 || errno == EAGAIN || errno == EINTR) {
            usleep(10000);
        } else {
            return -1;
        }
    }
    return (unsigned char)rbuf[rpos++];
}

static int read_exact(char *dst, size_t len) {
    for (size_t i = 0; i < len; i++) {
        int c = get_byte();
        if (c < 0) return -1;
        dst[i] = (char)c;
    }
    return 0;
}

static int read_line(char *dst, size_t cap) {
    size_t i = 0;
    for (;;) {
        int c = get_byte();
        if (c < 0) return -1;
        if (c == '\n') break;
        if (i + 1 < cap) dst[i++] = (char)c;
    }
    dst[i] = 0;
    return 0;
}

static void write_all(const char *p, size_t len) {
    while (len > 0) {
        ssize_t n = write(port, p, len);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) { usleep(1000); continue; }
            return;
        }
        p += n;
        len -= (size_t)n;
    }
}

struct buf { char *data; size_t len; };

static void buf_add(struct buf *b, const char *p, size_t n) {
    if (b->len >= OUTPUT_LIMIT) return;
    if (b->len + n > OUTPUT_LIMIT) n = OUTPUT_LIMIT - b->len;
    char *d = realloc(b->data, b->len + n + 1);
    if (!d) return;
    b->data = d;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void reap_orphans(void) {
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

/* SIGKILL every process but this one holding an end of the pipe `fd` (proc(5): a link in
 * /proc/PID/fd reads "pipe:[INODE]"): a process the command started in a session of its own
 * keeps the output open after the command's group was killed, and the reply waited for it. */
static void kill_pipe_holders(int fd) {
    struct stat st;
    if (fstat(fd, &st) < 0) return;
    char want[64];
    snprintf(want, sizeof want, "pipe:[%lu]", (unsigned long)st.st_ino);
    DIR *procs = opendir("/proc");
    if (!procs) return;
    struct dirent *p;
    while ((p = readdir(procs))) {
        char *end;
        long pid = strtol(p->d_name, &end, 10);
        if (*end || pid <= 1 || pid == (long)getpid()) continue;
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%ld/fd", pid);
        DIR *fds = opendir(dir);
        if (!fds) continue;
        struct dirent *f;
        while ((f = readdir(fds))) {
            char path[384], link[64];
            snprintf(path, sizeof path, "%s/%s", dir, f->d_name);
            ssize_t n = readlink(path, link, sizeof link - 1);
            if (n > 0) {
                link[n] = 0;
                if (!strcmp(link, want)) { kill((pid_t)pid, SIGKILL); break; }
            }
        }
        closedir(fds);
    }
    closedir(procs);
}

static void do_run(char *header) {
    unsigned long id, timeout_ms, nargs, nenv, plen;
    if (sscanf(header, "RUN %lu %lu %lu %lu %lu", &id, &timeout_ms, &nargs, &nenv, &plen) != 5)
        return;
    char *payload = malloc(plen + 1);
    if (!payload || read_exact(payload, plen) < 0) { free(payload); return; }
    payload[plen] = 0;
    char **strs = calloc(nargs + nenv + 2, sizeof(char *));
    size_t off = 0;
    for (unsigned long i = 0; i < nargs + nenv + 1 && off <= plen; i++) {
        strs[i] = payload + off;
        off += strlen(payload + off) + 1;
    }
    char **argv = calloc(nargs + 1, sizeof(char *));
    for (unsigned long i = 0; i < nargs; i++) argv[i] = strs[i];
    const char *cwd = strs[nargs + nenv] ? strs[nargs + nenv] : "/tmp";

    int out[2], err[2];
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    double t0 = now();
    int status = 0, timed_out = 0, rc;
    struct buf bo = {0}, be = {0};
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
        rc = 127;
        buf_add(&be, "vhpc-agent: pipe failed\n", 24);
        goto reply;
    }
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        dup2(out[1], 1);
        dup2(err[1], 2);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        for (unsigned long i = 0; i < nenv; i++) putenv(strs[nargs + i]);
        if (chdir(cwd) < 0) { dprintf(2, "vhpc-agent: chdir %s: %s\n", cwd, strerror(errno)); _exit(127); }
        signal(SIGPIPE, SIG_DFL);
        execvp(argv[0], argv);
        dprintf(2, "vhpc-agent: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
        rc = 127;
        buf_add(&be, "vhpc-agent: fork failed\n", 24);
        close(out[0]);
        close(err[0]);
        goto reply;
    }
    {
        struct pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
        int open_fds = 2;
        double deadline = t0 + timeout_ms / 1000.0;
        int drains = 0; /* after a timeout: rounds of killing what still holds the pipes */
        char chunk[65536];
        while (open_fds > 0) {
            int wait_ms = -1;
            if (!timed_out && timeout_ms > 0 && deadline - now() <= 0) {
                timed_out = 1;
                kill(-pid, SIGKILL);
                kill(pid, SIGKILL);
                deadline = now() + 1.0; /* the pipes close now, or their holders are killed */
            }
            if (timed_out && deadline - now() <= 0) {
                if (++drains > 3) break; /* still open: reply without the rest */
                for (int i = 0; i < 2; i++)
                    if (fds[i].fd >= 0) kill_pipe_holders(fds[i].fd);
                deadline = now() + 1.0;
            }
            if (timeout_ms > 0) {
                double left = deadline - now();
                wait_ms = left > 0 ? (int)(left * 1000) + 1 : 0;
            }
            int n = poll(fds, 2, wait_ms);
            if (n < 0 && errno != EINTR) break;
            for (int i = 0; i < 2; i++) {
                if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                ssize_t got = read(fds[i].fd, chunk, sizeof chunk);
                if (got > 0) {
                    buf_add(i == 0 ? &bo : &be, chunk, (size_t)got);
                } else {
                    close(fds[i].fd);
                    fds[i].fd = -1;
                    open_fds--;
                }
            }
        }
        for (int i = 0; i < 2; i++)
            if (fds[i].fd >= 0) close(fds[i].fd);
        if (wait4(pid, &status, 0, &ru) < 0) status = 0;
        if (timed_out) kill(-pid, SIGKILL);
    }
    rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
reply:;
    char head[512];
    int hl = snprintf(head, sizeof head, "DONE %lu %d %d %.6f %.6f %.6f %ld %ld %ld %ld %zu %zu\n",
                      id, rc, timed_out, now() - t0,
                      ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
                      ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6,
                      ru.ru_minflt, ru.ru_majflt, ru.ru_nvcsw, ru.ru_nivcsw, bo.len, be.len);
    write_all(head, (size_t)hl);
    if (bo.len) write_all(bo.data, bo.len);
    if (be.len) write_all(be.data, be.len);
    free(bo.data);
    free(be.data);
    free(argv);
    free(strs);
    free(payload);
    reap_orphans();
}

static void do_read(char *header) {
    unsigned long id, plen;
    if (sscanf(header, "READ %lu %lu", &id, &plen) != 2 || plen > 4096) return;
    char path[4097];
    if (read_exact(path, plen) < 0) return;
    path[plen] = 0;
    struct buf b = {0};
    int ok = 1;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        ok = 0;
        buf_add(&b, strerror(errno), strlen(strerror(errno)));
    } else {
        char chunk[65536];
        ssize_t n;
        while ((n = read(fd, chunk, sizeof chunk)) > 0) buf_add(&b, chunk, (size_t)n);
        close(fd);
    }
    char head[128];
    int hl = snprintf(head, sizeof head, "DATA %lu %d %zu\n", id, ok, b.len);
    write_all(head, (size_t)hl);
    if (b.len) write_all(b.data, b.len);
    free(b.data);
}

static int find_port(char *dev, size_t cap) {
    for (int attempt = 0; attempt < 400; attempt++) {
        DIR *d = opendir("/sys/class/virtio-ports");
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char p[512], name[64] = {0};
            snprintf(p, sizeof p, "/sys/class/virtio-ports/%s/name", e->d_name);
            FILE *f = fopen(p, "r");
            if (!f) continue;
            if (fgets(name, sizeof name, f) && strncmp(name, "vhpc.agent", 10) == 0) {
                fclose(f);
                snprintf(dev, cap, "/dev/%s", e->d_name);
                closedir(d);
                return 0;
            }
            fclose(f);
        }
        if (d) closedir(d);
        usleep(25000);
    }
    return -1;
}

int main(int argc, char **argv) {
    const char *self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (strcmp(self, "vhpc-rsh") == 0) return rsh_main(argc, argv);
    if (strcmp(self, "vhpc-rank") == 0) return rank_main(argc, argv);
    setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
    setenv("HOME", "/tmp", 1);
    setenv("TMPDIR", "/tmp", 1);
    signal(SIGPIPE, SIG_IGN);
    char dev[300];
    if (find_port(dev, sizeof dev) < 0) {
        fprintf(stderr, "vhpc-agent: virtio-serial port vhpc.agent not found\n");
        sleep(1);
        return 1;
    }
    port = open(dev, O_RDWR);
    if (port < 0) {
        fprintf(stderr, "vhpc-agent: open %s: %s\n", dev, strerror(errno));
        sleep(1);
        return 1;
    }
    start_peer_service();
    double uptime = 0;
    FILE *u = fopen("/proc/uptime", "r");
    if (u) { if (fscanf(u, "%lf", &uptime) != 1) uptime = 0; fclose(u); }
    struct utsname un;
    uname(&un);
    char ready[256];
    int rl = snprintf(ready, sizeof ready, "READY %.2f %ld %s\n", uptime,
                      sysconf(_SC_NPROCESSORS_ONLN), un.release);
    write_all(ready, (size_t)rl);
    char header[512];
    while (read_line(header, sizeof header) == 0) {
        if (strncmp(header, "RUN ", 4) == 0) do_run(header);
        else if (strncmp(header, "READ ", 5) == 0) do_read(header);
        reap_orphans();
    }
    fprintf(stderr, "vhpc-agent: port closed\n");
    sleep(1);
    return 1;
}
