/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "cgroup.h"
#include "command.h"
#include "executor.h"
#include "io-util.h"
#include "log.h"
#include "scope.h"
#include "session.h"
#include "store.h"
#include "systemd.h"
#include "time-util.h"

/* Per wakeup, at most: a flood from the executor (or a command dialling the listener) waits
 * for the next turn of the loop, as command output does. */
#define READ_BURST 64
#define ACCEPT_BURST 16
/* The executor says HELLO this long after its unit started or its connection dropped. */
#define HELLO_TIMEOUT_USEC (30 * USEC_PER_SEC)
/* ... and EXITED this long after the kernel said the command's process ended. */
#define EXITED_TIMEOUT_USEC (10 * USEC_PER_SEC)
/* ... and STARTED this long after it was given the command (it ignores what it cannot read). */
#define STARTED_TIMEOUT_USEC (30 * USEC_PER_SEC)
/* Restarts of a failing executor: at most this many a minute, then the session's commands fail. */
#define RESTARTS_PER_MINUTE 3
#define SIGKILL_INTERVAL_USEC (200 * USEC_PER_MSEC)

typedef enum ConnState {
        CONN_NONE,   /* nobody connected */
        CONN_HELLO,  /* checked; its HELLO is due */
        CONN_RESYNC, /* it tells what it knows, until READY */
        CONN_READY,
} ConnState;

struct Executor {
        Session *session;
        char *unit, *unit_path;
        char *dir, *socket_path;   /* <runtime>/executor/<sid>, bound at EXECUTOR_SOCKET_DIR in the unit */
        int listen_fd;
        sd_event_source *listen_io;
        int fd;                    /* the executor's connection */
        sd_event_source *io;
        ConnState conn;
        int auth_fd;               /* a new connection, being checked */
        uint32_t flags;            /* of its HELLO */
        uid_t uid;
        char *cgroup_dir;          /* the unit's cgroup in the unified (v2) hierarchy */

        int main_pidfd;            /* its main process, once it connected */
        sd_event_source *main_io;
        bool hello_check;          /* HELLO is late: the state read decides */
        Pid1Call *start_call, *state_call;
        UnitState state;
        uint32_t main_pid;
        bool running;              /* started by us (or found running), not yet seen to end */
        bool broken;               /* failed too often: the session's commands fail */
        uint64_t failures[RESTARTS_PER_MINUTE];
        sd_event_source *hello_timer;
        sd_event_source *flush_defer; /* EXECs queued: sent on the next turn of the loop */
        sd_event_source *retry_timer; /* PID 1 still has the previous unit of the name */
        sd_event_source *fail_defer;  /* broken while its session starts: that fails, from a clean stack */
        unsigned start_retries;
};

static void executor_fail(Executor *e, const char *reason);
static void executor_restart(Executor *e);
static int on_retry_timer(sd_event_source *es, uint64_t usec, void *userdata);
static void executor_refresh(Executor *e);
static void arm_hello_timer(Executor *e);
static int on_main_pidfd(sd_event_source *es, int fd, uint32_t revents, void *userdata);
static void executor_flush_queue(Executor *e);
static int executor_start_unit(Executor *e);
static void exec_finish(Command *c, int32_t code, int32_t status, const ExecutorExited *x);

/* --- helpers ------------------------------------------------------------------------ */

static Command *find_command(Session *s, uint32_t n) {
        Command *c;

        LIST_FOREACH(commands, c, s->commands)
                if (c->n == n)
                        return c;
        return NULL;
}

static bool exec_is_live(const Command *c) {
        return c->exec && command_status_is_running(c) && (c->exec->state == EXEC_SENT || c->exec->state == EXEC_STARTED);
}

/* Signals every process of the command's cgroup, and its main process wherever it went (a
 * command can move itself within the delegated subtree), with the session's uid: the power
 * a command has over itself, no more. */
static int exec_kill(Command *c, int sig) {
        Executor *e = c->session->executor;
        CommandExec *x = c->exec;
        int r = -ESRCH, k;

        if (!x || x->state != EXEC_STARTED)
                return -ESRCH;
        if (sig == SIGKILL)
                x->killed = true; /* its end is that, should a frozen executor not say so */
        if (x->cgroup_dir)
                r = cgroup_kill_as(e->uid, x->cgroup_dir, sig, NULL);
        if (x->pidfd >= 0 && !x->gone) {
                k = pidfd_kill_as(e->uid, x->pidfd, sig);
                if (r < 0)
                        r = k;
        }
        return r < 0 && r != -ESRCH && r != -ENOENT ? r : 0;
}

/* --- the connection ----------------------------------------------------------------- */

static int send_msg(Executor *e, const void *msg, size_t size, const int *fds, unsigned n_fds) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * EXECUTOR_EXEC_FDS)];
        } control = {};
        struct iovec iov = { .iov_base = (void *) msg, .iov_len = size };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (e->fd < 0 || e->conn < CONN_RESYNC)
                return -ENOTCONN;
        if (n_fds > 0) {
                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
        }
        /* The executor reads as fast as it can; a full buffer means it does not: a stuck
         * executor is a failed one. */
        if (sendmsg(e->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                return -errno;
        return 0;
}

static void send_ack(Executor *e, uint32_t n) {
        ExecutorAck a;

        executor_msg_init(&a, EXECUTOR_MSG_ACK, n);
        (void) send_msg(e, &a, sizeof(a), NULL, 0); /* lost with the connection: it tells again */
}

static void conn_close(Executor *e) {
        e->io = sd_event_source_disable_unref(e->io);
        e->fd = safe_close(e->fd);
        e->conn = CONN_NONE;
}

static int on_hello_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        Executor *e = userdata;

        e->hello_timer = sd_event_source_disable_unref(e->hello_timer);
        if (e->conn >= CONN_RESYNC)
                return 0;
        if (e->session->frozen) /* it cannot speak while frozen: wait */
                return sd_event_add_time_relative(e->session->manager->event, &e->hello_timer, CLOCK_MONOTONIC,
                                                  HELLO_TIMEOUT_USEC, USEC_PER_SEC, on_hello_timer, e);
        if (e->auth_fd >= 0) {
                /* it did dial: we wait for PID 1 to say who its main process is */
                arm_hello_timer(e);
                return 0;
        }
        e->hello_check = true;
        executor_refresh(e); /* note_state() decides */
        return 0;
}

static void arm_hello_timer(Executor *e) {
        if (e->hello_timer)
                return;
        (void) sd_event_add_time_relative(e->session->manager->event, &e->hello_timer, CLOCK_MONOTONIC,
                                          HELLO_TIMEOUT_USEC, USEC_PER_SEC, on_hello_timer, e);
}

static void violation(Executor *e, const char *what) {
        log_warning("The executor of session %s broke the protocol (%s): stopping it.", e->session->id, what);
        executor_fail(e, EXECUTOR_LOST_FAILED);
}

static int on_pidfd(sd_event_source *es, int fd, uint32_t revents, void *userdata);

static void on_started(Executor *e, const ExecutorMsg *msg) {
        Session *s = e->session;
        Command *c = find_command(s, msg->n);
        CommandExec *x;

        if (c && c->in_executor && command_status_is_terminal(c->result.status)) {
                send_ack(e, c->n); /* its result is recorded (or it was lost): it may forget it */
                return;
        }
        if (!c || !c->exec || c->exec->state == EXEC_QUEUED) {
                violation(e, "STARTED for a command it was not given");
                return;
        }
        x = c->exec;
        if (x->told) {
                violation(e, "STARTED twice");
                return;
        }
        x->told = true;
        if (x->state == EXEC_EXITED || !command_status_is_running(c)) {
                send_ack(e, c->n); /* recorded already: it may forget it */
                return;
        }
        if (x->state == EXEC_STARTED) {
                /* told again after a reconnect: the same process */
                if ((pid_t) msg->started.pid != x->pid)
                        violation(e, "STARTED with another pid");
                return;
        }
        if (!!msg->started.cgroup[0] != !!(e->flags & EXECUTOR_HELLO_CGROUPS)) {
                violation(e, "a cgroup name where it has none, or none where it has them");
                return;
        }
        x->pid = (pid_t) msg->started.pid;
        if (msg->started.cgroup[0] && asprintf(&x->cgroup_dir, "%s/%s", e->cgroup_dir, msg->started.cgroup) < 0)
                x->cgroup_dir = NULL;
        /* The process may be gone (and reaped) already: then EXITED follows at once. */
        x->pidfd = (int) syscall(SYS_pidfd_open, x->pid, 0);
        if (x->pidfd >= 0 &&
            sd_event_add_io(s->manager->event, &x->pidfd_io, x->pidfd, EPOLLIN, on_pidfd, c) < 0)
                x->pidfd = safe_close(x->pidfd);
        x->state = EXEC_STARTED;
        x->started_timer = sd_event_source_disable_unref(x->started_timer);
        /* as systemd names cgroups, for the sampling of its usage (cgroup.h) */
        free(c->cgroup);
        c->cgroup = NULL;
        if (msg->started.cgroup[0] && asprintf(&c->cgroup, "%s/%s", e->state.control_group, msg->started.cgroup) < 0)
                c->cgroup = NULL;
        command_process_started(c);
}

static void on_exited(Executor *e, const ExecutorMsg *msg) {
        Command *c = find_command(e->session, msg->n);
        CommandExec *x = c ? c->exec : NULL;

        if (c && c->in_executor && command_status_is_terminal(c->result.status)) {
                send_ack(e, c->n);
                return;
        }
        if (!x || x->state == EXEC_QUEUED) {
                violation(e, "EXITED for a command it was not given");
                return;
        }
        if (x->state == EXEC_EXITED || !command_status_is_running(c)) {
                x->told = true;
                send_ack(e, c->n);
                return;
        }
        if (x->state == EXEC_SENT ? msg->exited.code != 0 : !x->told) {
                violation(e, "EXITED before STARTED");
                return;
        }
        x->told = true;
        exec_finish(c, msg->exited.code, msg->exited.status, &msg->exited);
}

/* The executor has told all it knows: what it did not mention, it does not have. */
static void on_ready(Executor *e) {
        Command *c, *next;

        e->conn = CONN_READY;
        e->hello_timer = sd_event_source_disable_unref(e->hello_timer);
        session_executor_ready(e->session);
        LIST_FOREACH_SAFE(commands, c, next, e->session->commands) {
                if (!exec_is_live(c) || c->exec->told)
                        continue;
                if (c->exec->state == EXEC_SENT && c->start_unconfirmed)
                        command_never_started(c);
                else
                        command_lose(c, EXECUTOR_LOST_DIED);
        }
        executor_flush_queue(e);
}

static int on_conn(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Executor *e = userdata;

        for (unsigned i = 0; i < READ_BURST && e->fd >= 0; i++) {
                union {
                        ExecutorMsg align;
                        char buf[EXECUTOR_MSG_MAX];
                } u;
                char control[CMSG_SPACE(sizeof(int) * 8)];
                struct iovec iov = { .iov_base = u.buf, .iov_len = sizeof(u.buf) };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                                     .msg_controllen = sizeof(control) };
                ExecutorMsg msg;
                ssize_t n;

                n = recvmsg(e->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return 0;
                if (n <= 0) {
                        /* it dials again; until then its commands run on, watched by their pidfds */
                        log_info("The executor of session %s hung up.", e->session->id);
                        conn_close(e);
                        arm_hello_timer(e);
                        return 0;
                }
                if (mh.msg_controllen > 0) {
                        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
                                        for (size_t k = 0; k < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++)
                                                safe_close(((int *) CMSG_DATA(cm))[k]);
                        violation(e, "file descriptors sent");
                        return 0;
                }
                if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || executor_msg_decode(u.buf, (size_t) n, true, &msg) < 0) {
                        violation(e, "a malformed message");
                        return 0;
                }
                if ((e->conn == CONN_HELLO) != (msg.type == EXECUTOR_MSG_HELLO) ||
                    (msg.type == EXECUTOR_MSG_READY && e->conn != CONN_RESYNC)) {
                        violation(e, "a message out of order");
                        return 0;
                }
                switch (msg.type) {
                case EXECUTOR_MSG_HELLO: {
                        Command *c;

                        e->flags = msg.hello.flags;
                        e->conn = CONN_RESYNC;
                        LIST_FOREACH(commands, c, e->session->commands)
                                if (c->exec)
                                        c->exec->told = false;
                        log_debug("The executor of session %s says hello (flags %" PRIu32 ", %" PRIu32 " known).",
                                  e->session->id, e->flags, msg.hello.known);
                        break;
                }
                case EXECUTOR_MSG_STARTED:
                        on_started(e, &msg);
                        break;
                case EXECUTOR_MSG_EXITED:
                        on_exited(e, &msg);
                        break;
                case EXECUTOR_MSG_READY:
                        on_ready(e);
                        break;
                default:
                        violation(e, "a message of sandboxd's");
                }
        }
        return 0;
}

/* Only the unit's main process may speak for it: the kernel's word on the peer's pid and
 * uid against PID 1's on the unit. Commands can dial the socket too (it is in their
 * namespace): they are hung up on, and the executor's own connection stays as it is. */
static void auth_decide(Executor *e) {
        struct ucred cred;
        socklen_t l = sizeof(cred);
        uid_t uid;

        if (e->auth_fd < 0)
                return;
        (void) sd_event_source_set_enabled(e->listen_io, SD_EVENT_ON);
        if (getsockopt(e->auth_fd, SOL_SOCKET, SO_PEERCRED, &cred, &l) < 0 ||
            scope_dynamic_uid(e->session->dynamic_user, &uid) < 0 || cred.uid != uid || e->main_pid == 0 ||
            (uint32_t) cred.pid != e->main_pid || !e->cgroup_dir) {
                log_debug("Hung up on a peer of the executor socket of session %s (pid %d, uid %u).", e->session->id,
                          (int) cred.pid, (unsigned) cred.uid);
                e->auth_fd = safe_close(e->auth_fd);
                return;
        }
        /* the executor dials again: its old connection is over */
        conn_close(e);
        e->fd = TAKE_FD(e->auth_fd);
        if (sd_event_add_io(e->session->manager->event, &e->io, e->fd, EPOLLIN, on_conn, e) < 0) {
                conn_close(e);
                return;
        }
        e->uid = uid;
        (void) session_userdb_update(e->session);
        e->conn = CONN_HELLO;
        if (e->main_pidfd < 0) {
                e->main_pidfd = (int) syscall(SYS_pidfd_open, e->main_pid, 0);
                if (e->main_pidfd < 0 ||
                    sd_event_add_io(e->session->manager->event, &e->main_io, e->main_pidfd, EPOLLIN, on_main_pidfd, e) < 0) {
                        /* it went already */
                        e->main_pidfd = safe_close(e->main_pidfd);
                        executor_fail(e, EXECUTOR_LOST_DIED);
                }
        }
}

static int on_listen(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Executor *e = userdata;

        for (unsigned i = 0; i < ACCEPT_BURST && e->auth_fd < 0; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                struct ucred cred;
                socklen_t l = sizeof(cred);

                if (cfd < 0)
                        return 0;
                if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &l) < 0 ||
                    (e->main_pid != 0 && (uint32_t) cred.pid != e->main_pid)) {
                        safe_close(cfd); /* not the unit's main process as far as we know */
                        continue;
                }
                e->auth_fd = cfd;
                if (e->main_pid != 0 && e->cgroup_dir)
                        auth_decide(e);
                else {
                        /* one check at a time: PID 1 tells who the main process is */
                        (void) sd_event_source_set_enabled(e->listen_io, SD_EVENT_OFF);
                        executor_refresh(e); /* ends in auth_decide() */
                }
        }
        return 0;
}

/* --- commands -------------------------------------------------------------------------- */

static void exec_timer_set(Command *c, uint64_t usec_monotonic);

static void exec_finish(Command *c, int32_t code, int32_t status, const ExecutorExited *ex) {
        Session *s = c->session;
        CommandExec *x = c->exec;
        CommandResult res;
        bool oom = false;
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        if (x->cgroup_dir && (s->executor->flags & EXECUTOR_HELLO_CONTROLLERS)) {
                CgroupUsage u;
                /* v2: its own cgroup counts its OOM kills (the dynamic user's, mode 0700) */
                oom = cgroup_read_usage_dir(s->executor->uid, x->cgroup_dir, &u) >= 0 && u.oom_kills != UINT64_MAX &&
                      u.oom_kills > 0;
        }
        if (s->cgroup) {
                uint64_t v;
                /* and as for a unit (v1: the only evidence): the slice's counter rose while it ran */
                if (cgroup_read_oom_counter(s->cgroup, &v) >= 0) {
                        oom = oom || v > s->oom_seen;
                        s->oom_seen = MAX(s->oom_seen, v);
                }
        }
        (void) command_result_from_exit(x->timed_out, code, status, oom, &res);
        if (ex) {
                uint64_t start = x->start_usec, end = ex->exit_usec;
                /* the executor's clock, but within what we saw ourselves */
                if (end < start || end > now)
                        end = now;
                res.duration_ms = (end - start) / USEC_PER_MSEC;
                res.usage.cpu_usec = ex->utime_usec + ex->stime_usec;
                res.usage.memory_bytes = ex->maxrss_bytes;
        } else
                res.duration_ms = (now - x->start_usec) / USEC_PER_MSEC;
        res.usage.cpu_usec = MAX(res.usage.cpu_usec, c->cpu_sampled_usec);
        res.usage.memory_bytes = MAX(res.usage.memory_bytes, c->memory_peak);
        /* rusage's peak RSS counts mapped files charged to other cgroups: the command's
         * memory cannot have been above its session's limit */
        if (s->limits.memory_max > 0 && res.usage.memory_bytes > s->limits.memory_max)
                res.usage.memory_bytes = s->limits.memory_max;
        res.usage.tasks = MAX(c->tasks_peak, code != 0 ? 1u : 0u);

        x->state = EXEC_EXITED;
        x->timer = sd_event_source_disable_unref(x->timer);
        x->started_timer = sd_event_source_disable_unref(x->started_timer);
        x->pidfd_io = sd_event_source_disable_unref(x->pidfd_io);
        send_ack(s->executor, c->n);
        /* what it left behind goes with it, as with the unit of a command */
        if (x->cgroup_dir)
                (void) cgroup_kill_as(s->executor->uid, x->cgroup_dir, SIGKILL, NULL);
        command_end(c, &res);
}

static int on_exited_deadline(sd_event_source *es, uint64_t usec, void *userdata) {
        Command *c = userdata;
        Session *s = c->session;

        c->exec->timer = sd_event_source_disable_unref(c->exec->timer);
        if (!exec_is_live(c))
                return 0;
        if (s->frozen) {
                if (c->exec->killed) {
                        /* A frozen executor cannot report; SIGKILL is what ended it. */
                        exec_finish(c, CLD_KILLED, SIGKILL, NULL);
                        return 0;
                }
                exec_timer_set(c, now_usec(CLOCK_MONOTONIC) + EXITED_TIMEOUT_USEC);
                return 0;
        }
        log_warning("The executor of session %s did not report the end of command %u.", s->id, c->n);
        executor_fail(s->executor, EXECUTOR_LOST_FAILED);
        return 0;
}

static int on_pidfd(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Command *c = userdata;
        CommandExec *x = c->exec;

        x->pidfd_io = sd_event_source_disable_unref(x->pidfd_io);
        x->gone = true;
        if (!exec_is_live(c))
                return 0;
        if (c->session->frozen && x->killed) {
                exec_finish(c, CLD_KILLED, SIGKILL, NULL);
                return 0;
        }
        /* The executor reports it now (it reaps it): if it does not, it is broken. */
        x->timer = sd_event_source_disable_unref(x->timer);
        (void) sd_event_add_time_relative(c->session->manager->event, &x->timer, CLOCK_MONOTONIC, EXITED_TIMEOUT_USEC,
                                          10 * USEC_PER_MSEC, on_exited_deadline, c);
        return 0;
}

/* Timeout, stop: SIGTERM, KillGraceSec= later SIGKILL, then SIGKILL again until it ends
 * (a process can fork between our read of cgroup.procs and the signal). */
static int on_exec_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        Command *c = userdata;
        CommandExec *x = c->exec;
        Manager *m = c->session->manager;

        x->timer = sd_event_source_disable_unref(x->timer);
        if (!exec_is_live(c) || x->gone)
                return 0;
        if (!x->stopping) {
                x->timed_out = true;
                x->stopping = true;
                log_info("Command %s (%s) timed out.", c->request_id, c->unit);
                (void) exec_kill(c, SIGTERM);
                exec_timer_set(c, now_usec(CLOCK_MONOTONIC) + m->config.kill_grace_usec);
                return 0;
        }
        x->killed = true;
        x->kills++;
        (void) exec_kill(c, SIGKILL);
        exec_timer_set(c, now_usec(CLOCK_MONOTONIC) + SIGKILL_INTERVAL_USEC);
        return 0;
}

static void exec_timer_set(Command *c, uint64_t usec) {
        CommandExec *x = c->exec;
        sd_event_time_handler_t fn = x->gone ? on_exited_deadline : on_exec_timer;

        x->timer = sd_event_source_disable_unref(x->timer);
        if (usec == USEC_INFINITY)
                return;
        if (sd_event_add_time(c->session->manager->event, &x->timer, CLOCK_MONOTONIC, usec, 10 * USEC_PER_MSEC,
                              fn, c) < 0)
                log_warning("Failed to arm the timer of command %s, ignoring.", c->request_id);
}

static void exec_arm_timeout(Command *c) {
        CommandExec *x = c->exec;
        uint64_t now = now_usec(CLOCK_REALTIME);

        if (x->deadline_usec == USEC_INFINITY || x->stopping)
                return;
        exec_timer_set(c, now_usec(CLOCK_MONOTONIC) + (x->deadline_usec > now ? x->deadline_usec - now : 0));
}

static int on_started_deadline(sd_event_source *es, uint64_t usec, void *userdata) {
        Command *c = userdata;
        CommandExec *x = c->exec;

        x->started_timer = sd_event_source_disable_unref(x->started_timer);
        if (!exec_is_live(c) || x->state != EXEC_SENT)
                return 0;
        if (c->session->frozen)
                return sd_event_add_time_relative(c->session->manager->event, &x->started_timer, CLOCK_MONOTONIC,
                                                  STARTED_TIMEOUT_USEC, 10 * USEC_PER_MSEC, on_started_deadline, c);
        violation(c->session->executor, "no STARTED in time");
        return 0;
}

static int exec_send(Executor *e, Command *c) {
        CommandExec *x = c->exec;
        ExecutorExec msg;
        int r;

        executor_msg_init(&msg, EXECUTOR_MSG_EXEC, c->n);
        r = send_msg(e, &msg, sizeof(msg), x->fds, EXECUTOR_EXEC_FDS);
        if (r < 0)
                return r;
        for (unsigned k = 0; k < EXECUTOR_EXEC_FDS; k++)
                x->fds[k] = safe_close(x->fds[k]);
        x->state = EXEC_SENT;
        x->start_usec = now_usec(CLOCK_MONOTONIC);
        exec_arm_timeout(c);
        (void) sd_event_add_time_relative(e->session->manager->event, &x->started_timer, CLOCK_MONOTONIC,
                                          STARTED_TIMEOUT_USEC, 10 * USEC_PER_MSEC, on_started_deadline, c);
        command_accepted(c);
        return 0;
}

static int on_flush(sd_event_source *es, void *userdata) {
        executor_flush_queue(userdata);
        return 0;
}

static void executor_flush_queue(Executor *e) {
        Command *c, *prev = NULL;

        if (e->conn != CONN_READY)
                return;
        /* oldest first: the list is newest first */
        for (c = e->session->commands; c && c->commands_next; c = c->commands_next)
                ;
        for (; c; c = prev) {
                prev = c->commands_prev;
                if (!c->exec || c->exec->state != EXEC_QUEUED)
                        continue;
                int r = exec_send(e, c);
                if (r < 0) {
                        log_warning_errno(r, "Failed to hand command %u to the executor of session %s: %m", c->n,
                                          e->session->id);
                        executor_fail(e, EXECUTOR_LOST_FAILED);
                        return;
                }
        }
}

static int spec_memfd(const char *exe, const char *cwd, char * const *argv, char * const *env, uint32_t flags) {
        _cleanup_free_ char *spec = NULL;
        size_t size;
        int r;

        r = executor_spec_format(exe, cwd, argv, env, flags, &spec, &size);
        if (r < 0)
                return r;
        return sealed_memfd("sandboxd-exec-spec", spec, size);
}

int executor_exec(Executor *e, Command *c, const char *exe, const char *cwd, char * const *argv, char * const *env,
                  int stdin_fd, int stdout_fd, int stderr_fd, uint64_t timeout_usec) {
        CommandExec *x;
        int r;

        if (e->broken)
                return -EHOSTDOWN;
        x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        x->pidfd = -EBADF;
        for (unsigned k = 0; k < EXECUTOR_EXEC_FDS; k++)
                x->fds[k] = -EBADF;
        x->deadline_usec = timeout_usec == USEC_INFINITY ? USEC_INFINITY : now_usec(CLOCK_REALTIME) + timeout_usec;
        c->exec = x;

        r = x->fds[0] = spec_memfd(exe, cwd, argv, env, c->tty ? EXECUTOR_SPEC_TTY : 0);
        if (r >= 0) {
                int in[3] = { stdin_fd, stdout_fd, stderr_fd };
                for (unsigned k = 0; k < 3 && r >= 0; k++)
                        if ((x->fds[k + 1] = fcntl(in[k], F_DUPFD_CLOEXEC, 3)) < 0)
                                r = -errno;
        }
        if (r < 0) {
                command_exec_free(c);
                return r;
        }
        x->state = EXEC_QUEUED;
        /* sent from the loop, never from here: its start completes after the caller has its handle */
        if (e->conn == CONN_READY)
                (void) sd_event_source_set_enabled(e->flush_defer, SD_EVENT_ONESHOT);
        return 0;
}

int executor_recover_command(Executor *e, Command *c, uint64_t deadline_usec) {
        CommandExec *x = calloc(1, sizeof(*x));

        if (!x)
                return -ENOMEM;
        x->pidfd = -EBADF;
        for (unsigned k = 0; k < EXECUTOR_EXEC_FDS; k++)
                x->fds[k] = -EBADF;
        x->deadline_usec = deadline_usec;
        x->state = EXEC_SENT; /* the executor tells us what became of it */
        x->start_usec = now_usec(CLOCK_MONOTONIC) - MIN(now_usec(CLOCK_MONOTONIC),
                        (now_usec(CLOCK_REALTIME) - MIN(now_usec(CLOCK_REALTIME), c->created_realtime_usec)));
        c->exec = x;
        exec_arm_timeout(c);
        return command_sample(c);
}

int executor_read_usage(Command *c, CgroupUsage *ret) {
        if (!c->exec || !c->exec->cgroup_dir || c->exec->state != EXEC_STARTED)
                return -ENOENT;
        return cgroup_read_usage_dir(c->session->executor->uid, c->exec->cgroup_dir, ret);
}

int executor_signal(Command *c, int sig) {
        return exec_kill(c, sig);
}

int executor_stop(Command *c) {
        CommandExec *x = c->exec;
        Manager *m = c->session->manager;

        if (!x)
                return 0;
        if (x->state == EXEC_QUEUED) {
                /* never handed over: it ends here */
                command_start_failed(c, "stopped before the executor took it");
                return 0;
        }
        if (x->stopping || x->state != EXEC_STARTED) {
                /* SENT: the STARTED answer brings the signal (pending_signal) */
                if (x->state == EXEC_SENT)
                        c->pending_signal = SIGTERM;
                x->stopping = true;
                exec_timer_set(c, now_usec(CLOCK_MONOTONIC) + m->config.kill_grace_usec);
                return 0;
        }
        x->stopping = true;
        (void) exec_kill(c, SIGTERM);
        exec_timer_set(c, now_usec(CLOCK_MONOTONIC) + m->config.kill_grace_usec);
        return 0;
}

void command_exec_free(Command *c) {
        CommandExec *x = c->exec;

        if (!x)
                return;
        for (unsigned k = 0; k < EXECUTOR_EXEC_FDS; k++)
                safe_close(x->fds[k]);
        sd_event_source_disable_unref(x->pidfd_io);
        sd_event_source_disable_unref(x->timer);
        sd_event_source_disable_unref(x->started_timer);
        safe_close(x->pidfd);
        free(x->cgroup_dir);
        free(x);
        c->exec = NULL;
}

/* --- the unit ---------------------------------------------------------------------------- */

/* Its main process ended (the kernel says so, through a pidfd taken when it connected):
 * whatever PID 1 makes of the unit now, this executor is gone. No D-Bus match per session:
 * a host has more sessions than dbus-daemon allows match rules. */
static int on_main_pidfd(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Executor *e = userdata;

        e->main_io = sd_event_source_disable_unref(e->main_io);
        e->main_pidfd = safe_close(e->main_pidfd);
        log_warning("The executor of session %s (pid %u) is gone.", e->session->id, e->main_pid);
        e->main_pid = 0;
        executor_fail(e, EXECUTOR_LOST_DIED);
        return 0;
}

static void note_state(Executor *e) {
        Session *s = e->session;
        bool down = e->state.job_id == 0 && (streq(e->state.load_state, "not-found") ||
                                             streq(e->state.active_state, "inactive") ||
                                             streq(e->state.active_state, "failed"));

        if (e->state.control_group[0] == '/' && !e->cgroup_dir) {
                (void) cgroup_unified_dir(e->state.control_group, NULL, &e->cgroup_dir);
                if (!s->cgroup) {
                        /* the slice's cgroup is the parent of the unit's */
                        const char *slash = strrchr(e->state.control_group, '/');
                        s->cgroup = strndup(e->state.control_group, (size_t) (slash - e->state.control_group));
                }
        }
        if (e->state.main_pid != 0 && e->main_pidfd < 0)
                e->main_pid = e->state.main_pid;
        if (streq(e->state.active_state, "activating") || streq(e->state.active_state, "active"))
                (void) session_userdb_update(s);

        if (e->hello_check) {
                /* its HELLO is late: fine while PID 1 is still starting it */
                e->hello_check = false;
                if (e->conn >= CONN_RESYNC)
                        return;
                if (!down && (e->state.job_id != 0 || streq(e->state.active_state, "activating") || e->start_call)) {
                        arm_hello_timer(e);
                        return;
                }
                log_warning("The executor of session %s did not say hello in time (%s).", s->id,
                            e->state.active_state);
                executor_fail(e, down ? EXECUTOR_LOST_DIED : EXECUTOR_LOST_FAILED);
                return;
        }
        if (down && e->running && e->main_pidfd < 0 && !e->start_call) {
                /* found down (at recovery, or it never connected) */
                log_warning("The executor of session %s is gone (%s, %s).", s->id, e->state.active_state,
                            e->state.result);
                e->running = false;
                executor_fail(e, EXECUTOR_LOST_DIED);
        }
}

static int on_state(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Executor *e = userdata;

        e->state_call = pid1_call_cancel(e->state_call);
        if (sd_bus_message_is_method_error(reply, NULL))
                log_warning("Failed to read the state of %s, ignoring: %s", e->unit, systemd_error_message(reply));
        else if (systemd_read_unit_state(reply, &e->state) >= 0)
                note_state(e);
        auth_decide(e);
        return 0;
}

static int on_unit_state(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Executor *e = userdata;

        e->state_call = pid1_call_cancel(e->state_call);
        e->state.job_id = 0;
        if (sd_bus_message_is_method_error(reply, NULL) || systemd_read_unit_state(reply, &e->state) < 0) {
                auth_decide(e);
                return 0;
        }
        if (streq(e->state.load_state, "not-found")) {
                note_state(e);
                auth_decide(e);
                return 0;
        }
        if (systemd_get_unit_state_async(e->session->manager->pid1, &e->state_call, e->unit_path,
                                         "org.freedesktop.systemd1.Service", on_state, e) < 0)
                auth_decide(e);
        return 0;
}

static void executor_refresh(Executor *e) {
        if (e->state_call)
                return; /* its answer ends in auth_decide() too */
        e->state.main_pid = 0;
        if (systemd_get_unit_state_async(e->session->manager->pid1, &e->state_call, e->unit_path,
                                         "org.freedesktop.systemd1.Unit", on_unit_state, e) < 0)
                auth_decide(e);
}

static int on_unit_started(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Executor *e = userdata;

        e->start_call = pid1_call_cancel(e->start_call);
        if (sd_bus_message_is_method_error(reply, "org.freedesktop.systemd1.UnitExists") && e->start_retries < 100) {
                /* the previous one is still being stopped or unloaded: again in a moment */
                e->start_retries++;
                (void) sd_event_add_time_relative(e->session->manager->event, &e->retry_timer, CLOCK_MONOTONIC,
                                                  100 * USEC_PER_MSEC, 10 * USEC_PER_MSEC, on_retry_timer, e);
                return 0;
        }
        if (sd_bus_message_is_method_error(reply, NULL)) {
                log_error("Failed to start %s: %s", e->unit, systemd_error_message(reply));
                executor_fail(e, EXECUTOR_LOST_FAILED);
                return 0;
        }
        e->running = true;
        arm_hello_timer(e);
        executor_refresh(e);
        return 0;
}

static int executor_start_unit(Executor *e) {
        Session *s = e->session;
        int r;

        e->running = false;
        e->main_pid = 0;
        r = session_start_executor_unit(s, e->unit, e->dir, &e->start_call, on_unit_started, e);
        if (r < 0)
                return log_error_errno(r, "Failed to ask systemd to start %s: %m", e->unit);
        return 0;
}

/* Starts the next executor under the same name: its failed state goes first, and while
 * PID 1 still has the previous unit (stopping, or not yet unloaded) it is asked again. */
static void executor_restart(Executor *e) {
        Session *s = e->session;

        if (!(s->state == SESSION_ACTIVE || s->state == SESSION_STARTING) || e->broken || e->start_call)
                return;
        (void) systemd_reset_failed_unit_async(s->manager->pid1, e->unit, NULL, NULL);
        (void) executor_start_unit(e);
}

static int on_retry_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        Executor *e = userdata;

        e->retry_timer = sd_event_source_disable_unref(e->retry_timer);
        executor_restart(e);
        return 0;
}

static int on_fail_defer(sd_event_source *es, void *userdata) {
        Executor *e = userdata;

        session_executor_failed(e->session, "its executor failed to start 3 times"); /* frees e */
        return 0;
}

/* Ends what the executor had (lost), stops its unit and runs a new one, at most
 * RESTARTS_PER_MINUTE times a minute; after that the session's commands fail until it
 * closes (a session still starting fails). */
static void executor_fail(Executor *e, const char *reason) {
        Session *s = e->session;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        Command *c, *next;

        conn_close(e);
        e->hello_timer = sd_event_source_disable_unref(e->hello_timer);
        e->main_io = sd_event_source_disable_unref(e->main_io);
        e->main_pidfd = safe_close(e->main_pidfd);
        e->main_pid = 0;
        free(e->cgroup_dir);
        e->cgroup_dir = NULL;
        LIST_FOREACH_SAFE(commands, c, next, s->commands)
                if (exec_is_live(c)) {
                        if (c->exec->cgroup_dir && e->uid > 0)
                                (void) cgroup_kill_as(e->uid, c->exec->cgroup_dir, SIGKILL, NULL);
                        command_lose(c, reason);
                }
        if (s->state != SESSION_ACTIVE && s->state != SESSION_CLOSING && s->state != SESSION_STARTING)
                return;

        memmove(e->failures + 1, e->failures, sizeof(e->failures) - sizeof(e->failures[0]));
        e->failures[0] = now;
        if (e->failures[RESTARTS_PER_MINUTE - 1] != 0 && now - e->failures[RESTARTS_PER_MINUTE - 1] < 60 * USEC_PER_SEC) {
                log_error("The executor of session %s failed %u times in a minute: its commands fail from now on.",
                          s->id, RESTARTS_PER_MINUTE);
                e->broken = true;
                LIST_FOREACH_SAFE(commands, c, next, s->commands)
                        if (c->exec && c->exec->state == EXEC_QUEUED)
                                command_start_failed(c, "the session's executor keeps failing");
                if (s->state == SESSION_STARTING && !e->fail_defer &&
                    sd_event_add_defer(s->manager->event, &e->fail_defer, on_fail_defer, e) >= 0)
                        (void) sd_event_source_set_enabled(e->fail_defer, SD_EVENT_ONESHOT);
        }
        /* what is left of it goes (KillMode=control-group); the next start waits for that */
        if (e->running) {
                e->running = false;
                (void) systemd_stop_unit_async(s->manager->pid1, e->unit, NULL, NULL);
        }
        e->start_retries = 0;
        executor_restart(e);
}

/* --- life ------------------------------------------------------------------------------------ */

static int executor_listen(Executor *e) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int r;

        r = store_mkdir_p(e->dir, 0700);
        if (r < 0)
                return r;
        /* the executor's uid passes through it (bound at EXECUTOR_SOCKET_DIR); its parent
         * stays root's alone */
        if (chmod(e->dir, 0755) < 0)
                return -errno;
        if (strlen(e->socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, e->socket_path);
        (void) unlink(e->socket_path);
        e->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (e->listen_fd < 0)
                return -errno;
        if (bind(e->listen_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || chmod(e->socket_path, 0666) < 0 ||
            listen(e->listen_fd, 8) < 0)
                return -errno;
        return sd_event_add_io(e->session->manager->event, &e->listen_io, e->listen_fd, EPOLLIN, on_listen, e);
}

int executor_new(Session *s, bool recovering, Executor **ret) {
        Manager *m = s->manager;
        Executor *e;
        int r;

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->session = s;
        e->listen_fd = e->fd = e->auth_fd = e->main_pidfd = -EBADF;
        if (asprintf(&e->unit, "sandboxd-%s-exec.service", s->id) < 0 ||
            asprintf(&e->dir, "%s/executor/%s", m->runtime_dir, s->id) < 0 ||
            asprintf(&e->socket_path, "%s/sock", e->dir) < 0) {
                r = -ENOMEM;
                goto fail;
        }
        r = systemd_unit_path(e->unit, &e->unit_path);
        if (r < 0)
                goto fail;
        r = executor_listen(e);
        if (r < 0) {
                log_error_errno(r, "Failed to listen for the executor of session %s: %m", s->id);
                goto fail;
        }
        r = sd_event_add_defer(m->event, &e->flush_defer, on_flush, e);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(e->flush_defer, SD_EVENT_OFF);
        if (recovering) {
                /* what it is now: it dials again, or it is gone */
                e->running = true;
                executor_refresh(e);
                arm_hello_timer(e);
        } else {
                r = executor_start_unit(e);
                if (r < 0)
                        goto fail;
        }
        *ret = e;
        return 0;

fail:
        executor_free(e);
        return r;
}

void executor_remove(Executor *e) {
        if (!e)
                return;
        /* Called from deep inside its own callbacks (an EXITED ends the last command of a
         * closing session): everything stops here, the memory goes with the session. */
        conn_close(e);
        e->auth_fd = safe_close(e->auth_fd);
        e->listen_io = sd_event_source_disable_unref(e->listen_io);
        e->listen_fd = safe_close(e->listen_fd);
        e->hello_timer = sd_event_source_disable_unref(e->hello_timer);
        e->flush_defer = sd_event_source_disable_unref(e->flush_defer);
        e->retry_timer = sd_event_source_disable_unref(e->retry_timer);
        e->main_io = sd_event_source_disable_unref(e->main_io);
        e->main_pidfd = safe_close(e->main_pidfd);
        e->start_call = pid1_call_cancel(e->start_call);
        e->state_call = pid1_call_cancel(e->state_call);
        e->broken = true; /* nothing starts it again */
        if (e->socket_path)
                (void) unlink(e->socket_path);
        if (e->dir)
                (void) rmdir(e->dir);
}

Executor *executor_free(Executor *e) {
        if (!e)
                return NULL;
        conn_close(e);
        safe_close(e->auth_fd);
        sd_event_source_disable_unref(e->listen_io);
        safe_close(e->listen_fd);
        sd_event_source_disable_unref(e->hello_timer);
        sd_event_source_disable_unref(e->flush_defer);
        sd_event_source_disable_unref(e->retry_timer);
        sd_event_source_disable_unref(e->fail_defer);
        sd_event_source_disable_unref(e->main_io);
        safe_close(e->main_pidfd);
        pid1_call_cancel(e->start_call);
        pid1_call_cancel(e->state_call);
        free(e->unit);
        free(e->unit_path);
        free(e->dir);
        free(e->socket_path);
        free(e->cgroup_dir);
        free(e);
        return NULL;
}
