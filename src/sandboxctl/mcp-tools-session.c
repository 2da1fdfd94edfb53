/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl mcp: the tools of sessions, their state, their usage and their exposed ports,
 * and sandbox_health. */

#include "encoding.h"
#include "json-util.h"
#include "mcp.h"
#include "validate.h"

/* Bounds of sandboxd's POST /v1/sessions (src/shared/request.h): the configured maxima
 * (MaxCPUQuota=, MaxTasksMax=, MaxIdleTimeoutSec=, ...) are lower, and sandboxd refuses what
 * is above them with limit_exceeded; it is not told through the API. */
#define CPU_QUOTA_MAX 100000ULL
#define TASKS_MAX_MAX 1000000ULL
#define TTL_S_MAX (365ULL * 86400)
#define DOMAINS_MAX 256
#define DOMAIN_LEN_MAX 255 /* a name of 253 and "*." */
#define MEMORY_MAX_DIGITS 23

/* running commands listed by sandbox_session_metrics, the largest CPU users first */
#define METRICS_RUNNING_MAX 64

/* --- schemas of the data ------------------------------------------------------------------- */

#define INT "{\"type\":\"integer\"}"
#define STR "{\"type\":\"string\"}"
#define BOOL "{\"type\":\"boolean\"}"
#define STR_LIST "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}"

#define LIMITS_SCHEMA                                                                                          \
        "{\"type\":\"object\",\"properties\":{"                                                                \
        "\"memory_max\":{\"type\":\"integer\",\"description\":\"bytes\"},"                                   \
        "\"cpu_quota\":{\"type\":\"integer\",\"description\":\"percent of one CPU\"},"                       \
        "\"tasks_max\":" INT "}}"

#define SESSION_PROPERTIES                                                                                     \
        "\"id\":" STR ",\"user\":" STR ",\"workspace\":" STR ","                                               \
        "\"state\":{\"type\":\"string\",\"description\":\"starting, active, closing or closed\"},"            \
        "\"unit\":" STR ",\"dynamic_user\":" STR ",\"workspace_path\":" STR ","                                \
        "\"created_at_usec\":" INT ",\"last_activity_usec\":" INT ","                                          \
        "\"ttl_s\":{\"type\":\"integer\",\"description\":\"idle time before it closes\"},"                    \
        "\"expires_at_usec\":{\"type\":\"integer\",\"description\":\"when it closes if idle until then (microseconds since the epoch)\"}," \
        "\"frozen\":" BOOL ",\"limits\":" LIMITS_SCHEMA ","                                                    \
        "\"commands\":{\"type\":\"integer\",\"description\":\"commands started (those sandboxd remembers)\"}," \
        "\"running\":" INT ","                                                                                 \
        "\"disk_bytes\":{\"type\":\"integer\",\"description\":\"space the workspace takes, counted in the background\"}," \
        "\"network\":{\"type\":\"object\",\"properties\":{\"mode\":" STR ",\"deny\":" STR_LIST ",\"allow\":" STR_LIST "}}," \
        "\"exec_mode\":" STR ",\"image\":{\"type\":[\"string\",\"null\"],\"description\":\"the image its commands run in; null: the host's root\"},\"close_reason\":{\"type\":[\"string\",\"null\"],\"description\":\"why it closed; null while open\"}"

#define SESSION_SCHEMA                                                                                         \
        "{\"type\":\"object\",\"description\":\"the session as sandboxd reports it\",\"properties\":{"        \
        SESSION_PROPERTIES "},\"required\":[\"id\",\"user\",\"workspace\",\"state\"]}"

#define PORT_SCHEMA                                                                                            \
        "{\"type\":\"object\",\"properties\":{"                                                                \
        "\"port\":" INT ",\"socket\":" STR ","                                                                 \
        "\"host_port\":{\"type\":[\"integer\",\"null\"]},\"url\":{\"type\":[\"string\",\"null\"]},"           \
        "\"unit\":" STR ",\"state\":" STR "},\"required\":[\"port\"]}"

#define READ_ONLY "\"annotations\":{\"readOnlyHint\":true,\"idempotentHint\":true,\"openWorldHint\":false}"

/* --- sandbox_health ------------------------------------------------------------------------- */

static int tool_health(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { NULL };
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_free_ char *text = NULL;
        json_object *health;
        bool oom = !o;
        int r;

        r = check_args(args, allowed, e);
        if (r < 0)
                return r;
        r = sandboxd_health(c->client, &text);
        if (r < 0)
                return tool_fail_client(c, e, r, "Asking sandboxd for its health failed");
        health = json_from_text(text);
        if (!health || !json_object_is_type(health, json_type_object)) {
                json_object_put(health);
                return tool_fail(e, "internal", "sandboxd's health is not a JSON object.");
        }
        json_put(o, "sandboxd", health, &oom);
        json_put(o, "server", server_config_data(c->config, c->client), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* --- sandbox_create_session ----------------------------------------------------------------- */

/* a list of domains: an array of at most DOMAINS_MAX strings; sandboxd judges each */
static int domain_list(json_object *v, const char *key, json_object **ret, ToolError *e) {
        size_t n;

        if (!json_object_is_type(v, json_type_array))
                return tool_fail(e, "invalid_type", "Argument 'network.%s' must be an array of domain names.", key);
        n = json_object_array_length(v);
        if (n > DOMAINS_MAX)
                return tool_fail(e, "invalid_value", "Argument 'network.%s' has more than %d entries.", key, DOMAINS_MAX);
        for (size_t i = 0; i < n; i++) {
                json_object *d = json_object_array_get_idx(v, i);
                const char *s;
                size_t len;

                if (!json_object_is_type(d, json_type_string))
                        return tool_fail(e, "invalid_type", "Argument 'network.%s' must be an array of domain names.",
                                         key);
                s = json_object_get_string(d);
                len = (size_t) json_object_get_string_len(d);
                if (len == 0 || len > DOMAIN_LEN_MAX || strlen(s) != len)
                        return tool_fail(e, "invalid_value",
                                         "Argument 'network.%s' has an invalid domain: 1 to %d characters, such as "
                                         "\"example.com\" or \"*.example.com\".",
                                         key, DOMAIN_LEN_MAX);
        }
        *ret = v;
        return 0;
}

/* "network": {mode?, allow?, deny?} into opts as libsandboxd's transport takes it */
static int network_arg(McpCall *c, json_object *args, json_object *opts, ToolError *e) {
        json_object *net, *mode = NULL, *allow = NULL, *deny = NULL, *o;
        bool oom = false;
        int r;

        if (!json_object_object_get_ex(args, "network", &net) || json_object_is_type(net, json_type_null))
                return 0;
        if (!json_object_is_type(net, json_type_object))
                return tool_fail(e, "invalid_type", "Argument 'network' must be an object {mode, allow, deny}.");
        json_object_object_foreach(net, key, v) {
                if (streq(key, "mode")) {
                        if (!json_object_is_type(v, json_type_string))
                                return tool_fail(e, "invalid_type", "Argument 'network.mode' must be a string.");
                        mode = v; /* sandboxd judges it: none, proxy, or host where the tenant may */
                } else if (streq(key, "allow")) {
                        if ((r = domain_list(v, key, &allow, e)) < 0)
                                return r;
                } else if (streq(key, "deny")) {
                        if ((r = domain_list(v, key, &deny, e)) < 0)
                                return r;
                } else
                        return tool_fail(e, "unknown_field", "Unknown argument 'network.%.64s'.", key);
        }
        o = json_object_new_object();
        if (mode)
                json_put(o, "mode", json_object_get(mode), &oom);
        if (allow)
                json_put(o, "allow", json_object_get(allow), &oom);
        if (deny)
                json_put(o, "deny", json_object_get(deny), &oom);
        json_put(opts, "network", o, &oom);
        return oom ? -ENOMEM : 0;
}

/* digits and one of K, M, G, T; sandboxd judges the value (at least 4M, at most its maximum) */
static bool memory_max_is_valid(const char *s) {
        size_t n = strlen(s), digits = strspn(s, "0123456789");

        if (digits == 0 || digits > MEMORY_MAX_DIGITS)
                return false;
        return digits == n || (digits == n - 1 && strchr("KMGT", s[n - 1]));
}

static int tool_create_session(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "user", "workspace", "memory_max", "cpu_quota", "tasks_max", "ttl_s",
                                               "exec_mode", "network", "image", NULL };
        _cleanup_(json_object_putp) json_object *opts = json_object_new_object(), *limits = json_object_new_object(),
                                                *res = NULL;
        const char *user, *ws, *mem, *mode, *image, *text;
        sandboxd_session *s = NULL;
        bool created = false, oom = false;
        uint64_t u;
        int r;

        if (!opts || !limits)
                return -ENOMEM;
        r = check_args(args, allowed, e);
        if (r >= 0)
                r = scope_of(c, args, &user, &ws, e);
        if (r >= 0)
                r = arg_string(args, "memory_max", false, &mem, e);
        if (r >= 0)
                r = arg_string(args, "exec_mode", false, &mode, e);
        if (r >= 0)
                r = arg_string(args, "image", false, &image, e);
        if (r < 0)
                return r;
        if (mem && !memory_max_is_valid(mem))
                return tool_fail(e, "invalid_value",
                                 "Argument 'memory_max' must be bytes, or a number with K, M, G or T, such as \"512M\".");
        if (mem)
                json_put(limits, "memory_max", json_object_new_string(mem), &oom);
        if (mode) /* sandboxd judges it, as it does the values of the limits */
                json_put(opts, "exec_mode", json_object_new_string(mode), &oom);
        if (image) /* and the image: invalid_name, image_not_found */
                json_put(opts, "image", json_object_new_string(image), &oom);
        u = 0;
        if ((r = arg_range(args, "cpu_quota", 1, CPU_QUOTA_MAX, 0, &u, e)) < 0)
                return r;
        if (u > 0)
                json_put(limits, "cpu_quota", json_object_new_int64((int64_t) u), &oom);
        u = 0;
        if ((r = arg_range(args, "tasks_max", 1, TASKS_MAX_MAX, 0, &u, e)) < 0)
                return r;
        if (u > 0)
                json_put(limits, "tasks_max", json_object_new_int64((int64_t) u), &oom);
        u = 0;
        if ((r = arg_range(args, "ttl_s", 1, TTL_S_MAX, 0, &u, e)) < 0)
                return r;
        if (u > 0)
                json_put(opts, "ttl_s", json_object_new_int64((int64_t) u), &oom);
        if ((r = network_arg(c, args, opts, e)) < 0)
                return r;
        if (json_object_object_length(limits) > 0)
                json_put(opts, "limits", json_object_get(limits), &oom);
        if (oom)
                return -ENOMEM;

        /* NULL would be no options at all */
        text = json_object_to_json_string(opts);
        if (!text)
                return -ENOMEM;
        r = sandboxd_session_create(c->client, user, ws, text, &s, &created);
        if (r < 0)
                return tool_fail_client(c, e, r, "Creating the session failed");
        res = json_from_text(s->json);
        sandboxd_session_free(s);
        json_put(res, "created", json_object_new_boolean(created), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(res);
        return 0;
}

/* --- the others on sessions ----------------------------------------------------------------- */

static int tool_list_sessions(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "user", NULL };
        const char *user;
        int r;

        r = check_args(args, allowed, e);
        if (r >= 0)
                r = arg_string(args, "user", false, &user, e);
        if (r < 0)
                return r;
        if (user && !user_name_is_valid(user))
                return tool_fail(e, "invalid_name", "Invalid user name '%.64s': it must match ^[a-z_][a-z0-9_-]{0,31}$.",
                                 user);
        r = sessions_json(c->client, user, ret);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return tool_fail_client(c, e, r, "Listing sessions failed");
        return 0;
}

/* *ret: the session's object; takes s */
static int session_data(sandboxd_session *s, json_object **ret) {
        *ret = json_from_text(s->json);
        sandboxd_session_free(s);
        return *ret ? 0 : -ENOMEM;
}

static int tool_session_status(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", NULL };
        sandboxd_session *s = NULL;
        const char *session;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r < 0)
                return r;
        r = sandboxd_session_get(c->client, session, &s);
        if (r < 0)
                return tool_fail_client(c, e, r, "Looking the session up failed");
        return session_data(s, ret);
}

static int tool_close_session(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "purge", "confirm", NULL };
        sandboxd_session *s = NULL;
        const char *session;
        bool purge = false, confirm = false;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_bool(args, "purge", false, &purge, e);
        if (r >= 0)
                r = arg_bool(args, "confirm", false, &confirm, e);
        if (r < 0)
                return r;
        if (purge && !confirm)
                return tool_fail(e, "invalid_value",
                                 "purge:true deletes the files of the workspace, home and TMPDIR of the session's "
                                 "scope for good; ask again with confirm:true to do that. Nothing was closed.");
        r = sandboxd_session_close(c->client, session, purge, &s);
        if (r < 0)
                return tool_fail_client(c, e, r, "Closing the session failed");
        return session_data(s, ret);
}

static int freeze_or_thaw(McpCall *c, json_object *args, json_object **ret, ToolError *e, bool freeze) {
        static const char *const allowed[] = { "session_id", NULL };
        sandboxd_session *s = NULL;
        const char *session;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r < 0)
                return r;
        r = sandboxd_session_freeze(c->client, session, freeze, &s);
        if (r < 0)
                return tool_fail_client(c, e, r, freeze ? "Freezing the session failed" : "Thawing the session failed");
        return session_data(s, ret);
}

static int tool_freeze_session(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        return freeze_or_thaw(c, args, ret, e, true);
}

static int tool_thaw_session(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        return freeze_or_thaw(c, args, ret, e, false);
}

static int tool_touch_session(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", NULL };
        sandboxd_session *s = NULL;
        const char *session;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r < 0)
                return r;
        r = sandboxd_session_touch(c->client, session);
        if (r < 0)
                return tool_fail_client(c, e, r, "Touching the session failed");
        r = sandboxd_session_get(c->client, session, &s);
        if (r < 0)
                return tool_fail_client(c, e, r, "Looking the session up failed");
        return session_data(s, ret);
}

/* --- sandbox_session_metrics ---------------------------------------------------------------- */

static uint64_t json_u64(json_object *o, const char *path1, const char *path2) {
        json_object *v = NULL;

        if (!json_object_object_get_ex(o, path1, &v))
                return 0;
        if (path2 && !json_object_object_get_ex(v, path2, &v))
                return 0;
        return json_object_is_type(v, json_type_int) ? (uint64_t) json_object_get_int64(v) : 0;
}

static int cmp_cpu_desc(const void *a, const void *b) {
        const sandboxd_result *x = *(sandboxd_result *const *) a, *y = *(sandboxd_result *const *) b;

        return x->cpu_usec < y->cpu_usec ? 1 : x->cpu_usec > y->cpu_usec ? -1 : 0;
}

static int tool_session_metrics(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", NULL };
        _cleanup_(json_object_putp) json_object *sj = NULL, *o = json_object_new_object();
        _cleanup_free_ sandboxd_result **running = NULL;
        sandboxd_result **list = NULL;
        sandboxd_session *s = NULL;
        uint64_t cpu = 0, mem = 0, tasks = 0;
        size_t n = 0, n_running = 0;
        const char *session;
        json_object *limits = NULL, *state = NULL, *frozen = NULL, *arr;
        bool oom = !o;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r < 0)
                return r;
        r = sandboxd_session_get(c->client, session, &s);
        if (r < 0)
                return tool_fail_client(c, e, r, "Looking the session up failed");
        r = session_data(s, &sj);
        if (r < 0)
                return r;
        r = sandboxd_command_list(c->client, session, &list, &n);
        if (r < 0)
                return tool_fail_client(c, e, r, "Listing the session's commands failed");
        running = calloc(n + 1, sizeof(*running));
        if (!running) {
                sandboxd_result_list_free(list);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                cpu += list[i]->cpu_usec;
                if (list[i]->status != SANDBOXD_STATUS_RUNNING)
                        continue;
                running[n_running++] = list[i];
                mem += list[i]->memory_bytes;
                tasks += list[i]->tasks;
        }
        qsort(running, n_running, sizeof(*running), cmp_cpu_desc);

        json_put(o, "session_id", json_object_new_string(session), &oom);
        json_object_object_get_ex(sj, "state", &state);
        json_object_object_get_ex(sj, "frozen", &frozen);
        json_put(o, "state", json_object_new_string(state ? json_object_get_string(state) : "unknown"), &oom);
        json_put(o, "frozen", json_object_new_boolean(frozen && json_object_get_boolean(frozen)), &oom);
        json_put(o, "disk_bytes", json_object_new_int64((int64_t) json_u64(sj, "disk_bytes", NULL)), &oom);
        json_put(o, "commands", json_object_new_int64((int64_t) n), &oom);
        json_put(o, "running_commands", json_object_new_int64((int64_t) n_running), &oom);
        json_put(o, "cpu_usec", json_object_new_int64((int64_t) cpu), &oom);
        json_put(o, "memory_bytes", json_object_new_int64((int64_t) mem), &oom);
        json_put(o, "tasks", json_object_new_int64((int64_t) tasks), &oom);
        if (json_object_object_get_ex(sj, "limits", &limits))
                json_put(o, "limits", json_object_get(limits), &oom);
        else
                json_put(o, "limits", json_object_new_object(), &oom);
        arr = json_object_new_array();
        for (size_t i = 0; i < n_running && i < METRICS_RUNNING_MAX; i++) {
                json_object *x = json_object_new_object();

                json_put(x, "request_id", json_object_new_string(running[i]->request_id ?: ""), &oom);
                json_put(x, "cpu_usec", json_object_new_int64((int64_t) running[i]->cpu_usec), &oom);
                json_put(x, "memory_bytes", json_object_new_int64((int64_t) running[i]->memory_bytes), &oom);
                json_put(x, "tasks", json_object_new_int64((int64_t) running[i]->tasks), &oom);
                json_push(arr, x, &oom);
        }
        json_put(o, "running", arr, &oom);
        sandboxd_result_list_free(list);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* --- ports ---------------------------------------------------------------------------------- */

/* "port": required, 1..65535 */
static int arg_port(json_object *args, uint16_t *ret, ToolError *e) {
        uint64_t u = 0;
        int r;

        r = arg_uint(args, "port", &u, e);
        if (r < 0)
                return r;
        if (r == 0)
                return tool_fail(e, "invalid_value", "Argument 'port' is required.");
        if (u < 1 || u > UINT16_MAX)
                return tool_fail(e, "invalid_value", "Argument 'port' must be a TCP port, 1 to 65535.");
        *ret = (uint16_t) u;
        return 0;
}

static int tool_expose_port(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
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
        r = sandboxd_port_expose(c->client, session, port, host, &p);
        if (r < 0)
                return tool_fail_client(c, e, r, "Exposing the port failed");
        *ret = json_from_text(p->json);
        sandboxd_port_free(p);
        return *ret ? 0 : -ENOMEM;
}

static int tool_list_ports(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
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
        r = sandboxd_port_list(c->client, session, &list, &n);
        if (r < 0)
                return tool_fail_client(c, e, r, "Listing the ports failed");
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

static int tool_unexpose_port(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
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
        r = sandboxd_port_unexpose(c->client, session, port);
        if (r < 0)
                return tool_fail_client(c, e, r, "Unexposing the port failed");
        o = json_object_new_object();
        json_put(o, "port", json_object_new_int(port), &oom);
        json_put(o, "exposed", json_object_new_boolean(false), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* --- the table ------------------------------------------------------------------------------ */

#define SESSION_ONLY                                                                                           \
        "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID "},"           \
        "\"required\":[\"session_id\"],\"additionalProperties\":false}"

#define DOMAINS(what)                                                                                          \
        "{\"type\":\"array\",\"maxItems\":256,\"description\":\"" what "\",\"items\":{\"type\":\"string\","  \
        "\"minLength\":1,\"maxLength\":255,\"pattern\":\"^(\\\\*\\\\.)?[A-Za-z0-9_.:-]{1,253}$\"}}"

#define HOST_PATHS_SCHEMA                                                                                      \
        "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"dir\":" STR ",\"writable\":" BOOL "}}}"

#define SERVER_SCHEMA                                                                                          \
        "{\"type\":\"object\",\"description\":\"this MCP server's configuration (the flags of sandboxctl mcp)\","   \
        "\"properties\":{\"name\":" STR ",\"version\":" STR ","                                                \
        "\"transport\":{\"type\":\"string\",\"description\":\"how it talks to sandboxd: dbus or http\"},"      \
        "\"user\":{\"type\":\"string\",\"description\":\"the default user of new sessions\"},"                \
        "\"workspace\":{\"type\":\"string\",\"description\":\"the default workspace of new sessions\"},"      \
        "\"jobs\":{\"type\":\"integer\",\"description\":\"tool calls served at once (--jobs=)\"},"             \
        "\"timeout_ms\":{\"type\":\"integer\",\"description\":\"a command's timeout when the call gives none (--timeout=)\"}," \
        "\"kill_grace_ms\":{\"type\":\"integer\",\"description\":\"SIGTERM to SIGKILL of a cancelled command\"}," \
        "\"host_paths\":" HOST_PATHS_SCHEMA "}}"

const McpTool mcp_session_tools[] = {
        { "sandbox_health",
          "\"title\":\"sandboxd health\""
          ",\"description\":\"Check that sandboxd answers and how this MCP server is set up: sandboxd's status, version, uptime, sessions, running commands and pool of prepared sessions, and the server's own configuration (transport, default user and workspace, jobs, timeout_ms, kill_grace_ms, host paths).\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}"
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{"
                        "\"sandboxd\":{\"type\":\"object\",\"description\":\"GET /v1/health\",\"properties\":{"
                        "\"status\":" STR ",\"timestamp\":{\"description\":\"ISO 8601 over HTTP, microseconds since the epoch over D-Bus\"},\"uptime\":{\"type\":\"number\"},\"version\":" STR ","
                        "\"sessions\":" INT ",\"running_commands\":" INT ",\"pool\":{\"type\":\"object\"}},\"required\":[\"status\"]},"
                        "\"server\":" SERVER_SCHEMA "},\"required\":[\"sandboxd\",\"server\"]}")
          "," READ_ONLY,
          tool_health },
        { "sandbox_create_session",
          "\"title\":\"Create a session\""
          ",\"description\":\"Create (or get the active) sandbox session of a user and workspace. Files in the workspace persist across sessions of the same scope. Returns the session, whose id the other tools take, and created (false: it was active already, and kept its settings). sandboxd judges the values: above its configured maxima is limit_exceeded, network mode host without permission forbidden; a refused request creates nothing.\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
            "\"user\":" MCP_USER ",\"workspace\":" MCP_WORKSPACE ","
            "\"memory_max\":{\"type\":\"string\",\"pattern\":\"^[0-9]{1,23}[KMGT]?$\",\"description\":\"the session's memory limit: bytes, or with K, M, G or T (1024-based), e.g. 512M; at least 4M\"},"
            "\"cpu_quota\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,\"description\":\"percent of one CPU (200: two CPUs); sandboxd's MaxCPUQuota= caps it\"},"
            "\"tasks_max\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000000,\"description\":\"processes and threads at once; sandboxd's MaxTasksMax= caps it\"},"
            "\"ttl_s\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":31536000,\"description\":\"idle time in seconds before the session closes; sandboxd's MaxIdleTimeoutSec= caps it\"},"
            "\"exec_mode\":{\"type\":\"string\",\"enum\":[\"unit\",\"session\"],\"description\":\"how its commands run: each a transient unit of PID 1, or children of the session's executor; default: sandboxd's ExecMode=\"},"
            "\"image\":{\"type\":\"string\",\"pattern\":\"^[a-z0-9][a-z0-9_-]{0,63}$\",\"description\":\"the image (root file system) its commands run in, as sandboxd lists them (GET /v1/images, sandboxctl image ls); default: sandboxd's [Images] Default=, else the host's root\"},"
            "\"network\":{\"type\":\"object\",\"description\":\"the session's network; default: sandboxd's DefaultMode= (proxy unless configured)\",\"properties\":{"
              "\"mode\":{\"type\":\"string\",\"enum\":[\"none\",\"proxy\",\"host\"],\"description\":\"none: loopback only; proxy: only sandboxd's filtering HTTP/SOCKS proxy; host: the host's network, for tenants sandboxd allows it (else forbidden)\"},"
              "\"allow\":" DOMAINS("mode proxy: only these names (example.com, *.example.com) and those sandboxd allows; an empty list allows nothing") ","
              "\"deny\":" DOMAINS("mode proxy: also refuse these names, besides sandboxd's DefaultDeniedDomains=") "},"
              "\"additionalProperties\":false}"
          "},\"additionalProperties\":false}"
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{" SESSION_PROPERTIES ",\"created\":" BOOL "},\"required\":[\"id\",\"state\",\"created\"]}")
          ",\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":false,\"idempotentHint\":true,\"openWorldHint\":false}",
          tool_create_session },
        { "sandbox_list_sessions",
          "\"title\":\"List sessions\""
          ",\"description\":\"List the sandbox sessions this server may see, of one user or all.\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"user\":" MCP_USER "},\"additionalProperties\":false}"
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"sessions\":{\"type\":\"array\",\"items\":" SESSION_SCHEMA "}},\"required\":[\"sessions\"]}")
          "," READ_ONLY,
          tool_list_sessions },
        { "sandbox_session_status",
          "\"title\":\"Session status\""
          ",\"description\":\"One session as sandboxd reports it: state, frozen, limits, network, exec_mode, ttl_s and expires_at_usec, commands started and running, disk_bytes of its workspace.\""
          "," SESSION_ONLY
          "," MCP_OUTPUT(SESSION_SCHEMA)
          "," READ_ONLY,
          tool_session_status },
        { "sandbox_close_session",
          "\"title\":\"Close a session\""
          ",\"description\":\"Close a session: its running commands are stopped; the workspace stays for the next session of the scope unless purge is true, which deletes it and needs confirm true as well.\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ","
            "\"purge\":{\"type\":\"boolean\",\"description\":\"also delete the workspace, home and TMPDIR of the scope; default false\"},"
            "\"confirm\":{\"type\":\"boolean\",\"description\":\"required with purge true\"}},"
            "\"required\":[\"session_id\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT(SESSION_SCHEMA)
          ",\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":true,\"openWorldHint\":false}",
          tool_close_session },
        { "sandbox_freeze_session",
          "\"title\":\"Freeze a session\""
          ",\"description\":\"Pause every process of a session (its cgroup is frozen); commands started meanwhile wait for the thaw, SIGKILL still ends one. Returns the session (frozen true).\""
          "," SESSION_ONLY
          "," MCP_OUTPUT(SESSION_SCHEMA)
          ",\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":false,\"idempotentHint\":true,\"openWorldHint\":false}",
          tool_freeze_session },
        { "sandbox_thaw_session",
          "\"title\":\"Thaw a session\""
          ",\"description\":\"Resume the processes of a frozen session. Returns the session (frozen false).\""
          "," SESSION_ONLY
          "," MCP_OUTPUT(SESSION_SCHEMA)
          ",\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":false,\"idempotentHint\":true,\"openWorldHint\":false}",
          tool_thaw_session },
        { "sandbox_touch_session",
          "\"title\":\"Keep a session alive\""
          ",\"description\":\"Push back a session's idle expiry, as a request to it does. Returns the session with its new expires_at_usec.\""
          "," SESSION_ONLY
          "," MCP_OUTPUT(SESSION_SCHEMA)
          ",\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":false,\"idempotentHint\":true,\"openWorldHint\":false}",
          tool_touch_session },
        { "sandbox_session_metrics",
          "\"title\":\"Session usage\""
          ",\"description\":\"CPU, memory, tasks and disk of a session, from what sandboxd measures of its commands (it samples each running command's cgroup every 200 ms): cpu_usec is the CPU time of the commands sandboxd remembers, running and finished; memory_bytes and tasks are sums over the running commands of each one's peak so far (0 in exec mode session on a host whose controllers are on cgroup v1, where sandboxd cannot see them while a command runs); disk_bytes is the workspace's size, counted in the background. running lists the running commands, the most CPU first (at most 64).\""
          "," SESSION_ONLY
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{"
                        "\"session_id\":" STR ",\"state\":" STR ",\"frozen\":" BOOL ","
                        "\"disk_bytes\":{\"type\":\"integer\",\"description\":\"space the workspace takes (allocated blocks), the last background count\"},"
                        "\"commands\":{\"type\":\"integer\",\"description\":\"commands sandboxd remembers of the session\"},"
                        "\"running_commands\":" INT ","
                        "\"cpu_usec\":{\"type\":\"integer\",\"description\":\"CPU time of those commands, running (sampled) and finished (final)\"},"
                        "\"memory_bytes\":{\"type\":\"integer\",\"description\":\"sum over running commands of each one's peak memory so far\"},"
                        "\"tasks\":{\"type\":\"integer\",\"description\":\"sum over running commands of each one's peak number of tasks so far\"},"
                        "\"limits\":" LIMITS_SCHEMA ","
                        "\"running\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"request_id\":" STR ",\"cpu_usec\":" INT ",\"memory_bytes\":" INT ",\"tasks\":" INT "}}}"
                        "},\"required\":[\"session_id\",\"state\",\"disk_bytes\",\"running_commands\",\"cpu_usec\",\"memory_bytes\",\"tasks\",\"limits\"]}")
          "," READ_ONLY,
          tool_session_metrics },
        { "sandbox_expose_port",
          "\"title\":\"Expose a port\""
          ",\"description\":\"Make a TCP port of a session (a server a command started on 127.0.0.1:PORT in it) reachable from the host: on a unix socket, and with host true also on a free port of 127.0.0.1 of the host. Returns port, socket, host_port and url (null without host). The same port again returns it unchanged.\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535,\"description\":\"within sandboxd's [Ports] Range=\"},\"host\":{\"type\":\"boolean\",\"description\":\"also on a port of 127.0.0.1 of the host; default false\"}},\"required\":[\"session_id\",\"port\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT(PORT_SCHEMA)
          ",\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":false,\"idempotentHint\":true,\"openWorldHint\":false}",
          tool_expose_port },
        { "sandbox_list_ports",
          "\"title\":\"List exposed ports\""
          ",\"description\":\"List the exposed ports of a session, smallest first.\""
          "," SESSION_ONLY
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"ports\":{\"type\":\"array\",\"items\":" PORT_SCHEMA "}},\"required\":[\"ports\"]}")
          "," READ_ONLY,
          tool_list_ports },
        { "sandbox_unexpose_port",
          "\"title\":\"Unexpose a port\""
          ",\"description\":\"Stop exposing a port of a session: its socket (and host port) go at once.\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535}},\"required\":[\"session_id\",\"port\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"port\":" INT ",\"exposed\":{\"type\":\"boolean\",\"const\":false}},\"required\":[\"port\",\"exposed\"]}")
          ",\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,\"openWorldHint\":false}",
          tool_unexpose_port },
        {},
};
