/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <curl/curl.h>
#include <json-c/json.h>
#include <systemd/sd-bus.h>

#include "buf.h"
#include "json-util.h"
#include "libsandboxd.h"
#include "macro.h"
#include "validate.h"

#define _public_ __attribute__((visibility("default")))

#define DEFAULT_TIMEOUT_USEC (300 * USEC_PER_SEC)
#define CONNECT_TIMEOUT_MS 10000L
/* The longest NDJSON line we accept: sandboxd sends output in chunks of at most 64 KiB,
 * which base64 or JSON escaping can blow up six times. */
#define NDJSON_LINE_MAX (1024 * 1024)

struct sandboxd_client {
        char *base_url;  /* "http://localhost" on a unix socket */
        char *unix_path; /* NULL for TCP */
        char *auth_header;
        uint64_t timeout_usec;
        int wakeup_fd;
        sandboxd_wakeup_fn wakeup_fn;
        void *wakeup_userdata;
        bool in_wakeup;
        sandboxd_error error;
        /* the D-Bus transport (transport-dbus.c): NULL for an HTTP client. A bus client is
         * also an HTTP client of the local unix socket, for sandboxd_request() only. */
        sd_bus *bus;
        char *cur_session, *cur_request_id, *cur_path; /* the command bus_exec_run() follows */
};

struct sandboxd_exec {
        json_object *body; /* the request, as it will be sent */
        int output_fd[2];  /* stdout, stderr: where the output goes instead of events; -EBADF: none */
        int terminal_fd;   /* over D-Bus, with tty: the caller's pty slave, all three; -EBADF: none */
};

/* --- errors.c: pure mappings ------------------------------------------------------------ */

/* os_errno: what connect() & co. failed with (CURLINFO_OS_ERRNO), 0 if unknown */
int errno_from_curl(CURLcode code, long os_errno);
/* Fills e from an error answer: {"error":{"code":..,"message":..}}, or what can be made of
 * another body. Returns e->error. */
int error_from_http(sandboxd_error *e, long status, const char *body, size_t size);
int error_set(sandboxd_error *e, sandboxd_error_kind kind, int error, const char *fmt, ...) _printf_(4, 5);
void error_clear(sandboxd_error *e);
/* Every public call on a client starts with this: forgets the last error. */
void client_begin(sandboxd_client *c);
/* Records err on c unless the call that failed already did; returns err. */
int client_fail(sandboxd_client *c, int err);
/* Clears the error on success; passes r on. */
int client_done(sandboxd_client *c, int r);

/* --- url.c: building URLs --------------------------------------------------------------- */

/* Appends s percent-encoded: everything but A-Z a-z 0-9 - . _ ~ (and '/' when keep_slash). */
int url_append_escaped(Buf *b, const char *s, bool keep_slash);
/* Appends "?key=value" or "&key=value" (value escaped; NULL: just the key). */
int url_append_query(Buf *b, const char *key, const char *value);
/* base + "/v1/sessions/" + escaped session [+ "/" + tail, verbatim]. */
int url_session(Buf *b, const sandboxd_client *c, const char *session, const char *tail);
/* base + "/v1/sessions/SID/commands/RID" [+ "/" + tail]. */
int url_command(Buf *b, const sandboxd_client *c, const char *session, const char *request_id, const char *tail);
/* base + "/v1/sessions/SID/files/" + the path, each component escaped; leading and repeated
 * slashes dropped (the workspace's top is ""). */
int url_file(Buf *b, const sandboxd_client *c, const char *session, const char *path);
/* Checks a URL given to sandboxd_client_new() and splits off a unix socket path. */
int url_parse_endpoint(const char *url, char **ret_base, char **ret_unix_path);
/* The header line "X-Sandboxd-Scope: USER/WORKSPACE", each part percent-encoded. */
int url_scope_header(const char *user, const char *workspace, char **ret);


/* --- ndjson-reader.c: lines and events -------------------------------------------------- */

typedef int (*line_fn)(const char *line, size_t size, void *userdata);

typedef struct LineSplitter {
        Buf partial;
        size_t max_line;
} LineSplitter;

/* Calls fn for each complete line (without its "\n"; a "\r" before it is kept), keeping an
 * incomplete last line for the next call. -EMSGSIZE for a line longer than max_line. */
int line_splitter_feed(LineSplitter *s, const char *p, size_t n, line_fn fn, void *userdata);
/* At the end of the stream: -EBADMSG if a partial line is left. */
int line_splitter_finish(LineSplitter *s);
void line_splitter_done(LineSplitter *s);

typedef struct EventReader {
        LineSplitter lines;
        uint64_t offset;          /* bytes of kept lines so far */
        sandboxd_client *client;
        sandboxd_event_fn fn;
        void *userdata;
        sandboxd_result *result;  /* from the exit event */
        char *request_id;         /* from the accepted event */
        int error;                /* what stopped the stream */
        bool output_fds;          /* stdout and stderr events' bytes go to output_fd[] instead of to fn */
        int output_fd[2];
} EventReader;

/* Decodes one line into ev; storage (json, decoded bytes, result) lives in *ret_json,
 * *bytes and *ret_result until the caller frees them. */
int event_decode(const char *line, size_t size, sandboxd_event *ev, json_object **ret_json, Buf *bytes,
                 sandboxd_result **ret_result);
int event_reader_feed(EventReader *r, const char *p, size_t n);
/* After the exit event: its result, with the request id of the accepted event and session
 * when it lacks them, into *ret (or freed if ret is NULL). -ENOMEM, nothing kept, otherwise. */
int event_reader_take_result(EventReader *r, const char *session, sandboxd_result **ret);
void event_reader_done(EventReader *r);

/* --- parse.c: JSON to the public structs ------------------------------------------------ */

const char *json_get_string(json_object *o, const char *key);
uint64_t json_get_u64(json_object *o, const char *key);
bool json_get_bool(json_object *o, const char *key);
int json_parse_text(const char *text, size_t size, json_object **ret);
char *json_to_text(json_object *o);

int session_from_json(json_object *o, sandboxd_session **ret);
int result_from_json(json_object *o, sandboxd_result **ret);
int file_info_from_json(json_object *o, const char *name, sandboxd_file_info **ret);
int file_type_from_string(const char *s);
int mode_from_json(json_object *v, unsigned *ret);
/* An exposed port's object {"port","socket","host_port","url","unit"}: -EBADMSG unless port
 * is 1..65535, socket a non-empty string and host_port null or 1..65535. */
int port_from_json(json_object *o, sandboxd_port **ret);
/* The same object made from what D-Bus says of a port (host_port 0: none), state "active". */
int port_json_new(const char *session, uint16_t port, const char *socket, uint16_t host_port, json_object **ret);

/* --- ws-head.c: the answer to a WebSocket upgrade --------------------------------------- */

/* The longest answer head we read (sandboxd's are a few hundred bytes). */
#define WS_HEAD_MAX (16 * 1024)

typedef struct WsHead {
        int status;
        bool upgraded;           /* 101 with Upgrade, Connection and the expected accept key */
        size_t head_size;        /* bytes up to and including the empty line */
        uint64_t content_length; /* UINT64_MAX: none given */
} WsHead;

/* Parses the head at the start of p[0..n): 0 incomplete, 1 complete (*ret filled),
 * -EMSGSIZE past WS_HEAD_MAX, -EBADMSG malformed, -EPROTO a 101 without the handshake
 * (accept: the Sec-WebSocket-Accept value expected). */
int ws_parse_head(const char *p, size_t n, const char *accept, WsHead *ret);

/* --- terminal.c ------------------------------------------------------------------------- */

/* For the fuzzer: what a terminal does with p[0..n) as the frames after the head, with no
 * connection (reading past them fails). *ret_used the bytes read, *ret_result whether an exit
 * frame came. */
int terminal_replay(const void *p, size_t n, size_t *ret_used, bool *ret_result);

/* --- transport.c: one HTTP request ------------------------------------------------------ */

typedef struct HttpCall HttpCall;
typedef int (*body_sink_fn)(HttpCall *call, const char *p, size_t n);

struct HttpCall {
        const char *method;
        const char *url;
        const char *content_type;     /* of the request body */
        const char *scope_header;     /* "X-Sandboxd-Scope: ..." (url_scope_header()), or NULL */
        const void *body;             /* in-memory request body, or NULL */
        size_t body_size;
        int upload_fd;                /* or a body read from this fd, when >= 0 */
        uint64_t upload_size;         /* 0: unknown (chunked) */
        bool stream;                  /* no overall time limit ... */
        uint64_t timeout_usec;        /* ... unless this one */
        body_sink_fn sink;            /* a 2xx body goes here; without one, into response */
        void *userdata;
        sandboxd_progress_fn progress;
        void *progress_userdata;

        /* the answer */
        long status;
        Buf response;                 /* error bodies, and 2xx bodies without a sink */
        char content_type_out[128];
        char allow[128];              /* the Allow header of a 405 */
        int abort_error;              /* set by a sink or callback: stops the transfer */
};

#define HTTP_CALL_INIT { .upload_fd = -EBADF }

/* Performs the call. 2xx: 0. Other statuses: the mapped error, recorded on c. Transport
 * failures, aborts: the error, recorded. */
int http_call_perform(sandboxd_client *c, HttpCall *call);
/* following a 421 wrong_node through SANDBOXD_NODES (transport.c) */
int wrong_node_url(sandboxd_client *c, int r, const char *url_in, bool can_resend,
                   char node[static NODE_NAME_MAX + 1], char **ret_url);
void wrong_node_again(sandboxd_client *c, int r, const char *node, const char *url);
void http_call_done(HttpCall *call);

/* GET/POST/DELETE a JSON resource: parses a 2xx body into *ret_json (NULL allowed). */
int http_json(sandboxd_client *c, const char *method, const char *url, json_object *body, long *ret_status,
              json_object **ret_json);
/* The same with a header X-Sandboxd-Scope (url_scope_header()). */
int http_json_scoped(sandboxd_client *c, const char *method, const char *url, json_object *body,
                     const char *scope_header, long *ret_status, json_object **ret_json);

/* --- transport-dbus.c: the D-Bus transport ---------------------------------------------- */

int bus_open(sandboxd_client *c);
void bus_close(sandboxd_client *c);

int bus_session_create(sandboxd_client *c, const char *user, const char *workspace, const char *options,
                       sandboxd_session **ret, bool *ret_created);
int bus_session_get(sandboxd_client *c, const char *id, sandboxd_session **ret);
int bus_session_list(sandboxd_client *c, const char *user, sandboxd_session ***ret, size_t *ret_n);
int bus_session_close(sandboxd_client *c, const char *id, bool purge, sandboxd_session **ret);
int bus_session_freeze(sandboxd_client *c, const char *id, bool freeze, sandboxd_session **ret);
int bus_port_expose(sandboxd_client *c, const char *session, uint16_t port, bool host, sandboxd_port **ret);
int bus_port_list(sandboxd_client *c, const char *session, sandboxd_port ***ret, size_t *ret_n);
int bus_port_get(sandboxd_client *c, const char *session, uint16_t port, sandboxd_port **ret);
int bus_port_unexpose(sandboxd_client *c, const char *session, uint16_t port);
int bus_session_touch(sandboxd_client *c, const char *id);
int bus_exec_run(sandboxd_client *c, const char *session, const sandboxd_exec *e, sandboxd_event_fn fn,
                 void *userdata, sandboxd_result **ret);
int bus_exec_start(sandboxd_client *c, const char *session, const sandboxd_exec *e, char **ret_request_id);
int bus_command_signal(sandboxd_client *c, const char *session, const char *request_id, int sig);
int bus_command_resize(sandboxd_client *c, const char *session, const char *request_id, unsigned rows, unsigned cols);

int bus_command_attach(sandboxd_client *c, const char *session, const char *request_id, uint64_t offset,
                       sandboxd_event_fn fn, void *userdata, sandboxd_result **ret);
int bus_command_get(sandboxd_client *c, const char *session, const char *request_id, sandboxd_result **ret);
int bus_command_wait(sandboxd_client *c, const char *session, const char *request_id, uint64_t timeout_usec,
                     sandboxd_result **ret);
int bus_command_list(sandboxd_client *c, const char *session, sandboxd_result ***ret, size_t *ret_n);
int bus_command_write_stdin(sandboxd_client *c, const char *session, const char *request_id, const void *data,
                            size_t size, bool eof);
int bus_health(sandboxd_client *c, char **ret_json);
int bus_drain(sandboxd_client *c, int drain, char **ret_json);
/* images: GetImage() (name) or ListImages() (NULL), ImportImage(), RemoveImage(): the JSON */
int bus_image_json(sandboxd_client *c, const char *name, char **ret_json);
int bus_image_import(sandboxd_client *c, const char *name, int fd, char **ret_json);
int bus_image_remove(sandboxd_client *c, const char *name, char **ret_json);
/* the file API: Stat() (list false) or List() as the HTTP API's JSON; Read()'s fd and size */
int bus_file_json(sandboxd_client *c, const char *session, const char *path, bool list, json_object **ret);
int bus_file_open(sandboxd_client *c, const char *session, const char *path, int *ret_fd, uint64_t *ret_size);
int bus_file_write(sandboxd_client *c, const char *session, const char *path, const void *data, size_t size);
int bus_file_write_fd(sandboxd_client *c, const char *session, const char *path, int fd, uint64_t expect,
                      uint64_t *ret_size);
int bus_file_mkdir(sandboxd_client *c, const char *session, const char *path);
int bus_file_move(sandboxd_client *c, const char *session, const char *path, const char *to);
int bus_file_remove(sandboxd_client *c, const char *session, const char *path, bool recursive);

/* In a public function, after client_begin(): the call over D-Bus on a bus client. */
#define BUS_DISPATCH(c, call)                                           \
        do {                                                            \
                if ((c)->bus)                                           \
                        return client_done((c), (call));                \
        } while (0)
