/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the egress proxy's protocols (HTTP forward, CONNECT, SOCKS5): the input's first
 * byte seeds how the rest is cut into pieces; the answer must not depend on it. Whatever
 * the parser lets through must be a request the policy can trust: a canonical host, a
 * port, and for HTTP a head whose one Host header names that host. */

#include <assert.h>
#include <arpa/inet.h>
#include <strings.h>
#include <sys/socket.h>

#include "proxy-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Run {
        int step;
        size_t consumed;
        Buf reply;
        ProxyRequest req;
} Run;

static size_t next_chunk(uint32_t *state) {
        *state = *state * 1103515245u + 12345u;
        switch ((*state >> 16) % 4) {
        case 0:
                return 1;
        case 1:
                return 1 + (*state >> 20) % 8;
        case 2:
                return 1 + (*state >> 20) % 512;
        default:
                return SIZE_MAX;
        }
}

/* seed 0: everything at once */
static void run(const uint8_t *data, size_t size, uint8_t seed, Run *r) {
        ProxyParser p = PROXY_PARSER_INIT;
        uint32_t state = seed;
        size_t have = 0;

        *r = (Run) { .step = PROXY_STEP_MORE };
        while (r->step == PROXY_STEP_MORE && have < size) {
                size_t chunk = seed == 0 ? SIZE_MAX : next_chunk(&state);

                have = chunk >= size - have ? size : have + chunk;
                for (;;) {
                        size_t consumed = SIZE_MAX;

                        r->step = proxy_parse(&p, data + r->consumed, have - r->consumed, &consumed, &r->reply, &r->req);
                        assert(r->step >= 0); /* no -ENOMEM here */
                        assert(consumed <= have - r->consumed);
                        assert(r->step == PROXY_STEP_REPLY || r->step == PROXY_STEP_REQUEST || consumed == 0);
                        r->consumed += consumed;
                        if (r->step != PROXY_STEP_REPLY)
                                break;
                        assert(consumed > 0);
                }
        }
        if (r->step == PROXY_STEP_REFUSED)
                assert(p.refusal && r->reply.len > 0);
}

static void check_host(const NetHost *h) {
        NetHost again;

        assert(h->text[0]);
        assert(strlen(h->text) <= HOST_NAME_MAX_LEN);
        assert(net_host_parse(h->text, strlen(h->text), &again) == 0);
        assert(again.family == h->family && streq(again.text, h->text));
        assert(memcmp(again.addr, h->addr, sizeof(h->addr)) == 0);
}

/* The head for the server: one request line, headers, one Host naming the checked host. */
static void check_upstream(const ProxyRequest *req) {
        const char *d = req->upstream.data, *end, *line, *eol;
        unsigned hosts = 0;

        assert(d && req->upstream.len == strlen(d));
        end = strstr(d, "\r\n\r\n");
        assert(end && (size_t) (end + 4 - d) == req->upstream.len);
        assert(strstr(d, "\r\nConnection: close\r\n\r\n"));
        assert(memchr(d, ' ', strcspn(d, "\r\n")) && d[strcspn(d, " ") + 1] == '/');
        for (line = strstr(d, "\r\n") + 2; line < end + 2; line = eol + 2) {
                eol = strstr(line, "\r\n");
                if (strncasecmp(line, "Host:", 5) == 0) {
                        char *v = strndup(line + 5, (size_t) (eol - line - 5)), *s = v, *colon;
                        NetHost h;
                        unsigned long port = 80;

                        assert(v);
                        hosts++;
                        while (*s == ' ' || *s == '\t')
                                s++;
                        s[strcspn(s, " \t")] = 0;
                        if (*s == '[') {
                                char *close = strchr(s, ']');

                                assert(close);
                                *close = 0;
                                colon = close[1] == ':' ? close + 1 : NULL;
                                s++;
                        } else {
                                colon = strchr(s, ':');
                                if (colon)
                                        *colon = 0;
                        }
                        if (colon)
                                port = strtoul(colon + 1, NULL, 10);
                        assert(net_host_parse(s, strlen(s), &h) == 0);
                        assert(streq(h.text, req->host.text));
                        assert(port == req->port);
                        free(v);
                }
                assert(strncasecmp(line, "Proxy-Authorization:", 20) != 0);
        }
        assert(hosts == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Run whole, pieces;

        if (size < 1)
                return 0;
        run(data + 1, size - 1, 0, &whole);
        run(data + 1, size - 1, data[0] | 1, &pieces);

        /* how the bytes came changes nothing */
        assert(whole.step == pieces.step);
        assert(whole.consumed == pieces.consumed);
        assert(whole.reply.len == pieces.reply.len);
        assert(whole.reply.len == 0 || memcmp(whole.reply.data, pieces.reply.data, whole.reply.len) == 0);

        if (whole.step == PROXY_STEP_REQUEST) {
                assert(whole.req.kind == pieces.req.kind && whole.req.port == pieces.req.port);
                assert(streq(whole.req.host.text, pieces.req.host.text));
                assert(whole.req.upstream.len == pieces.req.upstream.len);
                assert(whole.req.port > 0);
                check_host(&whole.req.host);
                if (whole.req.kind == PROXY_HTTP)
                        check_upstream(&whole.req);
                else
                        assert(whole.req.upstream.len == 0);

                for (ProxyOutcome o = 0; o < _PROXY_OUTCOME_MAX; o++) {
                        Buf b = {};

                        assert(proxy_reply(&whole.req, o, "denied_domain", &b) == 0);
                        if (whole.req.kind == PROXY_SOCKS5)
                                assert(b.len == 10);
                        else if (!(o == PROXY_OUTCOME_CONNECTED && whole.req.kind == PROXY_HTTP))
                                assert(b.len > 0 && startswith(b.data, "HTTP/1.1 ") && strstr(b.data, "\r\n\r\n"));
                        buf_done(&b);
                }
        }

        buf_done(&whole.reply);
        buf_done(&pieces.reply);
        proxy_request_done(&whole.req);
        proxy_request_done(&pieces.req);
        return 0;
}
