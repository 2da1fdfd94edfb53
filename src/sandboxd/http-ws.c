/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The WebSocket front end of a Terminal (http-ws.h): the handshake through libmicrohttpd's
 * upgrade, then wslay's event API on the socket, driven from the event loop. */

#include <fcntl.h>
#include <json-c/json.h>
#include <nettle/sha1.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <wslay/wslay.h>

#include "encoding.h"
#include "http-ws.h"
#include "json-util.h"
#include "list.h"
#include "log.h"
#include "request.h"
#include "terminal.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
/* What one message of output holds at most. */
#define WS_OUTPUT_CHUNK (32U * 1024)

struct WsConn {
        HttpServer *server;
        HttpRequest *request;      /* until the upgrade: it owns this until then */
        Terminal *terminal;
        int fd;                    /* libmicrohttpd's: closed through urh */
        struct MHD_UpgradeResponseHandle *urh;
        sd_event_source *io, *close_timer;
        wslay_event_context_ptr ctx;
        char *extra;               /* what the client sent after its headers, read before the socket */
        size_t extra_len, extra_pos;
        bool ending;               /* our close frame is queued */
        uint16_t end_code;         /* ... or is, once what is queued before it went (wslay sends
                                    * control frames first) */
        const char *end_reason;
        bool more_output;          /* the log has more than was queued */
        LIST_FIELDS(WsConn, websockets);
};

/* --- messages --------------------------------------------------------------------- */

static void refuse_msg(WsMessage *m, uint16_t code, const char *reason) {
        m->action = WS_ACTION_CLOSE;
        m->close_code = code;
        m->close_reason = reason;
}

static bool get_dimension(json_object *o, const char *key, unsigned *ret) {
        json_object *v;
        int64_t i;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return false;
        i = json_object_get_int64(v);
        if (i < 1 || i > (int64_t) REQUEST_TTY_SIZE_MAX)
                return false;
        *ret = (unsigned) i;
        return true;
}

void http_ws_classify(uint8_t opcode, const uint8_t *p, size_t n, bool readonly, WsMessage *ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *type;
        json_tokener *tok;

        *ret = (WsMessage) { .action = WS_ACTION_NONE };
        if (opcode != WSLAY_BINARY_FRAME && opcode != WSLAY_TEXT_FRAME)
                return; /* ping, pong, close: wslay's */
        if (readonly)
                return refuse_msg(ret, 1008, "read-only");
        if (opcode == WSLAY_BINARY_FRAME) {
                ret->action = WS_ACTION_INPUT;
                return;
        }
        if (n > WS_CONTROL_MAX)
                return refuse_msg(ret, 1009, "text message too long");
        tok = json_tokener_new();
        if (!tok)
                return refuse_msg(ret, 1011, "out of memory");
        o = json_tokener_parse_ex(tok, (const char *) p, (int) n);
        if (o && json_tokener_get_parse_end(tok) != n)
                o = (json_object_put(o), NULL); /* something after the object */
        json_tokener_free(tok);
        if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "type", &type) ||
            !json_object_is_type(type, json_type_string))
                return refuse_msg(ret, 1007, "expected a JSON object with a \"type\"");
        if (!streq(json_object_get_string(type), "resize"))
                return refuse_msg(ret, 1003, "unknown message type");
        json_object_object_foreach(o, key, val) {
                (void) val;
                if (!streq(key, "type") && !streq(key, "rows") && !streq(key, "cols"))
                        return refuse_msg(ret, 1007, "resize takes only rows and cols");
        }
        if (!get_dimension(o, "rows", &ret->rows) || !get_dimension(o, "cols", &ret->cols))
                return refuse_msg(ret, 1007, "rows and cols must be integers from 1 to 1000");
        ret->action = WS_ACTION_RESIZE;
}

/* --- the connection ------------------------------------------------------------------ */

static WsConn *ws_free(WsConn *w) {
        if (!w)
                return NULL;
        if (w->urh)
                LIST_REMOVE(websockets, w->server->websockets, w);
        w->terminal = terminal_free(w->terminal);
        sd_event_source_disable_unref(w->io);
        sd_event_source_disable_unref(w->close_timer);
        if (w->ctx)
                wslay_event_context_free(w->ctx);
        free(w->extra);
        /* libmicrohttpd closes the socket on its next run */
        if (w->urh)
                (void) MHD_upgrade_action(w->urh, MHD_UPGRADE_ACTION_CLOSE);
        free(w);
        return NULL;
}

void http_ws_abandon(WsConn *w) {
        ws_free(w);
}

/* Whether the client is read now: not while its input would wait anyway, nor while it does not
 * read what it is sent (a ping flood's pongs). */
static bool ws_can_read(WsConn *w) {
        return wslay_event_get_queued_msg_count(w->ctx) <= WS_QUEUED_MSGS_MAX && !terminal_input_blocked(w->terminal);
}

static int on_close_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        log_debug("WebSocket: no close frame from the client in time, closing.");
        ws_free(userdata);
        return 0;
}

static void ws_end(WsConn *w, uint16_t code, const char *reason) {
        if (w->ending)
                return;
        w->ending = true;
        (void) wslay_event_queue_close(w->ctx, code, (const uint8_t *) reason, strlen(reason));
        if (sd_event_add_time_relative(w->server->manager->event, &w->close_timer, CLOCK_MONOTONIC,
                                       WS_CLOSE_TIMEOUT_USEC, USEC_PER_SEC / 10, on_close_timer, w) >= 0)
                (void) sd_event_source_set_description(w->close_timer, "http-websocket-close");
}

/* The close after the output and the exit: once they went. */
static void ws_end_after_data(WsConn *w, uint16_t code, const char *reason) {
        w->end_code = code;
        w->end_reason = reason;
}

/* Queues output from the log while the client keeps up; the end once it is read. */
static void ws_fill(WsConn *w) {
        char buf[WS_OUTPUT_CHUNK];
        ssize_t n;

        w->more_output = false;
        while (!w->ending && w->end_code == 0) {
                if (wslay_event_get_queued_msg_length(w->ctx) >= WS_SEND_QUEUE_MAX ||
                    wslay_event_get_queued_msg_count(w->ctx) >= WS_QUEUED_MSGS_MAX / 2) {
                        w->more_output = true;
                        return;
                }
                n = terminal_read(w->terminal, buf, sizeof(buf));
                if (n == 0)
                        return;
                if (n > 0) {
                        struct wslay_event_msg m = { WSLAY_BINARY_FRAME, (const uint8_t *) buf, (size_t) n };

                        if (wslay_event_queue_msg(w->ctx, &m) < 0)
                                return ws_end(w, 1011, "out of memory");
                        continue;
                }
                if (n == -EPIPE && w->terminal->exit_event) {
                        const char *e = w->terminal->exit_event;
                        struct wslay_event_msg m = { WSLAY_TEXT_FRAME, (const uint8_t *) e, strlen(e) };

                        (void) wslay_event_queue_msg(w->ctx, &m);
                        return ws_end_after_data(w, 1000, "command exited");
                }
                if (n == -EPIPE)
                        return ws_end_after_data(w, 1001, w->server->manager->stopping ? "sandboxd is stopping" : "command gone");
                log_warning_errno((int) n, "WebSocket: the output of a command cannot be read: %m");
                return ws_end(w, 1011, "output cannot be read");
        }
}

/* Reads what the client sent, queues output, sends: as far as each goes now; then waits for
 * what is needed next. */
static void ws_pump(WsConn *w) {
        uint32_t events = 0;

        if (wslay_event_want_read(w->ctx) && ws_can_read(w) && wslay_event_recv(w->ctx) < 0) {
                ws_free(w); /* the client went, or broke the protocol past answering */
                return;
        }
        ws_fill(w);
        if (wslay_event_want_write(w->ctx) && wslay_event_send(w->ctx) < 0) {
                ws_free(w);
                return;
        }
        if (w->end_code != 0 && !w->ending && wslay_event_get_queued_msg_count(w->ctx) == 0) {
                ws_end(w, w->end_code, w->end_reason);
                if (wslay_event_send(w->ctx) < 0) {
                        ws_free(w);
                        return;
                }
        }
        if (!wslay_event_want_read(w->ctx) && !wslay_event_want_write(w->ctx)) {
                ws_free(w); /* both closes went */
                return;
        }
        if (wslay_event_want_read(w->ctx) && ws_can_read(w))
                events |= EPOLLIN;
        if (wslay_event_want_write(w->ctx) || w->more_output)
                events |= EPOLLOUT;
        if (sd_event_source_set_io_events(w->io, events) < 0)
                ws_free(w);
}

static int on_ws_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ws_pump(userdata);
        return 0;
}

/* More output, its end, input may go on: on the next turn of the loop (this is called from
 * within the core). */
static void on_terminal(Terminal *t, void *userdata) {
        WsConn *w = userdata;

        if (w->io)
                (void) sd_event_source_set_io_events(w->io, EPOLLIN | EPOLLOUT);
}

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *userdata) {
        WsConn *w = userdata;
        ssize_t n;

        if (!ws_can_read(w)) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        if (w->extra_pos < w->extra_len) {
                n = (ssize_t) MIN(len, w->extra_len - w->extra_pos);
                memcpy(buf, w->extra + w->extra_pos, (size_t) n);
                w->extra_pos += (size_t) n;
                return n;
        }
        n = recv(w->fd, buf, len, 0);
        if (n > 0)
                return n;
        wslay_event_set_error(ctx, n < 0 && (errno == EAGAIN || errno == EINTR) ? WSLAY_ERR_WOULDBLOCK
                                                                               : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *userdata) {
        WsConn *w = userdata;
        ssize_t n;

        n = send(w->fd, data, len, MSG_NOSIGNAL | (flags & WSLAY_MSG_MORE ? MSG_MORE : 0));
        if (n >= 0)
                return n;
        wslay_event_set_error(ctx, errno == EAGAIN || errno == EINTR ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static void ws_on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *userdata) {
        WsConn *w = userdata;
        WsMessage m;
        int r;

        if (w->ending)
                return;
        http_ws_classify(arg->opcode, arg->msg, arg->msg_length, w->terminal->readonly, &m);
        switch (m.action) {
        case WS_ACTION_NONE:
                break;
        case WS_ACTION_INPUT:
                r = terminal_write(w->terminal, arg->msg, arg->msg_length);
                if (r < 0) /* its stdin closed: the exit follows */
                        log_debug_errno(r, "WebSocket: input dropped: %m");
                break;
        case WS_ACTION_RESIZE:
                r = terminal_resize(w->terminal, m.rows, m.cols);
                if (r < 0) /* it ended: the exit follows */
                        log_debug_errno(r, "WebSocket: resize dropped: %m");
                break;
        case WS_ACTION_CLOSE:
                ws_end(w, m.close_code, m.close_reason);
                break;
        }
}

int http_ws_context_new(const struct wslay_event_callbacks *callbacks, void *userdata, void **ret) {
        wslay_event_context_ptr ctx;

        if (wslay_event_context_server_init(&ctx, callbacks, userdata) < 0)
                return -ENOMEM;
        wslay_event_config_set_max_recv_msg_length(ctx, WS_MSG_MAX);
        *ret = ctx;
        return 0;
}

static const struct wslay_event_callbacks ws_callbacks = {
        .recv_callback = ws_recv,
        .send_callback = ws_send,
        .on_msg_recv_callback = ws_on_msg,
};

static void on_upgrade(void *cls, struct MHD_Connection *connection, void *con_cls, const char *extra_in,
                       size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
        WsConn *w = cls;
        HttpRequest *r = w->request;
        Manager *m = w->server->manager;
        int one = 1, k;

        /* From now on the connection is this one's, not the request's. */
        if (r && r->ws == w)
                r->ws = NULL;
        w->request = NULL;
        w->urh = urh;
        w->fd = sock;
        LIST_PREPEND(websockets, w->server->websockets, w);

        if (extra_in_size > 0) {
                w->extra = memdup(extra_in, extra_in_size);
                if (!w->extra)
                        goto fail;
                w->extra_len = extra_in_size;
        }
        k = fcntl(sock, F_GETFL);
        if (k < 0 || fcntl(sock, F_SETFL, k | O_NONBLOCK) < 0)
                goto fail;
        /* keystrokes and their echo go at once */
        if (!w->server->is_unix)
                (void) setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (http_ws_context_new(&ws_callbacks, w, (void **) &w->ctx) < 0)
                goto fail;
        if (sd_event_add_io(m->event, &w->io, sock, EPOLLIN | EPOLLOUT, on_ws_io, w) < 0)
                goto fail;
        (void) sd_event_source_set_description(w->io, "http-websocket");
        ws_pump(w);
        return;
fail:
        log_warning("WebSocket: cannot set up the connection, closing it.");
        ws_free(w);
}

void http_ws_close_all(HttpServer *s) {
        while (s->websockets) {
                WsConn *w = s->websockets;

                /* as far as the socket takes it now */
                if (w->ctx && !w->ending) {
                        ws_end(w, 1001, "sandboxd is stopping");
                        (void) wslay_event_send(w->ctx);
                }
                ws_free(w);
        }
}

/* --- the handshake ------------------------------------------------------------------- */

/* Whether a comma-separated header value has token (case-insensitive). */
static bool header_has_token(const char *h, const char *token) {
        size_t n = strlen(token);

        while (h && *h) {
                size_t l;

                h += strspn(h, " \t,");
                l = strcspn(h, ",");
                while (l > 0 && (h[l - 1] == ' ' || h[l - 1] == '\t'))
                        l--;
                if (l == n && strncasecmp(h, token, n) == 0)
                        return true;
                h += strcspn(h, ",");
        }
        return false;
}

static const char *header(HttpRequest *r, const char *name) {
        return MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, name);
}

/* Sec-WebSocket-Accept for a key (RFC 6455 4.2.2): base64(SHA-1(key + GUID)). */
static int accept_key(const char *key, Buf *ret) {
        uint8_t digest[SHA1_DIGEST_SIZE];
        struct sha1_ctx ctx;

        sha1_init(&ctx);
        sha1_update(&ctx, strlen(key), (const uint8_t *) key);
        sha1_update(&ctx, strlen(WS_GUID), (const uint8_t *) WS_GUID);
        sha1_digest(&ctx, sizeof(digest), digest);
        return base64_encode(ret, digest, sizeof(digest));
}

/* A key is 16 bytes, base64: 24 characters. */
static bool key_valid(const char *key) {
        Buf b = {};
        bool ok;

        ok = strlen(key) == 24 && base64_decode(key, 24, &b) >= 0 && b.len == 16;
        buf_done(&b);
        return ok;
}

static int refuse_upgrade(HttpRequest *r, const char *message) {
        struct MHD_Response *resp = http_error_response("upgrade_required", message);

        if (resp) {
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
                (void) MHD_add_response_header(resp, "Sec-WebSocket-Version", "13");
        }
        return http_queue(r, http_error_status("upgrade_required"), resp);
}

int http_ws_upgrade(HttpRequest *r, Command *c, uint64_t offset, bool readonly) {
        const char *upgrade = header(r, MHD_HTTP_HEADER_UPGRADE), *connection = header(r, MHD_HTTP_HEADER_CONNECTION),
                   *key = header(r, "Sec-WebSocket-Key"), *version = header(r, "Sec-WebSocket-Version");
        struct MHD_Response *resp;
        Buf accept = {};
        WsConn *w;
        int k;

        if (!streq(r->method, "GET") || !upgrade || !header_has_token(upgrade, "websocket") || !connection ||
            !header_has_token(connection, "upgrade"))
                return refuse_upgrade(r, "This is a WebSocket: send 'Connection: Upgrade' and 'Upgrade: websocket'.");
        if (!version || !streq(version, "13") || !key || !key_valid(key))
                return refuse_upgrade(r, "A WebSocket handshake needs Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key of 16 bytes in base64.");

        w = calloc(1, sizeof(WsConn));
        if (!w)
                return MHD_NO;
        w->server = r->server;
        w->fd = -EBADF;
        k = terminal_new(c, offset, readonly, on_terminal, w, &w->terminal);
        if (k < 0) {
                free(w);
                if (k == -EAGAIN)
                        return http_queue_error(r, "too_many_terminals", "Too many terminals are attached (16 a session, 256 in all).");
                if (k == -ERANGE)
                        return http_queue_error(r, "invalid_offset", "?offset= is past the end of the command's stdout.");
                return http_queue_error(r, "internal", strerror(-k));
        }
        if (accept_key(key, &accept) < 0 || buf_puts(&accept, "") < 0) {
                ws_free(w);
                return MHD_NO;
        }
        resp = MHD_create_response_for_upgrade(on_upgrade, w);
        if (!resp) {
                buf_done(&accept);
                ws_free(w);
                return MHD_NO;
        }
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
        (void) MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept.data);
        buf_done(&accept);
        w->request = r;
        r->ws = w;
        return http_queue(r, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
}
