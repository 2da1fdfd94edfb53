/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <uthash.h>

#include "buf.h"
#include "manager.h"
#include "op.h"
#include "output.h"
#include "request.h"
#include "result.h"
#include "systemd.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Commands running or starting on the host at most, with the units of finished ones
 * still being stopped (unit_release()): systemd holds a match rule on the bus for each
 * (the reference AddRef= gives sandboxd) and sandboxd one, of the 512 dbus-daemon allows
 * a connection; past this, new commands get 503 overloaded. */
#define COMMANDS_RUNNING_MAX 256

/* The request id of the command that empties a closing session's workspace: sandboxd's
 * alone ("sandboxd." ids are refused to clients). */
#define PURGE_REQUEST_ID "sandboxd.purge"

typedef struct CommandExec CommandExec;

struct Command {
        Session *session;
        unsigned n;
        char *request_id;
        char *unit;
        char *unit_path;
        char **argv;
        uint64_t created_realtime_usec;

        CommandResult result; /* .status is PENDING, RUNNING or terminal */
        Output *output;

        int fd[_OUTPUT_STREAM_MAX]; /* our ends of stdout/stderr, also in systemd's fd store */
        bool caller_fd[_OUTPUT_STREAM_MAX]; /* the stream went to the caller's own fd: not kept */
        sd_event_source *io[_OUTPUT_STREAM_MAX];

        StdinMode stdin_mode;
        int stdin_fd;          /* stream mode: our end, also in the fd store */
        sd_event_source *stdin_io;
        Buf stdin_pending;
        bool stdin_eof;        /* close once pending is written */
        Op *stdin_ops;         /* command_write_stdin(), each until its bytes are written */

        /* On a pseudo-terminal: sandboxd's (tty_master: fd[OUTPUT_STDOUT] is the master, read
         * side, stdin_fd a dup of it, no stderr), or the caller's slave given as its stdin. */
        bool tty, tty_master;
        unsigned tty_rows, tty_cols;
        bool input_ready;      /* its process set up its terminal: held input may be written */

        sd_bus_slot *match_slot;
        bool start_unconfirmed; /* recovered while PID 1 had not answered its start */
        Pid1Call *start_call, *state_call;
        bool refresh_again;
        UnitState state;
        uint64_t accepted_monotonic_usec;
        uint64_t memory_peak, tasks_peak, cpu_sampled_usec;
        sd_event_source *sample_timer; /* reads the cgroup while the command runs */
        StoreJob *save_job;            /* its record's write queued for the writer thread */
        char *cgroup;                  /* ControlGroup=, kept once seen: it empties at the end */

        bool unit_running;    /* PID 1 forked the process: signals reach it now */
        bool user_recorded;   /* the session's user records are those of the unit's uid */
        int pending_signal;   /* asked for before that; sent once it is so */

        Op *start_ops;        /* command_start(): at most one, until PID 1 answers */

        bool in_executor;     /* run by the session's executor (exec mode "session"), not a unit of its own */
        uint64_t exec_deadline_usec; /* from its record: when it times out (CLOCK_REALTIME) */
        CommandExec *exec;    /* executor.h: what that needs, while it is the executor's */

        LIST_FIELDS(Command, commands);
        UT_hash_handle hh;   /* in the session's commands_by_id (while it is the newest of its id) */
        bool hashed;
};

/* Validates what depends on the session (cwd, executable, limits), then starts the unit:
 * 1 and *ret pending (op.h), (*ret)->command the new command, until systemd answers: r >= 0,
 * the unit was accepted; r < 0, it was not, the message says why, and the command is
 * already forgotten (op->command is NULL). Returns -EINVAL with *error set for bad input. */
int command_start(Session *s, const CommandRequest *req, OpFn fn, void *userdata, Op **ret, RequestError *error);

/* Rebuilds a command of s from its record after a restart, with what the fd store gave
 * back for it. */
int command_recover(Session *s, json_object *record, Command **ret);
/* A new command of s from its record (<n>.json), no output or fds yet: -EBADMSG if the
 * record is not a command's, -EEXIST if s has a command of its number already.
 * Pure (s needs no manager): tests/fuzz/fuzz-records.c fuzzes it. */
int command_record_decode(Session *s, json_object *record, Command **ret);

/* Forgets the command and its spool (it must be terminal). */
void command_remove(Command *c);
/* sandboxd stops (or c goes): the pending Ops of its start and stdin complete with
 * -ECANCELED and message, once; its streams end where they are (a client re-attaches at
 * its offset). The command itself goes on. */
void command_cancel_ops(Command *c, const char *message);
Command *command_free(Command *c);

/* The unit of a finished command (its result recorded, or no command left to record it):
 * stopped if it still runs, reset if it is failed, followed until it is down if it is on
 * its way there (a stop that ends failed: leftovers that ignored SIGTERM), so that PID 1
 * collects it. known: its state as last seen, or NULL to ask PID 1. */
int unit_release(Manager *m, const char *unit, const char *unit_path, const UnitState *known);
UnitRelease *unit_release_free(UnitRelease *u);

/* The signals a caller may send, by name ("SIGTERM"); -EINVAL for any other. */
int command_signal_from_string(const char *name);
/* Sends `sig` to every process of the command's unit; -ESRCH if it is not running. */
int command_signal(Command *c, int sig);
/* Queues bytes for a command started with "stdin":"stream": 1 and *ret pending until they
 * are in the pipe (0), or the pipe closed first (-EPIPE: the command closed its stdin or
 * ended). -ENOTTY: not streamed; -EPIPE: its stdin is closed already. */
int command_write_stdin(Command *c, const void *p, size_t n, bool eof, OpFn fn, void *userdata, Op **ret);
/* Sets the window size of a command on sandboxd's terminal (the kernel sends SIGWINCH to its
 * foreground process group). -ENOTTY: not on one of sandboxd's terminals; -ESRCH: it is not
 * running. */
int command_resize(Command *c, unsigned rows, unsigned cols);
/* Its process is past the set-up of its stdin (PID 1 resets a terminal there, and may flush
 * what was written to it): input held for it is written now. */
void command_input_ready(Command *c);
/* Stops a running command (its unit); the result follows as usual. */
int command_stop(Command *c);

int command_save(Command *c);

/* For the ways a command runs (its unit; executor.c): the steps of its life. */
/* The start was taken (PID 1's job, EXEC sent): running, "accepted", the start completes. */
void command_accepted(Command *c);
/* Its process exists: signals reach it (the one asked for before is sent now). */
void command_process_started(Command *c);
/* Samples its cgroup while it runs (c->cgroup). */
int command_sample(Command *c);
/* It ended so: the rest of its output is read, then the result recorded. */
void command_end(Command *c, CommandResult *res);
/* Its end cannot be known: "lost" for reason. */
void command_lose(Command *c, const char *reason);
/* Recovered, it turns out it never ran: failed, "not-started". */
void command_never_started(Command *c);
/* Its start failed before it was taken: it is forgotten, the start completes with -EIO and msg. */
void command_start_failed(Command *c, const char *msg);

bool command_status_is_running(const Command *c);

/* command-setup.c */
int find_executable(const char *name, const char *path, char **ret);
int command_resolve_cwd(Session *s, const char *cwd, char **ret, RequestError *e);
int command_build_env(Session *s, unsigned command_n, char * const *user_env, char ***ret);
/* The file system policy of the config as InaccessiblePaths=, ReadOnlyPaths=, ReadWritePaths=. */
int command_build_paths(const Config *c, char ***ret_inaccessible, char ***ret_read_only, char ***ret_read_write);
/* A session's sandbox (systemd.h), the same for its command units and its executor, with the
 * strings it points to. Filled in place (the spec points into it): do not copy it. */
typedef struct SessionSandbox {
        SandboxSpec spec;
        char state_dirs[3][256];
        char *cgroup_parent;  /* <PID 1's cgroup>/sandboxd.slice */
        char **inaccessible, **read_only, **read_write, **cgroup_tmpfs, **cgroup_binds;
        AddressRange *ip_deny;
        size_t n_ip_deny;
        char *proxy_socket;
} SessionSandbox;
int session_sandbox_spec(Session *s, SessionSandbox *ret);
void session_sandbox_done(SessionSandbox *b);
