/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "validate.h"
#include "authz.h"
#include "session.h"
#include "manager.h"
#include "file-ops.h"
#include "output.h"

/* The D-Bus API, sandboxd-dbus(5): io.sandboxd.sandbox1.Manager at /io/sandboxd/sandbox1,
 * .Session objects below /io/sandboxd/sandbox1/session/, .Command objects below those. */

#define BUS_NAME "io.sandboxd.sandbox1"
#define BUS_PATH "/io/sandboxd/sandbox1"
#define BUS_SESSION_PREFIX BUS_PATH "/session"
#define BUS_MANAGER_INTERFACE "io.sandboxd.sandbox1.Manager"
#define BUS_SESSION_INTERFACE "io.sandboxd.sandbox1.Session"
#define BUS_COMMAND_INTERFACE "io.sandboxd.sandbox1.Command"
#define BUS_FILES_INTERFACE "io.sandboxd.sandbox1.Files"

/* What Run and Snapshot answer with, at most, of each stream (the kept output, OutputMax=,
 * is bounded too): a D-Bus message must stay well below the bus's limit. */
#define BUS_OUTPUT_MAX (8U * 1024 * 1024)

/* A method call answered later: once a session is ready or closed, a command started or
 * over, systemd done. It holds the call and the Op it waits for, never the session (which
 * may go meanwhile). */
typedef struct BusPending BusPending;
struct BusPending {
        Manager *manager;
        sd_bus_message *call;
        char session_id[SESSION_ID_SIZE];
        bool run;            /* Run: answered when the command is over */
        Command *command;    /* Run: the command, while the reader is attached */
        OutputReader reader; /* Run: tells when the command is over, or gone */
        FileOp *file_op;     /* a file method: its operation, while it is queued or runs */
        Op *op;              /* the core's operation it waits for (op.h), freed with it */
        ImageImport *image_import; /* ImportImage(): the import, abandoned with it */
        uint64_t bytes;      /* WriteStdin: the bytes given; Write() from a pipe: the bytes read */
        /* Write() from a pipe, read on the loop (files-dbus.c) */
        FileUpload *upload;           /* the new file until it is committed */
        char *upload_path;
        uint64_t upload_expect;       /* option "size", UINT64_MAX if not given */
        sd_event_source *upload_io;   /* owns the pipe */
        sd_event_source *upload_timer; /* no bytes for ConnectionTimeoutSec= */
        sd_bus_track *upload_track;   /* the caller, while it is on the bus */
        LIST_FIELDS(BusPending, pending);
};

int bus_pending_new(Manager *m, sd_bus_message *call, Session *s, BusPending **ret);
BusPending *bus_pending_free(BusPending *p);
/* Answers the call with *error (or errno r) and forgets it. */
void bus_pending_fail(BusPending *p, int r, const sd_bus_error *error);
/* ... with Stopping: sandboxd stops before it could answer. */
void bus_pending_fail_stopping(BusPending *p);
/* sandboxd stops (daemon_stop(), while the loop still runs, so that sd-bus sends the
 * answers before it closes the bus at the loop's exit): every call still waiting is
 * answered Stopping once. Those waiting on the core's operations or the file threads were
 * answered just before (session_cancel_ops(), file_ops_abandon()); these are the rest,
 * such as a Write() still reading its pipe, and the calls waiting for polkit. */
void manager_bus_stop(Manager *m);
/* At exit: whatever is left is dropped. */
void manager_bus_free(Manager *m);

/* Who sent `call`: its uid, login name (NULL if it has none), and the caller authz_decide()
 * sees (group sandboxd, root or AdminGroup=). */
typedef struct BusCaller {
        uid_t uid;
        char *name;
        AuthzCaller authz;
} BusCaller;

/* The uid of the sender of `call`, as the bus vouches for it (remembered per unique name). */
int bus_caller_uid(Manager *m, sd_bus_message *call, uid_t *ret);
int bus_caller_identity(Manager *m, sd_bus_message *call, BusCaller *ret);
static inline void bus_caller_done(BusCaller *c) {
        free(c->name);
        c->name = NULL;
}

/* authz_decide() for a D-Bus call: `op` on the session s, or (CREATE) on the scope (user,
 * workspace) with s its active session if there is one. Root and AdminGroup= pass; polkit
 * is asked io.sandboxd.sandbox1.manage-sessions for the caller's own (the sessions it
 * created, the scopes of its login name), ...manage-all for anyone else's. Returns like
 * polkit_verify(): > 0 yes, 0 asked (return 1 from the handler), < 0 no (AccessDenied). */
int bus_authorize(Manager *m, sd_bus_message *call, AuthzOp op, const char *user, const char *workspace, Session *s,
                  sd_bus_error *error);

/* BUS_SESSION_PREFIX/<sid>/command/<n> */
int command_bus_path(Command *c, char **ret);
