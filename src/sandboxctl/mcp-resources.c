/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl mcp: resources (resources/list, resources/templates/list, resources/read) and
 * their subscriptions: a watcher thread, started by the first resources/subscribe with a
 * client of its own, looks at the subscribed resources every 2 s while there are any and
 * sends notifications/resources/updated when one changed, notifications/resources/list_changed
 * when the set of sessions did. */

#include <pthread.h>
#include <stdarg.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "io-util.h"
#include "json-util.h"
#include "log.h"
#include "mcp.h"
#include "time-util.h"
#include "validate.h"

#define RPC_RESOURCE_NOT_FOUND -32002 /* MCP's "resource not found" */
#define RPC_INVALID_PARAMS -32602
#define RPC_INTERNAL_ERROR -32603

#define URI_MAX 256
#define SUBSCRIPTIONS_MAX 64
#define LISTED_SESSIONS_MAX 1024
#define WATCH_INTERVAL_SEC 2
#define WATCH_CALL_TIMEOUT_USEC (30 * USEC_PER_SEC)

#define URI_PREFIX "sandboxd://"
#define URI_RUNTIME URI_PREFIX "runtime"
#define URI_SESSIONS URI_PREFIX "sessions"
#define URI_POLICY URI_PREFIX "policy"
#define URI_SCHEMA_CREATE URI_PREFIX "schemas/session-create"
#define MIME "application/json"

typedef enum Kind {
        KIND_RUNTIME,
        KIND_SESSIONS,
        KIND_SESSION,
        KIND_POLICY,
        KIND_SCHEMA_CREATE,
} Kind;

/* -ENOENT: no resource of ours */
static int uri_parse(const char *uri, Kind *ret_kind, const char **ret_id) {
        const char *id;

        *ret_id = NULL;
        if (streq(uri, URI_RUNTIME))
                *ret_kind = KIND_RUNTIME;
        else if (streq(uri, URI_SESSIONS))
                *ret_kind = KIND_SESSIONS;
        else if (streq(uri, URI_POLICY))
                *ret_kind = KIND_POLICY;
        else if (streq(uri, URI_SCHEMA_CREATE))
                *ret_kind = KIND_SCHEMA_CREATE;
        else if ((id = startswith(uri, URI_SESSIONS "/")) && session_id_looks_valid(id)) {
                *ret_kind = KIND_SESSION;
                *ret_id = id;
        } else
                return -ENOENT;
        return 0;
}

static int rpc_fail(McpRpcError *err, int code, const char *fmt, ...) _printf_(3, 4);
static int rpc_fail(McpRpcError *err, int code, const char *fmt, ...) {
        va_list ap;

        err->code = code;
        va_start(ap, fmt);
        (void) vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

/* the uri goes into the message too, for clients that show only that */
static int not_found(McpRpcError *err, const char *uri) {
        snprintf(err->uri, sizeof(err->uri), "%s", uri);
        return rpc_fail(err, RPC_RESOURCE_NOT_FOUND, "Resource not found: %.300s", uri);
}

/* a failure of sandboxd, or of the way to it */
static int client_fail(sandboxd_client *client, McpRpcError *err, int r, const char *uri) {
        const sandboxd_error *e = sandboxd_client_last_error(client);

        if (r == -ENOENT || (e && e->kind == SANDBOXD_ERROR_NOT_FOUND))
                return not_found(err, uri);
        return rpc_fail(err, RPC_INTERNAL_ERROR, "Reading %.300s failed: %s%s%s", uri,
                        e && e->code[0] ? e->code : "", e && e->code[0] ? ": " : "",
                        e && e->message[0] ? e->message : strerror(-r));
}

/* --- the resources' contents --------------------------------------------------------------- */

static int runtime_content(sandboxd_client *client, const McpConfig *config, json_object **ret) {
        static const char *const pool_keys[] = { "profile", "size", "min_ready" };
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *health = NULL;
        json_object *sd = json_object_new_object(), *api = json_object_new_object(), *v;
        _cleanup_free_ char *text = NULL;
        bool oom = false;
        int r;

        r = sandboxd_health(client, &text);
        if (r >= 0)
                health = json_from_text(text);
        if (health && json_object_is_type(health, json_type_object)) {
                json_object *pool, *p = json_object_new_object();

                json_put(sd, "reachable", json_object_new_boolean(true), &oom);
                /* what stays the same while sandboxd runs: counts and times are in sandbox_health */
                if (json_object_object_get_ex(health, "status", &v))
                        json_put(sd, "status", json_object_get(v), &oom);
                if (json_object_object_get_ex(health, "version", &v))
                        json_put(sd, "version", json_object_get(v), &oom);
                if (json_object_object_get_ex(health, "pool", &pool))
                        for (size_t i = 0; i < ELEMENTSOF(pool_keys); i++)
                                if (json_object_object_get_ex(pool, pool_keys[i], &v))
                                        json_put(p, pool_keys[i], json_object_get(v), &oom);
                json_put(sd, "pool", p, &oom);
        } else {
                const sandboxd_error *e = sandboxd_client_last_error(client);
                json_object *err = json_object_new_object();

                json_put(sd, "reachable", json_object_new_boolean(false), &oom);
                json_put(err, "code", json_object_new_string(r < 0 && e && e->code[0] ? e->code : "internal"), &oom);
                json_put(err, "message",
                         json_object_new_string(r < 0 ? (e && e->message[0] ? e->message : strerror(-r))
                                                      : "The health is not a JSON object."),
                         &oom);
                json_put(sd, "error", err, &oom);
        }
        json_put(o, "sandboxd", sd, &oom);
        json_put(o, "server", server_config_data(config, client), &oom);
        json_put(api, "network_modes", json_tokener_parse("[\"none\",\"proxy\",\"host\"]"), &oom);
        json_put(api, "exec_modes", json_tokener_parse("[\"unit\",\"session\"]"), &oom);
        json_put(api, "policy", json_object_new_string(URI_POLICY), &oom);
        json_put(api, "session_create_schema", json_object_new_string(URI_SCHEMA_CREATE), &oom);
        json_put(o, "api", api, &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* What sandboxd's API tells of its policy: its own bounds of a request, and nothing of its
 * configuration (sandboxd.conf(5)), which only shows in refusals. */
static const char policy_text[] =
        "{\"exposed_by_api\":false,"
        "\"summary\":\"sandboxd's API has no route that reports its configured policy (sandboxd.conf [Session] and "
        "[Network]): the values below marked null are not exposed. What a session got is in its own resource "
        "(sandboxd://sessions/{session_id}: limits, network, exec_mode, ttl_s); a request above a configured maximum "
        "is refused with limit_exceeded and a message naming the maximum, network mode host without permission with "
        "forbidden, and nothing is created.\","
        "\"network\":{\"modes\":[\"none\",\"proxy\",\"host\"],"
        "\"default_mode\":null,\"default_mode_source\":\"DefaultMode= (proxy unless configured)\","
        "\"host_mode\":\"only for tenants in HostModeTenants= (local callers as unix:UID or dbus:UID); else forbidden\","
        "\"allow_deny\":\"mode proxy only (else invalid_value); at most 256 names each (example.com, *.example.com, "
        "an IP address); deny adds to DefaultDeniedDomains=, allow narrows AllowedDomains= (a name must be in both)\","
        "\"default_denied_domains\":null,\"allowed_domains\":null,"
        "\"always_refused_addresses\":[\"loopback\",\"link-local\",\"private\",\"unspecified\",\"multicast\","
        "\"reserved\",\"this host's own addresses\"]},"
        "\"limits\":{\"request_bounds\":{\"memory_max\":{\"minimum_bytes\":4194304},"
        "\"cpu_quota\":{\"minimum\":1,\"maximum\":100000},\"tasks_max\":{\"minimum\":1,\"maximum\":1000000},"
        "\"ttl_s\":{\"minimum\":1,\"maximum\":31536000}},"
        "\"defaults\":null,\"defaults_source\":\"MemoryMax=, CPUQuota=, TasksMax=, IdleTimeoutSec=\","
        "\"maxima\":null,\"maxima_source\":\"MaxMemoryMax=, MaxCPUQuota=, MaxTasksMax=, MaxIdleTimeoutSec=, "
        "MaxLifetimeSec=\"},"
        "\"exec_modes\":[\"unit\",\"session\"],\"default_exec_mode\":null,\"default_exec_mode_source\":\"ExecMode=\","
        "\"quotas\":{\"sessions\":null,\"sessions_source\":\"MaxSessionsPerTenant=, MaxSessionsPerUser= "
        "(too_many_sessions)\",\"running_commands\":null,\"running_commands_source\":\"MaxRunningCommandsPerSession= "
        "(too_many_running)\"}}";

/* sandbox_create_session's inputSchema, from the table of tools, so that the two never differ */
static int schema_content(json_object **ret) {
        for (const McpTool *t = mcp_session_tools; t->name; t++) {
                _cleanup_(json_object_putp) json_object *o = NULL;
                _cleanup_free_ char *text = NULL;
                json_object *schema;

                if (!streq(t->name, "sandbox_create_session"))
                        continue;
                if (asprintf(&text, "{%s}", t->json) < 0)
                        return -ENOMEM;
                o = json_tokener_parse(text);
                if (!o || !json_object_object_get_ex(o, "inputSchema", &schema))
                        return -EINVAL;
                *ret = json_object_get(schema);
                return 0;
        }
        return -ENOENT;
}

static int session_content(sandboxd_client *client, const char *id, json_object **ret) {
        sandboxd_session *s = NULL;
        int r;

        r = sandboxd_session_get(client, id, &s);
        if (r < 0)
                return r;
        *ret = json_from_text(s->json);
        sandboxd_session_free(s);
        return *ret ? 0 : -ENOMEM;
}

/* The content of uri: 0, or a JSON-RPC error in err */
static int content_of(sandboxd_client *client, const McpConfig *config, const char *uri, json_object **ret,
                      McpRpcError *err) {
        const char *id;
        Kind kind;
        int r;

        if (uri_parse(uri, &kind, &id) < 0)
                return not_found(err, uri);
        switch (kind) {
        case KIND_RUNTIME:
                r = runtime_content(client, config, ret);
                break;
        case KIND_SESSIONS:
                r = sessions_json(client, NULL, ret);
                break;
        case KIND_SESSION:
                r = session_content(client, id, ret);
                break;
        case KIND_POLICY:
                *ret = json_tokener_parse(policy_text);
                r = *ret ? 0 : -ENOMEM;
                break;
        case KIND_SCHEMA_CREATE:
                r = schema_content(ret);
                break;
        default:
                return not_found(err, uri);
        }
        if (r == -ENOMEM)
                return rpc_fail(err, RPC_INTERNAL_ERROR, "Out of memory.");
        if (r < 0 && (kind == KIND_SESSIONS || kind == KIND_SESSION))
                return client_fail(client, err, r, uri);
        if (r < 0)
                return rpc_fail(err, RPC_INTERNAL_ERROR, "Reading %.300s failed: %s", uri, strerror(-r));
        return 0;
}

/* --- fingerprints: what a change is ---------------------------------------------------------- */

static uint64_t fnv1a(const char *s, uint64_t h) {
        for (; *s; s++) {
                h ^= (uint8_t) *s;
                h *= 0x100000001b3ULL;
        }
        return h;
}
#define FNV_BASIS 0xcbf29ce484222325ULL

/* A session without what moves by itself while it is used: its last activity and the expiry
 * that follows it (running commands push it back all the time). */
static void session_strip(json_object *s) {
        json_object_object_del(s, "last_activity_usec");
        json_object_object_del(s, "expires_at_usec");
}

static uint64_t fingerprint(Kind kind, json_object *content) {
        json_object *arr;

        if (kind == KIND_SESSION)
                session_strip(content);
        else if (kind == KIND_SESSIONS && json_object_object_get_ex(content, "sessions", &arr))
                for (size_t i = 0; i < json_object_array_length(arr); i++)
                        session_strip(json_object_array_get_idx(arr, i));
        return fnv1a(json_object_to_json_string_ext(content, JSON_C_TO_STRING_PLAIN) ?: "", FNV_BASIS);
}

/* The fingerprint of uri now: 1, or 0 when it cannot be told (sandboxd did not answer); a
 * resource that went away has one too. */
static int uri_fingerprint(sandboxd_client *client, const McpConfig *config, const char *uri, uint64_t *ret) {
        _cleanup_(json_object_putp) json_object *content = NULL;
        McpRpcError err = {};
        const char *id;
        Kind kind;

        if (uri_parse(uri, &kind, &id) < 0)
                return 0;
        if (content_of(client, config, uri, &content, &err) < 0) {
                if (err.code != RPC_RESOURCE_NOT_FOUND)
                        return 0;
                *ret = fnv1a("gone", FNV_BASIS);
                return 1;
        }
        *ret = fingerprint(kind, content);
        return 1;
}

/* The set of sessions (their ids, in any order): 1, or 0 when sandboxd did not answer */
static int sessions_set_fingerprint(sandboxd_client *client, uint64_t *ret) {
        sandboxd_session **list = NULL;
        uint64_t h = 0;
        size_t n = 0;

        if (sandboxd_session_list(client, NULL, &list, &n) < 0)
                return 0;
        for (size_t i = 0; i < n; i++)
                h += fnv1a(list[i]->id ?: "", FNV_BASIS);
        sandboxd_session_list_free(list);
        *ret = h ^ (uint64_t) n;
        return 1;
}

/* --- subscriptions and their watcher ---------------------------------------------------------- */

typedef struct Subscription {
        char *uri;
        uint64_t fingerprint;
        bool known;
        uint64_t generation; /* bumped when the fingerprint is set from outside the watcher */
} Subscription;

static pthread_mutex_t sub_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sub_cond = PTHREAD_COND_INITIALIZER;
static Subscription subs[SUBSCRIPTIONS_MAX];
static size_t n_subs;
static uint64_t next_generation = 1;
static uint64_t set_fingerprint;
static bool set_known;
static const McpConfig *watch_config;
static bool watcher_started, watcher_stop;
static pthread_t watcher;
static int watcher_stop_fd = -EBADF; /* an eventfd: written at the end, it aborts a call in flight */

static Subscription *sub_find(const char *uri) {
        for (size_t i = 0; i < n_subs; i++)
                if (streq(subs[i].uri, uri))
                        return &subs[i];
        return NULL;
}

static int on_stop(sandboxd_client *c, int fd, void *userdata) {
        (void) c;
        (void) fd;
        (void) userdata;
        return -ECANCELED; /* the eventfd stays readable: every later call ends at once too */
}

typedef struct Polled {
        char *uri;
        uint64_t generation;
        uint64_t fingerprint;
        bool known;
} Polled;

/* One look at the subscribed resources, without the lock; then the lock is taken again. */
static void watch_once(sandboxd_client *client) {
        Polled polled[SUBSCRIPTIONS_MAX] = {};
        char *updated[SUBSCRIPTIONS_MAX] = {};
        size_t n = 0, n_updated = 0;
        bool set_ok, list_changed = false;
        uint64_t set_fp = 0;

        for (size_t i = 0; i < n_subs; i++) {
                polled[n].uri = strdup(subs[i].uri);
                polled[n].generation = subs[i].generation;
                if (polled[n].uri)
                        n++;
        }
        pthread_mutex_unlock(&sub_lock);

        set_ok = sessions_set_fingerprint(client, &set_fp) > 0;
        for (size_t i = 0; i < n; i++)
                polled[i].known = uri_fingerprint(client, watch_config, polled[i].uri, &polled[i].fingerprint) > 0;

        pthread_mutex_lock(&sub_lock);
        for (size_t i = 0; i < n; i++) {
                Subscription *s = sub_find(polled[i].uri);

                /* unsubscribed meanwhile, or subscribed again with a newer baseline */
                if (!s || s->generation != polled[i].generation || !polled[i].known)
                        continue;
                if (s->known && s->fingerprint != polled[i].fingerprint)
                        updated[n_updated++] = TAKE_PTR(polled[i].uri);
                s->fingerprint = polled[i].fingerprint;
                s->known = true;
        }
        if (set_ok) {
                list_changed = set_known && set_fingerprint != set_fp;
                set_fingerprint = set_fp;
                set_known = true;
        }
        pthread_mutex_unlock(&sub_lock);

        for (size_t i = 0; i < n_updated; i++) {
                json_object *p = json_object_new_object();
                bool oom = false;

                json_put(p, "uri", json_object_new_string(updated[i]), &oom);
                if (oom)
                        json_object_put(p);
                else
                        mcp_notify("notifications/resources/updated", p);
                free(updated[i]);
        }
        if (list_changed)
                mcp_notify("notifications/resources/list_changed", NULL);
        for (size_t i = 0; i < n; i++)
                free(polled[i].uri);
        pthread_mutex_lock(&sub_lock);
}

static void *watch_thread(void *userdata) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *client = NULL;
        int r;

        (void) userdata;
        r = connect_client(&client);
        if (r < 0) {
                log_warning_errno(r, "The watcher of resource subscriptions cannot reach sandboxd, no updates will be sent: %m");
                return NULL;
        }
        (void) sandboxd_client_set_timeout(client, WATCH_CALL_TIMEOUT_USEC);
        (void) sandboxd_client_set_wakeup(client, watcher_stop_fd, on_stop, NULL);

        pthread_mutex_lock(&sub_lock);
        while (!watcher_stop) {
                struct timespec deadline;
                int k = 0;

                (void) clock_gettime(CLOCK_REALTIME, &deadline);
                deadline.tv_sec += WATCH_INTERVAL_SEC;
                while (!watcher_stop && k != ETIMEDOUT)
                        k = pthread_cond_timedwait(&sub_cond, &sub_lock, &deadline);
                if (watcher_stop)
                        break;
                if (n_subs > 0)
                        watch_once(client);
        }
        pthread_mutex_unlock(&sub_lock);
        return NULL;
}

/* --- the methods ---------------------------------------------------------------------------- */

static int param_uri(json_object *params, const char **ret, McpRpcError *err) {
        json_object *v;

        if (!params || !json_object_object_get_ex(params, "uri", &v) || !json_object_is_type(v, json_type_string))
                return rpc_fail(err, RPC_INVALID_PARAMS, "params.uri (a string) is required.");
        if (json_object_get_string_len(v) > URI_MAX ||
            strlen(json_object_get_string(v)) != (size_t) json_object_get_string_len(v))
                return rpc_fail(err, RPC_INVALID_PARAMS, "params.uri must be at most %d characters, without NUL.",
                                URI_MAX);
        *ret = json_object_get_string(v);
        return 0;
}

static json_object *resource_entry(const char *uri, const char *name, const char *title, const char *description,
                                   bool *oom) {
        json_object *o = json_object_new_object();

        json_put(o, "uri", json_object_new_string(uri), oom);
        json_put(o, "name", json_object_new_string(name), oom);
        json_put(o, "title", json_object_new_string(title), oom);
        json_put(o, "description", json_object_new_string(description), oom);
        json_put(o, "mimeType", json_object_new_string(MIME), oom);
        return o;
}

static int method_list(McpCall *c, json_object *params, json_object **ret, McpRpcError *err) {
        _cleanup_(json_object_putp) json_object *res = json_object_new_object();
        json_object *arr = json_object_new_array();
        sandboxd_session **list = NULL;
        bool oom = false;
        size_t n = 0;
        int r;

        (void) params; /* no pages: a cursor is ignored, and none is returned */
        json_push(arr, resource_entry(URI_RUNTIME, "runtime", "sandboxd runtime",
                                      "sandboxd's version and status, and this MCP server's configuration", &oom),
                  &oom);
        json_push(arr, resource_entry(URI_SESSIONS, "sessions", "Sessions", "The sessions this server may see", &oom),
                  &oom);
        json_push(arr, resource_entry(URI_POLICY, "policy", "Policy",
                                      "What sandboxd's API tells of its network and limits policy, and what it does not",
                                      &oom),
                  &oom);
        json_push(arr, resource_entry(URI_SCHEMA_CREATE, "session-create-schema", "Session create schema",
                                      "The JSON Schema of sandbox_create_session's arguments", &oom),
                  &oom);
        r = sandboxd_session_list(c->client, NULL, &list, &n);
        if (r < 0) {
                json_object_put(arr);
                return client_fail(c->client, err, r, URI_SESSIONS);
        }
        for (size_t i = 0; i < n && i < LISTED_SESSIONS_MAX; i++) {
                const sandboxd_session *s = list[i];
                _cleanup_free_ char *uri = NULL, *name = NULL, *title = NULL, *desc = NULL;

                if (!s->id || !session_id_looks_valid(s->id))
                        continue;
                if (asprintf(&uri, URI_SESSIONS "/%s", s->id) < 0 || asprintf(&name, "session-%s", s->id) < 0 ||
                    asprintf(&title, "Session %s (%s/%s)", s->id, s->user ?: "?", s->workspace ?: "?") < 0 ||
                    asprintf(&desc, "Session %s of user %s, workspace %s: %s%s", s->id, s->user ?: "?",
                             s->workspace ?: "?", s->state ?: "?", s->frozen ? ", frozen" : "") < 0) {
                        oom = true;
                        break;
                }
                json_push(arr, resource_entry(uri, name, title, desc, &oom), &oom);
        }
        sandboxd_session_list_free(list);
        json_put(res, "resources", arr, &oom);
        if (oom)
                return rpc_fail(err, RPC_INTERNAL_ERROR, "Out of memory.");
        *ret = TAKE_PTR(res);
        return 0;
}

static int method_templates(McpCall *c, json_object *params, json_object **ret, McpRpcError *err) {
        _cleanup_(json_object_putp) json_object *res = json_object_new_object();
        json_object *arr = json_object_new_array(), *t = json_object_new_object();
        bool oom = false;

        (void) c;
        (void) params;
        json_put(t, "uriTemplate", json_object_new_string(URI_SESSIONS "/{session_id}"), &oom);
        json_put(t, "name", json_object_new_string("session"), &oom);
        json_put(t, "title", json_object_new_string("A session"), &oom);
        json_put(t, "description",
                 json_object_new_string("One session as sandboxd reports it (state, frozen, limits, network, exec_mode, "
                                        "ttl_s, expires_at_usec, commands, disk_bytes); session_id is NODE_HEX (its node's name, '_', 16 hex digits) or 16 hex digits alone"),
                 &oom);
        json_put(t, "mimeType", json_object_new_string(MIME), &oom);
        json_push(arr, t, &oom);
        json_put(res, "resourceTemplates", arr, &oom);
        if (oom)
                return rpc_fail(err, RPC_INTERNAL_ERROR, "Out of memory.");
        *ret = TAKE_PTR(res);
        return 0;
}

static int method_read(McpCall *c, json_object *params, json_object **ret, McpRpcError *err) {
        _cleanup_(json_object_putp) json_object *content = NULL, *res = json_object_new_object();
        json_object *contents = json_object_new_array(), *item = json_object_new_object();
        const char *uri, *text;
        bool oom = false;
        int r;

        r = param_uri(params, &uri, err);
        if (r >= 0)
                r = content_of(c->client, c->config, uri, &content, err);
        if (r < 0) {
                json_object_put(contents);
                json_object_put(item);
                return r;
        }
        text = json_object_to_json_string_ext(content, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        json_put(item, "uri", json_object_new_string(uri), &oom);
        json_put(item, "mimeType", json_object_new_string(MIME), &oom);
        json_put(item, "text", text ? json_object_new_string(text) : NULL, &oom);
        json_push(contents, item, &oom);
        json_put(res, "contents", contents, &oom);
        if (oom)
                return rpc_fail(err, RPC_INTERNAL_ERROR, "Out of memory.");
        *ret = TAKE_PTR(res);
        return 0;
}

static int watcher_start(const McpConfig *config) {
        int r;

        /* under sub_lock */
        if (watcher_started)
                return 0;
        watch_config = config;
        watcher_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (watcher_stop_fd < 0)
                return -errno;
        r = -pthread_create(&watcher, NULL, watch_thread, NULL);
        if (r < 0) {
                watcher_stop_fd = safe_close(watcher_stop_fd);
                return r;
        }
        watcher_started = true;
        return 0;
}

static int method_subscribe(McpCall *c, json_object *params, json_object **ret, McpRpcError *err) {
        _cleanup_(json_object_putp) json_object *content = NULL;
        _cleanup_free_ char *copy = NULL;
        uint64_t fp, set_fp = 0;
        const char *uri, *id;
        Subscription *s;
        bool set_ok;
        Kind kind;
        int r;

        r = param_uri(params, &uri, err);
        if (r < 0)
                return r;
        if (uri_parse(uri, &kind, &id) < 0)
                return not_found(err, uri);
        /* only what exists (a later disappearance is an update), and the baseline, taken now:
         * a change right after this answer is an update */
        r = content_of(c->client, c->config, uri, &content, err);
        if (r < 0)
                return r;
        fp = fingerprint(kind, content);
        set_ok = sessions_set_fingerprint(c->client, &set_fp) > 0;
        copy = strdup(uri);
        if (!copy)
                return rpc_fail(err, RPC_INTERNAL_ERROR, "Out of memory.");

        pthread_mutex_lock(&sub_lock);
        s = sub_find(uri);
        if (!s && n_subs >= SUBSCRIPTIONS_MAX) {
                pthread_mutex_unlock(&sub_lock);
                return rpc_fail(err, RPC_INVALID_PARAMS,
                                "At most %d subscriptions at once: unsubscribe from some first.", SUBSCRIPTIONS_MAX);
        }
        r = watcher_start(c->config);
        if (r < 0) {
                pthread_mutex_unlock(&sub_lock);
                return rpc_fail(err, RPC_INTERNAL_ERROR, "Starting the watcher of subscriptions failed: %s",
                                strerror(-r));
        }
        if (!s) {
                s = &subs[n_subs++];
                *s = (Subscription) { .uri = TAKE_PTR(copy) };
        }
        s->fingerprint = fp;
        s->known = true;
        s->generation = next_generation++;
        /* the first subscription (again) takes the baseline of the set of sessions */
        if (set_ok && (!set_known || n_subs == 1)) {
                set_fingerprint = set_fp;
                set_known = true;
        }
        pthread_mutex_unlock(&sub_lock);

        *ret = json_object_new_object();
        return *ret ? 0 : rpc_fail(err, RPC_INTERNAL_ERROR, "Out of memory.");
}

static int method_unsubscribe(McpCall *c, json_object *params, json_object **ret, McpRpcError *err) {
        const char *uri;
        Subscription *s;
        int r;

        (void) c;
        r = param_uri(params, &uri, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&sub_lock);
        s = sub_find(uri);
        if (s) {
                free(s->uri);
                *s = subs[--n_subs];
                subs[n_subs] = (Subscription) {};
        }
        if (n_subs == 0)
                set_known = false; /* the next subscription takes a new baseline */
        pthread_mutex_unlock(&sub_lock);
        *ret = json_object_new_object();
        return *ret ? 0 : rpc_fail(err, RPC_INTERNAL_ERROR, "Out of memory.");
}

const McpMethod mcp_resource_methods[] = {
        { "resources/list", method_list },
        { "resources/templates/list", method_templates },
        { "resources/read", method_read },
        { "resources/subscribe", method_subscribe },
        { "resources/unsubscribe", method_unsubscribe },
        {},
};

void mcp_resources_done(void) {
        bool started;

        pthread_mutex_lock(&sub_lock);
        watcher_stop = true;
        started = watcher_started;
        pthread_cond_broadcast(&sub_cond);
        pthread_mutex_unlock(&sub_lock);
        if (started) {
                (void) eventfd_write(watcher_stop_fd, 1); /* a call in flight ends now */
                pthread_join(watcher, NULL);
                watcher_stop_fd = safe_close(watcher_stop_fd);
        }
        for (size_t i = 0; i < n_subs; i++)
                free(subs[i].uri);
        n_subs = 0;
}
