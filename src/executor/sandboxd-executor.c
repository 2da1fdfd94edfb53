/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxd-executor: a session's commands, run as children of one process (exec mode
 * "session", issue 13). PID 1 starts it as the session's dynamic user in
 * sandboxd-<sid>-exec.service, with the sandbox of a command unit plus Delegate=yes. It dials
 * sandboxd's per-session listener, gets EXEC messages (executor-proto.h) with a sealed spec
 * memfd and the three stdio fds, forks each command into a cgroup of its own under the
 * delegated one, and reports STARTED and EXITED until sandboxd acknowledges.
 *
 * Everything a command can do to its own uid it can do to this process: sandboxd trusts it
 * for nothing but "n is pid P in cgroup C" and "P ended so". One loop, no threads, libc only;
 * memory is bounded by the table (EXECUTOR_TABLE_MAX). */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "executor-proto.h"

#define CGROUP2_MAGIC 0x63677270
#define CLONE_INTO_CGROUP_FLAG 0x200000000ULL
#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#define READ_BURST 64
#define DIAL_MIN_MSEC 10
#define DIAL_MAX_MSEC 250
#define REFUSALS_MAX 64
#define RMDIR_GIVE_UP_USEC (5u * 1000000u) /* a command's leftovers get 5 s to end */
#define SEALS_NEEDED (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)

typedef struct Entry {
        uint32_t n;
        pid_t pid; /* 0: it never ran */
        bool exited, acked;
        bool started_unsent, exited_unsent;
        uint64_t acked_usec;
        ExecutorStarted started;
        ExecutorExited result;
} Entry;

static Entry table[EXECUTOR_TABLE_MAX];
static size_t n_table;
/* answers to EXECs that get no entry (a full table, a known n): sent after READY, at most
 * REFUSALS_MAX, forgotten with the connection (sandboxd's deadline covers a lost one) */
static ExecutorExited refusals[REFUSALS_MAX];
static size_t n_refusals;

static const char *socket_path = EXECUTOR_SOCKET_PATH;
static int conn = -1, cg_fd = -1;
static uint32_t hello_flags;
static bool v2, hello_unsent, ready_unsent, want_out, stopping, clone3_works = true;
static int64_t dial_at_msec, dial_backoff_msec = DIAL_MIN_MSEC, connected_at_msec;

__attribute__((format(printf, 1, 2))) static void log_msg(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        fputs("sandboxd-executor: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
}

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static int64_t now_msec(void) {
        return (int64_t) (now_usec() / 1000u);
}

static int write_file_at(int dir, const char *name, const char *value) {
        int fd = openat(dir, name, O_WRONLY | O_CLOEXEC), r = 0;

        if (fd < 0)
                return -errno;
        if (write(fd, value, strlen(value)) < 0)
                r = -errno;
        close(fd);
        return r;
}

/* Our cgroup's directory from the "0::" line; only the cgroup2 hierarchy ("unified" on a
 * hybrid host), since PID 1 delegates nothing else to a dynamic user. */
static void setup_cgroups(void) {
        char line[4096], dir[4200] = "", *path = NULL;
        struct statfs sfs;
        FILE *f = fopen("/proc/self/cgroup", "re");
        int r;

        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "0::/", 4) == 0) {
                        line[strcspn(line, "\n")] = 0;
                        path = line + 3;
                        if (statfs("/sys/fs/cgroup/unified", &sfs) == 0 && sfs.f_type == CGROUP2_MAGIC)
                                snprintf(dir, sizeof(dir), "/sys/fs/cgroup/unified%s", line + 3);
                        else if (statfs("/sys/fs/cgroup", &sfs) == 0 && sfs.f_type == CGROUP2_MAGIC) {
                                snprintf(dir, sizeof(dir), "/sys/fs/cgroup%s", line + 3);
                                v2 = true;
                        }
                        break;
                }
        if (f)
                fclose(f);
        if (!dir[0] || strcmp(path, "/") == 0)
                return; /* the root cgroup is no delegated one */

        cg_fd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        if (cg_fd < 0 || faccessat(cg_fd, ".", W_OK, AT_EACCESS) < 0)
                goto none;
        /* out of the delegated dir first: cgroup v2 enables controllers for the children of a
         * dir only when no process sits in the dir itself */
        if (mkdirat(cg_fd, "supervisor", 0755) < 0 && errno != EEXIST)
                goto none;
        r = write_file_at(cg_fd, "supervisor/cgroup.procs", "0");
        if (r < 0) {
                log_msg("cannot move to %s/supervisor: %s", dir, strerror(-r));
                goto none;
        }
        hello_flags |= EXECUTOR_HELLO_CGROUPS;
        if (v2 && write_file_at(cg_fd, "cgroup.subtree_control", "+memory +pids") >= 0) {
                hello_flags |= EXECUTOR_HELLO_CONTROLLERS;
                (void) write_file_at(cg_fd, "cgroup.subtree_control", "+cpu"); /* accounting only */
        }
        return;
none:
        log_msg("no per-command cgroups in %s", dir);
        if (cg_fd >= 0)
                close(cg_fd);
        cg_fd = -1;
}

/* The table */

static Entry *entry_find(uint32_t n) {
        for (size_t i = 0; i < n_table; i++)
                if (table[i].n == n && !table[i].acked)
                        return &table[i];
        return NULL;
}

static size_t entries_known(void) {
        size_t k = 0;

        for (size_t i = 0; i < n_table; i++)
                k += !table[i].acked;
        return k;
}

static void entry_remove(Entry *e) {
        size_t i = (size_t) (e - table);

        memmove(e, e + 1, (n_table - i - 1) * sizeof(Entry)); /* keeps the order of the rest */
        n_table--;
}

static void entry_exited(Entry *e, int32_t code, int32_t status, const struct rusage *ru) {
        executor_msg_init(&e->result, EXECUTOR_MSG_EXITED, e->n);
        e->result.code = code;
        e->result.status = status;
        if (ru) {
                e->result.utime_usec = (uint64_t) ru->ru_utime.tv_sec * 1000000u + (uint64_t) ru->ru_utime.tv_usec;
                e->result.stime_usec = (uint64_t) ru->ru_stime.tv_sec * 1000000u + (uint64_t) ru->ru_stime.tv_usec;
                e->result.maxrss_bytes = (uint64_t) ru->ru_maxrss * 1024u; /* KiB */
        }
        e->result.exit_usec = now_usec();
        e->exited = e->exited_unsent = true;
}

/* An EXEC that will not run: an entry that only ever says EXITED code 0, status err. */
static void refuse(uint32_t n, int err) {
        ExecutorExited *x;

        if (n_table < EXECUTOR_TABLE_MAX && !entry_find(n)) {
                Entry *e = &table[n_table++];

                *e = (Entry) { .n = n };
                entry_exited(e, 0, err, NULL);
                return;
        }
        if (n_refusals >= REFUSALS_MAX) {
                log_msg("command %u refused (%s), and too many answers queued to say so", n, strerror(err));
                return;
        }
        x = &refusals[n_refusals++];
        executor_msg_init(x, EXECUTOR_MSG_EXITED, n);
        x->status = err;
        x->exit_usec = now_usec();
}

/* The connection */

static void disconnect(void) {
        if (conn < 0)
                return;
        close(conn);
        conn = -1;
        n_refusals = 0;
        hello_unsent = ready_unsent = want_out = false;
        /* a connection that did not last gets a longer pause before the next one */
        if (now_msec() - connected_at_msec >= 1000)
                dial_backoff_msec = DIAL_MIN_MSEC;
        dial_at_msec = now_msec() + dial_backoff_msec;
        dial_backoff_msec = dial_backoff_msec * 2 > DIAL_MAX_MSEC ? DIAL_MAX_MSEC : dial_backoff_msec * 2;
}

/* 1 sent, 0 try again at POLLOUT, -1 the connection is gone */
static int send_one(const void *msg, size_t size) {
        if (send(conn, msg, size, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
                return 1;
        if (errno == EAGAIN || errno == EINTR) {
                want_out = true;
                return 0;
        }
        if (errno != EPIPE && errno != ECONNRESET && errno != ENOTCONN)
                log_msg("send: %s", strerror(errno));
        disconnect();
        return -1;
}

/* Sends what is due, in the order of the protocol: HELLO, what each entry has to say
 * (STARTED before its EXITED), READY, then refusals. Stops at the first EAGAIN. */
static void flush(void) {
        int r;

        if (conn < 0)
                return;
        want_out = false;
        if (hello_unsent) {
                ExecutorHello h;

                executor_msg_init(&h, EXECUTOR_MSG_HELLO, 0);
                h.flags = hello_flags;
                h.known = (uint32_t) entries_known();
                if ((r = send_one(&h, sizeof(h))) <= 0)
                        return;
                hello_unsent = false;
        }
        for (size_t i = 0; i < n_table; i++) {
                Entry *e = &table[i];

                if (e->started_unsent) {
                        if ((r = send_one(&e->started, sizeof(e->started))) <= 0)
                                return;
                        e->started_unsent = false;
                }
                if (e->exited_unsent) {
                        if ((r = send_one(&e->result, sizeof(e->result))) <= 0)
                                return;
                        e->exited_unsent = false;
                }
        }
        if (ready_unsent) {
                ExecutorReady m;

                executor_msg_init(&m, EXECUTOR_MSG_READY, 0);
                if ((r = send_one(&m, sizeof(m))) <= 0)
                        return;
                ready_unsent = false;
        }
        while (n_refusals > 0) {
                if ((r = send_one(&refusals[0], sizeof(refusals[0]))) <= 0)
                        return;
                memmove(refusals, refusals + 1, --n_refusals * sizeof(refusals[0]));
        }
}

static void dial(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        strncpy(sa.sun_path, socket_path, sizeof(sa.sun_path) - 1);
        /* non-blocking: a listener whose backlog is full (commands can dial it too) must not
         * stop the loop that reaps children */
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                if (fd >= 0)
                        close(fd);
                dial_at_msec = now_msec() + dial_backoff_msec;
                dial_backoff_msec = dial_backoff_msec * 2 > DIAL_MAX_MSEC ? DIAL_MAX_MSEC : dial_backoff_msec * 2;
                return;
        }
        conn = fd;
        connected_at_msec = now_msec();
        /* everything we still know is told again: sandboxd may have lost what it was told */
        hello_unsent = ready_unsent = true;
        for (size_t i = 0; i < n_table; i++) {
                table[i].started_unsent = !table[i].acked && table[i].pid > 0;
                table[i].exited_unsent = !table[i].acked && table[i].exited;
        }
        flush();
}

/* A command */

/* The executor's own environment (what PID 1 gave the unit: USER, HOME, STATE_DIRECTORY, ...)
 * without what is about the executor alone: SYSTEMD_EXEC_PID (its pid) and JOURNAL_STREAM
 * (its stderr; a command's stdio is its own). The spec's entries win over same-named ones. */
static char **build_env(const ExecutorSpec *spec) {
        size_t n_own = 0, k = 0;
        char **env;

        while (environ && environ[n_own])
                n_own++;
        env = calloc(n_own + spec->envc + 1, sizeof(char *));
        if (!env)
                return NULL;
        for (size_t i = 0; i < n_own; i++) {
                size_t l = strcspn(environ[i], "=");
                bool drop = strncmp(environ[i], "SYSTEMD_EXEC_PID=", 17) == 0 ||
                            strncmp(environ[i], "JOURNAL_STREAM=", 15) == 0;

                for (uint32_t j = 0; !drop && j < spec->envc; j++)
                        drop = strncmp(spec->env[j], environ[i], l + 1) == 0; /* same NAME= */
                if (!drop)
                        env[k++] = environ[i];
        }
        for (uint32_t j = 0; j < spec->envc; j++)
                env[k++] = spec->env[j];
        return env;
}

static _Noreturn void child(const ExecutorSpec *spec, char **env, const int fds[EXECUTOR_EXEC_FDS], int procs_fd) {
        sigset_t none;

        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int sig = 1; sig < NSIG; sig++)
                (void) signal(sig, SIG_DFL);
        /* as PID 1 starts a unit's process (IgnoreSIGPIPE=yes, its default): a command writing
         * to a pipe nobody reads (sandboxd away) gets EPIPE, not death */
        (void) signal(SIGPIPE, SIG_IGN);
        (void) setsid();
        /* the unit starts us at -500 so that the kernel picks a command before us; the
         * command itself gets the default back */
        (void) write_file_at(AT_FDCWD, "/proc/self/oom_score_adj", "0");
        if (procs_fd >= 0 && write(procs_fd, "0", 1) < 0) {
                fprintf(stderr, "sandboxd-executor: cannot join the command's cgroup: %s\n", strerror(errno));
                _exit(EXECUTOR_EXIT_EXEC);
        }
        for (int i = 0; i < 3; i++)
                if (dup2(fds[1 + i], i) < 0)
                        _exit(EXECUTOR_EXIT_EXEC);
        (void) close_range(3, ~0U, 0);
        /* on a pty: its controlling terminal, of the session it leads (setsid() above), so
         * that ^C reaches its foreground group and TIOCSTI no terminal but this one */
        if ((spec->flags & EXECUTOR_SPEC_TTY) && ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0) {
                fprintf(stderr, "sandboxd-executor: cannot make stdin the controlling terminal: %s\n", strerror(errno));
                _exit(EXECUTOR_EXIT_STDIN);
        }
        if (chdir(spec->cwd) < 0)
                _exit(EXECUTOR_EXIT_CHDIR);
        execve(spec->exe, spec->argv, env);
        fprintf(stderr, "sandboxd-executor: cannot execute %s: %s\n", spec->exe, strerror(errno));
        _exit(EXECUTOR_EXIT_EXEC);
}

/* clone3(CLONE_INTO_CGROUP): the child never runs outside its cgroup. systemd's
 * RestrictNamespaces= answers clone3 with ENOSYS, then fork() and the child moves itself. */
static pid_t fork_into(int cgroup_fd) {
        struct {
                uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
                        set_tid_size, cgroup;
        } args = { .flags = CLONE_INTO_CGROUP_FLAG, .exit_signal = SIGCHLD, .cgroup = (uint64_t) cgroup_fd };
        long pid;

        if (cgroup_fd < 0)
                return fork();
        if (!clone3_works)
                return -2; /* known refused: the child moves itself (every command, not only the first) */
        pid = syscall(__NR_clone3, &args, sizeof(args));
        if (pid >= 0)
                return (pid_t) pid;
        if (errno == EAGAIN || errno == ENOMEM)
                return -1;
        clone3_works = false;
        return -2; /* fall back, with the child moving itself */
}

/* A per-command cgroup, with the EXEC's limits where the hierarchy has them. */
static int make_cgroup(const ExecutorExec *x, char name[EXECUTOR_CGROUP_NAME_MAX], int *ret_fd) {
        uint8_t rnd[8];
        char v[32];
        int fd, r = 0;

        if ((x->flags & (EXECUTOR_EXEC_MEMORY_MAX | EXECUTOR_EXEC_TASKS_MAX)) &&
            !(hello_flags & EXECUTOR_HELLO_CONTROLLERS))
                return -EOPNOTSUPP; /* limits asked for that we could not apply */
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -errno;
        (void) executor_cgroup_name(x->header.n, rnd, name);
        if (mkdirat(cg_fd, name, 0755) < 0)
                return -errno;
        fd = openat(cg_fd, name, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                r = -errno;
        if (r == 0 && (hello_flags & EXECUTOR_HELLO_CONTROLLERS)) {
                /* an OOM kill takes the whole command, and only it */
                r = write_file_at(fd, "memory.oom.group", "1");
                if (r == 0 && (x->flags & EXECUTOR_EXEC_MEMORY_MAX)) {
                        snprintf(v, sizeof(v), "%" PRIu64, x->memory_max);
                        r = write_file_at(fd, "memory.max", v);
                }
                if (r == 0 && (x->flags & EXECUTOR_EXEC_TASKS_MAX)) {
                        snprintf(v, sizeof(v), "%" PRIu64, x->tasks_max);
                        r = write_file_at(fd, "pids.max", v);
                }
        }
        if (r < 0) {
                if (fd >= 0)
                        close(fd);
                (void) unlinkat(cg_fd, name, AT_REMOVEDIR);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

/* The memfd must be sealed against change: what we check is what the child runs. */
static int read_spec(int fd, char **ret, size_t *ret_size) {
        int seals = fcntl(fd, F_GET_SEALS);
        struct stat st;
        size_t done = 0;
        char *buf;

        if (seals < 0 || (seals & SEALS_NEEDED) != SEALS_NEEDED)
                return -EPERM;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t) st.st_size > EXECUTOR_SPEC_MAX)
                return -EFBIG;
        buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        while (done < (size_t) st.st_size) {
                ssize_t k = pread(fd, buf + done, (size_t) st.st_size - done, (off_t) done);

                if (k <= 0) {
                        free(buf);
                        return k < 0 ? -errno : -EIO;
                }
                done += (size_t) k;
        }
        *ret = buf;
        *ret_size = done;
        return 0;
}

static void on_exec(const ExecutorExec *x, const int fds[EXECUTOR_EXEC_FDS]) {
        char *buf = NULL, **env = NULL, name[EXECUTOR_CGROUP_NAME_MAX] = "";
        int cgroup_fd = -1, procs_fd = -1, r, err;
        ExecutorSpec spec = {};
        size_t size = 0;
        pid_t pid;
        Entry *e;

        r = read_spec(fds[0], &buf, &size);
        if (r == 0)
                r = executor_spec_parse(buf, size, &spec);
        if (r < 0) {
                log_msg("command %u: bad spec memfd (%s), ignored", x->header.n, strerror(-r));
                goto done;
        }
        if (stopping || n_table >= EXECUTOR_TABLE_MAX || entry_find(x->header.n)) {
                refuse(x->header.n, stopping ? ESHUTDOWN : n_table >= EXECUTOR_TABLE_MAX ? EAGAIN : EEXIST);
                goto done;
        }
        env = build_env(&spec);
        if (!env) {
                refuse(x->header.n, ENOMEM);
                goto done;
        }
        if (hello_flags & EXECUTOR_HELLO_CGROUPS) {
                r = make_cgroup(x, name, &cgroup_fd);
                if (r < 0) {
                        log_msg("command %u: cannot make its cgroup: %s", x->header.n, strerror(-r));
                        refuse(x->header.n, -r);
                        goto done;
                }
        }

        pid = fork_into(cgroup_fd);
        if (pid == -2) {
                procs_fd = openat(cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
                pid = procs_fd >= 0 ? fork() : -1;
        }
        if (pid == 0)
                child(&spec, env, fds, procs_fd);
        err = errno;
        if (procs_fd >= 0)
                close(procs_fd);
        if (cgroup_fd >= 0)
                close(cgroup_fd);
        if (pid < 0) {
                if (name[0])
                        (void) unlinkat(cg_fd, name, AT_REMOVEDIR);
                refuse(x->header.n, err);
                goto done;
        }

        e = &table[n_table++];
        *e = (Entry) { .n = x->header.n, .pid = pid, .started_unsent = true };
        executor_msg_init(&e->started, EXECUTOR_MSG_STARTED, e->n);
        e->started.pid = (uint32_t) pid;
        e->started.start_usec = now_usec();
        memcpy(e->started.cgroup, name, sizeof(name));
done:
        free(env);
        executor_spec_done(&spec);
        free(buf);
}

static void reap(void) {
        struct rusage ru;
        int status;
        pid_t pid;

        while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0)
                for (size_t i = 0; i < n_table; i++)
                        if (table[i].pid == pid && !table[i].exited) {
                                if (WIFEXITED(status))
                                        entry_exited(&table[i], CLD_EXITED, WEXITSTATUS(status), &ru);
                                else
                                        entry_exited(&table[i], WCOREDUMP(status) ? CLD_DUMPED : CLD_KILLED,
                                                     WTERMSIG(status), &ru);
                                break;
                        }
}

static size_t running(void) {
        size_t k = 0;

        for (size_t i = 0; i < n_table; i++)
                k += table[i].pid > 0 && !table[i].exited;
        return k;
}

/* Forgets acknowledged entries whose cgroup is gone (or given up on: the unit's stop
 * removes what is left). rmdir fails while a process of the command lingers. */
static void collect(void) {
        for (size_t i = 0; i < n_table;) {
                Entry *e = &table[i];

                if (e->acked && (!e->started.cgroup[0] || unlinkat(cg_fd, e->started.cgroup, AT_REMOVEDIR) >= 0 ||
                                 errno == ENOENT || now_usec() - e->acked_usec > RMDIR_GIVE_UP_USEC))
                        entry_remove(e);
                else
                        i++;
        }
}

static bool collect_pending(void) {
        for (size_t i = 0; i < n_table; i++)
                if (table[i].acked)
                        return true;
        return false;
}

static void on_ack(uint32_t n) {
        Entry *e = entry_find(n);

        if (!e || !e->exited) {
                log_msg("ACK of command %u, which %s, ignored", n, e ? "still runs" : "is unknown");
                return;
        }
        e->acked = true;
        e->acked_usec = now_usec();
        e->started_unsent = e->exited_unsent = false;
}

/* Reads what sandboxd sent, at most READ_BURST messages (the rest at the next wakeup). */
static void receive(void) {
        for (int k = 0; k < READ_BURST && conn >= 0; k++) {
                union {
                        char buf[CMSG_SPACE(sizeof(int) * EXECUTOR_EXEC_FDS)];
                        struct cmsghdr align;
                } control;
                _Alignas(8) char buf[EXECUTOR_MSG_MAX];
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                                     .msg_controllen = sizeof(control) };
                int fds[EXECUTOR_EXEC_FDS], n_fds = 0, n_rights = 0, n_total = 0;
                bool other_cmsg = false;
                ExecutorMsg m;
                ssize_t size;

                size = recvmsg(conn, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (size < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (size <= 0) { /* EOF, ECONNRESET, ...: dial again, keep the table */
                        disconnect();
                        return;
                }
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
                                other_cmsg = true;
                                continue;
                        }
                        n_rights++;
                        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++, n_total++) {
                                int fd;

                                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                                if (n_fds < EXECUTOR_EXEC_FDS)
                                        fds[n_fds++] = fd;
                                else
                                        close(fd);
                        }
                }

                if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || other_cmsg ||
                    executor_msg_decode(buf, (size_t) size, false, &m) < 0)
                        log_msg("malformed message (%zd bytes), ignored", size);
                else if (m.type == EXECUTOR_MSG_ACK && n_total == 0)
                        on_ack(m.n);
                else if (m.type == EXECUTOR_MSG_EXEC && n_rights == 1 && n_total == EXECUTOR_EXEC_FDS)
                        on_exec(&m.exec, fds);
                else
                        log_msg("message %u with %d fds, ignored", (unsigned) m.type, n_total);
                for (int i = 0; i < n_fds; i++)
                        close(fds[i]);
        }
}

/* 0/1/2 open, so that no received fd lands there and a child's dup2 onto them stays right. */
static void open_std_fds(void) {
        for (int fd = 0; fd < 3; fd++)
                if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
                        _exit(EXIT_FAILURE);
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "socket", required_argument, NULL, 's' },
                { "no-cgroup", no_argument, NULL, 'n' },
                {},
        };
        bool no_cgroup = false;
        sigset_t mask;
        int sfd, c;

        /* first of all: a command (same uid) must not ptrace us or open our /proc/PID/fd */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return EXIT_FAILURE;
        open_std_fds();

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 's':
                        if (optarg[0] != '/' || strlen(optarg) >= sizeof(((struct sockaddr_un) {}).sun_path)) {
                                log_msg("--socket= needs an absolute path shorter than %zu bytes",
                                        sizeof(((struct sockaddr_un) {}).sun_path));
                                return EXIT_FAILURE;
                        }
                        socket_path = optarg;
                        break;
                case 'n':
                        no_cgroup = true;
                        break;
                default:
                        return EXIT_FAILURE;
                }
        if (optind < argc) {
                log_msg("no arguments expected");
                return EXIT_FAILURE;
        }

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
            (sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
                log_msg("signalfd: %s", strerror(errno));
                return EXIT_FAILURE;
        }
        (void) signal(SIGPIPE, SIG_IGN);
        if (!no_cgroup)
                setup_cgroups();

        for (;;) {
                struct pollfd p[2] = { { .fd = sfd, .events = POLLIN }, { .events = POLLIN } };
                int64_t timeout = -1;
                struct signalfd_siginfo si;

                if (stopping && running() == 0)
                        break;
                if (conn < 0 && now_msec() >= dial_at_msec)
                        dial();
                if (conn < 0)
                        timeout = dial_at_msec - now_msec() > 0 ? dial_at_msec - now_msec() : 0;
                if (collect_pending() && (timeout < 0 || timeout > 100))
                        timeout = 100;
                p[1].fd = conn;
                if (want_out)
                        p[1].events |= POLLOUT;
                if (poll(p, conn >= 0 ? 2 : 1, (int) timeout) < 0 && errno != EINTR) {
                        log_msg("poll: %s", strerror(errno));
                        return EXIT_FAILURE;
                }

                while (read(sfd, &si, sizeof(si)) == sizeof(si))
                        if (si.ssi_signo != SIGCHLD)
                                stopping = true; /* the unit stops: no new commands */
                reap(); /* every wakeup: SIGCHLDs coalesce, and a wait4 that finds none is cheap */
                if (conn >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
                        receive();
                collect();
                flush();
        }
        flush(); /* the last EXITED, if the socket takes it */
        return EXIT_SUCCESS;
}
