/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/socket.h>

#include "encoding.h"
#include "proxy-proto.h"

/* Every check looks only at bytes that are there, in the same order whether the bytes came
 * at once or one by one: the answer never depends on how a client split its writes (the
 * fuzzer compares the two). */

enum {
        STATE_START,
        STATE_HTTP,
        STATE_SOCKS_GREETING,
        STATE_SOCKS_AUTH,
        STATE_SOCKS_REQUEST,
        STATE_DONE,
};

/* RFC 1928 replies */
enum {
        SOCKS_SUCCEEDED = 0,
        SOCKS_GENERAL_FAILURE = 1,
        SOCKS_NOT_ALLOWED = 2,
        SOCKS_HOST_UNREACHABLE = 4,
        SOCKS_CONNECTION_REFUSED = 5,
        SOCKS_COMMAND_NOT_SUPPORTED = 7,
        SOCKS_ADDRESS_TYPE_NOT_SUPPORTED = 8,
};

void proxy_request_done(ProxyRequest *r) {
        if (r)
                buf_done(&r->upstream);
}

/* --- refusals ------------------------------------------------------------------ */

static int http_answer(Buf *out, unsigned status, const char *phrase, const char *denied, const char *fmt, ...)
        _printf_(5, 6);
static int http_answer(Buf *out, unsigned status, const char *phrase, const char *denied, const char *fmt, ...) {
        _cleanup_free_ char *body = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&body, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;

        if (buf_printf(out, "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                            "Connection: close\r\n", status, phrase, strlen(body) + 1) < 0 ||
            (denied && buf_printf(out, "X-Sandboxd-Denied: %s\r\n", denied) < 0) ||
            buf_printf(out, "\r\n%s\n", body) < 0)
                return -ENOMEM;
        return 0;
}

static int refuse_http(ProxyParser *p, Buf *reply, unsigned status, const char *why) {
        static const struct {
                unsigned status;
                const char *phrase;
        } phrases[] = {
                { 400, "Bad Request" },
                { 431, "Request Header Fields Too Large" },
                { 505, "HTTP Version Not Supported" },
        };
        const char *phrase = "Bad Request";

        for (size_t i = 0; i < ELEMENTSOF(phrases); i++)
                if (phrases[i].status == status)
                        phrase = phrases[i].phrase;
        p->refusal = why;
        p->state = STATE_DONE;
        if (http_answer(reply, status, phrase, NULL, "sandboxd proxy: %s.", why) < 0)
                return -ENOMEM;
        return PROXY_STEP_REFUSED;
}

static int refuse_bytes(ProxyParser *p, Buf *reply, const void *bytes, size_t n, const char *why) {
        p->refusal = why;
        p->state = STATE_DONE;
        if (buf_append(reply, bytes, n) < 0)
                return -ENOMEM;
        return PROXY_STEP_REFUSED;
}

static int refuse_socks(ProxyParser *p, Buf *reply, uint8_t rep, const char *why) {
        const uint8_t r[10] = { 5, rep, 0, 1 };

        return refuse_bytes(p, reply, r, sizeof(r), why);
}

/* --- pieces -------------------------------------------------------------------- */

/* "c<N>" as the proxy user name names the command. */
static unsigned parse_command_user(const char *user, size_t n) {
        unsigned v = 0;

        if (n < 2 || n > 10 || user[0] != 'c')
                return 0;
        for (size_t i = 1; i < n; i++) {
                if (user[i] < '0' || user[i] > '9')
                        return 0;
                v = v * 10 + (unsigned) (user[i] - '0');
        }
        return v;
}

static unsigned parse_proxy_authorization(const char *v, size_t n) {
        Buf b = {};
        const char *colon;
        unsigned command = 0;

        if (n < 6 || strncasecmp(v, "Basic ", 6) != 0)
                return 0;
        if (base64_decode(v + 6, n - 6, &b) >= 0 && b.data && (colon = memchr(b.data, ':', b.len)))
                command = parse_command_user(b.data, (size_t) (colon - b.data));
        buf_done(&b);
        return command;
}

/* host[:port] or [v6][:port], all n bytes of it; no user info. */
static int parse_authority(const char *a, size_t n, uint16_t default_port, NetHost *ret_host, uint16_t *ret_port) {
        const char *port = NULL, *h = a;
        size_t hl = n;
        unsigned long v = 0;
        int r;

        if (n > 0 && a[0] == '[') {
                const char *close = memchr(a, ']', n);

                if (!close)
                        return -EINVAL;
                h = a + 1;
                hl = (size_t) (close - h);
                if (!memchr(h, ':', hl))
                        return -EINVAL; /* brackets are for IPv6 only */
                if (close + 1 < a + n) {
                        if (close[1] != ':')
                                return -EINVAL;
                        port = close + 2;
                }
        } else {
                const char *colon = memchr(a, ':', n);

                if (colon) {
                        hl = (size_t) (colon - a);
                        port = colon + 1;
                }
        }
        r = net_host_parse(h, hl, ret_host);
        if (r < 0)
                return r;
        if (h == a && ret_host->family == AF_INET6)
                return -EINVAL; /* unreachable (a ':' ends the host), but say it */

        if (port) {
                size_t pl = (size_t) (a + n - port);

                if (pl == 0 || pl > 5)
                        return -EINVAL;
                for (size_t i = 0; i < pl; i++) {
                        if (port[i] < '0' || port[i] > '9')
                                return -EINVAL;
                        v = v * 10 + (unsigned long) (port[i] - '0');
                }
        } else
                v = default_port;
        if (v == 0 || v > 65535)
                return -EINVAL;
        *ret_port = (uint16_t) v;
        return 0;
}

/* The authority as a Host header says it: brackets around IPv6, no port 80. */
static int format_authority(const ProxyRequest *req, Buf *out) {
        bool v6 = req->host.family == AF_INET6;

        if (buf_printf(out, "%s%s%s", v6 ? "[" : "", req->host.text, v6 ? "]" : "") < 0 ||
            (req->port != 80 && buf_printf(out, ":%u", req->port) < 0))
                return -ENOMEM;
        return 0;
}

/* --- HTTP ---------------------------------------------------------------------- */

static bool is_tchar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_ctl(char c) {
        return (unsigned char) c < 0x20 || c == 0x7f;
}

static bool header_is(const char *name, size_t n, const char *what) {
        return strlen(what) == n && strncasecmp(name, what, n) == 0;
}

typedef struct RequestLine {
        const char *method, *target, *version;
        size_t method_len, target_len;
} RequestLine;

static const char *const not_http = "not an HTTP/1 request";

/* The request line (without its CRLF). Returns 0, or refuses. */
static int http_request_line(ProxyParser *p, const char *l, size_t n, Buf *reply, RequestLine *ret) {
        const char *sp1, *sp2;

        for (size_t i = 0; i < n; i++)
                if (is_ctl(l[i]))
                        return refuse_http(p, reply, 400, not_http);
        sp1 = memchr(l, ' ', n);
        sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t) (l + n - sp1 - 1)) : NULL;
        if (!sp1 || sp1 == l || !sp2 || sp2 == sp1 + 1)
                return refuse_http(p, reply, 400, not_http);
        for (const char *c = l; c < sp1; c++)
                if (!is_tchar(*c))
                        return refuse_http(p, reply, 400, not_http);

        *ret = (RequestLine) {
                .method = l,
                .method_len = (size_t) (sp1 - l),
                .target = sp1 + 1,
                .target_len = (size_t) (sp2 - sp1 - 1),
                .version = sp2 + 1,
        };
        /* "HTTP/1.1", exactly */
        if ((size_t) (l + n - ret->version) != 8 || strncmp(ret->version, "HTTP/", 5) != 0 ||
            ret->version[6] != '.' || ret->version[5] < '0' || ret->version[5] > '9' || ret->version[7] < '0' ||
            ret->version[7] > '9')
                return refuse_http(p, reply, 400, not_http);
        if (ret->version[5] != '1' || (ret->version[7] != '0' && ret->version[7] != '1'))
                return refuse_http(p, reply, 505, "only HTTP/1.0 and HTTP/1.1 are spoken here");
        for (size_t i = 0; i < ret->target_len; i++)
                if ((unsigned char) ret->target[i] > 0x7e)
                        return refuse_http(p, reply, 400, "the request target is not ASCII");
        return 0;
}

/* A forward request's absolute-form target: http://authority[/path][?query]. */
static int http_target(ProxyParser *p, const RequestLine *rl, Buf *reply, ProxyRequest *req, const char **ret_path,
                       size_t *ret_path_len) {
        const char *t = rl->target, *end = rl->target + rl->target_len, *colon, *a, *ae;
        int r;

        if (t[0] == '/' || (rl->target_len == 1 && t[0] == '*'))
                return refuse_http(p, reply, 400, "send an absolute http:// URL (this is a proxy)");
        colon = memchr(t, ':', rl->target_len);
        if (!colon || colon == t)
                return refuse_http(p, reply, 400, "the request target is no URL");
        if ((size_t) (colon - t) == 5 && strncasecmp(t, "https", 5) == 0)
                return refuse_http(p, reply, 400, "use CONNECT for https");
        if ((size_t) (colon - t) != 4 || strncasecmp(t, "http", 4) != 0)
                return refuse_http(p, reply, 400, "only http:// URLs are forwarded");
        if (end - colon < 3 || colon[1] != '/' || colon[2] != '/')
                return refuse_http(p, reply, 400, "the request target is no URL");
        /* never sent by a client, and read differently by different servers */
        if (memchr(t, '#', rl->target_len))
                return refuse_http(p, reply, 400, "a URL with a fragment");

        a = colon + 3;
        for (ae = a; ae < end && *ae != '/' && *ae != '?'; ae++)
                ;
        /* http://allowed@denied/: which one is meant is a matter of opinion */
        if (memchr(a, '@', (size_t) (ae - a)))
                return refuse_http(p, reply, 400, "a URL with user info");
        r = parse_authority(a, (size_t) (ae - a), 80, &req->host, &req->port);
        if (r < 0)
                return refuse_http(p, reply, 400, r == -ENAMETOOLONG ? "the host name is too long" : "invalid host in the URL");
        *ret_path = ae;
        *ret_path_len = (size_t) (end - ae);
        return 0;
}

static int http_head(ProxyParser *p, const char *d, size_t head_len, Buf *reply, ProxyRequest *req) {
        const char *end = d + head_len - 2, *eol, *path = NULL, *line;
        size_t path_len = 0;
        unsigned n_host = 0, n_length = 0, n_te = 0;
        RequestLine rl;
        int r;

        *req = (ProxyRequest) { .kind = PROXY_CONNECT };
        eol = memmem(d, head_len, "\r\n", 2);
        r = http_request_line(p, d, (size_t) (eol - d), reply, &rl);
        if (r != 0)
                return r;

        if (rl.method_len == 7 && memcmp(rl.method, "CONNECT", 7) == 0) {
                if (memchr(rl.target, '@', rl.target_len) || memchr(rl.target, '/', rl.target_len))
                        return refuse_http(p, reply, 400, "CONNECT needs host:port");
                r = parse_authority(rl.target, rl.target_len, 0, &req->host, &req->port);
                if (r < 0)
                        return refuse_http(p, reply, 400,
                                           r == -ENAMETOOLONG ? "the host name is too long" : "CONNECT needs host:port");
        } else {
                req->kind = PROXY_HTTP;
                r = http_target(p, &rl, reply, req, &path, &path_len);
                if (r != 0)
                        return r;
                /* origin form, one request per connection */
                if (buf_printf(&req->upstream, "%.*s %s%.*s %.8s\r\n", (int) rl.method_len, rl.method,
                               path_len == 0 || path[0] == '?' ? "/" : "", (int) path_len, path, rl.version) < 0)
                        return -ENOMEM;
        }

        for (line = eol + 2; line < end; line = eol + 2) {
                const char *colon, *v, *ve;
                size_t n;

                eol = memmem(line, (size_t) (end + 2 - line), "\r\n", 2);
                n = (size_t) (eol - line);
                if (line[0] == ' ' || line[0] == '\t')
                        return refuse_http(p, reply, 400, "obsolete line folding in the headers");
                colon = memchr(line, ':', n);
                if (!colon || colon == line)
                        return refuse_http(p, reply, 400, "a header without a name");
                for (const char *c = line; c < colon; c++)
                        if (!is_tchar(*c))
                                return refuse_http(p, reply, 400, "an invalid header name");
                for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
                        ;
                for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
                        ;
                for (const char *c = v; c < ve; c++)
                        if (is_ctl(*c) && *c != '\t')
                                return refuse_http(p, reply, 400, "an invalid header value");

                if (header_is(line, (size_t) (colon - line), "Host")) {
                        NetHost h;
                        uint16_t port;

                        /* The server sees this Host: it must name the host that was checked. */
                        if (++n_host > 1)
                                return refuse_http(p, reply, 400, "more than one Host header");
                        if (parse_authority(v, (size_t) (ve - v), req->kind == PROXY_HTTP ? 80 : req->port, &h, &port) < 0 ||
                            memchr(v, '@', (size_t) (ve - v)))
                                return refuse_http(p, reply, 400, "an invalid Host header");
                        if (!streq(h.text, req->host.text) || port != req->port)
                                return refuse_http(p, reply, 400, "the Host header names another host than the request");
                } else if (header_is(line, (size_t) (colon - line), "Proxy-Authorization")) {
                        if (p->command == 0)
                                p->command = parse_proxy_authorization(v, (size_t) (ve - v));
                        continue;
                } else if (header_is(line, (size_t) (colon - line), "Content-Length"))
                        n_length++;
                else if (header_is(line, (size_t) (colon - line), "Transfer-Encoding"))
                        n_te++;
                else if (header_is(line, (size_t) (colon - line), "Proxy-Connection") ||
                         header_is(line, (size_t) (colon - line), "Connection") ||
                         header_is(line, (size_t) (colon - line), "Keep-Alive"))
                        continue; /* hop by hop */

                if (req->kind == PROXY_HTTP && (buf_append(&req->upstream, line, n) < 0 || buf_puts(&req->upstream, "\r\n") < 0))
                        return -ENOMEM;
        }
        /* The body is relayed as it comes: its framing must be unambiguous. */
        if (req->kind == PROXY_HTTP && (n_length > 1 || (n_length > 0 && n_te > 0)))
                return refuse_http(p, reply, 400, "ambiguous message framing (Content-Length, Transfer-Encoding)");

        if (req->kind == PROXY_HTTP) {
                if (n_host == 0 &&
                    (buf_puts(&req->upstream, "Host: ") < 0 || format_authority(req, &req->upstream) < 0 ||
                     buf_puts(&req->upstream, "\r\n") < 0))
                        return -ENOMEM;
                if (buf_puts(&req->upstream, "Connection: close\r\n\r\n") < 0)
                        return -ENOMEM;
        }
        req->command = p->command;
        p->state = STATE_DONE;
        return PROXY_STEP_REQUEST;
}

static int http_parse(ProxyParser *p, const char *d, size_t n, size_t *ret_consumed, Buf *reply, ProxyRequest *ret) {
        size_t limit = MIN(n, (size_t) PROXY_HEAD_MAX), line_len;
        const char *eol, *end;
        RequestLine rl;
        int r;

        /* The request line as soon as it is there: who speaks something else hears so at once. */
        eol = memmem(d, limit, "\r\n", 2);
        line_len = eol ? (size_t) (eol - d) : limit;
        if (!eol) {
                if (!is_tchar(d[0]))
                        return refuse_http(p, reply, 400, not_http);
                for (size_t i = 0; i < line_len; i++)
                        if (is_ctl(d[i]) && !(d[i] == '\r' && i + 1 == line_len))
                                return refuse_http(p, reply, 400, not_http);
        } else {
                r = http_request_line(p, d, line_len, reply, &rl);
                if (r != 0)
                        return r;
        }

        end = memmem(d, limit, "\r\n\r\n", 4);
        if (!end) {
                if (n >= PROXY_HEAD_MAX)
                        return refuse_http(p, reply, 431, "the request head is too large");
                return PROXY_STEP_MORE;
        }
        r = http_head(p, d, (size_t) (end + 4 - d), reply, ret);
        if (r == PROXY_STEP_REQUEST)
                *ret_consumed = (size_t) (end + 4 - d);
        else
                proxy_request_done(ret);
        return r;
}

/* --- SOCKS5 -------------------------------------------------------------------- */

static int socks_greeting(ProxyParser *p, const uint8_t *b, size_t n, size_t *ret_consumed, Buf *reply) {
        bool none = false, userpass = false;
        size_t need;

        /* 5, nmethods, methods */
        if (n < 2)
                return PROXY_STEP_MORE;
        need = 2 + (size_t) b[1];
        if (n < need)
                return PROXY_STEP_MORE;
        for (size_t i = 2; i < need; i++) {
                none = none || b[i] == 0;
                userpass = userpass || b[i] == 2;
        }
        /* With a user name the command can say who it is. */
        if (!userpass && !none)
                return refuse_bytes(p, reply, (const uint8_t[]) { 5, 0xff }, 2, "no SOCKS5 method it knows");
        if (buf_append(reply, (const uint8_t[]) { 5, userpass ? 2 : 0 }, 2) < 0)
                return -ENOMEM;
        p->state = userpass ? STATE_SOCKS_AUTH : STATE_SOCKS_REQUEST;
        *ret_consumed = need;
        return PROXY_STEP_REPLY;
}

static int socks_auth(ProxyParser *p, const uint8_t *b, size_t n, size_t *ret_consumed, Buf *reply) {
        size_t ulen, need;

        /* RFC 1929: 1, ulen, user, plen, password. Any password will do: the name only tells. */
        if (n < 1)
                return PROXY_STEP_MORE;
        if (b[0] != 1)
                return refuse_bytes(p, reply, (const uint8_t[]) { 1, 1 }, 2, "not a SOCKS5 user name and password");
        if (n < 2)
                return PROXY_STEP_MORE;
        ulen = b[1];
        if (n < 2 + ulen + 1)
                return PROXY_STEP_MORE;
        need = 2 + ulen + 1 + (size_t) b[2 + ulen];
        if (n < need)
                return PROXY_STEP_MORE;
        p->command = parse_command_user((const char *) b + 2, ulen);
        if (buf_append(reply, (const uint8_t[]) { 1, 0 }, 2) < 0)
                return -ENOMEM;
        p->state = STATE_SOCKS_REQUEST;
        *ret_consumed = need;
        return PROXY_STEP_REPLY;
}

static int socks_request(ProxyParser *p, const uint8_t *b, size_t n, size_t *ret_consumed, Buf *reply,
                         ProxyRequest *ret) {
        size_t alen, need;
        int r;

        /* 5, cmd, 0, atyp, address, port */
        if (n < 1)
                return PROXY_STEP_MORE;
        if (b[0] != 5)
                return refuse_socks(p, reply, SOCKS_GENERAL_FAILURE, "not a SOCKS5 request");
        if (n < 2)
                return PROXY_STEP_MORE;
        if (b[1] != 1)
                return refuse_socks(p, reply, SOCKS_COMMAND_NOT_SUPPORTED, "a SOCKS5 command other than CONNECT");
        if (n < 3)
                return PROXY_STEP_MORE;
        if (b[2] != 0)
                return refuse_socks(p, reply, SOCKS_GENERAL_FAILURE, "a SOCKS5 request with a reserved byte set");
        if (n < 4)
                return PROXY_STEP_MORE;
        switch (b[3]) {
        case 1:
                alen = 4;
                break;
        case 4:
                alen = 16;
                break;
        case 3:
                if (n < 5)
                        return PROXY_STEP_MORE;
                if (b[4] == 0)
                        return refuse_socks(p, reply, SOCKS_GENERAL_FAILURE, "an empty SOCKS5 domain name");
                alen = 1 + (size_t) b[4];
                break;
        default:
                return refuse_socks(p, reply, SOCKS_ADDRESS_TYPE_NOT_SUPPORTED, "an unknown SOCKS5 address type");
        }
        need = 4 + alen + 2;
        if (n < need)
                return PROXY_STEP_MORE;

        *ret = (ProxyRequest) { .kind = PROXY_SOCKS5, .command = p->command };
        if (b[3] == 3)
                /* up to 255 bytes, from the packet itself: net_host_parse() copies at most 253 */
                r = net_host_parse((const char *) b + 5, b[4], &ret->host);
        else {
                uint8_t a[16] = {};

                memcpy(a, b + 4, alen);
                r = net_host_from_address(alen == 4 ? AF_INET : AF_INET6, a, &ret->host);
        }
        if (r < 0)
                return refuse_socks(p, reply, SOCKS_GENERAL_FAILURE,
                                    r == -ENAMETOOLONG ? "the host name is too long" : "an invalid SOCKS5 host");
        ret->port = (uint16_t) ((b[need - 2] << 8) | b[need - 1]);
        if (ret->port == 0)
                return refuse_socks(p, reply, SOCKS_GENERAL_FAILURE, "port 0");
        p->state = STATE_DONE;
        *ret_consumed = need;
        return PROXY_STEP_REQUEST;
}

/* --- the parser ----------------------------------------------------------------- */

int proxy_parse(ProxyParser *p, const void *data, size_t size, size_t *ret_consumed, Buf *reply, ProxyRequest *ret) {
        const uint8_t *b = data;

        assert(p);
        assert(data || size == 0);
        assert(ret_consumed);
        assert(reply);
        assert(ret);

        *ret_consumed = 0;
        if (size == 0)
                return p->state == STATE_DONE ? -EINVAL : PROXY_STEP_MORE;

        switch (p->state) {
        case STATE_START:
                if (b[0] == 5) {
                        p->kind = PROXY_SOCKS5;
                        p->state = STATE_SOCKS_GREETING;
                        return socks_greeting(p, b, size, ret_consumed, reply);
                }
                if (b[0] == 4) /* SOCKS4: request rejected or failed */
                        return refuse_bytes(p, reply, (const uint8_t[]) { 0, 91, 0, 0, 0, 0, 0, 0 }, 8,
                                            "SOCKS4 is not spoken here");
                p->kind = PROXY_HTTP;
                p->state = STATE_HTTP;
                return http_parse(p, data, size, ret_consumed, reply, ret);
        case STATE_HTTP:
                return http_parse(p, data, size, ret_consumed, reply, ret);
        case STATE_SOCKS_GREETING:
                return socks_greeting(p, b, size, ret_consumed, reply);
        case STATE_SOCKS_AUTH:
                return socks_auth(p, b, size, ret_consumed, reply);
        case STATE_SOCKS_REQUEST:
                return socks_request(p, b, size, ret_consumed, reply, ret);
        default:
                return -EINVAL;
        }
}

/* --- answers ------------------------------------------------------------------------- */

int proxy_reply(const ProxyRequest *req, ProxyOutcome o, const char *why, Buf *out) {
        static const struct {
                unsigned status;
                const char *phrase;
                uint8_t socks;
        } table[_PROXY_OUTCOME_MAX] = {
                [PROXY_OUTCOME_CONNECTED] = { 200, "Connection established", SOCKS_SUCCEEDED },
                [PROXY_OUTCOME_DENIED] = { 403, "Forbidden", SOCKS_NOT_ALLOWED },
                [PROXY_OUTCOME_UNRESOLVED] = { 502, "Bad Gateway", SOCKS_HOST_UNREACHABLE },
                [PROXY_OUTCOME_UNREACHABLE] = { 502, "Bad Gateway", SOCKS_CONNECTION_REFUSED },
                [PROXY_OUTCOME_TIMEOUT] = { 504, "Gateway Timeout", SOCKS_HOST_UNREACHABLE },
                [PROXY_OUTCOME_FAILED] = { 502, "Bad Gateway", SOCKS_GENERAL_FAILURE },
                [PROXY_OUTCOME_LIMITED] = { 429, "Too Many Requests", SOCKS_GENERAL_FAILURE },
                [PROXY_OUTCOME_BUSY] = { 503, "Service Unavailable", SOCKS_GENERAL_FAILURE },
        };

        assert(req);
        assert(out);
        if (o < 0 || o >= _PROXY_OUTCOME_MAX)
                return -EINVAL;

        if (req->kind == PROXY_SOCKS5) {
                const uint8_t r[10] = { 5, table[o].socks, 0, 1 };

                return buf_append(out, r, sizeof(r));
        }
        if (o == PROXY_OUTCOME_CONNECTED) {
                if (req->kind == PROXY_HTTP)
                        return 0; /* the server answers */
                return buf_puts(out, "HTTP/1.1 200 Connection established\r\n\r\n");
        }
        if (o == PROXY_OUTCOME_DENIED)
                return http_answer(out, table[o].status, table[o].phrase, why,
                                   "sandboxd: %s:%u is not allowed by the network policy (%s).", req->host.text,
                                   req->port, why);
        return http_answer(out, table[o].status, table[o].phrase, NULL, "sandboxd: %s:%u: %s.", req->host.text, req->port,
                           why ?: "failed");
}
