/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "buf.h"
#include "manager.h"
#include "request.h"

typedef enum SessionState {
        SESSION_STARTING, /* the slice is being created */
        SESSION_ACTIVE,
        SESSION_FAILED,
        _SESSION_STATE_MAX,
        _SESSION_STATE_INVALID = -EINVAL,
} SessionState;

const char *session_state_to_string(SessionState s);

/* Called once the session's slice is up (r >= 0) or could not be created (r < 0). */
typedef void (*SessionReadyFn)(Session *s, int r, void *userdata);

typedef struct SessionWaiter SessionWaiter;
struct SessionWaiter {
        SessionReadyFn fn;
        void *userdata;
        LIST_FIELDS(SessionWaiter, waiters);
};

struct Session {
        Manager *manager;
        char id[17];
        char *user;
        char *workspace;
        char *slice;          /* sandboxd-<id>.slice */
        char *dynamic_user;   /* sbx-<16 hex> */
        char *workspace_dir;  /* /var/lib/sandboxd/ws/<user>/<workspace> */
        char *home_dir;
        char *tmp_dir;
        Limits limits;
        NetworkMode network;
        SessionState state;
        char *error;          /* why the slice could not be created */
        uint64_t created_realtime_usec;
        char *cgroup;         /* the slice's cgroup, learnt from its first command */
        uint64_t oom_seen;    /* OOM counter of the slice when last looked at (0 when new) */

        sd_bus_slot *start_slot;
        SessionWaiter *waiters;
        Command *commands;
        unsigned n_commands; /* unit counter: sandboxd-<id>-<n>.service */

        LIST_FIELDS(Session, sessions);
};

/* Validates the request against the configured ceilings (a clear *error otherwise) and
 * starts the session's slice. */
int session_create(Manager *m, const SessionRequest *req, Session **ret, RequestError *error);
Session *session_free(Session *s);

/* Runs fn when the session leaves SESSION_STARTING (at once if it already has). */
int session_wait_ready(Session *s, SessionReadyFn fn, void *userdata);

Command *session_find_command(Session *s, const char *request_id);
unsigned session_count_running(Session *s);

int session_append_json(Session *s, Buf *b);

/* sbx-<first 16 hex digits of sha256("user/workspace")> */
int scope_dynamic_user(const char *user, const char *workspace, char **ret);
