/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef LIBSANDBOXD_H
#define LIBSANDBOXD_H

/* libsandboxd: a client of sandboxd's HTTP API (sandboxd-api(7)), on libcurl, and of its
 * D-Bus API (sandboxd-dbus(5)) on the system bus, on sd-bus: every function works over
 * either and returns the same structs, JSON and errors.
 *
 * Conventions (see libsandboxd(3)):
 *   - functions return 0 (or a positive value where documented) on success and a negative
 *     errno-style value on failure; the details of the last failure are in
 *     sandboxd_client_last_error();
 *   - out parameters are named ret*, written only on success; what they return belongs to
 *     the caller and is released with the matching *_free() function;
 *   - objects are allocated by the library: fields may be appended to the structs below in
 *     later versions, so never allocate or copy them by value;
 *   - a client is not thread-safe: use one per thread.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SANDBOXD_DEFAULT_SOCKET "/run/sandboxd/http.sock"

/* --- errors ---------------------------------------------------------------------------- */

typedef enum sandboxd_error_kind {
        SANDBOXD_ERROR_NONE = 0,
        SANDBOXD_ERROR_TRANSPORT,    /* no connection, or it broke (-ECONNREFUSED, -ENOENT, -ETIMEDOUT, -EIO) */
        SANDBOXD_ERROR_PROTOCOL,     /* the answer is not what the API promises (-EBADMSG) */
        SANDBOXD_ERROR_INVALID,      /* 400, 405, 415: the request is wrong (-EINVAL) */
        SANDBOXD_ERROR_UNAUTHORIZED, /* 401: no or a wrong API key (-EKEYREJECTED) */
        SANDBOXD_ERROR_FORBIDDEN,    /* 403 (-EPERM) */
        SANDBOXD_ERROR_NOT_FOUND,    /* 404 (-ENOENT) */
        SANDBOXD_ERROR_CONFLICT,     /* 409: e.g. the session is not active, the command ended (-EBUSY) */
        SANDBOXD_ERROR_TOO_LARGE,    /* 413 (-EFBIG) */
        SANDBOXD_ERROR_RANGE,        /* 416: an offset past the end (-ERANGE) */
        SANDBOXD_ERROR_UNSUPPORTED,  /* 501: not on this host (-EOPNOTSUPP) */
        SANDBOXD_ERROR_SYSTEMD,      /* 502: systemd refused (-EREMOTEIO), or an exposed port's server */
        SANDBOXD_ERROR_UNAVAILABLE,  /* 503: draining, or systemd unreachable (-EAGAIN); 504 */
        SANDBOXD_ERROR_SERVER,       /* any other failure of the server (-EPROTO) */
        SANDBOXD_ERROR_CANCELLED,    /* a callback of the caller stopped the request (its error) */
        SANDBOXD_ERROR_LOCAL,        /* out of memory, a local file, a bad argument */
        SANDBOXD_ERROR_WRONG_NODE,   /* 421: the session is another node's, named in .node (-EREMOTE) */
        _SANDBOXD_ERROR_KIND_MAX,
} sandboxd_error_kind;

typedef struct sandboxd_error {
        sandboxd_error_kind kind;
        int error;          /* the negative errno-style value the function returned */
        long http_status;   /* 0 when no answer came */
        char code[64];      /* the API's error code ("not_found", "session_not_active", ...), or "" */
        char message[512];  /* a sentence for humans */
        char node[33];      /* wrong_node: the node that has the session (1 to 32 of a-z, 0-9), or "" */
} sandboxd_error;

const char *sandboxd_error_kind_to_string(sandboxd_error_kind kind);

/* --- clients --------------------------------------------------------------------------- */

typedef struct sandboxd_client sandboxd_client;

/* url: NULL or "" for the local unix socket SANDBOXD_DEFAULT_SOCKET; "unix:PATH" for another
 * unix socket; "http://HOST:PORT" or "https://..." for TCP. key: the bearer key for TCP,
 * or NULL. Nothing is connected yet. */
int sandboxd_client_new(const char *url, const char *key, sandboxd_client **ret);
/* The local sandboxd over D-Bus (io.sandboxd.sandbox1 on the system bus, authorized by
 * polkit). Connects to the bus at once: a negative errno if it is not there. Every function
 * goes over D-Bus but sandboxd_request(), raw HTTP on SANDBOXD_DEFAULT_SOCKET (libsandboxd(3)). */
int sandboxd_client_new_bus(sandboxd_client **ret);
/* Whether c was made by sandboxd_client_new_bus(). */
bool sandboxd_client_is_bus(const sandboxd_client *c);
/* D-Bus: whether polkit may ask the user (a password prompt) before answering. Default:
 * no. Nothing on an HTTP client. */
int sandboxd_client_set_interactive(sandboxd_client *c, bool interactive);
sandboxd_client *sandboxd_client_free(sandboxd_client *c);

/* The limit for a whole request, except streams (exec, attach, wait, file transfers), which
 * may take as long as the command or transfer does. 0: none. Default: 5 minutes. */
int sandboxd_client_set_timeout(sandboxd_client *c, uint64_t usec);

/* While a request is in flight, also wait for fd to become readable, then call fn in the
 * same thread (say, a self-pipe written by a SIGINT handler). fn may issue other requests
 * on c: they use connections of their own. A negative return of fn aborts the request in
 * flight with that value (kind SANDBOXD_ERROR_CANCELLED). fd < 0 removes it. */
typedef int (*sandboxd_wakeup_fn)(sandboxd_client *c, int fd, void *userdata);
int sandboxd_client_set_wakeup(sandboxd_client *c, int fd, sandboxd_wakeup_fn fn, void *userdata);

/* The last failure of a call on c; kind SANDBOXD_ERROR_NONE after a success. */
const sandboxd_error *sandboxd_client_last_error(const sandboxd_client *c);

/* Any request, for what has no function of its own: path starts with "/"; body is sent as
 * application/json when it is not NULL. The answer's body (NUL-terminated) and status
 * come back whatever the status; only transport failures return an error. */
int sandboxd_request(sandboxd_client *c, const char *method, const char *path, const char *body,
                     long *ret_status, char **ret_body, size_t *ret_size);

/* GET /v1/health, /v1/drain (POST drain=1, DELETE drain=0, GET drain=-1): the JSON text. */
int sandboxd_health(sandboxd_client *c, char **ret_json);
int sandboxd_drain(sandboxd_client *c, int drain, char **ret_json);

/* --- images ---------------------------------------------------------------------------- */

/* GET /v1/images (name NULL) or /v1/images/NAME: the JSON text (ListImages(), GetImage()). */
int sandboxd_image_get(sandboxd_client *c, const char *name, char **ret_json);
/* PUT /v1/images/NAME: the tar read from fd (a file or a pipe) until its end, streamed; the
 * new image's JSON once sandboxd has it in place (ImportImage() with the fd on D-Bus).
 * Administrators only. */
int sandboxd_image_import(sandboxd_client *c, const char *name, int fd, char **ret_json);
/* DELETE /v1/images/NAME: the removed image's JSON (RemoveImage()). Administrators only. */
int sandboxd_image_remove(sandboxd_client *c, const char *name, char **ret_json);

/* --- sessions -------------------------------------------------------------------------- */

typedef struct sandboxd_session {
        char *id;
        char *user;
        char *workspace;
        char *state;          /* "starting", "active", "closing", "closed" */
        char *unit;           /* sandboxd-ID.slice */
        char *workspace_path; /* the commands' working directory */
        bool frozen;
        uint64_t ttl_s;
        uint64_t created_at_usec;
        uint64_t expires_at_usec;
        uint64_t memory_max;  /* bytes */
        uint64_t cpu_quota;   /* percent of one CPU */
        uint64_t tasks_max;
        unsigned commands;    /* commands started */
        unsigned running;     /* of which running */
        char *json;           /* the object as sandboxd sent it */
        char *exec_mode;      /* "unit" or "session" (added last: the fields above keep their place) */
        char *node;           /* the node that has it (sandboxd-api(7), NODES) */
} sandboxd_session;

sandboxd_session *sandboxd_session_free(sandboxd_session *s);
void sandboxd_session_list_free(sandboxd_session **list);

/* Creates the session of (user, workspace), or returns the active one (then *ret_created
 * is false). options_json: NULL, or a JSON object of the request's other fields, e.g.
 * {"limits":{"memory_max":"512M"},"ttl_s":600,"exec_mode":"session"}. */
int sandboxd_session_create(sandboxd_client *c, const char *user, const char *workspace,
                            const char *options_json, sandboxd_session **ret, bool *ret_created);
int sandboxd_session_get(sandboxd_client *c, const char *id, sandboxd_session **ret);
/* user: NULL for all; the list is NULL-terminated. */
int sandboxd_session_list(sandboxd_client *c, const char *user, sandboxd_session ***ret, size_t *ret_n);
/* Closes the session; its running commands are stopped. purge also empties its workspace. */
int sandboxd_session_close(sandboxd_client *c, const char *id, bool purge, sandboxd_session **ret);
int sandboxd_session_freeze(sandboxd_client *c, const char *id, bool freeze, sandboxd_session **ret);
int sandboxd_session_touch(sandboxd_client *c, const char *id);

/* --- exposed ports --------------------------------------------------------------------- */

/* A TCP port of a session's network namespace that sandboxd made reachable from the host:
 * on a unix socket, and on 127.0.0.1:host_port if that was asked for. */
typedef struct sandboxd_port {
        uint16_t port;      /* the port inside the session */
        char *socket;       /* the unix socket that reaches it */
        uint16_t host_port; /* the port of 127.0.0.1 on the host that reaches it; 0: none */
        char *url;          /* "http://127.0.0.1:HOST_PORT/", or NULL without a host port */
        char *unit;         /* the socket unit, sandboxd-SID-port-PORT.socket */
        char *json;         /* the object as sandboxd sent it (made from the D-Bus answer on D-Bus) */
} sandboxd_port;

sandboxd_port *sandboxd_port_free(sandboxd_port *p);
void sandboxd_port_list_free(sandboxd_port **list);

/* Exposes port of the session (host: also on a free port of 127.0.0.1 of the host) and
 * returns once its socket listens; the same port again returns it unchanged (the other
 * host is -EBUSY, code "busy"). Refusals as the API's: "invalid_value" (outside the
 * allowed range), "port_exposure_unavailable", "too_many_ports", "host_ports_exhausted". */
int sandboxd_port_expose(sandboxd_client *c, const char *session, uint16_t port, bool host, sandboxd_port **ret);
/* The session's exposed ports, smallest first; the list is NULL-terminated. */
int sandboxd_port_list(sandboxd_client *c, const char *session, sandboxd_port ***ret, size_t *ret_n);
/* One exposed port: -ENOENT, code "port_not_exposed", if it is not. */
int sandboxd_port_get(sandboxd_client *c, const char *session, uint16_t port, sandboxd_port **ret);
/* Stops exposing it (its socket goes at once): -ENOENT, code "port_not_exposed", if it was not. */
int sandboxd_port_unexpose(sandboxd_client *c, const char *session, uint16_t port);

/* --- commands -------------------------------------------------------------------------- */

typedef enum sandboxd_status {
        SANDBOXD_STATUS_UNKNOWN = -1,
        SANDBOXD_STATUS_PENDING = 0,
        SANDBOXD_STATUS_RUNNING,
        SANDBOXD_STATUS_SUCCEEDED, /* exit 0 */
        SANDBOXD_STATUS_FAILED,    /* non-zero exit, or systemd could not set the command up */
        SANDBOXD_STATUS_TIMED_OUT,
        SANDBOXD_STATUS_SIGNALED,
        SANDBOXD_STATUS_LOST,
        _SANDBOXD_STATUS_MAX,
} sandboxd_status;

const char *sandboxd_status_to_string(sandboxd_status s);
sandboxd_status sandboxd_status_from_string(const char *s);

/* A command's result: from the stream's exit event, or a snapshot (sandboxd_command_get(),
 * sandboxd_command_wait()), which adds the kept output and the byte counts. */
typedef struct sandboxd_result {
        char *request_id;
        char *unit;
        char *session;
        sandboxd_status status;
        bool terminal;
        int exit_code;        /* -1: none (not exited, or signaled) */
        int signal;           /* 0: none */
        char *signal_name;    /* "SIGKILL", or NULL */
        char *reason;         /* "success", "exit-code", "setup-exec", "oom-kill", ...; NULL while running */
        uint64_t duration_ms;
        uint64_t cpu_usec;
        uint64_t memory_bytes;
        uint64_t tasks;
        /* snapshots only */
        char *stdout_data;    /* the kept bytes, NUL-terminated (may contain NULs) */
        size_t stdout_size;
        char *stderr_data;
        size_t stderr_size;
        bool stdout_truncated;
        bool stderr_truncated;
        uint64_t stdout_bytes; /* all bytes written, kept or not */
        uint64_t stderr_bytes;
        uint64_t events_bytes; /* size of the kept event log: the offset to attach at to see only new events */
        char *json;
} sandboxd_result;

sandboxd_result *sandboxd_result_free(sandboxd_result *r);
void sandboxd_result_list_free(sandboxd_result **list);

/* The status a shell would give for the result: the exit code; 128+N for signal N; 124 for
 * timed_out (as timeout(1)); 1 for a command that failed before it ran (reason setup-*);
 * 125 for lost; -1 while not terminal. */
int sandboxd_result_exit_status(const sandboxd_result *r);

typedef enum sandboxd_event_type {
        SANDBOXD_EVENT_ACCEPTED,
        SANDBOXD_EVENT_STDOUT,
        SANDBOXD_EVENT_STDERR,
        SANDBOXD_EVENT_TRUNCATED, /* the kept output of one stream reached its limit */
        SANDBOXD_EVENT_EXIT,
        SANDBOXD_EVENT_OTHER,     /* a type this version does not know (e.g. "notice") */
        _SANDBOXD_EVENT_TYPE_MAX,
} sandboxd_event_type;

/* One NDJSON event. Valid during the callback only. */
typedef struct sandboxd_event {
        sandboxd_event_type type;
        const char *type_name;    /* as sent: "accepted", "stdout", "notice", ... */
        const char *request_id;   /* accepted */
        const char *unit;         /* accepted */
        const char *data;         /* stdout, stderr: the bytes, decoded from data or data_b64 */
        size_t size;
        bool live;                /* not kept (past the limit): not counted in offsets */
        const char *stream;       /* truncated: "stdout" or "stderr" */
        uint64_t kept_bytes;      /* truncated */
        const sandboxd_result *result; /* exit */
        const char *line;         /* the raw line, without its newline */
        size_t line_size;
        uint64_t offset;          /* bytes of kept lines received so far, this one included:
                                   * attach there to go on after this event */
} sandboxd_event;

/* Return a negative value to stop: the call returns it (kind SANDBOXD_ERROR_CANCELLED). */
typedef int (*sandboxd_event_fn)(sandboxd_client *c, const sandboxd_event *ev, void *userdata);

/* What to run: built with the setters, then run or started, any number of times. */
typedef struct sandboxd_exec sandboxd_exec;

int sandboxd_exec_new(sandboxd_exec **ret);
sandboxd_exec *sandboxd_exec_free(sandboxd_exec *e);
int sandboxd_exec_set_argv(sandboxd_exec *e, const char *const *argv); /* NULL-terminated */
int sandboxd_exec_set_cwd(sandboxd_exec *e, const char *cwd);
int sandboxd_exec_set_env(sandboxd_exec *e, const char *name, const char *value);
int sandboxd_exec_set_timeout_ms(sandboxd_exec *e, uint64_t ms); /* 0: sandboxd's default */
int sandboxd_exec_set_stdin(sandboxd_exec *e, const void *data, size_t size);
int sandboxd_exec_set_stdin_stream(sandboxd_exec *e, bool stream); /* feed it with sandboxd_command_write_stdin() */
int sandboxd_exec_set_request_id(sandboxd_exec *e, const char *request_id);
/* Runs the command on a pseudo-terminal of sandboxd's of this size (1..1000 each; 0 and 0:
 * on pipes again): its output is the stdout events, its input is streamed (feed it with
 * sandboxd_command_write_stdin(); eof types ^D), resize it with sandboxd_command_resize(). */
int sandboxd_exec_set_tty(sandboxd_exec *e, unsigned rows, unsigned cols);
/* With sandboxd_exec_set_tty(), over D-Bus: the command runs on the caller's own pseudo-
 * terminal instead, fd being its slave (stdin, stdout and stderr; the caller keeps the
 * master, sets its size and copies to and from it, as machinectl shell does); sandboxd keeps
 * no output. Over HTTP sandboxd_exec_run() and _start() refuse it (-EOPNOTSUPP). The fd
 * stays the caller's. */
int sandboxd_exec_set_terminal_fd(sandboxd_exec *e, int fd);
/* sandboxd_exec_run(): the command's output goes to these fds (both, or -1 and -1 for none)
 * instead of to fn as stdout and stderr events. Over D-Bus the command writes into them
 * itself (a terminal gets a pipe the library copies from) and sandboxd keeps none of it;
 * over HTTP the library writes the events' bytes. A write that fails (EPIPE: ignore
 * SIGPIPE) drops the rest of that stream. The fds are the caller's. */
int sandboxd_exec_set_output_fds(sandboxd_exec *e, int stdout_fd, int stderr_fd);

/* Runs the command and streams its events to fn (may be NULL) as they arrive; returns the
 * result of its exit event. Returns 0 whatever the command's own status was. */
int sandboxd_exec_run(sandboxd_client *c, const char *session, const sandboxd_exec *e, sandboxd_event_fn fn,
                      void *userdata, sandboxd_result **ret);
/* Starts it and returns at once (?wait=false) with its request id. */
int sandboxd_exec_start(sandboxd_client *c, const char *session, const sandboxd_exec *e, char **ret_request_id);

/* Re-attaches to a command: replays its kept events from byte offset (0: all), then follows
 * it live until its exit event. */
int sandboxd_command_attach(sandboxd_client *c, const char *session, const char *request_id, uint64_t offset,
                            sandboxd_event_fn fn, void *userdata, sandboxd_result **ret);
/* Waits until the command is terminal (at most timeout_usec, 0: no limit; -ETIMEDOUT past
 * it) and returns its snapshot. */
int sandboxd_command_wait(sandboxd_client *c, const char *session, const char *request_id, uint64_t timeout_usec,
                          sandboxd_result **ret);
/* The snapshot: status, result, kept output. Works for running and finished commands, and
 * after sandboxd restarted. */
int sandboxd_command_get(sandboxd_client *c, const char *session, const char *request_id, sandboxd_result **ret);
/* The session's commands, oldest first, without output; NULL-terminated. */
int sandboxd_command_list(sandboxd_client *c, const char *session, sandboxd_result ***ret, size_t *ret_n);
/* SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGUSR1 or SIGUSR2, to every process of the command. */
int sandboxd_command_signal(sandboxd_client *c, const char *session, const char *request_id, int sig);
int sandboxd_command_write_stdin(sandboxd_client *c, const char *session, const char *request_id,
                                 const void *data, size_t size, bool eof);
/* Sets the window size of a command started with sandboxd_exec_set_tty(); kind CONFLICT
 * (code not_a_terminal) for a command on pipes. */
int sandboxd_command_resize(sandboxd_client *c, const char *session, const char *request_id, unsigned rows,
                            unsigned cols);

/* --- terminals: a command started on a terminal (sandboxd_exec_set_tty) ------------------ */

/* An interactive connection to such a command (over HTTP, the WebSocket at
 * .../commands/RID/tty): its output from byte offset (0: all of it so far), then live; input
 * unless readonly. Over D-Bus: -EOPNOTSUPP (start the command on a terminal of your own). */
typedef struct sandboxd_terminal sandboxd_terminal;
/* Called with output bytes; a negative return stops sandboxd_terminal_process() with it. */
typedef int (*sandboxd_terminal_output_fn)(sandboxd_terminal *t, const void *data, size_t size, void *userdata);

int sandboxd_terminal_open(sandboxd_client *c, const char *session, const char *request_id, uint64_t offset,
                           bool readonly, sandboxd_terminal **ret);
sandboxd_terminal *sandboxd_terminal_free(sandboxd_terminal *t);
/* Call sandboxd_terminal_process() once after the open (what came with sandboxd's answer
 * is read from memory there), then poll this fd for sandboxd_terminal_poll_events()
 * (POLLIN, POLLOUT; 0 once it is over) and call it again. */
int sandboxd_terminal_fd(const sandboxd_terminal *t);
short sandboxd_terminal_poll_events(const sandboxd_terminal *t);
/* Queue input, or a new window size; sent by sandboxd_terminal_process(). */
int sandboxd_terminal_write(sandboxd_terminal *t, const void *data, size_t size);
int sandboxd_terminal_resize(sandboxd_terminal *t, unsigned rows, unsigned cols);
/* Bytes queued and not yet sent: stop reading your input while this is large. */
size_t sandboxd_terminal_queued(const sandboxd_terminal *t);
/* Leave the command running and close the connection (it ends in sandboxd_terminal_process()). */
int sandboxd_terminal_detach(sandboxd_terminal *t);
/* Sends and receives what it can without blocking; output goes to fn. 0: still open; 1: the
 * connection is over (the command ended, or it was detached or closed); < 0: failed. */
int sandboxd_terminal_process(sandboxd_terminal *t, sandboxd_terminal_output_fn fn, void *userdata);
/* Once over: the command's result from its exit frame, handed to the caller; -ENODATA when
 * the connection ended before the command did. */
int sandboxd_terminal_take_result(sandboxd_terminal *t, sandboxd_result **ret);
/* The close code sandboxd sent (1000 the command ended, 1001 sandboxd stopping, 1008
 * refused input), 0 if none. */
unsigned sandboxd_terminal_close_code(const sandboxd_terminal *t);

/* --- files (paths are relative to the session's workspace) ----------------------------- */

typedef enum sandboxd_file_type {
        SANDBOXD_FILE_OTHER = 0,
        SANDBOXD_FILE_REGULAR,
        SANDBOXD_FILE_DIRECTORY,
        SANDBOXD_FILE_SYMLINK,
} sandboxd_file_type;

typedef struct sandboxd_file_info {
        char *name;
        sandboxd_file_type type;
        uint64_t size;
        unsigned mode;       /* permission bits */
        uint64_t mtime_usec; /* 0 if unknown */
        char *target;        /* symlinks: where it points, when sent */
        char *json;
} sandboxd_file_info;

sandboxd_file_info *sandboxd_file_info_free(sandboxd_file_info *i);
void sandboxd_file_info_list_free(sandboxd_file_info **list);

/* Called as bytes move; total is 0 when unknown. A negative return stops the transfer. */
typedef int (*sandboxd_progress_fn)(uint64_t done, uint64_t total, void *userdata);

/* Writes the file (replacing it) from fd until EOF; size: the expected length, or 0 if unknown. */
int sandboxd_file_upload(sandboxd_client *c, const char *session, const char *path, int fd, uint64_t size,
                         sandboxd_progress_fn fn, void *userdata);
int sandboxd_file_write(sandboxd_client *c, const char *session, const char *path, const void *data, size_t size);
/* Reads the file into fd. */
int sandboxd_file_download(sandboxd_client *c, const char *session, const char *path, int fd,
                           sandboxd_progress_fn fn, void *userdata);
/* Reads the file into memory (NUL-terminated); a file larger than max_size (0: 64 MiB) is -EFBIG. */
int sandboxd_file_read(sandboxd_client *c, const char *session, const char *path, size_t max_size, char **ret,
                       size_t *ret_size);
int sandboxd_file_stat(sandboxd_client *c, const char *session, const char *path, sandboxd_file_info **ret);
/* A directory's entries, NULL-terminated; *ret_truncated when sandboxd listed only the first ones. */
int sandboxd_file_list(sandboxd_client *c, const char *session, const char *path, sandboxd_file_info ***ret,
                       size_t *ret_n, bool *ret_truncated);
int sandboxd_file_mkdir(sandboxd_client *c, const char *session, const char *path);
int sandboxd_file_remove(sandboxd_client *c, const char *session, const char *path, bool recursive);
int sandboxd_file_move(sandboxd_client *c, const char *session, const char *path, const char *to);

#ifdef __cplusplus
}
#endif

#endif
