/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl mcp: the tools' arguments, errors and results. */

#include <stdarg.h>
#include <sys/random.h>

#include "encoding.h"
#include "error-table.h"
#include "json-util.h"
#include "log.h"
#include "mcp.h"
#include "validate.h"

int tool_fail(ToolError *e, const char *code, const char *fmt, ...) {
        const ApiError *row = api_error_from_code(code);
        va_list ap;

        if (!row) {
                log_debug("BUG: '%s' is not a code of the error table.", code);
                row = api_error_from_code("internal");
        }
        e->code = row->code;
        e->http_status = (long) row->http_status;
        va_start(ap, fmt);
        (void) vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

int tool_fail_client(McpCall *c, ToolError *e, int r, const char *what) {
        const sandboxd_error *api = sandboxd_client_last_error(c->client);
        const ApiError *row = NULL;

        if (api && api->kind != SANDBOXD_ERROR_NONE && api->code[0])
                row = api_error_from_code(api->code);
        if (!row)
                /* no answer, or one without a code we know: a failure of the way there */
                row = api_error_from_code(r == -ECANCELED ? "stopping" : "internal");
        e->code = row->code;
        e->http_status = api && api->http_status > 0 ? api->http_status : (long) row->http_status;
        snprintf(e->message, sizeof(e->message), "%.200s: %.600s", what,
                 api && api->kind != SANDBOXD_ERROR_NONE && api->message[0] ? api->message : strerror(-r));
        if (api && api->kind == SANDBOXD_ERROR_WRONG_NODE)
                snprintf(e->node, sizeof(e->node), "%s", api->node);
        return r;
}

int mcp_request_id(char **ret) {
        uint8_t rnd[8];

        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -errno;
        if (asprintf(ret, "mcp-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
                     rnd[6], rnd[7]) < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

json_object *json_from_text(const char *text) {
        return text ? json_tokener_parse(text) : NULL;
}

/* bytes as "key" (UTF-8 text) or "key_b64" */
void add_bytes(json_object *o, const char *key, const char *p, size_t n, bool *oom) {
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
json_object *result_data(const sandboxd_result *r, const char *session, size_t max) {
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

int arg_string(json_object *args, const char *key, bool required, const char **ret, ToolError *e) {
        json_object *v;

        *ret = NULL;
        if (!json_object_object_get_ex(args, key, &v) || json_object_is_type(v, json_type_null)) {
                if (required)
                        return tool_fail(e, "missing_field", "Missing argument '%s'.", key);
                return 0;
        }
        if (!json_object_is_type(v, json_type_string))
                return tool_fail(e, "invalid_type", "Argument '%s' must be a string.", key);
        *ret = json_object_get_string(v);
        return 0;
}

int arg_text(json_object *args, const char *key, const char **ret, size_t *ret_len, ToolError *e) {
        json_object *v;
        int r;

        r = arg_string(args, key, false, ret, e);
        if (r >= 0 && *ret && json_object_object_get_ex(args, key, &v))
                *ret_len = (size_t) json_object_get_string_len(v);
        else
                *ret_len = 0;
        return r;
}

int arg_uint(json_object *args, const char *key, uint64_t *ret, ToolError *e) {
        json_object *v;

        if (!json_object_object_get_ex(args, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
                return tool_fail(e, "invalid_type", "Argument '%s' must be a non-negative integer.", key);
        *ret = (uint64_t) json_object_get_int64(v);
        return 1;
}

int arg_session(json_object *args, const char **ret, ToolError *e) {
        int r = arg_string(args, "session_id", true, ret, e);

        if (r >= 0 && !session_id_looks_valid(*ret))
                return tool_fail(e, "invalid_value", "'%s' is not a session id (NODE_HEX: a node name, '_', 16 hex digits; or 16 hex digits alone).", *ret);
        return r;
}

int check_args(json_object *args, const char *const *allowed, ToolError *e) {
        json_object_object_foreach(args, key, val) {
                bool ok = false;
                (void) val;
                for (const char *const *a = allowed; *a; a++)
                        if (streq(key, *a))
                                ok = true;
                if (!ok)
                        return tool_fail(e, "unknown_field", "Unknown argument '%s'.", key);
        }
        return 0;
}

int arg_bool(json_object *args, const char *key, bool def, bool *ret, ToolError *e) {
        json_object *v;

        *ret = def;
        if (!json_object_object_get_ex(args, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_boolean))
                return tool_fail(e, "invalid_type", "%s must be true or false.", key);
        *ret = json_object_get_boolean(v);
        return 0;
}

/* The arguments of a tool on one session: none but those allowed, and its id. */
int session_args(json_object *args, const char *const *allowed, const char **ret_session, ToolError *e) {
        int r = check_args(args, allowed, e);

        return r < 0 ? r : arg_session(args, ret_session, e);
}

/* An integer argument within [min, max], default def when absent. */
int arg_range(json_object *args, const char *key, uint64_t min, uint64_t max, uint64_t def, uint64_t *ret,
                     ToolError *e) {
        uint64_t u = def;
        int r;

        r = arg_uint(args, key, &u, e);
        if (r < 0)
                return r;
        if (r > 0 && (u < min || u > max))
                return tool_fail(e, "invalid_value", "Argument '%s' must be an integer from %llu to %llu.", key,
                                 (unsigned long long) min, (unsigned long long) max);
        *ret = u;
        return 0;
}

int arg_request(json_object *args, const char **ret, ToolError *e) {
        int r = arg_string(args, "request_id", true, ret, e);

        if (r >= 0 && !request_id_is_valid(*ret))
                return tool_fail(e, "invalid_value", "'%s' is not a request id (^[A-Za-z0-9._-]{1,64}$).", *ret);
        return r;
}

json_object *exit_data(const sandboxd_result *res, bool *oom) {
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


int scope_of(McpCall *c, json_object *args, const char **ret_user, const char **ret_ws, ToolError *e) {
        const char *user, *ws;
        int r;

        r = arg_string(args, "user", false, &user, e);
        if (r >= 0)
                r = arg_string(args, "workspace", false, &ws, e);
        if (r < 0)
                return r;
        user = user ?: c->config->user;
        ws = ws ?: c->config->workspace;
        if (!user_name_is_valid(user))
                return tool_fail(e, "invalid_name", "Invalid user name '%s': it must match ^[a-z_][a-z0-9_-]{0,31}$.", user);
        if (!workspace_name_is_valid(ws))
                return tool_fail(e, "invalid_name", "Invalid workspace name '%s': it must match ^[a-z0-9_-]{1,64}$.", ws);
        *ret_user = user;
        *ret_ws = ws;
        return 0;
}

/* The server's own configuration (the flags of sandboxctl mcp), as sandbox_health and the
 * resource sandboxd://runtime show it; NULL when out of memory. */
json_object *server_config_data(const McpConfig *config, sandboxd_client *client) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *paths = json_object_new_array();
        bool oom = false;

        json_put(o, "name", json_object_new_string("sandboxctl"), &oom);
        json_put(o, "version", json_object_new_string(PROJECT_VERSION), &oom);
        json_put(o, "transport", json_object_new_string(sandboxd_client_is_bus(client) ? "dbus" : "http"), &oom);
        json_put(o, "user", json_object_new_string(config->user ?: ""), &oom);
        json_put(o, "workspace", json_object_new_string(config->workspace ?: ""), &oom);
        json_put(o, "jobs", json_object_new_int64((int64_t) config->jobs), &oom);
        json_put(o, "timeout_ms", json_object_new_int64((int64_t) config->timeout_ms), &oom);
        json_put(o, "kill_grace_ms", json_object_new_int64((int64_t) config->kill_grace_ms), &oom);
        for (size_t i = 0; i < config->n_host_paths; i++) {
                json_object *p = json_object_new_object();

                json_put(p, "dir", json_object_new_string(config->host_paths[i].dir), &oom);
                json_put(p, "writable", json_object_new_boolean(config->host_paths[i].writable), &oom);
                json_push(paths, p, &oom);
        }
        json_put(o, "host_paths", paths, &oom);
        return oom ? NULL : TAKE_PTR(o);
}

int sessions_json(sandboxd_client *client, const char *user, json_object **ret) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *arr = json_object_new_array();
        sandboxd_session **list = NULL;
        bool oom = false;
        size_t n = 0;
        int r;

        r = sandboxd_session_list(client, user, &list, &n);
        if (r < 0) {
                json_object_put(arr);
                return r;
        }
        for (size_t i = 0; i < n; i++)
                json_push(arr, json_from_text(list[i]->json), &oom);
        sandboxd_session_list_free(list);
        json_put(o, "sessions", arr, &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}
