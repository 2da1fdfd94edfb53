/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The D-Bus transport: io.sandboxd.sandbox1 on the system bus (sandboxd-dbus(5)), authorized
 * by polkit. It fills the same structs as the HTTP transport ("json" built from the objects'
 * properties, one table row each (session_props, command_props), and methods with the HTTP
 * API's field names) and the same sandboxd_error, through
 * the error table (error-table.c). Every verb goes over D-Bus: a bus client needs no access to
 * the HTTP socket. Event streams are the NDJSON of a command's Attach() pipe. One job
 * although over 800 lines: each public verb has its bus_*() here, as transport.c has its
 * HTTP request; splitting the file verbs into a module of their own is a later step. */

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <signal.h>
#include <limits.h>
#include <stdarg.h>
#include <time.h>

#include "encoding.h"
#include "error-table.h"
#include "internal.h"
#include "io-util.h"
#include "time-util.h"

#define BUS_NAME "io.sandboxd.sandbox1"
#define MANAGER_PATH "/io/sandboxd/sandbox1"
#define MANAGER_IFACE "io.sandboxd.sandbox1.Manager"
#define SESSION_IFACE "io.sandboxd.sandbox1.Session"
#define COMMAND_IFACE "io.sandboxd.sandbox1.Command"
#define FILES_IFACE "io.sandboxd.sandbox1.Files"
/* Calls that wait for systemd (creating or closing a session) may take a while. */
#define CALL_TIMEOUT_USEC (120ULL * 1000000ULL)

int bus_open(sandboxd_client *c) {
        int r;

        /* the errno of each of sandboxd's error names (sd_bus_error_get_errno(), and what
         * sd_bus_call() returns) */
        (void) sd_bus_error_add_map(api_error_bus_map());
        r = sd_bus_open_system(&c->bus);
        if (r < 0) {
                c->bus = NULL;
                return r;
        }
        return 0;
}

void bus_close(sandboxd_client *c) {
        c->bus = sd_bus_flush_close_unref(c->bus);
        free(c->cur_session);
        free(c->cur_request_id);
        free(c->cur_path);
}

static int bus_set_error(sandboxd_client *c, sandboxd_error_kind kind, int err, const char *code, const char *fmt, ...)
        _printf_(5, 6);
static int bus_set_error(sandboxd_client *c, sandboxd_error_kind kind, int err, const char *code, const char *fmt,
                         ...) {
        va_list ap;
        /* the status the HTTP API answers for the same code: callers that pass it on then
         * look the same whatever the transport */
        const ApiError *a = code && *code ? api_error_from_code(code) : NULL;

        c->error = (sandboxd_error) { .kind = kind, .error = err, .http_status = a ? a->http_status : 0 };
        snprintf(c->error.code, sizeof(c->error.code), "%s", code ?: "");
        va_start(ap, fmt);
        (void) vsnprintf(c->error.message, sizeof(c->error.message), fmt, ap);
        va_end(ap);
        return err;
}

/* A caller's handlers for Ctrl-C, SIGTERM and SIGHUP (sandboxctl's write to the pipe it
 * gives sandboxd_client_set_wakeup()) must not break a call: sd-bus's own wait for a reply
 * (ppoll) would fail with EINTR if one came in, so a call holds them back in this thread;
 * they arrive as soon as it returns. */
static void block_interrupts(sigset_t *ret_old) {
        sigset_t s;

        sigemptyset(&s);
        sigaddset(&s, SIGINT);
        sigaddset(&s, SIGTERM);
        sigaddset(&s, SIGHUP);
        (void) sigprocmask(SIG_BLOCK, &s, ret_old);
}

static int call(sandboxd_client *c, sd_bus_message *m, uint64_t usec, sd_bus_error *e, sd_bus_message **reply) {
        sigset_t old;
        int r;

        block_interrupts(&old);
        r = sd_bus_call(c->bus, m, usec, e, reply);
        (void) sigprocmask(SIG_SETMASK, &old, NULL);
        return r;
}

static int call_method(sandboxd_client *c, const char *path, const char *iface, const char *member, sd_bus_error *e,
                       sd_bus_message **reply, const char *types, ...) {
        sigset_t old;
        va_list ap;
        int r;

        block_interrupts(&old);
        va_start(ap, types);
        r = sd_bus_call_methodv(c->bus, BUS_NAME, path, iface, member, e, reply, types, ap);
        va_end(ap);
        (void) sigprocmask(SIG_SETMASK, &old, NULL);
        return r;
}

static int get_command_string(sandboxd_client *c, const char *path, const char *member, sd_bus_error *e, char **ret) {
        sigset_t old;
        int r;

        block_interrupts(&old);
        r = sd_bus_get_property_string(c->bus, BUS_NAME, path, COMMAND_IFACE, member, e, ret);
        (void) sigprocmask(SIG_SETMASK, &old, NULL);
        return r;
}

/* WrongNode's message (WRONG_NODE_BUS_MESSAGE) begins with the session id: the node is its
 * node part, as over HTTP's "node" (left empty if the message is not of that form). */
static void bus_error_node(const char *msg, char node[static NODE_NAME_MAX + 1]) {
        const char *p = startswith(msg, WRONG_NODE_BUS_MESSAGE_START);
        char id[SESSION_ID_SIZE];
        size_t n, k;

        n = p ? session_id_prefix(p, id) : 0;
        if (n == 0 || p[n] != '\'')
                return;
        k = session_id_node_len(id);
        if (k > 0)
                snprintf(node, NODE_NAME_MAX + 1, "%.*s", (int) k, id);
}

/* Maps a D-Bus error to the code, kind and errno the HTTP API's answer would give, through
 * the error table (error-table.c), so the verbs react alike on both transports. */
static int bus_error(sandboxd_client *c, int r, const sd_bus_error *e) {
        /* the bus could not reach sandboxd at all */
        static const struct {
                const char *name;
                int err;
        } transport[] = {
                { SD_BUS_ERROR_SERVICE_UNKNOWN, -ECONNREFUSED }, { SD_BUS_ERROR_NAME_HAS_NO_OWNER, -ECONNREFUSED },
                { SD_BUS_ERROR_NO_REPLY, -ETIMEDOUT },           { SD_BUS_ERROR_TIMEOUT, -ETIMEDOUT },
                { SD_BUS_ERROR_DISCONNECTED, -ECONNRESET },
        };
        const ApiError *a;
        const char *msg;

        if (!e || !sd_bus_error_is_set(e)) {
                if (r == -ENOTCONN || r == -ECONNRESET || r == -ETIMEDOUT)
                        return bus_set_error(c, SANDBOXD_ERROR_TRANSPORT, r, "", "%s", strerror(-r));
                return bus_set_error(c, SANDBOXD_ERROR_PROTOCOL, r < 0 ? r : -EBADMSG, "",
                                 "unexpected answer on D-Bus: %s", strerror(r < 0 ? -r : EBADMSG));
        }
        msg = e->message && e->message[0] ? e->message : e->name;
        for (size_t i = 0; i < ELEMENTSOF(transport); i++)
                if (sd_bus_error_has_name(e, transport[i].name))
                        return bus_set_error(c, SANDBOXD_ERROR_TRANSPORT, transport[i].err, "",
                                         "%s is not available on the system bus (%s: %s)", BUS_NAME, e->name, msg);

        /* an object path that names nothing is what HTTP calls a URL that does */
        a = api_error_from_bus_name(e->name) ?: sd_bus_error_has_name(e, SD_BUS_ERROR_UNKNOWN_OBJECT)
                                                         ? api_error_from_code("not_found")
                                                         : NULL;
        if (!a)
                return bus_set_error(c, SANDBOXD_ERROR_SERVER, -EPROTO, "", "%s (%s)", msg, e->name);
        if (sd_bus_error_has_names(e, BUS_ERROR_PREFIX "NoSuchSession", BUS_ERROR_PREFIX "NoSuchCommand"))
                /* the words of the HTTP API, then sandboxd's own */
                return bus_set_error(c, a->kind, api_error_kind_errno(a->kind), a->code, "No such %s (%s)",
                                 strstr(e->name, "Session") ? "session" : "command", msg);
        r = bus_set_error(c, a->kind, api_error_kind_errno(a->kind), a->code, "%s", msg);
        if (a->kind == SANDBOXD_ERROR_WRONG_NODE)
                bus_error_node(msg, c->error.node);
        return r;
}

/* --- properties -------------------------------------------------------------------------- */

static char *dup_or_null(const char *s) {
        return s && *s ? strdup(s) : NULL;
}

/* --- objects' properties as the HTTP API's JSON --------------------------------------- */

/* The value of one property of a GetAll() reply. */
typedef struct PropValue {
        bool set;
        const char *s; /* 's': points into the reply */
        uint64_t t;    /* 't', 'u' */
        int32_t i;     /* 'i' */
        int b;         /* 'b' */
        uint64_t ttt[3];
        json_object *j; /* read by the Prop's read() */
} PropValue;

typedef struct Prop Prop;

/* One property of an object, what it is in the HTTP API's JSON and in libsandboxd's struct.
 * Adding a property is adding a row to its object's table. */
struct Prop {
        const char *name;  /* the D-Bus property; NULL: a JSON field made of others by to_json() */
        const char *type;  /* its D-Bus type: s t u b i (ttt), others through read() */
        const char *key;   /* its JSON key ("a/b": b in the object a), in the table's order; NULL: none */
        size_t offset;     /* its field in the struct (types s t u b), or NO_FIELD */
        unsigned flags;
        int (*read)(sd_bus_message *m, PropValue *v);
        /* The JSON value from the values of the table: 1 add it (NULL: out of memory),
         * PROP_JSON_NULL a null, 0 leave the key out. */
        int (*to_json)(const Prop *table, size_t n, const PropValue *values, json_object **ret);
};

#define NO_FIELD SIZE_MAX
#define PROP_JSON_NULL 2
#define PROP_OMIT_EMPTY 1U /* a string "" leaves the key out */
#define PROP_TERMINAL 2U   /* only in the JSON of a finished command */
#define PROP_NULL_EMPTY 4U /* a string "" is a JSON null */

static const PropValue *prop_value(const Prop *table, size_t n, const PropValue *values, const char *name) {
        static const PropValue none = {};

        for (size_t k = 0; k < n; k++)
                if (table[k].name && streq(table[k].name, name))
                        return &values[k];
        return &none;
}

static int read_prop(sd_bus_message *m, const Prop *p, PropValue *v) {
        uint32_t u;
        int r;

        if (p->read)
                r = p->read(m, v);
        else if (streq(p->type, "u")) {
                r = sd_bus_message_read_basic(m, 'u', &u);
                v->t = u;
        } else if (streq(p->type, "(ttt)"))
                r = sd_bus_message_read(m, "(ttt)", &v->ttt[0], &v->ttt[1], &v->ttt[2]);
        else
                r = sd_bus_message_read_basic(m, p->type[0], p->type[0] == 's' ? (void *) &v->s :
                                                             p->type[0] == 't' ? (void *) &v->t :
                                                             p->type[0] == 'i' ? (void *) &v->i : (void *) &v->b);
        v->set = r >= 0;
        return r;
}

/* GetAll() of iface at path into values[] (properties not in the table are skipped); the
 * reply, which the strings point into, in *ret_reply. */
static int read_props(sandboxd_client *c, const char *path, const char *iface, const Prop *table, size_t n,
                      PropValue *values, sd_bus_message **ret_reply) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        int r;

        r = call_method(c, path, "org.freedesktop.DBus.Properties", "GetAll", &e, &reply, "s", iface);
        if (r < 0)
                return bus_error(c, r, &e);
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *name, *contents;
                size_t k = n;

                r = sd_bus_message_read(reply, "s", &name);
                if (r >= 0)
                        r = sd_bus_message_peek_type(reply, NULL, &contents);
                for (size_t i = 0; r >= 0 && i < n && k == n; i++)
                        if (table[i].name && streq(table[i].name, name) && streq(table[i].type, contents))
                                k = i;
                if (r >= 0 && k == n)
                        r = sd_bus_message_skip(reply, "v");
                else if (r >= 0) {
                        r = sd_bus_message_enter_container(reply, 'v', contents);
                        if (r >= 0)
                                r = read_prop(reply, &table[k], &values[k]);
                        if (r >= 0)
                                r = sd_bus_message_exit_container(reply);
                }
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r < 0) {
                sd_bus_message_unref(reply);
                return bus_error(c, r, NULL);
        }
        *ret_reply = reply;
        return 0;
}

/* Frees what read_props() gave; returns r (and says "out of memory" for -ENOMEM). */
static int props_done(sandboxd_client *c, size_t n, PropValue *values, sd_bus_message *reply, int r) {
        for (size_t k = 0; k < n; k++)
                json_object_put(values[k].j);
        sd_bus_message_unref(reply);
        if (r == -ENOMEM)
                bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "out of memory");
        return r;
}

/* The fields of the struct at base that the table names. */
static int props_to_struct(const Prop *table, size_t n, const PropValue *values, void *base) {
        for (size_t k = 0; k < n; k++) {
                const PropValue *v = &values[k];
                char *f = (char *) base + table[k].offset;

                if (table[k].offset == NO_FIELD || !v->set)
                        continue;
                switch (table[k].type[0]) {
                case 's':
                        *(char **) f = dup_or_null(v->s);
                        if (!*(char **) f && *v->s)
                                return -ENOMEM;
                        break;
                case 't':
                        *(uint64_t *) f = v->t;
                        break;
                case 'u':
                        *(unsigned *) f = (unsigned) v->t;
                        break;
                case 'b':
                        *(bool *) f = v->b;
                        break;
                }
        }
        return 0;
}

/* The JSON text of the table's fields, in its order. */
static int props_to_json(const Prop *table, size_t n, const PropValue *values, bool terminal, char **ret) {
        json_object *o = json_object_new_object();
        bool oom = false;
        int r = 0;

        if (!o)
                return -ENOMEM;
        for (size_t k = 0; k < n && !oom; k++) {
                const Prop *p = &table[k];
                const PropValue *v = &values[k];
                json_object *parent = o, *j = NULL;
                const char *key = p->key, *slash;
                bool null = false;

                if (!key || (FLAGS_SET(p->flags, PROP_TERMINAL) && !terminal))
                        continue;
                if (p->to_json) {
                        r = p->to_json(table, n, values, &j);
                        if (r < 0)
                                break;
                        if (r == 0)
                                continue;
                        null = r == PROP_JSON_NULL;
                } else if (p->type[0] == 's') {
                        if (FLAGS_SET(p->flags, PROP_OMIT_EMPTY) && (!v->s || !*v->s))
                                continue;
                        if (FLAGS_SET(p->flags, PROP_NULL_EMPTY) && (!v->s || !*v->s))
                                null = true;
                        else
                                j = json_object_new_string(v->s ?: "");
                } else if (p->type[0] == 'b')
                        j = json_object_new_boolean(v->b);
                else if (p->type[0] == 'i')
                        j = json_object_new_int(v->i);
                else
                        j = json_object_new_uint64(v->t);
                slash = strchr(key, '/');
                if (slash) {
                        _cleanup_free_ char *name = strndup(key, slash - key);

                        if (!name) {
                                json_object_put(j);
                                r = -ENOMEM;
                                break;
                        }
                        if (!json_object_object_get_ex(o, name, &parent)) {
                                parent = json_object_new_object();
                                json_put(o, name, parent, &oom);
                                if (oom) {
                                        json_object_put(j);
                                        break;
                                }
                        }
                        key = slash + 1;
                }
                if (null)
                        json_put_null(parent, key, &oom);
                else
                        json_put(parent, key, j, &oom); /* a NULL j: out of memory */
        }
        if (r >= 0 && oom)
                r = -ENOMEM;
        if (r >= 0 && !(*ret = json_to_text(o)))
                r = -ENOMEM;
        json_object_put(o);
        return r < 0 ? r : 0;
}

/* An "as" of domains as a JSON array. */
static int read_domains(sd_bus_message *reply, PropValue *v) {
        json_object *a = json_object_new_array();
        const char *d;
        bool oom = false;
        int r;

        if (!a)
                return -ENOMEM;
        r = sd_bus_message_enter_container(reply, 'a', "s");
        while (r >= 0 && (r = sd_bus_message_read_basic(reply, 's', &d)) > 0)
                json_push(a, json_object_new_string(d), &oom);
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0 && oom)
                r = -ENOMEM;
        if (r < 0) {
                json_object_put(a);
                return r;
        }
        json_object_put(v->j);
        v->j = a;
        return 0;
}

/* NetworkAllow (bas): the list when the flag is set; none (no "allow" in the JSON) if not. */
static int read_allow(sd_bus_message *reply, PropValue *v) {
        int r;

        r = sd_bus_message_enter_container(reply, 'r', "bas");
        if (r >= 0)
                r = sd_bus_message_read_basic(reply, 'b', &v->b);
        if (r >= 0)
                r = read_domains(reply, v);
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0 && !v->b) {
                json_object_put(v->j);
                v->j = NULL;
        }
        return r;
}

/* "network" as the HTTP API has it: {"mode", and in mode proxy "deny" and maybe "allow"} */
static int network_json(const Prop *table, size_t n, const PropValue *values, json_object **ret) {
        const char *mode = prop_value(table, n, values, "Network")->s;
        const PropValue *deny = prop_value(table, n, values, "NetworkDeny");
        const PropValue *allow = prop_value(table, n, values, "NetworkAllow");
        json_object *net;
        bool oom = false;

        if (!mode || !*mode)
                return 0;
        net = json_object_new_object();
        json_put(net, "mode", json_object_new_string(mode), &oom);
        if (streq(mode, "proxy")) {
                json_put(net, "deny", deny->j ? json_object_get(deny->j) : json_object_new_array(), &oom);
                if (allow->j)
                        json_put(net, "allow", json_object_get(allow->j), &oom);
        }
        if (oom) {
                json_object_put(net);
                return -ENOMEM;
        }
        *ret = net;
        return 1;
}

static int ttl_json(const Prop *table, size_t n, const PropValue *values, json_object **ret) {
        *ret = json_object_new_uint64(prop_value(table, n, values, "IdleTimeoutUSec")->t / USEC_PER_SEC);
        return 1;
}

#define S(f) offsetof(sandboxd_session, f)
static const Prop session_props[] = {
        { "Id", "s", "id", S(id) },
        { "Node", "s", "node", S(node) },
        { "User", "s", "user", S(user) },
        { "Workspace", "s", "workspace", S(workspace) },
        { "State", "s", "state", S(state) },
        { "CloseReason", "s", "close_reason", NO_FIELD, PROP_NULL_EMPTY },
        { "Unit", "s", "unit", S(unit) },
        { "WorkspacePath", "s", "workspace_path", S(workspace_path) },
        { "DynamicUser", "s", "dynamic_user", NO_FIELD, PROP_OMIT_EMPTY },
        { "Network", "s", "network", NO_FIELD, 0, NULL, network_json },
        { "NetworkDeny", "as", NULL, NO_FIELD, 0, read_domains },
        { "NetworkAllow", "(bas)", NULL, NO_FIELD, 0, read_allow },
        { "ExecMode", "s", "exec_mode", S(exec_mode) },
        { "Image", "s", "image", NO_FIELD, PROP_NULL_EMPTY },
        { "MemoryMax", "t", "limits/memory_max", S(memory_max) },
        { "CPUQuota", "t", "limits/cpu_quota", S(cpu_quota) },
        { "TasksMax", "t", "limits/tasks_max", S(tasks_max) },
        { "Frozen", "b", "frozen", S(frozen) },
        { "IdleTimeoutUSec", "t", "ttl_s", NO_FIELD, 0, NULL, ttl_json },
        { "CreatedAt", "t", "created_at_usec", S(created_at_usec) },
        { "LastActivity", "t", "last_activity_usec", NO_FIELD },
        { "ExpiresAt", "t", "expires_at_usec", S(expires_at_usec) },
        { "Commands", "u", "commands", S(commands) },
        { "RunningCommands", "u", "running", S(running) },
        { "DiskBytes", "t", "disk_bytes", NO_FIELD },
};
#undef S

/* Reads the properties of a session object into a session, with "json" shaped like the HTTP
 * API's object (the fields libsandboxd reads). */
static int get_session_at(sandboxd_client *c, const char *path, sandboxd_session **ret) {
        PropValue v[ELEMENTSOF(session_props)] = {};
        sd_bus_message *reply = NULL;
        sandboxd_session *s = NULL;
        int r;

        r = read_props(c, path, SESSION_IFACE, session_props, ELEMENTSOF(v), v, &reply);
        if (r < 0)
                return r;
        s = calloc(1, sizeof(*s));
        r = s ? props_to_struct(session_props, ELEMENTSOF(v), v, s) : -ENOMEM;
        if (r >= 0 && !s->id)
                r = bus_set_error(c, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "", "the session object %s has no Id", path);
        if (r >= 0) {
                s->ttl_s = prop_value(session_props, ELEMENTSOF(v), v, "IdleTimeoutUSec")->t / USEC_PER_SEC;
                r = props_to_json(session_props, ELEMENTSOF(v), v, false, &s->json);
        }
        r = props_done(c, ELEMENTSOF(v), v, reply, r);
        if (r < 0) {
                sandboxd_session_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

static int signal_number(const char *name) {
        static const struct {
                const char *name;
                int sig;
        } t[] = { { "SIGHUP", SIGHUP },   { "SIGINT", SIGINT },   { "SIGQUIT", SIGQUIT }, { "SIGILL", SIGILL },
                  { "SIGABRT", SIGABRT }, { "SIGBUS", SIGBUS },   { "SIGFPE", SIGFPE },   { "SIGKILL", SIGKILL },
                  { "SIGUSR1", SIGUSR1 }, { "SIGSEGV", SIGSEGV }, { "SIGUSR2", SIGUSR2 }, { "SIGPIPE", SIGPIPE },
                  { "SIGALRM", SIGALRM }, { "SIGTERM", SIGTERM }, { "SIGXCPU", SIGXCPU }, { "SIGSYS", SIGSYS } };

        for (size_t i = 0; name && i < ELEMENTSOF(t); i++)
                if (streq(name, t[i].name))
                        return t[i].sig;
        return name && *name ? SIGKILL : 0; /* a signal we do not name: at least not 0 */
}

static int status_json(const Prop *table, size_t n, const PropValue *values, json_object **ret) {
        const char *status = prop_value(table, n, values, "Status")->s;

        *ret = json_object_new_string(status ?: "unknown");
        return 1;
}

static bool status_terminal(const char *status) {
        sandboxd_status st = sandboxd_status_from_string(status);

        return st >= SANDBOXD_STATUS_SUCCEEDED && st < _SANDBOXD_STATUS_MAX;
}

static int terminal_json(const Prop *table, size_t n, const PropValue *values, json_object **ret) {
        *ret = json_object_new_boolean(status_terminal(prop_value(table, n, values, "Status")->s));
        return 1;
}

static int exit_code_json(const Prop *table, size_t n, const PropValue *values, json_object **ret) {
        const PropValue *v = prop_value(table, n, values, "ExitCode");

        if (!v->set || v->i < 0 || v->i > 255)
                return PROP_JSON_NULL;
        *ret = json_object_new_int(v->i);
        return 1;
}

static int signal_json(const Prop *table, size_t n, const PropValue *values, json_object **ret) {
        const char *name = prop_value(table, n, values, "Signal")->s;

        if (!name || !*name)
                return PROP_JSON_NULL;
        *ret = json_object_new_string(name);
        return 1;
}

static int usage_json(const Prop *table, size_t n, const PropValue *values, json_object **ret) {
        const PropValue *v = prop_value(table, n, values, "Usage");
        json_object *u = json_object_new_object();
        bool oom = false;

        json_put(u, "cpu_usec", json_object_new_uint64(v->ttt[0]), &oom);
        json_put(u, "memory_bytes", json_object_new_uint64(v->ttt[1]), &oom);
        json_put(u, "tasks", json_object_new_uint64(v->ttt[2]), &oom);
        if (oom) {
                json_object_put(u);
                return -ENOMEM;
        }
        *ret = u;
        return 1;
}

#define R(f) offsetof(sandboxd_result, f)
static const Prop command_props[] = {
        { "RequestId", "s", "request_id", R(request_id) },
        { "SessionId", "s", "session", R(session) },
        { "Unit", "s", "unit", R(unit) },
        { "Status", "s", "status", NO_FIELD, 0, NULL, status_json },
        { NULL, NULL, "terminal", NO_FIELD, 0, NULL, terminal_json },
        { "ExitCode", "i", "exit_code", NO_FIELD, PROP_TERMINAL, NULL, exit_code_json },
        { "Signal", "s", "signal", R(signal_name), PROP_TERMINAL, NULL, signal_json },
        { "Reason", "s", "reason", R(reason), PROP_TERMINAL },
        { "DurationMSec", "t", "duration_ms", R(duration_ms), PROP_TERMINAL },
        { "Usage", "(ttt)", "usage", NO_FIELD, 0, NULL, usage_json },
        { "Truncated", "b", "truncated", NO_FIELD },
        { "StdoutBytes", "t", "stdout_bytes", R(stdout_bytes) },
        { "StderrBytes", "t", "stderr_bytes", R(stderr_bytes) },
};
#undef R

/* Reads the properties of a command object into a result (without output: D-Bus has none). */
static int get_result_at(sandboxd_client *c, const char *path, sandboxd_result **ret) {
        PropValue v[ELEMENTSOF(command_props)] = {};
        const PropValue *exit_code, *usage;
        const char *status;
        sd_bus_message *reply = NULL;
        sandboxd_result *res = NULL;
        int r;

        r = read_props(c, path, COMMAND_IFACE, command_props, ELEMENTSOF(v), v, &reply);
        if (r < 0)
                return r;
        res = calloc(1, sizeof(*res));
        r = res ? props_to_struct(command_props, ELEMENTSOF(v), v, res) : -ENOMEM;
        if (r >= 0) {
                status = prop_value(command_props, ELEMENTSOF(v), v, "Status")->s;
                exit_code = prop_value(command_props, ELEMENTSOF(v), v, "ExitCode");
                usage = prop_value(command_props, ELEMENTSOF(v), v, "Usage");
                res->status = sandboxd_status_from_string(status);
                res->terminal = status_terminal(status);
                res->exit_code = exit_code->set && exit_code->i >= 0 && exit_code->i <= 255 ? exit_code->i : -1;
                res->signal = signal_number(res->signal_name);
                res->cpu_usec = usage->ttt[0];
                res->memory_bytes = usage->ttt[1];
                res->tasks = usage->ttt[2];
                if (!res->terminal) {
                        free(res->reason);
                        res->reason = NULL;
                }
                r = props_to_json(command_props, ELEMENTSOF(v), v, res->terminal, &res->json);
        }
        r = props_done(c, ELEMENTSOF(v), v, reply, r);
        if (r < 0) {
                sandboxd_result_free(res);
                return r;
        }
        *ret = res;
        return 0;
}

static int session_path(sandboxd_client *c, const char *id, char **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *path;
        int r;

        r = call_method(c, MANAGER_PATH, MANAGER_IFACE, "GetSession", &e, &reply, "s", id);
        if (r < 0)
                return bus_error(c, r, &e);
        r = sd_bus_message_read(reply, "o", &path);
        if (r >= 0 && !(*ret = strdup(path)))
                r = -ENOMEM;
        sd_bus_message_unref(reply);
        return r < 0 ? bus_error(c, r, NULL) : 0;
}

/* --- sessions ---------------------------------------------------------------------------- */

int bus_session_get(sandboxd_client *c, const char *id, sandboxd_session **ret) {
                _cleanup_free_ char *path = NULL;
        int r;

        client_begin(c);
        r = session_path(c, id, &path);
        if (r < 0)
                return r;
        return get_session_at(c, path, ret);
}

/* Lists (id, user, workspace, state, path). */
typedef struct Listed {
        char *id, *user, *workspace, *state, *path;
} Listed;

static void listed_free(Listed *l, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(l[i].id);
                free(l[i].user);
                free(l[i].workspace);
                free(l[i].state);
                free(l[i].path);
        }
        free(l);
}

static int list_sessions(sandboxd_client *c, Listed **ret, size_t *ret_n) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        Listed *l = NULL;
        size_t n = 0;
        int r;

        r = call_method(c, MANAGER_PATH, MANAGER_IFACE, "ListSessions", &e, &reply, NULL);
        if (r < 0)
                return bus_error(c, r, &e);
        r = sd_bus_message_enter_container(reply, 'a', "(sssso)");
        while (r >= 0) {
                const char *id, *user, *ws, *state, *path;
                Listed *nl;

                r = sd_bus_message_read(reply, "(sssso)", &id, &user, &ws, &state, &path);
                if (r <= 0)
                        break;
                nl = realloc(l, (n + 1) * sizeof(*l));
                if (!nl) {
                        r = -ENOMEM;
                        break;
                }
                l = nl;
                l[n] = (Listed) { strdup(id), strdup(user), strdup(ws), strdup(state), strdup(path) };
                n++;
                if (!l[n - 1].id || !l[n - 1].user || !l[n - 1].workspace || !l[n - 1].state || !l[n - 1].path) {
                        r = -ENOMEM;
                        break;
                }
        }
        sd_bus_message_unref(reply);
        if (r < 0) {
                listed_free(l, n);
                return r == -ENOMEM ? bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "out of memory") : bus_error(c, r, NULL);
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

int bus_session_list(sandboxd_client *c, const char *user, sandboxd_session ***ret, size_t *ret_n) {
                sandboxd_session **list = NULL;
        Listed *l = NULL;
        size_t n = 0, k = 0;
        int r;

        client_begin(c);
        r = list_sessions(c, &l, &n);
        if (r < 0)
                return r;
        list = calloc(n + 1, sizeof(*list));
        if (!list) {
                listed_free(l, n);
                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, -ENOMEM, "", "out of memory");
        }
        for (size_t i = 0; i < n; i++) {
                /* like GET /v1/sessions: the sessions that are not closed */
                if (streq(l[i].state, "closed") || (user && !streq(l[i].user, user)))
                        continue;
                r = get_session_at(c, l[i].path, &list[k]);
                if (r == -ENOENT) /* forgotten meanwhile */
                        continue;
                if (r < 0) {
                        sandboxd_session_list_free(list);
                        listed_free(l, n);
                        return r;
                }
                k++;
        }
        listed_free(l, n);
        client_begin(c);
        *ret = list;
        if (ret_n)
                *ret_n = k;
        return 0;
}

static int json_to_variant(sd_bus_message *m, const char *key, json_object *v) {
        int r;

        r = sd_bus_message_open_container(m, 'e', "sv");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", key);
        if (r < 0)
                return r;
        if (json_object_is_type(v, json_type_string))
                r = sd_bus_message_append(m, "v", "s", json_object_get_string(v));
        else if (json_object_is_type(v, json_type_int) && json_object_get_int64(v) >= 0)
                r = sd_bus_message_append(m, "v", "t", (uint64_t) json_object_get_int64(v));
        else if (json_object_is_type(v, json_type_array)) {
                /* a list of strings: "as" */
                size_t n = json_object_array_length(v);

                r = sd_bus_message_open_container(m, 'v', "as");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'a', "s");
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        json_object *item = json_object_array_get_idx(v, i);

                        if (!json_object_is_type(item, json_type_string))
                                return -EINVAL;
                        r = sd_bus_message_append(m, "s", json_object_get_string(item));
                }
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        } else
                return -EINVAL;
        if (r < 0)
                return r;
        return sd_bus_message_close_container(m);
}

/* The options of POST /v1/sessions ({"limits":{...},"ttl_s":N,"network":{"mode","deny","allow"} or
 * "MODE","exec_mode":"session"}) as a{sv}. */
static int append_session_options(sd_bus_message *m, const char *options_json) {
        json_object *o = NULL;
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        if (options_json) {
                o = json_tokener_parse(options_json);
                if (!o || !json_object_is_type(o, json_type_object)) {
                        json_object_put(o);
                        return -EINVAL;
                }
                json_object_object_foreach(o, key, v) {
                        if (streq(key, "limits") && json_object_is_type(v, json_type_object)) {
                                json_object_object_foreach(v, lk, lv) {
                                        r = json_to_variant(m, lk, lv);
                                        if (r < 0)
                                                break;
                                }
                        } else if (streq(key, "network") && json_object_is_type(v, json_type_object)) {
                                /* {"mode", "deny", "allow"}: the options network, network_deny and
                                 * network_allow of CreateSession */
                                r = 0;
                                json_object_object_foreach(v, nk, nv) {
                                        char name[32];

                                        if (!streq(nk, "mode") && !streq(nk, "deny") && !streq(nk, "allow")) {
                                                r = -EINVAL;
                                                break;
                                        }
                                        snprintf(name, sizeof(name), streq(nk, "mode") ? "network" : "network_%s", nk);
                                        r = json_to_variant(m, name, nv);
                                        if (r < 0)
                                                break;
                                }
                        } else
                                r = json_to_variant(m, key, v);
                        if (r < 0)
                                break;
                }
                json_object_put(o);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(m);
}

int bus_session_create(sandboxd_client *c, const char *user, const char *workspace, const char *options,
                               sandboxd_session **ret, bool *ret_created) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                sd_bus_message *m = NULL, *reply = NULL;
        sandboxd_session *s = NULL;
        bool existed = false;
        const char *id, *path;
        int r;

        client_begin(c);
        if (ret_created) {
                /* CreateSession does not say whether it created: look first */
                Listed *l = NULL;
                size_t n = 0;

                r = list_sessions(c, &l, &n);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++)
                        if (streq(l[i].user, user) && streq(l[i].workspace, workspace) &&
                            (streq(l[i].state, "active") || streq(l[i].state, "starting")))
                                existed = true;
                listed_free(l, n);
        }
        r = sd_bus_message_new_method_call(c->bus, &m, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "CreateSession");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", user, workspace);
        if (r >= 0)
                r = append_session_options(m, options);
        if (r < 0) {
                sd_bus_message_unref(m);
                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "cannot build the call: %s", strerror(-r));
        }
        r = call(c, m, CALL_TIMEOUT_USEC, &e, &reply);
        sd_bus_message_unref(m);
        if (r < 0)
                return bus_error(c, r, &e);
        r = sd_bus_message_read(reply, "so", &id, &path);
        if (r < 0) {
                sd_bus_message_unref(reply);
                return bus_error(c, r, NULL);
        }
        r = get_session_at(c, path, &s);
        sd_bus_message_unref(reply);
        if (r < 0)
                return r;
        if (ret)
                *ret = s;
        else
                sandboxd_session_free(s);
        if (ret_created)
                *ret_created = !existed;
        return 0;
}

static int call_on_session(sandboxd_client *c, const char *id, const char *method, const char *sig, int arg,
                           sandboxd_session **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        sd_bus_message *reply = NULL;
        int r;

        client_begin(c);
        r = session_path(c, id, &path);
        if (r < 0)
                return r;
        if (sig)
                r = call_method(c, path, SESSION_IFACE, method, &e, &reply, sig, arg);
        else
                r = call_method(c, path, SESSION_IFACE, method, &e, &reply, NULL);
        sd_bus_message_unref(reply);
        if (r < 0)
                return bus_error(c, r, &e);
        if (!ret)
                return 0;
        return get_session_at(c, path, ret);
}

int bus_session_close(sandboxd_client *c, const char *id, bool purge, sandboxd_session **ret) {
        return call_on_session(c, id, "Close", "b", purge, ret);
}

int bus_session_freeze(sandboxd_client *c, const char *id, bool freeze, sandboxd_session **ret) {
        return call_on_session(c, id, freeze ? "Freeze" : "Thaw", NULL, 0, ret);
}

int bus_session_touch(sandboxd_client *c, const char *id) {
        return call_on_session(c, id, "Touch", NULL, 0, NULL);
}

/* --- exposed ports ----------------------------------------------------------------------- */

static int port_from_bus(sandboxd_client *c, const char *session, uint16_t port, const char *socket,
                         uint16_t host_port, sandboxd_port **ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        int r;

        r = port_json_new(session, port, socket, host_port, &o);
        if (r >= 0)
                r = port_from_json(o, ret);
        if (r == -EBADMSG)
                return bus_set_error(c, SANDBOXD_ERROR_PROTOCOL, r, "", "The answer is not an exposed port.");
        return r < 0 ? bus_error(c, r, NULL) : 0;
}

int bus_port_expose(sandboxd_client *c, const char *session, uint16_t port, bool host, sandboxd_port **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        sd_bus_message *reply = NULL;
        const char *socket;
        uint16_t p, h;
        int r;

        client_begin(c);
        r = session_path(c, session, &path);
        if (r < 0)
                return r;
        r = call_method(c, path, SESSION_IFACE, "ExposePort", &e, &reply, "qa{sv}", port, 1, "host", "b", (int) host);
        if (r < 0)
                return bus_error(c, r, &e);
        r = sd_bus_message_read(reply, "qsq", &p, &socket, &h);
        if (r > 0 && !ret)
                r = 0;
        else if (r > 0)
                r = port_from_bus(c, session, p, socket, h, ret);
        else
                r = bus_error(c, r < 0 ? r : -EBADMSG, NULL);
        sd_bus_message_unref(reply);
        return r;
}

static int port_compare(const void *a, const void *b) {
        const sandboxd_port *x = *(sandboxd_port *const *) a, *y = *(sandboxd_port *const *) b;

        return (int) x->port - (int) y->port;
}

int bus_port_list(sandboxd_client *c, const char *session, sandboxd_port ***ret, size_t *ret_n) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        sd_bus_message *reply = NULL;
        sandboxd_port **list = NULL;
        size_t n = 0;
        int r;

        client_begin(c);
        r = session_path(c, session, &path);
        if (r < 0)
                return r;
        r = call_method(c, path, SESSION_IFACE, "ListPorts", &e, &reply, NULL);
        if (r < 0)
                return bus_error(c, r, &e);
        list = calloc(1, sizeof(*list));
        r = list ? sd_bus_message_enter_container(reply, 'a', "(qsq)") : -ENOMEM;
        while (r >= 0) {
                const char *socket;
                uint16_t p, h;
                sandboxd_port **nl;

                r = sd_bus_message_read(reply, "(qsq)", &p, &socket, &h);
                if (r <= 0)
                        break;
                nl = reallocarray(list, n + 2, sizeof(*list));
                if (!nl) {
                        r = -ENOMEM;
                        break;
                }
                list = nl;
                list[n + 1] = NULL;
                r = port_from_bus(c, session, p, socket, h, &list[n]);
                if (r < 0)
                        break;
                n++;
        }
        sd_bus_message_unref(reply);
        if (r < 0) {
                sandboxd_port_list_free(list);
                return c->error.error ? r : bus_error(c, r, NULL);
        }
        /* in the order of HTTP's list */
        qsort(list, n, sizeof(*list), port_compare);
        *ret = list;
        if (ret_n)
                *ret_n = n;
        return 0;
}

int bus_port_get(sandboxd_client *c, const char *session, uint16_t port, sandboxd_port **ret) {
        sandboxd_port **list = NULL;
        size_t n = 0;
        int r;

        /* D-Bus has no method for one: the list has it, or it is not exposed */
        r = bus_port_list(c, session, &list, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (list[i]->port == port) {
                        *ret = TAKE_PTR(list[i]);
                        list[i] = list[n - 1];
                        list[n - 1] = NULL;
                        sandboxd_port_list_free(list);
                        return 0;
                }
        sandboxd_port_list_free(list);
        return bus_set_error(c, SANDBOXD_ERROR_NOT_FOUND, -ENOENT, "port_not_exposed",
                             "Port %u of session %s is not exposed.", port, session);
}

int bus_port_unexpose(sandboxd_client *c, const char *session, uint16_t port) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        sd_bus_message *reply = NULL;
        int r;

        client_begin(c);
        r = session_path(c, session, &path);
        if (r < 0)
                return r;
        r = call_method(c, path, SESSION_IFACE, "UnexposePort", &e, &reply, "q", port);
        sd_bus_message_unref(reply);
        return r < 0 ? bus_error(c, r, &e) : 0;
}

/* --- commands ---------------------------------------------------------------------------- */

/* The request body of POST .../commands (sandboxd_exec) as Exec's options a{sv}; out_fd,
 * err_fd: where the command writes (-1: sandboxd keeps the output). */
static int append_exec_options(sd_bus_message *m, json_object *body, int in_fd, int out_fd, int err_fd) {
        json_object *v;
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && json_object_object_get_ex(body, "cwd", &v))
                r = sd_bus_message_append(m, "{sv}", "cwd", "s", json_object_get_string(v));
        if (r >= 0 && json_object_object_get_ex(body, "env", &v)) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "env");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "as");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'a', "s");
                json_object_object_foreach(v, name, value) {
                        _cleanup_free_ char *kv = NULL;

                        if (r < 0)
                                break;
                        if (asprintf(&kv, "%s=%s", name, json_object_get_string(value)) < 0) {
                                kv = NULL;
                                r = -ENOMEM;
                                break;
                        }
                        r = sd_bus_message_append_basic(m, 's', kv);
                }
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0 && json_object_object_get_ex(body, "timeout_ms", &v))
                r = sd_bus_message_append(m, "{sv}", "timeout_ms", "t", (uint64_t) json_object_get_int64(v));
        if (r >= 0 && json_object_object_get_ex(body, "request_id", &v))
                r = sd_bus_message_append(m, "{sv}", "request_id", "s", json_object_get_string(v));
        if (r >= 0 && json_object_object_get_ex(body, "tty", &v)) {
                json_object *rows = NULL, *cols = NULL;

                (void) json_object_object_get_ex(v, "rows", &rows);
                (void) json_object_object_get_ex(v, "cols", &cols);
                r = sd_bus_message_append(m, "{sv}", "tty", "(qq)", (uint16_t) json_object_get_int(rows),
                                          (uint16_t) json_object_get_int(cols));
        }
        if (r >= 0 && in_fd >= 0)
                /* a pty slave of the caller's, with the option tty */
                r = sd_bus_message_append(m, "{sv}", "stdin", "h", in_fd);
        else if (r >= 0 && json_object_object_get_ex(body, "stdin", &v) && json_object_is_type(v, json_type_string))
                /* "stream": fed later by WriteStdin() */
                r = sd_bus_message_append(m, "{sv}", "stdin", "s", json_object_get_string(v));
        else if (r >= 0 && json_object_object_get_ex(body, "stdin", &v)) {
                const char *b64 = json_get_string(v, "base64");
                Buf data = {};

                r = b64 ? base64_decode(b64, strlen(b64), &data) : -EINVAL;
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "stdin_data");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "ay");
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'y', data.data ?: "", data.len);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                buf_done(&data);
        }
        if (r >= 0 && out_fd >= 0)
                r = sd_bus_message_append(m, "{sv}", "stdout", "h", out_fd);
        if (r >= 0 && err_fd >= 0)
                r = sd_bus_message_append(m, "{sv}", "stderr", "h", err_fd);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

/* argv of the request body as a strv (borrowed strings) */
static int append_argv(sd_bus_message *m, json_object *body) {
        json_object *argv;
        int r;

        if (!json_object_object_get_ex(body, "argv", &argv) || !json_object_is_type(argv, json_type_array))
                return -EINVAL;
        r = sd_bus_message_open_container(m, 'a', "s");
        for (size_t i = 0; r >= 0 && i < json_object_array_length(argv); i++)
                r = sd_bus_message_append_basic(m, 's', json_object_get_string(json_object_array_get_idx(argv, i)));
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

static int exec_call(sandboxd_client *c, const char *session, const sandboxd_exec *spec, int out_fd, int err_fd,
                     char **ret_rid, char **ret_path) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *m = NULL, *reply = NULL;
        const char *rid, *path;
        int r;

        r = sd_bus_message_new_method_call(c->bus, &m, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "Exec");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", session);
        if (r >= 0)
                r = append_argv(m, spec->body);
        if (r >= 0)
                r = append_exec_options(m, spec->body, spec->terminal_fd, out_fd, err_fd);
        if (r < 0) {
                sd_bus_message_unref(m);
                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "cannot build the call: %s", strerror(-r));
        }
        r = call(c, m, CALL_TIMEOUT_USEC, &e, &reply);
        sd_bus_message_unref(m);
        if (r < 0)
                return bus_error(c, r, &e);
        r = sd_bus_message_read(reply, "so", &rid, &path);
        if (r >= 0) {
                *ret_rid = strdup(rid);
                *ret_path = ret_path ? strdup(path) : NULL;
                if (!*ret_rid || !*ret_path) {
                        free(*ret_rid);
                        free(*ret_path);
                        r = -ENOMEM;
                }
        }
        sd_bus_message_unref(reply);
        if (r < 0)
                return r == -ENOMEM ? bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "out of memory") : bus_error(c, r, NULL);
        return 0;
}

int bus_exec_start(sandboxd_client *c, const char *session, const sandboxd_exec *spec, char **ret_request_id) {
        char *rid = NULL, *path = NULL;
        int r;

        r = exec_call(c, session, spec, spec->terminal_fd, spec->terminal_fd, &rid, &path);
        if (r < 0)
                return r;
        free(path);
        if (ret_request_id)
                *ret_request_id = rid;
        else
                free(rid);
        return 0;
}

typedef struct Waiter {
        const char *path;
        bool finished;
} Waiter;

static int on_command_finished(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Waiter *w = userdata;
        const char *session, *rid, *path;

        if (sd_bus_message_read(m, "sso", &session, &rid, &path) >= 0 && w->path && streq(path, w->path))
                w->finished = true;
        return 0;
}

static int command_status(sandboxd_client *c, const char *path, bool *ret_terminal) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *status = NULL;
        sandboxd_status s;
        int r;

        r = get_command_string(c, path, "Status", &e, &status);
        if (r < 0)
                return bus_error(c, r, &e);
        s = sandboxd_status_from_string(status);
        *ret_terminal = s >= SANDBOXD_STATUS_SUCCEEDED && s < _SANDBOXD_STATUS_MAX;
        return 0;
}

static int set_current(sandboxd_client *c, const char *session, const char *rid, const char *path) {
        free(c->cur_session);
        free(c->cur_request_id);
        free(c->cur_path);
        c->cur_session = strdup(session);
        c->cur_request_id = strdup(rid);
        c->cur_path = strdup(path);
        return c->cur_session && c->cur_request_id && c->cur_path ? 0 : -ENOMEM;
}

/* The command writes into our stdout and stderr, but never into a terminal: on one it
 * could change our terminal's settings, push input and read what is typed after we return
 * (sandboxd refuses a terminal anyway). A terminal gets a pipe, and we copy. */
typedef struct Relay {
        int target;  /* STDOUT_FILENO, STDERR_FILENO */
        int read_fd; /* our end of the pipe; -1: none (the command has target itself), or EOF */
        int pass_fd; /* what the command gets */
} Relay;

static int relay_open(Relay *rl, int target) {
        int p[2];

        *rl = (Relay) { .target = target, .read_fd = -1, .pass_fd = target };
        if (!isatty(target))
                return 0;
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        (void) fcntl(p[0], F_SETFL, O_NONBLOCK);
        rl->read_fd = p[0];
        rl->pass_fd = p[1];
        return 0;
}

/* Copies what is there; closes our end at EOF. */
static void relay_copy(Relay *rl) {
        char buf[65536];

        while (rl->read_fd >= 0) {
                ssize_t n = read(rl->read_fd, buf, sizeof(buf));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0 || loop_write(rl->target, buf, (size_t) n) < 0) {
                        rl->read_fd = safe_close(rl->read_fd);
                        return;
                }
        }
}

static void relay_close(Relay *rl) {
        relay_copy(rl);
        rl->read_fd = safe_close(rl->read_fd);
        if (rl->pass_fd != rl->target)
                rl->pass_fd = safe_close(rl->pass_fd);
}

static int exec_events(sandboxd_client *c, const char *session, const sandboxd_exec *spec, sandboxd_event_fn fn,
                       void *userdata, sandboxd_result **ret);

int bus_exec_run(sandboxd_client *c, const char *session, const sandboxd_exec *spec, sandboxd_event_fn fn,
                 void *userdata, sandboxd_result **ret) {
        sd_bus_slot *slot = NULL;
        char *rid = NULL, *path = NULL;
        Waiter w = {};
        Relay relay[2] = { { .target = -1, .read_fd = -1, .pass_fd = -1 }, { .target = -1, .read_fd = -1, .pass_fd = -1 } };
        sandboxd_result *res = NULL;
        bool terminal = false;
        int r;

        /* without output fds the caller wants the events */
        if (spec->output_fd[0] < 0 && spec->terminal_fd < 0)
                return exec_events(c, session, spec, fn, userdata, ret);
        client_begin(c);

        /* subscribe before starting it, so that its end cannot go by unseen */
        r = sd_bus_match_signal(c->bus, &slot, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "CommandFinished",
                                on_command_finished, &w);
        if (r < 0)
                return bus_set_error(c, SANDBOXD_ERROR_TRANSPORT, r, "", "cannot subscribe to CommandFinished: %s",
                                 strerror(-r));
        if (spec->terminal_fd >= 0) {
                /* the caller's own pty: the command writes into it, nothing to copy */
                for (size_t i = 0; i < ELEMENTSOF(relay); i++)
                        relay[i] = (Relay) { .target = spec->terminal_fd, .read_fd = -1, .pass_fd = spec->terminal_fd };
                r = 0;
        } else {
                r = relay_open(&relay[0], spec->output_fd[0]);
                if (r >= 0)
                        r = relay_open(&relay[1], spec->output_fd[1]);
        }
        if (r < 0) {
                r = bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "cannot create a pipe: %s", strerror(-r));
                goto finish;
        }
        r = exec_call(c, session, spec, relay[0].pass_fd, relay[1].pass_fd, &rid, &path);
        for (size_t i = 0; i < ELEMENTSOF(relay); i++)
                if (relay[i].pass_fd != relay[i].target)
                        relay[i].pass_fd = safe_close(relay[i].pass_fd); /* the command has it now */
        if (r < 0)
                goto finish;
        w.path = path;
        r = set_current(c, session, rid, path);
        if (r < 0) {
                bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "out of memory");
                goto finish;
        }
        if (fn) {
                _cleanup_free_ char *line = NULL;
                json_object *o = json_object_new_object();
                bool oom = false;

                json_put(o, "type", json_object_new_string("accepted"), &oom);
                json_put(o, "request_id", json_object_new_string(rid), &oom);
                line = oom ? NULL : json_to_text(o);
                json_object_put(o);
                if (!line) {
                        r = -ENOMEM;
                        bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "out of memory");
                        goto finish;
                }
                sandboxd_event ev = {
                        .type = SANDBOXD_EVENT_ACCEPTED,
                        .type_name = "accepted",
                        .request_id = rid,
                        .line = line,
                        .line_size = strlen(line),
                };
                r = fn(c, &ev, userdata);
                if (r < 0) {
                        bus_set_error(c, SANDBOXD_ERROR_CANCELLED, r, "", "stopped by the caller");
                        goto finish;
                }
        }

        /* it may have ended before we were subscribed to its object: ask once */
        r = command_status(c, path, &terminal);
        if (r < 0)
                goto finish;
        while (!terminal && !w.finished) {
                struct pollfd p[4];
                uint64_t until;
                int timeout = 2000, n = 1, wake = -1;

                r = sd_bus_process(c->bus, NULL);
                if (r < 0) {
                        bus_error(c, r, NULL);
                        goto finish;
                }
                if (r > 0)
                        continue;
                p[0] = (struct pollfd) { .fd = sd_bus_get_fd(c->bus), .events = sd_bus_get_events(c->bus) };
                if (c->wakeup_fn && c->wakeup_fd >= 0 && !c->in_wakeup) {
                        wake = n;
                        p[n++] = (struct pollfd) { .fd = c->wakeup_fd, .events = POLLIN };
                }
                for (size_t i = 0; i < ELEMENTSOF(relay); i++)
                        if (relay[i].read_fd >= 0)
                                p[n++] = (struct pollfd) { .fd = relay[i].read_fd, .events = POLLIN };
                if (sd_bus_get_timeout(c->bus, &until) > 0 && until != UINT64_MAX) {
                        struct timespec ts;
                        uint64_t now;

                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        now = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
                        if (until <= now)
                                timeout = 0;
                        else if ((until - now) / 1000 < (uint64_t) timeout)
                                timeout = (int) ((until - now + 999) / 1000);
                }
                r = poll(p, n, timeout);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        r = bus_set_error(c, SANDBOXD_ERROR_LOCAL, -errno, "", "poll: %m");
                        goto finish;
                }
                for (size_t i = 0; i < ELEMENTSOF(relay); i++)
                        relay_copy(&relay[i]);
                if (wake >= 0 && (p[wake].revents & POLLIN)) {
                        c->in_wakeup = true;
                        r = c->wakeup_fn(c, c->wakeup_fd, c->wakeup_userdata);
                        c->in_wakeup = false;
                        if (r < 0) {
                                bus_set_error(c, SANDBOXD_ERROR_CANCELLED, r, "", "stopped by the caller");
                                goto finish;
                        }
                }
                if (r == 0) {
                        /* nothing for a while: ask, in case sandboxd restarted and no signal comes */
                        r = command_status(c, path, &terminal);
                        if (r < 0 && c->error.kind != SANDBOXD_ERROR_TRANSPORT)
                                goto finish;
                        client_begin(c);
                }
        }
        /* what the command wrote before it ended is in the pipes by now */
        for (size_t i = 0; i < ELEMENTSOF(relay); i++)
                relay_close(&relay[i]);
        r = get_result_at(c, path, &res);
        if (r >= 0 && fn) {
                sandboxd_event ev = {
                        .type = SANDBOXD_EVENT_EXIT,
                        .type_name = "exit",
                        .request_id = res->request_id,
                        .unit = res->unit,
                        .result = res,
                        .line = res->json,
                        .line_size = strlen(res->json),
                };
                r = fn(c, &ev, userdata);
                if (r < 0)
                        bus_set_error(c, SANDBOXD_ERROR_CANCELLED, r, "", "stopped by the caller");
        }
        if (r >= 0 && ret)
                *ret = TAKE_PTR(res);
finish:
        sandboxd_result_free(res);
        for (size_t i = 0; i < ELEMENTSOF(relay); i++)
                if (relay[i].target >= 0)
                        relay_close(&relay[i]);
        sd_bus_slot_unref(slot);
        free(rid);
        free(path);
        return r;
}

/* The object of a command by its request id: the one being run, or the session's GetCommand(). */
static int find_command(sandboxd_client *c, const char *session, const char *rid, char **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *spath = NULL;
        sd_bus_message *reply = NULL;
        const char *path;
        int r;

        if (c->cur_path && streq(c->cur_session, session) && streq(c->cur_request_id, rid))
                return (*ret = strdup(c->cur_path)) ? 0 : -ENOMEM;
        r = session_path(c, session, &spath);
        if (r < 0)
                return r;
        r = call_method(c, spath, SESSION_IFACE, "GetCommand", &e, &reply, "s", rid);
        if (r < 0)
                return bus_error(c, r, &e);
        r = sd_bus_message_read(reply, "o", &path);
        if (r >= 0 && !(*ret = strdup(path)))
                r = -ENOMEM;
        sd_bus_message_unref(reply);
        return r == -ENOMEM ? bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "out of memory") : r < 0 ? bus_error(c, r, NULL) : 0;
}

int bus_command_signal(sandboxd_client *c, const char *session, const char *rid, int sig) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                _cleanup_free_ char *path = NULL;
        sd_bus_message *reply = NULL;
        const char *name = sig == SIGINT    ? "SIGINT"
                           : sig == SIGTERM ? "SIGTERM"
                           : sig == SIGKILL ? "SIGKILL"
                           : sig == SIGHUP  ? "SIGHUP"
                           : sig == SIGUSR1 ? "SIGUSR1"
                           : sig == SIGUSR2 ? "SIGUSR2"
                                            : NULL;
        int r;

        client_begin(c);
        if (!name)
                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, -EINVAL, "", "signal %d may not be sent", sig);
        r = find_command(c, session, rid, &path);
        if (r < 0)
                return r;
        r = call_method(c, path, COMMAND_IFACE, "Signal", &e, &reply, "s", name);
        sd_bus_message_unref(reply);
        return r < 0 ? bus_error(c, r, &e) : 0;
}


int bus_command_resize(sandboxd_client *c, const char *session, const char *rid, unsigned rows, unsigned cols) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        sd_bus_message *reply = NULL;
        int r;

        client_begin(c);
        r = find_command(c, session, rid, &path);
        if (r < 0)
                return r;
        r = call_method(c, path, COMMAND_IFACE, "Resize", &e, &reply, "qq", (uint16_t) rows, (uint16_t) cols);
        sd_bus_message_unref(reply);
        return r < 0 ? bus_error(c, r, &e) : 0;
}

/* --- event streams: the NDJSON of Attach()'s pipe ----------------------------------------- */

/* The read end of a pipe of the command's events from offset (GET .../events?offset=). */
static int attach_fd(sandboxd_client *c, const char *path, uint64_t offset, int *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        int fd, r;

        r = call_method(c, path, COMMAND_IFACE, "Attach", &e, &reply, "t", offset);
        if (r < 0)
                return bus_error(c, r, &e);
        r = sd_bus_message_read(reply, "h", &fd);
        if (r >= 0 && (*ret = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
                r = -errno;
        sd_bus_message_unref(reply);
        return r < 0 ? bus_error(c, r, NULL) : 0;
}

/* Reads the events of fd (closed here) to the exit event, as the HTTP transport reads its
 * stream: the same callbacks, result and errors. timeout_usec: 0 for none. */
static int read_events(sandboxd_client *c, int fd, const char *session, uint64_t offset, uint64_t timeout_usec,
                       sandboxd_event_fn fn, void *userdata, sandboxd_result **ret) {
        EventReader er = { .offset = offset, .client = c, .fn = fn, .userdata = userdata,
                           .output_fd = { -EBADF, -EBADF } };
        uint64_t deadline = timeout_usec > 0 ? now_usec(CLOCK_MONOTONIC) + timeout_usec : 0;
        char buf[65536];
        int r = 0;

        for (;;) {
                struct pollfd p[2] = { { .fd = fd, .events = POLLIN } };
                int n = 1, timeout = -1;
                ssize_t k;

                if (c->wakeup_fn && c->wakeup_fd >= 0 && !c->in_wakeup)
                        p[n++] = (struct pollfd) { .fd = c->wakeup_fd, .events = POLLIN };
                if (deadline > 0) {
                        uint64_t now = now_usec(CLOCK_MONOTONIC);

                        if (now >= deadline) {
                                r = bus_set_error(c, SANDBOXD_ERROR_TRANSPORT, -ETIMEDOUT, "",
                                                  "No exit event within the time limit.");
                                break;
                        }
                        timeout = (int) MIN((deadline - now + 999) / 1000, (uint64_t) INT_MAX);
                }
                if (poll(p, n, timeout) < 0) {
                        if (errno == EINTR)
                                continue;
                        r = bus_set_error(c, SANDBOXD_ERROR_LOCAL, -errno, "", "poll: %m");
                        break;
                }
                if (n > 1 && (p[1].revents & POLLIN)) {
                        c->in_wakeup = true;
                        r = c->wakeup_fn(c, c->wakeup_fd, c->wakeup_userdata);
                        c->in_wakeup = false;
                        if (r < 0) {
                                bus_set_error(c, SANDBOXD_ERROR_CANCELLED, r, "", "stopped by the caller");
                                break;
                        }
                }
                if (!p[0].revents)
                        continue;
                k = read(fd, buf, sizeof(buf));
                if (k < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (k < 0) {
                        r = bus_set_error(c, SANDBOXD_ERROR_TRANSPORT, -errno, "", "reading the events: %m");
                        break;
                }
                if (k == 0)
                        break;
                r = event_reader_feed(&er, buf, (size_t) k);
                if (r < 0) {
                        if (er.error < 0)
                                bus_set_error(c, SANDBOXD_ERROR_CANCELLED, er.error, "", "Stopped by the event callback.");
                        else if (r == -EBADMSG || r == -EMSGSIZE)
                                r = bus_set_error(c, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "",
                                                  "Attach(): not a valid NDJSON event stream.");
                        else
                                bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "%s", strerror(-r));
                        break;
                }
                if (er.result)
                        break; /* the exit event: the last line */
        }
        safe_close(fd);
        if (r >= 0 && !er.result && line_splitter_finish(&er.lines) < 0)
                r = bus_set_error(c, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "", "Attach(): the stream ended inside a line.");
        else if (r >= 0 && !er.result)
                /* sandboxd stopped, say: attach again */
                r = bus_set_error(c, SANDBOXD_ERROR_TRANSPORT, -ECONNRESET, "",
                                  "Attach(): the stream ended before the command's exit event.");
        if (r < 0) {
                event_reader_done(&er);
                return r;
        }
        r = event_reader_take_result(&er, session, ret);
        event_reader_done(&er);
        return r < 0 ? bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "out of memory") : 0;
}

/* sandboxd_exec_run() without output fds: Exec(), then its events from the start (the first
 * is "accepted"), the bytes POST .../commands streams. */
static int exec_events(sandboxd_client *c, const char *session, const sandboxd_exec *spec, sandboxd_event_fn fn,
                       void *userdata, sandboxd_result **ret) {
        _cleanup_free_ char *rid = NULL, *path = NULL;
        int fd, r;

        client_begin(c);
        r = exec_call(c, session, spec, spec->terminal_fd, spec->terminal_fd, &rid, &path);
        if (r < 0)
                return r;
        if (set_current(c, session, rid, path) < 0)
                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, -ENOMEM, "", "out of memory");
        r = attach_fd(c, path, 0, &fd);
        if (r < 0)
                return r;
        return read_events(c, fd, session, 0, 0, fn, userdata, ret);
}

int bus_command_attach(sandboxd_client *c, const char *session, const char *rid, uint64_t offset,
                       sandboxd_event_fn fn, void *userdata, sandboxd_result **ret) {
        _cleanup_free_ char *path = NULL;
        int fd, r;

        client_begin(c);
        r = find_command(c, session, rid, &path);
        if (r >= 0)
                r = attach_fd(c, path, offset, &fd);
        if (r < 0)
                return r;
        return read_events(c, fd, session, offset, 0, fn, userdata, ret);
}

/* --- snapshots of commands ------------------------------------------------------------------ */

/* A stream's kept bytes as the HTTP API has them: a string if UTF-8, else null and _b64. */
static int add_stream(json_object *o, const char *name, const void *data, size_t size) {
        char key[32];
        bool valid;
        Buf b = {};
        int r;

        bool oom = false;

        if (utf8_valid_prefix(data, size, &valid) == size && valid) {
                json_put(o, name, json_object_new_string_len(data, (int) size), &oom);
                return oom ? -ENOMEM : 0;
        }
        snprintf(key, sizeof(key), "%s_b64", name);
        r = base64_encode(&b, data, size);
        if (r >= 0) {
                json_put_null(o, name, &oom);
                json_put(o, key, json_object_new_string_len(b.data ?: "", (int) b.len), &oom);
                r = oom ? -ENOMEM : 0;
        }
        buf_done(&b);
        return r;
}

/* Snapshot() of a command object: the HTTP API's JSON of GET .../commands/RID (with_output),
 * or of the list of GET .../commands (without). */
static int snapshot_at(sandboxd_client *c, const char *path, bool with_output, sandboxd_result **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(json_object_putp) json_object *o = NULL, *full = NULL;
        sd_bus_message *reply = NULL;
        const void *out = NULL, *err = NULL;
        size_t out_size = 0, err_size = 0;
        const char *json;
        int r;

        r = call_method(c, path, COMMAND_IFACE, "Snapshot", &e, &reply, NULL);
        if (r < 0)
                return bus_error(c, r, &e);
        r = sd_bus_message_read(reply, "s", &json);
        if (r >= 0)
                r = sd_bus_message_read_array(reply, 'y', &out, &out_size);
        if (r >= 0)
                r = sd_bus_message_read_array(reply, 'y', &err, &err_size);
        if (r >= 0)
                r = json_parse_text(json, strlen(json), &o) < 0 ? -EBADMSG : 0;
        if (r >= 0 && with_output) {
                full = json_object_new_object();
                r = full ? json_object_object_add(full, "found", json_object_new_boolean(true)) : -ENOMEM;
                json_object_object_foreach(o, k, v) {
                        if (r < 0)
                                break;
                        r = json_object_object_add(full, k, json_object_get(v));
                }
                if (r >= 0)
                        r = add_stream(full, "stdout", out, out_size);
                if (r >= 0)
                        r = add_stream(full, "stderr", err, err_size);
        }
        if (r >= 0)
                r = result_from_json(full ?: o, ret);
        sd_bus_message_unref(reply);
        if (r == -EBADMSG)
                return bus_set_error(c, SANDBOXD_ERROR_PROTOCOL, r, "", "The answer is not a command.");
        if (r < 0)
                return r == -ENOMEM ? bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "out of memory") : bus_error(c, r, NULL);
        return 0;
}

int bus_command_get(sandboxd_client *c, const char *session, const char *rid, sandboxd_result **ret) {
        _cleanup_free_ char *path = NULL;
        int r;

        client_begin(c);
        r = find_command(c, session, rid, &path);
        if (r < 0)
                return r;
        return snapshot_at(c, path, true, ret);
}

/* As the HTTP transport: a snapshot, and while it is not terminal the events from where the
 * log is, to the exit event. */
int bus_command_wait(sandboxd_client *c, const char *session, const char *rid, uint64_t timeout_usec,
                     sandboxd_result **ret) {
        uint64_t deadline = timeout_usec > 0 ? now_usec(CLOCK_MONOTONIC) + timeout_usec : 0;
        _cleanup_free_ char *path = NULL;
        int r;

        client_begin(c);
        r = find_command(c, session, rid, &path);
        if (r < 0)
                return r;
        for (;;) {
                sandboxd_result *snap = NULL;
                uint64_t left = 0, offset;
                int fd;

                r = snapshot_at(c, path, true, &snap);
                if (r < 0)
                        return r;
                if (snap->terminal) {
                        *ret = snap;
                        return 0;
                }
                offset = snap->events_bytes;
                sandboxd_result_free(snap);
                if (deadline > 0) {
                        uint64_t now = now_usec(CLOCK_MONOTONIC);

                        if (now >= deadline)
                                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, -ETIMEDOUT, "", "The command is still running.");
                        left = deadline - now;
                }
                r = attach_fd(c, path, offset, &fd);
                if (r < 0)
                        return r;
                r = read_events(c, fd, session, 0, left, NULL, NULL, NULL);
                if (r == -ETIMEDOUT)
                        return bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "The command is still running.");
                /* a broken stream: look again */
                if (r < 0 && r != -ECONNRESET)
                        return r;
                client_begin(c);
        }
}

int bus_command_list(sandboxd_client *c, const char *session, sandboxd_result ***ret, size_t *ret_n) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *spath = NULL;
        sd_bus_message *reply = NULL;
        sandboxd_result **list = NULL;
        size_t n = 0;
        int r;

        client_begin(c);
        r = session_path(c, session, &spath);
        if (r < 0)
                return r;
        r = call_method(c, spath, SESSION_IFACE, "ListCommands", &e, &reply, NULL);
        if (r < 0)
                return bus_error(c, r, &e);
        list = calloc(1, sizeof(*list));
        r = list ? sd_bus_message_enter_container(reply, 'a', "(sso)") : -ENOMEM;
        while (r >= 0) {
                const char *rid, *status, *path;
                sandboxd_result **nl;

                r = sd_bus_message_read(reply, "(sso)", &rid, &status, &path);
                if (r <= 0)
                        break;
                nl = realloc(list, (n + 2) * sizeof(*list));
                if (!nl) {
                        r = -ENOMEM;
                        break;
                }
                list = nl;
                list[n + 1] = NULL;
                r = snapshot_at(c, path, false, &list[n]);
                if (r == -ENOENT) { /* forgotten meanwhile */
                        r = 0;
                        continue;
                }
                if (r < 0)
                        break;
                n++;
        }
        sd_bus_message_unref(reply);
        if (r < 0) {
                sandboxd_result_list_free(list);
                if (r == -ENOMEM)
                        return bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "out of memory");
                return c->error.error < 0 ? r : bus_error(c, r, NULL);
        }
        client_begin(c);
        *ret = list;
        if (ret_n)
                *ret_n = n;
        return 0;
}

int bus_command_write_stdin(sandboxd_client *c, const char *session, const char *rid, const void *data, size_t size,
                            bool eof) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        sd_bus_message *m = NULL, *reply = NULL;
        int r;

        client_begin(c);
        r = find_command(c, session, rid, &path);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_call(c->bus, &m, BUS_NAME, path, COMMAND_IFACE, "WriteStdin");
        if (r >= 0)
                r = sd_bus_message_append_array(m, 'y', data ?: "", size);
        if (r >= 0)
                r = sd_bus_message_append(m, "b", eof);
        if (r < 0) {
                sd_bus_message_unref(m);
                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "cannot build the call: %s", strerror(-r));
        }
        r = call(c, m, CALL_TIMEOUT_USEC, &e, &reply);
        sd_bus_message_unref(m);
        sd_bus_message_unref(reply);
        return r < 0 ? bus_error(c, r, &e) : 0;
}

/* --- what sandboxd says of itself ----------------------------------------------------------- */

/* An a{sv} of the Manager as the HTTP API's JSON object: Health()'s timestamp is a date there,
 * its uptime seconds with 3 decimals. */
static int read_dict(sd_bus_message *reply, json_object **ret) {
        json_object *o = json_object_new_object();
        int r;

        if (!o)
                return -ENOMEM;
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *name, *contents, *str;
                json_object *v = NULL;
                uint64_t t;
                uint32_t u;
                double d;
                int b;

                r = sd_bus_message_read(reply, "s", &name);
                if (r >= 0)
                        r = sd_bus_message_peek_type(reply, NULL, &contents);
                if (r >= 0)
                        r = sd_bus_message_enter_container(reply, 'v', contents);
                if (r < 0)
                        break;
                if (streq(contents, "s") && (r = sd_bus_message_read_basic(reply, 's', &str)) >= 0)
                        v = json_object_new_string(str);
                else if (streq(contents, "u") && (r = sd_bus_message_read_basic(reply, 'u', &u)) >= 0)
                        v = json_object_new_uint64(u);
                else if (streq(contents, "b") && (r = sd_bus_message_read_basic(reply, 'b', &b)) >= 0)
                        v = json_object_new_boolean(b);
                else if (streq(contents, "d") && (r = sd_bus_message_read_basic(reply, 'd', &d)) >= 0) {
                        char text[64];

                        snprintf(text, sizeof(text), "%.3f", d);
                        v = json_object_new_double_s(d, text);
                } else if (streq(contents, "t") && (r = sd_bus_message_read_basic(reply, 't', &t)) >= 0) {
                        if (streq(name, "timestamp")) {
                                char text[64];
                                time_t secs = (time_t) (t / USEC_PER_SEC);
                                struct tm tm;

                                strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&secs, &tm));
                                v = json_object_new_string(text);
                        } else
                                v = json_object_new_uint64(t);
                } else if (r >= 0)
                        r = sd_bus_message_skip(reply, contents);
                if (r >= 0 && v)
                        r = json_object_object_add(o, name, v);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0) {
                json_object_put(o);
                return r;
        }
        *ret = o;
        return 0;
}

/* GET /v1/health: Health(), its pool under "pool" */
int bus_health(sandboxd_client *c, char **ret_json) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        json_object *o = NULL, *pool = NULL;
        sd_bus_message *reply = NULL;
        int r;

        r = call_method(c, MANAGER_PATH, MANAGER_IFACE, "Health", &e, &reply, NULL);
        if (r < 0)
                return bus_error(c, r, &e);
        r = read_dict(reply, &o);
        if (r >= 0)
                r = read_dict(reply, &pool);
        if (r >= 0)
                r = json_object_object_add(o, "pool", TAKE_PTR(pool));
        if (r >= 0)
                r = (*ret_json = json_to_text(o)) ? 0 : -ENOMEM;
        json_object_put(o);
        json_object_put(pool);
        sd_bus_message_unref(reply);
        return r < 0 ? bus_error(c, r, NULL) : 0;
}

/* GET, POST, DELETE /v1/drain: GetDraining(), SetDraining() */
int bus_drain(sandboxd_client *c, int drain, char **ret_json) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        uint32_t running;
        int draining, r;

        if (drain < 0)
                r = call_method(c, MANAGER_PATH, MANAGER_IFACE, "GetDraining", &e, &reply, NULL);
        else
                r = call_method(c, MANAGER_PATH, MANAGER_IFACE, "SetDraining", &e, &reply, "b", drain > 0);
        if (r < 0)
                return bus_error(c, r, &e);
        r = sd_bus_message_read(reply, "bu", &draining, &running);
        sd_bus_message_unref(reply);
        if (r < 0)
                return bus_error(c, r, NULL);
        if (asprintf(ret_json, "{\"draining\":%s,\"running_commands\":%" PRIu32 "}", draining ? "true" : "false",
                     running) < 0)
                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, -ENOMEM, "", "out of memory");
        return 0;
}

/* --- the files of a session: its Files interface -------------------------------------------- */

/* The path as url_file() sends it: leading and repeated slashes dropped. */
static char *file_path(const char *path) {
        char *p = malloc(strlen(path) + 1), *q = p;

        if (!p)
                return NULL;
        for (const char *s = path; *s; s++)
                if (*s != '/' || (q > p && q[-1] != '/'))
                        *q++ = *s;
        *q = 0;
        return p;
}

/* Calls a method of the session's Files interface with (path, ...): the reply in *ret.
 * Write(): fd, and expect, the bytes it gives (option "size"), or UINT64_MAX. */
static int files_call(sandboxd_client *c, const char *session, const char *member, const char *path, const char *to,
                      int flag, int fd, uint64_t expect, sd_bus_message **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *spath = NULL, *p = NULL, *t = NULL;
        sd_bus_message *m = NULL;
        int r;

        client_begin(c);
        r = session_path(c, session, &spath);
        if (r < 0)
                return r;
        p = file_path(path);
        t = to ? file_path(to) : NULL;
        if (!p || (to && !t))
                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, -ENOMEM, "", "out of memory");
        r = sd_bus_message_new_method_call(c->bus, &m, BUS_NAME, spath, FILES_IFACE, member);
        if (r >= 0)
                r = sd_bus_message_append(m, "s", p);
        if (r >= 0 && streq(member, "Write")) {
                r = sd_bus_message_append(m, "h", fd);
                if (r >= 0 && expect != UINT64_MAX)
                        r = sd_bus_message_append(m, "a{sv}", 1, "size", "t", expect);
                else if (r >= 0)
                        r = sd_bus_message_append(m, "a{sv}", 0);
        } else if (r >= 0 && streq(member, "Move"))
                r = sd_bus_message_append(m, "sb", t, flag);
        else if (r >= 0 && streq(member, "Remove"))
                r = sd_bus_message_append(m, "b", flag);
        if (r < 0) {
                sd_bus_message_unref(m);
                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "cannot build the call: %s", strerror(-r));
        }
        /* Write() is answered once its fd ended, which takes as long as the writer takes;
         * sandboxd gives up on a writer that stalls (ConnectionTimeoutSec=) and answers. */
        r = call(c, m, streq(member, "Write") ? UINT64_MAX : CALL_TIMEOUT_USEC, &e, ret);
        sd_bus_message_unref(m);
        return r < 0 ? bus_error(c, r, &e) : 0;
}

/* Stat() or List(): the HTTP API's JSON of ...?stat or of a directory */
int bus_file_json(sandboxd_client *c, const char *session, const char *path, bool list, json_object **ret) {
        sd_bus_message *reply = NULL;
        const char *json;
        int r;

        r = files_call(c, session, list ? "List" : "Stat", path, NULL, 0, -EBADF, 0, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "s", &json);
        if (r >= 0 && json_parse_text(json, strlen(json), ret) < 0)
                r = bus_set_error(c, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "", "The answer of %s() is not JSON.",
                                  list ? "List" : "Stat");
        else if (r < 0)
                r = bus_error(c, r, NULL);
        sd_bus_message_unref(reply);
        return r;
}

int bus_file_open(sandboxd_client *c, const char *session, const char *path, int *ret_fd, uint64_t *ret_size) {
        sd_bus_message *reply = NULL;
        int fd, r;

        r = files_call(c, session, "Read", path, NULL, 0, -EBADF, 0, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "ht", &fd, ret_size);
        if (r >= 0 && (*ret_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
                r = -errno;
        sd_bus_message_unref(reply);
        return r < 0 ? bus_error(c, r, NULL) : 0;
}

/* Write() reads fd (a pipe or a regular file) to its end; the written size in *ret_size. */
int bus_file_write_fd(sandboxd_client *c, const char *session, const char *path, int fd, uint64_t expect,
                      uint64_t *ret_size) {
        sd_bus_message *reply = NULL;
        const char *entry;
        json_object *j = NULL;
        int r;

        r = files_call(c, session, "Write", path, NULL, 0, fd, expect, &reply);
        if (r >= 0 && ret_size) {
                *ret_size = 0;
                if (sd_bus_message_read(reply, "s", &entry) >= 0 && json_parse_text(entry, strlen(entry), &j) >= 0)
                        *ret_size = (uint64_t) json_object_get_int64(json_object_object_get(j, "size"));
                json_object_put(j);
        }
        sd_bus_message_unref(reply);
        return r;
}

/* The bytes go in a memfd, a regular file Write() reads on sandboxd's file threads. */
int bus_file_write(sandboxd_client *c, const char *session, const char *path, const void *data, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = memfd_create("sandboxd-write", MFD_CLOEXEC);
        if (fd < 0)
                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, -errno, "", "memfd_create: %m");
        r = loop_write(fd, data ?: "", size);
        if (r >= 0 && lseek(fd, 0, SEEK_SET) < 0)
                r = -errno;
        if (r < 0)
                return bus_set_error(c, SANDBOXD_ERROR_LOCAL, r, "", "Writing to a memfd: %s", strerror(-r));
        return bus_file_write_fd(c, session, path, fd, size, NULL);
}

int bus_file_mkdir(sandboxd_client *c, const char *session, const char *path) {
        sd_bus_message *reply = NULL;
        int r;

        r = files_call(c, session, "Mkdir", path, NULL, 0, -EBADF, 0, &reply);
        sd_bus_message_unref(reply);
        return r;
}

int bus_file_move(sandboxd_client *c, const char *session, const char *path, const char *to) {
        sd_bus_message *reply = NULL;
        int r;

        /* as ?move_to= without ?overwrite */
        r = files_call(c, session, "Move", path, to, false, -EBADF, 0, &reply);
        sd_bus_message_unref(reply);
        return r;
}

int bus_file_remove(sandboxd_client *c, const char *session, const char *path, bool recursive) {
        sd_bus_message *reply = NULL;
        int r;

        r = files_call(c, session, "Remove", path, NULL, recursive, -EBADF, 0, &reply);
        sd_bus_message_unref(reply);
        return r;
}

/* --- images: ListImages(), GetImage(), ImportImage(), RemoveImage() as the HTTP API's JSON --- */

static int read_image(sd_bus_message *m, json_object **ret) {
        const char *name, *id, *version_id, *pretty;
        uint64_t size, created;
        uint32_t sessions;
        json_object *o, *os;
        bool oom = false;
        int names, r;

        r = sd_bus_message_read(m, "(sttsssbu)", &name, &size, &created, &id, &version_id, &pretty, &names, &sessions);
        if (r <= 0)
                return r;
        o = json_object_new_object();
        os = json_object_new_object();
        if (!o || !os) {
                json_object_put(o);
                json_object_put(os);
                return -ENOMEM;
        }
        json_put(o, "name", json_object_new_string(name), &oom);
        if (size == UINT64_MAX)
                json_put_null(o, "size_bytes", &oom);
        else
                json_put(o, "size_bytes", json_object_new_uint64(size), &oom);
        json_put(o, "created_usec", json_object_new_uint64(created), &oom);
#define OS(k, v) do { if ((v)[0]) json_put(os, k, json_object_new_string(v), &oom); else json_put_null(os, k, &oom); } while (0)
        OS("id", id);
        OS("version_id", version_id);
        OS("pretty_name", pretty);
#undef OS
        json_put(o, "os", os, &oom);
        json_put(o, "user_names", json_object_new_boolean(names), &oom);
        json_put(o, "sessions", json_object_new_uint64(sessions), &oom);
        if (oom) {
                json_object_put(o);
                return -ENOMEM;
        }
        *ret = o;
        return 1;
}

int bus_image_json(sandboxd_client *c, const char *name, char **ret_json) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        json_object *o = NULL, *list = NULL, *i = NULL;
        int r;

        if (name)
                r = call_method(c, MANAGER_PATH, MANAGER_IFACE, "GetImage", &e, &reply, "s", name);
        else
                r = call_method(c, MANAGER_PATH, MANAGER_IFACE, "ListImages", &e, &reply, NULL);
        if (r < 0)
                return bus_error(c, r, &e);
        if (name)
                r = read_image(reply, &o);
        else {
                o = json_object_new_object();
                list = json_object_new_array();
                r = o && list ? sd_bus_message_enter_container(reply, 'a', "(sttsssbu)") : -ENOMEM;
                while (r >= 0 && (r = read_image(reply, &i)) > 0)
                        r = json_object_array_add(list, TAKE_PTR(i));
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r >= 0)
                        r = json_object_object_add(o, "images", TAKE_PTR(list));
        }
        if (r >= 0)
                r = (*ret_json = json_to_text(o)) ? 0 : -ENOMEM;
        json_object_put(o);
        json_object_put(list);
        sd_bus_message_unref(reply);
        return r < 0 ? bus_error(c, r, NULL) : 0;
}

int bus_image_import(sandboxd_client *c, const char *name, int fd, char **ret_json) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *m = NULL, *reply = NULL;
        sigset_t old;
        int r;

        r = sd_bus_message_new_method_call(c->bus, &m, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "ImportImage");
        if (r >= 0)
                r = sd_bus_message_append(m, "sh", name, fd);
        if (r < 0) {
                sd_bus_message_unref(m);
                return bus_error(c, r, NULL);
        }
        /* an import takes as long as its tar: no method timeout of its own */
        block_interrupts(&old);
        r = sd_bus_call(c->bus, m, UINT64_MAX - 1, &e, &reply);
        (void) sigprocmask(SIG_SETMASK, &old, NULL);
        sd_bus_message_unref(m);
        sd_bus_message_unref(reply);
        if (r < 0)
                return bus_error(c, r, &e);
        return bus_image_json(c, name, ret_json);
}

int bus_image_remove(sandboxd_client *c, const char *name, char **ret_json) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        int r;

        r = bus_image_json(c, name, ret_json);
        if (r < 0)
                return r;
        r = call_method(c, MANAGER_PATH, MANAGER_IFACE, "RemoveImage", &e, &reply, "s", name);
        sd_bus_message_unref(reply);
        if (r < 0) {
                free(*ret_json);
                *ret_json = NULL;
                return bus_error(c, r, &e);
        }
        return 0;
}
