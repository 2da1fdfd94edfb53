/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "host-addresses.h"
#include "manager.h"

/* The egress proxy of sessions in network mode "proxy".
 *
 * A command of such a session runs in the network namespace of its session's
 * sandboxd-<sid>-proxy.socket (JoinsNamespaceOf=), where the only thing to talk to is
 * 127.0.0.1:3128; systemd-socket-proxyd, activated by that socket, relays every
 * connection to <runtime>/proxy/<sid>/proxy.sock, where sandboxd listens. The socket
 * tells the session. Each connection speaks HTTP (a forward request with an absolute
 * URL, or CONNECT) or SOCKS5 (CONNECT); sandboxd resolves the name itself, checks the
 * name and every address against the policy, connects to an allowed address and relays
 * bytes both ways. Refusals are logged, counted, and reported in the event log of the
 * command (named by the proxy user name "c<N>" that its proxy URLs carry) or, when the
 * client sent none, of every running command of the session.
 *
 * Three parts: proxy-proto.c reads the protocols (no I/O), proxy-resolve.c (with
 * host-addresses.c) resolves names and checks addresses, and this file relays. */

typedef struct Proxy Proxy;
typedef struct ProxyListener ProxyListener;

int proxy_new(Manager *m, Proxy **ret);
Proxy *proxy_free(Proxy *p);
unsigned proxy_count_connections(Proxy *p);

/* Connections of a session beyond its share (or the total) are answered with a refusal
 * (HTTP 429 or 503, SOCKS5 general failure), this many of a session at once; more are
 * closed unanswered. */
#define PROXY_REFUSING_MAX 16U
/* --connections-max= of a session's systemd-socket-proxyd. */
unsigned proxy_relay_max_connections(const Config *c);
/* This host's own addresses (host-addresses.h), which mode host denies too. */
HostAddresses *proxy_host_addresses(Proxy *p);

/* <runtime>/proxy/<sid>: the directory systemd-socket-proxyd gets bound. */
int proxy_session_dir(Manager *m, const char *session_id, char **ret);
/* Listens on <runtime>/proxy/<sid>/proxy.sock for the connections of session s (what the
 * proxy knows of it; its strings and lists stay the session's, which outlives the listener): on the socket
 * an earlier sandboxd left in the fd store (FDNAME=proxy-<sid>), else on a new one, which
 * goes there. */
typedef struct ProxySession {
        const char *id, *user, *workspace;
        char * const *net_deny;  /* its own policy, on top of the configuration's */
        char * const *net_allow; /* NULL: none */
        /* whether it takes connections now (a closing session does not) */
        bool (*accepting)(void *userdata);
        /* a refusal: a network_denied event, a line of NDJSON, for the command that named
         * itself in its proxy URL (command: its number, 0 if none did) */
        void (*denied)(void *userdata, unsigned command, const char *event, size_t len);
        void *userdata;
} ProxySession;
int proxy_listen(Proxy *p, const ProxySession *s, ProxyListener **ret);
/* Stops listening and ends the session's connections; the socket, its directory and the
 * fd store's copy stay for the next sandboxd (the relay has that directory bound). */
ProxyListener *proxy_listener_free(ProxyListener *l);
/* The same, and the socket is gone: the session closed (or never became active). */
ProxyListener *proxy_listener_close(ProxyListener *l);
