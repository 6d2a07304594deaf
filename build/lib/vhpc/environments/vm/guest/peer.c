/*
 * vhpc vcluster peer service, included into agent.c (one static binary, three roles).
 *
 * 1. Exec service (in the agent, started when the kernel command line has vhpc.ip=A.B.C.D):
 *    listens on A.B.C.D:PEER_PORT, the guest's address on the campaign's private segment,
 *    which only the campaign's own guests can reach (QEMU stream netdevs over UNIX sockets in
 *    a 0700 directory of the host; no host interface, no route).  Per connection:
 *      client -> service  EXEC <len>\n<shell command>
 *      service -> client  frames: 1 byte type, 4 bytes big-endian length, payload
 *                         'O' stdout bytes, 'E' stderr bytes, 'X' 4-byte exit status (last)
 *    The command runs under /bin/sh -c in its own session; when the client goes away first
 *    (the MPI launcher killed its remote starter) the command's process group is killed.
 * 2. vhpc-rsh HOST CMD...: the remote starter that Open MPI's plm_rsh_agent and Hydra's
 *    launcher-exec call instead of ssh: ssh-style options before HOST are skipped, HOST is
 *    resolved from /etc/hosts (or is an address), CMD words are joined with spaces as ssh
 *    does; output is relayed and the remote exit status returned.  No key, no password.
 * 3. vhpc-rank PROG ARGS...: runs PROG as a child and, when it exits, appends one line to
 *    RANK_LOG: "rank=R host=H pid=P cpu=C allowed=LIST rc=X" (C: the CPU it last ran on,
 *    proc(5) stat field 39, read from the zombie before reaping).  R comes from the
 *    launcher's environment (OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#define PEER_PORT 7107
#define RANK_LOG "/tmp/vhpc-ranks.log"

static int fd_write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int fd_read_all(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n == 0) return -1;
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_frame(int fd, char type, const void *data, uint32_t len) {
    unsigned char head[5] = {(unsigned char)type, (unsigned char)(len >> 24),
                             (unsigned char)(len >> 16), (unsigned char)(len >> 8),
                             (unsigned char)len};
    if (fd_write_all(fd, head, 5) < 0) return -1;
    return len ? fd_write_all(fd, data, len) : 0;
}

/* The value of NAME= on the kernel command line, or "" (buf holds it). */
static const char *cmdline_arg(const char *name, char *buf, size_t cap) {
    char line[4096] = {0};
    buf[0] = 0;
    FILE *f = fopen("/proc/cmdline", "r");
    if (!f) return buf;
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
    size_t nl = strlen(name);
    for (char *w = strtok(line, " \n"); w; w = strtok(NULL, " \n")) {
        if (strncmp(w, name, nl) == 0 && w[nl] == '=') {
            snprintf(buf, cap, "%s", w + nl + 1);
            break;
        }
    }
    return buf;
}

static void serve_exec(int conn) {
    char head[64];
    size_t hl = 0;
    while (hl + 1 < sizeof head) {
        if (fd_read_all(conn, head + hl, 1) < 0) return;
        if (head[hl] == '\n') break;
        hl++;
    }
    head[hl] = 0;
    unsigned long len;
    if (sscanf(head, "EXEC %lu", &len) != 1 || len > (1u << 20)) return;
    char *cmd = malloc(len + 1);
    if (!cmd || fd_read_all(conn, cmd, len) < 0) return;
    cmd[len] = 0;
    int out[2], err[2];
    if (pipe(out) < 0 || pipe(err) < 0) return;
    signal(SIGCHLD, SIG_DFL);
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        dup2(out[1], 1);
        dup2(err[1], 2);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        close(out[0]); close(err[0]); close(out[1]); close(err[1]); close(conn);
        signal(SIGPIPE, SIG_DFL);
        if (chdir("/tmp") < 0) _exit(127);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    struct pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {conn, POLLIN, 0}};
    int open_pipes = 2, gone = 0;
    char chunk[65536];
    while (open_pipes > 0 && !gone) {
        if (poll(fds, 3, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = read(fds[i].fd, chunk, sizeof chunk);
            if (n > 0) {
                if (send_frame(conn, i == 0 ? 'O' : 'E', chunk, (uint32_t)n) < 0) gone = 1;
            } else {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_pipes--;
            }
        }
        if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(conn, chunk, sizeof chunk);
            if (n <= 0) gone = 1;
        }
    }
    if (gone) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    uint32_t rc = WIFEXITED(status) ? (uint32_t)WEXITSTATUS(status) : 128u + (uint32_t)WTERMSIG(status);
    unsigned char rcb[4] = {(unsigned char)(rc >> 24), (unsigned char)(rc >> 16),
                            (unsigned char)(rc >> 8), (unsigned char)rc};
    if (!gone) send_frame(conn, 'X', rcb, 4);
}

/* Fork the exec service when this guest has an address on a private segment. */
static void start_peer_service(void) {
    char ip[64];
    if (!*cmdline_arg("vhpc.ip", ip, sizeof ip)) return;
    char *slash = strchr(ip, '/');
    if (slash) *slash = 0;
    if (fork() != 0) return;
    signal(SIGCHLD, SIG_IGN); /* connection handlers are reaped by the kernel */
    int s = -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PEER_PORT)};
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) _exit(1);
    for (int attempt = 0; attempt < 200; attempt++) { /* the interface may still be coming up */
        s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 && listen(s, 64) == 0) break;
        close(s);
        s = -1;
        usleep(50000);
    }
    if (s < 0) {
        fprintf(stderr, "vhpc-agent: cannot listen on %s:%d\n", ip, PEER_PORT);
        _exit(1);
    }
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        if (fork() == 0) {
            close(s);
            serve_exec(c);
            _exit(0);
        }
        close(c);
    }
}

/* HOST's IPv4 address from /etc/hosts (or HOST itself when it is an address). */
static int resolve_host(const char *host, struct in_addr *out) {
    if (inet_pton(AF_INET, host, out) == 1) return 0;
    FILE *f = fopen("/etc/hosts", "r");
    if (!f) return -1;
    char line[512];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *addr = strtok(line, " \t\n");
        if (!addr) continue;
        for (char *name = strtok(NULL, " \t\n"); name; name = strtok(NULL, " \t\n"))
            if (strcmp(name, host) == 0 && inet_pton(AF_INET, addr, out) == 1) found = 0;
    }
    fclose(f);
    return found;
}

static int rsh_main(int argc, char **argv) {
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) /* ssh options the launchers add (-x, -o K=V) */
        if (strchr("oplie", argv[i][1]) && argv[i][2] == 0) i++;
    if (i >= argc - 1) {
        fprintf(stderr, "usage: vhpc-rsh [ssh options] HOST COMMAND...\n");
        return 255;
    }
    const char *host = argv[i++];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PEER_PORT)};
    if (resolve_host(host, &a.sin_addr) < 0) {
        fprintf(stderr, "vhpc-rsh: unknown host %s\n", host);
        return 255;
    }
    size_t len = 0;
    for (int k = i; k < argc; k++) len += strlen(argv[k]) + 1;
    char *cmd = malloc(len + 1), *p = cmd;
    for (int k = i; k < argc; k++) p += sprintf(p, "%s%s", k > i ? " " : "", argv[k]);
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int connected = -1;
    for (int attempt = 0; attempt < 100 && connected < 0; attempt++) {
        connected = connect(s, (struct sockaddr *)&a, sizeof a);
        if (connected < 0) {
            if (errno != ECONNREFUSED && errno != ETIMEDOUT && errno != EHOSTUNREACH) break;
            close(s);
            s = socket(AF_INET, SOCK_STREAM, 0);
            usleep(100000);
        }
    }
    if (connected < 0) {
        fprintf(stderr, "vhpc-rsh: cannot reach %s:%d: %s\n", host, PEER_PORT, strerror(errno));
        return 255;
    }
    char head[64];
    int hl = snprintf(head, sizeof head, "EXEC %zu\n", strlen(cmd));
    if (fd_write_all(s, head, (size_t)hl) < 0 || fd_write_all(s, cmd, strlen(cmd)) < 0) return 255;
    for (;;) {
        unsigned char fh[5];
        if (fd_read_all(s, fh, 5) < 0) {
            fprintf(stderr, "vhpc-rsh: connection to %s lost\n", host);
            return 255;
        }
        uint32_t n = ((uint32_t)fh[1] << 24) | ((uint32_t)fh[2] << 16) | ((uint32_t)fh[3] << 8) | fh[4];
        char *data = malloc(n ? n : 1);
        if (!data || fd_read_all(s, data, n) < 0) return 255;
        if (fh[0] == 'X' && n == 4) {
            unsigned char *b = (unsigned char *)data;
            return (int)(((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3]);
        }
        fd_write_all(fh[0] == 'O' ? 1 : 2, data, n);
        free(data);
    }
}

static pid_t rank_child = -1;

static void forward_signal(int sig) {
    if (rank_child > 0) kill(rank_child, sig);
}

static int rank_main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: vhpc-rank PROGRAM [ARGS...]\n");
        return 127;
    }
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = getenv("PMI_RANK");
    if (!rank) rank = getenv("PMIX_RANK");
    if (!rank) rank = "?";
    rank_child = fork();
    if (rank_child == 0) {
        execvp(argv[1], argv + 1);
        fprintf(stderr, "vhpc-rank: cannot run %s: %s\n", argv[1], strerror(errno));
        _exit(127);
    }
    if (rank_child < 0) return 127;
    signal(SIGTERM, forward_signal);
    signal(SIGINT, forward_signal);
    signal(SIGHUP, forward_signal);
    siginfo_t info;
    while (waitid(P_PID, (id_t)rank_child, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {}
    char path[64], buf[4096], allowed[1024] = "?";
    long cpu = -1;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)rank_child);
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        char *q = strrchr(buf, ')');
        for (int field = 2; q && field < 39; field++) q = strchr(q + 1, ' ');
        if (q) cpu = strtol(q + 1, NULL, 10);
    }
    snprintf(path, sizeof path, "/proc/%d/status", (int)rank_child);
    f = fopen(path, "r");
    while (f && fgets(buf, sizeof buf, f))
        if (strncmp(buf, "Cpus_allowed_list:", 18) == 0) {
            snprintf(allowed, sizeof allowed, "%s", buf + 18 + strspn(buf + 18, " \t"));
            allowed[strcspn(allowed, "\n")] = 0;
        }
    if (f) fclose(f);
    int status = 0;
    waitpid(rank_child, &status, 0);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    char host[256] = "?";
    gethostname(host, sizeof host);
    int log = open(RANK_LOG, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (log >= 0) {
        dprintf(log, "rank=%s host=%s pid=%d cpu=%ld allowed=%s rc=%d\n", rank, host,
                (int)rank_child, cpu, allowed, rc);
        close(log);
    }
    return rc;
}
