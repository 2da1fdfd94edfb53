/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <sys/socket.h>

#include "proxy-proto.h"
#include "tests.h"

/* What a client gets for some bytes: the steps, the replies, the request. */
typedef struct Run {
        int step;           /* the last step: REQUEST or REFUSED, or MORE when the bytes ran out */
        Buf reply;
        ProxyRequest req;
        size_t consumed;    /* in all */
        const char *refusal;
} Run;

static void run_done(Run *r) {
        buf_done(&r->reply);
        proxy_request_done(&r->req);
}

/* Feeds the bytes in pieces of `chunk` (0: all at once), as the relay does: the unconsumed
 * rest again each time. */
static Run run_chunked(const void *data, size_t size, size_t chunk) {
        ProxyParser p = PROXY_PARSER_INIT;
        Run r = { .step = PROXY_STEP_MORE };
        size_t have = 0;

        while (r.step == PROXY_STEP_MORE && have < size) {
                have = chunk == 0 ? size : MIN(size, have + chunk);
                for (;;) {
                        size_t consumed = 0;

                        r.step = proxy_parse(&p, (const uint8_t *) data + r.consumed, have - r.consumed, &consumed, &r.reply,
                                             &r.req);
                        ASSERT(r.step >= 0);
                        ASSERT(consumed <= have - r.consumed);
                        r.consumed += consumed;
                        if (r.step != PROXY_STEP_REPLY)
                                break;
                }
        }
        r.refusal = p.refusal;
        return r;
}

static Run run(const char *s) {
        Run whole = run_chunked(s, strlen(s), 0), bytewise = run_chunked(s, strlen(s), 1);

        /* how the bytes came changes nothing */
        ASSERT(whole.step == bytewise.step);
        ASSERT(whole.consumed == bytewise.consumed);
        ASSERT(whole.reply.len == bytewise.reply.len &&
               memcmp(whole.reply.data ?: "", bytewise.reply.data ?: "", whole.reply.len) == 0);
        if (whole.step == PROXY_STEP_REQUEST) {
                ASSERT_STREQ(whole.req.host.text, bytewise.req.host.text);
                ASSERT(whole.req.port == bytewise.req.port);
        }
        run_done(&bytewise);
        return whole;
}

static void expect_refused(const char *s, const char *status_line) {
        Run r = run(s);

        if (r.step != PROXY_STEP_REFUSED || !r.reply.data || !startswith(r.reply.data, status_line))
                fprintf(stderr, "%s\n-> %d %s\n", s, r.step, r.reply.data ?: "");
        ASSERT(r.step == PROXY_STEP_REFUSED);
        ASSERT(r.reply.data && startswith(r.reply.data, status_line));
        ASSERT(r.refusal);
        run_done(&r);
}

static void test_http_forward(void) {
        static const char *const get = "GET http://Example.COM./a/b?c=d HTTP/1.1\r\nHost: example.com\r\n"
                                       "Proxy-Authorization: Basic YzEyOnNhbmRib3hk\r\nProxy-Connection: keep-alive\r\n"
                                       "Accept: */*\r\n\r\nbody";
        Run r;

        r = run(get);
        ASSERT(r.step == PROXY_STEP_REQUEST);
        ASSERT(r.req.kind == PROXY_HTTP);
        ASSERT_STREQ(r.req.host.text, "example.com");
        ASSERT(r.req.host.family == AF_UNSPEC);
        ASSERT(r.req.port == 80);
        ASSERT(r.req.command == 12); /* c12:sandboxd */
        ASSERT(r.consumed == strlen(get) - 4);
        ASSERT_STREQ(r.req.upstream.data,
                     "GET /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nConnection: close\r\n\r\n");
        ASSERT(r.reply.len == 0);
        run_done(&r);

        /* the rest (a body) stays for the server */
        {
                const char *s = "POST http://a.test:8080 HTTP/1.0\r\nContent-Length: 4\r\n\r\nbody";
                r = run(s);
                ASSERT(r.step == PROXY_STEP_REQUEST && r.consumed == strlen(s) - 4);
                ASSERT(r.req.port == 8080);
                /* no Host from HTTP/1.0: one is added, the target's */
                ASSERT_STREQ(r.req.upstream.data,
                             "POST / HTTP/1.0\r\nContent-Length: 4\r\nHost: a.test:8080\r\nConnection: close\r\n\r\n");
                run_done(&r);
        }

        r = run("GET http://[::1]:81?x HTTP/1.1\r\n\r\n");
        ASSERT(r.step == PROXY_STEP_REQUEST && r.req.host.family == AF_INET6 && r.req.port == 81);
        ASSERT_STREQ(r.req.upstream.data, "GET /?x HTTP/1.1\r\nHost: [::1]:81\r\nConnection: close\r\n\r\n");
        run_done(&r);

        /* every notation of an address is that address, in the request and in Host */
        static const char *const notations[] = { "0x7f000001", "0x7f.1", "2130706433", "0177.0.0.1", "127.1",
                                                  "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]", "127.0.0.1." };
        for (size_t i = 0; i < ELEMENTSOF(notations); i++) {
                char s[256];

                snprintf(s, sizeof(s), "GET http://%s:8000/ HTTP/1.1\r\nHost: %s:8000\r\n\r\n", notations[i], notations[i]);
                r = run(s);
                ASSERT(r.step == PROXY_STEP_REQUEST);
                ASSERT(r.req.host.family == AF_INET);
                ASSERT_STREQ(r.req.host.text, "127.0.0.1");
                run_done(&r);
        }
        /* ... and the Host header may say it another way: it names the same host */
        r = run("GET http://127.0.0.1/ HTTP/1.1\r\nHost: 0x7f.1:80\r\n\r\n");
        ASSERT(r.step == PROXY_STEP_REQUEST);
        run_done(&r);
        r = run("GET http://EXAMPLE.com:80/ HTTP/1.1\r\nHOST: example.COM.\r\n\r\n");
        ASSERT(r.step == PROXY_STEP_REQUEST);
        run_done(&r);

        /* names that cannot be an address are no names either */
        expect_refused("GET http://1.2.3.256/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://example.123/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://[fe80::1%25eth0]/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://%31%32%37.0.0.1/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
}

static void test_http_refused(void) {
        /* Host names another authority than the target */
        expect_refused("GET http://allowed.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test:81\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://allowed.test:81/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nHost: allowed.test\r\n\r\n",
                       "HTTP/1.1 400 ");
        expect_refused("GET http://allowed.test/ HTTP/1.1\r\nHost:\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://allowed.test/ HTTP/1.1\r\nHost: a@allowed.test\r\n\r\n", "HTTP/1.1 400 ");
        /* user info, fragments, other schemes, other forms */
        expect_refused("GET http://allowed.test@denied.test/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://a@b@c/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://allowed.test/#x HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://allowed.test#@denied.test/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET https://allowed.test/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET ftp://allowed.test/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET file:///etc/passwd HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET /path HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("OPTIONS * HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http:/allowed.test/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http:// HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://allowed.test:/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://allowed.test:0/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://allowed.test:65536/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://allowed.test\\@denied.test/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        /* the request line and the head */
        expect_refused("GET http://a.test/ HTTP/2.0\r\n\r\n", "HTTP/1.1 505 ");
        expect_refused("GET http://a.test/ HTTP/1.1x\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET  http://a.test/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://a.test/ HTTP/1.1\n\n", "HTTP/1.1 400 ");
        expect_refused("G\x01T http://a.test/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("\x16\x03\x01\x02\x00", "HTTP/1.1 400 "); /* TLS: refused at once, not on a timeout */
        expect_refused("GET http://a.test/\xc3\xa9 HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://a.test/ HTTP/1.1\r\n Folded: x\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://a.test/ HTTP/1.1\r\nNo colon\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://a.test/ HTTP/1.1\r\nBad name: x\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("GET http://a.test/ HTTP/1.1\r\nX: a\rb\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                       "HTTP/1.1 400 ");
        expect_refused("POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "HTTP/1.1 400 ");

        /* too large a head: 431 */
        {
                char *big = malloc(PROXY_HEAD_MAX + 64);
                Run r;

                ASSERT(big);
                memset(big, 'a', PROXY_HEAD_MAX + 63);
                memcpy(big, "GET http://a.test/ HTTP/1.1\r\nX: ", 32);
                big[PROXY_HEAD_MAX + 63] = 0;
                r = run_chunked(big, strlen(big), 0);
                ASSERT(r.step == PROXY_STEP_REFUSED && startswith(r.reply.data, "HTTP/1.1 431 "));
                run_done(&r);
                /* exactly PROXY_HEAD_MAX is fine */
                memcpy(big + PROXY_HEAD_MAX - 4, "\r\n\r\n", 4);
                r = run_chunked(big, PROXY_HEAD_MAX, 0);
                ASSERT(r.step == PROXY_STEP_REQUEST && r.consumed == PROXY_HEAD_MAX);
                run_done(&r);
                free(big);
        }
}

static void test_connect(void) {
        Run r;

        r = run("CONNECT Example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy-Authorization: Basic YzM6eA==\r\n\r\n"
                "\x16\x03\x01");
        ASSERT(r.step == PROXY_STEP_REQUEST && r.req.kind == PROXY_CONNECT);
        ASSERT_STREQ(r.req.host.text, "example.com");
        ASSERT(r.req.port == 443 && r.req.command == 3);
        ASSERT(r.req.upstream.len == 0);
        run_done(&r);

        r = run("CONNECT [::ffff:7f00:1]:22 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        ASSERT(r.step == PROXY_STEP_REQUEST && r.req.host.family == AF_INET);
        ASSERT_STREQ(r.req.host.text, "127.0.0.1");
        run_done(&r);

        r = run("CONNECT 2130706433:22 HTTP/1.1\r\n\r\n");
        ASSERT(r.step == PROXY_STEP_REQUEST);
        ASSERT_STREQ(r.req.host.text, "127.0.0.1");
        run_done(&r);

        expect_refused("CONNECT example.com HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("CONNECT example.com:0 HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("CONNECT a@example.com:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("CONNECT http://example.com:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("CONNECT example.com:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:80\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("CONNECT [fe80::1%eth0]:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
        expect_refused("CONNECT ::1:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 400 ");
}

static Run socks(const void *data, size_t size) {
        Run whole = run_chunked(data, size, 0), bytewise = run_chunked(data, size, 1);

        ASSERT(whole.step == bytewise.step && whole.consumed == bytewise.consumed);
        ASSERT(whole.reply.len == bytewise.reply.len && memcmp(whole.reply.data ?: "", bytewise.reply.data ?: "", whole.reply.len) == 0);
        run_done(&bytewise);
        return whole;
}

static void test_socks5(void) {
        /* no authentication; CONNECT to a name */
        static const uint8_t by_name[] = { 5, 1, 0, 5, 1, 0, 3, 11, 'E', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm', 0, 80, 'x' };
        /* user name c7, then IPv4 and IPv6 addresses */
        static const uint8_t by_v4[] = { 5, 2, 0, 2, 1, 2, 'c', '7', 2, 'p', 'w', 5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90 };
        static const uint8_t by_v6[] = { 5, 1, 0, 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1, 0, 22 };
        static const uint8_t compat[] = { 5, 1, 0, 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 127, 0, 0, 1, 0, 22 };
        static const uint8_t hex_name[] = { 5, 1, 0, 5, 1, 0, 3, 6, '0', 'x', '7', 'f', '.', '1', 0, 80 };
        Run r;

        r = socks(by_name, sizeof(by_name));
        ASSERT(r.step == PROXY_STEP_REQUEST && r.req.kind == PROXY_SOCKS5);
        ASSERT_STREQ(r.req.host.text, "example.com");
        ASSERT(r.req.port == 80 && r.consumed == sizeof(by_name) - 1);
        ASSERT(r.reply.len == 2 && memcmp(r.reply.data, "\x05\x00", 2) == 0);
        run_done(&r);

        r = socks(by_v4, sizeof(by_v4));
        ASSERT(r.step == PROXY_STEP_REQUEST && r.req.host.family == AF_INET && r.req.port == 8080 && r.req.command == 7);
        ASSERT(r.reply.len == 4 && memcmp(r.reply.data, "\x05\x02\x01\x00", 4) == 0);
        run_done(&r);

        r = socks(by_v6, sizeof(by_v6));
        ASSERT(r.step == PROXY_STEP_REQUEST && r.req.host.family == AF_INET);
        ASSERT_STREQ(r.req.host.text, "127.0.0.1");
        run_done(&r);
        r = socks(compat, sizeof(compat));
        ASSERT(r.step == PROXY_STEP_REQUEST);
        ASSERT_STREQ(r.req.host.text, "127.0.0.1");
        run_done(&r);
        r = socks(hex_name, sizeof(hex_name));
        ASSERT(r.step == PROXY_STEP_REQUEST);
        ASSERT_STREQ(r.req.host.text, "127.0.0.1");
        run_done(&r);

        /* names of 253 bytes (254 with a dot) pass; 254, 255 and invalid ones get a clean refusal */
        for (unsigned len = 250; len <= 255; len++)
                for (int dot = 0; dot <= 1; dot++) {
                        uint8_t req[3 + 5 + 255 + 2] = { 5, 1, 0, 5, 1, 0, 3, (uint8_t) len };

                        memset(req + 8, 'a', len);
                        for (unsigned i = 63; i < len; i += 64)
                                req[8 + i] = '.';
                        if (dot)
                                req[8 + len - 1] = '.';
                        req[8 + len + 1] = 80;
                        r = socks(req, 8 + len + 2);
                        if (len - dot <= 253 && req[8 + len - 1 - dot] != '.') {
                                ASSERT(r.step == PROXY_STEP_REQUEST);
                                ASSERT(strlen(r.req.host.text) == len - dot);
                        } else {
                                ASSERT(r.step == PROXY_STEP_REFUSED);
                                ASSERT(r.reply.len == 2 + 10 && r.reply.data[2] == 5 && r.reply.data[3] == 1);
                        }
                        run_done(&r);
                }

        {
                static const uint8_t no_method[] = { 5, 1, 1 };
                static const uint8_t zero_methods[] = { 5, 0 };
                static const uint8_t bind[] = { 5, 1, 0, 5, 2, 0, 1, 1, 2, 3, 4, 0, 80 };
                static const uint8_t bad_atyp[] = { 5, 1, 0, 5, 1, 0, 9 };
                static const uint8_t bad_version[] = { 5, 1, 0, 4, 1, 0, 1, 1, 2, 3, 4, 0, 80 };
                static const uint8_t empty_name[] = { 5, 1, 0, 5, 1, 0, 3, 0, 0, 80 };
                static const uint8_t nul_name[] = { 5, 1, 0, 5, 1, 0, 3, 3, 'a', 0, 'b', 0, 80 };
                static const uint8_t port0[] = { 5, 1, 0, 5, 1, 0, 1, 1, 2, 3, 4, 0, 0 };
                static const uint8_t zone[] = { 5, 1, 0, 5, 1, 0, 3, 12, 'f', 'e', '8', '0', ':', ':', '1', '%', 'e', 't', 'h', '0', 0, 80 };
                static const uint8_t bad_auth[] = { 5, 1, 2, 5, 1, 'c', 0 };
                static const uint8_t socks4[] = { 4, 1, 0, 80, 127, 0, 0, 1, 0 };
                static const struct {
                        const uint8_t *d;
                        size_t n;
                        const char *reply;
                        size_t reply_len;
                } t[] = {
                        { no_method, sizeof(no_method), "\x05\xff", 2 },
                        { zero_methods, sizeof(zero_methods), "\x05\xff", 2 },
                        { bind, sizeof(bind), "\x05\x00\x05\x07\x00\x01\0\0\0\0\0\0", 12 },
                        { bad_atyp, sizeof(bad_atyp), "\x05\x00\x05\x08\x00\x01\0\0\0\0\0\0", 12 },
                        { bad_version, sizeof(bad_version), "\x05\x00\x05\x01\x00\x01\0\0\0\0\0\0", 12 },
                        { empty_name, sizeof(empty_name), "\x05\x00\x05\x01\x00\x01\0\0\0\0\0\0", 12 },
                        { nul_name, sizeof(nul_name), "\x05\x00\x05\x01\x00\x01\0\0\0\0\0\0", 12 },
                        { port0, sizeof(port0), "\x05\x00\x05\x01\x00\x01\0\0\0\0\0\0", 12 },
                        { zone, sizeof(zone), "\x05\x00\x05\x01\x00\x01\0\0\0\0\0\0", 12 },
                        { bad_auth, sizeof(bad_auth), "\x05\x02\x01\x01", 4 },
                        { socks4, sizeof(socks4), "\x00\x5b\0\0\0\0\0\0", 8 },
                };

                for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                        r = socks(t[i].d, t[i].n);
                        if (r.step != PROXY_STEP_REFUSED || r.reply.len != t[i].reply_len)
                                fprintf(stderr, "socks case %zu: step %d, %zu reply bytes\n", i, r.step, r.reply.len);
                        ASSERT(r.step == PROXY_STEP_REFUSED);
                        ASSERT(r.reply.len == t[i].reply_len && memcmp(r.reply.data, t[i].reply, t[i].reply_len) == 0);
                        run_done(&r);
                }
        }

        /* incomplete: more bytes wanted, nothing refused yet */
        r = socks(by_name, 10);
        ASSERT(r.step == PROXY_STEP_MORE && r.consumed == 3);
        run_done(&r);
}

static void test_replies(void) {
        ProxyRequest req = { .kind = PROXY_CONNECT, .port = 443 };
        Buf b = {};

        strcpy(req.host.text, "denied.test");
        ASSERT(proxy_reply(&req, PROXY_OUTCOME_DENIED, "denied_domain", &b) == 0);
        ASSERT(startswith(b.data, "HTTP/1.1 403 Forbidden\r\n"));
        ASSERT(strstr(b.data, "\r\nX-Sandboxd-Denied: denied_domain\r\n"));
        ASSERT(strstr(b.data, "denied.test:443 is not allowed by the network policy (denied_domain)"));
        buf_done(&b);
        ASSERT(proxy_reply(&req, PROXY_OUTCOME_CONNECTED, NULL, &b) == 0);
        ASSERT_STREQ(b.data, "HTTP/1.1 200 Connection established\r\n\r\n");
        buf_done(&b);
        ASSERT(proxy_reply(&req, PROXY_OUTCOME_TIMEOUT, "timed out connecting", &b) == 0);
        ASSERT(startswith(b.data, "HTTP/1.1 504 "));
        buf_done(&b);
        req.kind = PROXY_HTTP;
        ASSERT(proxy_reply(&req, PROXY_OUTCOME_CONNECTED, NULL, &b) == 0 && b.len == 0);
        ASSERT(proxy_reply(&req, PROXY_OUTCOME_UNRESOLVED, "cannot resolve the name", &b) == 0);
        ASSERT(startswith(b.data, "HTTP/1.1 502 "));
        buf_done(&b);
        /* a session over its share, the proxy full: said apart from a failure upstream */
        ASSERT(proxy_reply(&req, PROXY_OUTCOME_LIMITED, "too many connections of this session", &b) == 0);
        ASSERT(startswith(b.data, "HTTP/1.1 429 Too Many Requests\r\n"));
        ASSERT(strstr(b.data, "too many connections of this session"));
        buf_done(&b);
        ASSERT(proxy_reply(&req, PROXY_OUTCOME_BUSY, "too many name lookups in progress", &b) == 0);
        ASSERT(startswith(b.data, "HTTP/1.1 503 Service Unavailable\r\n"));
        buf_done(&b);
        req.kind = PROXY_SOCKS5;
        ASSERT(proxy_reply(&req, PROXY_OUTCOME_LIMITED, "too many connections of this session", &b) == 0);
        ASSERT(b.len == 10 && memcmp(b.data, "\x05\x01\x00\x01\0\0\0\0\0\0", 10) == 0);
        buf_done(&b);
        ASSERT(proxy_reply(&req, PROXY_OUTCOME_DENIED, "loopback", &b) == 0);
        ASSERT(b.len == 10 && memcmp(b.data, "\x05\x02\x00\x01\0\0\0\0\0\0", 10) == 0);
        buf_done(&b);
        ASSERT(proxy_reply(&req, PROXY_OUTCOME_CONNECTED, NULL, &b) == 0);
        ASSERT(b.len == 10 && b.data[1] == 0);
        buf_done(&b);
        ASSERT(proxy_reply(&req, _PROXY_OUTCOME_MAX, NULL, &b) < 0);
}

int main(void) {
        test_http_forward();
        test_http_refused();
        test_connect();
        test_socks5();
        test_replies();
        return TESTS_DONE();
}
