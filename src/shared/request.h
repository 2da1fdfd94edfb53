/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Untrusted request bodies are parsed here, once, into typed structs. Every problem is
 * reported as an error code (stable, for programs) and a message (for people). */

typedef struct RequestError {
        const char *code; /* "invalid_json", "unknown_field", "invalid_type", "invalid_value", ... */
        char message[256];
} RequestError;

typedef enum NetworkMode {
        NETWORK_NONE,
        _NETWORK_MODE_MAX,
        _NETWORK_MODE_INVALID = -EINVAL,
} NetworkMode;

typedef struct SessionRequest {
        char *user;
        char *workspace;
        bool has_memory_max, has_cpu_quota, has_tasks_max;
        uint64_t memory_max;        /* bytes */
        uint64_t cpu_quota_percent; /* 100 = one CPU */
        uint64_t tasks_max;
        NetworkMode network;
        bool has_ttl;
        uint64_t ttl_s;             /* idle time-to-live */
} SessionRequest;

typedef enum StdinMode {
        STDIN_NULL,   /* /dev/null */
        STDIN_DATA,   /* all of it in the request */
        STDIN_STREAM, /* fed later through POST .../stdin */
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
        bool wait;         /* false: answer 202 at once (from ?wait=false) */
} CommandRequest;

void session_request_done(SessionRequest *r);
void command_request_done(CommandRequest *r);

int session_request_parse(const char *body, size_t n, SessionRequest *ret, RequestError *error);
int command_request_parse(const char *body, size_t n, CommandRequest *ret, RequestError *error);

#define REQUEST_ARGV_MAX 4096
#define REQUEST_ENV_MAX 1024
