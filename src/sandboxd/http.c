/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <inttypes.h>
#include <malloc.h>
#include <strings.h>
#include <sys/socket.h>

#include "auth.h"
#include "error-table.h"
#include "http.h"
#include "image-import.h"
#include "list.h"
#include "log.h"
#include "ndjson.h"

/* Per connection: what the URL decoder saw for the request being parsed, and, on TCP,
 * whether it sent an authenticated request yet. */
struct HttpConnection {
        HttpServer *server;
        int fd;
        bool url_has_nul;
        char *raw_uri;        /* the request target of the request being parsed, as sent */
        bool unauthenticated; /* in server->unauthenticated */
        uint64_t deadline;    /* CLOCK_MONOTONIC: closed then, unless authenticated */
        LIST_FIELDS(HttpConnection, unauth);
};

static HttpConnection *connection_of(struct MHD_Connection *connection) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return info ? info->socket_context : NULL;
}

/* --- unauthenticated TCP connections ------------------------------------------ */

/* A TCP connection counts apart from the others, and only for a short while, until it sent
 * a request with a valid key: whoever has none can take only the places of others who have
 * none, never those of tenants. */

static void unauth_remove(HttpConnection *c) {
        HttpServer *s = c->server;

        if (!c->unauthenticated)
                return;
        if (s->unauthenticated_oldest == c)
                s->unauthenticated_oldest = c->unauth_prev;
        LIST_REMOVE(unauth, s->unauthenticated, c);
        c->unauthenticated = false;
        s->n_unauthenticated--;
}

static void unauth_close(HttpConnection *c, const char *why) {
        HttpServer *s = c->server;

        log_debug("Closing a TCP connection that sent no authenticated request: %s.", why);
        s->manager->metrics.http_unauthenticated_closed++;
        /* MHD sees the end on its next run and closes the connection as if the client left. */
        (void) shutdown(c->fd, SHUT_RDWR);
        unauth_remove(c);
}

static void unauth_arm(HttpServer *s) {
        int r;

        if (!s->unauthenticated_oldest) {
                (void) sd_event_source_set_enabled(s->auth_timer, SD_EVENT_OFF);
                return;
        }
        r = sd_event_source_set_time(s->auth_timer, s->unauthenticated_oldest->deadline);
        if (r >= 0)
                r = sd_event_source_set_enabled(s->auth_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the authentication timer, ignoring: %m");
}

static int on_auth_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        HttpServer *s = userdata;

        while (s->unauthenticated_oldest && s->unauthenticated_oldest->deadline <= usec)
                unauth_close(s->unauthenticated_oldest, "no authenticated request within AuthenticationTimeoutSec=");
        unauth_arm(s);
        return 0;
}

/* Before MHD takes a new TCP connection: when the unauthenticated ones are at their limit,
 * the oldest of them makes room. A tenant's client sends its key at once and is out of
 * their number before the flood has turned over; refusing the newest instead would lock
 * tenants out for as long as the flood lasts. */
static enum MHD_Result on_accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
        HttpServer *s = cls;
        Manager *m = s->manager;

        if (s->n_unauthenticated < m->config.max_unauthenticated || !s->unauthenticated_oldest)
                return MHD_YES;

        if (!s->unauth_full_logged)
                log_notice("%u TCP connections without an authenticated request (MaxUnauthenticatedConnections=): "
                           "closing the oldest for each new one.", s->n_unauthenticated);
        s->unauth_full_logged = true;
        unauth_close(s->unauthenticated_oldest, "MaxUnauthenticatedConnections= reached");
        unauth_arm(s);
        return MHD_YES;
}

static void unauth_add(HttpServer *s, HttpConnection *c, struct MHD_Connection *connection) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        uint64_t now;

        if (!info || sd_event_now(s->manager->event, CLOCK_MONOTONIC, &now) < 0)
                return;
        c->fd = info->connect_fd;
        c->deadline = now + s->manager->config.authentication_timeout_usec;
        c->unauthenticated = true;
        LIST_PREPEND(unauth, s->unauthenticated, c);
        if (!s->unauthenticated_oldest)
                s->unauthenticated_oldest = c;
        if (++s->n_unauthenticated == 1)
                unauth_arm(s);
}

/* A valid key with the headers: the connection is a tenant's from now on. Returns the
 * tenant to keep for the request (NULL: none, or not needed). */
static char *request_authenticate_early(HttpRequest *r) {
        const char *h = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        const char *token = h ? startswith(h, "Bearer ") : NULL;
        HttpConnection *c = connection_of(r->connection);
        char *tenant = NULL;

        if (!c || !c->unauthenticated || !token || auth_check_key(r->server->manager, token, &tenant) < 0)
                return NULL;
        unauth_remove(c);
        if (c->server->n_unauthenticated == 0)
                c->server->unauth_full_logged = false;
        return tenant;
}

struct MHD_Response *http_json_response(const char *json, size_t n) {
        struct MHD_Response *resp;

        resp = MHD_create_response_from_buffer(n, (void *) json, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return NULL;
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        (void) MHD_add_response_header(resp, "Cache-Control", "no-store");
        return resp;
}

struct MHD_Response *http_error_response(const char *code, const char *message) {
        struct MHD_Response *resp;
        Buf b = {};

        if (buf_puts(&b, "{\"error\":{\"code\":") < 0 || json_append_string(&b, code, strlen(code)) < 0 ||
            buf_puts(&b, ",\"message\":") < 0 || json_append_string(&b, message, strlen(message)) < 0 ||
            buf_puts(&b, "}}\n") < 0) {
                buf_done(&b);
                return NULL;
        }
        resp = http_json_response(b.data, b.len);
        buf_done(&b);
        return resp;
}

struct MHD_Response *http_wrong_node_response(const char *id, const char *this_node) {
        struct MHD_Response *resp;
        size_t n = session_id_node_len(id);
        char message[256];
        Buf b = {};

        assert(n > 0 && n <= NODE_NAME_MAX);
        snprintf(message, sizeof(message), "Session %s is on node %.*s, not on this one (%s): ask node %.*s.", id,
                 (int) n, id, this_node, (int) n, id);
        if (buf_puts(&b, "{\"error\":{\"code\":\"wrong_node\",\"message\":") < 0 ||
            json_append_string(&b, message, strlen(message)) < 0 || buf_puts(&b, ",\"node\":") < 0 ||
            json_append_string(&b, id, n) < 0 || buf_puts(&b, "}}\n") < 0) {
                buf_done(&b);
                return NULL;
        }
        resp = http_json_response(b.data, b.len);
        buf_done(&b);
        return resp;
}

int http_queue(HttpRequest *r, unsigned status, struct MHD_Response *resp) {
        enum MHD_Result ret;

        if (!resp)
                return MHD_NO; /* out of memory: drop the connection */
        if (!r->server->is_unix) {
                HttpConnection *c = connection_of(r->connection);

                /* Answered, but without a key it does not keep its place. */
                if (c && c->unauthenticated)
                        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        }
        ret = MHD_queue_response(r->connection, status, resp);
        MHD_destroy_response(resp);
        metrics_count_http(&r->server->manager->metrics, r->route ? r->route->pattern : "unmatched", status);
        log_debug("%s %s -> %u", r->method, r->url, status);
        return ret;
}

unsigned http_error_status(const char *code) {
        const ApiError *a = api_error_from_code(code);

        if (!a) {
                log_error("Error code '%s' is not in the error table; answering 500.", code);
                return MHD_HTTP_INTERNAL_SERVER_ERROR;
        }
        return a->http_status;
}

int http_queue_error(HttpRequest *r, const char *code, const char *message) {
        return http_queue(r, http_error_status(code), http_error_response(code, message));
}

int http_queue_json(HttpRequest *r, unsigned status, Buf *json) {
        int ret;

        if (buf_puts(json, "\n") < 0) {
                buf_done(json);
                return MHD_NO;
        }
        ret = http_queue(r, status, http_json_response(json->data, json->len));
        buf_done(json);
        return ret;
}

void http_suspend(HttpRequest *r) {
        if (r->suspended)
                return;
        r->suspended = true;
        r->server->manager->n_http_waiting++;
        MHD_suspend_connection(r->connection);
}

void http_resume(HttpRequest *r) {
        if (!r->suspended)
                return;
        r->suspended = false;
        r->server->manager->n_http_waiting--;
        MHD_resume_connection(r->connection);
}

void http_complete(HttpRequest *r, unsigned status, struct MHD_Response *resp) {
        r->status = status;
        r->response = resp;
        http_resume(r);
}

void http_complete_error(HttpRequest *r, const char *code, const char *message) {
        http_complete(r, http_error_status(code), http_error_response(code, message));
}

/* --- streaming a command's event log ------------------------------------------- */

typedef struct StreamReader {
        OutputReader reader;
        Metrics *metrics;
        struct MHD_Connection *connection;
        bool suspended;
} StreamReader;

static void stream_notify(OutputReader *r) {
        StreamReader *s = r->userdata;

        if (s->suspended) {
                s->suspended = false;
                MHD_resume_connection(s->connection);
        }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
        StreamReader *s = cls;
        ssize_t n;

        n = output_read(&s->reader, buf, max);
        if (n > 0) {
                s->metrics->bytes_streamed += (uint64_t) n;
                return n;
        }
        if (n < 0)
                return MHD_CONTENT_READER_END_OF_STREAM; /* the end (or the command is gone) */

        /* Nothing new: park the connection until the command appends (returning 0 would spin). */
        s->suspended = true;
        MHD_suspend_connection(s->connection);
        return 0;
}

static void stream_free(void *cls) {
        StreamReader *s = cls;

        output_detach(&s->reader);
        free(s);
}

struct MHD_Response *http_command_stream_response(HttpRequest *r, Command *c, uint64_t offset) {
        struct MHD_Response *resp;
        StreamReader *s;

        s = calloc(1, sizeof(StreamReader));
        if (!s)
                return NULL;
        s->connection = r->connection;
        s->metrics = &r->server->manager->metrics;
        s->reader.notify = stream_notify;
        s->reader.userdata = s;
        output_attach(c->output, &s->reader, offset);

        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256 * 1024, stream_read, s, stream_free);
        if (!resp) {
                stream_free(s);
                return NULL;
        }
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
        (void) MHD_add_response_header(resp, "Cache-Control", "no-store");
        (void) MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        return resp;
}

/* --- the MHD callbacks ------------------------------------------------------- */

/* The peer of the unix socket, as a caller: false if its credentials cannot be read. */
static bool peer_caller(HttpRequest *r) {
        const union MHD_ConnectionInfo *info;
        struct ucred cred;
        socklen_t l = sizeof(cred);

        info = MHD_get_connection_info(r->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!info || getsockopt(info->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &l) < 0)
                return false;
        if (auth_uid_caller(r->server->manager, cred.uid, &r->caller, &r->caller_name) < 0)
                return false;
        return asprintf(&r->tenant, "unix:%u", (unsigned) cred.uid) >= 0;
}

/* Who is asking: peer credentials on the unix socket, a bearer key on TCP; then whether
 * the transport serves that caller (authz_decide() with the list, which every admitted
 * caller may ask for). On refusal, false and the answer to give. */
static bool request_authorize(HttpRequest *r, unsigned *ret_status, struct MHD_Response **ret_resp) {
        HttpServer *server = r->server;

        if (server->is_unix) {
                const char *reason = "Could not read the peer's credentials.";

                if (!peer_caller(r) ||
                    authz_decide(&r->caller, AUTHZ_HTTP_UNIX, AUTHZ_LIST, NULL, &reason) != AUTHZ_ALLOW) {
                        server->manager->metrics.auth_failures++;
                        *ret_status = http_error_status("forbidden");
                        *ret_resp = http_error_response("forbidden", reason);
                        return false;
                }
        } else if (!(r->route && FLAGS_SET(r->route->flags, HTTP_ROUTE_PUBLIC))) {
                const char *h = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
                const char *token = h ? startswith(h, "Bearer ") : NULL;

                /* the key may have been checked already, when the request began */
                if (!r->tenant && (!token || auth_check_key(server->manager, token, &r->tenant) < 0)) {
                        server->manager->metrics.auth_failures++;
                        *ret_status = http_error_status("unauthorized");
                        *ret_resp = http_error_response(
                                "unauthorized", token ? "Invalid API key." : "Missing 'Authorization: Bearer <key>' header.");
                        if (*ret_resp)
                                (void) MHD_add_response_header(*ret_resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
                        return false;
                }
                auth_tenant_caller(server->manager, r->tenant, &r->caller);
        }
        r->authorized = true;
        return true;
}

int http_refuse_upload(HttpRequest *r, unsigned status, struct MHD_Response *resp) {
        const char *expect = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);

        /* A client that sends its body without waiting would be cut off mid-send by an early
         * answer, and might never read it: unless the body is too large to be worth reading,
         * read and drop it, then answer. */
        if (status == MHD_HTTP_CONTENT_TOO_LARGE || (expect && strcasecmp(expect, "100-continue") == 0))
                return http_queue(r, status, resp);
        if (!resp)
                return MHD_NO;
        r->response = resp;
        r->status = status;
        return MHD_YES;
}

int http_refuse_upload_error(HttpRequest *r, const char *code, const char *message) {
        return http_refuse_upload(r, http_error_status(code), http_error_response(code, message));
}

/* Refused from its headers: the answer goes out at once when the client waits for 100
 * Continue (or the body is too large to read), else once the body was read and dropped. */
static int refuse_early(HttpRequest *r, const char *code, const char *message) {
        r->streaming = true; /* the body, if any, is dropped as it comes */
        return http_refuse_upload_error(r, code, message);
}

static void body_too_large_message(Manager *m, char *buf, size_t n) {
        snprintf(buf, n, "Request body is larger than MaxBodySize=%" PRIu64 " bytes.", m->config.max_body_bytes);
}

static enum MHD_Result on_content_encoding(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                           const char *value, size_t value_size) {
        bool *coded = cls;

        if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_ENCODING) == 0 && value && value[0] &&
            strcasecmp(value, "identity") != 0)
                *coded = true;
        return MHD_YES;
}

/* Whether the request has a body with a content coding other than identity (in any of its
 * Content-Encoding fields): sandboxd decodes none, and would take the coded bytes for JSON
 * or store them as the file. */
static bool body_is_coded(struct MHD_Connection *connection) {
        const char *cl = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *te = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        bool coded = false;

        if (!te && (!cl || streq(cl, "0")))
                return false; /* no body */
        (void) MHD_get_connection_values_n(connection, MHD_HEADER_KIND, on_content_encoding, &coded);
        return coded;
}

static bool take_url_has_nul(struct MHD_Connection *connection) {
        HttpConnection *c = connection_of(connection);
        bool v;

        if (!c)
                return false;
        v = c->url_has_nul;
        c->url_has_nul = false;
        return v;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
        HttpServer *server = cls;
        Manager *m = server->manager;
        HttpRequest *r = *con_cls;
        struct MHD_Response *resp;
        unsigned status;

        if (!r) {
                const char *cl, *te;

                r = calloc(1, sizeof(HttpRequest));
                if (!r)
                        return MHD_NO;
                r->server = server;
                r->connection = connection;
                r->method = method;
                r->url = strdup(url);
                if (!r->url) {
                        free(r);
                        return MHD_NO;
                }
                *con_cls = r;
                r->url_has_nul = take_url_has_nul(connection);
                {
                        HttpConnection *c = connection_of(connection);

                        if (c)
                                r->raw_uri = TAKE_PTR(c->raw_uri);
                }
                if (http_route_match(r) < 0)
                        return MHD_NO;
                if (!server->is_unix) {
                        _cleanup_free_ char *tenant = request_authenticate_early(r);

                        /* kept for request_authorize(); a public route takes none */
                        if (tenant && !(r->route && FLAGS_SET(r->route->flags, HTTP_ROUTE_PUBLIC)))
                                r->tenant = TAKE_PTR(tenant);
                }

                /* RFC 9112 3.2: a request of HTTP/1.1 must name its Host (HTTP/1.0 had none). */
                if (version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0 &&
                    !MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST))
                        return refuse_early(r, "invalid_request", "An HTTP/1.1 request needs a Host header.");

                /* MHD decodes chunked bodies only; it would wait for the end of any other
                 * coding until the connection times out. */
                te = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
                if (te && strcasecmp(te, "chunked") != 0)
                        return http_queue_error(r, "not_implemented", "Only the chunked transfer coding is supported.");

                /* A relay passes the body on as it is: its coding is the upstream's business. */
                if (!http_route_is_relay(r) && body_is_coded(connection))
                        return refuse_early(r, "unsupported_encoding",
                                            "sandboxd decodes no Content-Encoding: send the body as it is (identity).");

                /* A file upload is checked and opened before its body comes, which then goes
                 * straight to the file. */
                if (http_route_is_upload(r)) {
                        r->streaming = true;
                        if (!request_authorize(r, &status, &resp))
                                return http_refuse_upload(r, status, resp);
                        return http_route_upload_begin(r);
                }

                /* An image's tar goes to the unpacker as it comes. */
                if (http_route_is_image_import(r)) {
                        r->streaming = true;
                        if (!request_authorize(r, &status, &resp))
                                return http_refuse_upload(r, status, resp);
                        if (m->stopping)
                                return http_refuse_upload_error(r, "stopping", STOPPING_MESSAGE);
                        return http_route_image_import_begin(r);
                }

                /* A relay to an exposed port starts from the headers; its body is streamed. */
                if (http_route_is_relay(r)) {
                        r->relaying = r->streaming = true;
                        if (!request_authorize(r, &status, &resp))
                                return http_refuse_upload(r, status, resp);
                        if (m->stopping)
                                return http_refuse_upload_error(r, "stopping", STOPPING_MESSAGE);
                        return http_route_relay_begin(r);
                }

                /* An announced oversize body: a client that waits for 100 Continue is answered
                 * at once, and sends no body; one that sends it anyway is answered once it was
                 * read and dropped (cut off mid-send, it might never read the answer). */
                cl = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
                if (cl && strtoull(cl, NULL, 10) > m->config.max_body_bytes) {
                        const char *expect = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
                        char msg[128];

                        if (!expect || strcasecmp(expect, "100-continue") != 0) {
                                r->body_too_large = true;
                                return MHD_YES;
                        }
                        body_too_large_message(m, msg, sizeof(msg));
                        return refuse_early(r, "payload_too_large", msg);
                }
                return MHD_YES;
        }

        if (*upload_data_size > 0) {
                if (r->relay && !r->response)
                        return http_relay_data(r, upload_data, upload_data_size);
                if (r->image_import && !r->response)
                        return http_route_image_import_data(r, upload_data, upload_data_size);
                if (r->streaming) {
                        if (r->upload)
                                (void) http_route_upload_data(r, upload_data, *upload_data_size);
                        *upload_data_size = 0; /* after an error: read and dropped */
                        return MHD_YES;
                }
                if (!r->body_too_large && r->body.len + *upload_data_size > m->config.max_body_bytes)
                        r->body_too_large = true;
                if (!r->body_too_large && buf_append(&r->body, upload_data, *upload_data_size) < 0)
                        return MHD_NO;
                *upload_data_size = 0;
                return MHD_YES;
        }

        /* An asynchronous handler finished while we were suspended, or a refusal waited for
         * the end of the body. */
        if (r->response) {
                resp = TAKE_PTR(r->response);
                return http_queue(r, r->status, resp);
        }
        if (r->suspended)
                return MHD_YES;

        if (r->relay)
                return http_relay_finish(r);
        if (r->relaying)
                return MHD_NO; /* refused without an answer: out of memory */
        if (r->image_import)
                return http_route_image_import_finish(r);
        if (r->streaming)
                return http_route_upload_finish(r);

        if (r->body_too_large) {
                char msg[128];

                body_too_large_message(m, msg, sizeof(msg));
                return http_queue_error(r, "payload_too_large", msg);
        }

        if (!request_authorize(r, &status, &resp))
                return http_queue(r, status, resp);

        if (r->server->manager->stopping) {
                resp = http_error_response("stopping", STOPPING_MESSAGE);
                if (resp)
                        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "5");
                return http_queue(r, http_error_status("stopping"), resp);
        }
        return http_route(r);
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
        HttpRequest *r = *con_cls;

        if (!r)
                return;
        r->op = op_free(r->op);     /* its function is never called now */
        if (r->ws)
                http_ws_abandon(TAKE_PTR(r->ws)); /* it ended before its upgrade */
        file_op_detach(r->file_op); /* nor a file operation's */
        http_relay_detach(r);
        if (r->image_import) {
                /* the body did not come to its end: the unpacker stops and removes its tree */
                image_import_abandon(TAKE_PTR(r->image_import));
        }
        if (r->suspended) {
                r->suspended = false;
                r->server->manager->n_http_waiting--;
        }
        if (r->response)
                MHD_destroy_response(r->response);
        if (r->upload) {
                /* The body did not come to its end (client gone, timeout): nothing is kept. */
                log_debug("Upload of %s in session %s ended before its body did (%d), dropping it.", r->upload_path,
                          r->upload_session, (int) toe);
                r->upload = files_upload_free(r->upload);
        }
        buf_done(&r->body);
        route_path_done(&r->path);
        free(r->url);
        free(r->tenant);
        free(r->caller_name);
        free(r->upload_path);
        free(r->raw_uri);
        free(r);
        *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
        HttpServer *server = cls;
        Manager *m = server->manager;

        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                HttpConnection *c;

                m->n_connections++;
                /* NULL: %00 goes unnoticed, and the connection is not counted as unauthenticated */
                c = *socket_context = calloc(1, sizeof(HttpConnection));
                if (c) {
                        c->server = server;
                        c->fd = -EBADF;
                        if (!server->is_unix)
                                unauth_add(server, c, connection);
                }
        } else {
                HttpConnection *c = *socket_context;

                if (m->n_connections > 0)
                        m->n_connections--;
                if (c) {
                        unauth_remove(c);
                        if (server->n_unauthenticated == 0)
                                server->unauth_full_logged = false;
                }
                if (c)
                        free(c->raw_uri);
                free(c);
                *socket_context = NULL;
                /* The last connection of a burst is gone: give back what its buffers took
                 * (64 KiB for each event stream), which malloc would otherwise keep. */
                if (m->n_connections == 0)
                        (void) malloc_trim(0);
        }
        manager_check_idle(m);
}

/* The request target as sent, before MHD decodes it: a relay passes it on unchanged. Bounded
 * by MHD's memory limit of the connection; NULL returned leaves the request's context alone. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *connection) {
        HttpConnection *c = connection_of(connection);

        if (c) {
                free(c->raw_uri);
                c->raw_uri = strdup(uri); /* NULL: a relay refuses the request */
        }
        return NULL;
}

/* MHD's own decoding, noting a %00: it would silently cut the path or value short there. */
static size_t on_unescape(void *cls, struct MHD_Connection *connection, char *s) {
        size_t n = MHD_http_unescape(s);

        if (strlen(s) != n) {
                HttpConnection *c = connection_of(connection);

                if (c)
                        c->url_has_nul = true;
        }
        return n;
}

static _printf_(2, 0) void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        char buf[512];

        (void) vsnprintf(buf, sizeof(buf), fmt, ap);
        buf[strcspn(buf, "\n")] = 0;
        log_debug("libmicrohttpd: %s", buf);
}

/* --- sd-event glue ---------------------------------------------------------- */

static void http_server_rearm(HttpServer *s) {
        MHD_UNSIGNED_LONG_LONG timeout_ms;
        uint64_t now, want, armed, slack;
        int enabled = SD_EVENT_OFF, r;

        /* Every change of the timer is a timerfd_settime() when sd-event next prepares, and
         * this runs at every loop iteration: arming and disarming it there was a fifth of
         * sandboxd's time streaming output. So: work due now goes to a defer source; without
         * a timeout, a timer still armed stays so (it fires once for nothing); and a timer
         * armed within an eighth of the timeout of the new deadline stays (MHD's timeouts are
         * connections' idle timeouts, which move with every byte sent). */
        if (MHD_get_timeout(s->daemon, &timeout_ms) != MHD_YES)
                return;
        if (timeout_ms == 0) {
                r = sd_event_source_set_enabled(s->now, SD_EVENT_ONESHOT);
                goto done;
        }
        r = sd_event_now(s->manager->event, CLOCK_MONOTONIC, &now);
        if (r < 0)
                goto done;
        timeout_ms = MIN(timeout_ms, (MHD_UNSIGNED_LONG_LONG) 24 * 3600 * 1000);
        want = now + timeout_ms * USEC_PER_MSEC;
        slack = timeout_ms * USEC_PER_MSEC / 8;
        if (sd_event_source_get_enabled(s->timer, &enabled) >= 0 && enabled != SD_EVENT_OFF &&
            sd_event_source_get_time(s->timer, &armed) >= 0 && armed + slack >= want && armed <= want + slack)
                return;
        r = sd_event_source_set_time(s->timer, want);
        if (r >= 0)
                r = sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
done:
        if (r < 0)
                log_warning_errno(r, "Failed to arm HTTP timer, ignoring: %m");
}

static int on_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        HttpServer *s = userdata;

        (void) MHD_run(s->daemon);
        http_server_rearm(s);
        return 0;
}

static int on_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        HttpServer *s = userdata;

        (void) MHD_run(s->daemon);
        http_server_rearm(s);
        return 0;
}

static int on_now(sd_event_source *es, void *userdata) {
        HttpServer *s = userdata;

        (void) MHD_run(s->daemon);
        http_server_rearm(s);
        return 0;
}

/* Resumed connections are only processed on the next MHD_run(): run once per loop
 * iteration so responses queued from D-Bus callbacks go out without waiting. */
static int on_post(sd_event_source *es, void *userdata) {
        HttpServer *s = userdata;

        (void) MHD_run(s->daemon);
        http_server_rearm(s);
        return 0;
}

int http_server_new(Manager *m, int fd, bool is_unix, HttpServer **ret) {
        const union MHD_DaemonInfo *info;
        HttpServer *s;
        int r;

        s = calloc(1, sizeof(HttpServer));
        if (!s)
                return -ENOMEM;
        s->manager = m;
        s->is_unix = is_unix;

        /* On TCP, unauthenticated connections have their own limit and deadline (unix peers
         * are known from the start): see on_accept_policy(). */
        if (!is_unix) {
                r = sd_event_add_time(m->event, &s->auth_timer, CLOCK_MONOTONIC, USEC_INFINITY, USEC_PER_SEC / 10,
                                      on_auth_timer, s);
                if (r < 0) {
                        free(s);
                        return log_error_errno(r, "Failed to add the HTTP authentication timer: %m");
                }
                (void) sd_event_source_set_enabled(s->auth_timer, SD_EVENT_OFF);
                (void) sd_event_source_set_description(s->auth_timer, "http-auth-deadline");
        }

        s->daemon = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG, 0,
                is_unix ? NULL : on_accept_policy, s,
                on_request, s,
                MHD_OPTION_LISTEN_SOCKET, fd,
                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned) m->config.max_connections,
                /* Counted per address of a TCP peer (MHD ignores it on the unix socket). */
                MHD_OPTION_PER_IP_CONNECTION_LIMIT, is_unix ? 0u : (unsigned) m->config.max_connections_per_ip,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) m->config.connection_timeout_sec,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) (64 * 1024),
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, s,
                MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                /* SIGPIPE is ignored (daemon_startup()): lets MHD send files with sendfile(). */
                MHD_OPTION_SIGPIPE_HANDLED_BY_APP, (int) 1,
                MHD_OPTION_END);
        if (!s->daemon) {
                sd_event_source_disable_unref(s->auth_timer);
                free(s);
                return log_error_errno(-EIO, "Failed to start the HTTP server on fd %d.", fd);
        }

        info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info) {
                r = -EIO;
                goto fail;
        }
        r = sd_event_add_io(m->event, &s->io, info->epoll_fd, EPOLLIN, on_io, s);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_description(s->io, "http-io");
        /* Accuracy 1 µs: 0 would mean sd-event's default of 250 ms, and MHD asks for "now" whenever a
         * connection has more to read than fitted in its buffer (an upload). */
        r = sd_event_add_time(m->event, &s->timer, CLOCK_MONOTONIC, USEC_INFINITY, 1, on_timer, s);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(s->timer, "http-timer");
        r = sd_event_add_defer(m->event, &s->now, on_now, s);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(s->now, SD_EVENT_OFF);
        (void) sd_event_source_set_description(s->now, "http-now");
        {
                sd_event_source *post;

                /* the loop owns it (floating), named first */
                r = sd_event_add_post(m->event, &post, on_post, s);
                if (r < 0)
                        goto fail;
                (void) sd_event_source_set_description(post, "http-post");
                r = sd_event_source_set_floating(post, true);
                sd_event_source_unref(post);
                if (r < 0)
                        goto fail;
        }

        *ret = s;
        return 0;
fail:
        http_server_free(s);
        return log_error_errno(r, "Failed to hook the HTTP server into the event loop: %m");
}

HttpServer *http_server_free(HttpServer *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->io);
        sd_event_source_disable_unref(s->timer);
        sd_event_source_disable_unref(s->now);
        http_ws_close_all(s); /* libmicrohttpd stops only once its upgraded connections are closed */
        if (s->daemon)
                MHD_stop_daemon(s->daemon); /* frees every HttpConnection (NOTIFY_CONNECTION) */
        sd_event_source_disable_unref(s->auth_timer);
        free(s);
        return NULL;
}
