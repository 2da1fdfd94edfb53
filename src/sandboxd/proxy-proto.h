/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "buf.h"
#include "net-policy.h"

/* What a client of the egress proxy says before its bytes are relayed, and what the proxy
 * answers: HTTP/1 forward requests (an absolute http:// URL), CONNECT, and SOCKS5 (RFC 1928
 * CONNECT, with no authentication or a user name and password, RFC 1929: the user name
 * "c<N>" names the command). Bytes in, a typed request or a precise refusal out: no I/O,
 * no globals, the host normalized (net_host_parse()) where it comes in. */

#define PROXY_HEAD_MAX (16U * 1024) /* an HTTP request line and its headers */

typedef enum ProxyKind {
        PROXY_HTTP,    /* a forward request: GET http://host/path HTTP/1.1 */
        PROXY_CONNECT, /* CONNECT host:port HTTP/1.1 */
        PROXY_SOCKS5,
        _PROXY_KIND_MAX,
        _PROXY_KIND_INVALID = -EINVAL,
} ProxyKind;

typedef enum ProxyStep {
        PROXY_STEP_MORE,    /* a message is not complete: call again when more bytes came */
        PROXY_STEP_REPLY,   /* a step of the SOCKS5 handshake: send the reply, call again */
        PROXY_STEP_REQUEST, /* the request is complete */
        PROXY_STEP_REFUSED, /* send the reply, then close: the parser's refusal says why */
} ProxyStep;

typedef struct ProxyParser {
        int state;
        ProxyKind kind;      /* _PROXY_KIND_INVALID until the first byte came */
        unsigned command;    /* "c<N>" of the proxy credentials; 0: none */
        const char *refusal; /* after PROXY_STEP_REFUSED: why, for the log */
} ProxyParser;

#define PROXY_PARSER_INIT { .kind = _PROXY_KIND_INVALID }

typedef struct ProxyRequest {
        ProxyKind kind;
        NetHost host;
        uint16_t port;
        unsigned command;
        Buf upstream; /* PROXY_HTTP: the request head for the server (origin form, Connection: close) */
} ProxyRequest;

void proxy_request_done(ProxyRequest *r);

/* data, size: every byte the client sent that no earlier call consumed. Returns a
 * ProxyStep (and how many bytes it used in *ret_consumed; the rest, say a TLS hello sent
 * early, goes to the server), or -ENOMEM. Replies and refusals are appended to reply; on
 * PROXY_STEP_REQUEST, *ret is filled (proxy_request_done() it). */
int proxy_parse(ProxyParser *p, const void *data, size_t size, size_t *ret_consumed, Buf *reply, ProxyRequest *ret);

typedef enum ProxyOutcome {
        PROXY_OUTCOME_CONNECTED,   /* CONNECT: 200; SOCKS5: succeeded; a forward request: nothing */
        PROXY_OUTCOME_DENIED,      /* the policy: 403 and X-Sandboxd-Denied; SOCKS5: not allowed by ruleset */
        PROXY_OUTCOME_UNRESOLVED,  /* 502; SOCKS5: host unreachable */
        PROXY_OUTCOME_UNREACHABLE, /* 502; SOCKS5: connection refused */
        PROXY_OUTCOME_TIMEOUT,     /* 504; SOCKS5: host unreachable */
        PROXY_OUTCOME_FAILED,      /* 502; SOCKS5: general failure */
        PROXY_OUTCOME_LIMITED,     /* the session used its share: 429; SOCKS5: general failure */
        PROXY_OUTCOME_BUSY,        /* the proxy as a whole is full: 503; SOCKS5: general failure */
        _PROXY_OUTCOME_MAX,
        _PROXY_OUTCOME_INVALID = -EINVAL,
} ProxyOutcome;

/* The answer to a request once sandboxd knows where it goes. why: the policy's reason
 * (PROXY_OUTCOME_DENIED) or a few words. */
int proxy_reply(const ProxyRequest *req, ProxyOutcome o, const char *why, Buf *out);
