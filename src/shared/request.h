/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

#include "macro.h"

/* Untrusted request bodies are parsed here, once, into typed structs. Every problem is
 * reported as an error code (stable, for programs) and a message (for people). */

typedef struct RequestError {
        const char *code; /* "invalid_json", "unknown_field", "invalid_type", "invalid_value", ... (error-table.c) */
        char message[256];
} RequestError;

typedef enum NetworkMode {
        NETWORK_NONE,  /* PrivateNetwork=yes: loopback only */
        NETWORK_PROXY, /* only sandboxd's filtering proxy is reachable */
        NETWORK_HOST,  /* the host's network, as the config allows for the tenant */
        _NETWORK_MODE_MAX,
        _NETWORK_MODE_INVALID = -EINVAL,
} NetworkMode;

/* How a session's commands are run: each a transient unit of PID 1 (unit), or a child of
 * the session's executor service (session). */
typedef enum ExecMode {
        EXEC_MODE_UNIT,
        EXEC_MODE_SESSION,
        _EXEC_MODE_MAX,
        _EXEC_MODE_INVALID = -EINVAL,
} ExecMode;

typedef struct SessionRequest {
        char *user;
        char *workspace;
        bool has_memory_max, has_cpu_quota, has_tasks_max;
        uint64_t memory_max;        /* bytes */
        uint64_t cpu_quota_percent; /* 100 = one CPU */
        uint64_t tasks_max;
        bool has_network_mode;
        NetworkMode network;        /* when !has_network_mode: the configured default */
        char **network_deny;        /* domain patterns the session adds to the baseline */
        char **network_allow;       /* non-NULL: allow-list mode for the session */
        bool has_ttl;
        uint64_t ttl_s;             /* idle time-to-live */
        bool has_exec_mode;
        ExecMode exec_mode;         /* when !has_exec_mode: the configured default */
        char *image;                /* an image name (validated); NULL: [Images] Default= */
} SessionRequest;

typedef enum StdinMode {
        STDIN_NULL,   /* /dev/null */
        STDIN_DATA,   /* all of it in the request */
        STDIN_STREAM, /* fed later through POST .../stdin */
        STDIN_FD,     /* the caller's own file descriptor (D-Bus), handed to systemd as is */
        _STDIN_MODE_MAX,
        _STDIN_MODE_INVALID = -EINVAL,
} StdinMode;

const char *stdin_mode_to_string(StdinMode m);
StdinMode stdin_mode_from_string(const char *s);

typedef struct CommandRequest {
        char **argv;       /* at least one entry */
        char *cwd;         /* as given (checked against the workspace later); NULL: the workspace */
        char **env;        /* "NAME=value" */
        bool has_timeout;
        uint64_t timeout_ms;
        char *request_id;  /* NULL: generated */
        StdinMode stdin_mode;
        char *stdin_data;  /* STDIN_DATA */
        size_t stdin_size;
        int stdin_fd;      /* STDIN_FD; owned */
        /* The caller's own stdout/stderr (D-Bus): the command writes there directly and
         * sandboxd keeps no output of that stream. Owned. */
        bool has_stdout_fd, has_stderr_fd;
        int stdout_fd, stderr_fd;
        /* On a pseudo-terminal of this size (rows, cols): sandboxd's own, or the caller's
         * pty slave given as stdin (D-Bus). Its stdin is always streamed or that fd. */
        bool has_tty;
        unsigned tty_rows, tty_cols;
        bool wait;         /* false: answer 202 at once (from ?wait=false) */
} CommandRequest;

/* POST /v1/sessions/ID/ports: {"port": 1..65535, "host": bool}. The range the config
 * allows is the core's to check (port.c). */
typedef struct PortRequest {
        uint16_t port;
        bool host;     /* also a TCP port on the host's loopback */
} PortRequest;

void session_request_done(SessionRequest *r);
void command_request_done(CommandRequest *r);

/* An image name (images.h), else invalid_name. */
int request_check_image_name(const char *name, RequestError *e);
int session_request_parse(const char *body, size_t n, SessionRequest *ret, RequestError *error);
int command_request_parse(const char *body, size_t n, CommandRequest *ret, RequestError *error);
int port_request_parse(const char *body, size_t n, PortRequest *ret, RequestError *error);

/* The rules every front end applies, whatever the encoding (JSON over HTTP, a{sv} over
 * D-Bus): field names in messages are the JSON ones. Each returns -EINVAL and fills
 * *error, or 0. */
int request_error(RequestError *e, const char *code, const char *fmt, ...) _printf_(3, 4);
int request_check_uint(const char *field, uint64_t v, uint64_t min, uint64_t max, RequestError *e);
int request_parse_memory_max(const char *s, uint64_t *ret, RequestError *e); /* "512M" */
const char *network_mode_to_string(NetworkMode m);
NetworkMode network_mode_from_string(const char *s);
int request_parse_network_mode(const char *mode, NetworkMode *ret, RequestError *e);
const char *exec_mode_to_string(ExecMode m);
ExecMode exec_mode_from_string(const char *s);
int request_parse_exec_mode(const char *mode, ExecMode *ret, RequestError *e);
/* A domain pattern of network.deny or network.allow ("example.com", "*.example.com"),
 * normalized (lower case) into a new string appended to *list. */
int request_add_domain_pattern(const char *field, const char *pattern, char ***list, RequestError *e);
/* user and workspace present and valid */
int session_request_check_scope(const SessionRequest *s, RequestError *e);
int request_check_argv(char * const *argv, RequestError *e);
int request_check_env_name(const char *name, RequestError *e);
int request_check_cwd(const char *cwd, RequestError *e);
int request_check_request_id(const char *id, RequestError *e);
/* What a terminal needs of the rest of the request, once all of it is read: its size in
 * range, stdin absent (then streamed), "stream" or the caller's pty slave; and no caller fd
 * that is a terminal without "tty" (bubblewrap's CVE-2017-5226, TIOCSTI). */
int request_check_tty(CommandRequest *c, RequestError *e);
/* fd is a slave of a Unix 98 pseudo-terminal (devpts: majors 136..143), not its master. */
bool fd_is_pty_slave(int fd, dev_t *ret_rdev);

#define REQUEST_ARGV_MAX 4096
#define REQUEST_ENV_MAX 1024
#define REQUEST_CWD_MAX 4096
#define REQUEST_DOMAINS_MAX 256

/* Ranges of the numeric fields. */
#define REQUEST_MEMORY_MAX_MAX (UINT64_MAX / 2)
#define REQUEST_CPU_QUOTA_MAX 100000ULL
#define REQUEST_TASKS_MAX_MAX 1000000ULL
#define REQUEST_TTL_S_MAX (365ULL * 86400)
#define REQUEST_TIMEOUT_MS_MAX (UINT64_MAX / 1000000)
/* A terminal's rows and columns, each. */
#define REQUEST_TTY_SIZE_MAX 1000U
