/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sandboxctl mcp: what the protocol core (mcp.c) offers the tools (mcp-tools-*.c) and the
 * resources (mcp-resources.c). Tools run on worker threads, each call with a client of its
 * own worker; they talk to sandboxd through libsandboxd only. */

#include <json-c/json.h>

#include "sandboxctl.h"

/* --- configuration (the flags of `sandboxctl mcp`) ---------------------------------------- */

typedef struct McpHostPath {
        char *dir;      /* absolute, canonical, no trailing slash */
        bool writable;  /* rw: the sandbox's files may be copied into it */
} McpHostPath;

typedef struct McpConfig {
        const char *user;       /* defaults of the tools that take a scope */
        const char *workspace;
        uint64_t timeout_ms;    /* a command's timeout when the call gives none (--timeout=) */
        uint64_t kill_grace_ms; /* cancelled command: SIGTERM, then SIGKILL after this */
        unsigned jobs;          /* tool calls that run at once (--jobs=) */
        McpHostPath *host_paths; /* --host-path=DIR[:ro|:rw] */
        size_t n_host_paths;
} McpConfig;

/* --- errors ------------------------------------------------------------------------------- */

/* A tool's failure, answered as isError with structuredContent
 * {"ok":false,"error":{"code","message","http_status"}}: code is one of the shared error
 * table (src/shared/error-table.c), http_status its status there. */
typedef struct ToolError {
        const char *code;
        long http_status;
        char message[1024];
        char node[33]; /* wrong_node: the node that has the session; "" otherwise */
} ToolError;

/* Fails with a code of the error table (an unknown code is a bug: "internal"); returns -EINVAL. */
int tool_fail(ToolError *e, const char *code, const char *fmt, ...) _printf_(3, 4);

/* --- one tool call ------------------------------------------------------------------------ */

typedef struct McpCall {
        sandboxd_client *client; /* the worker's own: use it from this thread only */
        const McpConfig *config;
} McpCall;

/* Fails with what sandboxd (or libsandboxd) said about the last call on c->client: its code
 * and status, the message prefixed by what. Returns r. */
int tool_fail_client(McpCall *c, ToolError *e, int r, const char *what);

/* Whether the client cancelled this call (notifications/cancelled). A libsandboxd call in
 * flight is then aborted with -ECANCELED (kind SANDBOXD_ERROR_CANCELLED); no answer is sent. */
bool mcp_call_cancelled(McpCall *c);

/* Reports progress when the client gave a progressToken: notifications/progress with the
 * time since the call began and output_bytes, at most once a second. Any thread. */
void mcp_call_progress(McpCall *c, uint64_t output_bytes);

/* Also dispatch fd (a timer, say) while a libsandboxd call of this call waits: the client's
 * one wakeup belongs to mcp.c. fn's negative return aborts the libsandboxd call with it.
 * fd < 0 removes the one set before. */
int mcp_call_watch(McpCall *c, int fd, sandboxd_wakeup_fn fn, void *userdata);

/* After a cancellation, before the tool cleans up (stops a command, closes a session it
 * made): libsandboxd calls on c->client then no longer end at once with -ECANCELED. */
void mcp_call_cleanup_begin(McpCall *c);

/* A command of this call must not outlive it (cancelled, or the tool gave up): SIGTERM,
 * SIGKILL after config->kill_grace_ms, and wait (bounded) until it has ended. */
int mcp_call_stop_command(McpCall *c, const char *session, const char *request_id);

/* Sends a notification (method, params taken; NULL: none). Any thread. */
void mcp_notify(const char *method, json_object *params);

/* --- tools -------------------------------------------------------------------------------- */

typedef int (*mcp_tool_fn)(McpCall *c, json_object *args, json_object **ret, ToolError *e);

typedef struct McpTool {
        const char *name;
        /* the rest of its tools/list entry, as JSON members: "title", "description",
         * "inputSchema", "outputSchema" (MCP_OUTPUT()), "annotations" */
        const char *json;
        mcp_tool_fn run;
} McpTool;

/* The tools of each module, ended by { NULL }. */
extern const McpTool mcp_session_tools[];
extern const McpTool mcp_exec_tools[];
extern const McpTool mcp_file_tools[];

/* --- other methods run on the workers (mcp-resources.c) --------------------------------- */

/* A JSON-RPC error of a method (not of a tool): code -32602 and the like. */
typedef struct McpRpcError {
        int code;
        char message[512];
        char uri[512];       /* not empty: sent as the error's data {"uri": ...} */
} McpRpcError;

typedef int (*mcp_method_fn)(McpCall *c, json_object *params, json_object **ret, McpRpcError *err);

typedef struct McpMethod {
        const char *name;
        mcp_method_fn run;
} McpMethod;

/* resources/list, resources/templates/list, resources/read, resources/subscribe,
 * resources/unsubscribe; ended by { NULL }. The capability initialize announces: */
extern const McpMethod mcp_resource_methods[];
#define MCP_RESOURCES_CAPABILITY "{\"subscribe\":true,\"listChanged\":true}"
/* Stops what the resources started (the watcher of subscriptions), at exit. */
void mcp_resources_done(void);

/* --- schema pieces ------------------------------------------------------------------------ */

#define MCP_SESSION_ID "{\"type\":\"string\",\"pattern\":\"^([a-z][a-z0-9]{0,31}_)?[0-9a-f]{16}$\",\"maxLength\":49,\"description\":\"a session id: NODE_HEX (its node's name, '_', 16 hex digits), or 16 hex digits alone\"}"
#define MCP_REQUEST_ID "{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9._-]{1,64}$\",\"description\":\"a command's request id\"}"
#define MCP_USER "{\"type\":\"string\",\"pattern\":\"^[a-z_][a-z0-9_-]{0,31}$\"}"
#define MCP_WORKSPACE "{\"type\":\"string\",\"pattern\":\"^[a-z0-9_-]{1,64}$\"}"
#define MCP_ERROR_SCHEMA                                                                                      \
        "{\"type\":\"object\",\"properties\":{"                                                               \
        "\"code\":{\"type\":\"string\",\"description\":\"the shared error code, e.g. not_found\"},"          \
        "\"message\":{\"type\":\"string\"},"                                                                  \
        "\"http_status\":{\"type\":\"integer\",\"description\":\"the HTTP status of the code\"},"             \
        "\"node\":{\"type\":\"string\",\"description\":\"wrong_node: the node that has the session\"}},"     \
        "\"required\":[\"code\",\"message\",\"http_status\"]}"
/* The outputSchema of a tool whose data is described by data (a JSON Schema). */
#define MCP_OUTPUT(data)                                                                                      \
        "\"outputSchema\":{\"type\":\"object\",\"properties\":{"                                              \
        "\"ok\":{\"type\":\"boolean\"},\"data\":" data ",\"error\":" MCP_ERROR_SCHEMA "},"                    \
        "\"required\":[\"ok\"]}"

/* --- arguments (mcp-util.c) --------------------------------------------------------------- */

/* Each fails with missing_field, invalid_type or invalid_value (the shared codes). */
int check_args(json_object *args, const char *const *allowed, ToolError *e);
int arg_string(json_object *args, const char *key, bool required, const char **ret, ToolError *e);
/* a string that may hold NUL bytes (input for a command): its length in *ret_len */
int arg_text(json_object *args, const char *key, const char **ret, size_t *ret_len, ToolError *e);
/* 1 when given, 0 when absent (*ret untouched) */
int arg_uint(json_object *args, const char *key, uint64_t *ret, ToolError *e);
/* within [min, max], def when absent */
int arg_range(json_object *args, const char *key, uint64_t min, uint64_t max, uint64_t def, uint64_t *ret,
              ToolError *e);
int arg_bool(json_object *args, const char *key, bool def, bool *ret, ToolError *e);
int arg_session(json_object *args, const char **ret, ToolError *e);
int arg_request(json_object *args, const char **ret, ToolError *e);
/* none but the allowed arguments, and the session id */
int session_args(json_object *args, const char *const *allowed, const char **ret_session, ToolError *e);
/* user and workspace, or the server's defaults */
int scope_of(McpCall *c, json_object *args, const char **ret_user, const char **ret_ws, ToolError *e);

/* --- results (mcp-util.c) ----------------------------------------------------------------- */

json_object *json_from_text(const char *text);
/* bytes as "key" (UTF-8 text) or "key_b64" */
void add_bytes(json_object *o, const char *key, const char *p, size_t n, bool *oom);
/* status, exit_code, signal, reason of a result */
json_object *exit_data(const sandboxd_result *res, bool *oom);
/* a finished command: exit_data's, output up to max bytes a stream, truncation, usage; NULL: OOM */
json_object *result_data(const sandboxd_result *r, const char *session, size_t max);
/* {"sessions":[...]} as sandboxd lists them (of user; NULL: all): libsandboxd's error, or -ENOMEM */
int sessions_json(sandboxd_client *client, const char *user, json_object **ret);
/* a fresh request id "mcp-<16 hex>" */
int mcp_request_id(char **ret);
/* the server's configuration (transport, default scope, jobs, timeouts, host paths), as
 * sandbox_health and sandboxd://runtime show it; NULL: OOM */
json_object *server_config_data(const McpConfig *config, sandboxd_client *client);
