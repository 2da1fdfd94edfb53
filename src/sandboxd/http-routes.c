/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <time.h>

#include "command.h"
#include "http.h"
#include "log.h"
#include "ndjson.h"
#include "session.h"
#include "validate.h"

#define PATH_PARTS_MAX 8

static unsigned status_for_request_error(const RequestError *e) {
        if (streq_ptr(e->code, "payload_too_large"))
                return MHD_HTTP_CONTENT_TOO_LARGE;
        if (streq_ptr(e->code, "conflict"))
                return MHD_HTTP_CONFLICT;
        return MHD_HTTP_BAD_REQUEST;
}

static int queue_request_error(HttpRequest *r, int ret, const RequestError *e) {
        if (ret == -ENOMEM || !e->code)
                return http_queue_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", strerror(-ret));
        return http_queue_error(r, status_for_request_error(e), e->code, e->message);
}

static int method_not_allowed(HttpRequest *r, const char *allow) {
        struct MHD_Response *resp;
        char msg[128];

        snprintf(msg, sizeof(msg), "Method %s is not allowed here; use %s.", r->method, allow);
        resp = http_error_response("method_not_allowed", msg);
        if (resp)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
        return http_queue(r, MHD_HTTP_METHOD_NOT_ALLOWED, resp);
}

static int not_found(HttpRequest *r, const char *what) {
        return http_queue_error(r, MHD_HTTP_NOT_FOUND, "not_found", what);
}

static bool is_json_request(HttpRequest *r) {
        const char *ct = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);

        /* No type at all is tolerated (curl -d sends form encoding by default, people forget). */
        return !ct || startswith(ct, "application/json") || startswith(ct, "application/x-www-form-urlencoded");
}

static uint64_t now_usec(clockid_t clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

/* --- health --------------------------------------------------------------- */

static int route_healthz(HttpRequest *r) {
        Buf b = {};

        if (buf_puts(&b, "{\"status\":\"ok\"}") < 0)
                return MHD_NO;
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

static bool manager_is_ready(Manager *m) {
        return m->bus && sd_bus_is_open(m->bus) > 0;
}

static int route_readyz(HttpRequest *r) {
        Manager *m = r->server->manager;
        bool ready = manager_is_ready(m);
        Buf b = {};

        if (buf_printf(&b, "{\"status\":\"%s\"}", ready ? "ready" : "systemd-unreachable") < 0)
                return MHD_NO;
        return http_queue_json(r, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, &b);
}

static int route_health(HttpRequest *r) {
        Manager *m = r->server->manager;
        uint64_t now = now_usec(CLOCK_REALTIME);
        unsigned n_sessions = 0;
        Session *s;
        Buf b = {};
        char ts[64];
        time_t t = (time_t) (now / USEC_PER_SEC);
        struct tm tm;

        LIST_FOREACH(sessions, s, m->sessions)
                n_sessions++;
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));

        if (buf_printf(&b,
                       "{\"status\":\"%s\",\"timestamp\":\"%s\",\"uptime\":%.3f,\"version\":\"%s\","
                       "\"sessions\":%u,\"running_commands\":%u,"
                       "\"pool\":{\"size\":0,\"ready\":0,\"in_use\":0}}",
                       manager_is_ready(m) ? "ok" : "degraded", ts,
                       (double) (now_usec(CLOCK_MONOTONIC) - m->start_monotonic_usec) / USEC_PER_SEC, PROJECT_VERSION,
                       n_sessions, m->n_running) < 0)
                return MHD_NO;
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

/* --- sessions ------------------------------------------------------------- */

static void on_session_ready(Session *s, int ret, void *userdata) {
        HttpRequest *r = userdata;
        Buf b = {};

        r->session = NULL;
        if (ret < 0) {
                http_complete(r, MHD_HTTP_BAD_GATEWAY,
                              http_error_response("systemd_failed", s->error ?: "systemd could not create the session's slice."));
                return;
        }
        if (session_append_json(s, &b) < 0 || buf_puts(&b, "\n") < 0) {
                buf_done(&b);
                http_complete(r, MHD_HTTP_INTERNAL_SERVER_ERROR, http_error_response("internal", "Out of memory."));
                return;
        }
        http_complete(r, r->status, http_json_response(b.data, b.len));
        buf_done(&b);
}

static int route_create_session(HttpRequest *r) {
        Manager *m = r->server->manager;
        _cleanup_(session_request_done) SessionRequest req = {};
        RequestError e = {};
        Session *s;
        int ret;

        if (!is_json_request(r))
                return http_queue_error(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
                                        "Send the request body as application/json.");

        ret = session_request_parse(r->body.data, r->body.len, &req, &e);
        if (ret < 0)
                return queue_request_error(r, ret, &e);

        s = manager_find_session_by_scope(m, req.user, req.workspace);
        if (s)
                r->status = MHD_HTTP_OK;
        else {
                ret = session_create(m, &req, &s, &e);
                if (ret < 0) {
                        if (ret == -EINVAL)
                                return queue_request_error(r, ret, &e);
                        return http_queue_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", strerror(-ret));
                }
                r->status = MHD_HTTP_CREATED;
        }

        http_suspend(r);
        r->session = s;
        ret = session_wait_ready(s, on_session_ready, r);
        if (ret < 0) {
                r->suspended = false;
                MHD_resume_connection(r->connection);
                return http_queue_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", strerror(-ret));
        }
        return MHD_YES;
}

static int route_list_sessions(HttpRequest *r) {
        Manager *m = r->server->manager;
        const char *user = MHD_lookup_connection_value(r->connection, MHD_GET_ARGUMENT_KIND, "user");
        bool first = true;
        Session *s;
        Buf b = {};

        if (user && !user_name_is_valid(user))
                return http_queue_error(r, MHD_HTTP_BAD_REQUEST, "invalid_name", "Invalid user name in ?user=.");

        if (buf_puts(&b, "{\"sessions\":[") < 0)
                return MHD_NO;
        LIST_FOREACH(sessions, s, m->sessions) {
                if (user && !streq(user, s->user))
                        continue;
                if ((!first && buf_puts(&b, ",") < 0) || session_append_json(s, &b) < 0) {
                        buf_done(&b);
                        return MHD_NO;
                }
                first = false;
        }
        if (buf_puts(&b, "]}") < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

static int route_get_session(HttpRequest *r, Session *s) {
        Buf b = {};

        if (session_append_json(s, &b) < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

/* --- commands ------------------------------------------------------------- */

static void on_command_started(Command *c, int ret, const char *message, void *userdata) {
        HttpRequest *r = userdata;
        char msg[512];

        r->command = NULL;
        if (ret < 0) {
                snprintf(msg, sizeof(msg), "systemd refused to start the command: %s", message ?: strerror(-ret));
                command_free(c);
                http_complete(r, MHD_HTTP_BAD_GATEWAY, http_error_response("systemd_failed", msg));
                return;
        }
        http_complete(r, MHD_HTTP_OK, http_command_stream_response(r, c, 0));
}

static int route_start_command(HttpRequest *r, Session *s) {
        _cleanup_(command_request_done) CommandRequest req = {};
        RequestError e = {};
        Command *c;
        int ret;

        if (!is_json_request(r))
                return http_queue_error(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
                                        "Send the request body as application/json.");

        ret = command_request_parse(r->body.data, r->body.len, &req, &e);
        if (ret < 0)
                return queue_request_error(r, ret, &e);

        if (s->state != SESSION_ACTIVE)
                return http_queue_error(r, MHD_HTTP_CONFLICT, "session_not_active", "The session is not active.");

        ret = command_start(s, &req, on_command_started, r, &c, &e);
        if (ret < 0)
                return queue_request_error(r, ret, &e);

        r->command = c;
        http_suspend(r);
        return MHD_YES;
}

/* --- dispatch ------------------------------------------------------------- */

static size_t split_path(char *url, char *parts[static PATH_PARTS_MAX]) {
        size_t n = 0;
        char *save = NULL;

        for (char *p = strtok_r(url, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
                if (n >= PATH_PARTS_MAX)
                        return SIZE_MAX;
                parts[n++] = p;
        }
        return n;
}

int http_route(HttpRequest *r) {
        Manager *m = r->server->manager;
        _cleanup_free_ char *url = strdup(r->url);
        char *p[PATH_PARTS_MAX];
        bool get = streq(r->method, "GET") || streq(r->method, "HEAD"), post = streq(r->method, "POST");
        Session *s;
        size_t n;

        if (!url)
                return MHD_NO;
        n = split_path(url, p);
        if (n == SIZE_MAX)
                return not_found(r, "No such route.");

        if (n == 1 && streq(p[0], "healthz"))
                return get ? route_healthz(r) : method_not_allowed(r, "GET");
        if (n == 1 && streq(p[0], "readyz"))
                return get ? route_readyz(r) : method_not_allowed(r, "GET");

        if (n < 2 || !streq(p[0], "v1"))
                return not_found(r, "No such route.");

        if (n == 2 && streq(p[1], "health"))
                return get ? route_health(r) : method_not_allowed(r, "GET");

        if (!streq(p[1], "sessions"))
                return not_found(r, "No such route.");

        if (n == 2) {
                if (post)
                        return route_create_session(r);
                return get ? route_list_sessions(r) : method_not_allowed(r, "GET, POST");
        }

        if (!session_id_is_valid(p[2]))
                return not_found(r, "No such session.");
        s = manager_find_session(m, p[2]);
        if (!s)
                return not_found(r, "No such session.");

        if (n == 3)
                return get ? route_get_session(r, s) : method_not_allowed(r, "GET");

        if (n == 4 && streq(p[3], "commands"))
                return post ? route_start_command(r, s) : method_not_allowed(r, "POST");

        return not_found(r, "No such route.");
}
