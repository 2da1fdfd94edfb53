/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <uthash.h>

#include "buf.h"
#include "command.h"
#include "manager.h"
#include "op.h"
#include "port.h"
#include "request.h"

typedef enum SessionState {
        SESSION_STARTING, /* the slice is being created */
        SESSION_ACTIVE,
        SESSION_CLOSING,  /* commands and slice are being stopped */
        SESSION_CLOSED,   /* results stay readable for RetainClosedSec= */
        SESSION_FAILED,
        _SESSION_STATE_MAX,
        _SESSION_STATE_INVALID = -EINVAL,
} SessionState;

const char *session_state_to_string(SessionState s);
SessionState session_state_from_string(const char *s);

struct Session {
        Manager *manager;
        char id[SESSION_ID_SIZE];
        char *user;
        char *workspace;
        char *tenant;         /* who created it: an API tenant, "unix:<uid>", "dbus:<uid>" */
        char *slice;          /* sandboxd-<id>.slice */
        char *dynamic_user;   /* sbx-<16 hex> */
        char *workspace_dir;  /* /var/lib/sandboxd/ws/<tenant>/<user>/<workspace>, as commands see it */
        char *workspace_host_dir; /* /var/lib/private/sandboxd/ws/<tenant>/<user>/<workspace>, where it is */
        char *home_dir;
        char *tmp_dir;
        char *userdb_dir;     /* <runtime>/userdb/<sid>: its dynamic user's records, /run/userdb in commands */
        uid_t userdb_uid;     /* the uid they were written for */
        Limits limits;
        NetworkMode network;
        ExecMode exec_mode;   /* unit: each command a transient unit; session: the executor's children */
        char *image;          /* the image its commands run in (images.h); NULL: the host's root */
        char *image_root;     /* its root directory, RootDirectory= of its units */
        Executor *executor;   /* exec mode "session", while active or closing */
        bool executor_ready;  /* it said READY once: the session is active from then on */
        char **net_deny;      /* the session's own denied domains (the baseline applies too) */
        char **net_allow;     /* non-NULL: allow-list mode */
        ProxyListener *proxy; /* mode proxy: where its commands' connections come in */
        Port *ports;          /* its exposed ports (port.h), newest first */
        bool proxy_unit_started;
        SessionState state;
        char *error;          /* why the slice could not be created */
        char *close_reason;   /* "deleted", "idle", "lifetime", "slice-gone" */
        bool frozen;
        bool purge;           /* empty the workspace while closing */
        bool purge_done;      /* that step is over (or skipped): purged and purge_error say how */
        bool purged;          /* the workspace, home and TMPDIR were emptied */
        char *purge_error;    /* why not, when it was tried */
        bool closing;
        bool from_pool;       /* its slice was prepared ahead */
        uint64_t created_realtime_usec;
        uint64_t last_activity_realtime_usec;
        uint64_t closed_realtime_usec;
        uint64_t ttl_usec;

        char *cgroup;         /* the slice's cgroup, learnt from its first command */
        uint64_t oom_seen;    /* OOM counter of the slice when last looked at (0 when new) */

        uint64_t disk_bytes;        /* the workspace's, as last counted */
        uint64_t disk_checked_usec; /* CLOCK_MONOTONIC of that (or of the count under way); 0: count again */
        FileOp *disk_op;            /* the count under way, on a file API thread */

        Pid1Call *start_call;
        Pid1Call *freeze_call;     /* FreezeUnit/ThawUnit, then the look at FreezerState */
        bool freeze_target;
        Op *freeze_ops;              /* the freeze or thaw under way: at most one */
        sd_event_source *expiry_timer;
        sd_event_source *save_timer; /* a coalesced write of the record is due */
        StoreJob *save_job;          /* its write queued for the writer thread */
        Op *ready_ops;               /* session_wait_ready(): for the slice */
        Op *close_ops;               /* session_close(): for the end of closing */
        Op *purge_op;                /* the start of the purge command, while closing */
        Command *commands;   /* newest first */
        Command *commands_by_id; /* request id -> the newest command of that id (hh of Command) */
        unsigned n_commands; /* unit counter: sandboxd-<id>-<n>.service */
        unsigned n_terminals; /* clients attached to its commands as terminals (terminal.h) */
        SpoolAccount spool;  /* its commands' spool files (SpoolMaxPerSession=), within the manager's */

        LIST_FIELDS(Session, sessions);
        UT_hash_handle hh;   /* in the manager's sessions_by_id, while in its list */
        UT_hash_handle hh_scope; /* in its sessions_by_scope, while in its list and starting or active */
};

/* Returns the active session of the request's scope if there is one (0). Otherwise
 * validates the request against the configured ceilings (a clear *error otherwise) and
 * starts a new session's slice, or takes a prepared one from the pool (1). */
int session_create(Manager *m, const SessionRequest *req, const char *tenant, Session **ret, RequestError *error);
/* sandboxd stops (message OP_STOPPING), or s goes (session_free(), OP_GONE): every pending
 * Op of s and its commands (ready, close, freeze, a command's start, stdin) completes now
 * with -ECANCELED and message, and the streams of its commands end where they are;
 * nothing else changes. */
void session_cancel_ops(Session *s, const char *message);
Session *session_free(Session *s);

/* Mode proxy: starts sandboxd-<sid>-proxy.socket and its service (an existing one is fine). */
int session_start_proxy_units(Session *s);

/* Starts sandboxd-<sid>-exec.service, the executor of the session (executor.h), in the
 * session's sandbox; listen_dir: where sandboxd listens for it. */
int session_start_executor_unit(Session *s, const char *unit, const char *listen_dir, Pid1Call **ret_call,
                                sd_bus_message_handler_t cb, void *userdata);

/* Exec mode "session": its executor said READY for the first time (the session becomes
 * active), or cannot run at all (a starting session fails, and is freed: call it from a
 * clean stack, not from one of the executor's callbacks). */
void session_executor_ready(Session *s);
void session_executor_failed(Session *s, const char *why);

/* Rebuilds a session and its commands from the records, after a restart. */
int session_recover(Manager *m, const char *dir, Session **ret);
/* Fills a new session, not yet in the manager's list, from its record (session.json); the
 * defaults of missing fields from c. -EBADMSG if the record is not a session's. Pure: of
 * the manager only the runtime directory is read (for the session's paths), recovery does
 * the rest; tests/fuzz/fuzz-records.c fuzzes it. */
int session_record_decode(Session *s, json_object *record, const Config *c);

/* Waits for the session to leave SESSION_STARTING (op.h): 1 and *ret pending, completed with
 * 0 once it is active or -EIO when the slice could not be created (s->error says why; s is
 * freed right after the call); 0 and *ret NULL when it is not starting (any more). */
int session_wait_ready(Session *s, OpFn fn, void *userdata, Op **ret);

/* Stops the commands and the slice (emptying the workspace first if purge). 1 and *ret
 * pending until it is closed; 0 and *ret NULL when it was closed already, or closed at
 * once (nothing ran, no purge): the function is never called before the caller has its
 * handle. -EBUSY while it is starting. The result, the Op's r or session_close_result() at once: with purge,
 * -EIO when emptying failed (s->purge_error says why) and -ESTALE when the session was
 * closed without it, never 0 for a purge that did not happen. fn and ret may both be NULL:
 * nobody waits. */
int session_close(Session *s, const char *reason, bool purge, OpFn fn, void *userdata, Op **ret);
/* The result of a close of a closed session that asked for the purge, or not. */
int session_close_result(Session *s, bool purge);
/* Pushes back the idle expiry. */
void session_touch(Session *s);
/* 0 if the session is active, else -EINVAL with *e saying why ("session_not_active"). */
int session_check_active(Session *s, RequestError *e);
/* Starts a command in the session: the command of the same request id if there is one
 * (0: nothing started, *ret_command is it, *ret_op NULL), else a new one (1: *ret_command
 * is it and *ret_op its start, pending until systemd answers, as command_start()). The
 * session must be active. */
int session_exec(Session *s, const CommandRequest *req, OpFn fn, void *userdata, Command **ret_command,
                 Op **ret_op, RequestError *e);
/* Freezes or thaws the session's slice: 1 and *ret pending until systemd is done (r < 0
 * and why in the message when it failed, -ESTALE when the session began to close first).
 * -EOPNOTSUPP: not on this host (cgroup v1 or hybrid, freezing needs v2); -ESTALE: the
 * session is not active; -EBUSY: a freeze or thaw is under way. */
int session_freeze(Session *s, bool freeze, OpFn fn, void *userdata, Op **ret);

/* A command of the session runs: the records of its dynamic user follow the uid PID 1 gave
 * it. -ESRCH: PID 1 has not given it one yet. */
int session_userdb_update(Session *s);

/* The command engine tells us when one of ours ends, or (c NULL) was refused by PID 1. */
void session_command_finished(Session *s, Command *c);

/* The manager's list of sessions (newest first) and its table by id (uthash). */
void session_add(Manager *m, Session *s);
void session_remove(Manager *m, Session *s);
/* The session of that id in the manager's list, or NULL. */
Session *session_find(Manager *m, const char *id);
/* The active (or starting) session of scope (tenant as scope_tenant() gives it, user, workspace). */
Session *session_find_by_scope(Manager *m, const char *tenant, const char *user, const char *workspace);
/* Every change of a session's state goes through here: the manager's counts
 * (n_live_sessions, n_pool_in_use) and its table by scope follow, in O(1). */
void session_set_state(Session *s, SessionState state);

Command *session_find_command(Session *s, const char *request_id);
unsigned session_count_running(Session *s);
/* Sessions using the image NAME that are not closed or failed (an image in use cannot go). */
unsigned session_count_by_image(Manager *m, const char *image);
/* When it closes for inactivity or its maximum lifetime; once closed, when it is forgotten. */
uint64_t session_expiry(Session *s);
/* The last count of the workspace's bytes (a count older than 5 s is started for the next look). */
uint64_t session_disk_bytes(Session *s);
/* Queues the record for the writer (store-writer.h): for changes that matter after a
 * restart (state, close reason, frozen, the command counter). */
int session_save(Session *s);
/* The same, coalesced: at most one write a SESSION_SAVE_DELAY_USEC, for what only moves an
 * expiry (activity). A pending one is written at exit (session_save_pending()). */
#define SESSION_SAVE_DELAY_USEC (250 * USEC_PER_MSEC)
void session_save_soon(Session *s);
void session_save_pending(Session *s);
void session_arm_expiry(Session *s);

