/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl mcp: a Model Context Protocol server on stdin/stdout (JSON-RPC 2.0, one
 * message a line). Tools for sessions, commands, interactive commands on a terminal, files and exposed
 * ports; every result is a JSON text
 * {"ok":true,"data":...} or {"ok":false,"error":{...}}, also as structuredContent. */

#include <signal.h>
#include <stdarg.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "encoding.h"
#include "io-util.h"
#include "json-util.h"
#include "log.h"
#include "sandboxctl.h"
#include "tail-buf.h"
#include "term-keys.h"
#include "term-text.h"
#include "time-util.h"
#include "validate.h"

#define MCP_LATEST_VERSION "2025-06-18"
static const char *const mcp_versions[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" };

#define JSONRPC_PARSE_ERROR -32700
#define JSONRPC_INVALID_REQUEST -32600
#define JSONRPC_METHOD_NOT_FOUND -32601
#define JSONRPC_INVALID_PARAMS -32602
#define JSONRPC_INTERNAL_ERROR -32603

typedef struct Mcp {
        sandboxd_client *client;
        const char *user;       /* defaults for sandbox_run and sandbox_create_session */
        const char *workspace;
} Mcp;

/* --- tool descriptions ------------------------------------------------------------------- */

static const char tools_json[] =
"["
"{\"name\":\"sandbox_create_session\","
" \"description\":\"Create (or get the active) sandbox session of a user and workspace. Files in the workspace persist across sessions of the same scope. Returns the session, whose id the other tools take.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"user\":{\"type\":\"string\",\"description\":\"^[a-z_][a-z0-9_-]{0,31}$; default: the server's\"},"
"   \"workspace\":{\"type\":\"string\",\"description\":\"^[a-z0-9_-]{1,64}$; default: the server's\"},"
"   \"memory_max\":{\"type\":\"string\",\"description\":\"e.g. 512M\"},"
"   \"cpu_quota\":{\"type\":\"integer\",\"description\":\"percent of one CPU\"},"
"   \"tasks_max\":{\"type\":\"integer\"},"
"   \"ttl_s\":{\"type\":\"integer\",\"description\":\"idle time before the session closes\"},"
"   \"exec_mode\":{\"type\":\"string\",\"enum\":[\"unit\",\"session\"],\"description\":\"how its commands run: each a transient unit of PID 1, or children of the session's executor; default: sandboxd's ExecMode=\"}},"
"  \"additionalProperties\":false}},"
"{\"name\":\"sandbox_list_sessions\","
" \"description\":\"List sandbox sessions.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{\"user\":{\"type\":\"string\"}},\"additionalProperties\":false}},"
"{\"name\":\"sandbox_exec\","
" \"description\":\"Run a command in a session and wait for it. Give argv (no shell), or command (run by /bin/sh -c). Returns status, exit_code, stdout, stderr and truncation metadata.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"session_id\":{\"type\":\"string\"},"
"   \"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1},"
"   \"command\":{\"type\":\"string\",\"description\":\"a shell command line\"},"
"   \"cwd\":{\"type\":\"string\",\"description\":\"relative to the workspace\"},"
"   \"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
"   \"stdin\":{\"type\":\"string\"},"
"   \"timeout_ms\":{\"type\":\"integer\",\"minimum\":1},"
"   \"max_output_bytes\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"output returned per stream\"}},"
"  \"required\":[\"session_id\"],\"additionalProperties\":false}},"
"{\"name\":\"sandbox_run\","
" \"description\":\"Run a command in the session of a user and workspace (created if needed) and wait for it. Like sandbox_exec, without a session id.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"user\":{\"type\":\"string\"},\"workspace\":{\"type\":\"string\"},"
"   \"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1},"
"   \"command\":{\"type\":\"string\"},\"cwd\":{\"type\":\"string\"},"
"   \"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
"   \"stdin\":{\"type\":\"string\"},\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1},"
"   \"max_output_bytes\":{\"type\":\"integer\",\"minimum\":0}},"
"  \"additionalProperties\":false}},"
"{\"name\":\"sandbox_read_file\","
" \"description\":\"Read a file of a session's workspace. Text comes as content, other bytes as content_b64.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"session_id\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"},"
"   \"max_bytes\":{\"type\":\"integer\",\"minimum\":1}},"
"  \"required\":[\"session_id\",\"path\"],\"additionalProperties\":false}},"
"{\"name\":\"sandbox_write_file\","
" \"description\":\"Write (create or replace) a file in a session's workspace; missing parent directories are created.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"session_id\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"},"
"   \"content\":{\"type\":\"string\"},"
"   \"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"]}},"
"  \"required\":[\"session_id\",\"path\",\"content\"],\"additionalProperties\":false}},"
"{\"name\":\"sandbox_list_files\","
" \"description\":\"List a directory of a session's workspace (default: its top).\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"session_id\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"}},"
"  \"required\":[\"session_id\"],\"additionalProperties\":false}},"
"{\"name\":\"sandbox_close_session\","
" \"description\":\"Close a session: running commands are stopped; the workspace stays unless purge is true.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"session_id\":{\"type\":\"string\"},\"purge\":{\"type\":\"boolean\"}},"
"  \"required\":[\"session_id\"],\"additionalProperties\":false}},"
"{\"name\":\"sandbox_expose_port\","
" \"description\":\"Make a TCP port of a session (a server a command started on 127.0.0.1:PORT in it) reachable from the host: on a unix socket, and with host true also on a free port of 127.0.0.1 of the host. Returns port, socket, host_port and url (null without host). The same port again returns it unchanged.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"session_id\":{\"type\":\"string\"},"
"   \"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535,\"description\":\"within sandboxd's [Ports] Range=\"},"
"   \"host\":{\"type\":\"boolean\",\"description\":\"also on a port of 127.0.0.1 of the host; default false\"}},"
"  \"required\":[\"session_id\",\"port\"],\"additionalProperties\":false}},"
"{\"name\":\"sandbox_list_ports\","
" \"description\":\"List the exposed ports of a session.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":{\"type\":\"string\"}},"
"  \"required\":[\"session_id\"],\"additionalProperties\":false}},"
"{\"name\":\"sandbox_unexpose_port\","
" \"description\":\"Stop exposing a port of a session: its socket (and host port) go at once.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"session_id\":{\"type\":\"string\"},"
"   \"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535}},"
"  \"required\":[\"session_id\",\"port\"],\"additionalProperties\":false}},"
"{\"name\":\"sandbox_terminal_start\","
" \"description\":\"Start an interactive command (a shell, a REPL, an editor) on a terminal of the sandbox and return its first output: request_id, output, cursor, running, exit (status, exit_code, signal, reason; null while it runs) and dropped_bytes (output before the returned part that did not fit in max_bytes). Go on with sandbox_terminal_send.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"session_id\":{\"type\":\"string\",\"pattern\":\"^[0-9a-f]{16}$\"},"
"   \"command\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,\"description\":\"argv, no shell: e.g. [\\\"python3\\\", \\\"-i\\\"] or [\\\"bash\\\"]\"},"
"   \"rows\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,\"description\":\"default 24\"},"
"   \"cols\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,\"description\":\"default 80\"},"
"   \"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
"   \"cwd\":{\"type\":\"string\",\"description\":\"relative to the workspace\"},"
"   \"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"the command's whole run; default: sandboxd's\"},"
"   \"wait_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"how long to wait for output; default 2000\"},"
"   \"quiet_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"return once the output was quiet this long after some came; default 300\"},"
"   \"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576,\"description\":\"output returned at most: the last max_bytes, the rest is counted in dropped_bytes; default 16384\"},"
"   \"strip_ansi\":{\"type\":\"boolean\",\"description\":\"true (default): escape sequences dropped, CR LF as LF; false: the terminal's bytes\"}},"
"  \"required\":[\"session_id\",\"command\"],\"additionalProperties\":false}},"
"{\"name\":\"sandbox_terminal_send\","
" \"description\":\"Type into a command of sandbox_terminal_start (input, then keys, then eof), then return its output as sandbox_terminal_start does. Without cursor the output starts where the command's output stood before the input; give the cursor of an earlier answer to read from there again.\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"session_id\":{\"type\":\"string\",\"pattern\":\"^[0-9a-f]{16}$\"},"
"   \"request_id\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9._-]{1,64}$\"},"
"   \"input\":{\"type\":\"string\",\"maxLength\":65536,\"description\":\"text typed as it is (UTF-8): end a line with \\\"\\\\n\\\" or \\\"\\\\r\\\"\"},"
"   \"keys\":{\"type\":\"array\",\"maxItems\":1024,\"items\":{\"type\":\"string\",\"pattern\":\"" TERM_KEY_PATTERN "\"},\"description\":\"keys pressed after input: Enter, Tab, Escape, Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, C-a..C-z (C-c interrupts), F1..F12\"},"
"   \"eof\":{\"type\":\"boolean\",\"description\":\"end of input (^D) after the rest\"},"
"   \"cursor\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"an earlier answer's cursor: read from there\"},"
"   \"wait_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"how long to wait for output; default 2000\"},"
"   \"quiet_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"return once the output was quiet this long after some came; default 300\"},"
"   \"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576,\"description\":\"output returned at most: the last max_bytes, the rest is counted in dropped_bytes; default 16384\"},"
"   \"strip_ansi\":{\"type\":\"boolean\",\"description\":\"true (default): escape sequences dropped, CR LF as LF; false: the terminal's bytes\"}},"
"  \"required\":[\"session_id\",\"request_id\"],\"additionalProperties\":false}},"
"{\"name\":\"sandbox_terminal_resize\","
" \"description\":\"Set the window size of a command of sandbox_terminal_start (it gets SIGWINCH).\","
" \"inputSchema\":{\"type\":\"object\",\"properties\":{"
"   \"session_id\":{\"type\":\"string\",\"pattern\":\"^[0-9a-f]{16}$\"},"
"   \"request_id\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9._-]{1,64}$\"},"
"   \"rows\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},"
"   \"cols\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000}},"
"  \"required\":[\"session_id\",\"request_id\",\"rows\",\"cols\"],\"additionalProperties\":false}}"
"]";

/* --- results ------------------------------------------------------------------------------ */

typedef struct ToolError {
        const char *kind;
        char message[1024];
        const sandboxd_error *api; /* when sandboxd said it */
} ToolError;

static int tool_fail(ToolError *e, const char *kind, const char *fmt, ...) _printf_(3, 4);
static int tool_fail(ToolError *e, const char *kind, const char *fmt, ...) {
        va_list ap;

        e->kind = kind;
        va_start(ap, fmt);
        (void) vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static int tool_fail_client(Mcp *m, ToolError *e, int r, const char *what) {
        const sandboxd_error *api = sandboxd_client_last_error(m->client);

        e->api = api && api->kind != SANDBOXD_ERROR_NONE ? api : NULL;
        e->kind = e->api ? sandboxd_error_kind_to_string(api->kind) : "local";
        snprintf(e->message, sizeof(e->message), "%.200s: %.600s", what, e->api ? api->message : strerror(-r));
        return r;
}

static json_object *json_from_text(const char *text) {
        return text ? json_tokener_parse(text) : NULL;
}

/* bytes as "key" (UTF-8 text) or "key_b64" */
static void add_bytes(json_object *o, const char *key, const char *p, size_t n, bool *oom) {
        bool valid = true;
        size_t ok = utf8_valid_prefix(p, n, &valid);
        char k[64];
        Buf b = {};

        if (valid && ok == n)
                return json_put(o, key, json_object_new_string_len(p, (int) n), oom);
        snprintf(k, sizeof(k), "%s_b64", key);
        if (base64_encode(&b, p, n) < 0)
                *oom = true;
        else
                json_put(o, k, json_object_new_string_len(b.data ?: "", (int) b.len), oom);
        buf_done(&b);
}

/* The first max bytes of a stream (cut at a character boundary), with what was left out. */
static void add_output(json_object *data, json_object *trunc, const char *name, const char *p, size_t kept,
                       uint64_t total, bool kept_truncated, size_t max, bool *oom) {
        size_t n = MIN(kept, max);
        json_object *t;
        bool valid = true;

        if (n < kept) {
                size_t ok = utf8_valid_prefix(p, n, &valid);
                if (valid)
                        n = ok;
        }
        add_bytes(data, name, p, n, oom);
        t = json_object_new_object();
        json_put(t, "truncated", json_object_new_boolean(n < kept || kept_truncated), oom);
        json_put(t, "total_bytes", json_object_new_int64((int64_t) total), oom);
        json_put(t, "returned_bytes", json_object_new_int64((int64_t) n), oom);
        /* what sandboxd itself kept (OutputMax=): past it nothing can be read back */
        json_put(t, "kept_bytes", json_object_new_int64((int64_t) kept), oom);
        json_put(t, "sandboxd_truncated", json_object_new_boolean(kept_truncated), oom);
        json_put(trunc, name, t, oom);
}

/* NULL when out of memory */
static json_object *result_data(const sandboxd_result *r, const char *session, size_t max) {
        _cleanup_(json_object_putp) json_object *d = json_object_new_object();
        json_object *trunc = json_object_new_object(), *usage = json_object_new_object();
        bool oom = false;

        json_put(d, "session_id", json_object_new_string(session), &oom);
        json_put(d, "request_id", json_object_new_string(r->request_id ?: ""), &oom);
        json_put(d, "status", json_object_new_string(sandboxd_status_to_string(r->status) ?: "unknown"), &oom);
        if (r->exit_code >= 0)
                json_put(d, "exit_code", json_object_new_int(r->exit_code), &oom);
        else
                json_put_null(d, "exit_code", &oom);
        if (r->signal_name)
                json_put(d, "signal", json_object_new_string(r->signal_name), &oom);
        else
                json_put_null(d, "signal", &oom);
        if (r->reason)
                json_put(d, "reason", json_object_new_string(r->reason), &oom);
        else
                json_put_null(d, "reason", &oom);
        json_put(d, "duration_ms", json_object_new_int64((int64_t) r->duration_ms), &oom);
        json_put(usage, "cpu_usec", json_object_new_int64((int64_t) r->cpu_usec), &oom);
        json_put(usage, "memory_bytes", json_object_new_int64((int64_t) r->memory_bytes), &oom);
        json_put(usage, "tasks", json_object_new_int64((int64_t) r->tasks), &oom);
        json_put(d, "usage", usage, &oom);
        add_output(d, trunc, "stdout", r->stdout_data ?: "", r->stdout_size, r->stdout_bytes, r->stdout_truncated, max,
                   &oom);
        add_output(d, trunc, "stderr", r->stderr_data ?: "", r->stderr_size, r->stderr_bytes, r->stderr_truncated, max,
                   &oom);
        json_put(d, "truncation", trunc, &oom);
        return oom ? NULL : TAKE_PTR(d);
}

/* --- argument helpers --------------------------------------------------------------------- */

static int arg_string(json_object *args, const char *key, bool required, const char **ret, ToolError *e) {
        json_object *v;

        *ret = NULL;
        if (!json_object_object_get_ex(args, key, &v) || json_object_is_type(v, json_type_null)) {
                if (required)
                        return tool_fail(e, "invalid", "Missing argument '%s'.", key);
                return 0;
        }
        if (!json_object_is_type(v, json_type_string))
                return tool_fail(e, "invalid", "Argument '%s' must be a string.", key);
        *ret = json_object_get_string(v);
        return 0;
}

static int arg_uint(json_object *args, const char *key, uint64_t *ret, ToolError *e) {
        json_object *v;

        if (!json_object_object_get_ex(args, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
                return tool_fail(e, "invalid", "Argument '%s' must be a non-negative integer.", key);
        *ret = (uint64_t) json_object_get_int64(v);
        return 1;
}

static int arg_session(json_object *args, const char **ret, ToolError *e) {
        int r = arg_string(args, "session_id", true, ret, e);

        if (r >= 0 && !session_id_looks_valid(*ret))
                return tool_fail(e, "invalid", "'%s' is not a session id (16 hex digits).", *ret);
        return r;
}

static int check_args(json_object *args, const char *const *allowed, ToolError *e) {
        json_object_object_foreach(args, key, val) {
                bool ok = false;
                (void) val;
                for (const char *const *a = allowed; *a; a++)
                        if (streq(key, *a))
                                ok = true;
                if (!ok)
                        return tool_fail(e, "invalid", "Unknown argument '%s'.", key);
        }
        return 0;
}

static int arg_bool(json_object *args, const char *key, bool def, bool *ret, ToolError *e) {
        json_object *v;

        *ret = def;
        if (!json_object_object_get_ex(args, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_boolean))
                return tool_fail(e, "invalid", "%s must be true or false.", key);
        *ret = json_object_get_boolean(v);
        return 0;
}

/* The arguments of a tool on one session: none but those allowed, and its id. */
static int session_args(json_object *args, const char *const *allowed, const char **ret_session, ToolError *e) {
        int r = check_args(args, allowed, e);

        return r < 0 ? r : arg_session(args, ret_session, e);
}

/* --- tools -------------------------------------------------------------------------------- */

static int scope_of(Mcp *m, json_object *args, const char **ret_user, const char **ret_ws, ToolError *e) {
        const char *user, *ws;
        int r;

        r = arg_string(args, "user", false, &user, e);
        if (r >= 0)
                r = arg_string(args, "workspace", false, &ws, e);
        if (r < 0)
                return r;
        user = user ?: m->user;
        ws = ws ?: m->workspace;
        if (!user_name_is_valid(user))
                return tool_fail(e, "invalid", "Invalid user name '%s': it must match ^[a-z_][a-z0-9_-]{0,31}$.", user);
        if (!workspace_name_is_valid(ws))
                return tool_fail(e, "invalid", "Invalid workspace name '%s': it must match ^[a-z0-9_-]{1,64}$.", ws);
        *ret_user = user;
        *ret_ws = ws;
        return 0;
}

static int tool_create_session(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "user", "workspace", "memory_max", "cpu_quota", "tasks_max", "ttl_s",
                                               "exec_mode", NULL };
        _cleanup_(json_object_putp) json_object *opts = json_object_new_object(), *limits = json_object_new_object(),
                                                *res = NULL;
        const char *user, *ws, *mem, *mode, *text;
        sandboxd_session *s = NULL;
        bool created = false, oom = false;
        uint64_t u;
        int r;

        if (!opts || !limits)
                return -ENOMEM;
        r = check_args(args, allowed, e);
        if (r >= 0)
                r = scope_of(m, args, &user, &ws, e);
        if (r >= 0)
                r = arg_string(args, "memory_max", false, &mem, e);
        if (r >= 0)
                r = arg_string(args, "exec_mode", false, &mode, e);
        if (r < 0)
                return r;
        if (mem)
                json_put(limits, "memory_max", json_object_new_string(mem), &oom);
        if (mode) /* sandboxd judges it, as it does memory_max */
                json_put(opts, "exec_mode", json_object_new_string(mode), &oom);
        if ((r = arg_uint(args, "cpu_quota", &u, e)) < 0)
                return r;
        if (r > 0)
                json_put(limits, "cpu_quota", json_object_new_int64((int64_t) u), &oom);
        if ((r = arg_uint(args, "tasks_max", &u, e)) < 0)
                return r;
        if (r > 0)
                json_put(limits, "tasks_max", json_object_new_int64((int64_t) u), &oom);
        if ((r = arg_uint(args, "ttl_s", &u, e)) < 0)
                return r;
        if (r > 0)
                json_put(opts, "ttl_s", json_object_new_int64((int64_t) u), &oom);
        if (json_object_object_length(limits) > 0)
                json_put(opts, "limits", json_object_get(limits), &oom);
        if (oom)
                return -ENOMEM;

        /* NULL would be no options at all */
        text = json_object_to_json_string(opts);
        if (!text)
                return -ENOMEM;
        r = sandboxd_session_create(m->client, user, ws, text, &s, &created);
        if (r < 0)
                return tool_fail_client(m, e, r, "Creating the session failed");
        res = json_from_text(s->json);
        sandboxd_session_free(s);
        json_put(res, "created", json_object_new_boolean(created), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(res);
        return 0;
}

static int tool_list_sessions(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "user", NULL };
        sandboxd_session **list = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *user;
        json_object *arr;
        bool oom = false;
        size_t n = 0;
        int r;

        r = check_args(args, allowed, e);
        if (r >= 0)
                r = arg_string(args, "user", false, &user, e);
        if (r < 0)
                return r;
        r = sandboxd_session_list(m->client, user, &list, &n);
        if (r < 0)
                return tool_fail_client(m, e, r, "Listing sessions failed");
        o = json_object_new_object();
        arr = json_object_new_array();
        for (size_t i = 0; i < n; i++)
                json_push(arr, json_from_text(list[i]->json), &oom);
        json_put(o, "sessions", arr, &oom);
        sandboxd_session_list_free(list);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int exec_spec_from_args(json_object *args, ExecSpec *spec, size_t *ret_max, ToolError *e) {
        json_object *argv = NULL, *env = NULL;
        const char *command, *cwd, *in;
        uint8_t rnd[8];
        uint64_t u;
        int r;

        *spec = (ExecSpec) {};
        *ret_max = arg_max_output;
        r = arg_string(args, "command", false, &command, e);
        if (r >= 0)
                r = arg_string(args, "cwd", false, &cwd, e);
        if (r >= 0)
                r = arg_string(args, "stdin", false, &in, e);
        if (r < 0)
                return r;
        json_object_object_get_ex(args, "argv", &argv);
        if (argv && json_object_is_type(argv, json_type_null))
                argv = NULL;
        if (!!argv == !!command)
                return tool_fail(e, "invalid", "Give either argv (a list of strings) or command (a shell command line).");
        if (argv) {
                size_t n;

                if (!json_object_is_type(argv, json_type_array) || (n = json_object_array_length(argv)) == 0)
                        return tool_fail(e, "invalid", "argv must be a non-empty list of strings.");
                spec->argv = calloc(n + 1, sizeof(char *));
                if (!spec->argv)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        json_object *a = json_object_array_get_idx(argv, i);
                        if (!json_object_is_type(a, json_type_string))
                                return tool_fail(e, "invalid", "argv must be a non-empty list of strings.");
                        if (!(spec->argv[i] = strdup(json_object_get_string(a))))
                                return -ENOMEM;
                }
        } else {
                spec->argv = calloc(4, sizeof(char *));
                if (!spec->argv || !(spec->argv[0] = strdup("/bin/sh")) || !(spec->argv[1] = strdup("-c")) ||
                    !(spec->argv[2] = strdup(command)))
                        return -ENOMEM;
        }
        if (cwd && !(spec->cwd = strdup(cwd)))
                return -ENOMEM;
        if (json_object_object_get_ex(args, "env", &env) && !json_object_is_type(env, json_type_null)) {
                size_t i = 0;

                if (!json_object_is_type(env, json_type_object))
                        return tool_fail(e, "invalid", "env must be an object of strings.");
                spec->env = calloc((size_t) json_object_object_length(env) + 1, sizeof(char *));
                if (!spec->env)
                        return -ENOMEM;
                json_object_object_foreach(env, key, val) {
                        if (!json_object_is_type(val, json_type_string))
                                return tool_fail(e, "invalid", "env must be an object of strings.");
                        if (asprintf(&spec->env[i++], "%s=%s", key, json_object_get_string(val)) < 0) {
                                spec->env[i - 1] = NULL;
                                return -ENOMEM;
                        }
                }
        }
        if (in) {
                spec->stdin_data = strdup(in);
                if (!spec->stdin_data)
                        return -ENOMEM;
                spec->stdin_size = strlen(in);
                spec->has_stdin = true;
        }
        if ((r = arg_uint(args, "timeout_ms", &u, e)) < 0)
                return r;
        if (r > 0)
                spec->timeout_ms = u;
        if ((r = arg_uint(args, "max_output_bytes", &u, e)) < 0)
                return r;
        if (r > 0)
                *ret_max = (size_t) MIN(u, (uint64_t) SIZE_MAX / 2);
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -errno;
        if (asprintf(&spec->request_id, "mcp-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
                     rnd[5], rnd[6], rnd[7]) < 0) {
                spec->request_id = NULL;
                return -ENOMEM;
        }
        return 0;
}

static int exec_in(Mcp *m, const char *session, json_object *args, json_object **ret, ToolError *e) {
        ExecSpec spec;
        sandboxd_result *res = NULL;
        _cleanup_free_ char *rid = NULL;
        size_t max;
        int r;

        r = exec_spec_from_args(args, &spec, &max, e);
        if (r == -ENOMEM)
                r = tool_fail(e, "local", "Out of memory.");
        if (r < 0)
                goto finish;
        /* started, then waited for: the snapshot carries the kept output and what was cut */
        r = exec_spec_start(m->client, session, &spec, &rid);
        if (r < 0) {
                r = tool_fail_client(m, e, r, "Starting the command failed");
                goto finish;
        }
        r = sandboxd_command_wait(m->client, session, rid, 0, &res);
        if (r < 0) {
                r = tool_fail_client(m, e, r, "Waiting for the command failed");
                goto finish;
        }
        *ret = result_data(res, session, max);
        sandboxd_result_free(res);
        if (!*ret)
                r = -ENOMEM;
finish:
        exec_spec_done(&spec);
        return r;
}

static int tool_exec(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "argv", "command", "cwd", "env", "stdin", "timeout_ms",
                                               "max_output_bytes", NULL };
        const char *session;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r < 0)
                return r;
        return exec_in(m, session, args, ret, e);
}

static int tool_run(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "user", "workspace", "argv", "command", "cwd", "env", "stdin",
                                               "timeout_ms", "max_output_bytes", NULL };
        _cleanup_(json_object_putp) json_object *rest = NULL;
        sandboxd_session *s = NULL;
        const char *user, *ws;
        bool oom = false;
        int r;

        r = check_args(args, allowed, e);
        if (r >= 0)
                r = scope_of(m, args, &user, &ws, e);
        if (r < 0)
                return r;
        r = sandboxd_session_create(m->client, user, ws, NULL, &s, NULL);
        if (r < 0)
                return tool_fail_client(m, e, r, "Getting the session failed");
        /* the command's arguments without the scope */
        rest = json_object_new_object();
        json_object_object_foreach(args, key, val)
                if (!streq(key, "user") && !streq(key, "workspace"))
                        json_put(rest, key, json_object_get(val), &oom);
        r = oom ? -ENOMEM : exec_in(m, s->id, rest, ret, e);
        sandboxd_session_free(s);
        return r;
}

static int tool_read_file(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", "max_bytes", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session, *path;
        _cleanup_free_ char *data = NULL;
        uint64_t max = 1024 * 1024;
        bool oom = false;
        size_t n = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_string(args, "path", true, &path, e);
        if (r >= 0)
                r = arg_uint(args, "max_bytes", &max, e);
        if (r < 0)
                return r;
        r = sandboxd_file_read(m->client, session, path, (size_t) MAX(max, 1u), &data, &n);
        if (r == -EFBIG)
                return tool_fail(e, "too_large", "%s is larger than max_bytes (%llu); read it in parts with sandbox_exec "
                                                 "(head -c, tail -c) or raise max_bytes.",
                                 path, (unsigned long long) max);
        if (r < 0)
                return tool_fail_client(m, e, r, "Reading the file failed");
        o = json_object_new_object();
        json_put(o, "path", json_object_new_string(path), &oom);
        json_put(o, "size", json_object_new_int64((int64_t) n), &oom);
        add_bytes(o, "content", data, n, &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int tool_write_file(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", "content", "encoding", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session, *path, *content, *encoding;
        bool oom = false;
        Buf b = {};
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_string(args, "path", true, &path, e);
        if (r >= 0)
                r = arg_string(args, "content", true, &content, e);
        if (r >= 0)
                r = arg_string(args, "encoding", false, &encoding, e);
        if (r < 0)
                return r;
        if (encoding && streq(encoding, "base64")) {
                if (base64_decode(content, strlen(content), &b) < 0)
                        return tool_fail(e, "invalid", "content is not valid base64.");
        } else if (encoding && !streq(encoding, "utf8"))
                return tool_fail(e, "invalid", "encoding must be utf8 or base64.");
        else if (buf_puts(&b, content) < 0)
                return -ENOMEM;
        {
                /* Agents write to paths like "src/main.py" without making "src" first:
                 * create the parent directories, as the tool's description promises. */
                const char *slash = strrchr(path, '/');

                if (slash && slash != path) {
                        _cleanup_free_ char *parent = strndup(path, (size_t) (slash - path));

                        if (!parent) {
                                buf_done(&b);
                                return -ENOMEM;
                        }
                        r = sandboxd_file_mkdir(m->client, session, parent);
                        if (r < 0) {
                                buf_done(&b);
                                return tool_fail_client(m, e, r, "Creating the parent directory failed");
                        }
                }
        }
        r = sandboxd_file_write(m->client, session, path, b.data ?: "", b.len);
        if (r < 0) {
                buf_done(&b);
                return tool_fail_client(m, e, r, "Writing the file failed");
        }
        o = json_object_new_object();
        json_put(o, "path", json_object_new_string(path), &oom);
        json_put(o, "bytes", json_object_new_int64((int64_t) b.len), &oom);
        buf_done(&b);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static const char *file_type_name(sandboxd_file_type t) {
        return t == SANDBOXD_FILE_REGULAR     ? "file"
               : t == SANDBOXD_FILE_DIRECTORY ? "dir"
               : t == SANDBOXD_FILE_SYMLINK   ? "symlink"
                                              : "other";
}

static int tool_list_files(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        sandboxd_file_info **list = NULL;
        const char *session, *path;
        bool truncated = false, oom = false;
        json_object *arr;
        size_t n = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_string(args, "path", false, &path, e);
        if (r < 0)
                return r;
        path = path ?: "";
        r = sandboxd_file_list(m->client, session, path, &list, &n, &truncated);
        if (r < 0)
                return tool_fail_client(m, e, r, "Listing the directory failed");
        o = json_object_new_object();
        arr = json_object_new_array();
        for (size_t i = 0; i < n && !oom; i++) {
                json_object *f = json_object_new_object();
                char mode[8];

                snprintf(mode, sizeof(mode), "%04o", list[i]->mode);
                add_bytes(f, "name", list[i]->name ?: "", strlen(list[i]->name ?: ""), &oom);
                json_put(f, "type", json_object_new_string(file_type_name(list[i]->type)), &oom);
                json_put(f, "size", json_object_new_int64((int64_t) list[i]->size), &oom);
                json_put(f, "mode", json_object_new_string(mode), &oom);
                json_put(f, "mtime_usec", json_object_new_int64((int64_t) list[i]->mtime_usec), &oom);
                json_push(arr, f, &oom);
        }
        json_put(o, "path", json_object_new_string(path), &oom);
        json_put(o, "entries", arr, &oom);
        json_put(o, "truncated", json_object_new_boolean(truncated), &oom);
        sandboxd_file_info_list_free(list);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int tool_close_session(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "purge", NULL };
        sandboxd_session *s = NULL;
        const char *session;
        bool purge = false;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r < 0)
                return r;
        r = arg_bool(args, "purge", false, &purge, e);
        if (r < 0)
                return r;
        r = sandboxd_session_close(m->client, session, purge, &s);
        if (r < 0)
                return tool_fail_client(m, e, r, "Closing the session failed");
        *ret = json_from_text(s->json);
        sandboxd_session_free(s);
        return *ret ? 0 : -ENOMEM;
}

/* "port": required, 1..65535 */
static int arg_port(json_object *args, uint16_t *ret, ToolError *e) {
        uint64_t u = 0;
        int r;

        r = arg_uint(args, "port", &u, e);
        if (r < 0)
                return r;
        if (r == 0)
                return tool_fail(e, "invalid", "Argument 'port' is required.");
        if (u < 1 || u > UINT16_MAX)
                return tool_fail(e, "invalid", "Argument 'port' must be a TCP port, 1 to 65535.");
        *ret = (uint16_t) u;
        return 0;
}

static int tool_expose_port(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "port", "host", NULL };
        sandboxd_port *p = NULL;
        const char *session;
        bool host = false;
        uint16_t port = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_port(args, &port, e);
        if (r < 0)
                return r;
        r = arg_bool(args, "host", false, &host, e);
        if (r < 0)
                return r;
        r = sandboxd_port_expose(m->client, session, port, host, &p);
        if (r < 0)
                return tool_fail_client(m, e, r, "Exposing the port failed");
        *ret = json_from_text(p->json);
        sandboxd_port_free(p);
        return *ret ? 0 : -ENOMEM;
}

static int tool_list_ports(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        sandboxd_port **list = NULL;
        const char *session;
        bool oom = false;
        json_object *arr;
        size_t n = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r < 0)
                return r;
        r = sandboxd_port_list(m->client, session, &list, &n);
        if (r < 0)
                return tool_fail_client(m, e, r, "Listing the ports failed");
        o = json_object_new_object();
        arr = json_object_new_array();
        for (size_t i = 0; i < n && !oom; i++) {
                json_object *p = json_from_text(list[i]->json);

                if (!p)
                        oom = true;
                json_push(arr, p, &oom);
        }
        json_put(o, "ports", arr, &oom);
        sandboxd_port_list_free(list);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int tool_unexpose_port(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "port", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session;
        bool oom = false;
        uint16_t port = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_port(args, &port, e);
        if (r < 0)
                return r;
        r = sandboxd_port_unexpose(m->client, session, port);
        if (r < 0)
                return tool_fail_client(m, e, r, "Unexposing the port failed");
        o = json_object_new_object();
        json_put(o, "port", json_object_new_int(port), &oom);
        json_put(o, "exposed", json_object_new_boolean(false), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* --- terminals: an interactive command by rounds ------------------------------------------- */

/* Bounds of the terminal tools. The server answers one call at a time, so a call holds it
 * at most TERM_WAIT_MS_MAX (plus sandboxd's answers), and buffers at most max_bytes of
 * output plus one event of it. */
#define TERM_WAIT_MS_DEFAULT 2000
#define TERM_WAIT_MS_MAX 30000          /* the longest a call waits for output */
#define TERM_QUIET_MS_DEFAULT 300
#define TERM_QUIET_MS_MAX 30000         /* quiet longer than wait_ms is the same as wait_ms */
#define TERM_MAX_BYTES_DEFAULT 16384
#define TERM_MAX_BYTES_MAX (1024 * 1024) /* output returned by one call at most */
#define TERM_INPUT_MAX (64 * 1024)      /* input and keys of one send, in bytes */
#define TERM_KEYS_MAX 1024              /* key names in one send */
#define TERM_SIZE_MAX 1000              /* rows and cols, as sandboxd bounds them */
#define TERM_ROWS_DEFAULT 24
#define TERM_COLS_DEFAULT 80

/* An integer argument within [min, max], default def when absent. */
static int arg_range(json_object *args, const char *key, uint64_t min, uint64_t max, uint64_t def, uint64_t *ret,
                     ToolError *e) {
        uint64_t u = def;
        int r;

        r = arg_uint(args, key, &u, e);
        if (r < 0 || u < min || u > max)
                return tool_fail(e, "invalid", "Argument '%s' must be an integer from %llu to %llu.", key,
                                 (unsigned long long) min, (unsigned long long) max);
        *ret = u;
        return 0;
}


static int arg_request(json_object *args, const char **ret, ToolError *e) {
        int r = arg_string(args, "request_id", true, ret, e);

        if (r >= 0 && !request_id_is_valid(*ret))
                return tool_fail(e, "invalid", "'%s' is not a request id (^[A-Za-z0-9._-]{1,64}$).", *ret);
        return r;
}

typedef struct TermReadArgs {
        uint64_t wait_ms;
        uint64_t quiet_ms;
        uint64_t max_bytes;
        bool strip_ansi;
} TermReadArgs;

static int term_read_args(json_object *args, TermReadArgs *ret, ToolError *e) {
        int r;

        r = arg_range(args, "wait_ms", 0, TERM_WAIT_MS_MAX, TERM_WAIT_MS_DEFAULT, &ret->wait_ms, e);
        if (r >= 0)
                r = arg_range(args, "quiet_ms", 0, TERM_QUIET_MS_MAX, TERM_QUIET_MS_DEFAULT, &ret->quiet_ms, e);
        if (r >= 0)
                r = arg_range(args, "max_bytes", 1, TERM_MAX_BYTES_MAX, TERM_MAX_BYTES_DEFAULT, &ret->max_bytes, e);
        if (r >= 0)
                r = arg_bool(args, "strip_ansi", true, &ret->strip_ansi, e);
        return r;
}

typedef struct TermRead {
        int timer_fd;
        uint64_t deadline;   /* CLOCK_MONOTONIC µs: wait_ms after the call began */
        uint64_t quiet_usec;
        uint64_t stop_at;    /* when the timer is set to end the read */
        bool strip;
        TermText text;
        Buf chunk;           /* one event's output as text */
        TailBuf tail;
        uint64_t cursor;
        int error;
} TermRead;

static int term_read_arm(TermRead *t, uint64_t at) {
        struct itimerspec its = {};

        t->stop_at = at;
        /* 0 would disarm it: a time in the past fires at once */
        at = MAX(at, 1u);
        its.it_value.tv_sec = (time_t) (at / USEC_PER_SEC);
        its.it_value.tv_nsec = (long) (at % USEC_PER_SEC) * 1000;
        if (timerfd_settime(t->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
                return -errno;
        return 0;
}

static int on_term_event(sandboxd_client *c, const sandboxd_event *ev, void *userdata) {
        TermRead *t = userdata;
        int r;

        (void) c;
        t->cursor = ev->offset;
        if ((ev->type != SANDBOXD_EVENT_STDOUT && ev->type != SANDBOXD_EVENT_STDERR) || ev->size == 0)
                return 0;
        if (t->strip) {
                t->chunk.len = 0;
                r = term_text_feed(&t->text, ev->data, ev->size, &t->chunk);
                if (r >= 0)
                        r = tail_buf_append(&t->tail, t->chunk.data, t->chunk.len);
        } else
                r = tail_buf_append(&t->tail, ev->data, ev->size);
        /* output came: end once it has been quiet for quiet_ms, or at the deadline */
        if (r >= 0)
                r = term_read_arm(t, MIN(t->deadline, now_usec(CLOCK_MONOTONIC) + t->quiet_usec));
        if (r < 0)
                t->error = r;
        return r;
}

static int on_term_timer(sandboxd_client *c, int fd, void *userdata) {
        TermRead *t = userdata;
        uint64_t ticks;

        (void) c;
        (void) !read(fd, &ticks, sizeof(ticks));
        if (now_usec(CLOCK_MONOTONIC) >= t->stop_at)
                return -ETIME; /* ends the attach: the answer is what came so far */
        return term_read_arm(t, t->stop_at);
}

static json_object *exit_data(const sandboxd_result *res, bool *oom) {
        json_object *x = json_object_new_object();

        json_put(x, "status", json_object_new_string(sandboxd_status_to_string(res->status) ?: "unknown"), oom);
        if (res->exit_code >= 0)
                json_put(x, "exit_code", json_object_new_int(res->exit_code), oom);
        else
                json_put_null(x, "exit_code", oom);
        if (res->signal_name)
                json_put(x, "signal", json_object_new_string(res->signal_name), oom);
        else
                json_put_null(x, "signal", oom);
        if (res->reason)
                json_put(x, "reason", json_object_new_string(res->reason), oom);
        else
                json_put_null(x, "reason", oom);
        return x;
}

/* Reads the command's output from the events byte offset cursor (sandboxd_command_attach)
 * until the command ends, the output was quiet for quiet_ms after some came, or wait_ms
 * passed; returns {request_id, output, cursor, running, exit, dropped_bytes}. */
static int term_read(Mcp *m, const char *session, const char *rid, uint64_t cursor, const TermReadArgs *a,
                     json_object **ret, ToolError *e) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        TermRead t = {
                .timer_fd = -EBADF,
                .quiet_usec = a->quiet_ms * USEC_PER_MSEC,
                .strip = a->strip_ansi,
                .cursor = cursor,
        };
        sandboxd_result *res = NULL;
        const char *text;
        uint64_t dropped = 0;
        bool oom = false;
        size_t n = 0;
        int r;

        tail_buf_init(&t.tail, (size_t) a->max_bytes);
        t.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (t.timer_fd < 0) {
                r = tool_fail(e, "local", "timerfd_create: %s", strerror(errno));
                goto finish;
        }
        t.deadline = now_usec(CLOCK_MONOTONIC) + a->wait_ms * USEC_PER_MSEC;
        r = term_read_arm(&t, t.deadline);
        if (r < 0)
                goto finish;
        /* the timer is the client's wakeup for this call only: no other call is cut by it */
        r = sandboxd_client_set_wakeup(m->client, t.timer_fd, on_term_timer, &t);
        if (r < 0)
                goto finish;
        r = sandboxd_command_attach(m->client, session, rid, cursor, on_term_event, &t, &res);
        (void) sandboxd_client_set_wakeup(m->client, -1, NULL, NULL);
        if (t.error < 0) {
                r = tool_fail(e, "local", "Reading the command's output failed: %s", strerror(-t.error));
                goto finish;
        }
        if (r < 0 && r != -ETIME) { /* -ETIME: the time was up, the command still runs */
                r = tool_fail_client(m, e, r, "Reading the command's output failed");
                goto finish;
        }

        text = tail_buf_finish(&t.tail, &n, &dropped);
        if (!text) {
                r = -ENOMEM;
                goto finish;
        }
        o = json_object_new_object();
        json_put(o, "session_id", json_object_new_string(session), &oom);
        json_put(o, "request_id", json_object_new_string(rid), &oom);
        add_bytes(o, "output", text, n, &oom);
        json_put(o, "cursor", json_object_new_int64((int64_t) t.cursor), &oom);
        json_put(o, "running", json_object_new_boolean(!res), &oom);
        if (res)
                json_put(o, "exit", exit_data(res, &oom), &oom);
        else
                json_put_null(o, "exit", &oom);
        json_put(o, "dropped_bytes", json_object_new_int64((int64_t) dropped), &oom);
        r = oom ? -ENOMEM : 0;
        if (r >= 0)
                *ret = TAKE_PTR(o);
finish:
        sandboxd_result_free(res);
        safe_close(t.timer_fd);
        buf_done(&t.chunk);
        tail_buf_done(&t.tail);
        return r;
}

static int tool_terminal_start(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "command", "rows", "cols", "env", "cwd", "timeout_ms",
                                               "wait_ms", "quiet_ms", "max_bytes", "strip_ansi", NULL };
        _cleanup_(json_object_putp) json_object *rest = NULL;
        _cleanup_free_ char *rid = NULL;
        json_object *command = NULL;
        const char *session;
        TermReadArgs ra = {};
        uint64_t rows = 0, cols = 0;
        ExecSpec spec = { .terminal_fd = -EBADF };
        bool oom = false;
        size_t max;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_range(args, "rows", 1, TERM_SIZE_MAX, TERM_ROWS_DEFAULT, &rows, e);
        if (r >= 0)
                r = arg_range(args, "cols", 1, TERM_SIZE_MAX, TERM_COLS_DEFAULT, &cols, e);
        if (r >= 0)
                r = term_read_args(args, &ra, e);
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(args, "command", &command) || !json_object_is_type(command, json_type_array) ||
            json_object_array_length(command) == 0)
                return tool_fail(e, "invalid", "command must be a non-empty list of strings (the argv, no shell).");
        /* what sandbox_exec reads, with command as its argv */
        rest = json_object_new_object();
        json_object_object_foreach(args, key, val)
                if (streq(key, "cwd") || streq(key, "env") || streq(key, "timeout_ms"))
                        json_put(rest, key, json_object_get(val), &oom);
        json_put(rest, "argv", json_object_get(command), &oom);
        if (oom)
                return -ENOMEM;
        r = exec_spec_from_args(rest, &spec, &max, e);
        if (r == -ENOMEM)
                r = tool_fail(e, "local", "Out of memory.");
        if (r < 0)
                goto finish;
        spec.terminal_fd = -EBADF;
        spec.tty_rows = (unsigned) rows;
        spec.tty_cols = (unsigned) cols;
        r = exec_spec_start(m->client, session, &spec, &rid);
        if (r < 0) {
                r = tool_fail_client(m, e, r, "Starting the command failed");
                goto finish;
        }
        r = term_read(m, session, rid, 0, &ra, ret, e);
finish:
        exec_spec_done(&spec);
        return r;
}

/* input, then the bytes of keys, in one buffer of at most TERM_INPUT_MAX */
static int term_input(json_object *args, Buf *b, ToolError *e) {
        json_object *keys;
        const char *input;
        size_t n;
        int r;

        r = arg_string(args, "input", false, &input, e);
        if (r < 0)
                return r;
        if (input && buf_puts(b, input) < 0)
                return -ENOMEM;
        if (!json_object_object_get_ex(args, "keys", &keys) || json_object_is_type(keys, json_type_null))
                keys = NULL;
        if (keys && !json_object_is_type(keys, json_type_array))
                return tool_fail(e, "invalid", "keys must be a list of key names.");
        n = keys ? json_object_array_length(keys) : 0;
        if (n > TERM_KEYS_MAX)
                return tool_fail(e, "invalid", "At most %d keys at once.", TERM_KEYS_MAX);
        for (size_t i = 0; i < n; i++) {
                json_object *k = json_object_array_get_idx(keys, i);
                const char *bytes = json_object_is_type(k, json_type_string) ? term_key_bytes(json_object_get_string(k))
                                                                             : NULL;

                if (!bytes)
                        return tool_fail(e, "invalid",
                                         "Unknown key %.64s: keys are Enter, Tab, Escape, Backspace, Up, Down, Left, "
                                         "Right, Home, End, PageUp, PageDown, Delete, C-a..C-z, F1..F12.",
                                         json_object_to_json_string(k) ?: "?");
                if (buf_puts(b, bytes) < 0)
                        return -ENOMEM;
        }
        if (b->len > TERM_INPUT_MAX)
                return tool_fail(e, "invalid", "input and keys are %zu bytes; at most %d at once.", b->len,
                                 TERM_INPUT_MAX);
        return 0;
}

static int tool_terminal_send(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "request_id", "input", "keys", "eof", "cursor",
                                               "wait_ms", "quiet_ms", "max_bytes", "strip_ansi", NULL };
        const char *session, *rid;
        TermReadArgs ra = {};
        uint64_t cursor = 0;
        bool eof = false, has_cursor = false;
        Buf in = {};
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_request(args, &rid, e);
        if (r >= 0)
                r = term_read_args(args, &ra, e);
        if (r >= 0)
                r = arg_bool(args, "eof", false, &eof, e);
        if (r >= 0)
                r = arg_uint(args, "cursor", &cursor, e);
        has_cursor = r > 0;
        if (r >= 0)
                r = term_input(args, &in, e);
        if (r == -ENOMEM)
                r = tool_fail(e, "local", "Out of memory.");
        if (r < 0)
                goto finish;
        if (!has_cursor) {
                /* no cursor: from the end of the output so far (the server keeps nothing per agent) */
                sandboxd_result *snap = NULL;

                r = sandboxd_command_get(m->client, session, rid, &snap);
                if (r < 0) {
                        r = tool_fail_client(m, e, r, "Looking up the command failed");
                        goto finish;
                }
                cursor = snap->events_bytes;
                sandboxd_result_free(snap);
        }
        if (in.len > 0 || eof) {
                r = sandboxd_command_write_stdin(m->client, session, rid, in.data, in.len, eof);
                if (r < 0) {
                        r = tool_fail_client(m, e, r, "Writing to the command failed");
                        goto finish;
                }
        }
        r = term_read(m, session, rid, cursor, &ra, ret, e);
finish:
        buf_done(&in);
        return r;
}

static int tool_terminal_resize(Mcp *m, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "request_id", "rows", "cols", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session, *rid;
        uint64_t rows = 0, cols = 0;
        bool oom = false;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_request(args, &rid, e);
        if (r >= 0 && !json_object_object_get_ex(args, "rows", NULL))
                r = tool_fail(e, "invalid", "Missing argument 'rows'.");
        if (r >= 0 && !json_object_object_get_ex(args, "cols", NULL))
                r = tool_fail(e, "invalid", "Missing argument 'cols'.");
        if (r >= 0)
                r = arg_range(args, "rows", 1, TERM_SIZE_MAX, 0, &rows, e);
        if (r >= 0)
                r = arg_range(args, "cols", 1, TERM_SIZE_MAX, 0, &cols, e);
        if (r < 0)
                return r;
        r = sandboxd_command_resize(m->client, session, rid, (unsigned) rows, (unsigned) cols);
        if (r < 0)
                return tool_fail_client(m, e, r, "Resizing the terminal failed");
        o = json_object_new_object();
        json_put(o, "request_id", json_object_new_string(rid), &oom);
        json_put(o, "rows", json_object_new_int((int) rows), &oom);
        json_put(o, "cols", json_object_new_int((int) cols), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static const struct {
        const char *name;
        int (*run)(Mcp *m, json_object *args, json_object **ret, ToolError *e);
} tools[] = {
        { "sandbox_create_session", tool_create_session },
        { "sandbox_list_sessions", tool_list_sessions },
        { "sandbox_exec", tool_exec },
        { "sandbox_run", tool_run },
        { "sandbox_read_file", tool_read_file },
        { "sandbox_write_file", tool_write_file },
        { "sandbox_list_files", tool_list_files },
        { "sandbox_close_session", tool_close_session },
        { "sandbox_expose_port", tool_expose_port },
        { "sandbox_list_ports", tool_list_ports },
        { "sandbox_unexpose_port", tool_unexpose_port },
        { "sandbox_terminal_start", tool_terminal_start },
        { "sandbox_terminal_send", tool_terminal_send },
        { "sandbox_terminal_resize", tool_terminal_resize },
};

/* --- JSON-RPC ----------------------------------------------------------------------------- */

/* When the answer cannot be built: an error written without allocating, with the id if it can
 * still be written, so that the client is not left waiting. */
static void send_oom(json_object *id) {
        const char *t = id ? json_object_to_json_string_ext(id, JSON_C_TO_STRING_PLAIN) : NULL;

        log_error("Out of memory.");
        printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":\"Out of memory.\"}}\n",
               t ?: "null", JSONRPC_INTERNAL_ERROR);
        fflush(stdout);
}

/* takes msg; NULL (a message that could not be built) becomes send_oom() */
static void send_message(json_object *id, json_object *msg) {
        const char *t = msg ? json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
                            : NULL;

        if (!t)
                send_oom(id);
        else {
                /* one line each: PLAIN never puts a newline inside */
                fputs(t, stdout);
                fputc('\n', stdout);
                fflush(stdout);
        }
        json_object_put(msg);
}

/* takes result; NULL is an answer that could not be built */
static void send_result(json_object *id, json_object *result) {
        _cleanup_(json_object_putp) json_object *msg = json_object_new_object();
        bool oom = !result;

        json_put(msg, "jsonrpc", json_object_new_string("2.0"), &oom);
        json_put(msg, "id", json_object_get(id), &oom);
        json_put(msg, "result", result, &oom);
        send_message(id, oom ? NULL : TAKE_PTR(msg));
}

static void send_error(json_object *id, int code, const char *message) {
        _cleanup_(json_object_putp) json_object *msg = json_object_new_object();
        json_object *err = json_object_new_object();
        bool oom = false;

        json_put(err, "code", json_object_new_int(code), &oom);
        json_put(err, "message", json_object_new_string(message), &oom);
        json_put(msg, "jsonrpc", json_object_new_string("2.0"), &oom);
        if (id)
                json_put(msg, "id", json_object_get(id), &oom);
        else
                json_put_null(msg, "id", &oom);
        json_put(msg, "error", err, &oom);
        send_message(id, oom ? NULL : TAKE_PTR(msg));
}

/* NULL when out of memory */
static json_object *handle_initialize(Mcp *m, json_object *params) {
        _cleanup_(json_object_putp) json_object *res = json_object_new_object();
        json_object *caps = json_object_new_object(), *tools_cap = json_object_new_object(),
                    *info = json_object_new_object(), *v;
        const char *version = MCP_LATEST_VERSION;
        bool oom = false;

        /* answer with the client's version when we speak it, else ours (the client decides) */
        if (params && json_object_object_get_ex(params, "protocolVersion", &v) && json_object_is_type(v, json_type_string))
                for (size_t i = 0; i < ELEMENTSOF(mcp_versions); i++)
                        if (streq(json_object_get_string(v), mcp_versions[i]))
                                version = mcp_versions[i];
        json_put(tools_cap, "listChanged", json_object_new_boolean(false), &oom);
        json_put(caps, "tools", tools_cap, &oom);
        json_put(info, "name", json_object_new_string("sandboxctl"), &oom);
        json_put(info, "version", json_object_new_string(PROJECT_VERSION), &oom);
        json_put(res, "protocolVersion", json_object_new_string(version), &oom);
        json_put(res, "capabilities", caps, &oom);
        json_put(res, "serverInfo", info, &oom);
        json_put(res, "instructions",
                 json_object_new_string("Run commands in sandboxes (systemd units with a dynamic user, "
                                        "no network, resource limits). Create a session, or use "
                                        "sandbox_run for the default one; files persist in its workspace. "
                                        "Interactive commands (a shell, a REPL) run on a terminal by rounds: "
                                        "sandbox_terminal_start, then sandbox_terminal_send. "
                                        "Every tool returns {ok, data} or {ok:false, error}."),
                 &oom);
        return oom ? NULL : TAKE_PTR(res);
}

static json_object *handle_tools_list(void) {
        _cleanup_(json_object_putp) json_object *res = json_object_new_object();
        bool oom = false;

        json_put(res, "tools", json_tokener_parse(tools_json), &oom);
        return oom ? NULL : TAKE_PTR(res);
}

/* takes data; NULL when out of memory */
static json_object *tool_result(json_object *data, const ToolError *e) {
        _cleanup_(json_object_putp) json_object *res = json_object_new_object(), *body = json_object_new_object();
        json_object *content = json_object_new_array(), *text = json_object_new_object();
        const char *t;
        bool oom = false;

        json_put(body, "ok", json_object_new_boolean(!e), &oom);
        if (e) {
                json_object *err = json_object_new_object();
                json_put(err, "kind", json_object_new_string(e->kind ?: "local"), &oom);
                json_put(err, "message", json_object_new_string(e->message), &oom);
                if (e->api && e->api->code[0])
                        json_put(err, "code", json_object_new_string(e->api->code), &oom);
                if (e->api && e->api->http_status > 0)
                        json_put(err, "http_status", json_object_new_int((int) e->api->http_status), &oom);
                json_put(body, "error", err, &oom);
                json_object_put(data);
        } else
                json_put(body, "data", data, &oom);

        t = oom ? NULL : json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        json_put(text, "type", json_object_new_string("text"), &oom);
        json_put(text, "text", t ? json_object_new_string(t) : NULL, &oom);
        json_push(content, text, &oom);
        json_put(res, "content", content, &oom);
        json_put(res, "structuredContent", json_object_get(body), &oom);
        json_put(res, "isError", json_object_new_boolean(!!e), &oom);
        return oom ? NULL : TAKE_PTR(res);
}

static void handle_tools_call(Mcp *m, json_object *id, json_object *params) {
        _cleanup_(json_object_putp) json_object *empty = json_object_new_object();
        json_object *name = NULL, *args = NULL, *data = NULL;
        ToolError e = {};
        int r;

        if (!empty)
                return send_oom(id);
        if (!params || !json_object_object_get_ex(params, "name", &name) || !json_object_is_type(name, json_type_string))
                return send_error(id, JSONRPC_INVALID_PARAMS, "tools/call needs a tool name.");
        if (!json_object_object_get_ex(params, "arguments", &args) || json_object_is_type(args, json_type_null))
                args = empty;
        if (!json_object_is_type(args, json_type_object))
                return send_error(id, JSONRPC_INVALID_PARAMS, "The tool's arguments must be an object.");

        for (size_t i = 0; i < ELEMENTSOF(tools); i++)
                if (streq(json_object_get_string(name), tools[i].name)) {
                        r = tools[i].run(m, args, &data, &e);
                        if (r < 0 && !e.kind)
                                tool_fail(&e, "local", "%s", strerror(-r));
                        return send_result(id, tool_result(data, r < 0 ? &e : NULL));
                }
        send_error(id, JSONRPC_INVALID_PARAMS, "Unknown tool.");
}

static void handle_message(Mcp *m, const char *line, size_t n) {
        _cleanup_(json_object_putp) json_object *msg = NULL;
        json_object *id = NULL, *method = NULL, *params = NULL;
        enum json_tokener_error err;
        const char *name;

        msg = json_tokener_parse_verbose(line, &err);
        if (!msg)
                return send_error(NULL, JSONRPC_PARSE_ERROR, "Parse error.");
        if (!json_object_is_type(msg, json_type_object))
                return send_error(NULL, JSONRPC_INVALID_REQUEST, "Send one JSON-RPC object a line (no batches).");
        json_object_object_get_ex(msg, "id", &id);
        json_object_object_get_ex(msg, "params", &params);
        if (!json_object_object_get_ex(msg, "method", &method)) {
                /* a response to us: we send no requests, so there is nothing to match */
                return;
        }
        if (!json_object_is_type(method, json_type_string))
                return send_error(id, JSONRPC_INVALID_REQUEST, "method must be a string.");
        name = json_object_get_string(method);
        if (!id) {
                /* notifications (initialized, cancelled, ...): nothing to answer */
                log_debug("MCP notification %s", name);
                return;
        }
        if (streq(name, "initialize"))
                send_result(id, handle_initialize(m, params));
        else if (streq(name, "ping"))
                send_result(id, json_object_new_object());
        else if (streq(name, "tools/list"))
                send_result(id, handle_tools_list());
        else if (streq(name, "tools/call"))
                handle_tools_call(m, id, params);
        else
                send_error(id, JSONRPC_METHOD_NOT_FOUND, "Method not found.");
}

int verb_mcp(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        Mcp m = {};
        int r;

        r = default_scope(&m.user, &m.workspace);
        if (r < 0)
                return r;
        if (!arg_workspace)
                m.workspace = "mcp";
        r = connect_client(&b);
        if (r < 0)
                return r;
        m.client = b;
        /* the protocol owns stdout; everything else goes to stderr */
        (void) signal(SIGPIPE, SIG_IGN);
        while ((n = getline(&line, &cap, stdin)) >= 0) {
                while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                        line[--n] = 0;
                if (n == 0)
                        continue;
                handle_message(&m, line, (size_t) n);
        }
        if (ferror(stdin))
                return log_error_errno(errno > 0 ? -errno : -EIO, "Reading stdin failed: %m");
        return 0;
}
