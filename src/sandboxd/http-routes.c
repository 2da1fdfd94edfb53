/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The HTTP front end's routes, its one job although over 800 lines: the route table and a
 * handler per route that checks the request, asks authz.c and the core, and answers
 * (JSON from http-json.c, errors from the error table). No state of its own. */

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>

#include "auth.h"
#include "cgroup.h"
#include "command.h"
#include "file-ops.h"
#include "files.h"
#include "http.h"
#include "http-relay.h"
#include "http-json.h"
#include "http-range.h"
#include "http-ws.h"
#include "image-import.h"
#include "images.h"
#include "json-util.h"
#include "log.h"
#include "ndjson.h"
#include "parse-util.h"
#include "pool.h"
#include "port.h"
#include "scope.h"
#include "session.h"
#include "status.h"
#include "time-util.h"
#include "validate.h"

static int queue_request_error(HttpRequest *r, int ret, const RequestError *e) {
        struct MHD_Response *resp;
        unsigned status;

        if (ret == -ENOMEM || !e->code)
                return http_queue_error(r, "internal", strerror(-ret));
        status = http_error_status(e->code);
        resp = http_error_response(e->code, e->message);
        if (resp && status == MHD_HTTP_SERVICE_UNAVAILABLE)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER,
                                               streq(e->code, "overloaded") ? "1" : "30");
        return http_queue(r, status, resp);
}

static int method_not_allowed(HttpRequest *r, const char *allow) {
        struct MHD_Response *resp;
        char msg[128];

        snprintf(msg, sizeof(msg), "Method %s is not allowed here; use %s.", r->method, allow);
        resp = http_error_response("method_not_allowed", msg);
        if (resp)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
        return http_queue(r, http_error_status("method_not_allowed"), resp);
}

static int not_found(HttpRequest *r, const char *what) {
        return http_queue_error(r, "not_found", what);
}

static bool is_json_request(HttpRequest *r) {
        const char *ct = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);

        /* No type at all is tolerated (curl -d sends form encoding by default, people forget). */
        return !ct || startswith(ct, "application/json") || startswith(ct, "application/x-www-form-urlencoded");
}

/* The value of ?key=value; "" for a bare ?key (MHD keeps no value for it); NULL if absent. */
static const char *query(HttpRequest *r, const char *key) {
        const char *v = NULL;
        size_t n;

        if (MHD_lookup_connection_value_n(r->connection, MHD_GET_ARGUMENT_KIND, key, strlen(key), &v, &n) != MHD_YES)
                return NULL;
        return v ?: "";
}

/* Every boolean query flag, through parse_flag(): ?flag, ?flag=1, ?flag=true: true; ?flag=0,
 * ?flag=false: false; absent: dflt; anything else: -EINVAL (answer with flag_error()). */
static int query_bool(HttpRequest *r, const char *key, bool dflt) {
        const char *v = query(r, key);

        return v ? parse_flag(v) : dflt;
}

static int flag_error(HttpRequest *r, const char *key) {
        char msg[128];

        snprintf(msg, sizeof(msg), "?%s= must be true, 1, false or 0 (a bare ?%s is true).", key, key);
        return http_queue_error(r, "invalid_value", msg);
}

static int queue_session(HttpRequest *r, unsigned status, Session *s) {
        Buf b = {};

        if (session_append_json(s, &b) < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        return http_queue_json(r, status, &b);
}

static struct MHD_Response *session_response(Session *s) {
        struct MHD_Response *resp;
        Buf b = {};

        if (session_append_json(s, &b) < 0 || buf_puts(&b, "\n") < 0) {
                buf_done(&b);
                return http_error_response("internal", "Out of memory.");
        }
        resp = http_json_response(b.data, b.len);
        buf_done(&b);
        return resp;
}

/* authz_decide(): a tenant sees only its sessions, a member of group sandboxd the ones it
 * created, root and AdminGroup= all. */
static bool session_visible(HttpRequest *r, Session *s) {
        return authz_may_see(&r->caller, http_transport(r), s->tenant, s->user);
}

/* --- health ----------------------------------------------------------------- */

static int route_healthz(HttpRequest *r) {
        Buf b = {};

        if (buf_puts(&b, "{\"status\":\"ok\"}") < 0)
                return MHD_NO;
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

static int route_readyz(HttpRequest *r) {
        Manager *m = r->server->manager;
        bool ready = status_is_ready(m) && !m->draining;
        Buf b = {};

        if (buf_printf(&b, "{\"status\":\"%s\"}",
                       m->draining ? "draining" : ready ? "ready" : "systemd-unreachable") < 0)
                return MHD_NO;
        return http_queue_json(r, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, &b);
}

static int append_pool_json(Manager *m, Buf *b) {
        PoolStats st;

        pool_stats(m, &st);
        return buf_printf(b,
                          "{\"profile\":\"%s\",\"size\":%u,\"min_ready\":%u,\"ready\":%u,\"starting\":%u,"
                          "\"in_use\":%u,\"refill_due\":%s}",
                          pool_profile_to_string(m->config.pool_profile), st.size, st.min_ready, st.ready, st.starting,
                          st.in_use, st.refill_due ? "true" : "false");
}

static int route_health(HttpRequest *r) {
        Manager *m = r->server->manager;
        StatusHealth h;
        Buf b = {};
        char ts[64];
        time_t t;
        struct tm tm;

        status_health(m, &h);
        t = (time_t) (h.timestamp_usec / USEC_PER_SEC);
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));

        if (buf_printf(&b,
                       "{\"status\":\"%s\",\"timestamp\":\"%s\",\"uptime\":%.3f,\"version\":\"%s\","
                       "\"node\":\"%s\",\"sessions\":%u,\"running_commands\":%u,\"pool\":",
                       h.status, ts, (double) h.uptime_usec / USEC_PER_SEC, PROJECT_VERSION, m->config.node_name,
                       h.sessions, h.running_commands) < 0 ||
            append_pool_json(m, &b) < 0 || buf_puts(&b, "}") < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

static int route_pool(HttpRequest *r) {
        Buf b = {};

        if (append_pool_json(r->server->manager, &b) < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

static int route_metrics(HttpRequest *r) {
        struct MHD_Response *resp;
        Buf b = {};

        if (status_format_metrics(r->server->manager, &b) < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        resp = MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_COPY);
        buf_done(&b);
        if (resp)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
        return http_queue(r, MHD_HTTP_OK, resp);
}

static int route_drain_state(HttpRequest *r) {
        Manager *m = r->server->manager;
        Buf b = {};

        if (buf_printf(&b, "{\"draining\":%s,\"running_commands\":%u}", m->draining ? "true" : "false",
                       m->n_running) < 0)
                return MHD_NO;
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

static int set_draining(HttpRequest *r, bool drain) {
        int ret = manager_set_draining(r->server->manager, drain);

        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));
        return route_drain_state(r);
}

static int route_drain(HttpRequest *r) {
        return set_draining(r, true);
}

static int route_undrain(HttpRequest *r) {
        return set_draining(r, false);
}

/* --- images ----------------------------------------------------------------- */

/* Listing and showing are everyone's (an image holds nothing of anyone's); importing and
 * removing are the administrators' (root, AdminGroup=, AdminTenants=). */
static int route_list_images(HttpRequest *r) {
        Manager *m = r->server->manager;
        ImageInfo *l = NULL;
        size_t n = 0;
        Buf b = {};
        int ret;

        ret = images_list(&m->config, &l, &n);
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));
        ret = buf_puts(&b, "{\"images\":[");
        for (size_t i = 0; ret >= 0 && i < n; i++) {
                if (i > 0)
                        ret = buf_puts(&b, ",");
                if (ret >= 0)
                        ret = image_append_json(&l[i], session_count_by_image(m, l[i].name), &b);
        }
        if (ret >= 0)
                ret = buf_puts(&b, "]}");
        image_info_free_many(l, n);
        if (ret < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

static int route_get_image(HttpRequest *r) {
        Manager *m = r->server->manager;
        _cleanup_(image_info_done) ImageInfo i = {};
        Buf b = {};
        int ret;

        ret = image_get(&m->config, r->params[0], &i);
        if (ret == -ENOENT || ret == -EINVAL)
                return http_queue_error(r, "image_not_found", "No such image.");
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));
        if (image_append_json(&i, session_count_by_image(m, i.name), &b) < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

static int route_delete_image(HttpRequest *r) {
        Manager *m = r->server->manager;
        const char *name = r->params[0];
        _cleanup_(image_info_done) ImageInfo i = {};
        Buf b = {};
        unsigned n;
        int ret;

        ret = image_get(&m->config, name, &i);
        if (ret == -ENOENT || ret == -EINVAL)
                return http_queue_error(r, "image_not_found", "No such image.");
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));
        n = session_count_by_image(m, name);
        if (n > 0) {
                char msg[128];

                snprintf(msg, sizeof(msg), "The image is in use by %u session%s: close %s first.", n, n == 1 ? "" : "s",
                         n == 1 ? "it" : "them");
                return http_queue_error(r, "image_in_use", msg);
        }
        /* the tree goes on the removal's own time: renamed aside at once, removed in the
         * background (image_remove_async()) */
        ret = image_remove_async(&m->config, name);
        if (ret == -ENOENT)
                return http_queue_error(r, "image_not_found", "No such image.");
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));
        log_info("Image %s removed.", name);
        if (image_append_json(&i, 0, &b) < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

/* PUT /v1/images/NAME: the body, a tar (plain or compressed), streamed to sandboxd-unpack
 * (image-import.c) through a pipe: what the pipe does not take now waits in libmicrohttpd,
 * the connection suspended until it has room. (No import from a directory of the host here:
 * sandboxd cannot read every file of one, CapabilityBoundingSet= leaves it no
 * CAP_DAC_READ_SEARCH; sandboxctl packs a directory into a tar on the caller's side.) */
bool http_route_is_image_import(HttpRequest *r) {
        return r->route && FLAGS_SET(r->route->flags, HTTP_ROUTE_IMAGE) && streq(r->method, "PUT");
}

static void on_image_import_done(ImageImport *imp, const ImageImportResult *res, void *userdata) {
        HttpRequest *r = userdata;
        _cleanup_(image_info_done) ImageInfo i = {};
        struct MHD_Response *resp;
        unsigned status;
        Buf b = {};

        r->image_import = NULL;
        r->image_waiting = false;
        if (res->error < 0) {
                status = http_error_status(res->code);
                resp = http_error_response(res->code, res->message);
        } else if (image_get(&r->server->manager->config, r->params[0], &i) < 0 ||
                   image_append_json(&i, 0, &b) < 0 || buf_puts(&b, "\n") < 0) {
                status = http_error_status("internal");
                resp = http_error_response("internal", "The image was imported, but cannot be read back.");
        } else {
                status = MHD_HTTP_CREATED;
                resp = http_json_response(b.data, b.len);
        }
        buf_done(&b);
        if (r->suspended)
                http_complete(r, status, resp);
        else {
                /* the body still comes (a refusal before its end): answered once it was read */
                r->status = status;
                r->response = resp;
        }
}

static void on_image_import_writable(ImageImport *imp, void *userdata) {
        HttpRequest *r = userdata;

        if (r->image_waiting) {
                r->image_waiting = false;
                http_resume(r);
        }
}

int http_route_image_import_begin(HttpRequest *r) {
        Manager *m = r->server->manager;
        const char *reason = NULL, *v;
        ImageImportResult res;
        int ret;

        if (authz_decide(&r->caller, http_transport(r), AUTHZ_IMAGES, NULL, &reason) != AUTHZ_ALLOW)
                return http_refuse_upload_error(r, "forbidden", reason);
        v = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (v && startswith(v, "multipart/"))
                return http_refuse_upload_error(r, "unsupported_media_type",
                                                "Send the tar as the body (application/x-tar), not a form.");
        ret = image_import_start(m, r->params[0], -1, NULL, on_image_import_done, r, &r->image_import, &res);
        if (ret == -ENOMEM)
                return MHD_NO;
        if (ret < 0)
                return http_refuse_upload_error(r, res.code, res.message);
        return MHD_YES;
}

int http_route_image_import_data(HttpRequest *r, const char *data, size_t *size) {
        size_t n = *size;
        int ret;

        ret = image_import_write(r->image_import, data, &n, on_image_import_writable);
        if (ret < 0) {
                image_import_abandon(TAKE_PTR(r->image_import));
                r->status = http_error_status("internal");
                r->response = http_error_response("internal", "Failed to pass the body on to the unpacker.");
                *size = 0;
                return r->response ? MHD_YES : MHD_NO;
        }
        *size -= n;
        if (*size > 0) {
                r->image_waiting = true;
                http_suspend(r);
        }
        return MHD_YES;
}

int http_route_image_import_finish(HttpRequest *r) {
        image_import_end_input(r->image_import);
        http_suspend(r); /* until the unpacker is done: on_image_import_done() */
        return MHD_YES;
}

/* --- sessions ------------------------------------------------------------- */

static unsigned refuse(struct MHD_Response **ret_resp, const char *code, const char *message) {
        *ret_resp = http_error_response(code, message);
        return http_error_status(code);
}

/* A request that waited when sandboxd began to stop: 503, ask again once it is back. */
static void complete_stopping(HttpRequest *r, const char *what) {
        char msg[256];
        struct MHD_Response *resp;

        snprintf(msg, sizeof(msg), "sandboxd is stopping; %s", what);
        resp = http_error_response("stopping", msg);
        if (resp)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "5");
        http_complete(r, http_error_status("stopping"), resp);
}

static void on_session_ready(Op *op, int ret, const char *message, void *userdata) {
        HttpRequest *r = userdata;
        Session *s = op->session;

        r->op = op_free(op);
        if (ret == -ECANCELED)
                complete_stopping(r, "the session's slice may exist: ask again for the same scope once it is back.");
        else if (ret < 0)
                http_complete_error(r, "systemd_failed", s->error ?: "systemd could not create the session's slice.");
        else
                http_complete(r, r->status, session_response(s));
}

static int refuse_draining(HttpRequest *r) {
        struct MHD_Response *resp = http_error_response(
                "draining", "sandboxd is draining: it takes no new sessions or commands. Try another instance, or later.");

        if (resp)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "30");
        return http_queue(r, http_error_status("draining"), resp);
}

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        if (key && strcasecmp(key, SCOPE_HEADER) == 0)
                (*(unsigned *) cls)++;
        return MHD_YES;
}

/* Whether X-Sandboxd-Scope is absent or names req's scope; if not, why in msg. */
static bool scope_header_ok(HttpRequest *r, const SessionRequest *req, char *msg, size_t size) {
        const char *v = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, SCOPE_HEADER);
        unsigned n = 0;

        (void) MHD_get_connection_values(r->connection, MHD_HEADER_KIND, count_header, &n);
        if (n == 0)
                return true;
        if (n > 1) {
                snprintf(msg, size, "Header " SCOPE_HEADER " is given more than once.");
                return false;
        }
        if (!v || !scope_header_matches(v, req->user, req->workspace)) {
                snprintf(msg, size, "Header " SCOPE_HEADER " must be the body's user and workspace, %s/%s.", req->user,
                         req->workspace);
                return false;
        }
        return true;
}

static int route_create_session(HttpRequest *r) {
        Manager *m = r->server->manager;
        _cleanup_(session_request_done) SessionRequest req = {};
        RequestError e = {};
        Session *s;
        int ret;

        if (m->draining)
                return refuse_draining(r);

        if (!is_json_request(r))
                return http_queue_error(r, "unsupported_media_type", "Send the request body as application/json.");

        ret = session_request_parse(r->body.data, r->body.len, &req, &e);
        if (ret < 0)
                return queue_request_error(r, ret, &e);

        /* The placement header a load balancer hashes (sandboxd-api(7)): when there, it must be
         * the body's scope, or the scope could have sessions on two nodes. */
        {
                char msg[256];

                if (!scope_header_ok(r, &req, msg, sizeof(msg)))
                        return http_queue_error(r, "invalid_value", msg);
        }

        /* May the caller have a session of this scope, and the active one if there is one? */
        s = session_find_by_scope(m, scope_tenant(r->tenant), req.user, req.workspace);
        {
                AuthzTarget target = { .user = req.user, .session = s, .creator = s ? s->tenant : NULL };
                const char *reason = NULL;

                if (authz_decide(&r->caller, http_transport(r), AUTHZ_CREATE, &target, &reason) != AUTHZ_ALLOW)
                        return http_queue_error(r, "forbidden", reason);
        }

        ret = session_create(m, &req, r->tenant, &s, &e);
        if (ret < 0) {
                if (ret == -EINVAL)
                        return queue_request_error(r, ret, &e);
                return http_queue_error(r, "internal", strerror(-ret));
        }
        r->status = ret > 0 ? MHD_HTTP_CREATED : MHD_HTTP_OK;

        if (s->state != SESSION_STARTING)
                return queue_session(r, r->status, s);

        ret = session_wait_ready(s, on_session_ready, r, &r->op);
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));
        if (ret == 0)
                return queue_session(r, r->status, s);
        http_suspend(r);
        return MHD_YES;
}

static int route_list_sessions(HttpRequest *r) {
        Manager *m = r->server->manager;
        const char *user = query(r, "user");
        bool first = true;
        Session *s;
        Buf b = {};

        if (user && !user_name_is_valid(user))
                return http_queue_error(r, "invalid_name", "Invalid user name in ?user=.");

        if (buf_puts(&b, "{\"sessions\":[") < 0)
                return MHD_NO;
        LIST_FOREACH(sessions, s, m->sessions) {
                if ((user && !streq(user, s->user)) || !session_visible(r, s))
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

/* The answer to a close that is over: ret is its result (session.h). */
static unsigned closed_answer(Session *s, int ret, struct MHD_Response **ret_resp) {
        _cleanup_free_ char *msg = NULL;

        if (ret == -EIO) {
                if (asprintf(&msg, "The session is closed, but emptying its workspace failed: %s", s->purge_error ?: "?") < 0)
                        msg = NULL;
                return refuse(ret_resp, "purge_failed", msg ?: "?");
        }
        if (ret == -ESTALE)
                return refuse(ret_resp, "not_purged", "The session was closed without ?purge=true: its workspace "
                                                      "stays. Create a session of the scope and close that one with "
                                                      "?purge=true.");
        if (ret < 0)
                return refuse(ret_resp, "internal", "The session went away.");
        *ret_resp = session_response(s);
        return MHD_HTTP_OK;
}

static void on_session_closed(Op *op, int ret, const char *message, void *userdata) {
        HttpRequest *r = userdata;
        Session *s = op->session;
        struct MHD_Response *resp = NULL;
        unsigned status;

        r->op = op_free(op);
        if (ret == -ECANCELED) {
                complete_stopping(r, "the session goes on closing: ask again once it is back.");
                return;
        }
        status = closed_answer(s, ret, &resp);
        http_complete(r, status, resp);
}

static int route_get_session(HttpRequest *r) {
        return queue_session(r, MHD_HTTP_OK, r->target);
}

static int route_delete_session(HttpRequest *r) {
        Session *s = r->target;
        int purge = query_bool(r, "purge", false), ret;

        if (purge < 0)
                return flag_error(r, "purge");
        if (s->state == SESSION_STARTING)
                return http_queue_error(r, "session_starting", "The session is still starting.");

        ret = session_close(s, "deleted", purge, on_session_closed, r, &r->op);
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));
        if (ret == 0) {
                /* closed already, or at once */
                struct MHD_Response *resp = NULL;
                unsigned status = closed_answer(s, session_close_result(s, purge), &resp);

                return http_queue(r, status, resp);
        }
        http_suspend(r);
        return MHD_YES;
}

static int require_active(HttpRequest *r, Session *s) {
        RequestError e = {};

        if (session_check_active(s, &e) >= 0)
                return 0;
        queue_request_error(r, -EINVAL, &e);
        return -1;
}

static int route_activity(HttpRequest *r) {
        Session *s = r->target;

        if (require_active(r, s) < 0)
                return MHD_YES;
        session_touch(s);
        return queue_session(r, MHD_HTTP_OK, s);
}

static void on_frozen(Op *op, int ret, const char *message, void *userdata) {
        HttpRequest *r = userdata;
        Session *s = op->session;

        r->op = op_free(op);
        if (ret == -ESTALE)
                http_complete_error(r, "session_not_active", "The session is closing.");
        else if (ret == -ECANCELED)
                complete_stopping(r, "whether the session is frozen: ask again once it is back.");
        else if (ret < 0)
                http_complete_error(r, "systemd_failed", message);
        else
                http_complete(r, MHD_HTTP_OK, session_response(s));
}

static int freeze_session(HttpRequest *r, bool freeze) {
        Session *s = r->target;
        int ret;

        if (require_active(r, s) < 0)
                return MHD_YES;
        ret = session_freeze(s, freeze, on_frozen, r, &r->op);
        if (ret == -EOPNOTSUPP)
                return http_queue_error(r, "unsupported", "Freezing needs cgroup v2; on this host the cgroup hierarchy is v1 or hybrid, "
                                        "where systemd cannot freeze units.");
        if (ret == -EBUSY)
                return http_queue_error(r, "busy", "A freeze or thaw of this session is under way.");
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));
        http_suspend(r);
        return MHD_YES;
}

static int route_freeze(HttpRequest *r) {
        return freeze_session(r, true);
}

static int route_thaw(HttpRequest *r) {
        return freeze_session(r, false);
}

/* --- exposed ports ---------------------------------------------------------- */

static int queue_port(HttpRequest *r, unsigned status, Port *p) {
        Buf b = {};

        if (port_append_json(p, &b) < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        return http_queue_json(r, status, &b);
}

static struct MHD_Response *port_response(Port *p) {
        struct MHD_Response *resp;
        Buf b = {};

        if (port_append_json(p, &b) < 0 || buf_puts(&b, "\n") < 0) {
                buf_done(&b);
                return http_error_response("internal", "Out of memory.");
        }
        resp = http_json_response(b.data, b.len);
        buf_done(&b);
        return resp;
}

static void on_port_exposed(Op *op, int ret, const char *message, void *userdata) {
        HttpRequest *r = userdata;
        Session *s = op->session;
        uint16_t port = op->port;
        Port *p;

        r->op = op_free(op);
        p = port_find(s, port);
        if (ret == -ECANCELED)
                complete_stopping(r, "whether the port is exposed: ask again once it is back.");
        else if (ret == -ESTALE || (ret >= 0 && !p))
                http_complete_error(r, "port_not_exposed", "The port was removed, or the session closed, before it listened.");
        else if (ret < 0)
                http_complete_error(r, "systemd_failed", message);
        else
                http_complete(r, MHD_HTTP_CREATED, port_response(p));
}

/* {port} of the path: a number, and an exposed port of the session */
static Port *path_port(HttpRequest *r) {
        uint64_t v;

        if (parse_uint64(r->params[1], &v) < 0 || v == 0 || v > UINT16_MAX) {
                http_queue_error(r, "port_not_exposed", "No such exposed port: a port is a number from 1 to 65535.");
                return NULL;
        }
        Port *p = port_find(r->target, (uint16_t) v);
        if (!p || !p->active)
                http_queue_error(r, "port_not_exposed", "That port of the session is not exposed.");
        return p && p->active ? p : NULL;
}

static int route_expose_port(HttpRequest *r) {
        Session *s = r->target;
        RequestError e = {};
        PortRequest req;
        Port *p = NULL;
        int ret;

        if (!is_json_request(r))
                return http_queue_error(r, "unsupported_media_type", "Send the port as application/json.");
        ret = port_request_parse(r->body.data, r->body.len, &req, &e);
        if (ret < 0)
                return queue_request_error(r, ret, &e);
        ret = port_expose(s, &req, on_port_exposed, r, &p, &r->op, &e);
        if (ret < 0)
                return queue_request_error(r, ret, &e);
        if (ret == 0)
                return queue_port(r, MHD_HTTP_OK, p); /* exposed already */
        http_suspend(r);
        return MHD_YES;
}

static int route_list_ports(HttpRequest *r) {
        Buf b = {};

        if (port_list_append_json(r->target, &b) < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

static int route_get_port(HttpRequest *r) {
        Port *p = path_port(r);

        return p ? queue_port(r, MHD_HTTP_OK, p) : MHD_YES;
}

static int route_unexpose_port(HttpRequest *r) {
        Port *p = path_port(r);
        Buf b = {};

        if (!p)
                return MHD_YES;
        if (port_append_json(p, &b) < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        port_remove(p);
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

/* --- commands ------------------------------------------------------------- */

static struct MHD_Response *accepted_response(Command *c) {
        struct MHD_Response *resp;
        Buf b = {};

        if (buf_puts(&b, "{\"request_id\":") < 0 || json_append_string(&b, c->request_id, strlen(c->request_id)) < 0 ||
            buf_printf(&b, ",\"unit\":\"%s\",\"session\":\"%s\",\"status\":\"%s\"}\n", c->unit, c->session->id,
                       command_status_to_string(c->result.status)) < 0) {
                buf_done(&b);
                return NULL;
        }
        resp = http_json_response(b.data, b.len);
        buf_done(&b);
        return resp;
}

static void on_command_started(Op *op, int ret, const char *message, void *userdata) {
        HttpRequest *r = userdata;
        Command *c = op->command;
        char msg[512];

        r->op = op_free(op);
        if (ret == -ECANCELED) {
                complete_stopping(r, "the command may have started: look it up by its request id once it is back.");
                return;
        }
        if (ret < 0) {
                snprintf(msg, sizeof(msg), "systemd refused to start the command: %s", message ?: strerror(-ret));
                http_complete_error(r, "systemd_failed", msg);
                return;
        }
        if (r->status == MHD_HTTP_ACCEPTED)
                http_complete(r, MHD_HTTP_ACCEPTED, accepted_response(c));
        else
                http_complete(r, MHD_HTTP_OK, http_command_stream_response(r, c, 0));
}

static int route_start_command(HttpRequest *r) {
        Session *s = r->target;
        _cleanup_(command_request_done) CommandRequest req = {};
        RequestError e = {};
        int wait = query_bool(r, "wait", true);
        Command *c;
        int ret;

        if (wait < 0)
                return flag_error(r, "wait");
        if (!is_json_request(r))
                return http_queue_error(r, "unsupported_media_type", "Send the request body as application/json.");

        ret = command_request_parse(r->body.data, r->body.len, &req, &e);
        if (ret < 0)
                return queue_request_error(r, ret, &e);

        if (s->manager->draining && !(req.request_id && session_find_command(s, req.request_id)))
                return refuse_draining(r);
        ret = session_exec(s, &req, on_command_started, r, &c, &r->op, &e);
        if (ret < 0)
                return queue_request_error(r, ret, &e);
        if (ret == 0) {
                /* The command of this request id, started before. */
                if (!wait)
                        return http_queue(r, MHD_HTTP_OK, accepted_response(c));
                return http_queue(r, MHD_HTTP_OK, http_command_stream_response(r, c, 0));
        }

        r->status = wait ? MHD_HTTP_OK : MHD_HTTP_ACCEPTED;
        http_suspend(r);
        return MHD_YES;
}

static int route_list_commands(HttpRequest *r) {
        Session *s = r->target;
        Command *c;
        Buf b = {};
        bool first = true;

        if (buf_puts(&b, "{\"commands\":[") < 0)
                return MHD_NO;
        /* The list is newest first; answer oldest first. */
        for (c = s->commands; c && c->commands_next; c = c->commands_next)
                ;
        for (; c; c = c->commands_prev) {
                if ((!first && buf_puts(&b, ",") < 0) || command_append_json(c, &b, false) < 0) {
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

static int route_get_command(HttpRequest *r) {
        Command *c = r->target_command;
        Buf b = {};

        if (buf_puts(&b, "{\"found\":true,") < 0 || command_append_json(c, &b, true) < 0) {
                buf_done(&b);
                return MHD_NO;
        }
        /* "{"found":true,{"request_id"...}" -> merge the two objects */
        memmove(b.data + 14, b.data + 15, b.len - 15);
        b.len--;
        b.data[b.len] = 0;
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

static int route_events(HttpRequest *r) {
        Command *c = r->target_command;
        const char *v = query(r, "offset");
        uint64_t offset = 0;
        int ret;

        if (v && parse_uint64(v, &offset) < 0)
                return http_queue_error(r, "invalid_value", "?offset= must be a byte offset (an integer).");
        if (offset > c->output->log_size)
                return http_queue_error(r, "invalid_offset", "?offset= is past the end of the command's events.");
        ret = output_is_line_start(c->output, offset);
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));
        if (ret == 0)
                return http_queue_error(r, "invalid_offset", "?offset= is inside a line of the command's events: give "
                                        "the number of bytes of whole lines received.");
        return http_queue(r, MHD_HTTP_OK, http_command_stream_response(r, c, offset));
}

static int route_signal(HttpRequest *r) {
        Command *c = r->target_command;
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *v = NULL;
        const char *name;
        int sig, ret;
        Buf b = {};

        o = r->body.len > 0 && !memchr(r->body.data, 0, r->body.len) ? json_tokener_parse(r->body.data) : NULL;
        if (!o || !json_object_is_type(o, json_type_object))
                return http_queue_error(r, "invalid_json", "Send {\"signal\": \"SIGINT\"}.");
        json_object_object_foreach(o, key, val) {
                if (!streq(key, "signal"))
                        return http_queue_error(r, "unknown_field", "Only 'signal' is allowed.");
                v = val;
        }
        if (!v || !json_object_is_type(v, json_type_string))
                return http_queue_error(r, "invalid_type", "Field 'signal' must be a string.");
        name = json_object_get_string(v);
        sig = command_signal_from_string(name);
        if (sig < 0)
                return http_queue_error(r, "invalid_value", "Field 'signal' must be one of SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGUSR1, SIGUSR2.");

        ret = command_signal(c, sig);
        if (ret == -ESRCH)
                return http_queue_error(r, "not_running", "The command has already finished.");
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));

        if (buf_printf(&b, "{\"request_id\":\"%s\",\"signal\":\"%s\",\"target\":\"all\"}", c->request_id, name) < 0)
                return MHD_NO;
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

/* {"rows": R, "cols": C}, both, 1..REQUEST_TTY_SIZE_MAX */
static int route_resize(HttpRequest *r) {
        Command *c = r->target_command;
        _cleanup_(json_object_putp) json_object *o = NULL;
        uint64_t size[2] = {};
        bool seen[2] = {};
        int ret;
        Buf b = {};

        o = r->body.len > 0 && !memchr(r->body.data, 0, r->body.len) ? json_tokener_parse(r->body.data) : NULL;
        if (!o || !json_object_is_type(o, json_type_object))
                return http_queue_error(r, "invalid_json", "Send {\"rows\": R, \"cols\": C}.");
        json_object_object_foreach(o, key, val) {
                unsigned k = streq(key, "rows") ? 0 : streq(key, "cols") ? 1 : 2;
                int64_t v;

                if (k == 2)
                        return http_queue_error(r, "unknown_field", "Only 'rows' and 'cols' are allowed.");
                if (!json_object_is_type(val, json_type_int))
                        return http_queue_error(r, "invalid_type", "Fields 'rows' and 'cols' must be integers.");
                errno = 0;
                v = json_object_get_int64(val);
                if (errno != 0 || v < 1 || v > (int64_t) REQUEST_TTY_SIZE_MAX)
                        return http_queue_error(r, "invalid_value", "Fields 'rows' and 'cols' must be 1 to 1000.");
                size[k] = (uint64_t) v;
                seen[k] = true;
        }
        if (!seen[0] || !seen[1])
                return http_queue_error(r, "missing_field", "Both 'rows' and 'cols' are required.");

        ret = command_resize(c, (unsigned) size[0], (unsigned) size[1]);
        if (ret == -ENOTTY)
                return http_queue_error(r, "not_a_terminal", "The command is not on a terminal of sandboxd's (no \"tty\" in its start).");
        if (ret == -ESRCH)
                return http_queue_error(r, "not_running", "The command has already finished.");
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));

        if (buf_printf(&b, "{\"request_id\":\"%s\",\"tty\":{\"rows\":%u,\"cols\":%u}}", c->request_id, c->tty_rows,
                       c->tty_cols) < 0)
                return MHD_NO;
        return http_queue_json(r, MHD_HTTP_OK, &b);
}

static void on_stdin_written(Op *op, int ret, const char *message, void *userdata) {
        HttpRequest *r = userdata;
        char json[128];

        r->op = op_free(op);
        if (ret == -ECANCELED) {
                complete_stopping(r, "what reached the command's stdin is unknown.");
                return;
        }
        if (ret < 0) {
                http_complete_error(r, "stdin_closed", "The command's stdin is closed (it exited or closed it).");
                return;
        }
        snprintf(json, sizeof(json), "{\"written\":%zu}\n", r->body.len);
        http_complete(r, MHD_HTTP_OK, http_json_response(json, strlen(json)));
}

static int route_stdin(HttpRequest *r) {
        Command *c = r->target_command;
        int eof = query_bool(r, "eof", false), ret;

        if (eof < 0)
                return flag_error(r, "eof");
        if (c->stdin_mode != STDIN_STREAM)
                return http_queue_error(r, "stdin_not_streamed", "The command was not started with \"stdin\":\"stream\".");
        ret = command_write_stdin(c, r->body.data ?: "", r->body.len, eof, on_stdin_written, r, &r->op);
        if (ret == -EPIPE)
                return http_queue_error(r, "stdin_closed", "The command's stdin is closed (it finished, or an earlier ?eof=1 closed it).");
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));
        http_suspend(r);
        return MHD_YES;
}

/* A WebSocket on a command on sandboxd's terminal (http-ws.c): input and resizing need what
 * POST .../stdin needs, a read-only viewer what GET .../events needs (the route's operation). */
static int route_tty(HttpRequest *r) {
        Command *c = r->target_command;
        Session *s = r->target;
        const char *v = query(r, "offset"), *reason = NULL;
        int readonly = query_bool(r, "readonly", false);
        uint64_t offset = 0;

        if (v && parse_uint64(v, &offset) < 0)
                return http_queue_error(r, "invalid_value", "?offset= must be a byte offset of stdout (an integer).");
        if (readonly < 0)
                return flag_error(r, "readonly");
        if (!c->tty_master)
                return http_queue_error(r, "not_a_terminal", "The command is not on a terminal of sandboxd's (no \"tty\" in its start).");
        if (!readonly) {
                AuthzVerdict verdict = authz_decide(
                        &r->caller, http_transport(r), AUTHZ_STDIN,
                        &(AuthzTarget) { .user = s->user, .session = true, .creator = s->tenant }, &reason);

                if (verdict == AUTHZ_FORBIDDEN)
                        return http_queue_error(r, "forbidden", reason ?: "Not allowed to write to this command's stdin.");
                if (verdict != AUTHZ_ALLOW)
                        return http_queue_error(r, "not_found", "No such session.");
        }
        return http_ws_upgrade(r, c, offset, readonly);
}

/* --- files ------------------------------------------------------------------- */

/* A listing holds at most this many entries ("truncated":true beyond). */
#define FILES_LIST_MAX 100000

/* The answer to a failed file operation (files_request_error(), the same for D-Bus). */
static unsigned files_error(Manager *m, int err, struct MHD_Response **ret_resp) {
        RequestError e = {};

        (void) files_request_error(err, m->config.max_file_bytes, &e);
        return refuse(ret_resp, e.code, e.message);
}

static int queue_files_error(HttpRequest *r, int err) {
        struct MHD_Response *resp = NULL;
        unsigned status = files_error(r->server->manager, err, &resp);

        return http_queue(r, status, resp);
}

static unsigned http_route_resolve(HttpRequest *r, struct MHD_Response **ret_resp);

/* The path within the workspace of a file request, "" for its top: what follows "files/" in
 * the request's path, or ?path= (for clients generated from an OpenAPI description, which
 * cannot put a '/' in a path parameter), not both. NULL: refused, with *ret_message why. */
static const char *files_path(HttpRequest *r, const char **ret_message) {
        const char *tail = FLAGS_SET(r->route->flags, HTTP_ROUTE_TAIL) ? r->params[r->n_params - 1] : "";
        const char *v = NULL;
        size_t n;

        if (MHD_lookup_connection_value_n(r->connection, MHD_GET_ARGUMENT_KIND, "path", strlen("path"), &v, &n) != MHD_YES)
                return tail;
        if (!v)
                v = "", n = 0;
        if (tail[0]) {
                *ret_message = "Give the path either after files/ or as ?path=, not both.";
                return NULL;
        }
        if (strlen(v) != n) {
                *ret_message = "?path= contains a NUL byte (%00).";
                return NULL;
        }
        return v;
}

/* May a file request go on: 0, or the status of the refusal. */
static unsigned files_check(HttpRequest *r, const char *path, struct MHD_Response **ret_resp) {
        Session *s = r->target;

        if (s->state != SESSION_ACTIVE)
                return refuse(ret_resp, "session_not_active", s->state == SESSION_CLOSED ? "The session is closed." : "The session is not active.");
        if (r->url_has_nul)
                return refuse(ret_resp, "invalid_path", "The URL contains a NUL byte (%00).");
        if (path[0] == '/')
                return refuse(ret_resp, "invalid_path", "The path must be relative to the workspace, not absolute.");
        session_touch(s);
        return 0;
}

/* The workspace of an upload's session, opened (and made if it is new); 0, or the status
 * of the refusal. */
static unsigned files_prepare(HttpRequest *r, const char *path, Workspace *ret_ws, struct MHD_Response **ret_resp) {
        Session *s = r->target;
        unsigned status;
        int ret;

        status = files_check(r, path, ret_resp);
        if (status > 0)
                return status;
        ret = workspace_open(s->workspace_host_dir, true, ret_ws);
        if (ret < 0) {
                log_error_errno(ret, "Failed to open the workspace %s of session %s: %m", s->workspace_host_dir, s->id);
                return refuse(ret_resp, "internal", "The workspace cannot be opened.");
        }
        return 0;
}

/* {"name":..,"path":..,"type":..,...} of one entry. */
static struct MHD_Response *entry_response(const char *path, const struct stat *st) {
        struct MHD_Response *resp;
        Buf b = {};

        if (files_append_entry_json(&b, path, st) < 0) {
                buf_done(&b);
                return NULL;
        }
        resp = http_json_response(b.data, b.len);
        buf_done(&b);
        return resp;
}

static int queue_entry(HttpRequest *r, unsigned status, const char *path, const struct stat *st) {
        struct MHD_Response *resp = entry_response(path, st);

        return resp ? http_queue(r, status, resp) : MHD_NO;
}

/* A file, straight from its fd (sendfile()): nothing of it is buffered here. A GET with a
 * Range of one range (http_range_parse()) gets that part, 206, or 416 when it lies past the
 * end; a malformed Range, several ranges, or an If-Range (sandboxd sends no validator it could
 * match) get the whole file. Returns the status, *ret_resp the answer (NULL: out of memory). */
static unsigned file_response(HttpRequest *r, int *fd, const struct stat *st, struct MHD_Response **ret_resp) {
        uint64_t size = (uint64_t) st->st_size, start = 0, length = size;
        unsigned status = MHD_HTTP_OK;
        struct MHD_Response *resp;
        char buf[96];

        if (streq(r->method, "GET") &&
            !MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_RANGE)) {
                const char *range = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
                int ret = http_range_parse(range, size, &start, &length);

                if (ret == -ERANGE) {
                        snprintf(buf, sizeof(buf), "The range lies past the end of the file (%" PRIu64 " bytes).", size);
                        status = refuse(ret_resp, "invalid_offset", buf);
                        snprintf(buf, sizeof(buf), "bytes */%" PRIu64, size);
                        if (*ret_resp) {
                                (void) MHD_add_response_header(*ret_resp, MHD_HTTP_HEADER_CONTENT_RANGE, buf);
                                (void) MHD_add_response_header(*ret_resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
                        }
                        return status;
                }
                if (ret > 0)
                        status = MHD_HTTP_PARTIAL_CONTENT;
        }

        (void) fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
        resp = MHD_create_response_from_fd_at_offset64(length, *fd, start);
        *ret_resp = resp;
        if (!resp)
                return status;
        *fd = -EBADF;
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
        (void) MHD_add_response_header(resp, "Cache-Control", "no-store");
        (void) MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        if (status == MHD_HTTP_PARTIAL_CONTENT) {
                snprintf(buf, sizeof(buf), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, start, start + length - 1, size);
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, buf);
        }
        return status;
}

static struct MHD_Response *deleted_response(const char *path) {
        struct MHD_Response *resp;
        Buf b = {};

        if (buf_puts(&b, "{") < 0 || files_append_name(&b, "path", path) < 0 || buf_puts(&b, ",\"deleted\":true}") < 0) {
                buf_done(&b);
                return NULL;
        }
        resp = http_json_response(b.data, b.len);
        buf_done(&b);
        return resp;
}

static void on_file_op_done(FileOp *op, int ret, void *userdata) {
        HttpRequest *r = userdata;
        Manager *m = r->server->manager;
        struct MHD_Response *resp = NULL;
        unsigned status = MHD_HTTP_OK;
        Session *s;

        r->file_op = NULL;
        if (ret == -ECANCELED) {
                complete_stopping(r, "ask again once it is back.");
                return;
        }
        if (op->workspace_failed) {
                log_error_errno(ret, "Failed to open the workspace %s of session %s: %m", op->dir, op->key);
                http_complete_error(r, "internal", "The workspace cannot be opened.");
                return;
        }
        if (ret < 0) {
                status = files_error(m, ret, &resp);
                http_complete(r, status, resp);
                return;
        }

        /* What it changed shows in the next count of the disk usage. */
        s = session_find(m, op->key);
        if (s && (op->kind == FILE_OP_MKDIR || op->kind == FILE_OP_REMOVE))
                s->disk_checked_usec = 0;

        switch (op->kind) {
        case FILE_OP_STAT:
                resp = entry_response(op->path, &op->st);
                break;
        case FILE_OP_READ:
                if (op->fd >= 0)
                        status = file_response(r, &op->fd, &op->st, &resp);
                else
                        resp = http_json_response(op->listing.data, op->listing.len);
                break;
        case FILE_OP_MKDIR:
                status = op->created ? MHD_HTTP_CREATED : MHD_HTTP_OK;
                resp = entry_response(op->path, &op->st);
                break;
        case FILE_OP_REMOVE:
                resp = deleted_response(op->path);
                break;
        case FILE_OP_MOVE:
                resp = entry_response(op->to, &op->st);
                break;
        default:
                break;
        }
        if (!resp) {
                status = http_error_status("internal");
                resp = http_error_response("internal", "Out of memory.");
        }
        http_complete(r, status, resp);
}

/* Hands op to the file API's threads and parks the request until it is done. */
static int queue_file_op(HttpRequest *r, FileOp *op) {
        Manager *m = r->server->manager;
        struct MHD_Response *resp;
        char msg[192];
        int ret;

        ret = file_ops_submit(m->file_ops, op, false, on_file_op_done, r);
        if (ret == -EBUSY) {
                snprintf(msg, sizeof(msg),
                         "This session has %u file operations queued or running; wait for one to finish.",
                         FILE_OPS_SESSION_MAX);
                resp = http_error_response("too_many_file_operations", msg);
                if (resp)
                        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
                return http_queue(r, http_error_status("too_many_file_operations"), resp);
        }
        if (ret == -EAGAIN || ret == -ECANCELED) {
                snprintf(msg, sizeof(msg), "sandboxd has %u file operations queued or running; ask again shortly.",
                         FILE_OPS_MAX);
                resp = http_error_response("overloaded", msg);
                if (resp)
                        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
                return http_queue(r, http_error_status("overloaded"), resp);
        }
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));
        r->file_op = op;
        http_suspend(r);
        return MHD_YES;
}

static int route_files_get(HttpRequest *r, FileOp *op) {
        int want_stat = query_bool(r, "stat", false);

        if (want_stat < 0) {
                file_op_free(op);
                return flag_error(r, "stat");
        }
        op->kind = want_stat ? FILE_OP_STAT : FILE_OP_READ;
        op->max_entries = FILES_LIST_MAX;
        return queue_file_op(r, op);
}

static int route_files_delete(HttpRequest *r, FileOp *op) {
        int recursive = query_bool(r, "recursive", false);

        if (recursive < 0) {
                file_op_free(op);
                return flag_error(r, "recursive");
        }
        op->kind = FILE_OP_REMOVE;
        op->flag = recursive;
        return queue_file_op(r, op);
}

static int route_files_change(HttpRequest *r, FileOp *op) {
        _cleanup_(file_op_freep) FileOp *o = op;
        const char *move_to = query(r, "move_to");
        int mkdir = query_bool(r, "mkdir", false), overwrite = query_bool(r, "overwrite", false);

        /* ?mkdir=false is as good as no ?mkdir */
        if (mkdir < 0)
                return flag_error(r, "mkdir");
        if (overwrite < 0)
                return flag_error(r, "overwrite");
        if (!mkdir && !move_to)
                return http_queue_error(r, "invalid_value", "Say what to do: ?mkdir, or ?move_to=NEW_PATH (a plain PUT uploads a file).");
        if (mkdir && move_to)
                return http_queue_error(r, "invalid_value", "?mkdir and ?move_to= do not go together.");

        if (!move_to) {
                o->kind = FILE_OP_MKDIR;
                return queue_file_op(r, TAKE_PTR(o));
        }

        if (move_to[0] == '/')
                return http_queue_error(r, "invalid_path", "?move_to= must be relative to the workspace, not absolute.");
        o->kind = FILE_OP_MOVE;
        o->flag = overwrite;
        o->to = strdup(move_to);
        if (!o->to)
                return MHD_NO;
        return queue_file_op(r, TAKE_PTR(o));
}

/* GET, HEAD, DELETE; PUT and POST with ?mkdir or ?move_to= (a plain PUT is an upload). All
 * of it on the file API's threads (file-ops.h). */
static int route_files(HttpRequest *r) {
        struct MHD_Response *resp = NULL;
        const char *why = NULL, *path = files_path(r, &why);
        Session *s = r->target;
        FileOp *op = NULL;
        unsigned status;
        int ret;

        if (!path)
                return http_queue_error(r, "invalid_path", why);
        status = files_check(r, path, &resp);
        if (status > 0)
                return http_queue(r, status, resp);
        /* the kind is set below */
        ret = file_op_new(FILE_OP_STAT, s->id, s->workspace_host_dir, path, &op);
        if (ret < 0)
                return http_queue_error(r, "internal", strerror(-ret));

        if (streq(r->method, "GET") || streq(r->method, "HEAD"))
                return route_files_get(r, op);
        if (streq(r->method, "DELETE"))
                return route_files_delete(r, op);
        return route_files_change(r, op);
}

bool http_route_is_upload(HttpRequest *r) {
        /* ?mkdir=false is an upload; a ?mkdir= that is no flag is route_files_change()'s to refuse */
        return r->route && FLAGS_SET(r->route->flags, HTTP_ROUTE_FILES) && streq(r->method, "PUT") &&
               query_bool(r, "mkdir", false) == 0 && !query(r, "move_to");
}

int http_route_upload_begin(HttpRequest *r) {
        Manager *m = r->server->manager;
        _cleanup_(workspace_close) Workspace ws = WORKSPACE_NULL;
        struct MHD_Response *resp = NULL;
        const char *why = NULL, *path = files_path(r, &why), *v;
        mode_t mode = MODE_INVALID;
        uint64_t length;
        unsigned status;
        int ret;

        status = http_route_resolve(r, &resp);
        if (status == 0 && !path)
                status = refuse(&resp, "invalid_path", why);
        if (status == 0)
                status = files_prepare(r, path, &ws, &resp);
        if (status > 0)
                return http_refuse_upload(r, status, resp);

        v = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (v && startswith(v, "multipart/"))
                return http_refuse_upload_error(r, "unsupported_media_type", "Send the file's bytes as the body (application/octet-stream), "
                                                              "not a form.");
        v = query(r, "mode");
        if (v) {
                unsigned bits;

                if (parse_mode(v, &bits) < 0)
                        return http_refuse_upload_error(r, "invalid_value", "?mode= must be octal permission bits, at most 0777.");
                mode = (mode_t) bits;
        }
        v = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (v && (parse_uint64(v, &length) < 0 || length > m->config.max_file_bytes)) {
                status = files_error(m, -EFBIG, &resp);
                return http_refuse_upload(r, status, resp);
        }

        ret = files_upload_begin(&ws, path, mode, m->config.max_file_bytes, &r->upload);
        if (ret < 0) {
                status = files_error(m, ret, &resp);
                return http_refuse_upload(r, status, resp);
        }
        r->upload_path = strdup(path);
        if (!r->upload_path)
                return MHD_NO; /* on_completed() drops the upload */
        memcpy(r->upload_session, r->target->id, sizeof(r->upload_session));
        return MHD_YES;
}

int http_route_upload_data(HttpRequest *r, const char *data, size_t n) {
        int ret;

        ret = files_upload_write(r->upload, data, n);
        if (ret < 0) {
                /* Drop the file now, the rest of the body as it comes, then say why. */
                r->upload = files_upload_free(r->upload);
                r->status = files_error(r->server->manager, ret, &r->response);
                if (!r->response)
                        return MHD_NO;
        }
        return MHD_YES;
}

int http_route_upload_finish(HttpRequest *r) {
        Session *s = session_find(r->server->manager, r->upload_session);
        bool created;
        struct stat st;
        int ret;

        if (!r->upload)
                return MHD_NO;
        if (!s || s->state != SESSION_ACTIVE) {
                r->upload = files_upload_free(r->upload);
                return http_queue_error(r, "session_not_active", "The session was closed while the file came in.");
        }
        ret = files_upload_commit(r->upload, &created, &st);
        r->upload = files_upload_free(r->upload);
        if (ret < 0)
                return queue_files_error(r, ret);
        s->disk_checked_usec = 0;
        session_touch(s);
        return queue_entry(r, created ? MHD_HTTP_CREATED : MHD_HTTP_OK, r->upload_path, &st);
}

/* --- relays to exposed ports --------------------------------------------------- */

bool http_route_is_relay(HttpRequest *r) {
        return r->route && FLAGS_SET(r->route->flags, HTTP_ROUTE_RELAY);
}

static const HttpMethod *route_method(const HttpRoute *route, const char *method);

/* From the headers: the session, the method, the port; then the relay, which takes the body. */
int http_route_relay_begin(HttpRequest *r) {
        _cleanup_free_ char *socket_path = NULL, *prefix = NULL;
        struct MHD_Response *resp = NULL;
        RequestError e = {};
        unsigned status;
        uint64_t v;
        Port *p;

        if (r->url_has_nul)
                return http_refuse_upload_error(r, "invalid_url", "The URL contains a NUL byte (%00).");
        status = http_route_resolve(r, &resp);
        if (status > 0)
                return http_refuse_upload(r, status, resp);
        if (!route_method(r->route, r->method)) {
                char allow[96], msg[160];

                http_route_allow(r->route, allow, sizeof(allow));
                snprintf(msg, sizeof(msg), "Method %s is not relayed; use %s.", r->method, allow);
                resp = http_error_response("method_not_allowed", msg);
                if (resp)
                        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
                return http_refuse_upload(r, http_error_status("method_not_allowed"), resp);
        }
        if (session_check_active(r->target, &e) < 0)
                return http_refuse_upload_error(r, e.code, e.message);
        if (parse_uint64(r->params[1], &v) < 0 || v < 1 || v > 65535)
                return http_refuse_upload_error(r, "port_not_exposed", "No such exposed port: a port is a number from 1 to 65535.");
        p = port_find(r->target, (uint16_t) v);
        if (!p)
                return http_refuse_upload_error(r, "port_not_exposed", "That port of the session is not exposed.");
        if (port_socket_path(p, &socket_path) < 0 ||
            asprintf(&prefix, "/v1/sessions/%s/ports/%s", r->target->id, r->params[1]) < 0)
                return MHD_NO;
        session_touch(r->target);
        return http_relay_begin(r, socket_path, prefix);
}

/* Relayed requests never get here: http.c hands them to http_route_relay_begin(). */
static int route_relay(HttpRequest *r) {
        return http_queue_error(r, "internal", "A relayed request reached the dispatch.");
}

/* --- dispatch ------------------------------------------------------------- */

#define GET(h, op) { "GET", h, op }
#define POST(h, op) { "POST", h, op }
#define PUT(h, op) { "PUT", h, op }
#define DELETE(h, op) { "DELETE", h, op }
#define PATCH(h, op) { "PATCH", h, op }
#define OPTIONS(h, op) { "OPTIONS", h, op }
#define ANYONE _AUTHZ_OP_INVALID

/* Every route served. The first pattern that matches the path wins; then the method picks
 * the handler (405 with Allow for another), GET serving HEAD too. Placeholders are looked up
 * before the method is: a session the caller may not see is 404 whatever the method. Each
 * method names the operation authz_decide() is asked about. */
const HttpRoute http_routes[] = {
        { "/healthz", HTTP_ROUTE_PUBLIC, { GET(route_healthz, ANYONE) } },
        { "/readyz", HTTP_ROUTE_PUBLIC, { GET(route_readyz, ANYONE) } },
        { "/metrics", 0, { GET(route_metrics, AUTHZ_METRICS) } },
        { "/v1/health", 0, { GET(route_health, ANYONE) } },
        { "/v1/pool", 0, { GET(route_pool, ANYONE) } },
        { "/v1/drain", 0,
          { GET(route_drain_state, AUTHZ_DRAIN), POST(route_drain, AUTHZ_DRAIN), DELETE(route_undrain, AUTHZ_DRAIN) } },
        /* showing is everyone's, removing an administrator's (http_route()); a PUT streams its
         * body to the unpacker and is decided before that (http_route_image_import_begin()) */
        { "/v1/images", 0, { GET(route_list_images, ANYONE) } },
        { "/v1/images/{image}", HTTP_ROUTE_IMAGE,
          { GET(route_get_image, ANYONE), PUT(route_get_image, AUTHZ_IMAGES),
            DELETE(route_delete_image, AUTHZ_IMAGES) } },
        /* creating is decided in the handler, with the scope of the body */
        { "/v1/sessions", 0, { GET(route_list_sessions, AUTHZ_LIST), POST(route_create_session, AUTHZ_CREATE) } },
        { "/v1/sessions/{sid}", HTTP_ROUTE_SESSION,
          { GET(route_get_session, AUTHZ_GET), DELETE(route_delete_session, AUTHZ_CLOSE) } },
        { "/v1/sessions/{sid}/activity", HTTP_ROUTE_SESSION, { POST(route_activity, AUTHZ_GET) } },
        { "/v1/sessions/{sid}/freeze", HTTP_ROUTE_SESSION, { POST(route_freeze, AUTHZ_FREEZE) } },
        { "/v1/sessions/{sid}/thaw", HTTP_ROUTE_SESSION, { POST(route_thaw, AUTHZ_FREEZE) } },
        { "/v1/sessions/{sid}/commands", HTTP_ROUTE_SESSION,
          { GET(route_list_commands, AUTHZ_GET), POST(route_start_command, AUTHZ_EXEC) } },
        { "/v1/sessions/{sid}/commands/{rid}", HTTP_ROUTE_SESSION | HTTP_ROUTE_COMMAND,
          { GET(route_get_command, AUTHZ_GET) } },
        { "/v1/sessions/{sid}/commands/{rid}/events", HTTP_ROUTE_SESSION | HTTP_ROUTE_COMMAND,
          { GET(route_events, AUTHZ_GET) } },
        { "/v1/sessions/{sid}/commands/{rid}/signal", HTTP_ROUTE_SESSION | HTTP_ROUTE_COMMAND,
          { POST(route_signal, AUTHZ_SIGNAL) } },
        { "/v1/sessions/{sid}/commands/{rid}/stdin", HTTP_ROUTE_SESSION | HTTP_ROUTE_COMMAND,
          { POST(route_stdin, AUTHZ_STDIN) } },
        { "/v1/sessions/{sid}/commands/{rid}/resize", HTTP_ROUTE_SESSION | HTTP_ROUTE_COMMAND,
          { POST(route_resize, AUTHZ_SIGNAL) } },
        { "/v1/sessions/{sid}/commands/{rid}/tty", HTTP_ROUTE_SESSION | HTTP_ROUTE_COMMAND,
          { GET(route_tty, AUTHZ_GET) } },
        /* Exposing a port gives what the session serves to whoever reaches the socket: the
         * right to run commands in it. */
        { "/v1/sessions/{sid}/ports", HTTP_ROUTE_SESSION,
          { GET(route_list_ports, AUTHZ_GET), POST(route_expose_port, AUTHZ_EXEC) } },
        /* What the port serves, relayed: "ports/P/" and below (a trailing slash), before the
         * port itself ("ports/P"). */
        { "/v1/sessions/{sid}/ports/{port}/{path}", HTTP_ROUTE_SESSION | HTTP_ROUTE_TAIL | HTTP_ROUTE_RELAY,
          { GET(route_relay, AUTHZ_EXEC), POST(route_relay, AUTHZ_EXEC), PUT(route_relay, AUTHZ_EXEC),
            PATCH(route_relay, AUTHZ_EXEC), DELETE(route_relay, AUTHZ_EXEC), OPTIONS(route_relay, AUTHZ_EXEC) } },
        { "/v1/sessions/{sid}/ports/{port}", HTTP_ROUTE_SESSION,
          { GET(route_get_port, AUTHZ_GET), DELETE(route_unexpose_port, AUTHZ_EXEC) } },
        /* The top of the workspace, then a path in it ("files/" is the top too). A plain PUT
         * is an upload, which http_route_upload_begin() takes before its body. */
        { "/v1/sessions/{sid}/files", HTTP_ROUTE_SESSION | HTTP_ROUTE_FILES,
          { GET(route_files, AUTHZ_FILES), PUT(route_files, AUTHZ_FILES), POST(route_files, AUTHZ_FILES),
            DELETE(route_files, AUTHZ_FILES) } },
        { "/v1/sessions/{sid}/files/{path}", HTTP_ROUTE_SESSION | HTTP_ROUTE_FILES | HTTP_ROUTE_TAIL,
          { GET(route_files, AUTHZ_FILES), PUT(route_files, AUTHZ_FILES), POST(route_files, AUTHZ_FILES),
            DELETE(route_files, AUTHZ_FILES) } },
};

const size_t http_routes_n = ELEMENTSOF(http_routes);

const HttpRoute *http_route_find(const RoutePath *path, const char *ret_params[static ROUTE_PARAMS_MAX],
                                 size_t *ret_n_params) {
        for (size_t i = 0; i < http_routes_n; i++) {
                if (!route_pattern_match(http_routes[i].pattern, FLAGS_SET(http_routes[i].flags, HTTP_ROUTE_TAIL), path,
                                         ret_params, ret_n_params))
                        continue;
                /* a relay's tail follows a slash: "ports/8000" is the port, "ports/8000/" its "/" */
                if (FLAGS_SET(http_routes[i].flags, HTTP_ROUTE_RELAY)) {
                        const char *tail = ret_params[*ret_n_params - 1];

                        if (tail == path->path || tail[-1] != '/')
                                continue;
                }
                return &http_routes[i];
        }
        return NULL;
}

void http_route_allow(const HttpRoute *route, char *buf, size_t n) {
        size_t l = 0;

        buf[0] = 0;
        for (size_t i = 0; i < HTTP_METHODS_MAX && route->methods[i].name; i++)
                l += (size_t) snprintf(buf + MIN(l, n), n - MIN(l, n), "%s%s", i > 0 ? ", " : "", route->methods[i].name);
}

void http_routes_dump(FILE *f) {
        for (size_t i = 0; i < http_routes_n; i++)
                for (size_t j = 0; j < HTTP_METHODS_MAX && http_routes[i].methods[j].name; j++)
                        fprintf(f, "%s %s\n", http_routes[i].methods[j].name, http_routes[i].pattern);
}

int http_route_match(HttpRequest *r) {
        int ret;

        ret = route_path_split(r->url, &r->path);
        if (ret < 0)
                return ret;
        r->route = http_route_find(&r->path, r->params, &r->n_params);
        return 0;
}

/* The method's entry of the route; NULL for a method it does not serve. */
static const HttpMethod *route_method(const HttpRoute *route, const char *method) {
        for (size_t i = 0; i < HTTP_METHODS_MAX && route->methods[i].name; i++)
                if (streq(route->methods[i].name, method) || (streq(method, "HEAD") && streq(route->methods[i].name, "GET")))
                        return &route->methods[i];
        return NULL;
}

/* What authz_decide() is asked for this request: the method's operation, else (a method
 * the route does not serve: 405 comes later) the route's first. */
static AuthzOp route_op(HttpRequest *r) {
        const HttpMethod *hm = route_method(r->route, r->method);

        return hm ? hm->op : r->route->methods[0].op;
}

/* Looks up the session and command the path names: 0, or the status of the refusal. */
static unsigned http_route_resolve(HttpRequest *r, struct MHD_Response **ret_resp) {
        Session *s = NULL;

        if (FLAGS_SET(r->route->flags, HTTP_ROUTE_SESSION)) {
                AuthzVerdict v = AUTHZ_HIDDEN;
                const char *reason = "No such session.";

                if (session_id_is_valid(r->params[0]))
                        s = session_find(r->server->manager, r->params[0]);
                if (s)
                        v = authz_decide(&r->caller, http_transport(r), route_op(r),
                                         &(AuthzTarget) { .user = s->user, .session = true, .creator = s->tenant }, &reason);
                if (v == AUTHZ_FORBIDDEN)
                        return refuse(ret_resp, "forbidden", reason);
                /* Not here (or not to be seen): another node's, when the id names another node
                 * (a session here whose id names the node's former name is served as any). */
                if (v != AUTHZ_ALLOW && session_id_is_valid(r->params[0]) &&
                    !session_id_is_of_node(r->params[0], r->server->manager->config.node_name)) {
                        *ret_resp = http_wrong_node_response(r->params[0], r->server->manager->config.node_name);
                        return http_error_status("wrong_node");
                }
                if (v != AUTHZ_ALLOW)
                        return refuse(ret_resp, "not_found", "No such session.");
                r->target = s;
        }
        if (FLAGS_SET(r->route->flags, HTTP_ROUTE_COMMAND)) {
                Command *c = request_id_is_valid(r->params[1]) ? session_find_command(s, r->params[1]) : NULL;

                if (!c)
                        return refuse(ret_resp, "not_found", "No such command.");
                r->target_command = c;
        }
        return 0;
}

static HttpHandler route_handler(const HttpRoute *route, const char *method) {
        const HttpMethod *hm = route_method(route, method);

        return hm ? hm->handler : NULL;
}

int http_route(HttpRequest *r) {
        struct MHD_Response *resp = NULL;
        HttpHandler handler;
        unsigned status;
        char allow[64];

        /* A file path with %00 is the file API's to refuse, after the session. */
        if (r->url_has_nul && !(r->route && FLAGS_SET(r->route->flags, HTTP_ROUTE_FILES)))
                return http_queue_error(r, "invalid_url", "The URL contains a NUL byte (%00).");
        if (!r->route)
                return not_found(r, "No such route.");

        if (authz_op_is_daemon_wide(route_op(r))) {
                const char *reason = NULL;

                if (authz_decide(&r->caller, http_transport(r), route_op(r), NULL, &reason) != AUTHZ_ALLOW)
                        return http_queue_error(r, "forbidden", reason);
        }

        status = http_route_resolve(r, &resp);
        if (status > 0)
                return http_queue(r, status, resp);

        handler = route_handler(r->route, r->method);
        if (!handler) {
                http_route_allow(r->route, allow, sizeof(allow));
                return method_not_allowed(r, allow);
        }
        return handler(r);
}
