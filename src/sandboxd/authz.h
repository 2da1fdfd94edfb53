/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Who may do what: one decision for every transport (HTTP on the unix socket, HTTP on
 * TCP, D-Bus). Pure: no NSS, no bus, no manager; the front ends learn who is calling and
 * what the target is, ask here, and answer the verdict in their own words.
 *
 * The caller is a uid (the peer of the unix socket, the sender on D-Bus) or a tenant (an
 * API key on TCP).
 *   - root and members of AdminGroup= manage every session (tenants' included), drain and
 *     read the metrics;
 *   - other members of group sandboxd manage the sessions they created (over either local
 *     transport: the creator is a uid, "unix:<uid>" or "dbus:<uid>"), and create sessions
 *     only in scopes of their own login name;
 *   - on D-Bus polkit decides for every uid but root and AdminGroup=: manage-sessions for
 *     one's own, manage-all for anyone else's (its rules let members of group sandboxd
 *     manage their own without a password);
 *   - a tenant manages its own sessions only, on every transport; another's is hidden (as
 *     if it did not exist). AdminTenants= may also drain and read the metrics, and still
 *     sees only its own sessions. */

typedef enum AuthzTransport {
        AUTHZ_HTTP_UNIX,
        AUTHZ_HTTP_TCP,
        AUTHZ_DBUS,
        _AUTHZ_TRANSPORT_MAX,
} AuthzTransport;

typedef enum AuthzOp {
        AUTHZ_CREATE,  /* a session in a scope (and the active one of it, if there is one) */
        AUTHZ_LIST,    /* the list itself; each entry is a GET */
        AUTHZ_GET,     /* a session, its commands, their output; activity */
        AUTHZ_EXEC,
        AUTHZ_FILES,
        AUTHZ_SIGNAL,
        AUTHZ_STDIN,
        AUTHZ_FREEZE,  /* and thaw */
        AUTHZ_CLOSE,
        AUTHZ_DRAIN,   /* daemon-wide */
        AUTHZ_METRICS, /* daemon-wide */
        AUTHZ_IMAGES,  /* daemon-wide: import and remove images (listing them is everyone's) */
        _AUTHZ_OP_MAX,
        _AUTHZ_OP_INVALID = -1,
} AuthzOp;

/* drain, metrics, images: about the daemon, not a session; only administrators */
static inline bool authz_op_is_daemon_wide(AuthzOp op) {
        return op == AUTHZ_DRAIN || op == AUTHZ_METRICS || op == AUTHZ_IMAGES;
}

const char *authz_op_to_string(AuthzOp op);
AuthzOp authz_op_from_string(const char *s);

typedef struct AuthzCaller {
        bool is_tenant;   /* an API key's tenant, else a uid */
        uid_t uid;        /* a uid caller's */
        const char *name; /* the tenant; a uid's login name (NULL if it has none) */
        bool member;      /* a uid in group sandboxd */
        bool admin;       /* uid: root or in AdminGroup=; tenant: in AdminTenants= */
} AuthzCaller;

typedef struct AuthzTarget {
        const char *user;    /* the scope's user (a uid's own sessions are of its login name) */
        bool session;        /* there is a session (CREATE: an active one of the scope) */
        const char *creator; /* its creator: a tenant, "unix:<uid>", "dbus:<uid>"; NULL: unknown */
} AuthzTarget;

typedef enum AuthzVerdict {
        AUTHZ_ALLOW,
        AUTHZ_ASK_OWN,  /* D-Bus only: polkit's io.sandboxd.sandbox1.manage-sessions decides */
        AUTHZ_ASK_ALL,  /* D-Bus only: polkit's io.sandboxd.sandbox1.manage-all decides */
        AUTHZ_HIDDEN,   /* answer as for a session that does not exist (HTTP 404) */
        AUTHZ_FORBIDDEN, /* HTTP 403, D-Bus AccessDenied */
        _AUTHZ_VERDICT_MAX,
} AuthzVerdict;

const char *authz_verdict_to_string(AuthzVerdict v);

/* "unix:<uid>" or "dbus:<uid>": the uid; else (an API tenant, NULL) -EINVAL. */
int authz_creator_uid(const char *creator, uid_t *ret);

/* Did this caller create the session? A uid: "unix:<uid>" or "dbus:<uid>" of its uid; a
 * tenant: the creator is its name. An unknown creator (NULL, records from before) is no
 * one's. */
bool authz_caller_created(const AuthzCaller *c, const char *creator);

/* The verdict, and why (a sentence for the error message, static). */
AuthzVerdict authz_decide(const AuthzCaller *c, AuthzTransport t, AuthzOp op, const AuthzTarget *target,
                          const char **ret_reason);

/* May the caller see the session at all (list entries, D-Bus object reads without polkit)?
 * ALLOW and ASK_OWN for GET. */
bool authz_may_see(const AuthzCaller *c, AuthzTransport t, const char *creator, const char *user);
