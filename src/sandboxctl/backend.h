/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "libsandboxd.h"
#include "macro.h"

/* How sandboxctl reaches sandboxd. Every verb goes through these operations, never through
 * a transport directly, so that a transport can be added without touching the verbs.
 *
 * Transports:
 *   dbus   io.sandboxd.sandbox1 on the system bus, authorized by polkit: the default for
 *          local use (backend-dbus.c). It fills the same libsandboxd structs (allocated with
 *          malloc(), "json" built from the objects' properties with the HTTP API's field
 *          names) and the same sandboxd_error. What the D-Bus API lacks (health, drain,
 *          attach, snapshots with output, files, events for --json) it forwards to an HTTP
 *          backend on the local unix socket.
 *   http   libsandboxd: over TCP with --url/--key, and, with --transport=http, over the
 *          local unix socket /run/sandboxd/http.sock (peer credentials: root and group
 *          sandboxd). */

typedef struct Backend Backend;

/* What to run, independent of the transport. */
typedef struct ExecSpec {
        char **argv;
        char *cwd;
        char **env;          /* "NAME=VALUE" */
        uint64_t timeout_ms; /* 0: sandboxd's default */
        char *stdin_data;    /* all of stdin at once, when has_stdin */
        size_t stdin_size;
        bool has_stdin;
        char *request_id;    /* always set by the verbs: they need it to send signals */
        bool events;         /* the caller prints sandboxd's events (--json): D-Bus has none, HTTP is used */
} ExecSpec;

void exec_spec_done(ExecSpec *s);

typedef int (*backend_event_fn)(Backend *b, const sandboxd_event *ev, void *userdata);
typedef int (*backend_wakeup_fn)(Backend *b, int fd, void *userdata);

typedef struct BackendOps {
        const char *name;
        void (*free)(Backend *b);
        const sandboxd_error *(*last_error)(Backend *b);
        int (*set_wakeup)(Backend *b, int fd, backend_wakeup_fn fn, void *userdata);

        int (*health)(Backend *b, char **ret_json);
        int (*drain)(Backend *b, int drain, char **ret_json);

        int (*session_create)(Backend *b, const char *user, const char *workspace, const char *options_json,
                              sandboxd_session **ret, bool *ret_created);
        int (*session_get)(Backend *b, const char *id, sandboxd_session **ret);
        int (*session_list)(Backend *b, const char *user, sandboxd_session ***ret, size_t *ret_n);
        int (*session_close)(Backend *b, const char *id, bool purge, sandboxd_session **ret);
        int (*session_freeze)(Backend *b, const char *id, bool freeze, sandboxd_session **ret);

        int (*exec_run)(Backend *b, const char *session, const ExecSpec *spec, backend_event_fn fn, void *userdata,
                        sandboxd_result **ret);
        int (*exec_start)(Backend *b, const char *session, const ExecSpec *spec, char **ret_request_id);
        int (*command_attach)(Backend *b, const char *session, const char *request_id, uint64_t offset,
                              backend_event_fn fn, void *userdata, sandboxd_result **ret);
        int (*command_wait)(Backend *b, const char *session, const char *request_id, uint64_t timeout_usec,
                            sandboxd_result **ret);
        int (*command_get)(Backend *b, const char *session, const char *request_id, sandboxd_result **ret);
        int (*command_list)(Backend *b, const char *session, sandboxd_result ***ret, size_t *ret_n);
        int (*command_signal)(Backend *b, const char *session, const char *request_id, int sig);

        int (*file_upload)(Backend *b, const char *session, const char *path, int fd, uint64_t size,
                           sandboxd_progress_fn fn, void *userdata);
        int (*file_write)(Backend *b, const char *session, const char *path, const void *data, size_t size);
        int (*file_download)(Backend *b, const char *session, const char *path, int fd, sandboxd_progress_fn fn,
                             void *userdata);
        int (*file_read)(Backend *b, const char *session, const char *path, size_t max, char **ret, size_t *ret_size);
        int (*file_stat)(Backend *b, const char *session, const char *path, sandboxd_file_info **ret);
        int (*file_list)(Backend *b, const char *session, const char *path, sandboxd_file_info ***ret, size_t *ret_n,
                         bool *ret_truncated);
        int (*file_mkdir)(Backend *b, const char *session, const char *path);
} BackendOps;

struct Backend {
        const BackendOps *ops;
        char *description; /* "unix socket /run/sandboxd/http.sock", "http://...", for messages */
};

typedef enum BackendTransport {
        BACKEND_TRANSPORT_DEFAULT, /* http with url, dbus without */
        BACKEND_TRANSPORT_DBUS,
        BACKEND_TRANSPORT_HTTP,
} BackendTransport;

typedef struct BackendConfig {
        const char *url; /* NULL: local */
        const char *key;
        BackendTransport transport;
} BackendConfig;

int backend_open(const BackendConfig *config, Backend **ret);
Backend *backend_free(Backend *b);
DEFINE_TRIVIAL_CLEANUP_FUNC(Backend *, backend_free);

/* "what failed: why" for the last failed operation */
const char *backend_error_message(Backend *b);
const sandboxd_error *backend_error(Backend *b);

extern const BackendOps backend_http_ops;
int backend_http_new(const char *url, const char *key, Backend **ret);

/* D-Bus on the system bus; what the D-Bus API does not offer is forwarded to an HTTP backend
 * on the local unix socket (see backend-dbus.c). */
extern const BackendOps backend_dbus_ops;
int backend_dbus_new(Backend **ret);
