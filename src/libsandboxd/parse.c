/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <time.h>

#include "encoding.h"
#include "internal.h"

const char *json_get_string(json_object *o, const char *key) {
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

uint64_t json_get_u64(json_object *o, const char *key) {
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v))
                return 0;
        if (json_object_is_type(v, json_type_int)) {
                int64_t i = json_object_get_int64(v);
                /* json-c keeps values above INT64_MAX as unsigned */
                return i < 0 ? 0 : (uint64_t) json_object_get_uint64(v);
        }
        if (json_object_is_type(v, json_type_double)) {
                double d = json_object_get_double(v);
                return d > 0 && d < 1.8e19 ? (uint64_t) d : 0;
        }
        return 0;
}

static bool json_has_int(json_object *o, const char *key, int64_t *ret) {
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return false;
        *ret = json_object_get_int64(v);
        return true;
}

bool json_get_bool(json_object *o, const char *key) {
        json_object *v;

        return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_boolean) &&
               json_object_get_boolean(v);
}

int json_parse_text(const char *text, size_t size, json_object **ret) {
        json_tokener *tok;
        json_object *o;
        enum json_tokener_error jerr;

        if (size > INT32_MAX)
                return -EFBIG;
        tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, text, (int) size);
        jerr = json_tokener_get_error(tok);
        /* all of it must be one value (trailing blanks allowed) */
        if (o && jerr == json_tokener_success) {
                size_t used = json_tokener_get_parse_end(tok);
                for (; used < size; used++)
                        if (!strchr(" \t\r\n", text[used]))
                                break;
                if (used < size) {
                        json_object_put(o);
                        o = NULL;
                }
        }
        json_tokener_free(tok);
        if (!o || jerr != json_tokener_success) {
                json_object_put(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

char *json_to_text(json_object *o) {
        const char *t = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

        return t ? strdup(t) : NULL;
}

static int dup_string(json_object *o, const char *key, char **ret) {
        const char *s = json_get_string(o, key);

        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

_public_ sandboxd_session *sandboxd_session_free(sandboxd_session *s) {
        if (!s)
                return NULL;
        free(s->id);
        free(s->user);
        free(s->workspace);
        free(s->state);
        free(s->unit);
        free(s->workspace_path);
        free(s->json);
        free(s->exec_mode);
        free(s->node);
        free(s);
        return NULL;
}

_public_ void sandboxd_session_list_free(sandboxd_session **list) {
        if (!list)
                return;
        for (sandboxd_session **i = list; *i; i++)
                sandboxd_session_free(*i);
        free(list);
}

int session_from_json(json_object *o, sandboxd_session **ret) {
        sandboxd_session *s;
        json_object *limits = NULL;
        int r;

        if (!json_object_is_type(o, json_type_object) || !json_get_string(o, "id"))
                return -EBADMSG;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        r = dup_string(o, "id", &s->id);
        if (r >= 0)
                r = dup_string(o, "user", &s->user);
        if (r >= 0)
                r = dup_string(o, "workspace", &s->workspace);
        if (r >= 0)
                r = dup_string(o, "state", &s->state);
        if (r >= 0)
                r = dup_string(o, "unit", &s->unit);
        if (r >= 0)
                r = dup_string(o, "workspace_path", &s->workspace_path);
        if (r >= 0)
                r = dup_string(o, "exec_mode", &s->exec_mode);
        if (r >= 0)
                r = dup_string(o, "node", &s->node);
        if (r >= 0 && !(s->json = json_to_text(o)))
                r = -ENOMEM;
        if (r < 0) {
                sandboxd_session_free(s);
                return r;
        }
        s->frozen = json_get_bool(o, "frozen");
        s->ttl_s = json_get_u64(o, "ttl_s");
        s->created_at_usec = json_get_u64(o, "created_at_usec");
        s->expires_at_usec = json_get_u64(o, "expires_at_usec");
        s->commands = (unsigned) json_get_u64(o, "commands");
        s->running = (unsigned) json_get_u64(o, "running");
        if (json_object_object_get_ex(o, "limits", &limits)) {
                s->memory_max = json_get_u64(limits, "memory_max");
                s->cpu_quota = json_get_u64(limits, "cpu_quota");
                s->tasks_max = json_get_u64(limits, "tasks_max");
        }
        *ret = s;
        return 0;
}

_public_ sandboxd_port *sandboxd_port_free(sandboxd_port *p) {
        if (!p)
                return NULL;
        free(p->socket);
        free(p->url);
        free(p->unit);
        free(p->json);
        free(p);
        return NULL;
}

_public_ void sandboxd_port_list_free(sandboxd_port **list) {
        if (!list)
                return;
        for (sandboxd_port **i = list; *i; i++)
                sandboxd_port_free(*i);
        free(list);
}

/* A port number: an integer 1..65535 (null for none, when allowed: 0). */
static int port_number(json_object *o, const char *key, bool nullable, uint16_t *ret) {
        json_object *v;
        int64_t i;

        if (!json_object_object_get_ex(o, key, &v) || !v) {
                if (!nullable)
                        return -EBADMSG;
                *ret = 0;
                return 0;
        }
        if (!json_object_is_type(v, json_type_int))
                return -EBADMSG;
        i = json_object_get_int64(v);
        if (i < 1 || i > UINT16_MAX)
                return -EBADMSG;
        *ret = (uint16_t) i;
        return 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(sandboxd_port *, sandboxd_port_free);

int port_from_json(json_object *o, sandboxd_port **ret) {
        _cleanup_(sandboxd_port_freep) sandboxd_port *p = NULL;
        const char *socket;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        socket = json_get_string(o, "socket");
        if (!socket || !socket[0])
                return -EBADMSG;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        r = port_number(o, "port", false, &p->port);
        if (r >= 0)
                r = port_number(o, "host_port", true, &p->host_port);
        if (r < 0)
                return r;
        r = dup_string(o, "socket", &p->socket);
        if (r >= 0)
                r = dup_string(o, "url", &p->url);
        if (r >= 0)
                r = dup_string(o, "unit", &p->unit);
        if (r >= 0 && !(p->json = json_to_text(o)))
                r = -ENOMEM;
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

int port_json_new(const char *session, uint16_t port, const char *socket, uint16_t host_port, json_object **ret) {
        _cleanup_free_ char *unit = NULL, *url = NULL;
        json_object *o;
        bool oom = false;

        if (asprintf(&unit, "sandboxd-%s-port-%u.socket", session, port) < 0)
                return -ENOMEM;
        if (host_port > 0 && asprintf(&url, "http://127.0.0.1:%u/", host_port) < 0)
                return -ENOMEM;
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        json_put(o, "port", json_object_new_int(port), &oom);
        json_put(o, "socket", json_object_new_string(socket), &oom);
        if (host_port > 0) {
                json_put(o, "host_port", json_object_new_int(host_port), &oom);
                json_put(o, "url", json_object_new_string(url), &oom);
        } else {
                json_put_null(o, "host_port", &oom);
                json_put_null(o, "url", &oom);
        }
        json_put(o, "unit", json_object_new_string(unit), &oom);
        /* D-Bus lists only ports that listen, and ExposePort answers once one does */
        json_put(o, "state", json_object_new_string("active"), &oom);
        if (oom) {
                json_object_put(o);
                return -ENOMEM;
        }
        *ret = o;
        return 0;
}

static const char *const status_table[_SANDBOXD_STATUS_MAX] = {
        [SANDBOXD_STATUS_PENDING] = "pending",     [SANDBOXD_STATUS_RUNNING] = "running",
        [SANDBOXD_STATUS_SUCCEEDED] = "succeeded", [SANDBOXD_STATUS_FAILED] = "failed",
        [SANDBOXD_STATUS_TIMED_OUT] = "timed_out", [SANDBOXD_STATUS_SIGNALED] = "signaled",
        [SANDBOXD_STATUS_LOST] = "lost",
};

_public_ const char *sandboxd_status_to_string(sandboxd_status s) {
        if ((int) s < 0 || s >= _SANDBOXD_STATUS_MAX)
                return NULL;
        return status_table[s];
}

_public_ sandboxd_status sandboxd_status_from_string(const char *s) {
        for (int i = 0; s && i < _SANDBOXD_STATUS_MAX; i++)
                if (streq(s, status_table[i]))
                        return (sandboxd_status) i;
        return SANDBOXD_STATUS_UNKNOWN;
}

_public_ sandboxd_result *sandboxd_result_free(sandboxd_result *r) {
        if (!r)
                return NULL;
        free(r->request_id);
        free(r->unit);
        free(r->session);
        free(r->signal_name);
        free(r->reason);
        free(r->stdout_data);
        free(r->stderr_data);
        free(r->json);
        free(r);
        return NULL;
}

_public_ void sandboxd_result_list_free(sandboxd_result **list) {
        if (!list)
                return;
        for (sandboxd_result **i = list; *i; i++)
                sandboxd_result_free(*i);
        free(list);
}

_public_ int sandboxd_result_exit_status(const sandboxd_result *r) {
        if (!r || !r->terminal)
                return -1;
        switch (r->status) {
        case SANDBOXD_STATUS_SUCCEEDED:
                return 0;
        case SANDBOXD_STATUS_TIMED_OUT:
                return 124;
        case SANDBOXD_STATUS_SIGNALED:
                return r->signal > 0 && r->signal < 128 ? 128 + r->signal : 128 + 9;
        case SANDBOXD_STATUS_FAILED:
                if (r->reason && startswith(r->reason, "setup-"))
                        return 1;
                if (r->exit_code > 0 && r->exit_code <= 255)
                        return r->exit_code;
                return 1;
        case SANDBOXD_STATUS_LOST:
                return 125;
        default:
                return 125;
        }
}

static int signal_number(const char *name) {
        static const char *const names[] = {
                [1] = "SIGHUP",   [2] = "SIGINT",   [3] = "SIGQUIT",   [4] = "SIGILL",    [5] = "SIGTRAP",
                [6] = "SIGABRT",  [7] = "SIGBUS",   [8] = "SIGFPE",    [9] = "SIGKILL",   [10] = "SIGUSR1",
                [11] = "SIGSEGV", [12] = "SIGUSR2", [13] = "SIGPIPE",  [14] = "SIGALRM",  [15] = "SIGTERM",
                [16] = "SIGSTKFLT", [17] = "SIGCHLD", [18] = "SIGCONT", [19] = "SIGSTOP", [20] = "SIGTSTP",
                [21] = "SIGTTIN", [22] = "SIGTTOU", [23] = "SIGURG",   [24] = "SIGXCPU",  [25] = "SIGXFSZ",
                [26] = "SIGVTALRM", [27] = "SIGPROF", [28] = "SIGWINCH", [29] = "SIGIO",  [30] = "SIGPWR",
                [31] = "SIGSYS",
        };
        const char *num;

        if (!name)
                return 0;
        for (size_t i = 1; i < ELEMENTSOF(names); i++)
                if (streq(name, names[i]))
                        return (int) i;
        /* "SIG34" for real-time signals */
        if ((num = startswith(name, "SIG")) && *num >= '1' && *num <= '9')
                return atoi(num);
        return 0;
}

static int stream_from_json(json_object *o, const char *name, char **ret_data, size_t *ret_size) {
        char key[32];
        json_object *v;
        const char *b64;
        Buf b = {};
        int r;

        if (json_object_object_get_ex(o, name, &v) && json_object_is_type(v, json_type_string))
                r = buf_append(&b, json_object_get_string(v), (size_t) json_object_get_string_len(v));
        else {
                snprintf(key, sizeof(key), "%s_b64", name);
                b64 = json_get_string(o, key);
                r = b64 ? (base64_decode(b64, strlen(b64), &b) < 0 ? -EBADMSG : 0) : 0;
        }
        if (r >= 0 && !b.data)
                r = buf_reserve(&b, 0);
        if (r < 0) {
                buf_done(&b);
                return r;
        }
        *ret_size = b.len;
        *ret_data = buf_steal(&b);
        return 0;
}

int result_from_json(json_object *o, sandboxd_result **ret) {
        sandboxd_result *res;
        json_object *usage = NULL;
        int64_t i;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        res = calloc(1, sizeof(*res));
        if (!res)
                return -ENOMEM;
        res->status = sandboxd_status_from_string(json_get_string(o, "status"));
        res->exit_code = json_has_int(o, "exit_code", &i) && i >= 0 && i <= 255 ? (int) i : -1;
        r = dup_string(o, "request_id", &res->request_id);
        if (r >= 0)
                r = dup_string(o, "unit", &res->unit);
        if (r >= 0)
                r = dup_string(o, "session", &res->session);
        if (r >= 0)
                r = dup_string(o, "signal", &res->signal_name);
        if (r >= 0)
                r = dup_string(o, "reason", &res->reason);
        if (r >= 0)
                r = stream_from_json(o, "stdout", &res->stdout_data, &res->stdout_size);
        if (r >= 0)
                r = stream_from_json(o, "stderr", &res->stderr_data, &res->stderr_size);
        if (r >= 0 && !(res->json = json_to_text(o)))
                r = -ENOMEM;
        if (r < 0) {
                sandboxd_result_free(res);
                return r;
        }
        res->signal = signal_number(res->signal_name);
        res->terminal = json_get_bool(o, "terminal") ||
                        (res->status >= SANDBOXD_STATUS_SUCCEEDED && res->status < _SANDBOXD_STATUS_MAX);
        res->duration_ms = json_get_u64(o, "duration_ms");
        if (json_object_object_get_ex(o, "usage", &usage)) {
                res->cpu_usec = json_get_u64(usage, "cpu_usec");
                res->memory_bytes = json_get_u64(usage, "memory_bytes");
                res->tasks = json_get_u64(usage, "tasks");
        }
        res->stdout_truncated = json_get_bool(o, "stdout_truncated");
        res->stderr_truncated = json_get_bool(o, "stderr_truncated");
        res->stdout_bytes = json_get_u64(o, "stdout_bytes");
        res->stderr_bytes = json_get_u64(o, "stderr_bytes");
        res->events_bytes = json_get_u64(o, "events_bytes");
        *ret = res;
        return 0;
}

_public_ sandboxd_file_info *sandboxd_file_info_free(sandboxd_file_info *i) {
        if (!i)
                return NULL;
        free(i->name);
        free(i->target);
        free(i->json);
        free(i);
        return NULL;
}

_public_ void sandboxd_file_info_list_free(sandboxd_file_info **list) {
        if (!list)
                return;
        for (sandboxd_file_info **i = list; *i; i++)
                sandboxd_file_info_free(*i);
        free(list);
}

int file_type_from_string(const char *s) {
        if (!s)
                return SANDBOXD_FILE_OTHER;
        if (streq(s, "file") || streq(s, "regular"))
                return SANDBOXD_FILE_REGULAR;
        if (streq(s, "dir") || streq(s, "directory"))
                return SANDBOXD_FILE_DIRECTORY;
        if (streq(s, "symlink") || streq(s, "link"))
                return SANDBOXD_FILE_SYMLINK;
        return SANDBOXD_FILE_OTHER;
}

/* "0644" (octal text) or 420 (a number) */
int mode_from_json(json_object *v, unsigned *ret) {
        const char *s;
        char *end;
        unsigned long m;

        if (json_object_is_type(v, json_type_int)) {
                int64_t i = json_object_get_int64(v);
                if (i < 0 || i > 07777)
                        return -EINVAL;
                *ret = (unsigned) i;
                return 0;
        }
        if (!json_object_is_type(v, json_type_string))
                return -EINVAL;
        s = json_object_get_string(v);
        errno = 0;
        m = strtoul(s, &end, 8);
        if (errno != 0 || end == s || *end || m > 07777)
                return -EINVAL;
        *ret = (unsigned) m;
        return 0;
}

/* "2025-01-02T03:04:05Z" or with fractions/offset "+00:00": only UTC forms are produced by
 * sandboxd; anything else leaves 0. */
static uint64_t rfc3339_to_usec(const char *s) {
        struct tm tm = {};
        const char *p;
        time_t t;
        uint64_t frac = 0, scale = 100000;

        if (!s)
                return 0;
        p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!p)
                return 0;
        if (*p == '.')
                for (p++; *p >= '0' && *p <= '9'; p++) {
                        frac += (uint64_t) (*p - '0') * scale;
                        scale /= 10;
                }
        if (!streq(p, "Z") && !streq(p, "+00:00"))
                return 0;
        t = timegm(&tm);
        if (t < 0)
                return 0;
        return (uint64_t) t * USEC_PER_SEC + frac;
}

int file_info_from_json(json_object *o, const char *name, sandboxd_file_info **ret) {
        sandboxd_file_info *i;
        json_object *v;
        int r = 0;

        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        i = calloc(1, sizeof(*i));
        if (!i)
                return -ENOMEM;
        if (json_get_string(o, "name"))
                r = dup_string(o, "name", &i->name);
        else if (json_get_string(o, "name_b64")) {
                Buf b = {};
                const char *s = json_get_string(o, "name_b64");
                r = base64_decode(s, strlen(s), &b) < 0 ? -EBADMSG : 0;
                i->name = buf_steal(&b);
        } else if (name && !(i->name = strdup(name)))
                r = -ENOMEM;
        if (r >= 0)
                r = dup_string(o, "target", &i->target);
        if (r >= 0 && !(i->json = json_to_text(o)))
                r = -ENOMEM;
        if (r < 0) {
                sandboxd_file_info_free(i);
                return r;
        }
        i->type = file_type_from_string(json_get_string(o, "type"));
        i->size = json_get_u64(o, "size");
        if (json_object_object_get_ex(o, "mode", &v))
                (void) mode_from_json(v, &i->mode);
        i->mtime_usec = json_get_u64(o, "mtime_usec");
        if (i->mtime_usec == 0 && json_object_object_get_ex(o, "mtime", &v)) {
                if (json_object_is_type(v, json_type_string))
                        i->mtime_usec = rfc3339_to_usec(json_object_get_string(v));
                else
                        i->mtime_usec = json_get_u64(o, "mtime") * USEC_PER_SEC;
        }
        *ret = i;
        return 0;
}
