/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An interactive connection to a command on a terminal: over HTTP the WebSocket at
 * .../commands/RID/tty (wslay frames the bytes; the upgrade request goes over a connection
 * libcurl opened, CURLOPT_CONNECT_ONLY). */

#include <nettle/sha1.h>
#include <poll.h>
#include <sys/random.h>
#include <wslay/wslay.h>

#include "encoding.h"
#include "internal.h"
#include "time-util.h"

/* The key every WebSocket server appends before hashing (RFC 6455, 1.3). */
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
/* The longest message sandboxd sends (an output chunk, or the exit frame). */
#define WS_MSG_MAX (1024 * 1024)
/* The longest error body of a refused upgrade that we read. */
#define WS_ERROR_BODY_MAX (64 * 1024)

struct sandboxd_terminal {
        sandboxd_client *client;
        CURL *curl;
        int fd;
        wslay_event_context_ptr ws;
        Buf early;            /* frames that arrived with the answer's head */
        size_t early_used;
        sandboxd_terminal_output_fn fn;
        void *userdata;
        int error;            /* what a callback failed with */
        sandboxd_result *result; /* from the exit frame */
        bool closed;          /* the connection is over */
        uint16_t close_code;
        size_t queued;        /* input bytes queued, not yet sent */
};

static int curl_wait(sandboxd_terminal *t, bool write, uint64_t deadline) {
        struct pollfd p = { .fd = t->fd, .events = write ? POLLOUT : POLLIN };
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        int r;

        if (now >= deadline)
                return -ETIMEDOUT;
        r = poll(&p, 1, (int) MIN((deadline - now) / 1000 + 1, (uint64_t) INT32_MAX));
        if (r < 0)
                return -errno;
        return r == 0 ? -ETIMEDOUT : 0;
}

static int send_all(sandboxd_terminal *t, const char *p, size_t n, uint64_t deadline) {
        while (n > 0) {
                size_t sent = 0;
                CURLcode cc = curl_easy_send(t->curl, p, n, &sent);
                int r;

                if (cc == CURLE_AGAIN) {
                        r = curl_wait(t, true, deadline);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (cc != CURLE_OK)
                        return -ECONNRESET;
                p += sent;
                n -= sent;
        }
        return 0;
}

/* Reads what there is, waiting for it until deadline: 0 and *ret_got > 0, or 0 at EOF. */
static int recv_wait(sandboxd_terminal *t, char *buf, size_t n, uint64_t deadline, size_t *ret_got) {
        for (;;) {
                CURLcode cc = curl_easy_recv(t->curl, buf, n, ret_got);
                int r;

                if (cc == CURLE_OK)
                        return 0;
                if (cc != CURLE_AGAIN)
                        return -ECONNRESET;
                r = curl_wait(t, false, deadline);
                if (r < 0)
                        return r;
        }
}

static void accept_key(const char *key, char ret[static 29]) {
        struct sha1_ctx ctx;
        uint8_t digest[SHA1_DIGEST_SIZE];
        _cleanup_(buf_done) Buf b = {};

        sha1_init(&ctx);
        sha1_update(&ctx, strlen(key), (const uint8_t *) key);
        sha1_update(&ctx, strlen(WS_GUID), (const uint8_t *) WS_GUID);
        sha1_digest(&ctx, sizeof(digest), digest);
        if (base64_encode(&b, digest, sizeof(digest)) < 0 || b.len != 28) {
                ret[0] = 0;
                return;
        }
        memcpy(ret, b.data, 29);
}

static ssize_t on_ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *userdata) {
        sandboxd_terminal *t = userdata;
        size_t got = 0;
        CURLcode cc;

        if (t->early_used < t->early.len) {
                size_t n = MIN(len, t->early.len - t->early_used);
                memcpy(buf, t->early.data + t->early_used, n);
                t->early_used += n;
                return (ssize_t) n;
        }
        cc = t->curl ? curl_easy_recv(t->curl, buf, len, &got) : CURLE_RECV_ERROR;
        if (cc == CURLE_AGAIN) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        if (cc != CURLE_OK || got == 0) {
                t->closed = true;
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        return (ssize_t) got;
}

static ssize_t on_ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *userdata) {
        sandboxd_terminal *t = userdata;
        size_t sent = 0;
        CURLcode cc;

        cc = t->curl ? curl_easy_send(t->curl, data, len, &sent) : CURLE_SEND_ERROR;
        if (cc == CURLE_AGAIN) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        if (cc != CURLE_OK) {
                t->closed = true;
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        return (ssize_t) sent;
}

static int on_ws_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *userdata) {
        if (getrandom(buf, len, 0) != (ssize_t) len) {
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        return 0;
}

static void on_ws_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *userdata) {
        sandboxd_terminal *t = userdata;

        switch (arg->opcode) {
        case WSLAY_BINARY_FRAME:
                if (t->fn && arg->msg_length > 0 && t->fn(t, arg->msg, arg->msg_length, t->userdata) < 0)
                        t->error = -ECANCELED;
                break;
        case WSLAY_TEXT_FRAME: {
                _cleanup_(json_object_putp) json_object *o = NULL;
                sandboxd_result *res = NULL;
                const char *type;

                /* {"type":"exit",...} as the NDJSON exit event; other types are for later */
                if (json_parse_text((const char *) arg->msg, arg->msg_length, &o) < 0 ||
                    !json_object_is_type(o, json_type_object)) {
                        t->error = -EBADMSG;
                        break;
                }
                type = json_get_string(o, "type");
                if (type && streq(type, "exit")) {
                        if (result_from_json(o, &res) < 0) {
                                t->error = -EBADMSG;
                                break;
                        }
                        res->terminal = true;
                        sandboxd_result_free(t->result);
                        t->result = res;
                }
                break;
        }
        case WSLAY_CONNECTION_CLOSE:
                t->close_code = arg->status_code;
                break;
        default:
                break;
        }
}

/* Reads a refused upgrade's body (bounded) and records its error on the client. */
static int read_refusal(sandboxd_terminal *t, const WsHead *h, Buf *in, uint64_t deadline) {
        size_t want = h->content_length == UINT64_MAX ? WS_ERROR_BODY_MAX : MIN(h->content_length, (uint64_t) WS_ERROR_BODY_MAX);
        int r;

        while (in->len - h->head_size < want) {
                char buf[4096];
                size_t got = 0;

                if (recv_wait(t, buf, sizeof(buf), deadline, &got) < 0 || got == 0)
                        break; /* what came is the error's body */
                r = buf_append(in, buf, MIN(got, want - (in->len - h->head_size)));
                if (r < 0)
                        return r;
        }
        return error_from_http(&t->client->error, h->status, in->data + h->head_size, in->len - h->head_size);
}

static int handshake(sandboxd_terminal *t, const char *url, uint64_t deadline) {
        _cleanup_(buf_done) Buf req = {}, in = {};
        _cleanup_free_ char *path = NULL, *host = NULL, *query = NULL;
        CURLU *u = NULL;
        uint8_t nonce[16];
        char expect[29];
        WsHead h;
        int r;

        u = curl_url();
        if (!u)
                return -ENOMEM;
        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
                curl_url_cleanup(u);
                return -EINVAL;
        }
        (void) curl_url_get(u, CURLUPART_QUERY, &query, 0);
        curl_url_cleanup(u);

        if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
                return -EIO;
        _cleanup_(buf_done) Buf key = {};
        r = base64_encode(&key, nonce, sizeof(nonce));
        if (r < 0)
                return r;
        accept_key(key.data, expect);

        r = buf_printf(&req,
                       "GET %s%s%s HTTP/1.1\r\n"
                       "Host: %s\r\n"
                       "Upgrade: websocket\r\n"
                       "Connection: Upgrade\r\n"
                       "Sec-WebSocket-Key: %s\r\n"
                       "Sec-WebSocket-Version: 13\r\n"
                       "%s%s"
                       "\r\n",
                       path, query ? "?" : "", strempty(query), host, key.data,
                       strempty(t->client->auth_header), t->client->auth_header ? "\r\n" : "");
        if (r < 0)
                return r;
        r = send_all(t, req.data, req.len, deadline);
        if (r < 0)
                return r;

        for (;;) {
                char buf[4096];
                size_t got = 0;

                r = recv_wait(t, buf, sizeof(buf), deadline, &got);
                if (r < 0)
                        return r;
                if (got == 0)
                        return -ECONNRESET;
                r = buf_append(&in, buf, got);
                if (r < 0)
                        return r;
                r = ws_parse_head(in.data, in.len, expect, &h);
                if (r < 0)
                        return r == -EMSGSIZE || r == -EPROTO ? -EPROTO : -EBADMSG;
                if (r > 0)
                        break;
        }

        if (!h.upgraded)
                return read_refusal(t, &h, &in, deadline);

        /* frames sent right after the head arrived with it */
        return buf_append(&t->early, in.data + h.head_size, in.len - h.head_size);
}

/* The connection and the upgrade at url (over unix_path, or TCP when NULL). */
static int terminal_connect(sandboxd_terminal *t, const char *url, const char *unix_path, uint64_t deadline) {
        sandboxd_client *c = t->client;
        curl_socket_t s = CURL_SOCKET_BAD;
        bool ok = true;

        t->curl = curl_easy_init();
        if (!t->curl)
                return -ENOMEM;
        ok = ok && curl_easy_setopt(t->curl, CURLOPT_URL, url) == CURLE_OK;
        if (unix_path)
                ok = ok && curl_easy_setopt(t->curl, CURLOPT_UNIX_SOCKET_PATH, unix_path) == CURLE_OK;
        ok = ok && curl_easy_setopt(t->curl, CURLOPT_CONNECT_ONLY, 1L) == CURLE_OK;
        ok = ok && curl_easy_setopt(t->curl, CURLOPT_NOSIGNAL, 1L) == CURLE_OK;
        ok = ok && curl_easy_setopt(t->curl, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS) == CURLE_OK;
        ok = ok && curl_easy_setopt(t->curl, CURLOPT_TCP_NODELAY, 1L) == CURLE_OK;
#if LIBCURL_VERSION_NUM >= 0x075500
        ok = ok && curl_easy_setopt(t->curl, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK;
#endif
        if (!ok)
                return -EINVAL;
        CURLcode cc = curl_easy_perform(t->curl);
        if (cc != CURLE_OK) {
                long os_errno = 0;
                (void) curl_easy_getinfo(t->curl, CURLINFO_OS_ERRNO, &os_errno);
                return error_set(&c->error, SANDBOXD_ERROR_TRANSPORT, errno_from_curl(cc, os_errno),
                                 "Failed to connect to sandboxd: %s", curl_easy_strerror(cc));
        }
        if (curl_easy_getinfo(t->curl, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK || s == CURL_SOCKET_BAD)
                return -ENOTCONN;
        t->fd = (int) s;
        return handshake(t, url, deadline);
}

static int http_terminal_open(sandboxd_client *c, const char *session, const char *request_id, uint64_t offset,
                              bool readonly, sandboxd_terminal *t) {
        static const struct wslay_event_callbacks callbacks = {
                .recv_callback = on_ws_recv,
                .send_callback = on_ws_send,
                .genmask_callback = on_ws_genmask,
                .on_msg_recv_callback = on_ws_msg,
        };
        _cleanup_(buf_done) Buf url = {};
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + (c->timeout_usec ?: DEFAULT_TIMEOUT_USEC);
        char num[32];
        int r;

        r = url_command(&url, c, session, request_id, "tty");
        if (r < 0)
                return r;
        if (offset > 0) {
                snprintf(num, sizeof(num), "%" PRIu64, offset);
                r = url_append_query(&url, "offset", num);
                if (r < 0)
                        return r;
        }
        if (readonly && (r = url_append_query(&url, "readonly", "1")) < 0)
                return r;

        r = terminal_connect(t, url.data, c->unix_path, deadline);
        if (r < 0 && c->error.kind == SANDBOXD_ERROR_WRONG_NODE && c->error.http_status == 421) {
                /* once more at the node's URL in SANDBOXD_NODES, as other requests are */
                _cleanup_free_ char *node_url = NULL;
                char node[NODE_NAME_MAX + 1];
                int k;

                k = wrong_node_url(c, r, url.data, true, node, &node_url);
                if (k < 0 || !node_url)
                        return k < 0 ? k : r;
                curl_easy_cleanup(t->curl); /* closes fd */
                t->curl = NULL;
                t->fd = -EBADF;
                buf_done(&t->early);
                error_clear(&c->error);
                r = terminal_connect(t, node_url, NULL, deadline);
                wrong_node_again(c, r, node, node_url);
        }
        if (r < 0)
                return r;

        if (wslay_event_context_client_init(&t->ws, &callbacks, t) != 0)
                return -ENOMEM;
        wslay_event_config_set_max_recv_msg_length(t->ws, WS_MSG_MAX);
        return 0;
}

_public_ int sandboxd_terminal_open(sandboxd_client *c, const char *session, const char *request_id, uint64_t offset,
                                    bool readonly, sandboxd_terminal **ret) {
        sandboxd_terminal *t;
        int r;

        if (!c || !session || !request_id || !ret)
                return -EINVAL;
        client_begin(c);
        if (c->bus)
                return client_fail(c, error_set(&c->error, SANDBOXD_ERROR_LOCAL, -EOPNOTSUPP,
                                                "An interactive connection to a command goes over HTTP; over D-Bus, "
                                                "start the command on a terminal of your own."));

        t = calloc(1, sizeof(*t));
        if (!t)
                return client_fail(c, -ENOMEM);
        t->client = c;
        t->fd = -EBADF;
        r = http_terminal_open(c, session, request_id, offset, readonly, t);
        if (r < 0) {
                sandboxd_terminal_free(t);
                return client_fail(c, r);
        }
        *ret = t;
        return client_done(c, 0);
}

_public_ sandboxd_terminal *sandboxd_terminal_free(sandboxd_terminal *t) {
        if (!t)
                return NULL;
        if (t->ws)
                wslay_event_context_free(t->ws);
        if (t->curl)
                curl_easy_cleanup(t->curl); /* closes fd */
        buf_done(&t->early);
        sandboxd_result_free(t->result);
        free(t);
        return NULL;
}

_public_ int sandboxd_terminal_fd(const sandboxd_terminal *t) {
        return t ? t->fd : -EINVAL;
}

_public_ short sandboxd_terminal_poll_events(const sandboxd_terminal *t) {
        short e = 0;

        if (!t || !t->ws || t->closed)
                return 0;
        if (wslay_event_want_read(t->ws))
                e |= POLLIN;
        if (wslay_event_want_write(t->ws))
                e |= POLLOUT;
        return e;
}

_public_ size_t sandboxd_terminal_queued(const sandboxd_terminal *t) {
        return t && t->ws ? wslay_event_get_queued_msg_length(t->ws) : 0;
}

static int queue(sandboxd_terminal *t, uint8_t opcode, const void *p, size_t n) {
        struct wslay_event_msg m = { .opcode = opcode, .msg = p, .msg_length = n };

        if (!t->ws || t->closed || wslay_event_get_close_sent(t->ws))
                return -EPIPE;
        if (wslay_event_queue_msg(t->ws, &m) != 0)
                return -ENOMEM;
        return 0;
}

_public_ int sandboxd_terminal_write(sandboxd_terminal *t, const void *p, size_t n) {
        if (!t || (!p && n > 0))
                return -EINVAL;
        if (n == 0)
                return 0;
        return queue(t, WSLAY_BINARY_FRAME, p, n);
}

_public_ int sandboxd_terminal_resize(sandboxd_terminal *t, unsigned rows, unsigned cols) {
        char msg[96];
        int n;

        if (!t || rows == 0 || cols == 0 || rows > 65535 || cols > 65535)
                return -EINVAL;
        n = snprintf(msg, sizeof(msg), "{\"type\":\"resize\",\"rows\":%u,\"cols\":%u}", rows, cols);
        return queue(t, WSLAY_TEXT_FRAME, msg, (size_t) n);
}

_public_ int sandboxd_terminal_detach(sandboxd_terminal *t) {
        if (!t || !t->ws)
                return -EINVAL;
        if (wslay_event_get_close_sent(t->ws))
                return 0;
        return wslay_event_queue_close(t->ws, WSLAY_CODE_NORMAL_CLOSURE, (const uint8_t *) "detached", 8) == 0 ? 0 : -ENOMEM;
}

_public_ int sandboxd_terminal_process(sandboxd_terminal *t, sandboxd_terminal_output_fn fn, void *userdata) {
        if (!t || !t->ws)
                return -EINVAL;
        if (t->closed)
                return 1;

        t->fn = fn;
        t->userdata = userdata;
        t->error = 0;
        /* frames that came with the head are read first, whatever poll said */
        if ((wslay_event_want_read(t->ws) && wslay_event_recv(t->ws) != 0 && !t->closed) || t->error < 0) {
                t->closed = true;
                return t->error < 0 ? t->error : -EPROTO;
        }
        if (wslay_event_want_write(t->ws) && wslay_event_send(t->ws) != 0 && !t->closed) {
                t->closed = true;
                return -ECONNRESET;
        }
        if (!wslay_event_want_read(t->ws) && !wslay_event_want_write(t->ws))
                t->closed = true; /* both close frames went: the connection is over */
        return t->closed ? 1 : 0;
}

_public_ int sandboxd_terminal_take_result(sandboxd_terminal *t, sandboxd_result **ret) {
        if (!t || !ret)
                return -EINVAL;
        if (!t->result)
                return -ENODATA; /* detached, or the connection ended before the command */
        *ret = TAKE_PTR(t->result);
        return 0;
}

_public_ unsigned sandboxd_terminal_close_code(const sandboxd_terminal *t) {
        return t ? t->close_code : 0;
}

int terminal_replay(const void *p, size_t n, size_t *ret_output, bool *ret_result) {
        static const struct wslay_event_callbacks callbacks = {
                .recv_callback = on_ws_recv,
                .send_callback = on_ws_send,
                .genmask_callback = on_ws_genmask,
                .on_msg_recv_callback = on_ws_msg,
        };
        sandboxd_terminal t = { .fd = -EBADF };
        size_t out = 0;
        int r;

        /* no connection: once the bytes are read, receiving and sending fail */
        r = buf_append(&t.early, p, n);
        if (r < 0)
                return r;
        if (wslay_event_context_client_init(&t.ws, &callbacks, &t) != 0) {
                buf_done(&t.early);
                return -ENOMEM;
        }
        wslay_event_config_set_max_recv_msg_length(t.ws, WS_MSG_MAX);
        for (unsigned i = 0; i < 4 && !t.closed; i++) {
                t.fn = NULL;
                if (wslay_event_recv(t.ws) != 0)
                        break;
                if (t.early_used >= t.early.len)
                        break;
        }
        out = t.early_used;
        *ret_output = out;
        *ret_result = t.result;
        wslay_event_context_free(t.ws);
        buf_done(&t.early);
        sandboxd_result_free(t.result);
        return 0;
}
