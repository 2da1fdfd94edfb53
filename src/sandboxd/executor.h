/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A session's executor (exec mode "session"): sandboxd-<sid>-exec.service runs
 * src/executor/sandboxd-executor in the session's sandbox, and every command of the session
 * is one of its children instead of a unit of its own. This is sandboxd's side: the unit,
 * the listener the executor dials, the protocol (executor-proto.h) and what a command run
 * this way needs beyond a Command: signals, stop and timeout, done by sandboxd itself to
 * the command's cgroup, as the session's uid; the executor is only believed about "n runs
 * as pid P in cgroup X" and "P ended so", for its own session. */

#include <sys/types.h>

#include <systemd/sd-event.h>

#include "cgroup.h"
#include "executor-proto.h"
#include "manager.h"

typedef enum ExecState {
        EXEC_QUEUED,  /* waiting for the executor to be ready */
        EXEC_SENT,    /* EXEC sent (or recovered after a restart: the executor tells) */
        EXEC_STARTED, /* STARTED heard: pid and cgroup known */
        EXEC_EXITED,  /* its result is recorded, ACK sent */
} ExecState;

typedef struct CommandExec {
        ExecState state;
        int fds[EXECUTOR_EXEC_FDS]; /* while queued: spec memfd, stdin, stdout, stderr */
        uint64_t deadline_usec;     /* CLOCK_REALTIME of the timeout (kept across restarts); USEC_INFINITY: none */
        bool told;                  /* the executor spoke of it on this connection */
        pid_t pid;
        int pidfd;
        sd_event_source *pidfd_io;
        char *cgroup_dir;           /* its cgroup in the unified (v2) hierarchy; NULL: the executor has none */
        uint64_t start_usec;        /* CLOCK_MONOTONIC, ours */
        sd_event_source *timer;     /* the timeout, then the kill grace, then SIGKILL again */
        sd_event_source *started_timer; /* STARTED is due this long after the EXEC */
        bool timed_out, stopping, killed, gone;
        unsigned kills;
} CommandExec;

/* The reasons of commands the executor could not finish */
#define EXECUTOR_LOST_DIED   "executor-died"
#define EXECUTOR_LOST_FAILED "executor-failed"

/* Creates the session's executor: its listener, and the unit unless recovering (then the
 * unit is looked for, and started again if it is gone). */
int executor_new(Session *s, bool recovering, Executor **ret);
/* Closes listener and connection; the unit runs on (sandboxd stops; the next one re-attaches). */
Executor *executor_free(Executor *e);
/* The session is closed: listener, connection, calls and timers end, the listener's
 * directory goes; the object stays until executor_free() (safe from its own callbacks). */
void executor_remove(Executor *e);

/* Command c of the session (fresh: c->exec NULL) is to run: exe, cwd, argv, env as
 * sandboxd-exec would get them; the three stdio fds are duplicated. The start completes
 * (command_started()) when EXEC is sent, or fails (command_start_failed()). */
int executor_exec(Executor *e, Command *c, const char *exe, const char *cwd, char * const *argv, char * const *env,
                  int stdin_fd, int stdout_fd, int stderr_fd, uint64_t timeout_usec);
/* After a restart, from c's record: the executor tells what became of it. */
int executor_recover_command(Executor *e, Command *c, uint64_t deadline_realtime_usec);
int executor_signal(Command *c, int sig);
/* The usage of its cgroup (read as the session's uid: the executor made it, mode 0700). */
int executor_read_usage(Command *c, CgroupUsage *ret);
int executor_stop(Command *c);
void command_exec_free(Command *c);
